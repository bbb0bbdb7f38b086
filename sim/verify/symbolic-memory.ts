// Symbolic payload: instead of bytes, each range of device memory carries the contributions that
// reached it — terms (seed, offset): "seed id's byte at the same relative position" — so a run
// needs memory for the schedule's distinct ranges, not for the payload. A copy moves terms, a CCE
// reduce unions its sources' terms (a term met twice stays twice: it was counted twice).
//
// A range's value is a shape (its terms, sorted, relative to the first term's base) and a shift,
// so moving a range changes one number and equal neighbours merge: an all-reduce's output buffer
// ends as one range whatever its descriptors were.
import { HOW_MIXED, HOW_NONE } from "../../src/ir/dtypes.ts";
import { SimError } from "../../src/ir/errors.ts";
import { RangeMap } from "./ranges.ts";

/** Writes between two looks at the room left (`SymbolicMemory`'s probe). */
const PROBE_EVERY = 1 << 14;
/**
 * Distinct shapes, or unions, the tracking holds at most: a JavaScript Map holds 2^24 entries,
 * and a look comes only every PROBE_EVERY writes (each adds a few), so this leaves room for them.
 */
const MAP_ROOM = (1 << 24) - (1 << 20);

function combined(a: number, b: number, how: number): number {
  if (a === HOW_MIXED || b === HOW_MIXED) return HOW_MIXED;
  return (a === HOW_NONE || a === how) && (b === HOW_NONE || b === how) ? how : HOW_MIXED;
}

/** Terms relative to the first one's base, and how they were combined; interned, so equal shapes are one object. */
interface Shape {
  readonly index: number;
  readonly how: number;
  readonly ids: Int32Array;
  /** base of term k minus base of term 0. */
  readonly rels: Float64Array;
}

/** Byte x of a range with this value holds, per term k, seed ids[k]'s byte x − (rels[k] + shift). */
interface Sym {
  readonly shape: Shape;
  readonly shift: number;
}

/** The seed of the term that stands for bytes of no known value reduced into a result. */
export const UNKNOWN = -1;

/** One term of a piece read back: the piece's first byte holds seed `id`'s byte `at`. */
export interface Term {
  readonly id: number;
  readonly at: number;
}

/** What a packet read, by stream position: pieces of [0, length) and the value each carried. */
export interface SymStream {
  readonly pieces: readonly { from: number; to: number; sym: Sym | undefined }[];
  /** Stream length (a replicated reduce's result lands once per destination). */
  readonly length: number;
}

export class SymbolicMemory {
  private readonly shapes = new Map<string, Shape>();
  private readonly unions = new Map<string, { shape: Shape; offset: number }>();
  private readonly memory = new Map<number, RangeMap<Sym>>();
  /**
   * Says why there is no room for more (the run stops: SIM1518), or nothing; asked every
   * PROBE_EVERY writes with the bytes the shapes' terms hold outside the JavaScript heap.
   */
  private readonly full: ((outsideBytes: number) => string | undefined) | undefined;
  private writes = 0;
  /**
   * Bytes of the shapes' term arrays: typed arrays, outside the heap that a look at the heap sees
   * (a 1,024-rank ring's reduce-scatter makes sets of up to 1,024 terms for every block and step:
   * gigabytes that a look at the heap alone never stopped).
   */
  private termBytes = 0;

  constructor(full?: (outsideBytes: number) => string | undefined) {
    this.full = full;
  }

  /** Every so many writes: stop the run while there is room to say why (its ranges and sets of contributions grow with the ranks). */
  private probe(): void {
    if (this.writes++ % PROBE_EVERY !== 0 || !this.full) return;
    const why = Math.max(this.shapes.size, this.unions.size) > MAP_ROOM ? `more than ${MAP_ROOM} distinct sets or unions of contributions` : this.full(this.termBytes);
    if (why !== undefined) throw new SimError("SIM1518", `symbolic tracking outgrew its memory (${this.writes} writes tracked, ${this.shapes.size} distinct sets of contributions): ${why}`, { value: this.writes });
  }

  private map(device: number): RangeMap<Sym> {
    let m = this.memory.get(device);
    if (!m) this.memory.set(device, (m = new RangeMap<Sym>((a, b) => a.shape === b.shape && a.shift === b.shift)));
    return m;
  }

  /** The interned shape of these terms (sorted by id, then base) combined `how`, and the first term's base. */
  private intern(terms: { id: number; base: number }[], how = HOW_NONE): Sym {
    terms.sort((a, b) => a.id - b.id || a.base - b.base);
    const shift = terms[0]!.base;
    const key = `${how}/` + terms.map((t) => `${t.id}:${t.base - shift}`).join(",");
    let shape = this.shapes.get(key);
    if (!shape) {
      shape = { index: this.shapes.size, how, ids: Int32Array.from(terms, (t) => t.id), rels: Float64Array.from(terms, (t) => t.base - shift) };
      this.shapes.set(key, shape);
      this.termBytes += shape.ids.byteLength + shape.rels.byteLength;
    }
    return { shape, shift };
  }

  /** The value of bytes that held none when a reduce read them: a term of seed −1. */
  private unknown(): Sym {
    return this.intern([{ id: UNKNOWN, base: 0 }]);
  }

  /** Device memory [off, off + len) holds seed `id`'s bytes from 0. */
  seed(device: number, off: number, len: number, id: number): void {
    this.map(device).set(off, off + len, this.intern([{ id, base: off }]));
  }

  /** Read sources at device offsets; a reduce (`how`: its arithmetic, see howOf) unions them element-wise, a copy concatenates them. */
  read(device: number, srcs: readonly { off: number; len: number }[], how?: number): SymStream {
    const m = this.map(device);
    if (how === undefined) {
      const pieces: { from: number; to: number; sym: Sym | undefined }[] = [];
      let pos = 0;
      for (const s of srcs) {
        // In stream coordinates: byte p = s.off + (p - start), so a base moves by start - s.off.
        const start = pos;
        m.visit(s.off, s.off + s.len, (a, b, v) => pieces.push({ from: start + a - s.off, to: start + b - s.off, sym: v && { shape: v.shape, shift: v.shift + start - s.off } }));
        pos += s.len;
      }
      return { pieces, length: pos };
    }
    // A reduce: every source has the stream's length; union them over the common refinement.
    const len = srcs[0]?.len ?? 0;
    let acc: { from: number; to: number; sym: Sym | undefined }[] = [{ from: 0, to: len, sym: undefined }];
    for (const s of srcs) {
      const next: { from: number; to: number; sym: Sym | undefined }[] = [];
      let k = 0;
      m.visit(s.off, s.off + len, (a, b, v) => {
        const from = a - s.off;
        const to = b - s.off;
        // Bytes with no known value poison what they are reduced into.
        const sym = v ? { shape: v.shape, shift: v.shift - s.off } : this.unknown();
        // Split the accumulated pieces at [from, to) and union each part with this source's value.
        while (k < acc.length && acc[k]!.to <= from) k++;
        for (let j = k; j < acc.length && acc[j]!.from < to; j++) {
          const x = acc[j]!;
          next.push({ from: Math.max(x.from, from), to: Math.min(x.to, to), sym: this.union(x.sym, sym, how) });
        }
      });
      acc = next;
    }
    return { pieces: acc, length: len };
  }

  /** The terms of both values, each kept (a term in both is there twice), combined by `how`. */
  private union(a: Sym | undefined, b: Sym | undefined, how: number): Sym | undefined {
    if (!a) return b;
    if (!b) return a;
    const key = `${a.shape.index}|${b.shape.index}|${b.shift - a.shift}|${how}`;
    let u = this.unions.get(key);
    if (!u) {
      const terms: { id: number; base: number }[] = [];
      a.shape.ids.forEach((id, k) => terms.push({ id, base: a.shape.rels[k]! }));
      b.shape.ids.forEach((id, k) => terms.push({ id, base: b.shape.rels[k]! + b.shift - a.shift }));
      // Bytes of no known value poison a result once: counting them again says nothing more (and
      // scratch bytes a schedule reduces into themselves step after step would double every step).
      const poison = terms.findIndex((t) => t.id === UNKNOWN);
      const kept = poison < 0 ? terms : terms.filter((t, k) => t.id !== UNKNOWN || k === poison);
      const sym = this.intern(kept, combined(a.shape.how, b.shape.how, how));
      u = { shape: sym.shape, offset: sym.shift };
      this.unions.set(key, u);
    }
    return { shape: u.shape, shift: a.shift + u.offset };
  }

  /** Stream bytes [at, at + len) land at device memory [off, off + len). */
  write(device: number, off: number, len: number, stream: SymStream, at: number): void {
    this.probe();
    const m = this.map(device);
    // The common case: one piece of the stream covers the write.
    const one = stream.pieces.find((p) => p.from <= at && p.to >= at + len);
    if (one) {
      if (one.sym) m.set(off, off + len, { shape: one.sym.shape, shift: one.sym.shift + off - at });
      else m.update(off, off + len, () => undefined);
      return;
    }
    // Clear first, so bytes the stream carried no value for hold none.
    m.update(off, off + len, () => undefined);
    for (const p of stream.pieces) {
      const a = Math.max(p.from, at);
      const b = Math.min(p.to, at + len);
      if (a >= b || !p.sym) continue;
      m.set(off + a - at, off + b - at, { shape: p.sym.shape, shift: p.sym.shift + off - at });
    }
  }

  /** Device memory [off, off + len) has no known value (written by something not tracked). */
  clear(device: number, off: number, len: number): void {
    this.map(device).update(off, off + len, () => undefined);
  }

  /** Read back [off, off + len): each piece relative to `off`, with its terms (none: no value) and how they were combined. */
  visit(device: number, off: number, len: number, fn: (start: number, end: number, terms: readonly Term[], how: number) => void): void {
    this.map(device).visit(off, off + len, (a, b, v) => {
      const terms: Term[] = [];
      if (v) v.shape.ids.forEach((id, k) => terms.push({ id, at: a - (v.shape.rels[k]! + v.shift) }));
      fn(a - off, b - off, terms, v ? v.shape.how : HOW_NONE);
    });
  }
}
