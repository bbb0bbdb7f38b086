// Hierarchical ops: intra-node and inter-node stages on their own channel sets, device barriers
// between them; values on trn1, and the two-level closed form on the ideal machine.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { compileProgram } from "../../src/enc/compile.ts";
import { dtypeSize } from "../../src/ir/dtypes.ts";
import { EncAlgType } from "../../src/ir/enums.ts";
import type { DeviceSpec, HierChoice, OpName } from "../../src/ir/spec.ts";
import { simulate } from "../../sim/index.ts";
import { decodeSpadCtrlEntry } from "../../src/encd/ccop.ts";
import { expectRunChecks, ideal, scenario, trn1, anyDtype, collectiveOp } from "../helpers.ts";
import { loadDevice } from "../../src/run/load.ts";
import { runScenario } from "../../src/run/pipeline.ts";
import { explainText } from "../../src/cli/explain.ts";
import pino from "pino";

/** Group ranks position by position across nodes (rank l of node k at group rank l * nodes + k). */
const positionMajor = (nodes: number, perNode: number) => Array.from({ length: nodes * perNode }, (_, g) => (g % nodes) * perNode + Math.floor(g / nodes));

describe("hierarchical on two trn1 nodes", () => {
  it("random configurations check: every stage algorithm, all three ops", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(1, 2),
        fc.constantFrom(4, 8),
        collectiveOp,
        anyDtype,
        fc.integer({ min: 1, max: 300 }),
        fc.integer({ min: 1, max: 2 }),
        fc.constantFrom("ring", "kangaring", "mesh", "intra-rdh") as fc.Arbitrary<HierChoice["intra"]>,
        fc.boolean(),
        fc.boolean(),
        (rpd, perNode, op, dtype, elems, channels, intra, scr, nodeMajor) => {
          const inter = scr && op === "all-reduce" ? "single-cycle-ring" : "ring";
          const ranks = 2 * perNode;
          const scn = scenario({
            ranks,
            ranksPerDevice: rpd,
            nodes: 2,
            channels,
            chunkBytes: 2048,
            algorithm: "hier",
            allowedAlgorithms: [EncAlgType.HIER],
            hierarchical: { intra, inter },
            // Node by node (the default order) needs the local block transpose for RS / AG.
            replicaGroups: [nodeMajor ? [...Array(ranks).keys()] : positionMajor(2, perNode)],
            ops: [{ op, bytes: elems * ranks * dtypeSize(dtype), dtype, reduce: "sum" }],
          });
          expectRunChecks(scn, trn1);
        },
      ),
      { numRuns: 20, seed: 5 },
    );
  });

  it("an all-reduce of any size runs: one that does not split into whole blocks per rank and per node runs padded to them", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(1, 2),
        fc.constantFrom(2, 4, 8),
        fc.constantFrom(1, 2, 3),
        anyDtype,
        fc.integer({ min: 1, max: 700 }),
        fc.constantFrom("ring", "kangaring", "mesh", "intra-rdh") as fc.Arbitrary<HierChoice["intra"]>,
        fc.constantFrom("ring", "single-cycle-ring") as fc.Arbitrary<HierChoice["inter"]>,
        (rpd, perNode, slices, dtype, elems, intra, inter) => {
          const ranks = 2 * perNode;
          if (intra === "intra-rdh" && perNode < 4) return;
          if (slices > 1 && (intra === "mesh" || intra === "intra-rdh")) return;
          const esize = dtypeSize(dtype);
          const scn = scenario({ ranks, ranksPerDevice: rpd, nodes: 2, channels: 1, chunkBytes: 2048, algorithm: "hier", allowedAlgorithms: [EncAlgType.HIER], hierarchical: { intra, inter, slices }, ops: [{ op: "all-reduce", bytes: elems * esize, dtype, reduce: "sum" }] });
          expectRunChecks(scn, trn1);
          const block = slices * ranks;
          expect(compileProgram(scn, trn1, [0]).layout.ops[0]!.padBytes ?? 0).toBe((Math.ceil(elems / block) * block - elems) * esize);
        },
      ),
      { numRuns: 24, seed: 21 },
    );
  });

  it("all-reduce works in any group order; the stages and the runtime's selection line are recorded", () => {
    const scn = scenario({ ranks: 16, nodes: 2, channels: 2, algorithm: "hier", allowedAlgorithms: [EncAlgType.HIER], ops: [{ op: "all-reduce", bytes: 1 << 20, dtype: "fp32", reduce: "sum" }] });
    expectRunChecks(scn, trn1);
    const { layout } = compileProgram(scn, trn1, [0]);
    const ol = layout.ops[0]!;
    expect(ol.algorithm).toBe(EncAlgType.HIER);
    // auto: intra first of (intra RDH, mesh, kangaring) — RDH for 8 ranks; inter all-reduce first of (mesh, inter RDH, single-cycle ring).
    expect(ol.stages).toEqual([
      { level: "intra", op: "reduce-scatter", alg: EncAlgType.INTRA_RDH },
      { level: "inter", op: "all-reduce", alg: EncAlgType.SINGLE_CYCLE_RING },
      { level: "intra", op: "all-gather", alg: EncAlgType.INTRA_RDH },
    ]);
    expect(ol.selections).toBe("Hier algorithm selections - alg_intra_allg 5 alg_intra_redsct 5 alg_inter_allr 4 alg_inter_allg 11 alg_inter_redsct 11");
  });

  it("plugs inter-node RDH into the inter stage: the lists put it before the single-cycle ring (8 nodes of the ideal network machine)", () => {
    const net = loadDevice("ideal-net");
    for (const op of ["all-gather", "reduce-scatter", "all-reduce"] as const) {
      const scn = scenario({ instance: "ideal-net", ranks: 16, nodes: 8, channels: 1, algorithm: "hier", allowedAlgorithms: [EncAlgType.HIER], hierarchical: { intra: "ring", inter: "auto" }, replicaGroups: [positionMajor(8, 2)], ops: [{ op, bytes: 16 * 64 * 4, dtype: "fp32", reduce: "sum" }] });
      expectRunChecks(scn, net, op === "all-reduce" ? "hier(ring,inter-rdh,ring)" : op === "all-gather" ? "hier(inter-rdh,ring)" : "hier(ring,inter-rdh)");
    }
  });

  it("--explain shows the stages and the selection line", () => {
    const scn = scenario({ ranks: 8, nodes: 2, channels: 1, check: "none", algorithm: "hier", allowedAlgorithms: [EncAlgType.HIER], hierarchical: { intra: "ring", inter: "ring" }, ops: [{ op: "all-reduce", bytes: 1 << 16, dtype: "fp32", reduce: "sum" }] });
    const out = runScenario(scn, trn1, pino({ level: "silent" }));
    if (out.kind !== "done") throw new Error("hang");
    const text = explainText(scn, out.explain);
    expect(text).toContain("  hierarchical stages: intra reduce-scatter on ring -> inter all-reduce on ring -> intra all-gather on ring\n");
    expect(text).toContain("    Hier algorithm selections - alg_intra_allg 0 alg_intra_redsct 0 alg_inter_allr 0 alg_inter_allg 11 alg_inter_redsct 11\n");
  });

  it("node-by-node groups: reduce-scatter transposes its blocks locally first, all-gather last", () => {
    for (const op of ["reduce-scatter", "all-gather"] as const) {
      const scn = scenario({ ranks: 8, nodes: 2, channels: 2, algorithm: "hier", allowedAlgorithms: [EncAlgType.HIER], hierarchical: { intra: "ring", inter: "ring" }, ops: [{ op, bytes: 8 * 1000 * 4, dtype: "fp32", reduce: "sum" }] });
      expectRunChecks(scn, trn1, "hier(ring,ring)");
      const { image } = compileProgram(scn, trn1, [0]);
      const t0 = image.devices[0]!.topsps[0]!;
      expect(t0.opNum).toBe(3);
      // The transpose runs on the intra set's channel 0 (abs_id 2) alone.
      const lists = [0, 1, 2].map((i) => decodeSpadCtrlEntry(t0.ctrlSpad, i * 8).channelList);
      expect(op === "reduce-scatter" ? lists[0] : lists[2]).toBe(1 << 2);
    }
  });

  it("only the last stage reports; a barrier closes each earlier stage", () => {
    const scn = scenario({ ranks: 8, nodes: 2, channels: 1, check: "none", algorithm: "hier", allowedAlgorithms: [EncAlgType.HIER], hierarchical: { intra: "ring", inter: "ring" }, ops: [{ op: "all-reduce", bytes: 1 << 16, dtype: "fp32", reduce: "sum" }] });
    const { image } = compileProgram(scn, trn1, [0]);
    const t0 = image.devices[0]!.topsps[0]!;
    expect(t0.opNum).toBe(3);
    const r = simulate(trn1, image, { storePayload: false });
    expect(r.hang).toBeUndefined();
    expect(r.opEndPs).toHaveLength(1);
  });
});

// The ideal machine with a network: every device has its own NIC (alpha2 = 10 us, beta2 = 1 / 5 GB/s).
const idealNet: DeviceSpec = { ...ideal, name: "ideal-net", collectives: { ...ideal.collectives, supportedAlgorithms: [EncAlgType.RING, EncAlgType.HIER] }, network: { bytesPerSecond: 5e9, latencyPs: 10_000_000, messageCostPs: 0, bufferSlots: 64, nicPerDevice: 1 } };
const a1 = ideal.link.latencyPs;
const b1 = 1e12 / ideal.link.bytesPerSecond;
const a2 = idealNet.network!.latencyPs;
const b2 = 1e12 / idealNet.network!.bytesPerSecond;

/** One ring stage of half-chunk steps (test/sim/ideal.test.ts): m sending steps chained hop to hop; RS adds the credit drain. */
function ringStage(op: OpName, n: number, S: number, alpha: number, beta: number): number {
  const tau = (S / n / 2) * beta;
  const m = op === "all-reduce" ? 2 * (n - 1) : n - 1;
  return (m - 1) * Math.max(alpha + tau, 2 * tau) + 2 * tau + alpha + (op === "reduce-scatter" ? alpha : 0);
}

/** The device barrier between stages: leaders meet across the node's ring, the farthest floor(p/2) hops away. */
const barrier = (p: number) => Math.floor(p / 2) * a1;

function hierTime(p1: number, p2: number, S: number): number {
  const scn = scenario({
    instance: "ideal-net",
    ranks: p1 * p2,
    nodes: p2,
    channels: 1,
    check: "none",
    algorithm: "hier",
    allowedAlgorithms: [EncAlgType.HIER],
    hierarchical: { intra: "ring", inter: "ring" },
    ops: [{ op: "all-reduce", bytes: S, dtype: "fp32", reduce: "sum" }],
  });
  const { image } = compileProgram(scn, idealNet, [0]);
  const r = simulate(idealNet, image, { storePayload: false });
  expect(r.hang).toBeUndefined();
  return r.opEndPs[0]!;
}

describe("ideal machine: two-level all-reduce, ring at both levels", () => {
  const cases = [2, 4, 8].flatMap((p1) => [2, 4].flatMap((p2) => [1 << 16, 1 << 20, 1 << 24].map((S) => [p1, p2, S] as const)));
  it.each(cases)("p1=%i p2=%i S=%i: RS(p1) + barrier + AR(p2, S/p1) + barrier + AG(p1) within 1%", (p1, p2, S) => {
    const form = ringStage("reduce-scatter", p1, S, a1, b1) + barrier(p1) + ringStage("all-reduce", p2, S / p1, a2, b2) + barrier(p1) + ringStage("all-gather", p1, S, a1, b1);
    expect(Math.abs(hierTime(p1, p2, S) / form - 1)).toBeLessThan(0.01);
  });

  it("where bandwidth dominates, the textbook two-level form holds", () => {
    const p1 = 4;
    const p2 = 4;
    const S = 1 << 26;
    const textbook = 2 * (p1 - 1) * a1 + 2 * ((p1 - 1) / p1) * S * b1 + 2 * (p2 - 1) * a2 + 2 * ((p2 - 1) / (p1 * p2)) * S * b2;
    expect(Math.abs(hierTime(p1, p2, S) / textbook - 1)).toBeLessThan(0.02);
  });
});

describe("pipelined hierarchical all-reduce (slices > 1)", () => {
  it("random configurations check", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(2, 3, 4),
        fc.constantFrom(1, 2),
        fc.constantFrom(4, 8),
        anyDtype,
        fc.integer({ min: 1, max: 100 }),
        fc.constantFrom("ring", "kangaring") as fc.Arbitrary<HierChoice["intra"]>,
        fc.constantFrom("ring", "single-cycle-ring") as fc.Arbitrary<HierChoice["inter"]>,
        (slices, rpd, perNode, dtype, elems, intra, inter) => {
          const ranks = 2 * perNode;
          const scn = scenario({ ranks, ranksPerDevice: rpd, nodes: 2, channels: 2, chunkBytes: 2048, algorithm: "hier", allowedAlgorithms: [EncAlgType.HIER], hierarchical: { intra, inter, slices }, ops: [{ op: "all-reduce", bytes: elems * slices * perNode * dtypeSize(dtype), dtype, reduce: "sum" }] });
          expectRunChecks(scn, trn1);
        },
      ),
      { numRuns: 12, seed: 9 },
    );
  });

  const trn1Time = (slices: number) => {
    const scn = scenario({ ranks: 32, nodes: 2, channels: 2, check: "none", algorithm: "hier", allowedAlgorithms: [EncAlgType.HIER], hierarchical: { intra: "ring", inter: "ring", slices }, ops: [{ op: "all-reduce", bytes: 16 << 20, dtype: "fp32", reduce: "sum" }] });
    const { image } = compileProgram(scn, trn1, [0]);
    const r = simulate(trn1, image, { storePayload: false });
    expect(r.hang).toBeUndefined();
    return { image, t: r.opEndPs[0]! };
  };

  it("overlaps a slice's inter-node all-reduce with the next slice's intra-node reduce-scatter: one entry runs both channel sets", () => {
    const { image, t } = trn1Time(2);
    // Steps: RS(0) | AR(0) + RS(1) | AG(0) + AR(1) | AG(1), channel sets 1 (intra RS), 2 (inter), 3 (intra AG).
    const t0 = image.devices[0]!.topsps[0]!;
    expect(t0.opNum).toBe(4);
    expect([0, 1, 2, 3].map((i) => decodeSpadCtrlEntry(t0.ctrlSpad, i * 8).channelList)).toEqual([1 << 2, (1 << 2) | (1 << 4), (1 << 4) | (1 << 6), 1 << 6]);
    // 16 MiB fp32 on 2 trn1 nodes: the overlap pays (sequential stages take about 600 us).
    expect(t).toBeLessThan(0.8 * trn1Time(1).t);
  });

  it("ideal machine, 2 slices: RS + max(AR, RS) + max(AG, AR) + AG of half the op, a barrier between steps, within 1%", () => {
    for (const [p1, p2, S] of [[4, 2, 1 << 22], [8, 4, 1 << 24], [2, 4, 1 << 20]] as const) {
      const scn = scenario({ instance: "ideal-net", ranks: p1 * p2, nodes: p2, channels: 1, check: "none", algorithm: "hier", allowedAlgorithms: [EncAlgType.HIER], hierarchical: { intra: "ring", inter: "ring", slices: 2 }, ops: [{ op: "all-reduce", bytes: S, dtype: "fp32", reduce: "sum" }] });
      const { image } = compileProgram(scn, idealNet, [0]);
      const r = simulate(idealNet, image, { storePayload: false });
      expect(r.hang).toBeUndefined();
      const h = S / 2;
      const rs = ringStage("reduce-scatter", p1, h, a1, b1);
      const ar = ringStage("all-reduce", p2, h / p1, a2, b2);
      const ag = ringStage("all-gather", p1, h, a1, b1);
      const form = rs + Math.max(ar, rs) + Math.max(ag, ar) + ag + 3 * barrier(p1);
      expect(Math.abs(r.opEndPs[0]! / form - 1)).toBeLessThan(0.01);
    }
  });
});
