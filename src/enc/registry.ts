// The algorithm registry: one entry per enc_alg_type — what admits it (enc_cc_algorithm_allowed's
// own condition, and the enc_can_post_* gate that stands for it), the ops it serves, its place in
// the precedence cascade, whether a hierarchical stage may use it, the device pattern it emits,
// the resources its program takes (ring channels, or a mesh-tape program with scratch and
// semaphores) and its composer. Adding a family is an entry here and its composer file.
import { CommType, EncAlgMeshType, EncAlgType, EncOpType, EncPattern } from "../ir/enums.ts";
import type { AlgName, OpSpec } from "../ir/spec.ts";
import { ALG_NAMES } from "../ir/spec.ts";
import type { ChunkPlan } from "./chunks.ts";
import { composeKangaringStage, kangaringPlans } from "./kangaring.ts";
import { meshStage, meshSlotBytes } from "./mesh.ts";
import { composeRdhStage, rdhStepSemas } from "./rdh.ts";
import { composeRingStage } from "./ring.ts";
import { POD_MESH_SEMAS, composePodMeshStage, podGrid } from "./podmesh.ts";
import type { CommContext, ComposeContext, Stage, StageComposer, Verdict } from "./stage.ts";

/** The six feasibility gates, in the order enc_post_operation runs them. */
export const GATES = ["kangaring", "mesh", "intra_rdh", "inter_rdh", "single_cycle_ring", "hierarchical"] as const;
export type Gate = (typeof GATES)[number];

export type Level = "intra" | "inter";

/** Where a group's ranks sit. */
export interface GroupPlaces {
  readonly nodeOf: (rank: number) => number;
  readonly deviceOf: (rank: number) => number;
}

export interface AlgorithmEntry {
  readonly alg: EncAlgType;
  /** The scenario's name for it. */
  readonly label: AlgName;
  /** The enc_can_post_* gate that admits it (none: RING, the cascade's last rule). */
  readonly gate?: Gate;
  /** Its place in the precedence cascade (lowest first); none: the cascade never returns it by itself. */
  readonly precedence?: number;
  /** Gates any of which, admitting, keep the cascade from returning it (HIER yields to the flat-ring families). */
  readonly yieldsTo?: readonly Gate[];
  /** Op types its collective handler composes (the permute, p2p and all-to-all handlers ask for theirs). */
  readonly ops: readonly EncOpType[];
  /** A member of the mesh family: comm init builds the mesh path when one is allowed. */
  readonly meshFamily: boolean;
  /** Hierarchical levels whose stages it may run, and whether the pipelined (multi-slice) variant may use it. */
  readonly stageLevels: readonly Level[];
  readonly pipelinedStage: boolean;
  /** The device pattern (cc_op_entry.algo_type) of its ops, and a mesh-tape family's mesh type (algo_sub_type). */
  readonly pattern: EncPattern;
  readonly meshType?: EncAlgMeshType;
  /** What it runs on: ring channels, the rank's mesh-tape program, or other algorithms' stages. */
  readonly program: "ring" | "mesh-tape" | "stages";
  /** A mesh-tape program's scratch per rank for an op over n ranks (undefined: none). */
  readonly scratch?: (op: OpSpec, opType: EncOpType, n: number) => number | undefined;
  /** TopSP semaphores a mesh-tape program needs (groups of at most n ranks), from the mesh base. */
  readonly tapeSemas?: (n: number) => number;
  /** enc_cc_algorithm_allowed's condition for it, once its allowed bit is set. */
  admit(c: CommContext): Verdict;
  /**
   * A mesh-tape program's exchange: peers' blocks (reduce-scatter then all-gather for an
   * all-reduce), whole buffers (an all-reduce in one exchange), or the RDH halving / doubling steps.
   * The step limit and the mesh composer read it.
   */
  readonly exchange?: "blocks" | "whole-buffer" | "halving";
  /** Peers written in rotation (i + 1, i + 2, ...), every block over all the engines: through a switch each port carries one flow at a time. */
  readonly rotate?: boolean;
  /** A mesh-family member's place among the members the mesh gate tries, first to last. */
  readonly meshOrder?: number;
  /** What a peer sends a rank, against the mesh subtype's op_max_limit (default: the bytes per rank). */
  readonly peerBlock?: (opType: EncOpType, bytes: number, n: number) => { bytes: number; what: string } | undefined;
  /** What it needs of a group's layout beyond its gate (the pod mesh: a node-by-node grid). */
  readonly groupLayout?: (group: readonly number[], where: GroupPlaces) => Verdict;
  /** Its stage composer (undefined: this build does not compose it). */
  readonly compose?: StageComposer;
  /** Chunk plans of its stages when they are not the op's (kangaring plans over chip blocks). */
  readonly stagePlans?: (ctx: ComposeContext, st: Stage) => ChunkPlan[];
}

const yes = (reason: string): Verdict => ({ ok: true, reason });
const no = (reason: string): Verdict => ({ ok: false, reason });

/** The collectives every family composes. */
export const COLLECTIVES: readonly EncOpType[] = [EncOpType.ALLGATHER, EncOpType.ALLREDUCE, EncOpType.REDUCE_SCATTER];

/** Rank counts the intra-node RDH scheduler has schedules for (spec/hierarchical-rdh-and-proxy.md §3). */
export const INTRA_RDH_RANKS: readonly number[] = [4, 8, 16, 64];

const isPow2 = (n: number): boolean => n > 0 && (n & (n - 1)) === 0;

/** ENC_MESH_MAX_NUM_DEVICES: the devices one mesh spans at most. */
export const MESH_MAX_DEVICES = 128;
/** The ranks one KangaRing holds at most. */
export const KANGARING_MAX_RANKS = 256;

/** enable_mesh_alg: what every mesh-family member needs. */
function enableMesh(c: CommContext, variant: EncAlgType): Verdict {
  if (!c.meshSupported) return no("the instance does not support mesh");
  if (c.deviceN > MESH_MAX_DEVICES) return no(`the group spans ${c.deviceN} devices; a mesh spans at most ${MESH_MAX_DEVICES} (ENC_MESH_MAX_NUM_DEVICES)`);
  if (c.multiStream) return no("mesh does not work with multiple streams");
  if (variant === EncAlgType.TWO_STEP_POD_MESH && !c.podEnabled) return no("needs an UltraServer pod");
  // The full-mesh build's invariant (node_n == 1) || (use_net XOR enable_pod): on a pod platform a
  // mesh's other nodes are all pod peers, or all network peers — never both.
  if (c.podEnabled && c.podN > 1) return no(`the group spans ${c.podN} pods: on a pod platform a mesh's peers on other nodes must all be pod peers (node_n == 1 || use_net XOR enable_pod)`);
  if ((variant === EncAlgType.LATENCY_OPT_MESH || variant === EncAlgType.BW_OPT_MESH) && !c.neuronSwitch) return no("needs a NeuronSwitch-v1 platform");
  return yes("enable_mesh_alg");
}

const reduces = (opType: EncOpType) => opType === EncOpType.ALLREDUCE || opType === EncOpType.REDUCE_SCATTER;

/** Scratch of a mesh-tape program: `slots` blocks per rank for a reducing op. */
const slotScratch = (slots: (n: number) => number) => (op: OpSpec, opType: EncOpType, n: number) => (reduces(opType) ? slots(n) * meshSlotBytes(op, opType, n) : undefined);

/** A mesh program's semaphores: handshake, data, data2, completion. */
const MESH_SEMAS = 4;

const rdhSemas = (n: number) => MESH_SEMAS + rdhStepSemas(2 ** Math.floor(Math.log2(n)));

const BASE = { meshFamily: false, stageLevels: [] as readonly Level[], pipelinedStage: false, pattern: EncPattern.RING, program: "ring" } as const;

/** What the two RDH schedulers share: the mesh tape, a working copy and landing slots per rank, a semaphore per step. */
const RDH_MEMBER = { ...BASE, exchange: "halving", ops: COLLECTIVES, pattern: EncPattern.MESH, meshType: EncAlgMeshType.FULL_MESH, program: "mesh-tape", scratch: slotScratch((n) => 2 * n), tapeSemas: rdhSemas, compose: composeRdhStage } as const;

/** What every mesh-family member on the mesh tape shares. */
const MESH_MEMBER = { ...BASE, exchange: "blocks", gate: "mesh", ops: COLLECTIVES, meshFamily: true, pattern: EncPattern.MESH, program: "mesh-tape", tapeSemas: () => MESH_SEMAS } as const;

/**
 * A member whose all-reduce is one exchange of whole buffers: every rank's buffer lands in a slot
 * per peer (all-gather and reduce-scatter are the mesh's one exchange), and its window is on the
 * whole buffer a peer sends.
 */
const WHOLE_BUFFER_ALLREDUCE = {
  exchange: "whole-buffer" as const,
  scratch: (op: OpSpec, opType: EncOpType, n: number) => (opType === EncOpType.ALLREDUCE ? n * op.bytes : slotScratch((k) => k)(op, opType, n)),
  peerBlock: (opType: EncOpType, bytes: number) => (opType === EncOpType.ALLREDUCE ? { bytes, what: "per peer (each rank sends its whole buffer)" } : undefined),
};

const entries: readonly AlgorithmEntry[] = [
  {
    ...BASE,
    alg: EncAlgType.RING,
    label: "ring",
    precedence: 6,
    ops: COLLECTIVES,
    stageLevels: ["intra", "inter"],
    pipelinedStage: true,
    admit: () => yes("always allowed"),
    compose: composeRingStage,
  },
  {
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
  },
  {
    ...MESH_MEMBER,
    alg: EncAlgType.MESH,
    label: "mesh",
    precedence: 2,
    meshOrder: 3,
    ops: [...COLLECTIVES, EncOpType.ALLTOALL, EncOpType.ALLTOALL_V],
    stageLevels: ["intra", "inter"],
    meshType: EncAlgMeshType.FULL_MESH,
    scratch: slotScratch((n) => n),
    admit: (c) => enableMesh(c, EncAlgType.MESH),
    compose: meshStage("blocks", false),
  },
  {
    ...BASE,
    alg: EncAlgType.KANGARING,
    label: "kangaring",
    gate: "kangaring",
    precedence: 3,
    ops: COLLECTIVES,
    stageLevels: ["intra"],
    pipelinedStage: true,
    admit: (c) => {
      if (c.multiStream) return no("multi-stream");
      if (c.commType === CommType.INTER) return no("intra comm only");
      if (c.dbg === 2) return no("dbg == 2");
      if (c.rankN > KANGARING_MAX_RANKS) return no(`rank_n ${c.rankN} is above the ${KANGARING_MAX_RANKS} ranks a KangaRing holds`);
      if (!((c.vcoreSize === 2 && c.rankN > 4) || (c.vcoreSize === 1 && c.rankN > 8))) return no(`needs (vcore_size 2 and rank_n > 4) or (vcore_size 1 and rank_n > 8); vcore_size ${c.vcoreSize}, rank_n ${c.rankN}`);
      return yes(`vcore_size ${c.vcoreSize}, rank_n ${c.rankN}`);
    },
    compose: composeKangaringStage,
    stagePlans: kangaringPlans,
  },
  {
    ...BASE,
    alg: EncAlgType.SINGLE_CYCLE_RING,
    label: "single-cycle-ring",
    gate: "single_cycle_ring",
    precedence: 4,
    ops: [EncOpType.ALLREDUCE],
    stageLevels: ["inter"],
    pipelinedStage: true,
    admit: (c) => {
      if (c.commType !== CommType.INTER) return no("INTER comm only");
      if (c.dbg === 2) return no("dbg == 2");
      if (c.nodeN <= 1) return no("node_n <= 1");
      if (c.rankN !== c.nodeN) return no("rank_n != node_n");
      return yes("one rank per node");
    },
    compose: composeRingStage,
  },
  {
    ...RDH_MEMBER,
    alg: EncAlgType.INTRA_RDH,
    label: "intra-rdh",
    gate: "intra_rdh",
    precedence: 1,
    stageLevels: ["intra"],
    admit: (c) => {
      if (c.commType === CommType.INTER) return no("INTRA comm only");
      if (c.multiStream) return no("multi-stream");
      if (c.rdhCcMode === 0) return no("rdh_cc_mode == 0");
      if (!INTRA_RDH_RANKS.includes(c.rankN)) return no(`the intra-node RDH scheduler takes rank_n in {${INTRA_RDH_RANKS.join(", ")}}, not ${c.rankN}`);
      return yes(`rdh_cc_mode set, rank_n ${c.rankN}`);
    },
  },
  {
    ...MESH_MEMBER,
    ...WHOLE_BUFFER_ALLREDUCE,
    alg: EncAlgType.SINGLE_STEP_MESH,
    label: "single-step-mesh",
    meshOrder: 4,
    stageLevels: ["intra", "inter"],
    meshType: EncAlgMeshType.FULL_MESH,
    admit: (c) => enableMesh(c, EncAlgType.SINGLE_STEP_MESH),
    compose: meshStage("whole-buffer", false),
  },
  {
    ...RDH_MEMBER,
    alg: EncAlgType.INTER_RDH,
    label: "inter-rdh",
    gate: "inter_rdh",
    precedence: 5,
    stageLevels: ["inter"],
    admit: (c) => {
      if (c.commType !== CommType.INTER) return no("INTER comm only");
      if (c.localRankN !== 1) return no("local_rank_n != 1");
      if (c.rankN !== c.nodeN) return no("rank_n != node_n");
      if (!isPow2(c.rankN) || c.rankN <= 7) return no(`rank_n ${c.rankN} is not a power of two above 7`);
      if (c.podEnabled) return no("pod enabled");
      return yes("power-of-two nodes, one rank each");
    },
  },
  {
    ...MESH_MEMBER,
    alg: EncAlgType.TWO_STEP_POD_MESH,
    label: "two-step-pod-mesh",
    meshOrder: 0,
    // An inter-node stage (one rank per node) is a grid of one column.
    stageLevels: ["inter"],
    // The trn2 / trn3 per-device initializer's mesh type (spec/mesh-composer-topology-switch.md §4).
    meshType: EncAlgMeshType.MESH_TRN2,
    // At most n row landings, P partials and P column landings (P <= n).
    scratch: (op, opType, n) => 3 * n * meshSlotBytes(op, opType === EncOpType.ALLGATHER ? EncOpType.REDUCE_SCATTER : opType, n),
    tapeSemas: (n) => (n >= 2 ? POD_MESH_SEMAS : MESH_SEMAS),
    admit: (c) => {
      const v = enableMesh(c, EncAlgType.TWO_STEP_POD_MESH);
      if (!v.ok) return v;
      if (c.commType !== CommType.INTER || c.nodeN < 2) return no("spans the pod's nodes: INTER comm only");
      return yes(`pod of ${c.nodeN} nodes`);
    },
    groupLayout: (g, { nodeOf }) => {
      const grid = podGrid(g, nodeOf);
      return "ok" in grid ? grid : yes(`${grid.P} nodes x ${grid.L} ranks`);
    },
    compose: composePodMeshStage,
  },
  {
    // The switch's single-hop latency variant: one exchange, every rank's whole buffer to every rank.
    ...MESH_MEMBER,
    ...WHOLE_BUFFER_ALLREDUCE,
    alg: EncAlgType.LATENCY_OPT_MESH,
    label: "latency-opt-mesh",
    meshOrder: 1,
    meshType: EncAlgMeshType.MESH_SWITCH,
    rotate: true,
    admit: (c) => enableMesh(c, EncAlgType.LATENCY_OPT_MESH),
    groupLayout: switchLayout,
    compose: meshStage("whole-buffer", true),
  },
  {
    // The bandwidth variant: reduce-scatter then all-gather, each peer's block once per step.
    ...MESH_MEMBER,
    alg: EncAlgType.BW_OPT_MESH,
    label: "bw-opt-mesh",
    meshOrder: 2,
    meshType: EncAlgMeshType.MESH_SWITCH,
    rotate: true,
    scratch: slotScratch((n) => n),
    admit: (c) => enableMesh(c, EncAlgType.BW_OPT_MESH),
    groupLayout: switchLayout,
    compose: meshStage("blocks", true),
  },
];

/**
 * The switch mesh (MESH_SWITCH) is built when the group's ranks are on more than one device
 * (spec/mesh-composer-topology-switch.md §4: local_rack_rank_n > 1, peers on other chips).
 */
function switchLayout(g: readonly number[], { deviceOf }: GroupPlaces): Verdict {
  const devices = new Set(g.map(deviceOf)).size;
  return devices > 1 ? yes(`switch mesh over ${devices} devices`) : no("the group is on one device: no switch mesh");
}

/** Indexed by enc_alg_type 0..10. */
export const ALGORITHMS: readonly AlgorithmEntry[] = [...entries].sort((a, b) => a.alg - b.alg);

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

