// Steady state costs once: skipping whole periods (sim/steady-state.ts) gives the same picoseconds,
// events and counters as running every event, across the conformance space.
import { describe, expect, it } from "vitest";
import pino from "pino";
import { generateCases, loadPresets, variedPreset } from "../../src/run/conformance.ts";
import { parseScenario } from "../../src/scenario/scenario.ts";
import { loadDevice } from "../../src/run/load.ts";
import { runScenario, type RunOutcome } from "../../src/run/pipeline.ts";
import { CcsimError } from "../../src/ir/errors.ts";
import type { DeviceSpec, Scenario } from "../../src/ir/spec.ts";
import { main as nccom } from "../../src/cli/nccom.ts";
import { runSim } from "../run-sim.ts";
import { EXIT } from "../../src/cli/sim.ts";

const silent = pino({ level: "silent" });
const specs = loadPresets();
/** Cases compared (CCSIM_STEADY_CASES=500 for the figure). */
const CASES = Number(process.env.CCSIM_STEADY_CASES ?? 32);

/** What a run reports, but for wall-clock time and what skipping did (a -0 told from a 0, as toEqual does). */
function comparable(out: RunOutcome): string {
  const signed = (_k: string, v: unknown) => (Object.is(v, -0) ? "-0" : v);
  if (out.kind === "hang") return JSON.stringify({ hang: out.hang, op: out.op }, signed);
  return JSON.stringify({ ops: out.ops.map(({ wallMs: _w, steady: _s, ...o }) => o), concurrent: out.concurrent }, signed);
}

function skipped(out: RunOutcome): number {
  return out.kind === "done" ? out.ops.reduce((n, o) => n + (o.steady?.periods ?? 0), 0) : 0;
}

/** Runs `scn` on `spec` twice, every event and skipping every repeat found; their outcomes, and the periods skipped. */
function both(scn: Scenario, spec: DeviceSpec): { full: string; fast: string; periods: number } {
  const full = runScenario(scn, spec, silent, { noFastForward: true });
  const fast = runScenario(scn, spec, silent, { fastForwardMinSkip: 0 });
  return { full: comparable(full), fast: comparable(fast), periods: skipped(fast) };
}

describe("skipping periods once the state repeats", () => {
  it("gives a two-node all-reduce (network proxies, hierarchical and flat) the same times, size by size", () => {
    // The published legacy series' shape (the two-node points of a fit): 64 ranks on two trn1 nodes.
    let periods = 0;
    for (const bytes of [1 << 20, 8 << 20, (8 << 20) + 12, 64 << 20]) {
      const scn = parseScenario("two-node.json", { name: "two-node", instance: "trn1-legacy", ranks: 64, ranksPerDevice: 2, nodes: 2, algorithm: "auto", check: "none", ops: [{ op: "all-reduce", bytes, dtype: "fp32", reduce: "sum" }] });
      const r = both(scn, loadDevice("trn1-legacy"));
      expect(r.fast, `${bytes} B`).toBe(r.full);
      periods += r.periods;
    }
    expect(periods).toBeGreaterThan(0);
  }, 120_000);

  it(`gives every generated configuration the same times, events and counters as the full run (${CASES} cases, odd and round sizes, every preset)`, () => {
    // Ops big enough to repeat many times (32 MiB to 128 MiB, odd sizes among them), groups small
    // enough to run twice in a fraction of a second; channels, priorities and a second stream varied.
    const cases = generateCases(20261205, CASES, { minBytes: 32 << 20, maxBytes: 128 << 20, maxCheckedPayload: 0, maxRanks: 8, knobs: true }, specs);
    let ran = 0;
    let jumped = 0;
    const differ: string[] = [];
    for (const c of cases) {
      let scn;
      let spec;
      try {
        scn = { ...parseScenario(`${c.scenario["name"]}.json`, c.scenario), check: "none" as const };
        spec = c.preset ? variedPreset(scn.instance, c.preset) : loadDevice(scn.instance);
      } catch (e) {
        if (e instanceof CcsimError) continue;
        throw e;
      }
      let full: RunOutcome;
      try {
        full = runScenario(scn, spec, silent, { noFastForward: true });
      } catch (e) {
        if (e instanceof CcsimError) continue;
        throw e;
      }
      // Every repeat found is skipped, however short (exactness does not depend on the length).
      const fast = runScenario(scn, spec, silent, { fastForwardMinSkip: 0 });
      ran++;
      if (skipped(fast) > 0) jumped++;
      if (comparable(full) !== comparable(fast)) differ.push(c.label);
    }
    // (Asked for by count, the run says what it compared.)
    if (process.env.CCSIM_STEADY_CASES) console.info(`${CASES} cases: ${ran} ran (the rest refused), ${jumped} skipped periods, ${differ.length} differ`);
    expect(differ).toEqual([]);
    // The comparison means something: most cases run, and a good share of them skip periods.
    expect(ran).toBeGreaterThan(CASES / 2);
    expect(jumped).toBeGreaterThan(ran / 5);
  }, 600_000);

  it("the command line skips periods by default, says so in --explain, and --no-fastforward prints the same table", () => {
    const args = ["scenarios/ring8.json", "-b", "256M", "-e", "256M", "--op", "all-reduce", "--check", "none"];
    const explained = runSim([...args, "--explain"]);
    expect(explained.code, explained.err).toBe(EXIT.OK);
    expect(explained.out).toMatch(/op 0: steady state: [1-9]\d* periods skipped in 1 jump \([\d.]+ us of simulated time, \d+ events\), the same picoseconds as running them/);
    const fast = runSim([...args, "--json"]);
    const full = runSim([...args, "--json", "--no-fastforward"]);
    expect(full.code).toBe(EXIT.OK);
    expect(fast.out).toBe(full.out);
    // A program too small to repeat much (under 1 Mi descriptors) is not looked at, nor is a values check.
    expect(runSim(["scenarios/ring8.json", "-b", "4K", "-e", "4K", "--op", "all-reduce", "--check", "none", "--explain"]).out).not.toMatch(/steady state|period skipped/);
    expect(runSim(["scenarios/ring8.json", "--explain"]).out).not.toMatch(/steady state|period skipped/);
  }, 60_000);

  it("--explain says when the search had no moment to look at: an RDH all-reduce steps on the mesh event tape, no ring channel", () => {
    let out = "";
    const code = nccom(["allr", "-r", "8", "-b", "256M", "-e", "256M", "-d", "fp32", "--check", "none", "--explain"], (x) => (out += x), () => {});
    expect(code).toBe(EXIT.OK);
    expect(out).toMatch(/resolved: enc_alg_type 5 "RDH"/);
    expect(out).toMatch(/op 0: no period looked for: the search compares the machine's state at the steps of the first core's first ring channel, which this run never stepped/);
    // A ring's run is marked: looked at, whatever it found.
    const ring = runScenario(parseScenario("ring.json", { name: "ring", instance: "trn1", ranks: 8, algorithm: "ring", check: "none", ops: [{ op: "all-reduce", bytes: 4 << 20, dtype: "fp32", reduce: "sum" }] }), loadDevice("trn1"), silent, { fastForwardMinSkip: 0 });
    expect(ring.kind === "done" && ring.ops[0]!.steady!.marks).toBeGreaterThan(0);
  }, 60_000);

  it("--explain says when the search stopped looking, and why (a wide two-node ring)", () => {
    let out = "";
    const code = nccom(["allr", "-r", "64", "-N", "2", "-b", "256M", "-e", "256M", "-d", "fp32", "--instance", "trn1-legacy", "--explain"], (x) => (out += x), () => {});
    expect(code).toBe(EXIT.OK);
    const m = /op 0: no period skipped: .*; the search stopped looking after (\d+) events, having run 3 Mi events more than it skipped \(the ranks of a wide ring/.exec(out);
    expect(m, out).not.toBeNull();
    // (It looks over the first 3 Mi events, then no further.)
    expect(Number(m![1])).toBeGreaterThan(3 << 20);
    expect(Number(m![1])).toBeLessThan((3 << 20) + 100_000);
  }, 60_000);
});
