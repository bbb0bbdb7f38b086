// What the simulator reports to an observer while it runs (traces, utilisation); optional.
import type { Tick } from "../src/ir/time.ts";

/** Receives spans and counter samples in simulated picoseconds. Every method is optional to call. */
export interface TraceSink {
  /** A TopSP core ran op entry `op` on its channels. */
  entry(device: number, topsp: number, op: number, channels: readonly number[], start: Tick, end: Tick): void;
  /** A channel waited on a semaphore until `end`. */
  wait(device: number, topsp: number, channel: number, sema: number, role: string, target: number, start: Tick, end: Tick): void;
  /** A DMA engine ran one packet from `start` until its last byte landed at `end`. */
  packet(device: number, engine: number, queue: number, kind: "copy" | "cce", bytes: number, dst: string, start: Tick, end: Tick): void;
  /** A link direction was busy serialising `bytes`. */
  link(name: string, bytes: number, start: Tick, end: Tick): void;
  /** A semaphore took a new value. */
  sema(device: number, topsp: number, sema: number, value: number, t: Tick): void;
}
