// all-gather-v: no enc_op_type of its own; it runs as the all-to-all-v it lowers to (rank i sends
// its one block to every rank), on the mesh.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { parseScenario } from "../../src/scenario/index.ts";
import { compileProgram } from "../../src/enc/compile.ts";
import { EncAlgType, EncOpType } from "../../src/ir/enums.ts";
import { opTypeOf } from "../../src/ir/spec.ts";
import { expectRunChecks, scenario, trn1 } from "../helpers.ts";
import { CompileError, ScenarioError } from "../../src/ir/errors.ts";

const gv = (counts: number[], dtype: "fp32" | "bf16" | "uint8" = "fp32") => ({ op: "all-gather-v" as const, bytes: counts.reduce((a, b) => a + b, 0), dtype, reduce: "sum" as const, counts: counts.map((c) => counts.map(() => c)) });

describe("all-gather-v", () => {
  it("is posted as ALLTOALL_V and resolves to the mesh", () => {
    expect(opTypeOf("all-gather-v")).toBe(EncOpType.ALLTOALL_V);
    const { layout } = compileProgram(scenario({ ranks: 4, algorithm: "auto", allowedAlgorithms: [EncAlgType.RING, EncAlgType.MESH], ops: [gv([64, 128, 0, 32])] }), trn1, [0]);
    expect(layout.ops[0]!.algorithm).toBe(EncAlgType.MESH);
    // Each rank's input is its own block, its output everything.
    expect(layout.ops[0]!.ranks.map((r) => [r.input.bytes, r.output.bytes])).toEqual([[64, 224], [128, 224], [0, 224], [32, 224]]);
  });

  it("needs the mesh, as all-to-all does", () => {
    expect(() => compileProgram(scenario({ ranks: 4, ops: [gv([64, 64, 64, 64])] }), trn1, [0])).toThrow(CompileError);
    expect(() => compileProgram(scenario({ ranks: 4, ops: [gv([64, 64, 64, 64])] }), trn1, [0])).toThrow(/alltoall cannot be supported without Mesh algorithm, rank_n\(4\)/);
  });

  it("reads counts as the bytes each group rank contributes, adding up to bytes", () => {
    const base = { name: "x", instance: "trn1", ranks: 4 };
    const parsed = parseScenario("x.json", { ...base, ops: [{ op: "all-gather-v", bytes: 16, dtype: "fp32", counts: [4, 8, 0, 4] }] });
    expect(parsed.ops[0]!.counts).toEqual([[4, 4, 4, 4], [8, 8, 8, 8], [0, 0, 0, 0], [4, 4, 4, 4]]);
    const err = (op: object) => {
      try {
        parseScenario("x.json", { ...base, ops: [op] });
      } catch (e) {
        return e instanceof ScenarioError ? `${e.code} ${e.message}` : String(e);
      }
      return "no error";
    };
    expect(err({ op: "all-gather-v", bytes: 16, dtype: "fp32" })).toMatch(/SCN1004.*all-gather-v needs "counts"/);
    expect(err({ op: "all-gather-v", bytes: 16, dtype: "fp32", counts: [4, 8, 4] })).toMatch(/SCN1015.*needs 4 entries/);
    expect(err({ op: "all-gather-v", bytes: 20, dtype: "fp32", counts: [4, 8, 0, 4] })).toMatch(/SCN1015.*adds up to 16 bytes; "bytes" \(the gathered size\) is 20/);
    expect(err({ op: "all-gather-v", bytes: 18, dtype: "fp32", counts: [4, 8, 2, 4] })).toMatch(/SCN1006/);
  });

  it("random group sizes and uneven counts (zeros too) check by values and symbolically on trn1", () => {
    fc.assert(
      fc.property(fc.constantFrom(2, 3, 4, 5, 8, 16), fc.constantFrom("fp32" as const, "bf16" as const, "uint8" as const), fc.array(fc.integer({ min: 0, max: 300 }), { minLength: 16, maxLength: 16 }), fc.boolean(), (n, dtype, elems, symbolic) => {
        const esize = dtype === "fp32" ? 4 : dtype === "bf16" ? 2 : 1;
        const counts: number[] = elems.slice(0, n).map((e) => e * esize);
        if (!counts.some((c) => c > 0)) counts[0] = esize;
        const scn = scenario({ ranks: n, algorithm: "auto", allowedAlgorithms: [EncAlgType.RING, EncAlgType.MESH], check: symbolic ? "symbolic" : "values", ops: [gv(counts, dtype)] });
        expectRunChecks(scn, trn1);
      }),
      { numRuns: 30, seed: 3 },
    );
  });
});
