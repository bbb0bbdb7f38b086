// Calibration: the published logs read as typed, the fixed-cost solver, a round trip through
// --from (a table the simulator printed on a perturbed preset is fitted back), and refusals.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main } from "../../src/cli/calibrate.ts";
import { publishedSeries } from "../../src/fit/files.ts";
import { Evaluator, solveFixedCosts, summarize, withFixedCosts, type Series } from "../../src/fit/fit.ts";
import { parseConsoleLog, parseJsonReport, LogError } from "../../src/fit/log.ts";
import { loadDevice } from "../../src/run/load.ts";
import { main as nccom } from "../../src/cli/nccom.ts";

const recorded = JSON.parse(readFileSync("calibration/summary.json", "utf8"));

function run(argv: string[]): { code: number; out: string; err: string } {
  let out = "";
  let err = "";
  const code = main(argv, (s) => (out += s), (s) => (err += s));
  return { code, out, err };
}

describe("the published logs", () => {
  const series = publishedSeries();
  // One evaluator for trn1-legacy's points, shared by the two tests below (they overlap from 8 to
  // 64 MiB; each point runs once).
  const legacy = new Evaluator(series.filter((s) => s.instance === "trn1-legacy"));
  const upTo = (only: readonly Series[], maxBytes: number): Series[] => only.map((s) => ({ ...s, points: s.points.filter((p) => p.bytes <= maxBytes) }));

  it("read as their era says: older tables in GiB/s with integer times, newer in GB/s", () => {
    const eras = new Map(series.map((s) => [s.id, s.era]));
    expect(eras.get("older-trn1-r2-allr-fp32")).toBe("older");
    expect(eras.get("newer-trn2-r16-allr-fp32")).toBe("newer");
    for (const s of series) expect(s.instance === "trn1-legacy").toBe(s.era === "older");
  });

  it("run as typed on the shipped presets, no worse than calibration/summary.json (points up to 64 MiB)", () => {
    for (const inst of ["trn1", "trn2", "trn1-legacy"]) {
      const mine = series.filter((s) => s.instance === inst);
      const sm = summarize(inst === "trn1-legacy" ? legacy.run(loadDevice(inst), upTo(mine, recorded.maxBytes)) : new Evaluator(mine, recorded.maxBytes).run(loadDevice(inst)));
      const r = recorded[inst];
      expect(sm.failed).toBe(0);
      expect(sm.points).toBe(r.points);
      expect(sm.within25).toBeGreaterThanOrEqual(r.within25);
      expect(sm.geomeanErrorFactor).toBeLessThanOrEqual(r.geomeanErrorFactor + 0.001);
    }
  });

  it("the older runtime's bandwidth points on trn1-legacy: 8 MiB to 64 MiB and the two-rank 1 GiB within ±15 % (the two-node table's step at 16 MiB is its flat-ring window)", () => {
    const M = 2 ** 20;
    // (The two-node rows from 128 MiB up take seconds each: published.mjs holds them.)
    const big = series
      .filter((s) => s.instance === "trn1-legacy")
      .map((s) => ({ ...s, points: s.points.filter((p) => p.bytes >= 8 * M && (p.bytes <= 64 * M || !s.id.includes("N2"))) }));
    const ev = legacy.run(loadDevice("trn1-legacy"), big);
    expect(ev.map((e) => e.bytes)).toEqual([16 * M, 64 * M, 256 * M, 1024 * M, 32 * M, 8 * M, 16 * M, 32 * M, 64 * M]);
    for (const e of ev) expect(Math.abs(Math.log(e.run!.timeUs / e.publishedUs)), `${e.series} ${e.bytes} B`).toBeLessThanOrEqual(Math.log(1.15));
    // Below the window the two-node op is hierarchical, from it the flat ring (the table's step).
    const n2 = ev.filter((e) => e.series.includes("N2"));
    expect(n2.map((e) => e.run!.algorithm.split("(")[0])).toEqual(["hier", "ring", "ring", "ring"]);
  });
});

describe("the fixed-cost solver", () => {
  it("recovers fixed costs that generated the times exactly", () => {
    const spec = loadDevice("trn1");
    const ev = [1, 2, 3, 4].map((k) => ({ series: "s", bytes: k, publishedUs: 10 + 3 * k + 5 * (k % 2), publishedAlgorithm: undefined, run: { timeUs: 0, deviceUs: 10, algorithm: "mesh", features: { "topsp.launchPs": 1, "host.syncPs": k, "host.iterationPs": k % 2 } } }));
    const theta = solveFixedCosts(withFixedCosts(spec, { "topsp.launchPs": 0 }), ev);
    expect(theta["topsp.launchPs"]! / 1e6).toBeCloseTo(0, 2);
    expect(theta["host.syncPs"]! / 1e6).toBeCloseTo(3, 2);
    expect(theta["host.iterationPs"]! / 1e6).toBeCloseTo(5, 2);
  });
});

describe("calibrate --from", () => {
  it("fits back a table printed on a preset with its engine rate and costs perturbed by 20-40 %, within 3 % of every time", () => {
    const dir = mkdtempSync(join(tmpdir(), "ccsim-cal-"));
    const base = JSON.parse(readFileSync("devices/trn1.json", "utf8"));
    base.name = "perturbed";
    base.dma.engineBytesPerSecond = Math.round(base.dma.engineBytesPerSecond * 0.7);
    base.topsp.launchPs = Math.round(base.topsp.launchPs * 1.4);
    base.host.iterationPs = Math.round(base.host.iterationPs * 1.3);
    base.host.algorithmPs["intra-rdh"] = Math.round(base.host.algorithmPs["intra-rdh"] * 0.75);
    writeFileSync(join(dir, "perturbed.json"), JSON.stringify(base));
    const logs: string[] = [];
    for (const cmd of [["allg", "-r", "8", "-b", "1kb", "-e", "4mb", "-f", "4", "-d", "fp32", "-t", "avg"], ["allr", "-r", "32", "-b", "1kb", "-e", "4mb", "-f", "4", "-d", "fp32"]]) {
      let table = "";
      expect(nccom([...cmd, "--instance", join(dir, "perturbed.json")], (s) => (table += s), () => {})).toBe(0);
      const log = join(dir, `${cmd[0]}-r${cmd[2]}.log`);
      writeFileSync(log, `nccom-test ${cmd.join(" ")}\n${table}`);
      logs.push(log);
    }
    const outFile = join(dir, "fitted.json");
    const r = run(["--from", ...logs, "--instance", "trn1", "--out", outFile, "--params", "dma.engineBytesPerSecond", "-j", "1"]);
    expect(r.code, r.err).toBe(0);
    const after = /after: {2}14 points, 14 within ±10 %.* worst ([\d.]+) %/.exec(r.out);
    expect(after, r.out).not.toBeNull();
    expect(Number(after![1])).toBeLessThanOrEqual(3);
    const fitted = loadDevice("fitted", dir);
    expect(fitted.dma.engineBytesPerSecond / base.dma.engineBytesPerSecond).toBeCloseTo(1, 1);
    expect(fitted.sources["dma.engineBytesPerSecond"]).toMatch(/--from allg-r8\.log allr-r32\.log --instance trn1/);
    expect(r.out).toMatch(/held out: 14 points/);
  });

  it("a command line's variables before nccom-test are the run's (NEURON_RT_DBG_CC_DMA_PACKET_SIZE=512 nccom-test ...), in a log and in --command", () => {
    expect(parseConsoleLog("f.log", "$ FOO=1 NEURON_RT_DBG_CC_DMA_PACKET_SIZE=512 nccom-test allr -r 8\nsize(B) count(elems) type time:avg(us) algbw(GB/s) busbw(GB/s)\n1024 256 fp32 10.00 0.10 0.18\n").env).toEqual({ FOO: "1", NEURON_RT_DBG_CC_DMA_PACKET_SIZE: "512" });
    expect(parseConsoleLog("f.log", "nccom-test allr -r 8\nsize(B) count(elems) type time:avg(us) algbw(GB/s) busbw(GB/s)\n1024 256 fp32 10.00 0.10 0.18\n").env).toEqual({});
    const report = JSON.stringify({ results: [{ "size(B)": 1024, "count(elems)": 256, type: "fp32", "time:avg(us)": 10, "algbw(GB/s)": 0.1, "busbw(GB/s)": 0.18 }] });
    expect(parseJsonReport("r.json", report, "NEURON_RT_DBG_CC_DMA_PACKET_SIZE=4096,512 nccom-test allr -r 8").env).toEqual({ NEURON_RT_DBG_CC_DMA_PACKET_SIZE: "4096,512" });
    // A table the shipped preset printed with 512-byte packets: fitted from the shipped preset, it is
    // exact only where the log's variable is read.
    const dir = mkdtempSync(join(tmpdir(), "ccsim-cal-env-"));
    const cmd = ["allr", "-r", "8", "-b", "1mb", "-e", "4mb", "-f", "4", "-d", "fp32"];
    let table = "";
    expect(nccom(cmd, (x) => (table += x), () => {}, { NEURON_RT_DBG_CC_DMA_PACKET_SIZE: "512" })).toBe(0);
    const before = (prefix: string) => {
      const log = join(dir, `${prefix ? "with" : "without"}.log`);
      writeFileSync(log, `${prefix}nccom-test ${cmd.join(" ")}\n${table}`);
      const r = run(["--from", log, "--instance", "trn1", "--out", join(dir, "p.json"), "--rounds", "0", "-j", "1"]);
      expect(r.code, r.err).toBe(0);
      return Number(/before: .* geometric-mean error factor ([\d.]+)/.exec(r.out)![1]);
    };
    expect(before("NEURON_RT_DBG_CC_DMA_PACKET_SIZE=512 ")).toBe(1);
    expect(before("")).toBeGreaterThan(1.1);
    // A logical NeuronCore size the log's command sets is a preset of its own: named, not run on the one fitted.
    const lnc = join(dir, "lnc1.log");
    writeFileSync(lnc, `NEURON_LOGICAL_NC_CONFIG=1 nccom-test allr -r 16 -b 1mb -e 1mb -d fp32\nsize(B) count(elems) type time:avg(us) algbw(GB/s) busbw(GB/s)\n1048576 262144 fp32 30.32 34.59 64.85\n`);
    const r = run(["--from", lnc, "--instance", "trn2", "--out", join(dir, "lnc.json"), "--rounds", "0", "-j", "1"]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/lnc1\.log:1: the command runs on trn2-lnc1, not on trn2, the preset being fitted: .*\(fit it with --instance trn2-lnc1\)/);
    expect(existsSync(join(dir, "lnc.json"))).toBe(false);
    // A log none of whose points runs (64 GiB a rank on 32 GiB devices): nothing fitted, nothing written.
    const huge = join(dir, "huge.log");
    writeFileSync(huge, "nccom-test allr -r 8 -b 64G -e 64G -d fp32\nsize(B) count(elems) type time:avg(us) algbw(GB/s) busbw(GB/s)\n68719476736 17179869184 fp32 3000000.00 22.91 40.09\n");
    const h = run(["--from", huge, "--instance", "trn1", "--out", join(dir, "huge.json"), "--rounds", "0", "-j", "1"]);
    expect(h.code).toBe(1);
    expect(h.out).toMatch(/first failed point: huge 68719476736 B: .*\[CMP1312\]/);
    expect(h.err).toMatch(/calibrate: no point of .*huge\.log ran on trn1 \(the first failure above\): nothing fitted, .*huge\.json not written/);
    expect(existsSync(join(dir, "huge.json"))).toBe(false);
  });

  it("refuses a log whose table is not its command's, with file and line, and writes nothing", () => {
    const dir = mkdtempSync(join(tmpdir(), "ccsim-cal-"));
    const src = readFileSync("calibration/logs/newer-trn1-r32-allg-fp32-run2.log", "utf8");
    // The same table under an all-reduce command: busbw / algbw is all-gather's factor, not all-reduce's.
    const bad = join(dir, "bad.log");
    writeFileSync(bad, src.replace(" allg ", " allr "));
    const out = join(dir, "x.json");
    const r = run(["--from", bad, "--out", out]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/bad\.log:4: busbw \/ algbw is 0\.96.* all-reduce over 32 ranks has bus factor 1\.938/);
    expect(existsSync(out)).toBe(false);
  });

  it.each([
    ["no command line", "size(B) count(elems) type time:avg(us) algbw(GB/s) busbw(GB/s)\n", /:1: the first line must be the nccom-test command line/],
    ["a zero time", "nccom-test allg -r 8 -d fp32\nsize(B) count(elems) type time:avg(us) algbw(GB/s) busbw(GB/s)\n1024 256 fp32 0 0.1 0.1\n", /:3: time:avg\(us\) must be a positive number/],
    ["a count that is not whole, naming the count", "nccom-test allg -r 8 -d fp32\nsize(B) count(elems) type time:avg(us) algbw(GB/s) busbw(GB/s)\n65536 1.5 fp32 8.18 8.01 7.76\n", /:3: count\(elems\) must be a whole number \(got "1\.5"\)/],
    ["wrong columns", "nccom-test allg -r 8 -d fp32\nsize(B) count(elems) type algbw(GB/s) busbw(GB/s)\n", /:2: the header has no time\(us\)/],
    ["a type the command does not give", "nccom-test allg -r 8 -d fp32\nsize(B) count(elems) type time:avg(us) algbw(GB/s) busbw(GB/s)\n1024 512 fp16 10.0 0.10 0.09\n", /:3: type fp16 is not the command's -d fp32/],
    // (A hundred thousand rows took 30 s and 1.3 GB to fit: refused at the row past a sweep's most sizes.)
    ["more rows than a sweep makes", "nccom-test allg -r 8 -d fp32\nsize(B) count(elems) type time:avg(us) algbw(GB/s) busbw(GB/s)\n" + "1024 256 fp32 10.24 0.10 0.09\n".repeat(4097), /:4099: more than 4096 rows in one table: a sweep makes at most 4096 sizes/],
  ])("refuses %s", (_what, text, want) => {
    const dir = mkdtempSync(join(tmpdir(), "ccsim-cal-"));
    const f = join(dir, "l.log");
    writeFileSync(f, text);
    const r = run(["--from", f, "--out", join(dir, "o.json")]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(want);
  });

  it("a malformed log is a LogError naming the file", () => {
    expect(() => parseConsoleLog("f.log", "")).toThrow(LogError);
    // A JSON report of more results than a sweep makes is refused before they are read.
    const row = { "size(B)": 1024, "count(elems)": 256, type: "fp32", "time:avg(us)": 10.24, "algbw(GB/s)": 0.1, "busbw(GB/s)": 0.09 };
    expect(() => parseJsonReport("r.json", JSON.stringify({ results: Array(4097).fill(row) }), "nccom-test allg -r 8 -d fp32")).toThrow(/r\.json: 4097 results: a sweep makes at most 4096 sizes/);
  });

  it("property: any edit of a published log is read (every row's numbers finite and positive) or refused by a LogError naming the file", () => {
    const logs = readdirSync("calibration/logs")
      .filter((f) => f.endsWith(".log"))
      .sort()
      .map((f) => readFileSync(`calibration/logs/${f}`, "utf8"));
    const pieces = ["-r 0", "-r 3", "-N 5", "-b 1", "-e 0", "-d fp64", "--lnc 1", "allr", "size(B)", "time:avg(us)", "GB/s", "NaN", "-1", "1e309", "0", "0.00", "\t", "  ", "\r\n", "\n", "Avg bus bandwidth:\t1.0GB/s", "99999999999999999999", "NEURON_RT_DBG_CC_DMA_PACKET_SIZE=64 "];
    const edit = fc.record({ kind: fc.constantFrom("cut", "put", "end", "line"), at: fc.nat(), len: fc.integer({ min: 1, max: 12 }), piece: fc.constantFrom(...pieces), from: fc.nat() });
    const apply = (text: string, e: { kind: string; at: number; len: number; piece: string; from: number }): string => {
      const at = e.at % (text.length + 1);
      if (e.kind === "cut") return text.slice(0, at) + text.slice(at + e.len);
      if (e.kind === "put") return text.slice(0, at) + e.piece + text.slice(at);
      if (e.kind === "end") return text.slice(0, at);
      const lines = text.split("\n");
      lines.splice(e.at % lines.length, 0, lines[e.from % lines.length]!);
      return lines.join("\n");
    };
    fc.assert(
      fc.property(fc.nat({ max: logs.length - 1 }), fc.array(edit, { minLength: 1, maxLength: 3 }), (k, edits) => {
        const text = edits.reduce(apply, logs[k]!);
        try {
          const log = parseConsoleLog("edited.log", text);
          for (const r of log.tables.flat()) for (const x of [r.bytes, r.count, r.timeUs]) expect(Number.isFinite(x) && x > 0).toBe(true);
        } catch (e) {
          if (!(e instanceof LogError)) throw e;
          expect(e.message).toMatch(/^edited\.log(:\d+)?: /);
        }
      }),
      { numRuns: 300, seed: 2026 },
    );
  });

  it("--max-bytes below every point is an error, never a NaN", () => {
    const r = run(["--max-bytes", "1"]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/no published point is at most --max-bytes 1 B/);
  });

  it("--params names each parameter once, none empty", () => {
    // (An empty name was refused as a blank "--params :", and a name given twice was searched twice.)
    for (const [v, msg] of [
      ["dma.engineBytesPerSecond,,link.latencyPs", /--params "dma\.engineBytesPerSecond,,link\.latencyPs": an empty parameter name/],
      ["link.latencyPs,link.latencyPs", /--params link\.latencyPs given twice/],
      ["link.latencyPs,no.such", /--params no\.such: not a device parameter the fit moves/],
    ] as const) {
      const r = run(["--fit", "--params", v]);
      expect(r.code).toBe(1);
      expect(r.err).toMatch(msg);
    }
  });

  it("--keep-programs takes a size (0: none), and says so otherwise", () => {
    for (const [v, msg] of [["foo", /--keep-programs: "foo" is not a size/], ["-1", /--keep-programs: "-1" is not a size/]] as const) {
      const r = run(["--fit", "--keep-programs", v]);
      expect(r.code).toBe(1);
      expect(r.err).toMatch(msg);
    }
    expect(run(["--fit", "--keep-programs"]).err).toMatch(/--keep-programs needs a value/);
  });
});
