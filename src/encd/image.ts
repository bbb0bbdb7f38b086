// The program image: what the emitter hands the simulator — byte streams and their placement, and
// nothing of the composer. sim/ reads images (and the format decoders) only; the builder that
// writes them is program.ts.
import type { DescPages } from "./pages.ts";

/** The slot scratchpad a mesh-tape program's step stream lives in. */
export const MESH_SLOT = 16;

export interface TopspImage {
  readonly index: number;
  /** spad_ctrl entries, one per op, 8 bytes each. */
  readonly ctrlSpad: Uint8Array;
  readonly opNum: number;
  /** ring_channels[32] of the algorithm config region (148 bytes each). */
  readonly ringConfig: Uint8Array;
  /** Slot scratchpads indexed by spad_slot_idx: each a stream of spad_slot_entry steps. */
  readonly slotSpad: readonly Uint8Array[];
  /** The mesh event tape (80-byte records, the per-arch device capacity), after the ring region. */
  readonly meshConfig: Uint8Array;
  /** One 296-byte neff_barrier_config per ctrl entry: the device barrier run after that entry. */
  readonly barrierConfig: Uint8Array;
  /**
   * Host bookkeeping, not device bytes: the reported op each reporter entry completes, in entry
   * order (a TopSP of one stream reports only its stream's ops). Absent: its k-th reporter entry completes op k.
   */
  readonly reportOps?: readonly number[];
}

export interface QueueImage {
  readonly engine: number;
  readonly queue: number;
  /** The whole TX and RX rings (empty when the rings are streamed). */
  readonly tx: Uint8Array;
  readonly rx: Uint8Array;
  /** A streamed queue: its descriptors arrive in order through the program's feed. */
  readonly streamed?: StreamedRings;
}

/**
 * Rings that are filled while the program runs, as the runtime re-arms a finite ring in place:
 * the counts are known up front, the descriptors arrive (through `ProgramImage.feed`) before the
 * engine reaches them, and the pages it has run are dropped.
 */
export interface StreamedRings {
  readonly txCount: number;
  readonly rxCount: number;
  readonly tx: DescPages;
  readonly rx: DescPages;
  /** The RX descriptor that ends each op (index -> its 16 bytes), for the validate pass. */
  readonly rxPins: ReadonlyMap<number, Uint8Array>;
}

/** The producer of streamed rings: each call emits the next batch of descriptors; false once all are out. */
export interface DescriptorFeed {
  pull(): boolean;
  /** The run is over: stop producing (a producer elsewhere is let go). */
  close?(): void;
}

export interface MemorySegment {
  readonly addr: number;
  readonly bytes: Uint8Array;
}

export interface DeviceImage {
  readonly device: number;
  readonly topsps: readonly TopspImage[];
  readonly queues: readonly QueueImage[];
  /** Initial memory contents (constants; inputs when values are checked). */
  readonly memory: MemorySegment[];
  /** HBM ranges that hold collective payload; a timing-only run keeps no bytes for them. */
  readonly payload: readonly { readonly addr: number; readonly bytes: number }[];
  /** Other HBM the program may write (the pad word its no-op descriptors copy onto itself). */
  readonly scratch?: readonly { readonly addr: number; readonly bytes: number }[];
  /** Initial semaphore values (credit pools). */
  readonly semaphores: readonly { readonly topsp: number; readonly sema: number; readonly value: number }[];
  /** Where counting semaphores end (completions, proxy triggers); every other one ends where it started. */
  readonly finalSemaphores?: readonly { readonly topsp: number; readonly sema: number; readonly value: number }[];
  /**
   * Network proxy work queues: the proxy runs entry k once the semaphore has reached the sum of
   * triggers so far — every one of `folds` consecutive semaphores from `sema` (default 1), when the
   * DMA folds that feed the queue count on a semaphore each.
   */
  readonly proxyQueues: readonly { readonly topsp: number; readonly sema: number; readonly folds?: number; readonly fifo: Uint8Array }[];
}

export interface ProgramImage {
  readonly format: "ccsim-program-image";
  readonly version: 1;
  readonly arch: number;
  /** Nodes, each with `devicesPerNode` device ids (node k's device d is k * devicesPerNode + d). */
  readonly nodes: number;
  readonly devicesPerNode: number;
  readonly devices: readonly DeviceImage[];
  /**
   * A folded image: the program of `units` units of `unitDevices` device ids each (pods, or single
   * devices) whose programs are alike up to the unit's place (the emitter checked it), holding unit
   * 0's devices only. Traffic to another unit's device lands on unit 0's device in the same place,
   * as the unit that sends to unit 0 at that moment would have it.
   */
  readonly fold?: { readonly units: number; readonly unitDevices: number };
  /** Present when queues are streamed: the producer of their descriptors. */
  readonly feed?: DescriptorFeed;
}

