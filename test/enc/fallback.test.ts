// A named algorithm that cannot apply runs what the runtime falls back to, and says so: a warning
// naming what was asked, the gate's reason and what runs, and a fallback line in --explain.
import { describe, expect, it } from "vitest";
import { compileProgram } from "../../src/enc/compile.ts";
import { EncAlgType } from "../../src/ir/enums.ts";
import { algTypeOf, type AlgName } from "../../src/ir/spec.ts";
import { scenario, trn1 } from "../helpers.ts";

const named = (algorithm: AlgName, ranks: number, nodes = 1) =>
  scenario({ ranks, nodes, algorithm, allowedAlgorithms: [algTypeOf(algorithm)], ops: [{ op: "all-reduce", bytes: 1 << 16, dtype: "fp32", reduce: "sum" }] });

describe("named algorithms that cannot apply", () => {
  it.each([
    ["hier", 8, /"hier" cannot run \(HIER not allowed: INTER comm only\); the runtime falls back to ring/],
    ["kangaring", 8, /"kangaring" cannot run \(KANGARING not allowed: needs \(vcore_size 2 and rank_n > 4\) or \(vcore_size 1 and rank_n > 8\)/],
    ["inter-rdh", 8, /"inter-rdh" cannot run \(INTER_RDH not allowed: INTER comm only\)/],
    ["single-cycle-ring", 8, /"single-cycle-ring" cannot run \(SINGLE_CYCLE_RING not allowed: INTER comm only\)/],
  ] as const)("%s on one node of %i ranks falls back to the ring, and says so", (alg, ranks, says) => {
    const c = compileProgram(named(alg, ranks), trn1, [0]);
    expect(c.layout.ops[0]!.algorithm).toBe(EncAlgType.RING);
    expect(c.warnings.some((w) => says.test(w))).toBe(true);
    expect(c.explain[0]!.fallback).toMatch(says);
  });

  it("an algorithm that applies says nothing", () => {
    const c = compileProgram(named("ring", 8), trn1, [0]);
    expect(c.warnings).toEqual([]);
    expect(c.explain[0]!.fallback).toBeUndefined();
  });
});
