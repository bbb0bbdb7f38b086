// trn3's NeuronSwitch-v1: a switch topology in the fabric (a port per device, two hops a transfer)
// and the switch mesh's latency- and bandwidth-optimal variants (MESH_SWITCH).
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { compileProgram, explainScenario } from "../../src/enc/compile.ts";
import { decodeSpadCtrlEntry } from "../../src/encd/ccop.ts";
import { EncAlgMeshType, EncAlgType, EncPattern } from "../../src/ir/enums.ts";
import type { OpName } from "../../src/ir/spec.ts";
import { loadDevice } from "../../src/run/load.ts";
import { simulate } from "../../sim/index.ts";
import { Fabric } from "../../sim/hw/fabric.ts";
import { expectRunChecks, scenario } from "../helpers.ts";

const idealSwitch = loadDevice("ideal-switch");
const trn3 = loadDevice("trn3");
const alpha = idealSwitch.link.latencyPs;
const beta = 1e12 / idealSwitch.link.bytesPerSecond;

describe("the switch fabric", () => {
  it("routes every transfer up the sender's port and down the receiver's", () => {
    const f = new Fabric(idealSwitch, 16);
    expect(f.route(3, 11).map((l) => l.name)).toEqual(["port 3->switch", "port switch->11"]);
    expect(f.route(5, 5)).toEqual([]);
  });
});

describe("switch meshes on the ideal switch (16 ports)", () => {
  const time = (alg: "latency-opt-mesh" | "bw-opt-mesh", op: OpName, n: number, S: number) => {
    const a = alg === "latency-opt-mesh" ? EncAlgType.LATENCY_OPT_MESH : EncAlgType.BW_OPT_MESH;
    const scn = scenario({ instance: "ideal-switch", ranks: n, algorithm: alg, allowedAlgorithms: [a], channels: 1, check: "none", ops: [{ op, bytes: S, dtype: "fp32", reduce: "sum" }] });
    const { image, layout } = compileProgram(scn, idealSwitch, [0]);
    expect(layout.ops[0]!.algorithm).toBe(a);
    const r = simulate(idealSwitch, image, { storePayload: false });
    expect(r.hang).toBeUndefined();
    return r.opEndPs[0]!;
  };
  // Peers in rotation: each port carries one flow at a time. The handshake and each exchange take
  // two hops (2 alpha); an exchange moves what one port sends.
  for (const n of [4, 8, 16]) {
    it.each([1 << 16, 1 << 20])(`n=${n} S=%i: latency-optimal all-reduce 4α + (n-1)Sβ, bandwidth-optimal 6α + 2(n-1)/n·Sβ, all-gather 4α + (n-1)/n·Sβ, within 1%`, (S) => {
      const within = (got: number, want: number) => expect(Math.abs(got / want - 1)).toBeLessThan(0.01);
      within(time("latency-opt-mesh", "all-reduce", n, S), 4 * alpha + (n - 1) * S * beta);
      within(time("bw-opt-mesh", "all-reduce", n, S), 6 * alpha + ((2 * (n - 1)) / n) * S * beta);
      within(time("bw-opt-mesh", "all-gather", n, S), 4 * alpha + ((n - 1) / n) * S * beta);
    });
  }
});

describe("selection on trn3", () => {
  const pick = (bytes: number, op: OpName = "all-reduce", over: Partial<Parameters<typeof scenario>[0]> = {}) =>
    explainScenario(scenario({ instance: "trn3", ranks: 32, ranksPerDevice: 4, algorithm: "auto", allowedAlgorithms: undefined, ops: [{ op, bytes, dtype: "fp32", reduce: "sum" }], ...over }), trn3)[0]!.resolved.value;
  it("the latency variant while the whole buffer fits the window, then the bandwidth variant, then the ring", () => {
    expect(pick(16384)).toBe(EncAlgType.LATENCY_OPT_MESH);
    expect(pick(65536)).toBe(EncAlgType.BW_OPT_MESH);
    expect(pick(8 << 20)).toBe(EncAlgType.RING);
    // All-to-all has only the full mesh.
    expect(pick(131072, "all-to-all")).toBe(EncAlgType.MESH);
  });
  it("a group on one device builds no switch mesh (its ranks are all local): the full mesh", () => {
    expect(pick(16384, "all-reduce", { ranks: 4 })).toBe(EncAlgType.MESH);
  });
  it("its cc_op entries carry the MESH pattern and the MESH_SWITCH mesh type", () => {
    const scn = scenario({ instance: "trn3", ranks: 8, ranksPerDevice: 4, algorithm: "bw-opt-mesh", allowedAlgorithms: [EncAlgType.BW_OPT_MESH], ops: [{ op: "all-reduce", bytes: 65536, dtype: "fp32", reduce: "sum" }] });
    const e = decodeSpadCtrlEntry(compileProgram(scn, trn3, [0]).image.devices[0]!.topsps[0]!.ctrlSpad, 0);
    expect([e.algoType, e.algoSubType]).toEqual([EncPattern.MESH, EncAlgMeshType.MESH_SWITCH]);
  });
  it("random switch-mesh configurations check by values", () => {
    fc.assert(
      fc.property(fc.constantFrom("latency-opt-mesh" as const, "bw-opt-mesh" as const), fc.constantFrom(2, 3, 8), fc.constantFrom(1, 2, 4), fc.constantFrom("all-reduce", "all-gather", "reduce-scatter") as fc.Arbitrary<OpName>, fc.integer({ min: 1, max: 30 }), (alg, devices, rpd, op, k) => {
        const ranks = devices * rpd;
        const a = alg === "latency-opt-mesh" ? EncAlgType.LATENCY_OPT_MESH : EncAlgType.BW_OPT_MESH;
        const bytes = op === "all-reduce" ? k * 4 * 3 : k * 4 * ranks;
        const scn = scenario({ instance: "trn3", ranks, ranksPerDevice: rpd, algorithm: alg, allowedAlgorithms: [EncAlgType.RING, a], ops: [{ op, bytes, dtype: "fp32", reduce: "sum" }] });
        expect(compileProgram(scn, trn3, [0]).layout.ops[0]!.algorithm).toBe(a);
        expectRunChecks(scn, trn3);
      }),
      { numRuns: 12, seed: 17 },
    );
  });
});
