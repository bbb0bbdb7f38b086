// The symbolic check: which ranks' input ranges reach each output range, by the collective's
// definition; end to end it catches the composer bugs the values check catches, without payload.
import { describe, expect, it } from "vitest";
import { runSim } from "../run-sim.ts";
import { EXIT } from "../../src/cli/sim.ts";
import pino from "pino";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runScenario, type PipelineHooks } from "../../src/run/pipeline.ts";
import { compileProgram } from "../../src/enc/compile.ts";
import { DEFAULT_DEVICES_DIR, loadDevice, loadDeviceWith, loadScenario } from "../../src/run/load.ts";
import { compareSymbolic, expectedRanges, type ExpectedRange } from "../../src/check/symbolic.ts";
import { corruptFirstReduce, duplicateCceSource, moveCceSource, moveRemoteWrite } from "../helpers-image.ts";
import { HOW_MIXED, HOW_NONE, reduceHow } from "../../src/ir/dtypes.ts";
import { memoryAgents, racePieceBytes, racesFit, valuesCheckFit, valuesCheckMemory } from "../../src/run/budgets.ts";

const run = runSim;

/** A logger that keeps the warnings' messages. */
function warningLog() {
  const warnings: string[] = [];
  const log = pino({ level: "warn", base: null, timestamp: false }, { write: (s: string) => void warnings.push(JSON.parse(s).msg) });
  return { warnings, log };
}

/** streams4 (four ops, and the four at once) run with these hooks, and its warnings. */
function streams4With(hooks: PipelineHooks) {
  const { warnings, log } = warningLog();
  const scn = loadScenario("scenarios/streams4.json");
  const out = runScenario(scn, loadDevice(scn.instance), log, hooks);
  if (out.kind !== "done") throw new Error("hung");
  return { out, warnings, scn };
}

describe("the symbolic reference", () => {
  const g = [4, 5, 6];
  it("all-reduce: every rank's whole input; reduce-scatter: block k of every input", () => {
    expect(expectedRanges({ op: "all-reduce" }, g, 12, 12).get(5)).toEqual([{ out: 0, len: 12, terms: [{ rank: 4, at: 0 }, { rank: 5, at: 0 }, { rank: 6, at: 0 }] }]);
    expect(expectedRanges({ op: "reduce-scatter" }, g, 12, 4).get(6)).toEqual([{ out: 0, len: 4, terms: [{ rank: 4, at: 8 }, { rank: 5, at: 8 }, { rank: 6, at: 8 }] }]);
  });
  it("all-gather: block j from group rank j; all-to-all: block k of each input in order", () => {
    expect(expectedRanges({ op: "all-gather" }, g, 4, 12).get(4)!.map((r) => [r.out, r.len, r.terms])).toEqual([[0, 4, [{ rank: 4, at: 0 }]], [4, 4, [{ rank: 5, at: 0 }]], [8, 4, [{ rank: 6, at: 0 }]]]);
    expect(expectedRanges({ op: "all-to-all" }, g, 12, 12).get(5)!.map((r) => [r.out, r.terms[0]])).toEqual([[0, { rank: 4, at: 4 }], [4, { rank: 5, at: 4 }], [8, { rank: 6, at: 4 }]]);
  });
  it("all-to-all-v: counts[i][k] bytes of input i, after what i sends to lower ranks", () => {
    const counts = [[1, 2, 3], [4, 0, 6], [7, 8, 9]];
    expect(expectedRanges({ op: "all-to-all-v", counts }, g, 0, 0).get(6)).toEqual([
      { out: 0, len: 3, terms: [{ rank: 4, at: 3 }] },
      { out: 3, len: 6, terms: [{ rank: 5, at: 4 }] },
      { out: 9, len: 9, terms: [{ rank: 6, at: 15 }] },
    ]);
    // Nothing from rank 5 to itself: no range.
    expect(expectedRanges({ op: "all-to-all-v", counts }, g, 0, 0).get(5)!.map((r) => r.terms[0]!.rank)).toEqual([4, 6]);
  });
  it("permute: the source's input; permute-reduce adds the target's own", () => {
    expect(expectedRanges({ op: "permute", pairs: [[0, 1], [1, 0]] }, [0, 1], 8, 8).get(1)).toEqual([{ out: 0, len: 8, terms: [{ rank: 0, at: 0 }] }]);
    expect(expectedRanges({ op: "permute-reduce", pairs: [[0, 1]] }, [0, 1], 8, 8).get(1)![0]!.terms).toEqual([{ rank: 1, at: 0 }, { rank: 0, at: 0 }]);
  });

  const want: ExpectedRange[] = [{ out: 0, len: 8, terms: [{ rank: 0, at: 0 }, { rank: 1, at: 0 }] }];
  const reader =
    (pieces: [number, number, { id: number; at: number }[], number?][]) =>
    (fn: (a: number, b: number, t: readonly { id: number; at: number }[], how: number) => void) =>
      pieces.forEach(([a, b, t, how]) => fn(a, b, t, how ?? HOW_NONE));
  it("a piece whose terms follow the bytes passes; a twice-counted, missing or shifted contribution fails", () => {
    expect(compareSymbolic(0, want, reader([[0, 4, [{ id: 1, at: 0 }, { id: 0, at: 0 }]], [4, 8, [{ id: 0, at: 4 }, { id: 1, at: 4 }]]]))).toBeUndefined();
    expect(compareSymbolic(0, want, reader([[0, 8, [{ id: 0, at: 0 }, { id: 0, at: 0 }]]]))).toEqual({ rank: 0, start: 0, end: 8, missing: "rank 1 input [0, 8)", extra: "rank 0 input [0, 8)", expectedTerms: 2 });
    expect(compareSymbolic(0, want, reader([[0, 8, [{ id: 0, at: 0 }]]]))).toMatchObject({ missing: "rank 1 input [0, 8)", extra: "nothing" });
    expect(compareSymbolic(0, want, reader([[0, 4, [{ id: 0, at: 0 }, { id: 1, at: 0 }]], [4, 8, [{ id: 0, at: 4 }, { id: 1, at: 0 }]]]))).toMatchObject({ start: 4, end: 8, missing: "rank 1 input [4, 8)", extra: "rank 1 input [0, 4)" });
    expect(compareSymbolic(0, want, reader([[0, 8, []]]))?.missing).toBe("rank 0 input [0, 8) + rank 1 input [0, 8)");
    expect(compareSymbolic(0, want, reader([[0, 8, [{ id: -1, at: 0 }, { id: 0, at: 0 }]]]))).toMatchObject({ missing: "rank 1 input [0, 8)", extra: "bytes of no known value" });
  });
  it("several contributions must be reduced by the op's arithmetic", () => {
    const sum = reduceHow("sum", "fp32");
    const both = [{ id: 0, at: 0 }, { id: 1, at: 0 }];
    expect(compareSymbolic(0, want, reader([[0, 8, both, sum]]), sum)).toBeUndefined();
    expect(compareSymbolic(0, want, reader([[0, 8, both, reduceHow("max", "fp32")]]), sum)?.arithmetic).toEqual({ got: "max over fp32", expected: "sum over fp32" });
    expect(compareSymbolic(0, want, reader([[0, 8, both, reduceHow("sum", "bf16")]]), sum)?.arithmetic?.got).toBe("sum over bf16");
    expect(compareSymbolic(0, want, reader([[0, 8, both, HOW_MIXED]]), sum)?.arithmetic?.got).toBe("a mix of reduce ops or types");
  });
});

describe("--check symbolic end to end", () => {
  // Composer bugs, each caught by the values check and by the symbolic one.
  const bugs: [string, PipelineHooks["mutateImage"]][] = [
    ["a reduce from the wrong offset", (img, op) => op === 0 && moveCceSource(img, 2, 0, 4096)],
    ["a reduce reading one source twice", (img, op) => op === 0 && duplicateCceSource(img, 5)],
    ["a write landing at the wrong offset", (img, op) => op === 0 && moveRemoteWrite(img, 1, 4096, 3)],
  ];
  it.each(bugs)("%s: the values check and the symbolic check both fail (exit 3)", (_name, mutate) => {
    const v = run(["scenarios/ring8.json"], { mutateImage: mutate! });
    expect(v.code).toBe(EXIT.CHECK_FAILED);
    expect(v.err).toMatch(/check failed for all-reduce 4194304 B fp32: rank \d+, element \d+: expected/);
    const s = run(["scenarios/ring8.json", "--check", "symbolic"], { mutateImage: mutate! });
    expect(s.code).toBe(EXIT.CHECK_FAILED);
    expect(s.err).toMatch(/check failed for all-reduce 4194304 B fp32: rank \d+, output bytes \[\d+, \d+\) of 8 expected contribution\(s\): missing rank \d input \[\d+, \d+\)( \+ .+)?; extra (rank \d input|bytes of no known value)/);
  });
});

it("bytes of no known value count once: a ring that reduces its scratch into itself step after step (12 ranks on 6 trn1 devices, 96 B uint16) checks symbolically in bounded memory", () => {
  // Before, the unknown term doubled at every step of the scratch chain and the run ran out of memory.
  const dir = mkdtempSync(join(tmpdir(), "ccsim-sym-"));
  const file = join(dir, "ring12.json");
  writeFileSync(file, JSON.stringify({ name: "ring12", instance: "trn1", ranks: 12, ranksPerDevice: 2, algorithm: "ring", check: "symbolic", races: false, ops: [{ op: "all-reduce", bytes: 96, dtype: "uint16", reduce: "sum" }] }));
  const s = run([file]);
  expect(s.code, s.err).toBe(EXIT.OK);
  expect(s.out).toMatch(/\b96 +48 +uint16 .* ring +pass/);
});

it("a reduce by the wrong op: the values check and the symbolic check both fail (exit 3)", () => {
  const mutate: PipelineHooks["mutateImage"] = (img, op) => op === 0 && corruptFirstReduce(img, 0);
  expect(run(["scenarios/ring8.json"], { mutateImage: mutate }).code).toBe(EXIT.CHECK_FAILED);
  const s = run(["scenarios/ring8.json", "--check", "symbolic"], { mutateImage: mutate });
  expect(s.code).toBe(EXIT.CHECK_FAILED);
  expect(s.err).toMatch(/rank \d+, output bytes \[\d+, \d+\): its 8 contributions were reduced by a mix of reduce ops or types, not sum over fp32/);
});

describe("values that do not fit", () => {
  it("run symbolically instead, with a warning naming the payload and the budget", () => {
    const { warnings, log } = warningLog();
    const scn = loadScenario("scenarios/ring8.json");
    const out = runScenario(scn, loadDevice(scn.instance), log, { valuesBudget: 1 << 20 });
    if (out.kind !== "done") throw new Error("hung");
    expect(out.ops.map((o) => [o.checked, o.row.check])).toEqual([["symbolic", "pass"], ["symbolic", "pass"], ["symbolic", "pass"]]);
    expect(warnings[0]).toMatch(/^op 0 \(all-reduce 4194304 B\): checking values holds 67108864 bytes of payload, about 0\.\d GiB of memory; a values check may use 0\.0 GiB .*: checking symbolically instead, without race detection \(its shadow memory grows with the op's packets; --check symbolic keeps it\)$/);
    // The same bug as above is still caught.
    const bad = run(["scenarios/ring8.json"], { valuesBudget: 1 << 20, mutateImage: (img, op) => op === 0 && duplicateCceSource(img, 5) });
    expect(bad.code).toBe(EXIT.CHECK_FAILED);
    expect(bad.err).toMatch(/output bytes \[\d+, \d+\) of 8 expected contribution\(s\): missing rank 5 input/);
    // The fallback runs without race detection: a dropped wait shows only as unbalanced semaphores.
    const dropped = runScenario({ ...scn, ops: scn.ops.slice(0, 1), faults: [{ kind: "drop-wait", device: 3, nth: 2 }] }, loadDevice(scn.instance), log, { valuesBudget: 1 << 20 });
    if (dropped.kind !== "done") throw new Error("hung");
    expect(dropped.ops[0]!.violations.map((v) => v.kind)).not.toContain("race");
  });

  it("counts every rank's bytes three times at most, none of them on the JavaScript heap (a 24-rank all-to-all of 16 MiB fits)", () => {
    // 24 ranks' all-to-all: every rank's reference output is an array of its own.
    const a2a = (bytes: number) => ({ op: "all-to-all" as const, bytes, dtype: "bf16" as const, reduce: "sum" as const, stream: 0, priorityClass: 0 });
    const g24 = [Array.from({ length: 24 }, (_, r) => r)];
    // Inputs and outputs of 16,777,200 bytes a rank. (As numbers, 6.4 GB of them outgrew a 4 GiB
    // heap; as typed arrays of the type's size, off the heap, they check in 1.8 GB.)
    const payload = 24 * 2 * 16777200;
    expect(valuesCheckMemory(payload)).toBe(3 * payload);
    expect(valuesCheckFit(a2a(16777200), g24, 3 * payload)).toEqual({ fits: true });
    const tight = valuesCheckFit(a2a(16777200), g24, 3 * payload - 1);
    expect(tight.fits).toBe(false);
    expect(tight.why).toMatch(/^checking values holds 805305600 bytes of payload, about 2\.2 GiB of memory; a values check may use 2\.2 GiB \(half of this machine's/);
  });
});

describe("symbolic tracking that outgrows memory", () => {
  it("stops while it can say so: the op is timed, not checked, with a warning; the times are the timing-only run's", () => {
    const { warnings, log } = warningLog();
    const scn = loadScenario("scenarios/ring8.json");
    const one = { ...scn, check: "symbolic" as const, ops: scn.ops.slice(0, 1) };
    const out = runScenario(one, loadDevice(scn.instance), log, { symbolicFull: () => "the heap holds 9.9 GiB of its 10.0 GiB" });
    if (out.kind !== "done") throw new Error("hung");
    expect([out.ops[0]!.checked, out.ops[0]!.row.check]).toEqual(["none", "skipped"]);
    expect(warnings).toEqual([expect.stringMatching(/^op 0 \(all-reduce 4194304 B\): symbolic tracking outgrew its memory \(1 writes tracked, \d+ distinct sets of contributions\): the heap holds 9\.9 GiB of its 10\.0 GiB: timed only, not checked \(fewer ranks, or a smaller size, check it\)$/)]);
    const timed = runScenario({ ...one, check: "none" }, loadDevice(scn.instance), log);
    if (timed.kind !== "done") throw new Error("hung");
    expect(out.ops[0]!.row.timeUs).toBe(timed.ops[0]!.row.timeUs);
    // The compile's warnings are said once (the op is compiled twice): groups that are no ring of direct links.
    const four = { ...one, ranks: 16, replicaGroups: [[0, 2, 8, 10], [1, 3, 9, 11], [4, 6, 12, 14], [5, 7, 13, 15]] };
    const w6 = warningLog();
    runScenario(four, loadDevice(scn.instance), w6.log, { symbolicFull: () => "no room" });
    expect(w6.warnings.filter((w) => /no ring over direct links for 4 groups/.test(w)).length).toBe(1); // said once, not twice
    expect(w6.warnings.filter((w) => /outgrew its memory/.test(w)).length).toBe(1);
    // With room, the same op is checked.
    const room = runScenario(one, loadDevice(scn.instance), log, { symbolicFull: () => undefined });
    if (room.kind !== "done") throw new Error("hung");
    expect([room.ops[0]!.checked, room.ops[0]!.row.check]).toEqual(["symbolic", "pass"]);
  });
});

describe("race detection that does not fit the heap", () => {
  it("is left out, with a warning naming its shadow memory and the budget; the check itself still runs", () => {
    const { warnings, log } = warningLog();
    const scn = loadScenario("scenarios/ring8.json");
    const one = { ...scn, ops: scn.ops.slice(0, 1), faults: [{ kind: "drop-wait" as const, device: 3, nth: 2 }] };
    // Within the budget, a dropped wait is a race; beyond it, only unbalanced semaphores show it.
    const within = runScenario(one, loadDevice(scn.instance), log);
    if (within.kind !== "done") throw new Error("hung");
    expect(within.ops[0]!.violations.map((v) => v.kind)).toContain("race");
    expect(warnings).toEqual([]);
    const beyond = runScenario(one, loadDevice(scn.instance), log, { racesBudget: 1 << 10 });
    if (beyond.kind !== "done") throw new Error("hung");
    expect(beyond.ops[0]!.checked).toBe("values");
    expect(beyond.ops[0]!.violations.map((v) => v.kind)).not.toContain("race");
    expect(beyond.ops[0]!.violations.map((v) => v.kind)).toContain("unbalanced semaphore");
    expect(warnings[0]).toMatch(/^op 0 \(all-reduce 4194304 B\): race detection would keep about 0\.\d GiB of shadow memory and vector clocks \(a piece per packet-sized range of every rank's buffers; a clock entry per memory agent, \d+ of them, in each queue, core and semaphore\); it may use 0\.0 GiB \(half of the JavaScript heap\): checking values without race detection$/);
  });

  it("counts a piece per packet the preset and the run make: smaller CCE packets (dma.cceMaxElements) or CC DMA packets need more shadow memory", () => {
    // (64 MiB reduce-scatters over 16 ranks at dma.cceMaxElements 2 ran the heap out: pieces of 1 KiB were assumed, 32 B made.)
    expect(racePieceBytes(4, 65536, 4096)).toBe(4096);
    expect(racePieceBytes(1, 65536, 65536)).toBe(1024);
    expect(racePieceBytes(4, 65536, 32)).toBe(32);
    expect(racePieceBytes(2, 64, 4096)).toBe(64);
    const scn = loadScenario("scenarios/ring8.json");
    const one = { ...scn, ops: scn.ops.slice(0, 1).map((o) => ({ ...o, bytes: 256 << 10 })) };
    const budget = 1 << 20;
    const run = (spec: ReturnType<typeof loadDevice>) => {
      const { warnings, log } = warningLog();
      const out = runScenario(one, spec, log, { racesBudget: budget });
      if (out.kind !== "done") throw new Error("hung");
      expect(out.ops[0]!.row.check).toBe("pass");
      return warnings;
    };
    // The shipped preset's 4 KiB pieces fit 1 MiB; 32-byte CCE packets (cceMaxElements 2 of fp32) do not.
    expect(run(loadDevice("trn1"))).toEqual([]);
    const tiny = loadDeviceWith("trn1", DEFAULT_DEVICES_DIR, [{ path: "dma.cceMaxElements", value: 2 }]);
    expect(run(tiny)[0]).toMatch(/^op 0 \(all-reduce 262144 B\): race detection would keep about 0\.\d GiB .*checking values without race detection$/);
  });

  it("is left out of a concurrent run with a warning too, the values still checked", () => {
    const { out, warnings, scn } = streams4With({ racesBudget: 1 << 10 });
    expect(out.concurrent?.checked).toBe("values");
    expect(out.concurrent?.mismatch).toBeUndefined();
    expect(warnings.length).toBe(scn.ops.length + 1);
    expect(warnings.at(-1)).toMatch(/^the concurrent run: race detection would keep about 0\.\d GiB of shadow memory and vector clocks \(.*\d+ of them.*\); it may use 0\.0 GiB \(half of the JavaScript heap\): checking values without race detection$/);
  });

  it("a concurrent run whose payload does not fit says it is timing only", () => {
    const { out, warnings } = streams4With({ valuesBudget: 1 << 20 });
    expect(out.concurrent?.checked).toBe("none");
    expect(warnings.at(-1)).toBe("the concurrent run: the ops' payload does not fit in memory for a values check (each op alone was checked as above): timing only");
  });

  it("counts the vector clocks: an entry per memory agent in each holder, so their memory grows with the agents squared", () => {
    const op = { op: "all-reduce" as const, bytes: 4096, dtype: "fp32" as const, reduce: "sum" as const, stream: 0, priorityClass: 0 };
    const groups = [Array.from({ length: 8 }, (_, i) => i)];
    const shadow = racesFit([op], groups, 0).need;
    expect(shadow).toBeGreaterThan(0);
    expect(racesFit([op], groups, 1000).need - shadow).toBe(16 * 1000 * 1000);
    // 1,024 trn1 ranks have about 19,000 agents: about 6 GB of clocks, past any default heap's half.
    expect(racesFit([op], groups, 19456, 2 ** 31).fits).toBe(false);
    expect(racesFit([op], groups, 4352, 2 ** 31).fits).toBe(true);
    // A program's agents: its DMA queues and network proxies (ring8: 8 devices' queues, no proxy).
    const scn = loadScenario("scenarios/ring8.json");
    const { image } = compileProgram({ ...scn, ops: scn.ops.slice(0, 1) }, loadDevice(scn.instance), [0]);
    expect(memoryAgents(image)).toBe(image.devices.reduce((n, d) => n + d.queues.length, 0));
    expect(memoryAgents(image)).toBeGreaterThanOrEqual(8);
  });
});
