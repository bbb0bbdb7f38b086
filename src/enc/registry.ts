// The algorithm registry: every enc_alg_type's entry (src/enc/stage.ts's AlgorithmEntry: what admits
// it, the ops it serves, its place in the precedence cascade, its stages, pattern, resources and
// composer), gathered from the families that declare them — one line a family — and HIER, whose
// stages the families compose. Adding a family is its file and one line in the list below.
import { CommType, EncAlgType } from "../ir/enums.ts";
import { KANGARING_FAMILY } from "./kangaring.ts";
import { MESH_FAMILY } from "./mesh.ts";
import { RDH_FAMILY } from "./rdh.ts";
import { RING_FAMILY } from "./ring.ts";
import { POD_MESH_FAMILY } from "./podmesh.ts";
import type { AlgorithmEntry } from "./stage.ts";
import { ALG_NAMES } from "../ir/spec.ts";
import { BASE, COLLECTIVES, no, yes } from "./kit.ts";

/** HIER: a hierarchical op, its stages run by the flat families (hier.ts composes it). */
const HIER: AlgorithmEntry = {
  ...BASE,
  alg: EncAlgType.HIER,
  label: "hier",
  gate: "hierarchical",
  precedence: 0,
  yieldsTo: ["kangaring", "mesh", "single_cycle_ring"],
  ops: COLLECTIVES,
  program: "stages",
  admit: (c) => {
    if (c.commType !== CommType.INTER) return no("INTER comm only");
    if (c.localRankN <= 1) return no(`local_rank_n ${c.localRankN} <= 1`);
    if (c.nodeN * c.localRankN !== c.rankN) return no(`node_n * local_rank_n != rank_n`);
    if (c.srcTargetPairsId !== -1) return no("src_target_pairs_id != -1");
    if (c.hierarchicalCc === 2) return no("hierarchical_cc == 2");
    return yes("inter comm with several ranks per node");
  },
};

/**
 * Every algorithm: the hierarchical one (stages of the others, composed by hier.ts) and each
 * family's own, one line a family.
 */
const entries: readonly AlgorithmEntry[] = [
  HIER,
  ...RING_FAMILY,
  ...KANGARING_FAMILY,
  ...MESH_FAMILY,
  ...RDH_FAMILY,
  ...POD_MESH_FAMILY,
];


/**
 * An enc_alg_type no family of this build declares: the runtime's value all the same, admitted by
 * no gate, returned by no rule of the cascade, composed by nothing.
 */
function notBuilt(alg: EncAlgType): AlgorithmEntry {
  return { ...BASE, alg, label: ALG_NAMES[alg as number]!, ops: [], admit: () => no("no family of this build declares it") };
}

/** Indexed by enc_alg_type 0..10 (a value no family declares: notBuilt's entry). */
export const ALGORITHMS: readonly AlgorithmEntry[] = ALG_NAMES.map((_, alg) => entries.find((e) => e.alg === alg) ?? notBuilt(alg as EncAlgType));

export function algorithmEntry(alg: EncAlgType): AlgorithmEntry {
  const e = ALGORITHMS[alg];
  if (!e) throw new RangeError(`no algorithm ${alg}`);
  return e;
}

/** Families this build composes (HIER through its stages' families). */
export function builtAlgorithms(): EncAlgType[] {
  return ALGORITHMS.filter((e) => e.compose !== undefined || e.program === "stages").map((e) => e.alg);
}

/** Mesh-family members, in enum order. */
export function meshFamily(): EncAlgType[] {
  return ALGORITHMS.filter((e) => e.meshFamily).map((e) => e.alg);
}

/** The mesh-family members this build composes, in the order the mesh gate tries them. */
export function meshVariants(): AlgorithmEntry[] {
  return ALGORITHMS.filter((e) => e.meshOrder !== undefined && e.compose !== undefined).sort((a, b) => a.meshOrder! - b.meshOrder!);
}

/** The entries the precedence cascade returns, first to last. */
export function precedenceOrder(): AlgorithmEntry[] {
  return ALGORITHMS.filter((e) => e.precedence !== undefined).sort((a, b) => a.precedence! - b.precedence!);
}

/** Semaphores the mesh-tape families need for groups of at most n ranks (their union: the largest). */
export function tapeSemaphores(n: number): number {
  return Math.max(0, ...ALGORITHMS.map((e) => e.tapeSemas?.(n) ?? 0));
}

