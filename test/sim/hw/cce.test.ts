// The CCE's reduce over whole buffers against its element-by-element definition: each element read
// from every source in order, combined, rounded to fp32 after each step for floats, written back in
// the element type (integers wrap).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { bf16ToF32, cceReduce, f16ToF32, f32ToBf16, f32ToF16, f32ToMini, miniEncoder, miniToF32 } from "../../../sim/hw/cce.ts";
import { FP8 } from "../../../src/ir/dtypes.ts";
import { SdmaCceType } from "../../../src/ir/enums.ts";

type El = { size: number; get: (v: DataView, o: number) => number; set: (v: DataView, o: number, x: number) => void; float: boolean };
const EL: Record<number, El> = {
  3: { size: 1, float: false, get: (v, o) => v.getUint8(o), set: (v, o, x) => v.setUint8(o, x) },
  2: { size: 1, float: false, get: (v, o) => v.getInt8(o), set: (v, o, x) => v.setInt8(o, x) },
  5: { size: 2, float: false, get: (v, o) => v.getUint16(o, true), set: (v, o, x) => v.setUint16(o, x, true) },
  4: { size: 2, float: false, get: (v, o) => v.getInt16(o, true), set: (v, o, x) => v.setInt16(o, x, true) },
  9: { size: 4, float: false, get: (v, o) => v.getUint32(o, true), set: (v, o, x) => v.setUint32(o, x >>> 0, true) },
  8: { size: 4, float: false, get: (v, o) => v.getInt32(o, true), set: (v, o, x) => v.setInt32(o, x | 0, true) },
  10: { size: 4, float: true, get: (v, o) => v.getFloat32(o, true), set: (v, o, x) => v.setFloat32(o, x, true) },
  6: { size: 2, float: true, get: (v, o) => bf16ToF32(v.getUint16(o, true)), set: (v, o, x) => v.setUint16(o, f32ToBf16(x), true) },
  7: { size: 2, float: true, get: (v, o) => f16ToF32(v.getUint16(o, true)), set: (v, o, x) => v.setUint16(o, f32ToF16(x), true) },
  14: { size: 1, float: true, get: (v, o) => miniToF32(v.getUint8(o), FP8.fp8e4), set: (v, o, x) => v.setUint8(o, f32ToMini(x, FP8.fp8e4)) },
  15: { size: 1, float: true, get: (v, o) => miniToF32(v.getUint8(o), FP8.fp8e5), set: (v, o, x) => v.setUint8(o, f32ToMini(x, FP8.fp8e5)) },
};

function byElement(op: number, dtype: number, srcs: readonly Uint8Array[]): Uint8Array {
  const el = EL[dtype]!;
  const out = new Uint8Array(srcs[0]!.length);
  const ov = new DataView(out.buffer);
  const views = srcs.map((s) => new DataView(s.buffer, s.byteOffset, s.length));
  for (let o = 0; o < out.length; o += el.size) {
    let acc = el.get(views[0]!, o);
    for (let i = 1; i < views.length; i++) {
      const x = el.get(views[i]!, o);
      acc = op === SdmaCceType.ADD ? acc + x : op === SdmaCceType.MAX ? (acc >= x ? acc : x) : acc <= x ? acc : x;
      if (el.float) acc = Math.fround(acc);
    }
    el.set(ov, o, acc);
  }
  return out;
}

describe("CCE reduce", () => {
  it("equals its element-by-element definition: every type and op, 1-4 sources, any alignment, any bits", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...Object.keys(EL).map(Number)),
        fc.constantFrom(SdmaCceType.ADD, SdmaCceType.MAX, SdmaCceType.MIN),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 0, max: 40 }),
        fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 4, maxLength: 4 }),
        fc.integer(),
        (dtype, op, nSrc, elements, offsets, seed) => {
          const len = elements * EL[dtype]!.size;
          let x = seed >>> 0 || 1;
          // Sources at offsets 0-3 into their buffers (so views are aligned or not), random bits.
          const srcs = Array.from({ length: nSrc }, (_, i) => {
            const buf = new Uint8Array(len + offsets[i]!);
            for (let k = 0; k < buf.length; k++) buf[k] = (x = (x * 1103515245 + 12345) >>> 0) >>> 24;
            return buf.subarray(offsets[i]!);
          });
          expect(Buffer.from(cceReduce(op, dtype, srcs)).equals(Buffer.from(byElement(op, dtype, srcs)))).toBe(true);
        },
      ),
      { numRuns: 2000, seed: 5 },
    );
  });

  it.each([14, 15, 3, 6])("a reduce of type %i longer than any before it (its scratch grows to the result): its definition, every byte", (dtype) => {
    // 1 MiB a source: far past a packet's 64 KiB (a run's scratch stays within twice that), and every other test's sizes.
    const len = 1 << 20;
    let x = dtype;
    const srcs = [0, 1].map(() => Uint8Array.from({ length: len }, () => (x = (x * 1103515245 + 12345) >>> 0) >>> 24));
    const got = cceReduce(SdmaCceType.ADD, dtype, srcs);
    expect(got.length).toBe(len);
    expect(Buffer.from(got).equals(Buffer.from(byElement(SdmaCceType.ADD, dtype, srcs)))).toBe(true);
  });
});

describe("8-bit floats", () => {
  // A code's value from its bits: sign, exponent (bias, subnormals at the lowest), mantissa.
  const valueOf = (h: number, f: (typeof FP8)[keyof typeof FP8]): number => {
    const s = h & 0x80 ? -1 : 1;
    const e = (h >> f.mantBits) & ((1 << f.expBits) - 1);
    const m = h & ((1 << f.mantBits) - 1);
    const top = (1 << f.expBits) - 1;
    if (f.ieee && e === top) return m ? Number.NaN : s * Infinity;
    if (!f.ieee && e === top && m === (1 << f.mantBits) - 1) return Number.NaN;
    return e === 0 ? (s * m) / 2 ** (f.bias + f.mantBits - 1) : s * (1 + m / 2 ** f.mantBits) * 2 ** (e - f.bias);
  };
  it.each(["fp8e4", "fp8e5"] as const)("%s: every code's value, and the nearest code (ties to even) of values in range", (name) => {
    const f = FP8[name];
    const codes = Array.from({ length: 256 }, (_, h) => h);
    for (const h of codes) expect(Object.is(miniToF32(h, f), valueOf(h, f)) || (Number.isNaN(miniToF32(h, f)) && Number.isNaN(valueOf(h, f)))).toBe(true);
    const finite = codes.filter((h) => Number.isFinite(valueOf(h, f)));
    const max = Math.max(...finite.map((h) => valueOf(h, f)));
    // The values, and the points halfway between neighbours (ties).
    const values = [...new Set(finite.map((h) => valueOf(h, f)))].sort((a, b) => a - b);
    const ties = values.slice(1).map((v, k) => (v + values[k]!) / 2);
    fc.assert(
      fc.property(fc.oneof(fc.double({ min: -max, max, noNaN: true }), fc.constantFrom(...values), fc.constantFrom(...ties)), (x0) => {
        const x = Math.fround(x0);
        if (Math.abs(x) > max) return;
        let best = -1;
        for (const h of finite) {
          if ((h & 0x80 ? -1 : 1) !== (x < 0 || Object.is(x, -0) ? -1 : 1)) continue;
          const d = Math.abs(valueOf(h, f) - x);
          const b = best < 0 ? Infinity : Math.abs(valueOf(best, f) - x);
          if (d < b || (d === b && (h & 1) === 0)) best = h;
        }
        expect(f32ToMini(x, f)).toBe(best);
      }),
      { numRuns: 3000, seed: 9 },
    );
  });

  it.each(["fp8e4", "fp8e5"] as const)("%s: the code table (an fp32's top 16 bits, and whether a low one is set) is f32ToMini of every fp32 value of each entry", (name) => {
    const f = FP8[name];
    const table = miniEncoder(f);
    const bits = new Uint32Array(1);
    const float = new Float32Array(bits.buffer);
    // Every top half (signs, exponents, NaNs and infinities), with low halves at the entry's edges and between.
    for (let top = 0; top < 1 << 16; top++) {
      for (const low of [0, 1, 0x7fff, 0x8000, 0x8001, 0xfffe, 0xffff, (top * 40503) & 0xffff]) {
        bits[0] = top * 65536 + low;
        const want = f32ToMini(float[0]!, f);
        if (table[(top << 1) | (low === 0 ? 0 : 1)] !== want) expect.fail(`${name} 0x${bits[0]!.toString(16)}: table ${table[(top << 1) | (low === 0 ? 0 : 1)]}, f32ToMini ${want}`);
      }
    }
  });
});

describe("fp16", () => {
  it("every code's value: sign, five exponent bits (bias 15, subnormals at 0), ten mantissa bits; infinities and NaNs", () => {
    for (let h = 0; h < 65536; h++) {
      const s = h & 0x8000 ? -1 : 1;
      const e = (h >> 10) & 31;
      const m = h & 1023;
      const want = e === 31 ? (m ? Number.NaN : s * Infinity) : e === 0 ? (s * m) / 2 ** 24 : s * (1 + m / 1024) * 2 ** (e - 15);
      const got = f16ToF32(h);
      if (!(Object.is(got, want) || (Number.isNaN(got) && Number.isNaN(want)))) expect.fail(`code 0x${h.toString(16)}: ${got}, not ${want}`);
    }
  });
});
