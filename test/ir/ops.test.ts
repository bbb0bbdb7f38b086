// The op registry: one entry per enc_op_type, the dispatcher's handlers, buffer sizes, bus factors.
import { describe, expect, it } from "vitest";
import { EncOpType } from "../../src/ir/enums.ts";
import { OPS, opEntry } from "../../src/ir/ops.ts";
import { OP_NAMES } from "../../src/ir/spec.ts";

describe("op registry", () => {
  it("has one entry per enc_op_type 0..12, named as scenarios name them", () => {
    expect(OPS.map((e) => e.type)).toEqual(Array.from({ length: 13 }, (_, i) => i));
    expect(OPS.map((e) => e.name)).toEqual([...OP_NAMES]);
  });

  it("routes each op type to the seed's handler", () => {
    expect(OPS.filter((e) => e.handler === "unsupported").map((e) => e.type)).toEqual([EncOpType.BROADCAST, EncOpType.REDUCE]);
    expect(OPS.filter((e) => e.handler === "alltoall").map((e) => e.type)).toEqual([EncOpType.ALLTOALL, EncOpType.ALLTOALL_V]);
    expect(opEntry("permute-implicit").handler).toBe(opEntry("permute").handler);
    expect(opEntry("permute-reduce-implicit").handler).toBe(opEntry("permute-reduce").handler);
  });

  it("sizes each rank's buffers and gives nccom-test's bus factors", () => {
    const op = { op: "all-gather", bytes: 4096, dtype: "fp32", reduce: "sum", stream: 0, priorityClass: 0 } as const;
    expect(opEntry("all-gather").buffers(op, 4, 1)).toEqual({ inBytes: 1024, outBytes: 4096 });
    expect(opEntry("reduce-scatter").buffers(op, 4, 1)).toEqual({ inBytes: 4096, outBytes: 1024 });
    expect(opEntry("all-to-all-v").buffers({ ...op, op: "all-to-all-v", counts: [[4, 8], [12, 16]] }, 2, 1)).toEqual({ inBytes: 28, outBytes: 24 });
    expect(opEntry("all-reduce").busFactor(8)).toBe(1.75);
    expect(opEntry("all-gather").busFactor(8)).toBe(0.875);
    expect(opEntry("permute").busFactor(8)).toBe(1);
    expect(opEntry("all-reduce").busFactor(1)).toBe(0);
  });
});
