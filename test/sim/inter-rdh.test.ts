// Inter-node RDH: recursive halving / doubling between nodes (one rank each), every transfer and
// signal to the partner a network proxy entry; on the ideal network machine against its closed form.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { compileProgram, explainScenario } from "../../src/enc/compile.ts";
import { loadDevice } from "../../src/run/load.ts";
import { dtypeSize } from "../../src/ir/dtypes.ts";
import { EncAlgType } from "../../src/ir/enums.ts";
import type { OpName } from "../../src/ir/spec.ts";
import { simulate } from "../../sim/index.ts";
import { expectRunChecks, scenario, anyDtype, collectiveOp } from "../helpers.ts";

const net = loadDevice("ideal-net");
const alpha = net.network!.latencyPs;
const beta = 1e12 / net.network!.bytesPerSecond;

function simTime(op: OpName, p: number, S: number): number {
  const scn = scenario({ instance: "ideal-net", ranks: p, nodes: p, channels: 1, check: "none", algorithm: "inter-rdh", allowedAlgorithms: [EncAlgType.INTER_RDH], ops: [{ op, bytes: S, dtype: "fp32", reduce: "sum" }] });
  const { image, layout } = compileProgram(scn, net, [0]);
  expect(layout.ops[0]!.algorithm).toBe(EncAlgType.INTER_RDH);
  // Nothing crosses a node but through the proxies.
  expect(image.devices.every((d) => d.proxyQueues.length === 1)).toBe(true);
  const r = simulate(net, image, { storePayload: false });
  expect(r.hang).toBeUndefined();
  return r.opEndPs[0]!;
}

describe("inter-node RDH on the ideal network machine", () => {
  it("random configurations check", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(8, 16),
        collectiveOp,
        anyDtype,
        fc.integer({ min: 1, max: 300 }),
        (p, op, dtype, elems) => {
          const scn = scenario({ instance: "ideal-net", ranks: p, nodes: p, algorithm: "inter-rdh", allowedAlgorithms: [EncAlgType.INTER_RDH], ops: [{ op, bytes: elems * p * dtypeSize(dtype), dtype, reduce: "max" }] });
          expectRunChecks(scn, net, "inter-rdh");
        },
      ),
      { numRuns: 10, seed: 13 },
    );
  });

  // A handshake message, then lg p exchange steps per phase, each one network latency plus its bytes.
  const closedForm = (op: OpName, p: number, S: number) => {
    const m = op === "all-reduce" ? 2 : 1;
    return (1 + m * Math.log2(p)) * alpha + m * ((p - 1) / p) * S * beta;
  };
  const cases = (["all-reduce", "all-gather", "reduce-scatter"] as const).flatMap((op) => [8, 16, 32].flatMap((p) => [1 << 16, 1 << 20, 1 << 24].map((S) => [op, p, S] as const)));
  it.each(cases)("%s p=%i S=%i: (1 + m lg p) alpha + m (p-1)/p S beta within 1%", (op, p, S) => {
    expect(Math.abs(simTime(op, p, S) / closedForm(op, p, S) - 1)).toBeLessThan(0.01);
  });

  it("is the textbook 2 lg p alpha + 2 (p-1)/p S beta but for the handshake's one alpha", () => {
    const p = 16;
    const S = 1 << 24;
    const t = simTime("all-reduce", p, S);
    expect(t - (2 * Math.log2(p) * alpha + 2 * ((p - 1) / p) * S * beta)).toBeGreaterThan(0.99 * alpha);
    expect(t - (2 * Math.log2(p) * alpha + 2 * ((p - 1) / p) * S * beta)).toBeLessThan(1.01 * alpha);
  });

  it("auto: the gates admit inter RDH for 8+ power-of-two nodes of one rank; the single-cycle ring outranks it for all-reduce", () => {
    const scn = { ...scenario({ instance: "ideal-net", ranks: 8, nodes: 8, ops: [{ op: "all-gather", bytes: 1 << 16, dtype: "fp32", reduce: "sum" }, { op: "all-reduce", bytes: 1 << 16, dtype: "fp32", reduce: "sum" }] }), algorithm: "auto" as const, allowedAlgorithms: undefined };
    expect(explainScenario(scn, net).map((e) => e.resolved.value)).toEqual([EncAlgType.INTER_RDH, EncAlgType.SINGLE_CYCLE_RING]);
    const four = { ...scn, ranks: 4, nodes: 4, replicaGroups: [[0, 1, 2, 3]] };
    expect(explainScenario(four, net)[0]!.gates.find((g) => g.gate === "inter_rdh")!.verdict.reason).toMatch(/rank_n 4 is not a power of two above 7/);
  });
});
