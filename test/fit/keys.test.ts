// A fit's caches key a point by the device fields it depends on beyond what the gates decide
// (src/fit/fit.ts's pointSpec): two presets alike there, with the same decision, compile the
// point to the same bytes, so a trial that moves only what a point does not read runs nothing
// for it (a mesh's engine count for a ring, a permute's channels for an all-reduce).
import { describe, expect, it } from "vitest";
import { imageText } from "../helpers-image.ts";
import { compileProgram } from "../../src/enc/compile.ts";
import { CcsimError } from "../../src/ir/errors.ts";
import type { DeviceSpec } from "../../src/ir/spec.ts";
import { generateCases, loadPresets } from "../../src/run/conformance.ts";
import { parseScenario } from "../../src/scenario/index.ts";
import { decisionKey, Evaluator, fillTogether, pointSpec, WINDOW_FIELDS } from "../../src/fit/fit.ts";
import { publishedSeries } from "../../src/fit/files.ts";
import { loadDevice } from "../../src/run/load.ts";
import { simulate } from "../../sim/index.ts";


/** The collectives with the fields pointSpec may leave out moved: the mesh folds (by `k` more), the permute channels, every selection window. */
function movedCollectives(spec: DeviceSpec, k: number): DeviceSpec["collectives"] {
  const c: Record<string, unknown> = { ...spec.collectives, meshFolds: (spec.collectives.meshFolds % 8) + 1 + k, permuteChannels: ((spec.collectives.permuteChannels ?? spec.ring.defaultChannels) % 3) + 1 };
  for (const f of WINDOW_FIELDS) {
    const name = f.slice("collectives.".length);
    const v = c[name];
    c[name] = typeof v === "number" ? v * 4 : 1 << 20;
  }
  return c as unknown as DeviceSpec["collectives"];
}

/** `spec` with its network, where it has one, moved (a point on one node keys without it). */
function movedNetwork(spec: DeviceSpec): DeviceSpec {
  const n = spec.network;
  return n ? { ...spec, network: { ...n, bytesPerSecond: n.bytesPerSecond * 3, latencyPs: n.latencyPs * 2 + 1, messageCostPs: n.messageCostPs + 12345, bufferSlots: n.bufferSlots + 1 } } : spec;
}

/** The variations compared: what each moves, and whether the mesh folds and the network are among it. */
const VARIATIONS: readonly { readonly of: (spec: DeviceSpec) => DeviceSpec; readonly meshFolds: boolean; readonly network: boolean }[] = [
  { of: (spec) => ({ ...spec, collectives: movedCollectives(spec, 0) }), meshFolds: true, network: false },
  // (The channel count changes most points' decisions: few compare here.)
  { of: (spec) => movedNetwork({ ...spec, ring: { ...spec.ring, defaultChannels: spec.ring.defaultChannels + 1 }, collectives: movedCollectives(spec, 1) }), meshFolds: true, network: true },
  { of: movedNetwork, meshFolds: false, network: true },
];

const specs = loadPresets();
const cases = generateCases(41, 48, { maxBytes: 256 << 10, maxCheckedPayload: 0, maxRanks: 32 }, specs);

describe("a point's key in a fit", () => {
  it("two presets alike in a point's fields, with the same decision, compile it to the same bytes (generated cases)", () => {
    const seen = { compared: 0, meshFoldsMoved: 0, networkMoved: 0 };
    for (const c of cases) {
      const scn = parseScenario(`${c.scenario["name"]}.json`, c.scenario);
      const spec = specs.get(scn.instance)!;
      const all = scn.ops.map((_, i) => i);
      const a = decisionKey(scn, spec);
      let x: ReturnType<typeof compileProgram> | undefined;
      for (const v of VARIATIONS) {
        const other = v.of(spec);
        const b = decisionKey(scn, other);
        if (a.key !== b.key || a.meshFree !== b.meshFree) continue;
        if (JSON.stringify(pointSpec(spec, a.meshFree, scn.nodes === 1)) !== JSON.stringify(pointSpec(other, a.meshFree, scn.nodes === 1))) continue;
        try {
          x ??= compileProgram(scn, spec, all);
        } catch (e) {
          if (e instanceof CcsimError) break;
          throw e;
        }
        expect(imageText(compileProgram(scn, other, all)), `case ${c.id}: ${c.label}`).toBe(imageText(x));
        seen.compared++;
        // (The run too, where the network moved: on one node it carries nothing.)
        if (v.network && spec.network && scn.nodes === 1) {
          const times = (s: DeviceSpec) => simulate(s, compileProgram(scn, s, all).image, { storePayload: false }).opEndPs;
          expect(times(other), `case ${c.id}: ${c.label}`).toEqual(times(spec));
          seen.networkMoved++;
        }
        if (v.meshFolds && a.meshFree) seen.meshFoldsMoved++;
      }
    }
    // (Not vacuous: rings compared with their mesh folds moved, and one-node runs with their network.)
    expect(seen.meshFoldsMoved).toBeGreaterThanOrEqual(10);
    expect(seen.networkMoved).toBeGreaterThanOrEqual(10);
  });

  it.each([
    ["the older runtime's two-node all-reduce: kangaring, single-cycle ring, kangaring", "trn1-legacy", { ranks: 64, ranksPerDevice: 2, nodes: 2 }, true],
    ["hierarchical with a mesh in each node", "trn2-ultraserver", { ranks: 64, ranksPerDevice: 4, nodes: 8, algorithm: "hier", hierarchical: { intra: "mesh", inter: "single-cycle-ring" } }, false],
  ] as const)("a hierarchical op is free of the mesh folds only where every stage it selects is: %s", (_name, instance, shape, free) => {
    const spec = loadDevice(instance);
    // (At 1 MiB the older runtime's intra stages are kangaring; at 64 KiB, mesh.)
    const scn = parseScenario("h.json", { name: "h", instance, check: "none", ...shape, ops: [{ op: "all-reduce", bytes: 1 << 20, dtype: "fp32", reduce: "sum" }] });
    const d = decisionKey(scn, spec);
    expect(d.key).toContain("Hier algorithm selections");
    expect(d.meshFree).toBe(free);
    if (!free) return;
    // (The mesh folds moved, and the channels: the hierarchical op's three channel sets fit the
    // engines at two channels, not at the preset's three, so four posts two as well.)
    const other = { ...spec, ring: { ...spec.ring, defaultChannels: spec.ring.defaultChannels + 1 }, collectives: { ...spec.collectives, meshFolds: spec.collectives.meshFolds + 3 } };
    expect(decisionKey(scn, other)).toEqual(d);
    expect(imageText(compileProgram(scn, other, [0]))).toBe(imageText(compileProgram(scn, spec, [0])));
  });

  it("a permute's channels are in its decision: moved, they key it apart; with the channels the scenario sets, the same bytes", () => {
    const spec = loadDevice("trn1");
    const json = { name: "p", instance: "trn1", ranks: 8, check: "none", ops: [{ op: "permute", bytes: 65536, dtype: "fp32", pairs: [[0, 1], [1, 2], [2, 3], [3, 0], [4, 5], [5, 6], [6, 7], [7, 4]] }] };
    const a = { ...spec, collectives: { ...spec.collectives, permuteChannels: 1 } };
    const b = { ...spec, collectives: { ...spec.collectives, permuteChannels: 3 } };
    const free = parseScenario("p.json", json);
    expect(decisionKey(free, a).key).not.toBe(decisionKey(free, b).key);
    const set = parseScenario("p.json", { ...json, channels: 2 });
    expect(decisionKey(set, a)).toEqual(decisionKey(set, b));
    expect(JSON.stringify(pointSpec(a, true, true))).toBe(JSON.stringify(pointSpec(b, true, true)));
    expect(imageText(compileProgram(set, b, [0]))).toBe(imageText(compileProgram(set, a, [0])));
  });

  it("the presets' points run in one batch on two threads (fillTogether) give each evaluator what its own run gives, and it runs nothing more", () => {
    const pick = (id: string) => publishedSeries().filter((s) => s.id === id);
    const parts = [
      { series: pick("older-trn1-r2-allr-fp32"), spec: loadDevice("trn1-legacy") },
      { series: pick("newer-trn1-r8-allg-fp32-stats"), spec: loadDevice("trn1") },
    ];
    const evs = parts.map((x) => ({ ev: new Evaluator(x.series, 1 << 20, 2), spec: x.spec }));
    fillTogether(evs, 2);
    evs.forEach(({ ev, spec }, i) => {
      // (The batch is each evaluator's first trial, its points counted as run.)
      const batch = ev.pointsRun;
      expect([ev.trials, ev.firstShared]).toEqual([1, true]);
      expect(batch).toBeGreaterThan(0);
      const got = ev.run(spec);
      expect([ev.trials, ev.pointsRun]).toEqual([1, batch]);
      expect(got.length).toBeGreaterThan(0);
      expect(got.every((e) => e.run !== undefined)).toBe(true);
      expect(got).toEqual(new Evaluator(parts[i]!.series, 1 << 20, 1).run(spec));
    });
  });

  it("a trial that moves only the mesh folds runs the mesh points alone, with the times a fresh evaluator gives; one that moves the network runs no point on one node", () => {
    const series = publishedSeries().filter((s) => s.id === "older-trn1-r2-allr-fp32" || s.id === "older-trn1-r32-allg-fp32");
    const spec = loadDevice("trn1-legacy");
    const ev = new Evaluator(series, 1 << 20, 1, undefined, undefined, 1 << 30);
    const first = ev.run(spec);
    const other = { ...spec, collectives: { ...spec.collectives, meshFolds: spec.collectives.meshFolds + 1 } };
    const ran = ev.pointsRun;
    const again = ev.run(other);
    const mesh = again.filter((e) => e.run?.algorithm === "mesh").length;
    expect(mesh).toBeGreaterThan(0);
    expect(mesh).toBeLessThan(first.length);
    expect(ev.pointsRun - ran).toBe(mesh);
    expect(again).toEqual(new Evaluator(series, 1 << 20, 1).run(other));
    // Both series run on one node: a trial that moves the network runs nothing.
    const net = { ...other, network: { ...other.network!, bytesPerSecond: other.network!.bytesPerSecond * 2, messageCostPs: other.network!.messageCostPs + 1 } };
    const before = ev.pointsRun;
    expect(ev.run(net)).toEqual(again);
    expect(ev.pointsRun).toBe(before);
  });
});
