// Streamed rings: the program composed twice (a counting pass for the image, then chunk group by
// chunk group as the engines reach the descriptors) runs exactly as the program composed once,
// and holds the descriptors in flight, not the op's.
import { readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { compileProgram, compileStreamed } from "../../src/enc/compile.ts";
import type { ProgramImage } from "../../src/encd/program.ts";
import { PAGE_DESCS } from "../../src/encd/pages.ts";
import type { DeviceSpec, Scenario } from "../../src/ir/spec.ts";
import { generateCases, loadPresets, REFUSAL_CODES } from "../../src/run/conformance.ts";
import { CcsimError } from "../../src/ir/errors.ts";
import { loadDevice, loadScenario } from "../../src/run/load.ts";
import { parseScenario } from "../../src/scenario/index.ts";
import { simulate } from "../../sim/index.ts";

/** Everything a timing run reports, for both ways of composing. */
function outcome(spec: DeviceSpec, image: ProgramImage) {
  const r = simulate(spec, image, { storePayload: false });
  return { endPs: r.endPs, events: r.events, opEndPs: r.opEndPs, packets: r.packets, hang: r.hang, links: r.links, engines: r.engines, hbm: r.hbm, violations: r.violations };
}

function same(scn: Scenario, spec: DeviceSpec, ops: readonly number[]): void {
  const kept = compileProgram(scn, spec, ops);
  const streamed = compileStreamed(scn, spec, ops);
  expect(streamed.image.devices.every((d) => d.queues.every((q) => q.streamed && q.tx.length === 0))).toBe(true);
  expect(outcome(spec, streamed.image)).toEqual(outcome(spec, kept.image));
}

describe("streamed rings run as the whole rings do", () => {
  // The scenarios of up to 256 ranks (the two of 1,024 ranks compose streamed in the scenarios
  // test, values checked; each took half a minute here, composed and run unfolded twice).
  const files = readdirSync("scenarios").filter((f) => f.endsWith(".json") && !f.endsWith(".schema.json") && loadScenario(`scenarios/${f}`).ranks <= 256);
  it("takes most of the scenarios", () => {
    expect(files.length).toBeGreaterThan(20);
  });
  it.each(files)("%s, all its ops in one program, 4 MiB", (f) => {
    const base = loadScenario(`scenarios/${f}`);
    const scn = { ...base, check: "none" as const, ops: base.ops.map((o) => (o.counts || o.bytes >= 4 << 20 ? o : { ...o, bytes: Math.max(o.bytes, 1 << 22) })) };
    same(scn, loadDevice(scn.instance), scn.ops.map((_, i) => i));
  });

  const specs = loadPresets();
  const cases = generateCases(20261202, 40, { maxBytes: 8 << 20, maxCheckedPayload: 0, maxRanks: 64 }, specs);
  let ran = 0;
  it.each(cases.map((c) => [c.id, c.label, c] as const))("generated case %i: %s", (_id, _label, c) => {
    const scn = parseScenario(`${c.scenario["name"]}.json`, c.scenario);
    try {
      compileProgram(scn, specs.get(scn.instance)!, [0]);
    } catch (e) {
      // Refused at the gate: nothing to stream. Anything else is a failure.
      if (e instanceof CcsimError && REFUSAL_CODES.has(e.code)) return;
      throw e;
    }
    same({ ...scn, check: "none" }, specs.get(scn.instance)!, scn.ops.map((_, i) => i));
    ran++;
  });
  it("most generated cases ran both ways (not refused)", () => {
    expect(ran).toBeGreaterThanOrEqual(cases.length / 2);
  });
});

describe("a streamed run holds the descriptors in flight", () => {
  /** The most descriptor pages the rings hold at once over the run of a ring8 all-reduce of `bytes`. */
  function peakPages(bytes: number): { peak: number; total: number; stores: number } {
    const base = loadScenario("scenarios/ring8.json");
    const scn: Scenario = { ...base, check: "none" as const, ops: [{ ...base.ops[0]!, op: "all-reduce" as const, bytes }] };
    const spec = loadDevice(scn.instance);
    const { image } = compileStreamed(scn, spec, [0]);
    const stores = image.devices.flatMap((d) => d.queues.flatMap((q) => [q.streamed!.tx, q.streamed!.rx]));
    let peak = 0;
    const feed = image.feed!;
    const watched = {
      pull() {
        const more = feed.pull();
        peak = Math.max(peak, stores.reduce((n, s) => n + s.heldPages, 0));
        return more;
      },
    };
    // (The feed's own bound: a run that skips periods keeps up to 64 Ki descriptors a side from its marks, sim/steady-state.ts.)
    const r = simulate(spec, { ...image, feed: watched }, { storePayload: false, fastForward: false });
    expect(r.hang).toBeUndefined();
    return { peak, total: stores.reduce((n, s) => n + s.count, 0), stores: stores.length };
  }

  it("ring8 all-reduce: 16x the bytes, still at most 8,192 descriptors held per ring side", () => {
    const small = peakPages(16 << 20);
    const large = peakPages(256 << 20);
    expect(large.total).toBeGreaterThan(12 * small.total);
    // A whole 256 MiB program would be ~2 M descriptors; the run holds what the feed's last chunk group put in flight.
    const bound = (r: { stores: number }) => 8192 * r.stores;
    expect(large.total).toBeGreaterThan(3 * bound(large));
    expect(large.peak * PAGE_DESCS).toBeLessThanOrEqual(bound(large));
    expect(small.peak * PAGE_DESCS).toBeLessThanOrEqual(bound(small));
  });

  it("a long ring's one chunk group is handed over in parts (128 ranks: 64 ring steps at a time)", () => {
    // One chunk group of a 128-rank ring is 254 steps: composed whole, every descriptor of the op
    // came in one handover (a 512-rank group's 64 KiB all-reduce held 1.6 GB of them at once).
    // (The handovers are the composition's: the feed is pulled to its end, no run needed.)
    const scn = parseScenario("long-ring.json", { name: "long-ring", instance: "trn2-ultraserver", ranks: 128, ranksPerDevice: 2, nodes: 4, algorithm: "ring", channels: 2, chunkBytes: 1 << 20, check: "none", ops: [{ op: "all-reduce", reduce: "sum", bytes: 1 << 20, dtype: "fp32" }] });
    const { image } = compileStreamed(scn, loadDevice(scn.instance), [0]);
    const stores = image.devices.flatMap((d) => d.queues.flatMap((q) => [q.streamed!.tx, q.streamed!.rx]));
    const held = () => stores.reduce((n, s) => n + s.count, 0);
    let mostPerPull = 0;
    let before = held();
    for (let more = true; more; ) {
      more = image.feed!.pull();
      mostPerPull = Math.max(mostPerPull, held() - before);
      before = held();
    }
    expect(before).toBeGreaterThan(1 << 21);
    expect(mostPerPull).toBeLessThan(before / 2);
  });
});
