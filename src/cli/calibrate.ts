// npm run calibrate: measured nccom-test tables against the simulator, run exactly as typed on the
// presets as they ship; --fit and --cross-validate fit the presets' free parameters to them;
// --from fits a preset to the user's own logs and writes it (src/fit/).
import { readFileSync } from "node:fs";
import { refuseOverwrite, writeWhole as writeFile } from "./write.ts";
import { basename, resolve } from "node:path";
import { CcsimError } from "../ir/errors.ts";
import { DEFAULT_DEVICES_DIR, loadDevice, presetFile, resolveInstance } from "../run/load.ts";
import { crossValidate, deviceParams, Evaluator, fillTogether, fit, seriesFlag, seriesOf, summarize, WINDOW_FIELDS, type ErrorSummary, type Evaluated, type FitResult, type HeldOut, type PointResult, type Series } from "../fit/fit.ts";
import { assignShards, ccsimVersion, pieceCost, PARTIAL_FORMAT, parseShardFlag, partialText, presetHash, resolveShard, type ShardSpec } from "../run/shard.ts";
import { withoutShardFlags } from "../command/args.ts";
import type { DeviceSpec } from "../ir/spec.ts";
import { ACCURACY, accuracyMarkdown, MANIFEST, measuredRanges, presetJson, publishedSeries, type Accuracy } from "../fit/files.ts";
import { PROJECT_ROOT } from "../run/paths.ts";
import { LogError, parseConsoleLog, parseJsonReport } from "../fit/log.ts";
import { parseSize } from "../ir/sizes.ts";
import { defaultJobs } from "../run/parallel.ts";
import { asCommand } from "./entry.ts";
import { readTextFile } from "../scenario/text-file.ts";

const fmtSummary = (s: ErrorSummary) => (s.points === 0 ? "no points (one series: none to hold out)" : s.points === s.failed ? `${s.points} points, all failed` : fmtRan(s));
const fmtRan = (s: ErrorSummary) => `${s.points} points, ${s.within10} within ±10 %, ${s.within25} within ±25 %, ${s.failed} failed, geometric-mean error factor ${s.geomeanErrorFactor.toFixed(3)}, worst ${(100 * s.worst).toFixed(1)} %`;

function pointLines(series: readonly Series[], ev: readonly Evaluated[]): string[] {
  const lines: string[] = [];
  for (const s of series) {
    const ps = ev.filter((e) => e.series === s.id);
    if (ps.length === 0) continue;
    lines.push(`${s.id} (${s.era} runtime, on ${s.instance}): ${s.command}`);
    lines.push(`  ${"size(B)".padStart(10)}  ${"published(us)".padStart(13)}  ${"simulated(us)".padStart(13)}  ${"sim/pub".padStart(7)}  algorithm`);
    for (const p of ps) {
      const r = p.run;
      const alg = r ? `${r.algorithm}${p.publishedAlgorithm ? ` (published: ${p.publishedAlgorithm})` : ""}` : `error: ${p.error}`;
      lines.push(`  ${String(p.bytes).padStart(10)}  ${p.publishedUs.toFixed(2).padStart(13)}  ${(r ? r.timeUs.toFixed(2) : "-").padStart(13)}  ${(r ? (r.timeUs / p.publishedUs).toFixed(2) : "-").padStart(7)}  ${alg}`);
    }
  }
  return lines;
}

function movedLines(r: FitResult): string[] {
  return r.moved.map((m) => `  ${m.field}: ${m.from} -> ${m.to}`);
}

/** Write a file whole or not at all, through links (src/cli/write.ts). */
function writeWhole(file: string, text: string): void {
  writeFile(file, text, (m) => new LogError(file, 0, m));
}

const HELP = `ccsim calibrate: measured nccom-test tables against the simulator, and fits of the presets to them

usage: npm run calibrate -- [--json] [--max-bytes SIZE] [--series ID]... [--fit] [--cross-validate] [--write-accuracy]
       npm run calibrate -- --from FILE... [--command "nccom-test ..."] [--instance NAME|FILE.json] --out FILE.json
                            [--max-bytes SIZE] [--rounds N]

Without --from: the published tables of calibration/published.json (calibration/logs/, verbatim),
each run exactly as typed (npm run nccom with its command line) on the preset as it ships: per
point published and simulated time, their ratio and the algorithm; then per preset the points
within ±10 % and ±25 % (a factor of 1.1 or 1.25 either way: ±25 % is 0.8 to 1.25 of the published
time) and the geometric-mean error factor exp(mean |ln(simulated / published)|).
  --max-bytes SIZE   skip larger points
  --series ID        only this series (a log's file name without .log); repeatable
  --fit              fit each preset's free parameters on its series from the shipped preset and
                     print what moved, with the error before and after (writes nothing)
  --cross-validate   per preset, refit with each series held out in turn (its fixed costs in closed
                     form, those no other series exercises at 0; its device parameters as shipped
                     unless --cv-rounds) and print the held-out error per series and overall,
                     beside the in-sample figure
  --write            with --fit: write each fitted preset over its file in devices/
  --cv-rounds N      device-search rounds of each held-out refit (default 0: the held-out refits move the
                     fixed costs only, from the device parameters of the preset or the fit)
  -j, --jobs N       threads a trial's points run on (default: this machine's cores; at most 4 a core)
  --params F,F       with --fit or --from: search only these device parameters (e.g. ring.defaultChannels)
  --keep-programs SIZE  with --fit, --from or --cv-rounds N: keep up to SIZE of compiled programs'
                     descriptor rings (default 1G; 0: none) to run the trials without recompiling: the composer reads
                     no rate, latency or cost, so a trial that moves only those runs the points'
                     programs again (a program not kept compiles each trial, and runs streamed where it
                     is bigger than the budget left; a full budget lets go of the programs no trial has
                     used for longest; the budget holds for one preset's fit at a time)
  --no-fastforward   every point runs every event (by default a point skips whole periods once its
                     state repeats: the same picoseconds; npm run sim -- --help)
  --write-accuracy   with --cross-validate: write calibration/accuracy.json (the note under every
                     table) and the README's "How accurate are the estimates" section
  --shard I/N|auto --out F  run shard I of N of the points (with or without --cross-validate; not --fit,
                     whose trials follow one another) and write them to F; npm run merge -- F... prints
                     the whole run (README: Beyond one machine)

--from FILE...: fit a preset to your own measurements. FILE is an nccom-test console log (its
command line first, nccom-test <op> -r N ..., then the table; either era: integer time(us) and
GiB/s, or time:avg(us) and GB/s), or a --report-to-json-file report with --command "..." (the
command that wrote it). Variables a command line sets before nccom-test are read as npm run
nccom reads the environment (NEURON_RT_DBG_CC_DMA_PACKET_SIZE=4096 nccom-test ...). The fit starts from --instance (default trn1; a name or a preset file),
moves its fixed costs (topsp.launchPs, host.*) and device parameters (rates, latencies, channel
and engine counts) within bounds, and writes the complete preset to --out (its name is the file's)
with a source note on every moved field; prints the error before and after, and cross-validated
when there are two series or more. A log that does not read is refused (file, line, value), and
nothing is written; so is a log whose command runs on another preset (its --lnc) and a fit none
of whose points runs (exit 1, the first failure said).
  --rounds N         coordinate-search rounds over the device parameters, each halving the step
                     (default 6: factors of 2^(1/2) down to 2^(1/64); 0: fixed costs only)
`;

interface Opts {
  json: boolean;
  fit: boolean;
  cv: boolean;
  writeAccuracy: boolean;
  maxBytes: number;
  only: string[];
  from: string[];
  command: string | undefined;
  instance: string;
  out: string | undefined;
  rounds: number;
  cvRounds: number;
  write: boolean;
  jobs: number;
  params: string[] | undefined;
  /** --keep-programs SIZE: descriptor rings a fit keeps to run its trials without recompiling. */
  keepPrograms: number;
  /** --no-fastforward: every point runs every event (no period skipped once its state repeats). */
  noFastForward: boolean;
  /** --shard I/N | auto (--shards N): run one shard of the points, write them to --out. */
  shard: ShardSpec | "auto" | undefined;
  shards: number | undefined;
}

/** Descriptor rings a fit keeps by default (`--keep-programs`): the published points' are 1.25 GiB in all, the 1 GiB two-node point's 570 MiB of it. */
const KEEP_PROGRAMS = 2 ** 30;

function parse(argv: readonly string[]): Opts | "help" {
  const o: Opts = { json: false, fit: false, cv: false, writeAccuracy: false, maxBytes: Number.MAX_SAFE_INTEGER, only: [], from: [], command: undefined, instance: "trn1", out: undefined, rounds: 6, cvRounds: 0, write: false, jobs: defaultJobs(), params: undefined, keepPrograms: KEEP_PROGRAMS, noFastForward: false, shard: undefined, shards: undefined };
  for (let i = 0; i < argv.length; i++) {
    const t = argv[i]!;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${t} needs a value`);
      return v;
    };
    if (t === "-h" || t === "--help") return "help";
    else if (t === "--json") o.json = true;
    else if (t === "--fit") o.fit = true;
    else if (t === "--cross-validate") o.cv = true;
    else if (t === "--write-accuracy") o.writeAccuracy = true;
    else if (t === "--write") o.write = true;
    else if (t === "--jobs" || t === "-j") {
      const v = value();
      o.jobs = Number(v);
      if (!Number.isInteger(o.jobs) || o.jobs < 1 || o.jobs > 256) throw new Error(`${t} ${v}: a whole number 1 ... 256`);
    }
    else if (t === "--params") o.params = value().split(",");
    else if (t === "--max-bytes") o.maxBytes = parseSize(value(), t);
    else if (t === "--keep-programs") {
      const v = value();
      o.keepPrograms = v === "0" ? 0 : parseSize(v, t);
    }
    else if (t === "--no-fastforward") o.noFastForward = true;
    else if (t === "--series") o.only.push(value());
    else if (t === "--command") o.command = value();
    else if (t === "--instance") o.instance = value();
    else if (t === "--out") o.out = value();
    else if (t === "--shard") o.shard = parseShardFlag(value(), t);
    else if (t === "--shards") {
      const v = value();
      o.shards = Number(v);
      if (!Number.isInteger(o.shards) || o.shards < 1) throw new Error(`--shards ${v}: a whole number from 1`);
    }
    else if (t === "--cv-rounds") {
      const v = value();
      o.cvRounds = Number(v);
      if (!Number.isInteger(o.cvRounds) || o.cvRounds < 0 || o.cvRounds > 20) throw new Error(`--cv-rounds ${v}: a whole number 0 ... 20`);
    } else if (t === "--rounds") {
      const v = value();
      o.rounds = Number(v);
      if (!Number.isInteger(o.rounds) || o.rounds < 0 || o.rounds > 20) throw new Error(`--rounds ${v}: a whole number 0 ... 20`);
    } else if (t === "--from") {
      o.from.push(value());
      while (i + 1 < argv.length && !argv[i + 1]!.startsWith("--")) o.from.push(argv[++i]!);
    } else throw new Error(`unknown option ${t}`);
  }
  if (o.from.length > 0 && o.out === undefined) throw new Error("--from needs --out FILE.json (where the fitted preset goes)");
  if (o.shard !== undefined) {
    // A fit's trials follow one another: only the points of a run (and a cross-validation that refits fixed costs alone) split.
    if (o.from.length > 0 || o.fit || o.write || o.cvRounds > 0) throw new Error("--shard splits the points of a plain or cross-validated run (--cv-rounds 0): a fit's trials follow one another");
    if (o.out === undefined) throw new Error("--shard writes its points to a partial file: give --out FILE (then npm run merge -- FILE...)");
  }
  if (o.shard === undefined && o.shards !== undefined) throw new Error("--shards N goes with --shard auto");
  if (o.out !== undefined && o.from.length === 0 && o.shard === undefined) throw new Error("--out goes with --from FILE... (or --shard)");
  if (o.writeAccuracy && !o.cv) throw new Error("--write-accuracy goes with --cross-validate");
  if (o.write && !o.fit) throw new Error("--write goes with --fit");
  const known = ["dma.engineBytesPerSecond", "link.bytesPerSecond", "link.latencyPs", "ring.defaultChannels", "collectives.meshFolds", "collectives.permuteChannels", "network.bytesPerSecond", "network.messageCostPs", ...WINDOW_FIELDS];
  const params = o.params ?? [];
  if (params.some((p) => p === "")) throw new Error(`--params "${params.join(",")}": an empty parameter name (parameters are separated by single commas)`);
  for (const p of params) if (!known.includes(p)) throw new Error(`--params ${p}: not a device parameter the fit moves (${known.join(", ")})`);
  const twice = params.find((p, k) => params.indexOf(p) !== k);
  if (twice !== undefined) throw new Error(`--params ${twice} given twice`);
  return o;
}

/** The first trial's wall-clock time and the range of the later ones' (wall-clock figures, like the total beside them). */
function trialTimes(ev: Evaluator): string {
  const ms = ev.trialMs;
  if (ms.length < 2) return "";
  const later = ms.slice(1);
  const s = (x: number) => (x / 1000).toFixed(2);
  return `: the first ${s(ms[0]!)} s${ev.firstShared ? " (with the other presets' points)" : ""}, the ${later.length} after it ${s(Math.min(...later))}-${s(Math.max(...later))} s each`;
}

/** Progress: trials, the best error so far; a line redrawn on a terminal, else one a minute (a batch job's log). */
function progress(err: (s: string) => void, what: string): ((best: number, trials: number, planned: number) => void) | undefined {
  const tty = process.stderr.isTTY === true;
  const t0 = Date.now();
  let last = t0;
  let first: number | undefined;
  return (best, trials, planned) => {
    first ??= trials;
    const s = (Date.now() - t0) / 1000;
    const done = trials - first + 1;
    const left = Math.max(0, planned - trials);
    const line = `${what}: ${trials} of about ${planned} trials, best sum of squared log errors ${best.toFixed(4)}, ${s.toFixed(0)} s, about ${((s / done) * left).toFixed(0)} s left`;
    if (tty) err(`\r${line} `);
    else if (Date.now() - last >= 60_000) {
      last = Date.now();
      err(`${line}\n`);
    }
  };
}

export function main(argv: readonly string[], out: (s: string) => void, err: (s: string) => void, merged?: { readonly results: readonly unknown[]; readonly preset: string }, env: Readonly<Record<string, string | undefined>> = process.env): number {
  let o: Opts | "help";
  try {
    o = parse(argv);
  } catch (e) {
    err(`calibrate: ${(e as Error).message}\n(try --help)\n`);
    return 1;
  }
  if (o === "help") {
    out(HELP);
    return 0;
  }
  try {
    if (o.from.length > 0) return fromLogs(o, out, err);
    const all = publishedSeries();
    const unknown = o.only.filter((id) => !all.some((s) => s.id === id));
    if (unknown.length > 0) {
      err(`calibrate: no series ${unknown.join(", ")} (series: ${all.map((s) => s.id).join(", ")})\n`);
      return 1;
    }
    const series = (o.only.length > 0 ? all.filter((s) => o.only.includes(s.id)) : all).filter((s) => s.points.some((p) => p.bytes <= o.maxBytes));
    if (series.length === 0) {
      err(`calibrate: no published point is at most --max-bytes ${o.maxBytes} B: nothing to run\n`);
      return 1;
    }
    const instances = [...new Set(series.map((s) => s.instance))];
    const specs = new Map(instances.map((inst) => [inst, loadDevice(inst)]));
    const hash = presetHash([...specs]);
    if (o.shard !== undefined) return runShard(o, resolveShard(o.shard, o.shards, env), argv, series, specs, hash, err);
    if (merged && merged.preset !== hash) {
      err(`calibrate: the presets are not those the shards ran on (content hash ${hash}, the partials' ${merged.preset}): run the shards again\n`);
      return 1;
    }
    // A merge's points were all run by its shards: every Evaluator finds them.
    const preload = merged && new Map((merged.results as { key: string; result: PointResult }[]).map((r) => [r.key, r.result]));
    const report: Record<string, unknown> = {};
    const acc: Record<string, Accuracy[string]> = {};
    const lines: string[] = [];
    // (A fit's trials, and held-out refits that search, run the points again: their programs are kept.)
    const keep = o.fit || o.cvRounds > 0 ? o.keepPrograms : 0;
    const evs = new Map(instances.map((inst) => [inst, new Evaluator(series.filter((s) => s.instance === inst), o.maxBytes, o.jobs, undefined, preload, keep, o.noFastForward)]));
    // Every preset's points as shipped in one batch, sharing the threads (where no programs are kept for trials).
    if (keep === 0) fillTogether(instances.map((inst) => ({ ev: evs.get(inst)!, spec: specs.get(inst)! })), o.jobs, o.noFastForward);
    for (const inst of instances) {
      const mine = series.filter((s) => s.instance === inst);
      const spec = specs.get(inst)!;
      const ev = evs.get(inst)!;
      const shipped = ev.run(spec);
      lines.push(...pointLines(mine, shipped));
      const sm = summarize(shipped);
      lines.push(`${inst} as shipped: ${fmtSummary(sm)}`);
      report[inst] = { points: shipped, summary: sm };
      if (o.fit) {
        const t0 = Date.now();
        const params = o.params && deviceParams(spec, mine).filter((p) => o.params!.includes(p.field));
        const r = fit(spec, mine, { rounds: o.rounds, evaluator: ev, progress: progress(err, `fit ${inst}`), ...(params ? { params } : {}) });
        if (o.write) {
          const file = presetFile(inst);
          writeWhole(file, presetJson(file, r, inst, `npm run calibrate -- --fit on ${mine.map((s) => s.id).join(", ")} (least squares on log time over ${r.after.points} points)`));
          lines.push(`wrote ${file}`);
        }
        if (process.stderr.isTTY) err("\n");
        lines.push(`${inst} fitted on ${mine.map((s) => s.id).join(", ")} (${r.trials} trials, ${ev.pointsRun} points simulated, ${ev.pointsCompiled} of them compiled, ${((Date.now() - t0) / 1000).toFixed(1)} s${trialTimes(ev)}): before ${fmtSummary(r.before)}; after ${fmtSummary(r.after)}`, ...movedLines(r));
        (report[inst] as Record<string, unknown>)["fit"] = { moved: r.moved, before: r.before, after: r.after, trials: r.trials };
      }
      if (o.cv) {
        const t0 = Date.now();
        const held = crossValidate(spec, mine, { rounds: o.cvRounds, evaluator: ev, progress: progress(err, `cross-validate ${inst}`) });
        if (process.stderr.isTTY) err("\n");
        const allHeld = held.flatMap((h) => h.evaluated);
        lines.push(`${inst} cross-validated (${((Date.now() - t0) / 1000).toFixed(1)} s): held out ${fmtSummary(summarize(allHeld))}; in-sample ${fmtSummary(sm)}`);
        for (const h of held) lines.push(`  ${h.series}: held out ${fmtSummary(h.summary)}; in-sample ${fmtSummary(summarize(shipped.filter((e) => e.series === h.series)))}`);
        (report[inst] as Record<string, unknown>)["heldOut"] = held.map((h: HeldOut) => ({ series: h.series, summary: h.summary }));
        acc[inst] = { series: mine.map((s) => s.id), inSample: sm, heldOut: summarize(allHeld), perSeries: held.map((h) => ({ series: h.series, inSample: summarize(shipped.filter((e) => e.series === h.series)), heldOut: h.summary })), covers: measuredRanges(mine, shipped) };
      }
      ev.close();
    }
    const allEv = Object.values(report).flatMap((r) => (r as { points: Evaluated[] }).points);
    lines.push(`all: ${fmtSummary(summarize(allEv))}`);
    if (o.writeAccuracy) {
      writeWhole(ACCURACY, JSON.stringify(acc, null, 2) + "\n");
      const readme = resolve(PROJECT_ROOT, "README.md");
      const text = readFileSync(readme, "utf8");
      const begin = "<!-- accuracy:begin -->";
      const end = "<!-- accuracy:end -->";
      if (text.includes(begin) && text.includes(end)) writeWhole(readme, text.slice(0, text.indexOf(begin) + begin.length) + "\n" + accuracyMarkdown(acc) + "\n" + text.slice(text.indexOf(end)));
      lines.push(`wrote ${ACCURACY} and README.md's accuracy section`);
    }
    out(o.json ? JSON.stringify(report, null, 2) + "\n" : lines.join("\n") + "\n");
    return 0;
  } catch (e) {
    if (e instanceof LogError) {
      err(`calibrate: ${e.message}\n`);
      return 1;
    }
    if (e instanceof CcsimError) {
      err(`calibrate: ${e.render()}\n`);
      return 1;
    }
    throw e;
  }
}

/**
 * One shard of a calibration run: the points of every series (in the run's order) assigned by their
 * cost (bytes over ranks), run on their presets, and written with their cache keys to --out.
 */
function runShard(o: Opts, shard: ShardSpec, argv: readonly string[], series: readonly Series[], specs: ReadonlyMap<string, DeviceSpec>, hash: string, err: (s: string) => void): number {
  refuseOverwrite([["--out", o.out]], [["the manifest of published series", MANIFEST], ...series.map((s) => ["a published log", s.file] as const)], (m) => new LogError(o.out!, 0, m));
  const t0 = Date.now();
  const groups = [...specs.keys()].map((inst) => ({ inst, mine: series.filter((s) => s.instance === inst) }));
  const costs = groups.flatMap(({ mine }) => mine.flatMap((s) => s.points.filter((p) => p.bytes <= o.maxBytes).map((p) => pieceCost(p.bytes, seriesFlag(s, ["-r", "--nworkers"])))));
  const owner = assignShards(costs, shard.count);
  const pieces: { index: number; result: unknown }[] = [];
  let offset = 0;
  for (const { inst, mine } of groups) {
    const ev = new Evaluator(mine, o.maxBytes, o.jobs, undefined, undefined, 0, o.noFastForward);
    const at = offset;
    for (const x of ev.prime(specs.get(inst)!, (k) => owner[at + k] === shard.index)) pieces.push({ index: at + x.index, result: { key: x.key, result: x.result } });
    offset += mine.reduce((n, s) => n + s.points.filter((p) => p.bytes <= o.maxBytes).length, 0);
  }
  writeWhole(o.out!, partialText({ format: PARTIAL_FORMAT, tool: "calibrate", argv: withoutShardFlags(argv), version: ccsimVersion(), preset: hash, shard, total: costs.length, pieces }));
  err(`calibrate: shard ${shard.index}/${shard.count}: ${pieces.length} of ${costs.length} points run, ${((Date.now() - t0) / 1000).toFixed(1)} s, written to ${o.out} (npm run merge -- every shard's file)\n`);
  return 0;
}

/** The first point that did not run, and why (a fit whose points fail says so). */
function firstFailure(ev: readonly Evaluated[]): string[] {
  const f = ev.find((e) => !e.run);
  return f ? [`  first failed point: ${f.series} ${f.bytes} B: ${f.error ?? "no result"}`] : [];
}

/** --from: read the user's logs, fit from --instance, write the preset to --out. */
function fromLogs(o: Opts, out: (s: string) => void, err: (s: string) => void): number {
  const outFile = o.out!;
  if (!outFile.endsWith(".json")) throw new LogError(outFile, 0, "--out must name a .json file (the preset's name is its file name)");
  const name = basename(outFile, ".json");
  if (!/^[A-Za-z0-9][A-Za-z0-9_-]*$/.test(name)) throw new LogError(outFile, 0, "the preset's file name must be letters, digits, '-', '_' before .json");
  const where = resolveInstance(o.instance, DEFAULT_DEVICES_DIR);
  const start = loadDevice(where.instance, where.dir);
  const startFile = presetFile(where.instance, where.dir);
  // (Before a log is read or a trial run: the fitted preset goes over none of them.)
  refuseOverwrite([["--out", outFile]], [...o.from.map((f) => ["a --from file", f] as const), ["the preset the fit starts from", startFile]], (m) => new LogError(outFile, 0, m));
  const series: Series[] = [];
  for (const f of o.from) {
    let text: string;
    try {
      text = readTextFile(f);
    } catch (e) {
      throw new LogError(f, 0, `cannot read: ${(e as Error).message}`);
    }
    const log = f.endsWith(".json") ? parseJsonReport(f, text, o.command ?? (() => { throw new LogError(f, 0, 'a JSON report needs --command "nccom-test ..." (the command that wrote it)'); })()) : parseConsoleLog(f, text);
    series.push(seriesOf(log, where.instance, basename(f).replace(/\.(log|txt|json)$/, ""), where.dir));
  }
  const eras = new Set(series.map((s) => s.era));
  if (eras.size > 1) throw new LogError(o.from.join(", "), 0, "logs of both runtime eras (integer time(us) and time:avg(us)): one preset models one runtime; fit each era on its own");
  if (series.every((s) => s.points.every((p) => p.bytes > o.maxBytes))) throw new LogError(o.from.join(", "), 0, `no point is at most --max-bytes ${o.maxBytes} B: nothing to fit`);
  const t0 = Date.now();
  const ev = new Evaluator(series, o.maxBytes, o.jobs, undefined, undefined, o.keepPrograms, o.noFastForward);
  // Logs may come from another runtime than the seed's: its selection windows are free too.
  const all = deviceParams(start, series, { windows: true });
  const params = o.params ? all.filter((p) => o.params!.includes(p.field)) : all;
  const r = fit(start, series, { rounds: o.rounds, evaluator: ev, progress: progress(err, "fit"), params });
  if (process.stderr.isTTY) err("\n");
  const lines = [`fitted ${name} from ${where.instance} on ${series.map((s) => s.id).join(", ")} (${r.trials} trials, ${ev.pointsRun} points simulated, ${ev.pointsCompiled} of them compiled, ${((Date.now() - t0) / 1000).toFixed(1)} s${trialTimes(ev)})`, `  before: ${fmtSummary(r.before)}`, `  after:  ${fmtSummary(r.after)}`, ...firstFailure(r.evaluated), ...movedLines(r)];
  if (series.length > 1) {
    // Held out: each series left out, the others refit from the fit's device parameters (fixed costs
    // in closed form; --cv-rounds searches the device parameters again too).
    const held = crossValidate(o.cvRounds > 0 ? start : r.spec, series, { rounds: o.cvRounds, evaluator: ev, params });
    lines.push(`  held out: ${fmtSummary(summarize(held.flatMap((h) => h.evaluated)))}`);
    for (const h of held) lines.push(`    ${h.series}: ${fmtSummary(h.summary)}`);
  }
  ev.close();
  if (r.after.points > 0 && r.after.failed === r.after.points) {
    // (No point ran on any trial: the fit moved nothing it could measure.)
    out(lines.join("\n") + "\n");
    err(`calibrate: no point of ${o.from.join(", ")} ran on ${where.instance} (the first failure above): nothing fitted, ${outFile} not written\n`);
    return 1;
  }
  const note = `npm run calibrate -- --from ${o.from.map((f) => basename(f)).join(" ")} --instance ${where.instance} (least squares on log time over ${r.after.points} points)`;
  const text = presetJson(startFile, r, name, note);
  writeWhole(outFile, text);
  lines.push(`wrote ${outFile}`);
  out(lines.join("\n") + "\n");
  return 0;
}

asCommand(import.meta.url, main);
