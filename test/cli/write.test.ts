// Output files follow links and never replace them; a device is written in place, and a write that
// fails (no space) is an error naming the file.
import { describe, expect, it } from "vitest";
import { existsSync, linkSync, lstatSync, mkdtempSync, readFileSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { refuseOverwrite, writeTarget, writeWhole } from "../../src/cli/write.ts";
import { main as nccom } from "../../src/cli/nccom.ts";
import { main as sim } from "../../src/cli/sim.ts";
import { main as calibrate } from "../../src/cli/calibrate.ts";
import { main as merge } from "../../src/cli/merge.ts";
import { main as conformance } from "../../src/cli/conformance.ts";
import { spawnSync } from "node:child_process";

const fail = (m: string) => new Error(m);

describe("writing outputs", () => {
  it("writes through a symbolic link: the link stays a link, its target gets the text", () => {
    const dir = mkdtempSync(join(tmpdir(), "ccsim-write-"));
    writeFileSync(join(dir, "real.json"), "old");
    symlinkSync("real.json", join(dir, "link.json"));
    writeWhole(join(dir, "link.json"), "new", fail);
    expect(lstatSync(join(dir, "link.json")).isSymbolicLink()).toBe(true);
    expect(readFileSync(join(dir, "real.json"), "utf8")).toBe("new");
    // A dangling link: its target is created.
    symlinkSync("later.json", join(dir, "dangling.json"));
    expect(writeTarget(join(dir, "dangling.json"))).toBe(join(dir, "later.json"));
    writeWhole(join(dir, "dangling.json"), ["a", "b"], fail);
    expect(readFileSync(join(dir, "later.json"), "utf8")).toBe("ab");
    expect(lstatSync(join(dir, "dangling.json")).isSymbolicLink()).toBe(true);
  });

  it.runIf(existsSync("/dev/full"))("a device that is full: exit 1 naming it, never a silent exit 0", () => {
    let err = "";
    const code = nccom(["allr", "-r", "8", "-b", "1K", "-e", "2K", "--report-to-json-file", "/dev/full"], () => {}, (s) => (err += s), {});
    expect(code).toBe(1);
    expect(err).toMatch(/cannot write \/dev\/full: ENOSPC/);
  });
});

describe("no output is written over an input, nor two outputs over one file", () => {
  const run = (main: (a: string[], o: (s: string) => void, e: (s: string) => void) => number, args: string[]) => {
    let err = "";
    const code = main(args, () => {}, (s) => (err += s));
    return { code, err };
  };
  const dir = mkdtempSync(join(tmpdir(), "ccsim-over-"));
  const scn = join(dir, "ring8.json");
  const scnText = readFileSync("scenarios/ring8.json", "utf8");
  writeFileSync(scn, scnText);
  symlinkSync("ring8.json", join(dir, "alias.json"));

  it("sim / nccom: an output over the scenario (or through a link to it), over a file a flag reads, or two outputs on one file are refused before anything runs", () => {
    const over = run(sim, [scn, "-b", "1K", "-e", "1K", "--report-to-json-file", scn]);
    expect(over.code).toBe(1);
    expect(over.err).toMatch(/--report-to-json-file .*ring8\.json is the scenario, which this command reads: it would be written over; name another file/);
    expect(run(sim, [scn, "--trace", join(dir, "alias.json")]).err).toMatch(/--trace .*alias\.json is the scenario/);
    const both = run(sim, [scn, "-b", "1K", "-e", "1K", "--report-to-json-file", join(dir, "r.json"), "--plot", join(dir, "r.json")]);
    expect(both.err).toMatch(/--report-to-json-file and --plot both name .*r\.json: one would be written over the other/);
    expect(existsSync(join(dir, "r.json"))).toBe(false);
    const groups = join(dir, "groups.json");
    writeFileSync(groups, "[[0,1,2,3],[4,5,6,7]]");
    const g = run((a, o, e) => nccom(a, o, e, {}), ["allr", "-r", "8", "-b", "1K", "-e", "1K", "--custom-replica-groups", groups, "--report-to-json-file", groups]);
    expect(g.code).toBe(1);
    expect(g.err).toMatch(/--report-to-json-file .*groups\.json is --custom-replica-groups, which this command reads/);
    expect(readFileSync(groups, "utf8")).toBe("[[0,1,2,3],[4,5,6,7]]");
    expect(readFileSync(scn, "utf8")).toBe(scnText);
  });

  it("calibrate --from: the fitted preset goes over neither a measured file nor the preset it starts from", () => {
    const log = join(dir, "mine.json");
    const text = JSON.stringify({ results: [{ "size(B)": 1024, "count(elems)": 256, type: "fp32", "algbw(GB/s)": 1, "busbw(GB/s)": 1.75, "time:avg(us)": 1.024 }] });
    writeFileSync(log, text);
    const r = run(calibrate, ["--from", log, "--command", "nccom-test allr -r 8 -d fp32", "--out", log, "--rounds", "0"]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/--out .*mine\.json is a --from file, which this command reads/);
    expect(readFileSync(log, "utf8")).toBe(text);
    const preset = join(dir, "start.json");
    writeFileSync(preset, readFileSync("devices/trn1.json", "utf8"));
    expect(run(calibrate, ["--from", log, "--command", "nccom-test allr -r 8 -d fp32", "--instance", preset, "--out", preset, "--rounds", "0"]).err).toMatch(/is the preset the fit starts from, which this command reads/);
  });

  it("merge: its outputs go over no partial", () => {
    const parts = [0, 1].map((i) => join(dir, `p${i}.json`));
    parts.forEach((p, i) => expect(run((a, o, e) => nccom(a, o, e, {}), ["allr", "-r", "8", "-b", "1K", "-e", "4K", "--shard", `${i}/2`, "--out", p]).code).toBe(0));
    const before = readFileSync(parts[1]!, "utf8");
    const m = run(merge, [...parts, "--json", parts[1]!]);
    expect(m.code).toBe(1);
    expect(m.err).toMatch(/^merge: --json .*p1\.json is a partial, which this command reads/);
    expect(readFileSync(parts[1]!, "utf8")).toBe(before);
  });

  it("conformance --shard --out: the partial goes over no preset the cases read (here one named by a hard link)", () => {
    // (A link beside the project's files, on their file system; were it written, the rename would replace the link, not the preset.)
    const link = join(process.cwd(), `.ccsim-test-link-${process.pid}.json`);
    const before = readFileSync("devices/trn1.json", "utf8");
    linkSync("devices/trn1.json", link);
    try {
      const r = run(conformance, ["--cases", "1", "--preset", "trn1", "--shard", "0/1", "--out", link]);
      expect(r.code).toBe(1);
      expect(r.err).toMatch(/^conformance: --out .*\.ccsim-test-link-\d+\.json is a preset the cases run on, which this command reads/);
    } finally {
      unlinkSync(link);
    }
    expect(readFileSync("devices/trn1.json", "utf8")).toBe(before);
  });

  it("nccom: an output over the preset the run is on, named by its name (here through a hard link to it), is refused", () => {
    const link = join(process.cwd(), `.ccsim-test-preset-${process.pid}.json`);
    const before = readFileSync("devices/trn1.json", "utf8");
    linkSync("devices/trn1.json", link);
    try {
      const r = run((a, o, e) => nccom(a, o, e, {}), ["allr", "-r", "8", "-b", "8", "-e", "1K", "--plot", link]);
      expect(r.code).toBe(1);
      expect(r.err).toMatch(/--plot .*\.ccsim-test-preset-\d+\.json is the preset the run is on, which this command reads/);
    } finally {
      unlinkSync(link);
    }
    expect(readFileSync("devices/trn1.json", "utf8")).toBe(before);
  });

  it("refuseOverwrite: the same file by a hard link too; devices are never refused (two flags may both write /dev/null)", () => {
    const a = join(dir, "a.log");
    writeFileSync(a, "measured");
    linkSync(a, join(dir, "hard.log"));
    expect(() => refuseOverwrite([["--out", join(dir, "hard.log")]], [["a --from file", a]], fail)).toThrow(/--out .*hard\.log is a --from file, which this command reads/);
    expect(() => refuseOverwrite([["--out", join(dir, "other.json")]], [["a --from file", a], ["nothing", undefined]], fail)).not.toThrow();
    expect(() => refuseOverwrite([["--plot", "/dev/null"], ["--trace", "/dev/null"]], [["the scenario", "/dev/null"]], fail)).not.toThrow();
    expect(() => refuseOverwrite([["--plot", join(dir, "x.svg")], ["--trace", undefined], ["--out", join(dir, "x.svg")]], [], fail)).toThrow(/--plot and --out both name/);
  });

  it("a pipe named by its /dev path is written in place (/dev/stdout links to pipe:[N], no file to follow)", () => {
    const words = (JSON.parse(readFileSync("package.json", "utf8")) as { scripts: Record<string, string> }).scripts["nccom"]!.split(" ").slice(1);
    const r = spawnSync(process.execPath, [...words, "allr", "-r", "8", "-b", "1K", "-e", "1K", "--report-to-json-file", "/dev/stdout"], { encoding: "utf8" });
    expect(r.stderr).not.toMatch(/cannot write/);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/"results": \[/);
  });
});
