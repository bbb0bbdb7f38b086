// --launch-us: the runtime's fixed cost per collective for one run (it depends on the runtime
// version), in place of the preset's topsp.launchPs; sweeps on worker threads run with it too.
import { describe, expect, it } from "vitest";
import { main as nccom } from "../../src/cli/nccom.ts";
import { EXIT } from "../../src/cli/sim.ts";
import { loadDevice } from "../../src/run/load.ts";
import { runSim } from "../run-sim.ts";

function runNccom(args: string[]): { code: number; out: string; err: string } {
  let out = "";
  let err = "";
  const code = nccom(args, (s) => (out += s), (s) => (err += s), {});
  return { code, out, err };
}

const times = (json: string): number[] => (JSON.parse(json) as { results: { timeUs: number }[] }).results.map((r) => r.timeUs);

describe("--launch-us", () => {
  it("moves every op of a run by the difference from the preset's fixed cost, exactly", () => {
    const preset = loadDevice("trn1").topsp.launchPs / 1e6;
    const base = runSim(["scenarios/ring8.json", "--check", "none", "--json"]);
    const late = runSim(["scenarios/ring8.json", "--check", "none", "--json", "--launch-us", "57.5"]);
    expect(base.code).toBe(EXIT.OK);
    expect(late.code).toBe(EXIT.OK);
    const a = times(base.out);
    const b = times(late.out);
    expect(a).toHaveLength(3);
    b.forEach((t, k) => expect(t - a[k]!).toBeCloseTo(57.5 - preset, 6));
    expect(times(runSim(["scenarios/ring8.json", "--check", "none", "--json", "--launch-us", "0"]).out)[0]).toBeCloseTo(a[0]! - preset, 6);
  });

  it("a sweep on worker threads prints what it prints on one thread", () => {
    const args = ["allr", "-r", "8", "-b", "1K", "-e", "1M", "-f", "4", "-d", "fp32", "--launch-us", "25"];
    const one = runNccom([...args, "--jobs", "1"]);
    const two = runNccom([...args, "--jobs", "2"]);
    expect(one.code, one.err).toBe(EXIT.OK);
    expect(two.out).toBe(one.out);
    expect(runNccom(["allr", "-r", "8", "-b", "1K", "-e", "1K", "-d", "fp32"]).out).not.toBe(runNccom(["allr", "-r", "8", "-b", "1K", "-e", "1K", "-d", "fp32", "--launch-us", "25"]).out);
  });

  it("--explain says the fixed cost the run starts after, and where it comes from", () => {
    // (trn1's launch is fitted: the line gives whatever the preset holds.)
    const us = String(loadDevice("trn1").topsp.launchPs / 1e6).replace(".", "\\.");
    expect(runSim(["scenarios/ring8.json", "--check", "none", "--explain"]).out).toMatch(new RegExp(`^fixed cost per collective: ${us} us before the first entry \\(trn1's topsp\\.launchPs; --launch-us sets the whole fixed cost\\), plus trn1's host costs \\(each op's "fixed cost" line\\)\\nop 0: [^]*\\nop 0: fixed cost ${us} us = topsp\\.launchPs ${us} us\\n`));
    expect(runNccom(["allr", "-r", "8", "-b", "1K", "-e", "2K", "--explain", "--launch-us", "12.5"]).out).toMatch(/^fixed cost per collective: 12\.5 us before the first entry \(--launch-us: the whole of it, no host costs\)\nsize 1024 B:\n/);
  });

  it.each(["abc", "-1", "1000.5", "1.1234567", ""])("%j is refused, naming the flag (exit 1)", (v) => {
    const r = runSim(["scenarios/ring8.json", "--launch-us", v]);
    expect(r.code).toBe(EXIT.BAD_INPUT);
    expect(r.err).toMatch(/--launch-us (must be a time in microseconds from 0 to 1000 \(up to 6 decimals\), not "|needs a value)/);
  });
});
