// The family contract: what every algorithm family (ring, kangaring, mesh, RDH, pod mesh) composes
// against. A family file imports this, the chunk planner, the peer-write helpers, encd and ir, and
// nothing that chooses between families (the registry, the gates, posting, the compile context).
import type { CommType, EncAlgMeshType, EncAlgType, EncOpType, EncPattern } from "../ir/enums.ts";
import type { AlgName, DeviceSpec, OpName, OpSpec, Scenario } from "../ir/spec.ts";
import type { ProxyFifo } from "../encd/proxy-fifo.ts";
import type { ChunkPlan } from "./chunks.ts";
import type { CommInfo } from "./groups.ts";
import type { NetQueue } from "./peer.ts";
import type { EncdChannel } from "../encd/channel-writer.ts";
import type { MeshProgram } from "../encd/mesh-writer.ts";

/** The rings a group's channels follow (global ranks), and whether they follow links. */
export interface RingSet {
  readonly group: readonly number[];
  readonly channels: readonly (readonly number[])[];
  /** Which device cycle each channel follows (0, or 1 for the second edge-disjoint one). */
  readonly cycle: readonly number[];
  readonly followsLinks: boolean;
}

/** A set of communicators (a partition of the ranks) with its rings and its channel set. */
export interface Comm {
  /** Channel set: its channels are abs_id set * channels + c, with their own semaphores and engines. */
  readonly set: number;
  readonly groups: readonly (readonly number[])[];
  readonly pos: ReadonlyMap<number, { readonly group: number; readonly groupRank: number }>;
  readonly rings: readonly RingSet[];
}

/** One flat collective over a comm: a whole op, or one stage of a hierarchical one. */
export interface Stage {
  readonly comm: Comm;
  readonly op: OpSpec;
  readonly opType: EncOpType;
  readonly alg: EncAlgType;
  readonly count: number;
  readonly reduceSliceBytes: number;
}

/** A stage as the layout reports it. */
export interface StageRecord {
  readonly level: "intra" | "inter";
  readonly op: OpName;
  readonly alg: EncAlgType;
}

/** What the gates read about one communicator (one replica group on one comm type). */
export interface CommContext {
  readonly commType: CommType;
  readonly rankN: number;
  readonly nodeN: number;
  /** Ranks of the group on each node. */
  readonly localRankN: number;
  /** Devices the group's ranks sit on. */
  readonly deviceN: number;
  /** NeuronLink pods the group's nodes lie in (its nodes, on a preset without pods). */
  readonly podN: number;
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
  /** The mesh gate: the mesh-family member that admitted the op, when it is not MESH itself. */
  readonly variant?: EncAlgType;
}

/** Buffers one rank uses for one op. */
export interface RankBuffers {
  readonly input: number;
  readonly output: number;
  /** Receive buffer of each channel: `RingView.recvSlots` slots of plan.halfBytes. */
  readonly chbuf: readonly number[];
}

/** A channel whose next and / or previous rank is on another node. */
export interface NetHop {
  readonly toNext: boolean;
  readonly fromPrev: boolean;
  /** INC address of the proxy queue's fold-0 trigger semaphore (fold f increments the f-th after it). */
  readonly proxyInc: number;
  /** The queue's entries, appended in step order. */
  readonly entries: ProxyFifo;
  /** Local slots the sends stage into before the proxy carries them (toNext only). */
  readonly staging: number;
  readonly foldN: number;
  /** Address blocks of the next and previous ranks' devices (the proxy entries name them). */
  readonly nextBlock: number;
  readonly prevBlock: number;
}

/** A rank's buffers for one stage: input, output, ring receive slots, mesh / RDH scratch. */
export interface StageBuffers extends RankBuffers {
  readonly chbufBytes: readonly number[];
  readonly scratch: number;
}

/** The semaphores of a TopSP's mesh program, after the ring channels'. */
export interface MeshPlace {
  readonly topsp: number;
  readonly semas: { readonly handshake: number; readonly data: number; readonly data2: number; readonly compl: number };
}

/** Ring-type channel programs of a stage, composed side by side (one chunk group each per round), each with the device it emits for. */
export type ChannelGens = { readonly device: number; readonly gen: Generator<void, unknown> }[];

/** What a family composes for one stage: ring-type channels return their generators; mesh-tape programs emit at once. */
export type StageComposer = (ctx: ComposeContext, st: Stage, buffers: ReadonlyMap<number, StageBuffers>, plans: readonly ChunkPlan[], path: string) => ChannelGens;

/**
 * What a family reads and asks of the program being compiled (the compile context implements it):
 * the scenario and preset, the ranks' places, each rank's channel writers, mesh programs and proxy
 * queues, and where the network lies.
 */
export interface ComposeContext {
  readonly scn: Scenario;
  readonly spec: DeviceSpec;
  readonly channels: number;
  readonly foldN: number;
  readonly chunkBytes: number;
  readonly info: readonly CommInfo[];
  crossesNetwork(a: number, b: number): boolean;
  viaNetwork(a: number, b: number): boolean;
  members(comm: Comm): number[];
  place(rank: number, set: number, c: number): { topsp: number; slot: number; recv: number; send: number; compl: number };
  ringPos(comm: Comm, c: number, rank: number): { ring: readonly number[]; i: number; next: number; prev: number };
  recvSlots(comm: Comm, rank: number, c: number): number;
  sendSlots(comm: Comm, rank: number, c: number): number;
  chan(comm: Comm, rank: number, c: number): EncdChannel;
  meshPlace(rank: number): MeshPlace;
  meshProgram(comm: Comm, rank: number, alg: EncAlgType): MeshProgram;
  proxyQueue(comm: Comm, rank: number, c: number): { entries: ProxyFifo; proxyInc: number };
  netHop(comm: Comm, rank: number, c: number, hop: { next: number; prev: number; toNext: boolean; fromPrev: boolean }, halfBytes: number): NetHop;
  meshNet(rank: number, g: readonly number[]): { net?: NetQueue };
  /** Whether this composition emits a device's programs (all but in a folded pass: its units' devices). */
  readonly emits: (device: number) => boolean;
}

/** The six feasibility gates, in the order enc_post_operation runs them. */
/**
 * What a family declares for each algorithm it composes (the registry lists them all, indexed by
 * enc_alg_type).
 */
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
