// Comm init and the per-(comm type, algorithm) admission gate (enc_init_comm / enc_cc_algorithm_allowed).
import { CommType, EncAlgType, encAlgorithmName } from "../ir/enums.ts";
import { ALGORITHMS } from "./registry.ts";
import type { CommContext, Verdict } from "./stage.ts";


/** The seed's log line when RDH is requested without mesh. */
export const RDH_WITHOUT_MESH = "Detected usage of RDH while mesh is not allowed. RDH construction will be skipped because it depends on Mesh.";



const no = (reason: string): Verdict => ({ ok: false, reason });

export function allowedBit(alg: EncAlgType, commType: CommType): bigint {
  return 1n << BigInt(alg + 11 * commType);
}

/** The cc_allowed_alg_types mask that allows `algs` on both comm types. */
export function allowedMask(algs: readonly EncAlgType[]): bigint {
  return algs.reduce((m, a) => m | allowedBit(a, CommType.INTRA) | allowedBit(a, CommType.INTER), 0n);
}

/** enc_cc_algorithm_allowed: the allowed bit first, then the algorithm's own condition (its registry entry's). */
export function ccAlgorithmAllowed(c: CommContext, alg: EncAlgType): Verdict {
  if ((c.allowedBits & allowedBit(alg, c.commType)) === 0n) return no(`bit ${alg + 11 * c.commType} of cc_allowed_alg_types is clear (not allowed in this run, or not supported by the instance)`);
  const entry = ALGORITHMS[alg];
  return entry ? entry.admit(c) : no("INVALID");
}

export interface CommInit {
  readonly commType: CommType;
  /** Which family objects comm init builds: the mesh path, or ring / kangaring. */
  readonly family: "mesh" | "ring/kangaring";
  /** Verdict per enc_alg_type 0..10, after the RDH-needs-mesh rule. */
  readonly allowed: readonly { readonly alg: EncAlgType; readonly name: string; readonly verdict: Verdict }[];
  /** RDH was requested but skipped because no mesh algorithm is allowed. */
  readonly rdhSkipped: boolean;
}

/** enc_init_comm: poll every algorithm's gate; any mesh-family algorithm allowed => the mesh path. */
export function initComm(c: CommContext, warn: (msg: string) => void): CommInit {
  const verdicts = Array.from({ length: 11 }, (_, a) => ccAlgorithmAllowed(c, a as EncAlgType));
  const meshAllowed = ALGORITHMS.some((e) => e.meshFamily && verdicts[e.alg]!.ok);
  let rdhSkipped = false;
  if (verdicts[EncAlgType.INTRA_RDH]!.ok && !meshAllowed) {
    warn(RDH_WITHOUT_MESH);
    verdicts[EncAlgType.INTRA_RDH] = no("skipped: RDH depends on Mesh, and no mesh algorithm is allowed");
    rdhSkipped = true;
  }
  return {
    commType: c.commType,
    family: meshAllowed ? "mesh" : "ring/kangaring",
    allowed: verdicts.map((verdict, a) => ({ alg: a as EncAlgType, name: encAlgorithmName(a), verdict })),
    rdhSkipped,
  };
}
