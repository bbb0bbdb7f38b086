import { describe, expect, it } from "vitest";
import { compare, generateValues, referenceValues, toBytes, decodeValue } from "../../src/check/values.ts";
import { cceReduce, f32ToBf16, f32ToF16, f16ToF32, bf16ToF32 } from "../../sim/hw/cce.ts";
import { SDMA_DTYPE, DTYPES, REDUCE_TO_CCE, dtypeSize } from "../../src/ir/dtypes.ts";

describe("reference collectives", () => {
  const inputs = [
    [1, 2, 3, 4],
    [10, 20, 30, 40],
  ];
  it("all-reduce, all-gather, reduce-scatter", () => {
    expect(referenceValues("all-reduce", "int32", "sum", inputs)).toEqual([
      [11, 22, 33, 44],
      [11, 22, 33, 44],
    ]);
    expect(referenceValues("all-gather", "int32", "sum", inputs)[1]).toEqual([1, 2, 3, 4, 10, 20, 30, 40]);
    expect(referenceValues("reduce-scatter", "int32", "max", inputs)).toEqual([
      [10, 20],
      [30, 40],
    ]);
  });
  it("integer sums wrap to the type", () => {
    expect(referenceValues("all-reduce", "uint8", "sum", [[250], [10]])[0]).toEqual([4]);
    expect(referenceValues("all-reduce", "int8", "sum", [[120], [10]])[0]).toEqual([-126]);
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
  });
});
