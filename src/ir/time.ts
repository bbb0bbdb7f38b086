// Simulated time: integer picoseconds.
import { InternalError } from "./errors.ts";

/** Simulated time or duration in integer picoseconds. */
export type Tick = number;

export const PS_PER_NS = 1_000;
export const PS_PER_US = 1_000_000;
export const PS_PER_S = 1_000_000_000_000;

export function assertTick(t: number, what: string): Tick {
  if (!Number.isSafeInteger(t) || t < 0) throw new InternalError(`${what} is not a non-negative integer picosecond count: ${t}`);
  return t;
}

/** Picoseconds to move `bytes` at `bytesPerSecond` (0 = infinitely fast), rounded up to a whole picosecond. */
export function transferPs(bytes: number, bytesPerSecond: number): Tick {
  if (bytesPerSecond <= 0 || bytes <= 0) return 0;
  return Math.ceil((bytes * PS_PER_S) / bytesPerSecond);
}
