// Preset paths: --devices names a folder of presets, --instance a preset name or a preset file.
// Every wrong path is a clear exit 1 naming it, never a stack trace.
import { describe, expect, it } from "vitest";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EXIT } from "../../src/cli/sim.ts";
import { main as nccom } from "../../src/cli/nccom.ts";
import { runSim } from "../run-sim.ts";

function runNccom(args: string[]): { code: number; out: string; err: string } {
  let out = "";
  let err = "";
  const code = nccom(args, (s) => (out += s), (s) => (err += s), {});
  return { code, out, err };
}

describe("preset paths", () => {
  const empty = mkdtempSync(join(tmpdir(), "ccsim-presets-"));
  it.each([
    [["--devices", "devices/trn1.json"], /devices\/trn1\.json is a file, not a folder of presets/],
    [["--devices", "no/such/folder"], /the presets folder no\/such\/folder does not exist/],
    [["--devices", empty], /that folder holds no presets/],
  ])("sim and nccom with %j exit 1: %s", (flags, says) => {
    const s = runSim(["scenarios/ring8.json", ...flags]);
    expect(s.code).toBe(EXIT.BAD_INPUT);
    expect(s.err).toMatch(says);
    expect(s.err).not.toMatch(/\n\s+at /);
    const n = runNccom(["allr", "-r", "8", "-b", "1K", "-e", "1K", ...flags]);
    expect(n.code).toBe(EXIT.BAD_INPUT);
    expect(n.err).toMatch(says);
  });

  it("--instance FILE.json runs that preset file, in sim and in nccom, to the same figures as its name", () => {
    const dir = mkdtempSync(join(tmpdir(), "ccsim-presets-"));
    mkdirSync(join(dir, "mine"));
    copyFileSync("devices/trn2.json", join(dir, "mine", "trn2.json"));
    const byName = runNccom(["allr", "-r", "16", "-b", "1M", "-e", "1M", "--instance", "trn2", "--json"]);
    const byFile = runNccom(["allr", "-r", "16", "-b", "1M", "-e", "1M", "--instance", join(dir, "mine", "trn2.json"), "--json"]);
    expect(byFile.code, byFile.err).toBe(EXIT.OK);
    expect(JSON.parse(byFile.out).results).toEqual(JSON.parse(byName.out).results);
    const sim = runSim(["scenarios/ring8.json", "--check", "none", "--instance", join(dir, "mine", "trn2.json"), "--json"]);
    expect(sim.code, sim.err).toBe(EXIT.OK);
    const bad = runSim(["scenarios/ring8.json", "--instance", join(dir, "nothere.json")]);
    expect(bad.code).toBe(EXIT.BAD_INPUT);
    expect(bad.err).toMatch(/no device preset "nothere"/);
  });

  it("an edited copy of a shipped preset is said not to be it: the shipped one's calibration does not carry over (words changed alone, it does)", () => {
    const dir = mkdtempSync(join(tmpdir(), "ccsim-presets-"));
    const edit = (sub: string, change: (j: Record<string, Record<string, unknown>>) => void): string => {
      const j = JSON.parse(readFileSync("devices/trn1.json", "utf8"));
      change(j);
      mkdirSync(join(dir, sub));
      writeFileSync(join(dir, sub, "trn1.json"), JSON.stringify(j));
      return join(dir, sub, "trn1.json");
    };
    const faster = edit("faster", (j) => (j["link"]!["bytesPerSecond"] = 2 * (j["link"]!["bytesPerSecond"] as number)));
    const worded = edit("worded", (j) => ((j["sources"]!["link.bytesPerSecond"] = "my own measurement"), ((j as Record<string, unknown>)["description"] = "my copy")));
    const shipped = /# accuracy: trn1 fitted on \d+ measured series/;
    const edited = /# accuracy: this trn1 is not the shipped preset \(link\.bytesPerSecond differs\): the shipped one's calibration \(error [\d.]+x in-sample, [\d.]+x on series left out of the fit\) does not carry over to it\n/;
    expect(runSim(["scenarios/ring8.json", "--check", "none"]).out).toMatch(shipped);
    expect(runSim(["scenarios/ring8.json", "--check", "none", "--instance", faster]).out).toMatch(edited);
    expect(runSim(["scenarios/ring8.json", "--check", "none", "--devices", join(dir, "faster")]).out).toMatch(edited);
    expect(runSim(["scenarios/ring8.json", "--check", "none", "--instance", worded]).out).toMatch(shipped);
    // nccom says it on stderr, as its note.
    expect(runNccom(["allr", "-r", "8", "-b", "1M", "-e", "1M", "--instance", faster]).err).toMatch(edited);
  });

  it("a preset with no rates and no costs moves bytes in no time: bandwidth prints inf, never 0.00", () => {
    const dir = mkdtempSync(join(tmpdir(), "ccsim-presets-"));
    const j = JSON.parse(readFileSync("devices/ideal.json", "utf8"));
    j.link.bytesPerSecond = 0;
    j.link.latencyPs = 0;
    j.name = "free";
    writeFileSync(join(dir, "free.json"), JSON.stringify(j));
    const r = runSim(["scenarios/ideal-ring4.json", "--check", "none", "--instance", join(dir, "free.json"), "-b", "1K", "-e", "4K", "--plot", join(dir, "p.svg")]);
    expect(r.code, r.err).toBe(EXIT.OK);
    expect(r.out).toMatch(/\n\s+1024\s+256\s+fp32\s+0\.00\s+inf\s+inf\n/);
    expect(r.out).toMatch(/Avg bus bandwidth:\tinfGB\/s/);
    expect(r.out).toMatch(/# accuracy: free is not calibrated against measured tables/);
  });
});
