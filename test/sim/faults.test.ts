// Fault injection ("faults" in a scenario): a fault that stops progress ends in the hang report
// naming it; a slowed run reports its time; faults are validated like every other field.
import { describe, expect, it } from "vitest";
import pino from "pino";
import { compileProgram } from "../../src/enc/compile.ts";
import type { Fault, OpName } from "../../src/ir/spec.ts";
import { parseScenario } from "../../src/scenario/index.ts";
import { runScenario } from "../../src/run/pipeline.ts";
import { formatHang, simulate } from "../../sim/index.ts";
import { ideal, refusal, scenario, trn1 } from "../helpers.ts";

const silent = pino({ level: "silent" });

const alpha = ideal.link.latencyPs;
const beta = 1e12 / ideal.link.bytesPerSecond;

/** The ideal ring's closed form (test/sim/ideal.test.ts) at link cost `b` per byte. */
function closedForm(op: OpName, n: number, S: number, b: number): number {
  const tau = (S / n / 2) * b;
  const m = op === "all-reduce" ? 2 * (n - 1) : n - 1;
  return (m - 1) * Math.max(alpha + tau, 2 * tau) + 2 * tau + alpha + (op === "reduce-scatter" ? alpha : 0);
}

const ring8 = (faults: Fault[], check: "values" | "none" = "none") =>
  scenario({ ranks: 8, channels: 2, check, faults, ops: [{ op: "all-reduce", bytes: 1 << 22, dtype: "fp32", reduce: "sum" }] });

describe("fault injection", () => {
  it.each(["all-reduce", "all-gather", "reduce-scatter"] as const)("a link slowed by 2 slows a bandwidth-bound %s on the ideal ring as the alpha-beta form predicts (within 5%)", (op) => {
    const S = 1 << 26;
    const scn = scenario({ instance: "ideal", ranks: 8, channels: 1, check: "none", ops: [{ op, bytes: S, dtype: "fp32", reduce: "sum" }] });
    const { image } = compileProgram(scn, ideal, [0]);
    const slow = simulate(ideal, image, { storePayload: false, faults: [{ kind: "link-slow", from: 0, to: 1, factor: 2 }] });
    expect(slow.hang).toBeUndefined();
    expect(Math.abs(slow.opEndPs[0]! / closedForm(op, 8, S, 2 * beta) - 1)).toBeLessThan(0.05);
  });

  it("a link that goes down stops the run: the hang report names the link and the write it holds", () => {
    const out = runScenario(ring8([{ kind: "link-down", from: 0, to: 1, atUs: 5 }]), trn1, silent);
    expect(out.kind).toBe("hang");
    if (out.kind !== "hang") return;
    const text = formatHang(out.hang).join("\n");
    expect(text).toMatch(/fault: link 0->1 is down \(fault since 5\.000 us\): dev0 dma\d+ q15 holds a \d+-byte write/);
    expect(text).toMatch(/waits on dev\d+:topsp\d+:sem\d+/);
  });

  it("an engine stall delays the op and it reports its (longer) time", () => {
    const base = runScenario(ring8([]), trn1, silent);
    const slow = runScenario(ring8([{ kind: "engine-stall", device: 0, engine: 0, atUs: 2, forUs: 50 }]), trn1, silent);
    if (base.kind !== "done" || slow.kind !== "done") throw new Error("hung");
    expect(slow.ops[0]!.row.timeUs).toBeGreaterThan(base.ops[0]!.row.timeUs + 40);
  });

  it("a lost semaphore increment hangs its waiter; the report names the increment lost", () => {
    const out = runScenario(ring8([{ kind: "lost-increment", device: 1, nth: 3, semaphore: 0 }]), trn1, silent);
    expect(out.kind).toBe("hang");
    if (out.kind !== "hang") return;
    const text = formatHang(out.hang).join("\n");
    expect(text).toMatch(/waits on dev1:topsp0:sem0 \(recv count\)/);
    expect(text).toMatch(/fault: increment 3 of dev1 semaphore 0 lost \(fault\): dev1:topsp0:sem0\.inc/);
  });

  it("a dropped credit wait passes the values but leaves the credit semaphore unbalanced (a failed check)", () => {
    const out = runScenario(ring8([{ kind: "drop-wait", device: 0, nth: 1 }], "values"), trn1, silent);
    if (out.kind !== "done") throw new Error("hung");
    const o = out.ops[0]!;
    expect(o.mismatch).toBeUndefined();
    expect(o.row.check).toBe("fail");
    expect(o.violations.map((v) => v.kind)).toContain("unbalanced semaphore");
  });

  it.each([
    [{ kind: "link-down", from: 0, to: 9, atUs: 1 }, /faults\[0\]: there is no link from device 0 to device 9 on trn1/, "SCN1010"],
    [{ kind: "engine-stall", device: 0, engine: 99, atUs: 1, forUs: 1 }, /faults\[0\]: dev0 has no DMA engine 99 in this program/, "SCN1010"],
    [{ kind: "lost-increment", device: 12, nth: 1 }, /faults\[0\]: device 12 runs nothing in this program/, "SCN1010"],
  ])("a fault the machine does not have: %j", (fault, says, code) => {
    const e = refusal(() => runScenario(ring8([fault as Fault]), trn1, silent));
    expect(e.render()).toMatch(says);
    expect(e.code).toBe(code);
  });

  it.each([
    [{ kind: "meteor" }, /faults\[0\]\.kind: unknown value "meteor"/],
    [{ kind: "link-slow", from: 0, to: 1, factor: 0.5 }, /faults\[0\]\.factor: must be between 1 and/],
    [{ kind: "link-down", from: 0, to: 1 }, /faults\[0\]\.atUs: missing required key/],
    [{ kind: "drop-wait", device: 0, nth: 0 }, /faults\[0\]\.nth: must be between 1/],
    [{ kind: "lost-increment", device: 0, nth: 1, when: 3 }, /faults\[0\]\.when: unknown key "when"/],
  ])("validated like every field: %j", (fault, says) => {
    const json = { name: "f", instance: "trn1", ranks: 2, ops: [{ op: "all-reduce", bytes: 8, dtype: "fp32" }], faults: [fault] };
    expect(refusal(() => parseScenario("f.json", json)).render()).toMatch(says);
  });
});
