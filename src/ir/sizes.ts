// Sizes as nccom-test accepts them ("2kb", "1MB", "1G", plain bytes) and sweep size lists.
export class SizeError extends Error {}

const UNITS: Record<string, number> = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };

/** Parse `n[k|m|g|t][b|ib]` (case-insensitive, binary multiples) into a whole number of bytes >= 1. */
export function parseSize(text: string, flag: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?$/i.exec(text.trim());
  if (!m) throw new SizeError(`${flag}: "${text}" is not a size (use bytes, or a number with K, M, G, e.g. 64K, 1MB, 2gb)`);
  const bytes = Number(m[1]) * UNITS[m[2]!.toLowerCase()]!;
  if (Number.isInteger(bytes) && bytes > Number.MAX_SAFE_INTEGER) throw new SizeError(`${flag}: "${text}" is more than 2^53 bytes, past any size ccsim runs`);
  if (!Number.isSafeInteger(bytes) || bytes < 1) throw new SizeError(`${flag}: "${text}" is not a whole number of bytes >= 1`);
  return bytes;
}

export interface SweepRange {
  readonly min: number;
  readonly max: number;
  /** Multiply by `factor` each step, or add `step` bytes. */
  readonly factor?: number;
  readonly step?: number;
}

export const MAX_SWEEP_SIZES = 4096;

/** The sizes of a sweep, min to max inclusive. */
export function sweepSizes(r: SweepRange): number[] {
  if (r.min > r.max) throw new SizeError(`minimum size ${r.min} is above the maximum ${r.max}`);
  if (r.factor !== undefined && r.step !== undefined) throw new SizeError("give a step factor (-f) or a step size (-i), not both");
  const out: number[] = [];
  // Counted before any is built: a range of a trillion sizes is refused, not listed.
  if (r.step !== undefined) {
    if (!(r.step >= 1)) throw new SizeError(`step size ${r.step} must be at least 1 byte`);
    const n = Math.floor((r.max - r.min) / r.step) + 1;
    if (n > MAX_SWEEP_SIZES) throw new SizeError(`-b ${r.min} -e ${r.max} -i ${r.step} makes ${n} sizes; at most ${MAX_SWEEP_SIZES}`);
    for (let s = r.min; s <= r.max; s += r.step) out.push(s);
  } else {
    const f = r.factor ?? 2;
    if (!Number.isInteger(f) || f < 2) throw new SizeError(`step factor ${f} must be an integer >= 2`);
    for (let s = r.min; s <= r.max; s *= f) out.push(s);
  }
  return out;
}
