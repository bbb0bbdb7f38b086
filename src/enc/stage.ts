// The family contract: what every algorithm family (ring, kangaring, mesh, RDH, pod mesh) composes
// against. A family file imports this, the chunk planner, the peer-write helpers, encd and ir, and
// nothing that chooses between families (the registry, the gates, posting, the compile context).
import type { CommType, EncAlgType, EncOpType } from "../ir/enums.ts";
import type { DeviceSpec, OpName, OpSpec, Scenario } from "../ir/spec.ts";
import type { EncdChannel, MeshProgram } from "../encd/program.ts";
import type { ProxyFifo } from "../encd/proxy.ts";
import type { ChunkPlan } from "./chunks.ts";
import type { CommInfo } from "./groups.ts";
import type { NetQueue } from "./peer.ts";

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
}
