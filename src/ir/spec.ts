// Typed forms of the two input files: a device preset (devices/*.json) and a scenario (scenarios/*.json).
import type { Dtype, ReduceOp } from "./dtypes.ts";
import { EncOpType, type EncAlgType } from "./enums.ts";
import type { Topology } from "./topology.ts";

export interface DeviceSpec {
  readonly name: string;
  readonly description: string;
  /** Hardware generation of the DMA / CCE rules (2 = trn1/inf2 "SUNDA"). */
  readonly arch: number;
  /** Devices in the instance (the upper bound for a ring topology). */
  readonly devices: number;
  readonly coresPerDevice: number;
  readonly topology: Topology;
  readonly topsp: {
    readonly perDevice: number;
    readonly semaphores: number;
    /** Cost of fetching and decoding one spad_ctrl entry. */
    readonly entryDecodePs: number;
    /** Cost of one step: reading a slot entry and writing the tail-pointer doorbells. */
    readonly stepIssuePs: number;
    /** Delay from a semaphore write to the waiting core seeing it. */
    readonly semaWakePs: number;
    /**
     * The runtime's fixed cost of launching a collective: from the host's trigger to the TopSPs
     * starting their first entry (0 where the preset gives none).
     */
    readonly launchPs: number;
  };
  readonly dma: {
    readonly enginesPerCore: number;
    readonly queuesPerEngine: number;
    /** The queue the runtime reserves for collectives on every engine. */
    readonly collectiveQueue: number;
    /** Per-engine byte rate; 0 = no limit. */
    readonly engineBytesPerSecond: number;
    /** Fixed engine time per descriptor processed. */
    readonly descriptorCostPs: number;
    readonly maxDescriptorBytes: number;
    /** Largest element count of one CCE (in-DMA reduce) descriptor. */
    readonly cceMaxElements: number;
  };
  /** HBM: its rate, and its capacity per device (absent: no limit). */
  readonly hbm: { readonly bytesPerSecond: number; readonly capacityBytes?: number };
  /** On-chip SBUF per physical NeuronCore (absent: not given; an op with its buffers in SBUF is refused). */
  readonly sbuf?: { readonly bytesPerCore: number };
  readonly link: { readonly bytesPerSecond: number; readonly latencyPs: number };
  readonly ring: {
    /** DMA folds per ring channel (queues driven in lockstep, each carrying a share of every transfer). */
    readonly foldN: number;
    /** Default ring chunk (bytes per rank per channel per chunk group). */
    readonly chunkBytes: number;
    /** Half-chunk slots in each channel's receive buffer (flow-control credits). */
    readonly bufferSlots: number;
    readonly defaultChannels: number;
  };
  /** The inter-node network of one node (EFA): absent for single-node presets. */
  readonly network:
    | {
        readonly bytesPerSecond: number;
        readonly latencyPs: number;
        readonly messageCostPs: number;
        /** Receive slots (and so send credits) of a ring channel whose previous rank is on another node. */
        readonly bufferSlots: number;
        /** 1: every device has its own NIC of `bytesPerSecond`; 0: one NIC per node. */
        readonly nicPerDevice: number;
      }
    | undefined;
  /** What the instance's runtime can build, and the inputs of the admission gates. */
  readonly collectives: {
    /** Host algorithms this instance supports (the default allowed set). */
    readonly supportedAlgorithms: readonly EncAlgType[];
    /** Physical NeuronCores per logical rank (LNC / vcore_size). */
    readonly virtualCoreSize: number;
    /**
     * Largest block per rank (op bytes / ranks: what each peer sends into a group's channel buffer)
     * the full-mesh subtype t1 takes; t0 (one node, two ranks) takes meshMaxBytesTwoRanks.
     */
    readonly meshMaxBytes: number;
    readonly meshMaxBytesTwoRanks: number;
    /** The mesh's op_max_limit when the group spans nodes (subtype t4's clamp; absent: meshMaxBytes). */
    readonly meshMaxBytesMultiNode?: number;
    /**
     * Bytes per rank from which a collective spanning nodes takes the flat ring instead of the
     * hierarchical algorithm (hardware-facts.md §7.2: flat ring on trn1 for large messages; absent: never).
     */
    readonly flatRingMinBytes?: number;
    /** The intra RDH subtype's window [rdhMinBytes, rdhMaxBytes] on the bytes per rank (default: every size). */
    readonly rdhMinBytes: number;
    readonly rdhMaxBytes: number;
    /** cc_cce_reduce_prio_pkt_size[priority_class]: CCE packet cap per priority class (5 classes). */
    readonly cceReducePacketBytes: readonly number[];
    /**
     * The fewest DMA engines (folds) a mesh-tape program (mesh, RDH) spreads over, within those the
     * ring channels leave free: with fewer peers than this, each peer's block is split over several
     * engines (encd_mesh_get_num_folds' per-arch matrix; default 1: one engine per peer).
     */
    readonly meshFolds: number;
    /**
     * Ring channels of a program whose every op is a source/target-pairs op (permute, send/recv):
     * the engines a pair's transfer spreads over are this times ring.foldN (default: the ring's
     * defaultChannels).
     */
    readonly permuteChannels: number | undefined;
  };
  /** The runtime's host-side costs around each collective (all 0 where the preset gives none). */
  readonly host: HostCosts;
  /** Where every number comes from: dotted field path -> source note or "assumption: ...". */
  readonly sources: Readonly<Record<string, string>>;
}

/** Scenario names of the 13 enc_op_type values, in enum order. */
export const OP_NAMES = [
  "all-gather",
  "all-reduce",
  "broadcast",
  "reduce",
  "reduce-scatter",
  "send",
  "recv",
  "all-to-all",
  "permute",
  "permute-reduce",
  "permute-implicit",
  "permute-reduce-implicit",
  "all-to-all-v",
] as const;

/**
 * Scenario op names: the 13 enc_op_type names, and all-gather-v (nccom-test's allgv), which the
 * runtime reaches with one of them: an all-to-all-v whose every destination reads the sender's
 * one input block (src/ir/ops.ts).
 */
export const SCENARIO_OP_NAMES = [...OP_NAMES, "all-gather-v"] as const;
export type OpName = (typeof SCENARIO_OP_NAMES)[number];

/** The collectives the ring family composes and the checker has references for. */
export const RING_OP_NAMES = ["all-reduce", "all-gather", "reduce-scatter"] as const;
export type RingOpName = (typeof RING_OP_NAMES)[number];

export function isRingOp(op: OpName): op is RingOpName {
  return (RING_OP_NAMES as readonly string[]).includes(op);
}

/** enc_op_type of each scenario op name (the index in OP_NAMES; all-gather-v is lowered to ALLTOALL_V). */
export function opTypeOf(op: OpName): EncOpType {
  return op === "all-gather-v" ? EncOpType.ALLTOALL_V : (OP_NAMES.indexOf(op) as EncOpType);
}

export interface OpSpec {
  readonly op: OpName;
  /** Size as nccom-test defines it: the buffer (all-reduce), the gathered output (all-gather), the input (reduce-scatter). */
  readonly bytes: number;
  readonly dtype: Dtype;
  readonly reduce: ReduceOp;
  /** CC stream the op is posted on (0..3). */
  readonly stream: number;
  /** Priority class (0..4): selects the CCE reduce packet size. */
  readonly priorityClass: number;
  /** all-to-all-v: bytes rank i sends to rank j, per group rank (n x n); all-gather-v: row i is group rank i's block size, n times. */
  readonly counts?: readonly (readonly number[])[];
  /** permute / send / recv: [source, target] global ranks (each at most once on each side). */
  readonly pairs?: readonly (readonly [number, number])[];
  /** The op's own replica groups (a concurrent stream's, like nccom-test's per-stream groups file); absent: the scenario's. */
  readonly replicaGroups?: readonly (readonly number[])[];
}

/** Scenario names of the host algorithms (enc_alg_type 0..10), in enum order. */
export const ALG_NAMES = [
  "ring",
  "hier",
  "mesh",
  "kangaring",
  "single-cycle-ring",
  "intra-rdh",
  "single-step-mesh",
  "inter-rdh",
  "two-step-pod-mesh",
  "latency-opt-mesh",
  "bw-opt-mesh",
] as const;
export type AlgName = (typeof ALG_NAMES)[number];

export function algTypeOf(name: AlgName): EncAlgType {
  return ALG_NAMES.indexOf(name) as EncAlgType;
}

export const ALGORITHMS = ["auto", ...ALG_NAMES] as const;
export type AlgorithmChoice = (typeof ALGORITHMS)[number];
export type CheckMode = "values" | "symbolic" | "none";

/** One rank's change to one op's arguments (to show the signature check). */
export interface RankOverride {
  readonly rank: number;
  readonly op: number;
  readonly bytes?: number;
  readonly dtype?: Dtype;
  readonly reduce?: ReduceOp;
  readonly stream?: number;
  readonly priorityClass?: number;
}

/** A fault injected into a run (scenario key "faults"). Times in microseconds of simulated time. */
export type Fault =
  | { readonly kind: "link-down"; readonly from: number; readonly to: number; readonly atUs: number }
  | { readonly kind: "link-slow"; readonly from: number; readonly to: number; readonly factor: number }
  | { readonly kind: "engine-stall"; readonly device: number; readonly engine: number; readonly atUs: number; readonly forUs: number }
  | { readonly kind: "lost-increment"; readonly device: number; readonly nth: number; readonly semaphore?: number }
  | { readonly kind: "drop-wait"; readonly device: number; readonly nth: number };
export const FAULT_KINDS = ["link-down", "link-slow", "engine-stall", "lost-increment", "drop-wait"] as const;

/** Stage algorithms a hierarchical op may name per level ("auto": the runtime's selection lists). */
export const HIER_INTRA = ["auto", "ring", "kangaring", "mesh", "intra-rdh"] as const;
export const HIER_INTER = ["auto", "ring", "single-cycle-ring"] as const;
export interface HierChoice {
  readonly intra: (typeof HIER_INTRA)[number];
  readonly inter: (typeof HIER_INTER)[number];
  /** Pipeline slices of a hierarchical all-reduce (1: stages one after another). */
  readonly slices: number;
}

/** How an op's time is taken (Scenario.timing). */
export const TIMINGS = ["loop", "each"] as const;
export type Timing = (typeof TIMINGS)[number];

export interface Scenario {
  readonly name: string;
  readonly instance: string;
  readonly ranks: number;
  readonly ranksPerDevice: number;
  readonly nodes: number;
  readonly replicaGroups: readonly (readonly number[])[];
  readonly algorithm: AlgorithmChoice;
  /** Host algorithms the run may use (the runtime's allowed-algorithm switches); undefined = the preset's supported set. */
  readonly allowedAlgorithms: readonly EncAlgType[] | undefined;
  /** Stage algorithms of hierarchical ops. */
  readonly hierarchical: HierChoice;
  /** Ring channels; undefined = the device preset's default. */
  readonly channels: number | undefined;
  /** Ring chunk bytes; undefined = the device preset's default. */
  readonly chunkBytes: number | undefined;
  /**
   * The runtime's CC DMA packet size (NEURON_RT_DBG_CC_DMA_PACKET_SIZE), per CC stream: stream k
   * takes the k-th, the streams past the list the last; absent, 64 KiB. A copy's descriptors are
   * cut at it and a reduce's CCE packets are no larger (`opPacketBytes`).
   */
  readonly ccDmaPacketBytes?: readonly number[];
  readonly seed: number;
  readonly check: CheckMode;
  /** Detect races when the check is values or symbolic (default true). */
  readonly races: boolean;
  /**
   * Run the ops together in one program as well: each stream's ops chained on its own TopSP and
   * DMA queues, the streams at once (sharing engines and links).
   */
  readonly concurrent?: boolean;
  /**
   * How the op's time is taken, as nccom-test takes it: "loop" (default) averages a NEFF's loop of
   * iterations, "each" times every iteration on its own (--stats / -t), the host's launch of it
   * included (host.iterationPs).
   */
  readonly timing?: Timing;
  /** Where every rank's input and output live: HBM (absent), or SBUF (nccom-test --sb2sb), whose size per NeuronCore bounds them. */
  readonly buffers?: "sbuf";
  readonly ops: readonly OpSpec[];
  readonly rankOverrides: readonly RankOverride[];
  /** Faults injected into every op's run (empty: none). */
  readonly faults?: readonly Fault[];
}

/**
 * The fixed costs of a collective beyond the device's work, each added to topsp.launchPs when the
 * op runs (src/run/fixed-cost.ts; docs/device-model.md §6, "Host costs").
 */
export interface HostCosts {
  /** The launch barrier: per doubling of the largest group's ranks (⌈log2 ranks⌉ times). */
  readonly syncPs: number;
  /** Per node beyond the first (the network's part of the barrier). */
  readonly nodeSyncPs: number;
  /** Per iteration timed on its own (nccom-test --stats / -t): the host's launch of that iteration. */
  readonly iterationPs: number;
  /** Per variable-size op (all-gather-v, all-to-all-v): the counts staged from the host. */
  readonly countsPs: number;
  /** Per op, by the algorithm family it resolves to (ALG_NAMES keys): its setup beyond the launch. */
  readonly algorithmPs: Readonly<Partial<Record<AlgName, number>>>;
}

export const NO_HOST_COSTS: HostCosts = { syncPs: 0, nodeSyncPs: 0, iterationPs: 0, countsPs: 0, algorithmPs: {} };

/**
 * The same device with another fixed cost per collective: topsp.launchPs is the whole of it (every
 * TopSP starts that long after the run), the host costs none.
 */
export function withLaunch(spec: DeviceSpec, launchPs: number): DeviceSpec {
  return { ...spec, topsp: { ...spec.topsp, launchPs }, host: NO_HOST_COSTS };
}

/** A preset's calibration figures, as calibration/accuracy.json keeps them (errors as exp(mean |ln(sim / measured)|)). */
export interface CalibrationAccuracy {
  readonly series: readonly string[];
  readonly inSample: { readonly points: number; readonly within25: number; readonly geomeanErrorFactor: number };
  readonly heldOut: { readonly points: number; readonly within25: number; readonly geomeanErrorFactor: number };
  /** What the series time, one a series: a run outside them is not one the figures were measured on. */
  readonly covers?: readonly MeasuredRange[];
}

/** What one measured series times: its op, on how many ranks (its largest group) over how many nodes, from one size to another. */
export interface MeasuredRange {
  readonly op: OpName;
  readonly ranks: number;
  readonly nodes: number;
  readonly minBytes: number;
  readonly maxBytes: number;
  /** The algorithms its points resolve to on the preset (as the table's algorithm column names them). */
  readonly algorithms?: readonly string[];
}

/**
 * Ranks every group splits a size over in whole blocks: the least common multiple of the groups'
 * rank counts (groups of 3 and 5 ranks: 15). A size in whole blocks of it suits each group.
 */
export function groupsRanksLcm(groups: readonly (readonly unknown[])[]): number {
  const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
  return groups.reduce((m: number, g) => (g.length > 0 ? (m / gcd(m, g.length)) * g.length : m), 1);
}

/** Op `i`'s replica groups: its own where it gives them, else the scenario's. */
export function opGroups(scn: Pick<Scenario, "ops" | "replicaGroups">, i: number): readonly (readonly number[])[] {
  return scn.ops[i]!.replicaGroups ?? scn.replicaGroups;
}

/** Whether two lists of replica groups are the same groups, in the same order. */
export function sameGroups(a: readonly (readonly number[])[], b: readonly (readonly number[])[]): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

/** The ranks of the largest replica group any op of the scenario runs over. */
export function largestGroup(scn: Pick<Scenario, "ops" | "replicaGroups">): number {
  return Math.max(...scn.replicaGroups.map((g) => g.length), ...scn.ops.flatMap((o) => (o.replicaGroups ?? []).map((g) => g.length)));
}
