// --set FIELD=VALUE: a preset field changed for one run (sim, nccom, replay), the same as running an
// edited copy of the preset file; wrong fields and values refused, named.
import { describe, expect, it } from "vitest";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { EXIT } from "../../src/cli/sim.ts";
import { main as nccom } from "../../src/cli/nccom.ts";
import { main as replay } from "../../src/cli/replay.ts";
import { main as disasm } from "../../src/cli/disasm.ts";
import { main as conformance } from "../../src/cli/conformance.ts";
import { main as merge } from "../../src/cli/merge.ts";
import { presetSetFlag, UsageError } from "../../src/command/args.ts";
import { DEFAULT_DEVICES_DIR, differsFromShipped, loadDevice, loadDeviceWith } from "../../src/run/load.ts";
import { SET_SOURCE } from "../../src/scenario/device.ts";
import { runSim } from "../run-sim.ts";

function run(main: typeof nccom, args: string[]): { code: number; out: string; err: string } {
  let out = "";
  let err = "";
  const code = main(args, (s) => (out += s), (s) => (err += s), {});
  return { code, out, err };
}

/** devices/<name>.json with `change` made, as a preset file of the same name in a folder of its own. */
function edited(name: string, change: (j: Record<string, Record<string, unknown>>) => void): string {
  const dir = mkdtempSync(join(tmpdir(), "ccsim-set-"));
  const j = JSON.parse(readFileSync(`devices/${name}.json`, "utf8"));
  change(j);
  mkdirSync(join(dir, "p"));
  writeFileSync(join(dir, "p", `${name}.json`), JSON.stringify(j));
  return join(dir, "p", `${name}.json`);
}

const results = (r: { code: number; out: string; err: string }) => {
  expect(r.code, r.err).toBe(EXIT.OK);
  return JSON.parse(r.out).results;
};

describe("--set FIELD=VALUE", () => {
  it("reads a dotted path and a JSON value, else the text; refuses what is not a field of figures", () => {
    expect(presetSetFlag("link.bytesPerSecond=2e11", "--set")).toEqual({ path: "link.bytesPerSecond", value: 2e11 });
    expect(presetSetFlag("collectives.cceReducePacketBytes=[65536,4096]", "--set")).toEqual({ path: "collectives.cceReducePacketBytes", value: [65536, 4096] });
    expect(presetSetFlag("topology.kind=ring", "--set")).toEqual({ path: "topology.kind", value: "ring" });
    expect(presetSetFlag("host.algorithmPs.intra-rdh=0", "--set")).toEqual({ path: "host.algorithmPs.intra-rdh", value: 0 });
    for (const [v, says] of [
      ["link.bytesPerSecond", /expected FIELD=VALUE/],
      ["=3", /expected FIELD=VALUE/],
      ["link..x=3", /expected FIELD=VALUE/],
      ["link.bytesPerSecond=", /no value after "="/],
      ["name=mine", /name is not a figure of the preset/],
      ["sources.link.bytesPerSecond=x", /sources is not a figure of the preset/],
    ] as const) {
      expect(() => presetSetFlag(v, "--set")).toThrow(UsageError);
      expect(() => presetSetFlag(v, "--set")).toThrow(says);
    }
  });

  it("every field of every shipped preset can be set, and set to its own value gives the shipped preset", () => {
    let fields = 0;
    for (const f of readdirSync("devices").filter((x) => x.endsWith(".json") && !x.endsWith(".schema.json"))) {
      const name = f.slice(0, -5);
      const shipped = loadDevice(name);
      const walk = (o: unknown, path: string): void => {
        if (path === "sources" || path === "$schema" || path === "name" || path === "description") return;
        if (o !== null && typeof o === "object" && !Array.isArray(o)) {
          for (const [k, v] of Object.entries(o)) walk(v, path === "" ? k : `${path}.${k}`);
          return;
        }
        fields++;
        const set = presetSetFlag(`${path}=${typeof o === "string" ? o : JSON.stringify(o)}`, "--set");
        const spec = loadDeviceWith(name, DEFAULT_DEVICES_DIR, [set]);
        expect({ ...spec, sources: {} }, `${name} ${path}`).toEqual({ ...shipped, sources: {} });
        expect(differsFromShipped(spec)).toEqual([]);
      };
      walk(JSON.parse(readFileSync(`devices/${f}`, "utf8")), "");
    }
    expect(fields).toBeGreaterThan(400);
  });

  it("npm run sim: the run is the run of the edited preset file, and its note says it is not the shipped preset", () => {
    const file = edited("trn1", (j) => ((j["link"]!["bytesPerSecond"] = 2e10), (j["dma"]!["engineBytesPerSecond"] = 4e10)));
    const args = ["scenarios/ring8.json", "--check", "none", "-b", "64K", "-e", "4M", "-f", "8"];
    const shipped = results(runSim([...args, "--json"]));
    const set = results(runSim([...args, "--json", "--set", "link.bytesPerSecond=2e10", "--set", "dma.engineBytesPerSecond=4e10"]));
    expect(set).toEqual(results(runSim([...args, "--json", "--instance", file])));
    expect(set.map((r: { timeUs: number }) => r.timeUs)).not.toEqual(shipped.map((r: { timeUs: number }) => r.timeUs));
    const text = runSim([...args, "--set", "link.bytesPerSecond=2e10"]);
    expect(runSim([...args, "--set", "link.bytesPerSecond=2e10", "--explain"]).out).toMatch(/^preset: trn1 with link\.bytesPerSecond=20000000000 \(--set\)\nfixed cost per collective/);
    expect(text.out).toMatch(/# accuracy: this trn1 is not the shipped preset \(link\.bytesPerSecond differs\): the shipped one's calibration .* does not carry over to it\n/);
    // Applied in order: the last of two sets of a field wins; set back to its own value, it is the shipped preset.
    expect(results(runSim([...args, "--json", "--set", "link.bytesPerSecond=1", "--set", "link.bytesPerSecond=2e10", "--set", "dma.engineBytesPerSecond=4e10"]))).toEqual(set);
    const own = JSON.parse(readFileSync("devices/trn1.json", "utf8")).link.bytesPerSecond;
    expect(runSim([...args, "--set", `link.bytesPerSecond=${own}`]).out).toMatch(/# accuracy: trn1 fitted on/);
  });

  it("a whole section set: its number fields noted as set, the notes of fields it took away dropped; a field the preset lacks may be set", () => {
    // trn1-legacy's table has a routeOrder, whose note stays behind when the topology is set without one.
    // (8 ranks on its 16 devices' ring: a ring over the table's links, values checked.)
    const ring = Array.from({ length: 16 }, (_, d) => [(d + 15) % 16, (d + 1) % 16]);
    const spec = loadDeviceWith("trn1-legacy", DEFAULT_DEVICES_DIR, [presetSetFlag(`topology=${JSON.stringify({ kind: "table", neighbours: ring })}`, "--set")]);
    expect(spec.topology).toEqual({ kind: "table", neighbours: ring });
    expect(spec.sources["topology.neighbours"]).toBe(SET_SOURCE);
    expect(spec.sources["topology.routeOrder"]).toBeUndefined();
    const r = run(nccom, ["allr", "-r", "8", "-b", "64K", "-e", "64K", "--instance", "trn1-legacy", "--check", "values", "--set", `topology=${JSON.stringify({ kind: "table", neighbours: ring })}`]);
    expect(r.code, r.err).toBe(EXIT.OK);
    expect(r.err).toMatch(/# values checked at every size/);
    // A section set whole is the same preset as its fields set one by one.
    const link = (sets: string[]) => loadDeviceWith("trn1", DEFAULT_DEVICES_DIR, sets.map((x) => presetSetFlag(x, "--set")));
    expect(link(['link={"bytesPerSecond":2e10,"latencyPs":250000}'])).toEqual(link(["link.bytesPerSecond=2e10", "link.latencyPs=250000"]));
    // The ideal machine gives no HBM capacity: set, it is noted and bounds the run.
    expect(loadDeviceWith("ideal", DEFAULT_DEVICES_DIR, [presetSetFlag("hbm.capacityBytes=1073741824", "--set")]).hbm).toEqual({ bytesPerSecond: 0, capacityBytes: 1073741824 });
  });

  it("a wrong field or value: exit 1 naming the preset, the flag and the field, nothing run", () => {
    for (const [flag, says] of [
      ["link.bytesPerScond=2e11", /trn1\.json with --set link\.bytesPerScond=200000000000: link\.bytesPerScond: unknown key "bytesPerScond" \(allowed: bytesPerSecond, latencyPs\)/],
      ["link.bytesPerSecond=fast", /with --set link\.bytesPerSecond="fast": link\.bytesPerSecond: expected a number/],
      ["link.bytesPerSecond=-1", /link\.bytesPerSecond: must be between 0 and/],
      ["link=3", /link: expected an object/],
    ] as const) {
      const r = runSim(["scenarios/ring8.json", "--set", flag]);
      expect(r.code).toBe(EXIT.BAD_INPUT);
      expect(r.err).toMatch(says);
      expect(r.out).toBe("");
      const n = run(nccom, ["allr", "-r", "8", "-b", "1K", "-e", "1K", "--set", flag]);
      expect(n.code).toBe(EXIT.BAD_INPUT);
      expect(n.err).toMatch(says);
    }
  });

  it("npm run nccom: ranks fill the changed preset's cores (one a device), as on the edited file; --dump-scenario names the sets sim needs", () => {
    const file = edited("trn1", (j) => (((j as Record<string, unknown>)["coresPerDevice"] = 1), (j["topsp"]!["perDevice"] = 4)));
    const args = ["allr", "-r", "8", "-b", "1M", "-e", "1M", "--json"];
    const set = results(run(nccom, [...args, "--set", "coresPerDevice=1", "--set", "topsp.perDevice=4"]));
    expect(set).toEqual(results(run(nccom, [...args, "--instance", file])));
    expect(set).not.toEqual(results(run(nccom, args)));
    const dump = run(nccom, ["allr", "-r", "8", "-b", "1M", "-e", "1M", "--set", "coresPerDevice=1", "--set", "topsp.perDevice=4", "--dump-scenario"]);
    expect(dump.code).toBe(EXIT.OK);
    expect(JSON.parse(dump.out).ranksPerDevice).toBe(1);
    expect(dump.err).toMatch(/npm run sim -- FILE --set coresPerDevice=1 --set topsp\.perDevice=4 runs it; npm run sim -- FILE -b 1048576 -e 1048576 --op all-reduce -d uint8 --set coresPerDevice=1 --set topsp\.perDevice=4 runs the command's whole sweep/);
  });

  it("npm run replay: every listed preset changed, each row as nccom runs it with the same sets; the table and JSON say so", () => {
    const module = "test/fixtures/hlo/tiny.hlo.txt";
    const r = run(replay, [module, "--instance", "trn1,trn2", "--json", "-j", "1", "--set", "link.bytesPerSecond=2e10"]);
    expect(r.code, r.err).toBe(EXIT.OK);
    const doc = JSON.parse(r.out);
    expect(doc.presetSets).toEqual({ "link.bytesPerSecond": 2e10 });
    const row = doc.collectives[0];
    for (const inst of ["trn1", "trn2"]) {
      const n = results(run(nccom, ["allr", "-r", "8", "-b", String(row.bytes), "-e", String(row.bytes), "-d", row.dtype, "--instance", inst, "--json", "--set", "link.bytesPerSecond=2e10"]));
      expect(n[0].timeUs.toFixed(2)).toBe(row.timeUs[inst].toFixed(2));
    }
    const plain = JSON.parse(run(replay, [module, "--json", "-j", "1"]).out);
    expect(plain.presetSets).toBeUndefined();
    expect(plain.collectives[0].timeUs.trn1).not.toBe(row.timeUs.trn1);
    const table = run(replay, [module, "--instance", "trn1,trn2", "-j", "1", "--set", "link.bytesPerSecond=2e10"]).out;
    expect(table).toMatch(/note: every preset here with link\.bytesPerSecond=20000000000 \(--set\)\n/);
    for (const inst of ["trn1", "trn2"]) expect(table).toMatch(new RegExp(`# accuracy: this ${inst} is not the shipped preset \\(link\\.bytesPerSecond differs\\)`));
    const bad = run(replay, [module, "--set", "link.nope=1"]);
    expect(bad.code).toBe(EXIT.BAD_INPUT);
    expect(bad.err).toMatch(/with --set link\.nope=1: link\.nope: unknown key/);
  });

  it("npm run disasm: the program the changed preset composes (descriptors cut at the changed size), the same as the edited file's", () => {
    const file = edited("trn1", (j) => (j["dma"]!["maxDescriptorBytes"] = 4096));
    const listing = (args: string[]) => {
      let out = "";
      let err = "";
      expect(disasm(args, (s) => (out += s), (s) => (err += s)), err).toBe(0);
      return out;
    };
    const shipped = listing(["scenarios/ring8.json", "--rank", "0"]);
    const set = listing(["scenarios/ring8.json", "--rank", "0", "--set", "dma.maxDescriptorBytes=4096"]);
    expect(set.split("\n").length).toBeGreaterThan(shipped.split("\n").length);
    expect(set).not.toMatch(/len=(65536|32768|16384|8192)\b/);
    expect(set).toBe(listing(["scenarios/ring8.json", "--rank", "0", "--devices", dirname(file)]));
    let err = "";
    expect(disasm(["scenarios/ring8.json", "--set", "dma.maxDescriptorBytes=1"], () => {}, (s) => (err += s))).toBe(1);
    expect(err).toMatch(/with --set dma\.maxDescriptorBytes=1: dma\.maxDescriptorBytes: must be between 64 and 65536/);
  });

  it("npm run conformance: every case on the changed preset (one rank a device), the same on one thread and on two; --dump names the sets sim needs", () => {
    const conf = (args: string[]) => {
      let out = "";
      let err = "";
      const code = conformance(args, (x) => (out += x), (x) => (err += x));
      return { code, out, err };
    };
    const args = ["--cases", "4", "--seed", "5", "--max-bytes", "16K", "--preset", "trn1", "--set", "coresPerDevice=1", "--set", "topsp.perDevice=4", "--verbose"];
    const one = conf([...args, "-j", "1"]);
    expect(one.code, one.err).toBe(0);
    const lines = one.out.split("\n").filter((l) => /^\s+\d+ /.test(l));
    expect(lines).toHaveLength(4);
    for (const l of lines) expect(l).not.toMatch(/x 2\/device/);
    expect(lines.some((l) => / x 1\/device/.test(l))).toBe(true);
    const summary = (o: string) => o.split("\n").filter((l) => /^\s+\d+ |^\s+(trn1|all)\s/.test(l));
    expect(summary(conf([...args, "-j", "2"]).out)).toEqual(summary(one.out));
    const dump = conf(["--cases", "12", "--seed", "5", "--preset", "trn1", "--set", "coresPerDevice=1", "--set", "topsp.perDevice=4", "--dump", "0"]);
    expect(dump.code).toBe(0);
    expect(dump.err).toMatch(/npm run sim -- FILE --set coresPerDevice=1 --set topsp\.perDevice=4 runs it/);
    const bad = conf(["--cases", "2", "--set", "ring.nope=1"]);
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/with --set ring\.nope=1: ring\.nope: unknown key "nope"/);
  });

  it("a sharded nccom sweep with --set merges to the unsharded run; a shard run with another --set is refused", () => {
    const dir = mkdtempSync(join(tmpdir(), "ccsim-set-shards-"));
    const line = ["allr", "-r", "8", "-b", "1K", "-e", "1M", "-f", "8", "-j", "1", "--set", "link.bytesPerSecond=2e10"];
    const parts = [0, 1].map((i) => {
      const f = join(dir, `p${i}.json`);
      expect(run(nccom, [...line, "--shard", `${i}/2`, "--out", f]).code).toBe(EXIT.OK);
      return f;
    });
    const whole = run(nccom, line);
    const merged = run(merge, parts);
    expect(merged.code, merged.err).toBe(EXIT.OK);
    expect(merged.out).toBe(whole.out);
    const other = join(dir, "other.json");
    expect(run(nccom, ["allr", "-r", "8", "-b", "1K", "-e", "1M", "-f", "8", "-j", "1", "--set", "link.bytesPerSecond=3e10", "--shard", "1/2", "--out", other]).code).toBe(EXIT.OK);
    const refused = run(merge, [parts[0]!, other]);
    expect(refused.code).toBe(EXIT.BAD_INPUT);
    expect(refused.err).toMatch(/other\.json: another command's partial: .*--set link\.bytesPerSecond=3e10/);
  });
});
