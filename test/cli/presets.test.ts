// Preset paths: --devices names a folder of presets, --instance a preset name or a preset file.
// Every wrong path is a clear exit 1 naming it, never a stack trace.
import { describe, expect, it } from "vitest";
import { copyFileSync, mkdirSync, mkdtempSync } from "node:fs";
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
});
