// Simulated time on devices/ideal.json against the alpha-beta closed form of the emitted schedule
// (derived in docs/device-model.md, "Timing on the ideal machine").
import { describe, expect, it } from "vitest";
import { compileProgram } from "../../src/enc/compile.ts";
import type { OpName } from "../../src/ir/spec.ts";
import { simulate } from "../../sim/index.ts";
import { busFactor, throughput } from "../../src/report/table.ts";
import { ideal, scenario } from "../helpers.ts";

const alpha = ideal.link.latencyPs;
const beta = 1e12 / ideal.link.bytesPerSecond; // ps per byte

/** Closed form: m sending steps of half chunks tau, chained hop to hop; RS adds the credit drain. */
function closedForm(op: OpName, n: number, S: number, groups = 1): number {
  const tau = (S / groups / n / 2) * beta;
  const m = op === "all-reduce" ? 2 * (n - 1) : n - 1;
  const group = (m - 1) * Math.max(alpha + tau, 2 * tau) + 2 * tau + alpha + (op === "reduce-scatter" ? alpha : 0);
  return groups * group;
}

/** The textbook non-pipelined form the issue quotes (whole chunks, no halves). */
function textbook(op: OpName, n: number, S: number): number {
  const steps = op === "all-reduce" ? 2 * (n - 1) : n - 1;
  return steps * alpha + steps * (S / n) * beta;
}

function simTime(op: OpName, n: number, S: number, chunkBytes?: number): number {
  const scn = scenario({ instance: "ideal", ranks: n, channels: 1, check: "none", ...(chunkBytes ? { chunkBytes } : {}), ops: [{ op, bytes: S, dtype: "fp32", reduce: "sum" }] });
  const { image } = compileProgram(scn, ideal, [0]);
  const r = simulate(ideal, image, { storePayload: false });
  expect(r.hang).toBeUndefined();
  return r.opEndPs[0]!;
}

const OPS: OpName[] = ["all-reduce", "all-gather", "reduce-scatter"];
const SIZES = [1 << 16, 1 << 20, 1 << 24, 1 << 26];

describe("ideal machine: one channel, one chunk group, half-chunk steps", () => {
  for (const op of OPS) {
    for (const n of [2, 4, 8, 16]) {
      it.each(SIZES)(`${op} n=${n} S=%i agrees with the closed form within 1%`, (S) => {
        const t = simTime(op, n, S);
        expect(Math.abs(t / closedForm(op, n, S) - 1)).toBeLessThan(0.01);
      });
    }
  }

  it("matches the textbook alpha-beta form where bandwidth dominates (halves change only the latency term)", () => {
    for (const op of OPS) {
      const t = simTime(op, 8, 1 << 26);
      expect(Math.abs(t / textbook(op, 8, 1 << 26) - 1)).toBeLessThan(0.01);
    }
  });
});

describe("ideal machine: k chunk groups run back to back", () => {
  it.each([
    ["all-reduce", 4, 1 << 22, 4],
    ["all-gather", 8, 1 << 23, 2],
    ["reduce-scatter", 4, 1 << 22, 8],
  ] as const)("%s n=%i S=%i in %i groups", (op, n, S, k) => {
    const t = simTime(op, n, S, S / n / k);
    expect(Math.abs(t / closedForm(op, n, S, k) - 1)).toBeLessThan(0.01);
  });
});

describe("ideal machine: bus bandwidth", () => {
  it("approaches the link bandwidth (1/beta = 10 GB/s) for large sizes", () => {
    for (const op of OPS) {
      const S = 1 << 26;
      const n = 8;
      const { busbwGBps } = throughput(S, simTime(op, n, S), busFactor(op, n));
      expect(busbwGBps).toBeGreaterThan(0.97 * (ideal.link.bytesPerSecond / 1e9));
      expect(busbwGBps).toBeLessThanOrEqual(ideal.link.bytesPerSecond / 1e9);
    }
  });
});
