import seedrandom from "seedrandom";
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { combineValues, compare, generateValues, referenceAllToAll, referenceAllToAllV, referencePermute, referenceValues, toBytes, decodeValue, encodeValue } from "../../src/check/values.ts";
import { cceReduce, f32ToBf16, f32ToF16, f16ToF32, bf16ToF32, f32ToMini, miniToF32 } from "../../sim/hw/cce.ts";
import { FP8, SDMA_DTYPE, DTYPES, REDUCE_TO_CCE, dtypeSize } from "../../src/ir/dtypes.ts";

describe("reference collectives", () => {
  const inputs = [
    [1, 2, 3, 4],
    [10, 20, 30, 40],
  ];
  /** References as plain arrays (they come as typed arrays of the type's values). */
  const plain = (xs: readonly ArrayLike<number>[]): number[][] => xs.map((x) => Array.from(x));
  it("all-reduce, all-gather, reduce-scatter", () => {
    expect(plain(referenceValues("all-reduce", "int32", "sum", inputs))).toEqual([
      [11, 22, 33, 44],
      [11, 22, 33, 44],
    ]);
    expect(plain(referenceValues("all-gather", "int32", "sum", inputs))[1]).toEqual([1, 2, 3, 4, 10, 20, 30, 40]);
    expect(plain(referenceValues("reduce-scatter", "int32", "max", inputs))).toEqual([
      [10, 20],
      [30, 40],
    ]);
  });
  it("integer sums wrap to the type", () => {
    expect(plain(referenceValues("all-reduce", "uint8", "sum", [[250], [10]]))[0]).toEqual([4]);
    expect(plain(referenceValues("all-reduce", "int8", "sum", [[120], [10]]))[0]).toEqual([-126]);
    // uint32's values pass 2^31 (held in 8 bytes: 4 would wrap them), and its sums wrap at 2^32.
    expect(plain(referenceValues("all-reduce", "uint32", "sum", [[0xfffffff0], [0x20]]))[0]).toEqual([0x10]);
    expect(plain(referenceValues("all-reduce", "uint32", "max", [[0xfffffff0], [0x20]]))[0]).toEqual([0xfffffff0]);
  });
  it("every integer type and reduce op: the element-by-element fold of one combine at a time, over values anywhere in the type's range", () => {
    const RANGE = { uint8: [0, 0xff], int8: [-128, 127], uint16: [0, 0xffff], int16: [-32768, 32767], uint32: [0, 0xffffffff], int32: [-0x80000000, 0x7fffffff] } as const;
    fc.assert(
      fc.property(
        fc.constantFrom(...(Object.keys(RANGE) as (keyof typeof RANGE)[])),
        fc.constantFrom("sum", "max", "min" as const),
        fc.integer({ min: 2, max: 8 }),
        fc.integer({ min: 1, max: 6 }),
        fc.infiniteStream(fc.double({ min: 0, max: 1, noNaN: true })),
        (d, op, ranks, len, u) => {
          const [lo, hi] = RANGE[d];
          // Values at the range's ends, near them, and anywhere.
          const pick = (x: number) => (x < 0.2 ? lo : x < 0.4 ? hi : x < 0.5 ? lo + 1 : x < 0.6 ? hi - 1 : lo + Math.floor(x * (hi - lo)));
          const ins = Array.from({ length: ranks }, () => Array.from({ length: len }, () => pick(u.next().value)));
          const want = ins[0]!.map((_, i) => ins.slice(1).reduce((a, x) => combineValues(d, op, a, x[i]!), ins[0]![i]!));
          expect(plain(referenceValues("all-reduce", d, op, ins))[0]).toEqual(want);
        },
      ),
      { numRuns: 300, seed: 17 },
    );
  });
  it("an integer type's inputs are the generator's numbers u scaled as lo + floor(u x width) (made from u's top bits: the same)", () => {
    // The generator itself, as its comment defines it: xorshift128 from alea's first four words.
    const draws = (seed: string, n: number): number[] => {
      const r = seedrandom.alea(seed);
      let [a, b, c, d] = [r.int32() | 1, r.int32(), r.int32(), r.int32()];
      return Array.from({ length: n }, () => {
        let t = d;
        const s = a;
        [d, c, b] = [c, b, s];
        t ^= t << 11;
        t ^= t >>> 8;
        a = t ^ s ^ (s >>> 19);
        return (a >>> 0) / 4294967296;
      });
    };
    for (const [d, lo, hi] of [["uint8", 0, 255], ["int8", -128, 127], ["uint16", 0, 65535], ["int16", -32768, 32767], ["uint32", 0, 2 ** 32 - 1], ["int32", -(2 ** 31), 2 ** 31 - 1]] as const) {
      const want = draws("ccsim/7/op2/rank5", 3000).map((u) => lo + Math.floor(u * (hi - lo + 1)));
      expect(Array.from(generateValues(7, 2, 5, d, 3000, "sum", 4)), d).toEqual(want);
    }
    // Made a block at a time: the numbers run on across the blocks' edges.
    const long = draws("ccsim/7/op2/rank5", 40_000).map((u) => Math.floor(u * 65536));
    expect(Array.from(generateValues(7, 2, 5, "uint16", 40_000, "sum", 4))).toEqual(long);
  });

  it("references over lengths past the reduce's block, every type in one process: the element-by-element fold (all-reduce, reduce-scatter, permute-reduce)", () => {
    for (const d of DTYPES) {
      for (const op of ["sum", "max", "min"] as const) {
        const len = 3 * 16_384 + 6;
        const ins = [0, 1, 2].map((r) => generateValues(11, 0, r, d, len, op, 3));
        const want = Array.from({ length: len }, (_, i) => ins.slice(1).reduce((a, x) => combineValues(d, op, a, x[i]!), ins[0]![i]!));
        expect(plain(referenceValues("all-reduce", d, op, ins))[0], `${d} ${op}`).toEqual(want);
        expect(plain(referenceValues("reduce-scatter", d, op, ins))[2], `${d} ${op}`).toEqual(want.slice(2 * (len / 3)));
        const permuted = referencePermute(d, op, new Map(ins.map((x, r) => [r, x])), [[0, 1]]);
        expect(Array.from(permuted.get(1)!), `${d} ${op}`).toEqual(Array.from({ length: len }, (_, i) => combineValues(d, op, ins[1]![i]!, ins[0]![i]!)));
      }
    }
  });

  it("every type's generated values are held exactly (encoded and decoded back, the same numbers)", () => {
    for (const d of ["uint8", "int8", "uint16", "int16", "uint32", "int32", "fp32", "bf16", "fp16", "fp8e4", "fp8e5"] as const) {
      const vals = generateValues(4, 0, 1, d, 2000, "max", 2);
      const bytes = toBytes(d, vals);
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
      const es = bytes.length / vals.length;
      expect(Array.from(vals, (_, i) => decodeValue(d, view, i * es)), d).toEqual(Array.from(vals));
    }
    expect(Math.max(...generateValues(4, 0, 1, "uint32", 2000, "max", 2))).toBeGreaterThan(0x7fffffff);
    // The integer types' and fp32's bytes are their values' own (no copy), the same as encoding each.
    for (const d of ["uint8", "int8", "uint16", "int16", "uint32", "int32", "fp32", "bf16"] as const) {
      const vals = generateValues(4, 0, 1, d, 999, "sum", 3);
      const es = toBytes(d, vals).length / vals.length;
      const each = new Uint8Array(vals.length * es);
      vals.forEach((v: number, i: number) => encodeValue(d, v, new DataView(each.buffer), i * es));
      expect(Buffer.from(toBytes(d, vals)).equals(each), d).toBe(true);
      if (d !== "bf16") expect((toBytes(d, vals).buffer as ArrayBuffer) === (vals.buffer as ArrayBuffer), d).toBe(true);
    }
    expect(Math.min(...generateValues(4, 0, 1, "int32", 2000, "max", 2))).toBeLessThan(-0x40000000);
    // Every value of a small type turns up, each about as often (10,000 draws over int8's 256).
    const seen = new Map<number, number>();
    for (const v of generateValues(8, 0, 2, "int8", 10000, "max", 2)) seen.set(v, (seen.get(v) ?? 0) + 1);
    expect(seen.size).toBe(256);
    expect(Math.max(...seen.values())).toBeLessThan(80);
  });
});

describe("generated inputs", () => {
  it("are deterministic in (seed, op, rank) and differ between ranks", () => {
    expect(generateValues(1, 0, 3, "fp32", 100, "sum", 8)).toEqual(generateValues(1, 0, 3, "fp32", 100, "sum", 8));
    expect(generateValues(1, 0, 3, "fp32", 100, "sum", 8)).not.toEqual(generateValues(1, 0, 4, "fp32", 100, "sum", 8));
    expect(generateValues(2, 0, 3, "fp32", 100, "sum", 8)).not.toEqual(generateValues(1, 0, 3, "fp32", 100, "sum", 8));
  });
  it("keep every partial float sum exact, so any reduction order gives the same bits", () => {
    for (const d of ["bf16", "fp16"] as const) {
      const n = 16;
      const ins = Array.from({ length: n }, (_, r) => generateValues(9, 0, r, d, 500, "sum", n));
      const ref = referenceValues("all-reduce", d, "sum", ins)[0]!;
      // The simulator's CCE in two different orders (ascending, descending) must both reproduce the reference.
      const bytes = ins.map((x) => toBytes(d, x));
      const fold = (order: Uint8Array[]) => order.reduce((acc, b) => cceReduce(REDUCE_TO_CCE.sum, SDMA_DTYPE[d], [acc, b]));
      expect(compare(d, 0, ref, fold(bytes))).toBeUndefined();
      expect(compare(d, 0, ref, fold([...bytes].reverse()))).toBeUndefined();
    }
  });
});

describe("CCE arithmetic (simulator) against the reference encoding (checker)", () => {
  it("agree on every dtype and reduce op for generated values", () => {
    for (const d of DTYPES) {
      for (const op of ["sum", "max", "min"] as const) {
        const ins = [0, 1, 2].map((r) => generateValues(5, 1, r, d, 64, op, 3));
        const got = cceReduce(REDUCE_TO_CCE[op], SDMA_DTYPE[d], ins.map((x) => toBytes(d, x)));
        expect(compare(d, 0, referenceValues("all-reduce", d, op, ins)[0]!, got), `${d} ${op}`).toBeUndefined();
      }
    }
  });
  it("rounds bf16 and fp16 to nearest even", () => {
    expect(f32ToBf16(1 + 2 ** -8)).toBe(0x3f80); // tie, even stays
    expect(f32ToBf16(1 + 3 * 2 ** -8)).toBe(0x3f82); // tie, rounds up to even
    expect(bf16ToF32(0x3f80)).toBe(1);
    expect(f32ToF16(1 + 2 ** -11)).toBe(0x3c00);
    expect(f32ToF16(1 + 3 * 2 ** -11)).toBe(0x3c02);
    expect(f32ToF16(65520)).toBe(0x7c00); // overflow to infinity
    expect(f16ToF32(f32ToF16(2 ** -20))).toBe(2 ** -20); // subnormal
    expect(f16ToF32(0x3555)).toBeCloseTo(1 / 3, 3);
  });
  it("rounds fp8e4 (E4M3, saturating) and fp8e5 (E5M2, IEEE-like) to nearest even", () => {
    const { fp8e4: e4, fp8e5: e5 } = FP8;
    // Golden encodings.
    expect([1, 0.5, -2, 448, 2 ** -9].map((x) => f32ToMini(x, e4))).toEqual([0x38, 0x30, 0xc0, 0x7e, 0x01]);
    expect([1, -2, 57344, Infinity, 2 ** -16].map((x) => f32ToMini(x, e5))).toEqual([0x3c, 0xc0, 0x7b, 0x7c, 0x01]);
    expect(miniToF32(0x7f, e4)).toBeNaN(); // S.1111.111 is E4M3's only NaN: 0x78..0x7e are finite
    expect(miniToF32(0x78, e4)).toBe(256);
    expect(miniToF32(0x7c, e5)).toBe(Infinity);
    // Ties to even: 17 lies between 16 and 18 (E4M3) / 16 and 20 (E5M2).
    expect(miniToF32(f32ToMini(17, e4), e4)).toBe(16);
    expect(miniToF32(f32ToMini(19, e4), e4)).toBe(20);
    expect(miniToF32(f32ToMini(18, e5), e5)).toBe(16);
    // Overflow: E4M3 saturates, E5M2 goes to infinity past half a step above its largest.
    expect(f32ToMini(1000, e4)).toBe(0x7e);
    expect(f32ToMini(-1e6, e4)).toBe(0xfe);
    expect(f32ToMini(1e6, e5)).toBe(0x7c);
    // Every finite code round-trips.
    for (const f of [e4, e5]) {
      for (let h = 0; h < 256; h++) {
        const x = miniToF32(h, f);
        if (!Number.isNaN(x) && x !== 0) expect(f32ToMini(x, f)).toBe(h);
      }
    }
  });
  it("keep fp8 sums exact over more ranks than the type has exact integers (at most 16 / 8 nonzero terms an element)", () => {
    for (const d of ["fp8e4", "fp8e5"] as const) {
      for (const [n, space] of [[64, 64], [32, 128]] as const) {
        // A strided group: ranks 0, 4, 8, ... of the rank space.
        const ranks = Array.from({ length: n }, (_, k) => (k * space) / n);
        const ins = ranks.map((r) => generateValues(9, 0, r, d, 500, "sum", n, space));
        const nonzero = Math.max(...ins[0]!.map((_, i) => ins.filter((x) => x[i] !== 0).length));
        expect(nonzero).toBeLessThanOrEqual(d === "fp8e4" ? 16 : 8);
        const ref = referenceValues("all-reduce", d, "sum", ins)[0]!;
        const bytes = ins.map((x) => toBytes(d, x));
        const fold = (order: Uint8Array[]) => order.reduce((acc, b) => cceReduce(REDUCE_TO_CCE.sum, SDMA_DTYPE[d], [acc, b]));
        expect(compare(d, 0, ref, fold(bytes))).toBeUndefined();
        expect(compare(d, 0, ref, fold([...bytes].reverse()))).toBeUndefined();
      }
    }
  });
  it("decodes what it encodes", () => {
    for (const d of DTYPES) {
      const vals = generateValues(3, 0, 0, d, 32, "max", 1);
      const b = toBytes(d, vals);
      const v = new DataView(b.buffer);
      expect(vals.map((_, i) => decodeValue(d, v, i * dtypeSize(d)))).toEqual(vals);
    }
  });
  it("reports the first mismatch with rank, index, expected and got", () => {
    const got = toBytes("int32", [1, 2, 99]);
    expect(compare("int32", 5, [1, 2, 3], got)).toEqual({ rank: 5, index: 2, expected: 3, got: 99 });
    // Read-back bytes are often a view into a bigger buffer: equal and unequal views both compare right.
    const big = new Uint8Array(64);
    big.set(toBytes("bf16", [7, -3, 250]), 10);
    expect(compare("bf16", 0, [7, -3, 250], big.subarray(10, 16))).toBeUndefined();
    big[14] = big[14]! ^ 1;
    expect(compare("bf16", 1, [7, -3, 250], big.subarray(10, 16))).toMatchObject({ rank: 1, index: 2, expected: 250 });
  });
  it("encodes narrow floats alike inside and outside the memoised range of small integers", () => {
    // 2^16 and -2^17 are past the table (|v| < 2^16); every value here is exact in bf16.
    const vals = [0, -1, 255, -256, 65535 - 65535 % 256, 1 << 16, -(1 << 17)];
    const b = toBytes("bf16", vals);
    const v = new DataView(b.buffer);
    expect(vals.map((_, i) => decodeValue("bf16", v, 2 * i))).toEqual(vals);
    expect([...toBytes("bf16", [1 << 16])]).toEqual([0x80, 0x47]);
    expect([...toBytes("bf16", [1])]).toEqual([0x80, 0x3f]);
  });
  it("all-to-all-v: rank j gets counts[i][j] elements from each rank i, after those i sends to ranks before j", () => {
    const ins = [
      [1, 2, 3],
      [10, 20, 30, 40],
    ];
    const counts = [
      [1, 2],
      [3, 1],
    ];
    expect(referenceAllToAllV("uint8", ins, counts).map((x) => Array.from(x))).toEqual([
      [1, 10, 20, 30],
      [2, 3, 40],
    ]);
  });
  it("all-to-all: rank j gets block j of every rank's input, in rank order", () => {
    const ins = [
      [1, 2, 3, 4, 5, 6],
      [10, 20, 30, 40, 50, 60],
      [100, 200, 300, 400, 500, 600],
    ];
    expect(referenceAllToAll("int32", ins).map((x) => Array.from(x))).toEqual([
      [1, 2, 10, 20, 100, 200],
      [3, 4, 30, 40, 300, 400],
      [5, 6, 50, 60, 500, 600],
    ]);
  });
});
