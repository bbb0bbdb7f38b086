// Trials without recompiling: the composer reads no timing field of the preset, and a program kept
// from one run runs again under other timing exactly as a program compiled for that timing does.
import { describe, expect, it } from "vitest";
import { imageText } from "../helpers-image.ts";
import pino from "pino";
import { compileProgram } from "../../src/enc/compile.ts";
import { CcsimError } from "../../src/ir/errors.ts";
import type { DeviceSpec, Scenario } from "../../src/ir/spec.ts";
import { generateCases, loadPresets } from "../../src/run/conformance.ts";
import { materialize, ProgramCache, programKey, ringBytes } from "../../src/run/program-cache.ts";
import { lighten, runPoint, task, type SweepTask } from "../../src/run/sweep-task.ts";
import { InternalError } from "../../src/ir/errors.ts";
import { parseScenario } from "../../src/scenario/index.ts";
import { loadDevice } from "../../src/run/load.ts";
import { compileStreamed } from "../../src/enc/compile.ts";
import { freePages } from "../../src/encd/pages.ts";
import { Evaluator, fillTogether, fit } from "../../src/fit/fit.ts";
import { publishedSeries } from "../../src/fit/files.ts";

const silent = pino({ level: "silent" });

/** `spec` with every timing field (…Ps, …PerSecond) moved, and its host costs. */
function retimed(spec: DeviceSpec, k: number): DeviceSpec {
  const out: Record<string, unknown> = {};
  for (const [section, value] of Object.entries(spec)) {
    out[section] =
      value !== null && typeof value === "object" && !Array.isArray(value) && section !== "sources"
        ? Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([f, v]) => [f, /(Ps|PerSecond)$/.test(f) && typeof v === "number" ? Math.round(v * k) + 1000 : v]))
        : value;
  }
  return out as unknown as DeviceSpec;
}


const specs = loadPresets();
const cases = generateCases(31, 24, { maxBytes: 256 << 10, maxCheckedPayload: 0, maxRanks: 32 }, specs);

describe("the composer reads no timing field", () => {
  it.each(cases.map((c) => [c.id, c.label, c] as const))("case %i: %s compiles to the same bytes with every rate, latency and cost moved", (_id, _label, c) => {
    const scn = parseScenario(`${c.scenario["name"]}.json`, c.scenario);
    const spec = specs.get(scn.instance)!;
    let a: ReturnType<typeof compileProgram>;
    try {
      a = compileProgram(scn, spec, scn.ops.map((_, i) => i));
    } catch (e) {
      if (e instanceof CcsimError) return;
      throw e;
    }
    const other = retimed(spec, 3);
    expect(imageText(compileProgram(scn, other, scn.ops.map((_, i) => i)))).toBe(imageText(a));
    expect(programKey(scn, other, true)).toBe(programKey(scn, spec, true));
  });

  it("keys apart presets that differ in a field the composer reads", () => {
    const scn = parseScenario("a.json", { name: "a", instance: "trn1", ranks: 8, ops: [{ op: "all-reduce", bytes: 1 << 20, dtype: "fp32", reduce: "sum" }] });
    const spec = loadDevice("trn1");
    expect(programKey(scn, { ...spec, ring: { ...spec.ring, defaultChannels: spec.ring.defaultChannels + 1 } }, true)).not.toBe(programKey(scn, spec, true));
    expect(programKey(scn, spec, false)).not.toBe(programKey(scn, spec, true));
  });
});

describe("a kept program runs again", () => {
  const points: [string, Record<string, unknown>][] = [
    ["ring8", { instance: "trn1", ranks: 8, ops: [{ op: "all-reduce", bytes: 3 << 20, dtype: "fp32", reduce: "sum" }] }],
    ["two nodes, folded", { instance: "trn1", ranks: 64, ranksPerDevice: 2, nodes: 2, algorithm: "ring", ops: [{ op: "all-reduce", bytes: 1 << 20, dtype: "fp32", reduce: "sum" }] }],
    ["hierarchical, four nodes", { instance: "trn1", ranks: 128, ranksPerDevice: 2, nodes: 4, algorithm: "hier", ops: [{ op: "all-reduce", bytes: 864846, dtype: "bf16", reduce: "sum" }] }],
    ["mesh on trn2", { instance: "trn2", ranks: 16, ops: [{ op: "reduce-scatter", bytes: 48 << 10, dtype: "bf16", reduce: "max" }] }],
  ];
  it.each(points)("%s: under other timing, the same outcome as a program compiled for it", (name, json) => {
    const scn: Scenario = parseScenario(`${name}.json`, { name: name.replace(/\W+/g, "-"), check: "none", ...json });
    const spec = loadDevice(scn.instance);
    let kept: ReturnType<typeof materialize> | undefined;
    const first = runPoint(scn, spec, silent, { keepProgram: (p) => (kept = p) });
    expect(first.kind).toBe("done");
    expect(kept).toBeDefined();
    expect(kept!.image.feed).toBeUndefined();
    expect(ringBytes(kept!)).toBeGreaterThan(0);
    // (Two other timings, one slower and one faster everywhere.)
    for (const k of [0.5, 3]) {
      const other = retimed(spec, k);
      const again = runPoint(scn, other, silent, { program: kept! });
      const fresh = runPoint(scn, other, silent);
      // (Everything but the wall-clock time of the run.)
      const noWall = (r: typeof again) => (r.kind === "done" ? { ...r, outcome: { ...r.outcome, wallMs: 0 } } : r);
      expect(noWall(again)).toEqual(noWall(fresh));
    }
  });

  it("the kept rings are the streamed program's bytes, whole", () => {
    const scn = parseScenario("r.json", { name: "r", instance: "trn1", ranks: 8, check: "none", ops: [{ op: "all-reduce", bytes: 32 << 20, dtype: "fp32", reduce: "sum" }] });
    const spec = loadDevice("trn1");
    const whole = compileProgram(scn, spec, [0]);
    const streamed = compileStreamed(scn, spec, [0], { fold: true });
    // (Its size is known before it is drained: what a keeper with less room is told.)
    const bytes = ringBytes(streamed);
    const kept = materialize(streamed);
    const rings = (p: typeof whole) => p.image.devices.flatMap((d) => d.queues.map((q) => Buffer.concat([q.tx, q.rx]).toString("base64")));
    expect(rings(kept)).toEqual(rings(whole));
    expect(ringBytes(kept)).toBe(bytes);
    // The streamed rings' pages went back as they were copied: none holds more than the page it ended in.
    const sides = streamed.image.devices.flatMap((d) => d.queues.flatMap((q) => (q.streamed ? [q.streamed.tx, q.streamed.rx] : [])));
    expect(sides.length).toBeGreaterThan(0);
    expect(Math.max(...sides.map((p) => p.count))).toBeGreaterThan(4 * 512);
    expect(Math.max(...sides.map((p) => p.heldPages))).toBeLessThanOrEqual(1);
    // Its feed closed: the pages it went through are not kept for the next program (each would keep its slab).
    expect(freePages()).toBe(0);
  });

  it("a program bigger than the keeper's room runs streamed and is not handed over: the same outcome", () => {
    const scn = parseScenario("r.json", { name: "r", instance: "trn1", ranks: 8, check: "none", ops: [{ op: "all-reduce", bytes: 4 << 20, dtype: "fp32", reduce: "sum" }] });
    const spec = loadDevice("trn1");
    let kept: ReturnType<typeof materialize> | undefined;
    const plain = runPoint(scn, spec, silent);
    const small = runPoint(scn, spec, silent, { keepProgram: (p) => (kept = p), keepBytes: 1 << 10 });
    expect(kept).toBeUndefined();
    const room = runPoint(scn, spec, silent, { keepProgram: (p) => (kept = p), keepBytes: 1 << 30 });
    expect(kept).toBeDefined();
    expect(ringBytes(kept!)).toBeGreaterThan(1 << 10);
    expect(ringBytes(kept!)).toBeLessThan(1 << 30);
    const noWall = (r: typeof plain) => (r.kind === "done" ? { ...r, outcome: { ...r.outcome, wallMs: 0 } } : r);
    for (const r of [small, room]) expect(noWall(r)).toEqual(noWall(plain));
  });

  it("a cache keeps what fits in its budget; a new round's programs push out those no round has used for longest, never the round's own", () => {
    const c = new ProgramCache(100);
    const p = (n: number) => ({ image: { devices: [{ queues: [{ tx: new Uint8Array(n), rx: new Uint8Array(0) }] }] } }) as unknown as ReturnType<typeof materialize>;
    const kept = (...keys: string[]) => keys.map((k) => c.get(k) !== undefined);
    c.offer("a", p(60));
    c.offer("b", p(60));
    c.offer("c", p(40));
    // In one round, the first that fit stay: "b" is not kept (nor held by a worker: it is let go).
    expect(kept("a", "b", "c")).toEqual([true, false, true]);
    expect(c.size).toEqual({ programs: 2, bytes: 100 });
    expect(c.room).toBe(0);
    expect(c.takeDropped()).toEqual(["b"]);
    // The next round uses "c" only: "a" (least recently used) makes room for "d".
    c.nextRound();
    expect(c.room).toBe(100);
    expect(kept("c")).toEqual([true]);
    c.offer("d", p(50));
    expect(c.takeDropped()).toEqual(["a"]);
    expect(c.size).toEqual({ programs: 2, bytes: 90 });
    // (What is left: the budget's last 10 bytes; "c" and "d" are this round's.)
    expect(c.room).toBe(10);
    // Within that round, "e" would need "c" or "d" to go, both used in it: not kept.
    c.offer("e", p(20));
    expect(kept("c", "d", "e")).toEqual([true, true, false]);
    expect(c.takeDropped()).toEqual(["e"]);
    // A program over the whole budget is never kept, and pushes nothing out.
    c.nextRound();
    expect(c.room).toBe(100);
    c.offer("f", p(101));
    expect(c.size).toEqual({ programs: 2, bytes: 90 });
    expect(c.takeDropped()).toEqual(["f"]);
  });
});

describe("a fit's evaluator with programs kept", () => {
  it("counts the trials and points of a fit that keeps none as of one that keeps them (its first trial run in a calibration's shared batch)", () => {
    const series = publishedSeries().filter((s) => s.instance === "trn1").slice(0, 2);
    const spec = loadDevice("trn1");
    const none = new Evaluator(series, 64 << 10, 1);
    fillTogether([{ ev: none, spec }], 1);
    const kept = new Evaluator(series, 64 << 10, 1, undefined, undefined, 1 << 30);
    kept.run(spec);
    expect([none.trials, none.pointsRun, none.firstShared]).toEqual([1, kept.pointsRun, true]);
    expect(kept.firstShared).toBe(false);
    const a = fit(spec, series, { rounds: 0, evaluator: none });
    const b = fit(spec, series, { rounds: 0, evaluator: kept });
    expect(a.trials).toBe(b.trials);
    expect(none.pointsRun).toBe(kept.pointsRun);
    expect(a.evaluated).toEqual(b.evaluated);
    kept.close();
  });

  it("gives every trial the times of one that compiles each, and compiles each point once", () => {
    const series = publishedSeries().filter((s) => s.instance === "trn1").slice(0, 3);
    const spec = loadDevice("trn1");
    const reuse = new Evaluator(series, 4 << 20, 1, undefined, undefined, 1 << 30);
    for (const k of [1, 0.7, 1.6]) {
      const other = retimed(spec, k);
      const plain = new Evaluator(series, 4 << 20, 1).run(other);
      expect(reuse.run(other)).toEqual(plain);
    }
    expect(reuse.programs!.size.programs).toBeGreaterThan(3);
    // Three trials ran every point; only the first compiled (what calibrate's fit line counts).
    const points = reuse.run(retimed(spec, 1)).length;
    expect(reuse.pointsRun).toBe(3 * points);
    expect(reuse.pointsCompiled).toBe(points);
  });

  it("on kept worker threads: a worker keeps the programs it compiles, the caller's cross to it once after their trial, later trials name them, and the times are the same", () => {
    const series = publishedSeries().filter((s) => s.instance === "trn1").slice(0, 3);
    const spec = loadDevice("trn1");
    const reuse = new Evaluator(series, 1 << 20, 2, undefined, undefined, 1 << 30);
    try {
      for (const k of [1, 0.7, 1.6, 2.2]) {
        const other = retimed(spec, k);
        expect(reuse.run(other)).toEqual(new Evaluator(series, 1 << 20, 1).run(other));
      }
    } finally {
      reuse.close();
    }
    // Closed, it lets its programs go (a calibration's presets are fitted one after the other).
    expect(reuse.programs!.size).toEqual({ programs: 0, bytes: 0 });
  });

  it("with a budget of one channel count's programs: trials of another count push them out (the workers let them go as well), and the times are the same", () => {
    const series = publishedSeries().filter((s) => s.instance === "trn1").slice(0, 1);
    const spec = loadDevice("trn1");
    const channels = (c: number, k: number): DeviceSpec => ({ ...retimed(spec, k), ring: { ...spec.ring, defaultChannels: c } });
    const sizing = new Evaluator(series, 1 << 18, 1, undefined, undefined, 1 << 30);
    sizing.run(channels(1, 1));
    const one = sizing.programs!.size;
    const reuse = new Evaluator(series, 1 << 18, 2, undefined, undefined, one.bytes);
    const cache = reuse.programs!;
    const take = cache.takeDropped.bind(cache);
    let dropped = 0;
    cache.takeDropped = () => {
      const d = take();
      dropped += d.length;
      return d;
    };
    try {
      for (const [c, k] of [[1, 1], [2, 0.7], [2, 1.6], [1, 2.2]] as const) {
        const other = channels(c, k);
        expect(reuse.run(other)).toEqual(new Evaluator(series, 1 << 18, 1).run(other));
        // (Each count's programs fill the budget: the last trial's are what is kept.)
        expect(cache.size.bytes).toBeLessThanOrEqual(one.bytes);
      }
      expect(cache.size.programs).toBe(one.programs);
      expect(dropped).toBeGreaterThanOrEqual(2 * one.programs);
    } finally {
      reuse.close();
    }
  });

  it("a batch names what the worker holds, sends it the rest once, and a name it does not hold is an internal error", () => {
    const scn = parseScenario("r.json", { name: "r", instance: "trn1", ranks: 2, check: "none", ops: [{ op: "all-reduce", bytes: 4096, dtype: "fp32", reduce: "sum" }] });
    const spec = loadDevice("trn1");
    let kept: ReturnType<typeof materialize> | undefined;
    runPoint(scn, spec, silent, { keepProgram: (p) => (kept = p) });
    const t: SweepTask = { scenario: scn, spec, logLevel: "silent", unfolded: false, program: kept!, programKey: "k" };
    const held = new Set<string>();
    const { program: _p, programKey: _k, ...plain } = t;
    const first = lighten([t, plain], held);
    expect(first[0]!.program).toBe(kept);
    expect([...held]).toEqual(["k"]);
    const second = lighten([t], held);
    expect(second[0]!.program).toBeUndefined();
    expect(second[0]!.heldProgram).toBe("k");
    expect(() => task({ ...second[0]!, heldProgram: "never sent" })).toThrow(InternalError);
  });
});
