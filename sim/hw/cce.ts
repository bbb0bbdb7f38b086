// The in-DMA compute engine (CCE): element-wise ADD / MAX / MIN over SDMA dtypes.
// Floats are computed in fp32 and rounded to nearest-even into the element type; integers wrap.
import { SdmaCceType } from "../../src/ir/enums.ts";
import { SimError } from "../../src/ir/errors.ts";
import { FP8, type MiniFloat } from "../../src/ir/dtypes.ts";
import { LITTLE_ENDIAN } from "../../src/encd/bits.ts";
import { copyBytes } from "./arena.ts";

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function bf16ToF32(h: number): number {
  u32[0] = (h & 0xffff) << 16;
  return f32[0]!;
}

export function f32ToBf16(x: number): number {
  f32[0] = x;
  const b = u32[0]!;
  if ((b & 0x7f800000) === 0x7f800000 && (b & 0x7fffff) !== 0) return ((b >>> 16) | 0x40) & 0xffff; // quiet NaN
  return ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
}

/** Every fp16 code's value (made at the first use). */
let F16: Float64Array | undefined;

export function f16ToF32(h: number): number {
  return (F16 ??= f16Table())[h & 0xffff]!;
}

function f16Table(): Float64Array {
  const t = new Float64Array(65536);
  for (let h = 0; h < 65536; h++) t[h] = f16Value(h);
  return t;
}

function f16Value(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 0x1f) return m ? Number.NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

export function f32ToF16(x: number): number {
  f32[0] = x;
  const b = u32[0]!;
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  let mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let h = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && h & 1)) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++;
  return sign | h;
}

/**
 * Per 8-bit format: each code's value, and the positive finite ones in code order (codes 0 up to
 * the largest finite: each larger than the one before), which `f32ToMini` rounds to by bisection.
 */
interface MiniTable {
  readonly values: Float64Array;
  readonly positive: Float64Array;
}
const MINI = new Map<MiniFloat, MiniTable>();
function miniTables(f: MiniFloat): MiniTable {
  let t = MINI.get(f);
  if (!t) {
    const values = new Float64Array(256);
    for (let h = 0; h < 256; h++) values[h] = miniValue(h, f);
    t = { values, positive: values.slice(0, largestFinite(f) + 1) };
    MINI.set(f, t);
  }
  return t;
}

/** The largest finite code: E5M2's below its infinity exponent, E4M3's one mantissa step below NaN. */
function largestFinite(f: MiniFloat): number {
  const top = (1 << f.expBits) - 1;
  const mantMax = (1 << f.mantBits) - 1;
  return f.ieee ? ((top - 1) << f.mantBits) | mantMax : (top << f.mantBits) | (mantMax - 1);
}

/** An 8-bit float's value (a code's, looked up). */
export function miniToF32(h: number, f: MiniFloat): number {
  return miniTables(f).values[h & 0xff]!;
}

/**
 * The nearest 8-bit float (ties to even); E4M3 saturates to its largest finite, E5M2 overflows to
 * infinity. Within the finite range, the two codes around the magnitude are found by bisection and
 * the nearer taken (at the midpoint, the even code: its mantissa's last bit is the code's).
 */
export function f32ToMini(x: number, f: MiniFloat): number {
  const v = miniTables(f).positive;
  const a = x < 0 ? -x : x;
  // (NaN and magnitudes past the largest finite: rounded in full.)
  if (!(a <= v[v.length - 1]!)) return roundToMini(x, f);
  const sign = x < 0 || (x === 0 && 1 / x < 0) ? 0x80 : 0;
  let lo = 0;
  let hi = v.length - 1;
  if (a === v[hi]) return sign | hi;
  // v[lo] <= a < v[hi]
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (v[mid]! <= a) lo = mid;
    else hi = mid;
  }
  const half = (v[lo]! + v[hi]!) / 2;
  return sign | (a < half ? lo : a > half ? hi : lo & 1 ? hi : lo);
}

/**
 * Per 8-bit format, `f32ToMini` of every fp32 value as a table of 2^17 codes, indexed by the value's
 * top 16 bits and whether any of its low 16 is set: rounding to two or three mantissa bits reads
 * nothing else (the round bit is bit 19 or higher, each midpoint's bits below it are zero, so the
 * low 16 bits only say whether the value is past a midpoint it shares its top bits with). Made at
 * the first use (a values-checked fp8 reduce called `f32ToMini` for every element: five sixths of
 * ring8.json's run at fp8e5).
 */
const MINI_ENCODERS = new Map<MiniFloat, Uint8Array>();
export function miniEncoder(f: MiniFloat): Uint8Array {
  let t = MINI_ENCODERS.get(f);
  if (!t) {
    t = new Uint8Array(1 << 17);
    for (let i = 0; i < t.length; i++) {
      u32[0] = ((i >>> 1) << 16) | (i & 1);
      t[i] = f32ToMini(f32[0]!, f);
    }
    MINI_ENCODERS.set(f, t);
  }
  return t;
}

function miniValue(h: number, f: MiniFloat): number {
  const s = h & 0x80 ? -1 : 1;
  const e = (h >>> f.mantBits) & ((1 << f.expBits) - 1);
  const m = h & ((1 << f.mantBits) - 1);
  const top = (1 << f.expBits) - 1;
  if (f.ieee && e === top) return m ? Number.NaN : s * Infinity;
  if (!f.ieee && e === top && m === (1 << f.mantBits) - 1) return Number.NaN;
  if (e === 0) return s * m * 2 ** (1 - f.bias - f.mantBits);
  return s * (1 + m / (1 << f.mantBits)) * 2 ** (e - f.bias);
}

function roundToMini(x: number, f: MiniFloat): number {
  const top = (1 << f.expBits) - 1;
  if (Number.isNaN(x)) return 0x7f;
  const sign = x < 0 || Object.is(x, -0) ? 0x80 : 0;
  const a = Math.abs(x);
  const maxCode = largestFinite(f);
  const maxVal = miniValue(maxCode, f);
  if (a === Infinity) return f.ieee ? sign | (top << f.mantBits) : sign | maxCode;
  // Quantum at a's binade (subnormals share the smallest normal's).
  const minExp = 1 - f.bias;
  const e = Math.max(minExp, a === 0 ? minExp : Math.floor(Math.log2(a)));
  const q = 2 ** (e - f.mantBits);
  let k = a / q;
  const fl = Math.floor(k);
  const rem = k - fl;
  k = rem > 0.5 || (rem === 0.5 && fl % 2 === 1) ? fl + 1 : fl;
  const v = k * q;
  if (v > maxVal) {
    // Past the largest finite by more than half a step: infinity (E5M2) or saturate (E4M3).
    return f.ieee && a >= maxVal + q / 2 ? sign | (top << f.mantBits) : sign | maxCode;
  }
  if (v === 0) return sign;
  const ve = Math.max(minExp, Math.floor(Math.log2(v)));
  if (ve === minExp && v < 2 ** minExp) return sign | Math.round(v / 2 ** (minExp - f.mantBits));
  const m = Math.round((v / 2 ** ve - 1) * (1 << f.mantBits));
  return sign | ((ve + f.bias) << f.mantBits) | m;
}

/** The ops the CCE runs: ADD, MAX, MIN. */
function checkOp(op: number): void {
  if (op !== SdmaCceType.ADD && op !== SdmaCceType.MAX && op !== SdmaCceType.MIN) throw new SimError("SIM1101", `unsupported op! (${op})`, { value: op });
}

/** SDMA dtype code -> element size and raw get/set on a DataView. */
const ELEMENTS: Record<number, { size: number; get: (v: DataView, o: number) => number; set: (v: DataView, o: number, x: number) => void }> = {
  3: { size: 1, get: (v, o) => v.getUint8(o), set: (v, o, x) => v.setUint8(o, x) },
  2: { size: 1, get: (v, o) => v.getInt8(o), set: (v, o, x) => v.setInt8(o, x) },
  5: { size: 2, get: (v, o) => v.getUint16(o, true), set: (v, o, x) => v.setUint16(o, x, true) },
  4: { size: 2, get: (v, o) => v.getInt16(o, true), set: (v, o, x) => v.setInt16(o, x, true) },
  9: { size: 4, get: (v, o) => v.getUint32(o, true), set: (v, o, x) => v.setUint32(o, x >>> 0, true) },
  8: { size: 4, get: (v, o) => v.getInt32(o, true), set: (v, o, x) => v.setInt32(o, x | 0, true) },
  10: { size: 4, get: (v, o) => v.getFloat32(o, true), set: (v, o, x) => v.setFloat32(o, x, true) },
  6: { size: 2, get: (v, o) => bf16ToF32(v.getUint16(o, true)), set: (v, o, x) => v.setUint16(o, f32ToBf16(x), true) },
  7: { size: 2, get: (v, o) => f16ToF32(v.getUint16(o, true)), set: (v, o, x) => v.setUint16(o, f32ToF16(x), true) },
  14: { size: 1, get: (v, o) => miniToF32(v.getUint8(o), FP8.fp8e4), set: (v, o, x) => v.setUint8(o, f32ToMini(x, FP8.fp8e4)) },
  15: { size: 1, get: (v, o) => miniToF32(v.getUint8(o), FP8.fp8e5), set: (v, o, x) => v.setUint8(o, f32ToMini(x, FP8.fp8e5)) },
};

/** Element-wise reduce of equally long sources into a new buffer. Integer results wrap to the type (DataView setters truncate). */
export function cceReduce(op: number, sdmaDtype: number, srcs: readonly Uint8Array[]): Uint8Array {
  const el = ELEMENTS[sdmaDtype];
  if (!el) throw new SimError("SIM1102", `unsupported CCE data type ${sdmaDtype}`, { value: sdmaDtype });
  const first = srcs[0]!;
  if (first.length % el.size !== 0) throw new SimError("SIM1103", `CCE length ${first.length} is not whole elements of ${el.size} bytes`, { value: first.length });
  checkOp(op);
  const isFloat = sdmaDtype === 10 || sdmaDtype === 6 || sdmaDtype === 7 || sdmaDtype === 14 || sdmaDtype === 15;
  // Source by source: each decoded whole, then folded into the running result (in fp32 for
  // floats: rounded after every step), each loop of one type and one op, in scratch arrays kept
  // from call to call (a packet's reduce allocates its result only).
  const n = first.length / el.size;
  if (LITTLE_ENDIAN && !isFloat && op === SdmaCceType.ADD) return addIntegers(el.size, srcs, first.length);
  if (ACC.length < n) {
    ACC = new Float64Array(Math.max(n, 2 * ACC.length));
    NEXT = new Float64Array(ACC.length);
  }
  const acc = ACC;
  const next = NEXT;
  if (sdmaDtype === 14 || sdmaDtype === 15) foldMini(op, miniTables(sdmaDtype === 14 ? FP8.fp8e4 : FP8.fp8e5).values, srcs, acc, n);
  else {
    decodeInto(el, sdmaDtype, first, acc, n);
    for (let i = 1; i < srcs.length; i++) {
      decodeInto(el, sdmaDtype, srcs[i]!, next, n);
      // (A float's fp32 rounding in the same loop as its op.)
      if (op === SdmaCceType.ADD) {
        if (isFloat) for (let k = 0; k < n; k++) acc[k] = Math.fround(acc[k]! + next[k]!);
        else for (let k = 0; k < n; k++) acc[k] = acc[k]! + next[k]!;
      } else if (op === SdmaCceType.MAX) {
        if (isFloat) for (let k = 0; k < n; k++) acc[k] = Math.fround(acc[k]! >= next[k]! ? acc[k]! : next[k]!);
        else for (let k = 0; k < n; k++) acc[k] = acc[k]! >= next[k]! ? acc[k]! : next[k]!;
      } else if (isFloat) for (let k = 0; k < n; k++) acc[k] = Math.fround(acc[k]! <= next[k]! ? acc[k]! : next[k]!);
      else for (let k = 0; k < n; k++) acc[k] = acc[k]! <= next[k]! ? acc[k]! : next[k]!;
    }
  }
  if (LITTLE_ENDIAN && encodeInto(sdmaDtype, acc, n, first.length)) return copyBytes(SCRATCH.u8.subarray(0, first.length));
  const out = new Uint8Array(first.length);
  const ov = new DataView(out.buffer);
  const set = el.set;
  const size = el.size;
  for (let k = 0; k < n; k++) set(ov, k * size, acc[k]!);
  return out;
}

/**
 * An integer add in the type's own bits, source by source: a store wraps each sum to the type,
 * which is the exact sum's wrap at the end (the same modulo), and a signed type's two's complement
 * adds as the unsigned one does; 8- and 16-bit lanes four bytes at a time (`addLanes`). (Decoded to
 * numbers and encoded back, a uint8 reduce — nccom-test's default type — cost four passes over
 * eight bytes an element.)
 */
function addIntegers(size: number, srcs: readonly Uint8Array[], bytes: number): Uint8Array {
  const r = scratch(bytes);
  r.u8.set(srcs[0]!);
  // (Each source copied where its words are aligned.)
  const s = wideScratch(Math.ceil(bytes / 4));
  for (let i = 1; i < srcs.length; i++) {
    s.u8.set(srcs[i]!);
    if (size < 4) addLanes(r, s, bytes, size);
    else {
      const a = r.u32;
      const b = s.u32;
      for (let k = 0, n = bytes / 4; k < n; k++) a[k] = a[k]! + b[k]!;
    }
  }
  return copyBytes(r.u8.subarray(0, bytes));
}

/**
 * `a += b` in lanes of `size` bytes (1 or 2) over `bytes`, four bytes at a time: each lane's low
 * bits added without a carry out of the lane, its top bit then the two top bits and that carry.
 * Wrapping the same in a signed type (two's complement adds as unsigned does).
 */
function addLanes(a: Views, b: Views, bytes: number, size: number): void {
  const low = size === 1 ? 0x7f7f7f7f : 0x7fff7fff;
  const top = size === 1 ? 0x80808080 | 0 : 0x80008000 | 0;
  const words = bytes >>> 2;
  const x = a.u32;
  const y = b.u32;
  for (let k = 0; k < words; k++) {
    const p = x[k]!;
    const q = y[k]!;
    x[k] = ((p & low) + (q & low)) ^ ((p ^ q) & top);
  }
  // (A length of whole lanes that is not whole words: its last lanes one by one.)
  if (size === 1) for (let k = words * 4; k < bytes; k++) a.u8[k] = a.u8[k]! + b.u8[k]!;
  else for (let k = words * 2; k < bytes / 2; k++) a.u16[k] = a.u16[k]! + b.u16[k]!;
}

/**
 * An 8-bit float reduce, one byte an element: each source's codes looked up and folded in one loop
 * (`cceReduce`'s steps for the wider types: a code's value, the op, the fp32 rounding).
 */
function foldMini(op: number, values: Float64Array, srcs: readonly Uint8Array[], acc: Float64Array, n: number): void {
  const first = srcs[0]!;
  for (let k = 0; k < n; k++) acc[k] = values[first[k]!]!;
  for (let i = 1; i < srcs.length; i++) {
    const src = srcs[i]!;
    if (op === SdmaCceType.ADD) for (let k = 0; k < n; k++) acc[k] = Math.fround(acc[k]! + values[src[k]!]!);
    else if (op === SdmaCceType.MAX)
      for (let k = 0; k < n; k++) {
        const x = values[src[k]!]!;
        acc[k] = Math.fround(acc[k]! >= x ? acc[k]! : x);
      }
    else
      for (let k = 0; k < n; k++) {
        const x = values[src[k]!]!;
        acc[k] = Math.fround(acc[k]! <= x ? acc[k]! : x);
      }
  }
}

/**
 * The `n` results into the scratch as elements of the type (a typed array's conversion is the
 * DataView setter's: integers wrap, fp32 rounds); false for a type encoded element by element.
 */
function encodeInto(sdmaDtype: number, acc: Float64Array, n: number, bytes: number): boolean {
  // (Grown to the result's bytes here: a reduce of the 8-bit floats decodes without it.)
  const w = scratch(bytes);
  switch (sdmaDtype) {
    case 3:
      for (let k = 0; k < n; k++) w.u8[k] = acc[k]!;
      return true;
    case 2:
      for (let k = 0; k < n; k++) w.i8[k] = acc[k]!;
      return true;
    case 5:
      for (let k = 0; k < n; k++) w.u16[k] = acc[k]!;
      return true;
    case 4:
      for (let k = 0; k < n; k++) w.i16[k] = acc[k]!;
      return true;
    case 9:
      for (let k = 0; k < n; k++) w.u32[k] = acc[k]!;
      return true;
    case 8:
      for (let k = 0; k < n; k++) w.i32[k] = acc[k]!;
      return true;
    case 10:
      for (let k = 0; k < n; k++) w.f32[k] = acc[k]!;
      return true;
    case 6:
      for (let k = 0; k < n; k++) w.u16[k] = f32ToBf16(acc[k]!);
      return true;
    case 7:
      for (let k = 0; k < n; k++) w.u16[k] = f32ToF16(acc[k]!);
      return true;
    case 14:
    case 15: {
      // Through each result's fp32 bits (every result is an fp32 value: rounded after each step).
      const table = miniEncoder(sdmaDtype === 14 ? FP8.fp8e4 : FP8.fp8e5);
      const wide = wideScratch(n);
      for (let k = 0; k < n; k++) wide.f32[k] = acc[k]!;
      for (let k = 0; k < n; k++) {
        const b = wide.u32[k]!;
        w.u8[k] = table[((b >>> 16) << 1) | ((b & 0xffff) === 0 ? 0 : 1)]!;
      }
      return true;
    }
    default:
      return false;
  }
}

/** cceReduce's running result and the source being folded in. */
let ACC = new Float64Array(0);
let NEXT = new Float64Array(0);

/** The `n` elements of `src` as numbers into `into`. */
function decodeInto(el: (typeof ELEMENTS)[number], sdmaDtype: number, src: Uint8Array, into: Float64Array, n: number): void {
  if (LITTLE_ENDIAN && VIEWED.has(sdmaDtype)) {
    // The bytes copied into the scratch, read through its view of the type (aligned there): one
    // loop per type, each reading one kind of array.
    const w = scratch(src.length);
    w.u8.set(src);
    switch (sdmaDtype) {
      case 3:
        for (let k = 0; k < n; k++) into[k] = w.u8[k]!;
        return;
      case 2:
        for (let k = 0; k < n; k++) into[k] = w.i8[k]!;
        return;
      case 5:
        for (let k = 0; k < n; k++) into[k] = w.u16[k]!;
        return;
      case 4:
        for (let k = 0; k < n; k++) into[k] = w.i16[k]!;
        return;
      case 9:
        for (let k = 0; k < n; k++) into[k] = w.u32[k]!;
        return;
      case 8:
        for (let k = 0; k < n; k++) into[k] = w.i32[k]!;
        return;
      case 10:
        for (let k = 0; k < n; k++) into[k] = w.f32[k]!;
        return;
      case 6: {
        // bf16 is fp32's top half: widened into the wide scratch's words, read as floats.
        const wide = wideScratch(n);
        for (let k = 0; k < n; k++) wide.u32[k] = w.u16[k]! << 16;
        for (let k = 0; k < n; k++) into[k] = wide.f32[k]!;
        return;
      }
      case 7: {
        // fp16 and the 8-bit floats: each code's value looked up.
        const table = (F16 ??= f16Table());
        for (let k = 0; k < n; k++) into[k] = table[w.u16[k]!]!;
        return;
      }
      case 14:
      case 15: {
        const table = miniTables(sdmaDtype === 14 ? FP8.fp8e4 : FP8.fp8e5).values;
        for (let k = 0; k < n; k++) into[k] = table[w.u8[k]!]!;
        return;
      }
    }
  }
  const v = new DataView(src.buffer, src.byteOffset, src.length);
  const get = el.get;
  const size = el.size;
  for (let k = 0; k < n; k++) into[k] = get(v, k * size);
}

/** The types `decodeInto` reads through a scratch's view (the others element by element). */
const VIEWED = new Set([3, 2, 5, 4, 9, 8, 10, 6, 7, 14, 15]);

/** One buffer seen as each element type. */
interface Views {
  readonly u8: Uint8Array;
  readonly i8: Int8Array;
  readonly u16: Uint16Array;
  readonly i16: Int16Array;
  readonly u32: Uint32Array;
  readonly i32: Int32Array;
  readonly f32: Float32Array;
}

function views(bytes: number): Views {
  const b = new ArrayBuffer(bytes);
  return { u8: new Uint8Array(b), i8: new Int8Array(b), u16: new Uint16Array(b), i16: new Int16Array(b), u32: new Uint32Array(b), i32: new Int32Array(b), f32: new Float32Array(b) };
}

let SCRATCH = views(0);
let WIDE = views(0);
/** The decode scratch, at least `bytes` long (a multiple of 4). */
function scratch(bytes: number): Views {
  if (SCRATCH.u8.length < bytes) SCRATCH = views(Math.max(4 * Math.ceil(bytes / 4), 2 * SCRATCH.u8.length));
  return SCRATCH;
}
/** The bf16 widening scratch, at least `n` words. */
function wideScratch(n: number): Views {
  if (WIDE.u32.length < n) WIDE = views(4 * Math.max(n, 2 * WIDE.u32.length));
  return WIDE;
}
