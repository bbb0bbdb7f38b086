// Simulated time: integer picoseconds.

/** Simulated time or duration in integer picoseconds. */
export type Tick = number;

/**
 * Zero for a field that will count past 2^31 (a time in picoseconds, bytes moved): V8 takes -0 for
 * a double where 0 would be a small integer, so the field is a double from the start instead of
 * changing representation (and throwing away the code that reads it) when it first passes 2^31.
 * It adds, compares and prints as 0.
 */
export const WIDE_ZERO = -0;

/** @public (the unit table, whole) */
export const PS_PER_NS = 1_000;
/** @public */
export const PS_PER_US = 1_000_000;
export const PS_PER_S = 1_000_000_000_000;

/** Picoseconds to move `bytes` at `bytesPerSecond` (0 = infinitely fast), rounded up to a whole picosecond. */
export function transferPs(bytes: number, bytesPerSecond: number): Tick {
  if (bytesPerSecond <= 0 || bytes <= 0) return 0;
  return Math.ceil((bytes * PS_PER_S) / bytesPerSecond);
}
