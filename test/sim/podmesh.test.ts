// The two-step pod mesh (TWO_STEP_POD_MESH) on an UltraServer pod: a row step inside each node and
// a column step across the nodes, for reduce-scatter and all-gather; all-reduce is both.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { compileProgram, explainScenario } from "../../src/enc/compile.ts";
import { decodeSpadCtrlEntry } from "../../src/encd/ccop.ts";
import { EncAlgMeshType, EncAlgType, EncPattern } from "../../src/ir/enums.ts";
import type { OpName } from "../../src/ir/spec.ts";
import { loadDevice } from "../../src/run/load.ts";
import { simulate } from "../../sim/index.ts";
import { expectRunChecks, scenario } from "../helpers.ts";

const idealPod = loadDevice("ideal-pod");
const us = loadDevice("trn2-ultraserver");
const alpha = idealPod.link.latencyPs;
const beta = 1e12 / idealPod.link.bytesPerSecond;
const POD = [EncAlgType.RING, EncAlgType.MESH, EncAlgType.TWO_STEP_POD_MESH];

describe("two-step pod mesh on the ideal pod (2 nodes x 4 devices)", () => {
  const time = (op: OpName, S: number) => {
    const scn = scenario({ instance: "ideal-pod", ranks: 8, nodes: 2, algorithm: "two-step-pod-mesh", allowedAlgorithms: [EncAlgType.TWO_STEP_POD_MESH], channels: 1, check: "none", ops: [{ op, bytes: S, dtype: "fp32", reduce: "sum" }] });
    const { image, layout } = compileProgram(scn, idealPod, [0]);
    expect(layout.ops[0]!.algorithm).toBe(EncAlgType.TWO_STEP_POD_MESH);
    const r = simulate(idealPod, image, { storePayload: false });
    expect(r.hang).toBeUndefined();
    return r.opEndPs[0]!;
  };
  // P = 2 nodes of L = 4 ranks, blocks of S/8: the handshake (alpha), then each step a latency
  // and its busiest link's blocks — the row step P blocks a link, the column step one.
  const P = 2;
  const n = 8;
  const form = (op: OpName, S: number) => (op === "all-reduce" ? 5 * alpha + (2 * P + 2) * (S / n) * beta : 3 * alpha + (P + 1) * (S / n) * beta);
  for (const op of ["all-reduce", "all-gather", "reduce-scatter"] as const) {
    it.each([1 << 16, 1 << 20, 1 << 24])(`${op} S=%i agrees with the closed form within 1%`, (S) => {
      expect(Math.abs(time(op, S) / form(op, S) - 1)).toBeLessThan(0.01);
    });
  }
});

describe("selection on the UltraServer", () => {
  const pick = (over: Partial<Parameters<typeof scenario>[0]>, bytes = 65536) =>
    explainScenario(scenario({ instance: "trn2-ultraserver", ranks: 64, nodes: 4, algorithm: "auto", allowedAlgorithms: POD, ops: [{ op: "all-reduce", bytes, dtype: "fp32", reduce: "sum" }], ...over }), us)[0]!;
  it("a node-by-node group across the pod takes the pod mesh, ahead of the flat mesh", () => {
    const e = pick({});
    expect([e.resolved.value, e.resolved.name]).toEqual([EncAlgType.TWO_STEP_POD_MESH, "UltraServer Mesh"]);
    expect(e.gates.find((g) => g.gate === "mesh")!.verdict.reason).toMatch(/two-step-pod-mesh: .* 4 nodes x 16 ranks/);
  });
  it("a group whose nodes are interleaved is not a grid: the flat mesh runs", () => {
    const g = Array.from({ length: 64 }, (_, k) => (k % 4) * 16 + Math.floor(k / 4));
    expect(pick({ replicaGroups: [g] }).resolved.value).toBe(EncAlgType.MESH);
  });
  it("a group on one node is not a pod group", () => {
    expect(pick({ ranks: 16, nodes: 1 }).resolved.value).not.toBe(EncAlgType.TWO_STEP_POD_MESH);
  });
  it("its cc_op entries carry the MESH pattern and the MESH_TRN2 mesh type", () => {
    const scn = scenario({ instance: "trn2-ultraserver", ranks: 64, nodes: 4, algorithm: "two-step-pod-mesh", allowedAlgorithms: [EncAlgType.TWO_STEP_POD_MESH], ops: [{ op: "all-gather", bytes: 65536, dtype: "fp32", reduce: "sum" }] });
    const { image } = compileProgram(scn, us, [0]);
    const e = decodeSpadCtrlEntry(image.devices[0]!.topsps[0]!.ctrlSpad, 0);
    expect([e.algoType, e.algoSubType]).toEqual([EncPattern.MESH, EncAlgMeshType.MESH_TRN2]);
  });
});

describe("random pod configurations", () => {
  it("check by values on the UltraServer (2 to 4 nodes, 1 to 4 ranks a device, uneven sizes)", () => {
    fc.assert(
      fc.property(fc.constantFrom(2, 3, 4), fc.constantFrom(1, 2, 4), fc.constantFrom(1, 2, 4), fc.constantFrom("all-reduce", "all-gather", "reduce-scatter") as fc.Arbitrary<OpName>, fc.constantFrom("fp32" as const, "bf16" as const), fc.integer({ min: 1, max: 40 }), (nodes, devices, rpd, op, dtype, k) => {
        const ranks = nodes * devices * rpd;
        const esize = dtype === "fp32" ? 4 : 2;
        const bytes = op === "all-reduce" ? k * esize * 3 : k * esize * ranks;
        const scn = scenario({ instance: "trn2-ultraserver", ranks, nodes, ranksPerDevice: rpd, algorithm: "two-step-pod-mesh", allowedAlgorithms: [EncAlgType.RING, EncAlgType.TWO_STEP_POD_MESH], ops: [{ op, bytes, dtype, reduce: "sum" }] });
        expect(compileProgram(scn, us, [0]).layout.ops[0]!.algorithm).toBe(EncAlgType.TWO_STEP_POD_MESH);
        expectRunChecks(scn, us);
      }),
      { numRuns: 20, seed: 13 },
    );
  });
});

describe("folds of different packet counts", () => {
  // 4 ranks, 2 a device, 2 nodes: one fold reduces blocks one CCE packet longer than the other's,
  // so the shorter is short one TX over its RX, which only a 2-source reduce-shaped no-op with a
  // replicated one of 3 RX pads (it was ENC1606, "fold 1 cannot be padded", at these sizes).
  it.each([
    [65537, "fp8e4"],
    [8193, "fp8e4"],
    [65540, "fp32"],
    [16386, "bf16"],
  ] as const)("an all-reduce of %i B %s runs, values checked", (bytes, dtype) => {
    const scn = scenario({ instance: "trn2-ultraserver", ranks: 4, nodes: 2, ranksPerDevice: 2, algorithm: "two-step-pod-mesh", allowedAlgorithms: [EncAlgType.TWO_STEP_POD_MESH], ops: [{ op: "all-reduce", bytes, dtype, reduce: "sum" }] });
    expect(compileProgram(scn, us, [0]).layout.ops[0]!.algorithm).toBe(EncAlgType.TWO_STEP_POD_MESH);
    expectRunChecks(scn, us);
  });
});
