// Comm init and the per-(comm type, algorithm) admission gate (enc_init_comm / enc_cc_algorithm_allowed).
import { CommType, EncAlgType, encAlgorithmName } from "../ir/enums.ts";

export const MESH_FAMILY: readonly EncAlgType[] = [EncAlgType.MESH, EncAlgType.SINGLE_STEP_MESH, EncAlgType.TWO_STEP_POD_MESH, EncAlgType.LATENCY_OPT_MESH, EncAlgType.BW_OPT_MESH];

/** The seed's log line when RDH is requested without mesh. */
export const RDH_WITHOUT_MESH = "Detected usage of RDH while mesh is not allowed. RDH construction will be skipped because it depends on Mesh.";

/** What the gates read about one communicator (one replica group on one comm type). */
export interface CommContext {
  readonly commType: CommType;
  readonly rankN: number;
  readonly nodeN: number;
  /** Ranks of the group on each node. */
  readonly localRankN: number;
  /** Physical cores per logical rank (vcore_size). */
  readonly vcoreSize: number;
  /** More than one CC stream is in use. */
  readonly multiStream: boolean;
  /** The runtime's cc_allowed_alg_types: bit (alg + 11 * comm_type). */
  readonly allowedBits: bigint;
  /** The instance runs mesh collectives at all ("nccl mesh supported"). */
  readonly meshSupported: boolean;
  readonly podEnabled: boolean;
  readonly neuronSwitch: boolean;
  /** -1 unless the op is a source/target-pair collective. */
  readonly srcTargetPairsId: number;
  /** Debug switches of the runtime (hierarchical_cc, rdh_cc_mode, the generic dbg level). */
  readonly hierarchicalCc: number;
  readonly rdhCcMode: number;
  readonly dbg: number;
}

export interface Verdict {
  readonly ok: boolean;
  /** Why not, when not; what admitted it otherwise. */
  readonly reason: string;
}

const yes = (reason: string): Verdict => ({ ok: true, reason });
const no = (reason: string): Verdict => ({ ok: false, reason });

export function allowedBit(alg: EncAlgType, commType: CommType): bigint {
  return 1n << BigInt(alg + 11 * commType);
}

/** The cc_allowed_alg_types mask that allows `algs` on both comm types. */
export function allowedMask(algs: readonly EncAlgType[]): bigint {
  return algs.reduce((m, a) => m | allowedBit(a, CommType.INTRA) | allowedBit(a, CommType.INTER), 0n);
}

/** Rank counts the intra-node RDH scheduler has schedules for (spec/hierarchical-rdh-and-proxy.md §3). */
export const INTRA_RDH_RANKS: readonly number[] = [4, 8, 16, 64];

const isPow2 = (n: number): boolean => n > 0 && (n & (n - 1)) === 0;

function enableMesh(c: CommContext, variant: EncAlgType): Verdict {
  if (!c.meshSupported) return no("the instance does not support mesh");
  if (c.multiStream) return no("mesh does not work with multiple streams");
  if (variant === EncAlgType.TWO_STEP_POD_MESH && !c.podEnabled) return no("needs an UltraServer pod");
  if ((variant === EncAlgType.LATENCY_OPT_MESH || variant === EncAlgType.BW_OPT_MESH) && !c.neuronSwitch) return no("needs a NeuronSwitch-v1 platform");
  return yes("enable_mesh_alg");
}

/** enc_cc_algorithm_allowed: the allowed bit first, then the algorithm's own conditions. */
export function ccAlgorithmAllowed(c: CommContext, alg: EncAlgType): Verdict {
  if ((c.allowedBits & allowedBit(alg, c.commType)) === 0n) return no(`bit ${alg + 11 * c.commType} of cc_allowed_alg_types is clear (not allowed in this run, or not supported by the instance)`);
  const inter = c.commType === CommType.INTER;
  switch (alg) {
    case EncAlgType.RING:
      return yes("always allowed");
    case EncAlgType.HIER:
      if (!inter) return no("INTER comm only");
      if (c.localRankN <= 1) return no(`local_rank_n ${c.localRankN} <= 1`);
      if (c.nodeN * c.localRankN !== c.rankN) return no(`node_n * local_rank_n != rank_n`);
      if (c.srcTargetPairsId !== -1) return no("src_target_pairs_id != -1");
      if (c.hierarchicalCc === 2) return no("hierarchical_cc == 2");
      return yes("inter comm with several ranks per node");
    case EncAlgType.KANGARING:
      if (c.multiStream) return no("multi-stream");
      if (inter) return no("intra comm only");
      if (c.dbg === 2) return no("dbg == 2");
      if (!((c.vcoreSize === 2 && c.rankN > 4) || (c.vcoreSize === 1 && c.rankN > 8))) return no(`needs (vcore_size 2 and rank_n > 4) or (vcore_size 1 and rank_n > 8); vcore_size ${c.vcoreSize}, rank_n ${c.rankN}`);
      return yes(`vcore_size ${c.vcoreSize}, rank_n ${c.rankN}`);
    case EncAlgType.SINGLE_CYCLE_RING:
      if (!inter) return no("INTER comm only");
      if (c.dbg === 2) return no("dbg == 2");
      if (c.nodeN <= 1) return no("node_n <= 1");
      if (c.rankN !== c.nodeN) return no("rank_n != node_n");
      return yes("one rank per node");
    case EncAlgType.INTRA_RDH:
      if (inter) return no("INTRA comm only");
      if (c.multiStream) return no("multi-stream");
      if (c.rdhCcMode === 0) return no("rdh_cc_mode == 0");
      if (!INTRA_RDH_RANKS.includes(c.rankN)) return no(`the intra-node RDH scheduler takes rank_n in {${INTRA_RDH_RANKS.join(", ")}}, not ${c.rankN}`);
      return yes(`rdh_cc_mode set, rank_n ${c.rankN}`);
    case EncAlgType.INTER_RDH:
      if (!inter) return no("INTER comm only");
      if (c.localRankN !== 1) return no("local_rank_n != 1");
      if (c.rankN !== c.nodeN) return no("rank_n != node_n");
      if (!isPow2(c.rankN) || c.rankN <= 7) return no(`rank_n ${c.rankN} is not a power of two above 7`);
      if (c.podEnabled) return no("pod enabled");
      return yes("power-of-two nodes, one rank each");
    case EncAlgType.MESH:
    case EncAlgType.SINGLE_STEP_MESH:
    case EncAlgType.TWO_STEP_POD_MESH:
    case EncAlgType.LATENCY_OPT_MESH:
    case EncAlgType.BW_OPT_MESH:
      return enableMesh(c, alg);
    default:
      return no("INVALID");
  }
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
  const meshAllowed = MESH_FAMILY.some((a) => verdicts[a]!.ok);
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
