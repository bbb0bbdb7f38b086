// Large ops: every step stays inside the 16-bit TopSP counters. Mesh and RDH gates know how big a
// step their composers would emit and pass an op that would overflow down the precedence (the
// ring splits any size into chunk groups).
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { compileProgram, explainScenario } from "../../src/enc/compile.ts";
import { EncAlgType } from "../../src/ir/enums.ts";
import { loadDevice } from "../../src/run/load.ts";
import { scenario, trn1, collectiveOp } from "../helpers.ts";

const trn2 = loadDevice("trn2");
const auto = (ranks: number, ranksPerDevice: number, op: string, bytes: number) =>
  scenario({ ranks, ranksPerDevice, algorithm: "auto", allowedAlgorithms: undefined, check: "none", ops: [{ op: op as "all-reduce", bytes, dtype: "fp32", reduce: "sum" }] });

describe("large ops compile on auto", () => {
  it.each([
    [2, 2, "all-reduce", 256 << 20],
    [2, 2, "all-reduce", 1 << 30],
    [2, 2, "reduce-scatter", 1 << 30],
    [4, 1, "all-reduce", 1 << 30],
  ])("trn1 %i ranks (%i per device) %s %i B", (ranks, rpd, op, bytes) => {
    expect(() => compileProgram(auto(ranks, rpd, op, bytes), trn1, [0])).not.toThrow();
  });

  it("trn2 16 ranks, one per device, all-reduce 512 MiB", () => {
    expect(() => compileProgram({ ...auto(16, 1, "all-reduce", 512 << 20), instance: "trn2" }, trn2, [0])).not.toThrow();
  });

  it("the mesh gate names the step limit when it passes an op on", () => {
    // One engine per peer (trn1's fitted mesh folds spread a 2-rank mesh over three, inside the limit).
    const oneFold = { ...trn1, collectives: { ...trn1.collectives, meshFolds: 1 } };
    const e = explainScenario(auto(2, 2, "all-reduce", 256 << 20), oneFold)[0]!;
    const mesh = e.gates.find((g) => g.gate === "mesh")!.verdict;
    expect(mesh.ok).toBe(false);
    expect(mesh.reason).toMatch(/above the 16-bit step counters/);
    expect(e.resolved.value).toBe(EncAlgType.RING);
  });

  it("near the limit, whatever the gates admit composes (mesh on 2 ranks, RDH on 4)", () => {
    fc.assert(
      fc.property(fc.constantFrom([2, 2], [4, 1]), collectiveOp, fc.integer({ min: 140 << 20, max: 200 << 20 }), ([ranks, rpd], op, raw) => {
        const bytes = Math.floor(raw / (4 * ranks!)) * 4 * ranks!;
        expect(() => compileProgram(auto(ranks!, rpd!, op, bytes), trn1, [0])).not.toThrow();
      }),
      { numRuns: 12, seed: 7 },
    );
  });
});

describe("mesh-tape programs need a free DMA engine", () => {
  it("when the ring channels' folds take every engine, the mesh gate says so and auto goes on down the precedence", () => {
    const lnc1 = loadDevice("trn2-lnc1");
    const scn = { ...auto(4, 1, "all-gather", 4096), instance: "trn2-lnc1", channels: 4 };
    const e = explainScenario(scn, lnc1)[0]!;
    expect(e.gates.find((g) => g.gate === "mesh")!.verdict.reason).toMatch(/none is left for a mesh-tape program/);
    expect(() => compileProgram(scn, lnc1, [0])).not.toThrow();
  });
});
