// The symbolic reference: which input bytes of which ranks each output byte must combine, as
// ranges (so it costs the schedule, not the payload), and the comparison with what a symbolic run
// delivered — each contribution exactly once, nothing else.
import { describeHow, HOW_NONE } from "../ir/dtypes.ts";
import type { OpName } from "../ir/spec.ts";

/** One input range that reaches an output range: rank `rank`'s input bytes from `at`. */
export interface Contribution {
  readonly rank: number;
  readonly at: number;
}

/** Output bytes [out, out + len) hold the reduction (or the copy, for one term) of these contributions. */
export interface ExpectedRange {
  readonly out: number;
  readonly len: number;
  readonly terms: readonly Contribution[];
}

export interface SymbolicOp {
  readonly op: OpName;
  /** all-to-all-v: bytes from group rank i to group rank j. */
  readonly counts?: readonly (readonly number[])[] | undefined;
  /** Pairs ops: [source, target] ranks. */
  readonly pairs?: readonly (readonly [number, number])[] | undefined;
}

/**
 * Each group rank's expected output, by the collective's definition: all-reduce = every rank's
 * whole input; all-gather = block j from group rank j; reduce-scatter = block k of every input;
 * all-to-all = block k of each input j in order; all-to-all-v = counts[i][k] bytes of input i;
 * all-gather-v = every input whole, in group-rank order;
 * permute / send / recv = the source's input (permute-reduce adds the target's own).
 */
export function expectedRanges(o: SymbolicOp, group: readonly number[], inBytes: number, outBytes: number): Map<number, ExpectedRange[]> {
  const n = group.length;
  const out = new Map<number, ExpectedRange[]>();
  const all = (at: number): Contribution[] => group.map((rank) => ({ rank, at }));
  group.forEach((rank, k) => {
    switch (o.op) {
      case "all-reduce":
        out.set(rank, [{ out: 0, len: outBytes, terms: all(0) }]);
        return;
      case "all-gather":
        out.set(rank, group.map((src, j) => ({ out: j * inBytes, len: inBytes, terms: [{ rank: src, at: 0 }] })));
        return;
      case "reduce-scatter":
        out.set(rank, [{ out: 0, len: outBytes, terms: all(k * outBytes) }]);
        return;
      case "all-to-all": {
        const b = inBytes / n;
        out.set(rank, group.map((src, j) => ({ out: j * b, len: b, terms: [{ rank: src, at: k * b }] })));
        return;
      }
      case "all-to-all-v": {
        const counts = o.counts!;
        let pos = 0;
        const ranges: ExpectedRange[] = [];
        group.forEach((src, i) => {
          const row = counts[i]!;
          const at = row.slice(0, k).reduce((s, c) => s + c, 0);
          if (row[k]! > 0) ranges.push({ out: pos, len: row[k]!, terms: [{ rank: src, at }] });
          pos += row[k]!;
        });
        out.set(rank, ranges);
        return;
      }
      case "all-gather-v": {
        // Group rank i's whole input lands at the sum of the blocks before it.
        let pos = 0;
        out.set(
          rank,
          group.flatMap((src, i) => {
            const len = o.counts![i]![0]!;
            const r = len > 0 ? [{ out: pos, len, terms: [{ rank: src, at: 0 }] }] : [];
            pos += len;
            return r;
          }),
        );
        return;
      }
      default:
        return;
    }
  });
  if (o.pairs) {
    const reduce = o.op === "permute-reduce" || o.op === "permute-reduce-implicit";
    for (const [src, dst] of o.pairs) {
      out.set(dst, [{ out: 0, len: outBytes, terms: reduce ? [{ rank: dst, at: 0 }, { rank: src, at: 0 }] : [{ rank: src, at: 0 }] }]);
    }
  }
  return out;
}

/** A symbolic run's output disagreeing with the reference: what a range lacks and what it holds besides. */
export interface SymbolicMismatch {
  readonly rank: number;
  /** Output bytes [start, end) of that rank. */
  readonly start: number;
  readonly end: number;
  /** Contributions expected and absent (each once per time absent), and contributions present but not expected. */
  readonly missing: string;
  readonly extra: string;
  readonly expectedTerms: number;
  /** The contributions are right but were combined by another arithmetic: what was, and what should be. */
  readonly arithmetic?: { readonly got: string; readonly expected: string };
}

/** The pieces a symbolic run read back: [start, end) of an output, the seed terms its first byte holds, how they were combined. */
export type SymbolicReader = (fn: (start: number, end: number, terms: readonly { id: number; at: number }[], how: number) => void) => void;

function describe(terms: readonly { rank: number; at: number }[], len: number): string {
  if (terms.length === 0) return "nothing";
  return terms.map((t) => (t.rank < 0 ? "bytes of no known value" : `rank ${t.rank} input [${t.at}, ${t.at + len})`)).join(" + ");
}

function key(t: { rank: number; at: number }): string {
  return `${t.rank}:${t.at}`;
}

/** The terms of `a` not matched one for one in `b` (multisets). */
function minus(a: readonly { rank: number; at: number }[], b: readonly { rank: number; at: number }[]): { rank: number; at: number }[] {
  const left = new Map<string, number>();
  for (const t of b) left.set(key(t), (left.get(key(t)) ?? 0) + 1);
  return a.filter((t) => {
    const n = left.get(key(t)) ?? 0;
    if (n > 0) left.set(key(t), n - 1);
    return n === 0;
  });
}

/**
 * Compare one rank's output with its expected ranges: every byte must hold exactly the expected
 * contributions (a term's input position follows the byte), each once, and several of them reduced
 * by `how` (the op's arithmetic, see reduceHow). The first difference, or undefined.
 */
export function compareSymbolic(rank: number, expected: readonly ExpectedRange[], read: SymbolicReader, how: number = HOW_NONE): SymbolicMismatch | undefined {
  const sorted = [...expected].sort((a, b) => a.out - b.out);
  let found: SymbolicMismatch | undefined;
  read((start, end, terms, combinedBy) => {
    if (found) return;
    // The expected ranges this piece overlaps; each overlap must match.
    for (const e of sorted) {
      const a = Math.max(start, e.out);
      const b = Math.min(end, e.out + e.len);
      if (a >= b) continue;
      const want = e.terms.map((t) => ({ rank: t.rank, at: t.at + (a - e.out) })).sort((x, y) => x.rank - y.rank || x.at - y.at);
      const got = terms.map((t) => ({ rank: t.id, at: t.at + (a - start) })).sort((x, y) => x.rank - y.rank || x.at - y.at);
      const missing = minus(want, got);
      const extra = minus(got, want);
      if (missing.length > 0 || extra.length > 0) {
        found = { rank, start: a, end: b, missing: describe(missing, b - a), extra: describe(extra, b - a), expectedTerms: want.length };
        return;
      }
      // Several contributions must have been reduced by the op's own arithmetic.
      if (want.length > 1 && combinedBy !== how) {
        found = { rank, start: a, end: b, missing: "nothing", extra: "nothing", expectedTerms: want.length, arithmetic: { got: describeHow(combinedBy), expected: describeHow(how) } };
        return;
      }
    }
  });
  return found;
}
