// Intra-node RDH: recursive halving / doubling on the mesh event tape.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { compileProgram, explainScenario } from "../../src/enc/compile.ts";
import { loadDevice } from "../../src/run/load.ts";
import { EncAlgType } from "../../src/ir/enums.ts";
import { dtypeSize } from "../../src/ir/dtypes.ts";
import type { OpName } from "../../src/ir/spec.ts";
import { simulate } from "../../sim/index.ts";
import { expectRunChecks, scenario, trn1, anyDtype, collectiveOp } from "../helpers.ts";
import { bitReverse } from "../../src/enc/rdh.ts";
import { DESC_BYTES, decodeRx } from "../../src/encd/udma.ts";
import { decodeAddress } from "../../src/encd/address.ts";

const base = loadDevice("ideal-mesh");
const spec = { ...base, collectives: { ...base.collectives, supportedAlgorithms: [EncAlgType.RING, EncAlgType.MESH, EncAlgType.INTRA_RDH] } };
const alpha = spec.link.latencyPs;
const beta = 1e12 / spec.link.bytesPerSecond;
const RDH = [EncAlgType.RING, EncAlgType.MESH, EncAlgType.INTRA_RDH];

describe("RDH on the fully connected ideal machine", () => {
  // log2(n) exchange steps per phase, step k moving 2^k blocks (doubling) or n / 2^(k+1) (halving):
  // T = (p log2 n + 1) α + p ((n-1)/n) S β, p = 1 (all-gather, reduce-scatter) or 2 (all-reduce).
  for (const op of ["all-gather", "reduce-scatter", "all-reduce"] as const) {
    for (const n of [4, 8, 16]) {
      it.each([1 << 16, 1 << 22, 1 << 26])(`${op} n=${n} S=%i agrees with the closed form within 1%`, (S) => {
        const scn = scenario({ instance: "ideal-mesh", ranks: n, algorithm: "auto", allowedAlgorithms: RDH, channels: 1, check: "none", ops: [{ op, bytes: S, dtype: "fp32", reduce: "sum" }] });
        const { image, layout } = compileProgram(scn, spec, [0]);
        expect(layout.ops[0]!.algorithm).toBe(EncAlgType.INTRA_RDH);
        const t = simulate(spec, image, { storePayload: false }).opEndPs[0]!;
        const p = op === "all-reduce" ? 2 : 1;
        const form = (p * Math.log2(n) + 1) * alpha + p * ((n - 1) / n) * S * beta;
        expect(Math.abs(t / form - 1)).toBeLessThan(0.01);
      });
    }
  }
});

describe("RDH on trn1", () => {
  it("the gate admits only the rank counts the intra-node scheduler has (4, 8, 16, 64): auto never resolves to an RDH it cannot build", () => {
    for (const ranks of [2, 3, 5, 6, 12]) {
      const scn = scenario({ ranks, algorithm: "auto", allowedAlgorithms: RDH, ops: [{ op: "all-reduce", bytes: 4096, dtype: "fp32", reduce: "sum" }] });
      const gate = explainScenario(scn, trn1)[0]!.gates.find((g) => g.gate === "intra_rdh")!.verdict;
      expect(gate.ok).toBe(false);
      expect(gate.reason).toContain(`rank_n in {4, 8, 16, 64}, not ${ranks}`);
      expect(compileProgram(scn, trn1, [0]).layout.ops[0]!.algorithm).not.toBe(EncAlgType.INTRA_RDH);
    }
  });
  it("random configurations complete and check", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(4, 8, 16),
        collectiveOp,
        anyDtype,
        fc.integer({ min: 1, max: 700 }),
        fc.integer({ min: 0, max: 15 }),
        (n, op, dtype, elems, extra) => {
          const count = elems * n + (op === "all-reduce" ? extra % n : 0);
          const scn = scenario({ ranks: n, algorithm: "auto", allowedAlgorithms: RDH, channels: 2, ops: [{ op, bytes: count * dtypeSize(dtype), dtype, reduce: "max" }] });
          expectRunChecks(scn, trn1, "intra-rdh");
        },
      ),
      { numRuns: 40, seed: 11 },
    );
  });
  it("halving starts with the nearest partner (i XOR 1), an all-gather's doubling with the farthest (i XOR n/2)", () => {
    // The first payload write of rank 0's mesh program to another device names the step-0 partner.
    const firstPartner = (op: OpName) => {
      const { image } = compileProgram(scenario({ ranks: 8, algorithm: "auto", allowedAlgorithms: RDH, channels: 2, check: "none", ops: [{ op, bytes: 8 << 12, dtype: "fp32", reduce: "sum" }] }), trn1, [0]);
      const q = image.devices[0]!.queues.find((x) => x.engine === 4 && x.queue === trn1.dma.collectiveQueue)!;
      for (let o = 0; o < q.rx.length; o += DESC_BYTES) {
        const r = decodeRx(q.rx, o);
        if (r.length > 4 && decodeAddress(r.dst).device !== 0) return decodeAddress(r.dst).device;
      }
      return -1;
    };
    expect(firstPartner("all-reduce")).toBe(1);
    expect(firstPartner("reduce-scatter")).toBe(1);
    expect(firstPartner("all-gather")).toBe(4);
    expect(bitReverse(0b0011, 4)).toBe(0b1100);
    expect(bitReverse(0b1010, 4)).toBe(0b0101);
  });
});
