// Typed forms of the two input files: a device preset (devices/*.json) and a scenario (scenarios/*.json).
import type { Dtype, ReduceOp } from "./dtypes.ts";

/** Device-to-device topology: an explicit neighbour table, or a plain ring sized to the devices in use. */
export type Topology =
  | { readonly kind: "table"; readonly neighbours: readonly (readonly number[])[] }
  | { readonly kind: "ring" };

/**
 * The links of a topology as sorted adjacency lists; a ring topology has exactly `deviceCount`
 * devices (the ones in use).
 */
export function topologyAdjacency(topology: Topology, deviceCount: number): number[][] {
  if (topology.kind === "ring") {
    return Array.from({ length: deviceCount }, (_, d) =>
      deviceCount === 1 ? [] : [...new Set([(d + deviceCount - 1) % deviceCount, (d + 1) % deviceCount])].sort((a, b) => a - b),
    );
  }
  return topology.neighbours.map((row) => [...new Set(row)].sort((a, b) => a - b));
}

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
  readonly hbm: { readonly bytesPerSecond: number };
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
  /** Where every number comes from: dotted field path -> source note or "assumption: ...". */
  readonly sources: Readonly<Record<string, string>>;
}

export const OP_NAMES = ["all-reduce", "all-gather", "reduce-scatter"] as const;
export type OpName = (typeof OP_NAMES)[number];

export interface OpSpec {
  readonly op: OpName;
  /** Size as nccom-test defines it: the buffer (all-reduce), the gathered output (all-gather), the input (reduce-scatter). */
  readonly bytes: number;
  readonly dtype: Dtype;
  readonly reduce: ReduceOp;
}

export const ALGORITHMS = ["auto", "ring"] as const;
export type AlgorithmChoice = (typeof ALGORITHMS)[number];
export type CheckMode = "values" | "none";

export interface Scenario {
  readonly name: string;
  readonly instance: string;
  readonly ranks: number;
  readonly ranksPerDevice: number;
  readonly nodes: number;
  readonly replicaGroups: readonly (readonly number[])[];
  readonly algorithm: AlgorithmChoice;
  /** Ring channels; undefined = the device preset's default. */
  readonly channels: number | undefined;
  /** Ring chunk bytes; undefined = the device preset's default. */
  readonly chunkBytes: number | undefined;
  readonly seed: number;
  readonly check: CheckMode;
  readonly ops: readonly OpSpec[];
}
