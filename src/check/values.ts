// Inputs generated from the seed per rank and op, chosen so that every reduction is exact in any
// order (the nccl-tests technique): floats carry small integers whose sums stay exactly
// representable, integers wrap. The reference collectives are computed here, independently of the
// simulator's CCE model, and compared bit for bit.
import seedrandom from "seedrandom";
import { dtypeSize, type Dtype, type ReduceOp } from "../ir/dtypes.ts";
import type { RingOpName } from "../ir/spec.ts";
import { InternalError } from "../ir/errors.ts";

/**
 * A rank's values (generated, and the references made of them): integers, each exactly an
 * element of the type. The integer types and fp32 keep them in the type's own array, whose bytes
 * are the input's (`toBytes` makes none: a values check at 64 MiB a rank made and touched its
 * inputs twice); the narrow floats, whose bytes are encodings, in an integer array as wide.
 */
export type Values = Uint8Array | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array | Float32Array;
/** Values as the reference functions take them (a test's plain array too). */
export type ValueList = Values | readonly number[];

/** The array that holds a type's values: its own where its elements are them, else as wide an integer one. */
const VALUES_ARRAY: Record<Dtype, new (n: number) => Values> = {
  uint8: Uint8Array,
  int8: Int8Array,
  uint16: Uint16Array,
  int16: Int16Array,
  uint32: Uint32Array,
  int32: Int32Array,
  fp32: Float32Array,
  bf16: Int16Array,
  fp16: Int16Array,
  fp8e4: Int8Array,
  fp8e5: Int8Array,
};

/** Types whose values array is their bytes (little-endian hosts). */
const OWN_BYTES = new Set<Dtype>(new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? ["uint8", "int8", "uint16", "int16", "uint32", "int32", "fp32"] : []);

/** A zeroed array of `n` values of type `d`. */
function valuesOf(d: Dtype, n: number): Values {
  return new VALUES_ARRAY[d](n);
}

/** Largest |integer| exactly representable with the type's significand. */
const EXACT_LIMIT: Partial<Record<Dtype, number>> = { bf16: 256, fp16: 2048, fp32: 1 << 24, fp8e4: 16, fp8e5: 8 };
const INT_RANGE: Partial<Record<Dtype, [number, number]>> = {
  uint8: [0, 0xff],
  int8: [-128, 127],
  uint16: [0, 0xffff],
  int16: [-32768, 32767],
  uint32: [0, 0xffffffff],
  int32: [-0x80000000, 0x7fffffff],
};

/** Integer-valued element `v` of dtype `d` as little-endian bytes (exact, or an InternalError). */
export function encodeValue(d: Dtype, v: number, out: DataView, off: number): void {
  switch (d) {
    case "uint8":
      return out.setUint8(off, v);
    case "int8":
      return out.setInt8(off, v);
    case "uint16":
      return out.setUint16(off, v, true);
    case "int16":
      return out.setInt16(off, v, true);
    case "uint32":
      return out.setUint32(off, v, true);
    case "int32":
      return out.setInt32(off, v, true);
    case "fp32":
      return out.setFloat32(off, v, true);
    case "bf16":
    case "fp16":
      return out.setUint16(off, exactHalf(d, v), true);
    case "fp8e4":
    case "fp8e5":
      return out.setUint8(off, exactHalf(d, v));
  }
}

/** The narrow floats' layouts: total bits, mantissa bits, exponent bias, first exponent field that is not a finite value's. */
type Narrow = "bf16" | "fp16" | "fp8e4" | "fp8e5";
const NARROW: { readonly [K in Narrow]: { bits: number; mant: number; bias: number; topExp: number } } = {
  bf16: { bits: 16, mant: 7, bias: 127, topExp: 255 },
  fp16: { bits: 16, mant: 10, bias: 15, topExp: 31 },
  // E4M3 (OCP FN): exponent 15 still holds finite values (only mantissa 111 is NaN); the integers used stay far below.
  fp8e4: { bits: 8, mant: 3, bias: 7, topExp: 16 },
  fp8e5: { bits: 8, mant: 2, bias: 15, topExp: 31 },
};
const HALF_CACHE: { [K in Narrow]: Map<number, number> } = { bf16: new Map(), fp16: new Map(), fp8e4: new Map(), fp8e5: new Map() };
/** Integers of magnitude below this (every generated input and reference value) are memoised in a table, not a map. */
const HALF_DENSE = 1 << 16;
const HALF_TABLE: { [K in Narrow]?: Int32Array } = {};

/** Encode an integer exactly into bf16 / fp16 / fp8 bits from its binary expansion (memoised). */
function exactHalf(d: Narrow, v: number): number {
  if (v > -HALF_DENSE && v < HALF_DENSE && Number.isInteger(v)) {
    // (-1: not yet encoded; every encoding is a non-negative bit pattern.)
    const table = (HALF_TABLE[d] ??= new Int32Array(2 * HALF_DENSE).fill(-1));
    let bits = table[v + HALF_DENSE]!;
    if (bits < 0) table[v + HALF_DENSE] = bits = exactHalfUncached(d, v);
    return bits;
  }
  const cache = HALF_CACHE[d];
  let bits = cache.get(v);
  if (bits === undefined) {
    bits = exactHalfUncached(d, v);
    cache.set(v, bits);
  }
  return bits;
}

function exactHalfUncached(d: Narrow, v: number): number {
  if (!Number.isInteger(v)) throw new InternalError(`${d} reference value ${v} is not an integer`);
  const { bits, mant, bias, topExp } = NARROW[d];
  const sign = v < 0 ? 1 << (bits - 1) : 0;
  const a = Math.abs(v);
  if (a === 0) return sign;
  const e = Math.floor(Math.log2(a));
  const m = (a / 2 ** e - 1) * 2 ** mant;
  if (!Number.isInteger(m) || e + bias >= topExp) throw new InternalError(`${v} is not exact in ${d}`);
  return sign | ((e + bias) << mant) | m;
}

/** A narrow float's value from its bits (NaN / infinity patterns as their formats define them). */
function narrowValue(d: Narrow, h: number): number {
  const { bits, mant, bias } = NARROW[d];
  const expBits = bits - 1 - mant;
  const s = (h >> (bits - 1)) & 1 ? -1 : 1;
  const e = (h >> mant) & ((1 << expBits) - 1);
  const m = h & ((1 << mant) - 1);
  const top = (1 << expBits) - 1;
  if (e === top && d !== "fp8e4") return m ? NaN : s * Infinity;
  if (e === top && m === (1 << mant) - 1) return NaN;
  return e === 0 ? s * m * 2 ** (1 - bias - mant) : s * (1 + m / 2 ** mant) * 2 ** (e - bias);
}

export function decodeValue(d: Dtype, view: DataView, off: number): number {
  switch (d) {
    case "uint8":
      return view.getUint8(off);
    case "int8":
      return view.getInt8(off);
    case "uint16":
      return view.getUint16(off, true);
    case "int16":
      return view.getInt16(off, true);
    case "uint32":
      return view.getUint32(off, true);
    case "int32":
      return view.getInt32(off, true);
    case "fp32":
      return view.getFloat32(off, true);
    case "bf16":
    case "fp16":
      return narrowValue(d, view.getUint16(off, true));
    case "fp8e4":
    case "fp8e5":
      return narrowValue(d, view.getUint8(off));
  }
}

/**
 * Uniform numbers in [0, 1): Marsaglia's xorshift128, its state drawn from seedrandom's alea of
 * the seed string. A few integer operations a number (alea's own, about three times as many,
 * were a tenth of a values-checked run at 64 MiB a rank); 2^-32 apart, which every type's range
 * here needs.
 */
class Uniform {
  private a: number;
  private b: number;
  private c: number;
  private d: number;
  constructor(seed: string) {
    const r = seedrandom.alea(seed);
    // (A state of all zeros stays zero: the first word is made odd.)
    this.a = r.int32() | 1;
    this.b = r.int32();
    this.c = r.int32();
    this.d = r.int32();
  }
  next(): number {
    let t = this.d;
    const s = this.a;
    this.d = this.c;
    this.c = this.b;
    this.b = s;
    t ^= t << 11;
    t ^= t >>> 8;
    this.a = t ^ s ^ (s >>> 19);
    return (this.a >>> 0) / 4294967296;
  }
  /**
   * `out[i] = lo + Math.floor(next() * width)` for i < count: the same numbers, the state in locals
   * meanwhile (fields written with every number box the words above 2^30, one allocation each).
   * Made a block at a time in an int32 array and copied into `out` by `set`, which converts as an
   * element store does (modulo the type's span: a uint32's number from its bits): a loop storing into
   * each type's array in turn (a process that checks several types) was a store of any kind, 15
   * times slower than one kind, and a block of doubles cost a nanosecond an element to convert.
   */
  fill(out: Values, count: number, lo: number, width: number): void {
    let a = this.a;
    let b = this.b;
    let c = this.c;
    let d = this.d;
    const block = ACC_BLOCK;
    for (let at = 0; at < count; at += BLOCK) {
      const n = Math.min(BLOCK, count - at);
      for (let i = 0; i < n; i++) {
        let t = d;
        const s = a;
        d = c;
        c = b;
        b = s;
        t ^= t << 11;
        t ^= t >>> 8;
        a = t ^ s ^ (s >>> 19);
        block[i] = (lo + Math.floor(((a >>> 0) / 4294967296) * width)) | 0;
      }
      out.set(block.subarray(0, n), at);
    }
    this.a = a;
    this.b = b;
    this.c = c;
    this.d = d;
  }
}

/**
 * The values loops' blocks: arithmetic on elements of one kind whichever the type's array, moved in
 * and out of it by `set` and `subarray`. Every type's values are integers that an int32 holds
 * modulo 2^32 (a uint32's as its bits, read unsigned through the `_U` views where an order counts).
 */
const BLOCK = 1 << 14;
const ACC_BLOCK = new Int32Array(BLOCK);
const NEXT_BLOCK = new Int32Array(BLOCK);
const ACC_U = new Uint32Array(ACC_BLOCK.buffer);
const NEXT_U = new Uint32Array(NEXT_BLOCK.buffer);

/** Elements [start, end) of `x` (a view, for a typed array). */
function part(x: ValueList, start: number, end: number): ArrayLike<number> {
  return ArrayBuffer.isView(x) ? x.subarray(start, end) : x.slice(start, end);
}

/**
 * The element-wise reduce of `sources` (at least one, of one length) in type `d`: source by source
 * over a block of elements, a loop per op (`combine`'s arithmetic without its lookup and modulo per
 * element: the integer types' sums wrap modulo 2^32 here and modulo their span as the type's array
 * stores them, as each partial sum would; a float type's sums of these integers stay exact within
 * an int32; max and min stay in range, unsigned for uint32).
 */
function reduceOf(d: Dtype, reduce: ReduceOp, sources: readonly ValueList[]): Values {
  const len = sources[0]!.length;
  const out = valuesOf(d, len);
  const acc = ACC_BLOCK;
  const next = NEXT_BLOCK;
  const unsigned = d === "uint32";
  for (let at = 0; at < len; at += BLOCK) {
    const end = Math.min(len, at + BLOCK);
    const m = end - at;
    acc.set(part(sources[0]!, at, end));
    for (let r = 1; r < sources.length; r++) {
      next.set(part(sources[r]!, at, end));
      if (reduce === "sum") for (let i = 0; i < m; i++) acc[i] = (acc[i]! + next[i]!) | 0;
      else if (unsigned) {
        const x = ACC_U;
        const y = NEXT_U;
        if (reduce === "max") for (let i = 0; i < m; i++) x[i] = Math.max(x[i]!, y[i]!);
        else for (let i = 0; i < m; i++) x[i] = Math.min(x[i]!, y[i]!);
      } else if (reduce === "max") for (let i = 0; i < m; i++) acc[i] = Math.max(acc[i]!, next[i]!);
      else for (let i = 0; i < m; i++) acc[i] = Math.min(acc[i]!, next[i]!);
    }
    out.set(acc.subarray(0, m), at);
  }
  return out;
}

/**
 * The integer values rank `rank` (of `rankSpace` global ranks) contributes to op `opIndex`
 * (deterministic in the seed), summed over at most `nranks` ranks.
 */
export function generateValues(seed: number, opIndex: number, rank: number, d: Dtype, count: number, reduce: ReduceOp, nranks: number, rankSpace = nranks): Values {
  const u = new Uniform(`ccsim/${seed}/op${opIndex}/rank${rank}`);
  const out = valuesOf(d, count);
  const floatLimit = EXACT_LIMIT[d];
  if (floatLimit !== undefined && reduce === "sum" && nranks > floatLimit) {
    // More summands than the type's exact integers (fp8): element i is ±1 or 0 on the ranks of
    // one residue class mod k and 0 elsewhere, so at most floatLimit terms of any group are
    // nonzero and every partial sum, in any order, stays exact.
    const k = Math.ceil(rankSpace / floatLimit);
    const block = ACC_BLOCK;
    for (let at = 0; at < count; at += BLOCK) {
      const n = Math.min(BLOCK, count - at);
      for (let i = 0; i < n; i++) block[i] = rank % k === (at + i) % k ? Math.floor(u.next() * 3) - 1 : 0;
      out.set(block.subarray(0, n), at);
    }
  } else if (floatLimit !== undefined) {
    // Sums of nranks values in [-m, m] stay within the exact range.
    const m = reduce === "sum" ? Math.max(1, Math.min(1000, Math.floor(floatLimit / nranks))) : Math.min(1000, floatLimit);
    u.fill(out, count, -m, 2 * m + 1);
  } else {
    const [lo, hi] = INT_RANGE[d]!;
    u.fill(out, count, lo, hi - lo + 1);
  }
  return out;
}

export function toBytes(d: Dtype, values: ValueList): Uint8Array {
  // The type's own array (little-endian): its bytes, shared, not copied.
  if (OWN_BYTES.has(d) && values instanceof VALUES_ARRAY[d]) return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  const es = dtypeSize(d);
  const out = new Uint8Array(values.length * es);
  const v = new DataView(out.buffer);
  const n = values.length;
  // One loop per encoding (a switch per element was a tenth of a values-checked run).
  if (d === "bf16" || d === "fp16" || d === "fp8e4" || d === "fp8e5") {
    // (The table `exactHalf` keeps, read here: a call per element was most of a narrow float input's making.)
    const table = (HALF_TABLE[d] ??= new Int32Array(2 * HALF_DENSE).fill(-1));
    const wide = es === 2;
    for (let i = 0; i < n; i++) {
      const x = values[i]!;
      const known = x > -HALF_DENSE && x < HALF_DENSE ? table[x + HALF_DENSE]! : -1;
      const bits = known >= 0 && Number.isInteger(x) ? known : exactHalf(d, x);
      if (wide) v.setUint16(2 * i, bits, true);
      else out[i] = bits;
    }
  }
  else if (d === "fp32") for (let i = 0; i < n; i++) v.setFloat32(4 * i, values[i]!, true);
  else for (let i = 0; i < n; i++) encodeValue(d, values[i]!, v, i * es);
  return out;
}

/** Reduce two integer-valued elements in dtype `d`'s arithmetic (integers wrap). */
function combine(d: Dtype, op: ReduceOp, a: number, b: number): number {
  const r = op === "sum" ? a + b : op === "max" ? Math.max(a, b) : Math.min(a, b);
  const range = INT_RANGE[d];
  if (!range) return r;
  const span = range[1] - range[0] + 1;
  return ((((r - range[0]) % span) + span) % span) + range[0];
}

/**
 * Reference outputs per group rank: all-reduce = element-wise reduce of all inputs; all-gather =
 * concatenation of inputs in group-rank order; reduce-scatter = block k of the reduced input.
 */
export function referenceValues(op: RingOpName, d: Dtype, reduce: ReduceOp, inputs: readonly ValueList[]): Values[] {
  const n = inputs.length;
  if (op === "all-gather") {
    const all = concatValues(d, inputs);
    return inputs.map(() => all);
  }
  const reduced = reduceOf(d, reduce, inputs);
  if (op === "all-reduce") return inputs.map(() => reduced);
  const block = reduced.length / n;
  return inputs.map((_, k) => reduced.slice(k * block, (k + 1) * block));
}

export interface Mismatch {
  readonly rank: number;
  readonly index: number;
  readonly expected: number;
  readonly got: number;
}

const ENCODED = new WeakMap<ValueList, Uint8Array>();

/** The expected values as bytes; references shared by several ranks are encoded once. */
export function expectedBytes(d: Dtype, values: ValueList): Uint8Array {
  let b = ENCODED.get(values);
  if (!b) {
    b = toBytes(d, values);
    ENCODED.set(values, b);
  }
  return b;
}

/**
 * True when read-back walked a piece at a time (`each`, as the simulator's result gives it: no
 * copy of an output made) holds exactly the expected values' bytes, `len` of them.
 */
export function matches(d: Dtype, expected: ValueList, len: number, each: (fn: (bytes: Uint8Array, at: number) => boolean) => void): boolean {
  const want = expectedBytes(d, expected);
  if (want.length !== len) return false;
  let same = true;
  each((got, at) => (same = Buffer.from(want.buffer, want.byteOffset + at, got.length).equals(got)));
  return same;
}

/** First element where `got` differs bit for bit from the expected values, or undefined. */
export function compare(d: Dtype, rank: number, expected: ValueList, got: Uint8Array): Mismatch | undefined {
  const es = dtypeSize(d);
  const want = expectedBytes(d, expected);
  if (want.length !== got.length) return { rank, index: Math.min(want.length, got.length) / es, expected: Number.NaN, got: Number.NaN };
  // Equal bytes (the usual case) are told by one comparison; the loop finds where they differ.
  if (Buffer.from(want.buffer, want.byteOffset, want.length).equals(got)) return undefined;
  for (let i = 0; i < want.length; i++) {
    if (want[i] !== got[i]) {
      const e = Math.floor(i / es);
      return { rank, index: e, expected: expected[e]!, got: decodeValue(d, new DataView(got.buffer, got.byteOffset, got.length), e * es) };
    }
  }
  return undefined;
}

/** all-to-all: rank j's output is block j of every rank's input, in rank order. */
export function referenceAllToAll(d: Dtype, inputs: readonly ValueList[]): Values[] {
  const n = inputs.length;
  // (Into arrays of their final length, each source's block copied by `set`: an output per rank is as big as an input.)
  const length = inputs.reduce((k, x) => k + x.length / n, 0);
  return inputs.map((_, j) => {
    const out = valuesOf(d, length);
    let o = 0;
    for (const x of inputs) {
      const block = x.length / n;
      out.set(part(x, j * block, (j + 1) * block), o);
      o += block;
    }
    return out;
  });
}

/** all-to-all-v: `counts[i][j]` elements from i to j; rank j's output concatenates them by source. */
export function referenceAllToAllV(d: Dtype, inputs: readonly ValueList[], counts: readonly (readonly number[])[]): Values[] {
  // Where source i's block for j starts: its counts before j, summed once a source (not once an output).
  const starts = counts.map((row) => {
    let at = 0;
    return row.map((c) => (at += c) - c);
  });
  return inputs.map((_, j) => {
    const out = valuesOf(d, inputs.reduce((n, _x, i) => n + counts[i]![j]!, 0));
    let o = 0;
    inputs.forEach((x, i) => {
      const start = starts[i]![j]!;
      out.set(part(x, start, start + counts[i]![j]!), o);
      o += counts[i]![j]!;
    });
    return out;
  });
}

/** permute (and send / recv): the target's output is the source's input; permute-reduce reduces it with the target's own. */
export function referencePermute(d: Dtype, reduce: ReduceOp | undefined, inputs: ReadonlyMap<number, ValueList>, pairs: readonly (readonly [number, number])[]): Map<number, ValueList> {
  const out = new Map<number, ValueList>();
  for (const [src, dst] of pairs) {
    const a = inputs.get(src)!;
    const b = inputs.get(dst)!;
    if (reduce === undefined) {
      out.set(dst, a);
      continue;
    }
    out.set(dst, reduceOf(d, reduce, [b, a]));
  }
  return out;
}

/** The inputs one after another (all-gather), in an array of the type's values. */
export function concatValues(d: Dtype, inputs: readonly ValueList[]): Values {
  const all = valuesOf(d, inputs.reduce((n, x) => n + x.length, 0));
  let at = 0;
  for (const x of inputs) {
    all.set(x, at);
    at += x.length;
  }
  return all;
}

/** One element of the reduction in the element type's arithmetic. */
export function combineValues(d: Dtype, op: ReduceOp, a: number, b: number): number {
  return combine(d, op, a, b);
}
