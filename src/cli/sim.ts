// ccsim command line: npm run sim -- <scenario.json> [options]
import { CcsimError, CompileError, SimError } from "../ir/errors.ts";
import { withLaunch, type DeviceSpec, type OpName, type Scenario } from "../ir/spec.ts";
import { describeFolding, explainScenario } from "../enc/compile.ts";
import { accuracyNote, formatConcurrent, formatJson, formatSweepTable, formatTable, nccomJson, type ConcurrentReport, type ResultRow, type RunShape } from "../report/table.ts";
import { plotSvg, type PlotSeries } from "../report/plot.ts";
import { formatHang, GIVE_UP_EVENTS, type RunProgress, type SteadyReport, type Violation } from "../../sim/index.ts";
import { PACKET_VARIABLE, packetVariable, parseArgs, UsageError, withoutShardFlags, type Args } from "../command/args.ts";
import { ccsimVersion, PARTIAL_FORMAT, partialText, presetHash, resolveShard, type ShardSpec } from "../run/shard.ts";
import type { SweepTaskResult } from "../run/sweep-task.ts";
import { refuseOverwrite, writeWhole } from "./write.ts";
import { differsFromShipped, loadAccuracy, loadDeviceWith, loadScenarioSource, presetFile, resolveInstance, setsText } from "../run/load.ts";
import { mismatchText, runScenario, type CheckMismatch, type OpOutcome, type PipelineHooks } from "../run/pipeline.ts";
import { describeFixedCost } from "../run/fixed-cost.ts";
import { explainJson, explainText } from "./explain.ts";
import { formatStats } from "./stats.ts";
import { runSweep } from "../run/sweep.ts";
import { maxThreads } from "../run/parallel.ts";
import { newCommandLog, stderrLog } from "../run/stderr-log.ts";
import { parseSource, sweepSource, withOverrides, type ScenarioSource } from "../run/overrides.ts";
import { TraceCollector } from "./trace-writer.ts";
import { asCommand } from "./entry.ts";

export const EXIT = { OK: 0, BAD_INPUT: 1, INTERNAL: 2, CHECK_FAILED: 3, HANG: 4 } as const;

const HELP = `ccsim: compile Neuron collectives to device programs and run the bytes on a simulated machine

usage: npm run sim -- <scenario.json> [options]
       npm run sim -- <scenario.json> -b MIN -e MAX [-f FACTOR | -i STEP] [sweep options]

Each op of the scenario is composed for the scenario's ranks, emitted as a program image
(spad_ctrl / cc_op_entry streams, UDMA descriptor rings, TopSP channel configs), executed on the
simulated devices of devices/<instance>.json, and checked against a reference collective.

options:
  --json               print {"scenario", "results": [...]} instead of the table
  --explain            show, per op, the comm-init family decision, all six enc_can_post_* gate
                       verdicts (with the reason for each no), the resolved algorithm and its
                       printed name, the metaring type, channels and slice sizes (JSON: "explain")
  --check MODE         override the scenario's check mode: values (bit for bit against the
                       reference; symbolic where the payload does not fit in memory), symbolic
                       (which ranks' input ranges reach each output range, each once; no payload
                       bytes kept), none (timing only). values and symbolic also detect races:
                       a read or write no semaphore orders after the write it depends on
  --races on|off       override the scenario's race detection (on by default; its shadow memory
                       holds about one piece per packet-sized range a run touches, its vector
                       clocks an entry per DMA queue and proxy in each queue, core and semaphore:
                       an op whose pieces and clocks would need more than half the JavaScript heap
                       runs without it, warned)
  --seed N             override the scenario's seed (input values)
  -r, --nworkers N     run on N ranks (one replica group of all of them)
  --instance P         run on preset P instead of the scenario's: a name in --devices, or a preset
                       file (FILE.json)
  --stats              after the results: per-link bytes and busy fraction, the busiest link,
                       per-engine busy fraction, per-device HBM bytes
  --trace FILE         write a Chrome / Perfetto trace (open in ui.perfetto.dev): TopSP cores
                       (cc_op entries, waits), DMA queues (packets), link directions, semaphores
  --trace-limit N      the most trace events kept (default 500000: about 60 MB of file and 0.5 GB
                       of memory; a 1 GiB ring8 all-reduce records about 5 million): later ones
                       are left out, said on stderr and in the file's otherData
  --devices DIR        directory of device presets (default: the project's devices/)
  --launch-us US       the runtime's fixed cost per collective in microseconds (the preset's
                       topsp.launchPs otherwise): every TopSP starts that long after the run, so
                       each op's time moves by the difference. It depends on the runtime version
                       (1 us to 146 us on trn1's published tables; docs/device-model.md §6):
                       nccom-test's time at its smallest size minus the simulated one measures it
  --cc-dma-packet N[,N...]  the runtime's CC DMA packet size in bytes (64 to 65536), one for every
                       CC stream or one per stream, instead of the scenario's ccDmaPacketBytes
                       (default 64 KiB): copies are cut at it, CCE packets no larger; an engine
                       switches queues between packets, so a stream of smaller ones gets less of it
  --set FIELD=VALUE    change a field of the run's preset (repeatable, applied in order): its dotted
                       path in the preset file (--set link.bytesPerSecond=2e11, --set
                       dma.engineBytesPerSecond=4e10), the value as JSON, else as text; validated as
                       the file is. The accuracy note then says the shipped preset's calibration
                       does not carry over (what if the links were twice as fast?)
  --no-fold            simulate every pod of a timing-only run (by default a program of several
                       nodes — pods on UltraServers — whose pods run alike programs simulates pod 0
                       alone, the same times; --explain says which ran and why; --stats then
                       lists pod 0's links, engines and HBM, which stand for every pod's)
  --no-fastforward     run every event of a timing-only run (by default, once the whole machine's
                       state repeats — every pending event, booking, queue, core and semaphore,
                       times from now — and the program's bytes ahead repeat with it, whole
                       periods are skipped: the same picoseconds, events and counters; --explain
                       says how many)
  --log-level LEVEL    pino log level on stderr: fatal, error, warn (default), info, debug, trace, silent
  -h, --help           this text

sweep (nccom-test style; sizes take units: 64K, 1MB, 2gb; binary multiples):
  -b, --minbytes SIZE  smallest size (default 32M)
  -e, --maxbytes SIZE  largest size (default 32M, or MIN if larger)
  -f, --stepfactor N   multiply the size by N each step (default 2)
  -i, --stepbytes SIZE add SIZE each step
  --op NAME            sweep this op (default: each op of the scenario)
  -d, --datatype TYPE  element type (default: the scenario op's)
  --show-algorithm     add the algorithm column
  --report-to-json-file FILE  write nccom-test's JSON report ({"results": [...]})
  -j, --jobs N         threads (default: this machine's cores; at most 4 a core): the sizes of a sweep run on this one
                       and N - 1 worker threads, the biggest first (the workers start at once when a
                       size moves 2 GiB or more over its ranks, else once this thread has run sizes
                       for 0.7 s and those left would take a second more); a single run of a big
                       program (8 M descriptors or more) has its descriptor rings composed on a
                       second thread as it runs. The output is the same as with --jobs 1 (one thread)
  --plot FILE          draw busbw and time against size (SVG, log axes, one line per op/algorithm)
  --shard I/N|auto --out FILE  run shard I of N of the sizes and write a partial (auto: a Slurm job
                       array or a Kubernetes Indexed Job, with --shards N); npm run merge -- FILE...
                       prints what the whole sweep prints (README: Beyond one machine)
  A sweep is timing only unless --check is given (values: checked where they fit, symbolic above).

output columns: size(B) count(elems) type time(us) algbw(GB/s) busbw(GB/s) algorithm check
  time is simulated time in microseconds; GB = 10^9 bytes; busbw = algbw x 2(n-1)/n (all-reduce)
  or (n-1)/n (all-gather, reduce-scatter); size(B) is the all-reduce buffer, the whole gathered
  output, or the whole reduce-scatter input.

exit codes: 0 all checks pass, 1 bad input, 2 internal error, 3 a check failed, 4 the program hung
`;

/** Write `text` (a string, or pieces written one after another) to `file` whole or not at all (src/cli/write.ts). */
function writeAtomic(file: string, text: string | Iterable<string>): void {
  writeWhole(file, text, (m) => new UsageError(m));
}

/**
 * A sweep's progress on stderr: on a terminal, a line redrawn as sizes end; a shard under a
 * scheduler (no terminal) says where it is once a minute, so the job's log does.
 */
function progressOn(err: (s: string) => void, shard?: ShardSpec): ((done: number, total: number, events: number) => void) | undefined {
  if (process.stderr.isTTY) return (done, total, events) => err(`\rsweep: ${done}/${total} sizes, ${events} simulated events${done === total ? "\n" : ""}`);
  if (!shard) return undefined;
  const t0 = Date.now();
  let last = t0;
  return (done, total) => {
    if (Date.now() - last < 60_000 || done === total) return;
    last = Date.now();
    const s = (Date.now() - t0) / 1000;
    err(`sweep shard ${shard.index}/${shard.count}: ${done}/${total} sizes, ${s.toFixed(0)} s, about ${((s / done) * (total - done)).toFixed(0)} s left\n`);
  };
}

/**
 * How far a long run is, on stderr: on a terminal one line redrawn every second once an op has run
 * for two; otherwise (a batch job's log) one line a minute. It names the op, the share of its
 * descriptors run, the events and simulated time so far, and the time left at the rate so far.
 */
function runProgress(err: (s: string) => void, tty = process.stderr.isTTY === true): { report: (label: string, p: RunProgress) => void; done: () => void } {
  const firstSeen = new Map<string, number>();
  let lastLine = 0;
  let drawn = false;
  return {
    report: (label, p) => {
      const now = performance.now();
      // The first report comes a second into the op.
      const start = firstSeen.get(label) ?? (firstSeen.set(label, now - 1000), now - 1000);
      const elapsed = (now - start) / 1000;
      if (elapsed < 2 || (!tty && lastLine > 0 && now - lastLine < 60_000)) return;
      lastLine = now;
      const frac = p.descriptors > 0 ? Math.min(1, p.descriptorsRun / p.descriptors) : 0;
      const left = frac >= 0.005 ? `, about ${Math.ceil((elapsed * (1 - frac)) / frac)} s left` : "";
      const line = `${label}: ${(100 * frac).toFixed(1)} % of ${p.descriptors} descriptors run, ${p.events} events, ${(p.simPs / 1e6).toFixed(1)} us simulated, ${Math.round(elapsed)} s${left}`;
      err(tty ? `\r${line}\x1b[K` : `${line}\n`);
      drawn = tty;
    },
    done: () => {
      if (drawn) err("\n");
      drawn = false;
    },
  };
}

export function main(argv: readonly string[], out: (s: string) => void, err: (s: string) => void, hooks: PipelineHooks = {}, style: RunStyle = {}): number {
  let args: Args | "help";
  try {
    args = parseArgs(argv);
  } catch (e) {
    if (e instanceof UsageError) {
      err(`ccsim: ${e.message}\n(try --help)\n`);
      return EXIT.BAD_INPUT;
    }
    throw e;
  }
  if (args === "help") {
    out(HELP);
    return EXIT.OK;
  }
  const file = args.scenario;
  // (The runtime's variable is npm run nccom's and replay's: a scenario says its own packet.)
  const unread = style.env && packetVariable(style.env);
  if (unread && args.ccDmaPacketBytes === undefined) err(`ccsim: ${PACKET_VARIABLE} is not read by npm run sim: the scenario's ccDmaPacketBytes sets the packet, or --cc-dma-packet ${unread}\n`);
  return runSource(args, () => loadScenarioSource(file).source, out, err, hooks, { command: { tool: "sim", argv }, ...style, inputs: [["the scenario", file], ...(style.inputs ?? [])] });
}

/** How a run presents its sweep table. */
export interface RunStyle {
  /** nccom-test's newer time column, "time:avg(us)". */
  readonly timeHeader?: string;
  /** The sweep's "#" notes go to stderr (nccom-test's stdout is the table alone). */
  readonly notesToStderr?: boolean;
  /** nccom-test's -t / --stats percentile columns (p25, p50, ...) after the average. */
  readonly percentiles?: readonly string[];
  /** nccom-test's --show-input-output-size: total_input_size(B) and total_output_size(B) after the count. */
  readonly ioSizes?: boolean;
  /** Report long runs' progress on stderr (the command lines do; callers that capture stderr need not). */
  readonly progress?: boolean;
  /** The command as typed (its tool and arguments): what a shard's partial records for the merge. */
  readonly command?: { readonly tool: string; readonly argv: readonly string[] };
  /** The environment --shard auto reads (default: this process's). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** The runtime's variables the command read (nccom's), for a shard's partial: merge reads the command line with them. */
  readonly runtimeEnv?: Readonly<Record<string, string>>;
  /** A merge: every sweep point's result from the shards' partials, and the preset hash they ran on. */
  readonly merged?: { readonly results: readonly SweepTaskResult[]; readonly preset: string };
  /** Files the command reads (what, path) besides a preset file: no output is written over one. */
  readonly inputs?: readonly (readonly [string, string])[];
}

/**
 * Run a scenario source (a file, or one built from nccom-test flags) with the run flags of `args`:
 * overrides, sweep or single run, output, exit code. `args.scenario` names the source in messages.
 */
export function runSource(args: Args, source: () => ScenarioSource, out: (s: string) => void, err: (s: string) => void, hooks: PipelineHooks = {}, style: RunStyle = {}): number {
  newCommandLog();
  const log = stderrLog(args.logLevel);
  let scn: Scenario | undefined;
  let spec: DeviceSpec | undefined;
  try {
    // Flags change the scenario's JSON, validated again as the file is (errors name the flags).
    // --instance: a preset name, or a preset file (its folder becomes the presets folder).
    const where = args.instance === undefined ? undefined : resolveInstance(args.instance, args.devices);
    if (where) args = { ...args, devices: where.dir };
    const src = withOverrides(source(), { ranks: args.ranks, check: args.check, races: args.races, seed: args.seed, instance: where?.instance, ccDmaPacketBytes: args.ccDmaPacketBytes });
    scn = parseSource(args.sweep ? sweepSource(src) : src);
    spec = loadDeviceWith(scn.instance, args.devices, args.presetSets, args.scenario);
    // (Before anything runs: no output goes over a file the run reads, the preset included.)
    refuseOverwrite(
      [["--report-to-json-file", args.reportJson], ["--plot", args.plot], ["--trace", args.trace], ["--out", args.out]],
      [...(style.inputs ?? []), ["the preset the run is on", presetFile(scn.instance, args.devices)]],
      (m) => new UsageError(m),
    );
    // (Fields an edited copy of a shipped preset changed: its calibration is not the run's.)
    const changed = differsFromShipped(spec);
    if (args.launchPs !== undefined) spec = withLaunch(spec, args.launchPs);
    log.info({ scenario: scn.name, instance: spec.name, seed: scn.seed }, "loaded");
    const tracer = args.trace ? new TraceCollector(args.traceLimit) : undefined;
    const progress = style.progress ? runProgress(err) : { report: undefined, done: () => {} };
    const runHooks: PipelineHooks = { ...(progress.report ? { progress: progress.report } : {}), ...hooks, ...(tracer ? { trace: (label: string) => tracer.sink(label) } : {}), ...(args.noFold ? { unfolded: true } : {}), ...(args.noFastForward ? { noFastForward: true } : {}), ...(args.jobs > 1 ? { composeThread: {} } : {}) };
    let text: string;
    let failed: { row: { op: string; bytes: number; dtype: string }; mismatch: CheckMismatch }[];
    let statsText = "";
    let accuracyErr = "";
    /** Every op (or sweep size) that ran to the end. */
    let ran: readonly OpOutcome[] = [];
    let sweepErrors: CcsimError[] = [];
    let violated: { row: { op: string; bytes: number; dtype: string }; violations: readonly Violation[] }[] = [];
    if (args.sweep) {
      const shard = args.shard === undefined ? undefined : resolveShard(args.shard, args.shards, style.env ?? process.env);
      if (style.merged && style.merged.preset !== presetHash(spec)) throw new UsageError(`the preset ${spec.name} is not the one the shards ran on (its content hash is ${presetHash(spec)}, the partials' ${style.merged.preset}): run the shards again`);
      const pieces = shard ? { kind: "shard" as const, shard } : style.merged ? { kind: "merge" as const, ...style.merged } : undefined;
      if (args.jobs > maxThreads()) err(`${style.command?.tool === "nccom" ? "nccom" : "ccsim"}: --jobs ${args.jobs}: ${maxThreads()} threads at most on this machine (four a core: more would only share the cores)\n`);
      const res = runSweep(src, scn, spec, args, log, runHooks, progressOn(err, shard), pieces);
      progress.done();
      if (res.kind === "partial") {
        const command = style.command ?? { tool: "sim", argv: [] };
        const env = style.runtimeEnv && Object.keys(style.runtimeEnv).length > 0 ? { env: style.runtimeEnv } : {};
        writeAtomic(args.out!, partialText({ format: PARTIAL_FORMAT, tool: command.tool, argv: withoutShardFlags(command.argv), version: ccsimVersion(), preset: res.preset, shard: shard!, total: res.total, pieces: res.pieces, ...env }));
        err(`ccsim: shard ${shard!.index}/${shard!.count}: ${res.pieces.length} of ${res.total} sizes run, written to ${args.out} (npm run merge -- every shard's file)\n`);
        return EXIT.OK;
      }
      if (res.kind === "hang") {
        const what = res.streams ? `the streams' ops at once (${res.streams.map((o) => `stream ${o.stream}: ${o.op} ${o.bytes} B`).join(", ")})` : `${res.op.op} ${res.op.bytes} B`;
        err(`ccsim: ${what} of ${args.scenario} hung\n${formatHang(res.hang).join("\n")}\n`);
        return EXIT.HANG;
      }
      // A multistream sweep: each stream's rows, stream after stream (one block each).
      const blocks = res.points[0]?.streams ? res.points[0].streams.map((_, s) => res.points.map((p) => p.streams![s]!)) : [res.points.map((p) => p.row)];
      const rows = blocks.flat();
      ran = res.points.flatMap((p) => (p.outcome ? [p.outcome] : []));
      sweepErrors = res.points.flatMap((p) => (p.error ? [p.error] : []));
      const heading = [`${scn.name} on ${spec.name}: ${scn.replicaGroups[0]!.length} ranks per group`, ...(args.sweep.sizesDefaulted ? [`sizes: nccom-test's default, ${args.sweep.min} B (no -b / -e given; without --op, -d or a size flag the file's ops run at their own sizes)`] : []), ...res.notes];
      text = args.json ? formatJson(scn.name, rows) : blocks.map((b, s) => formatSweepTable(b, args.showAlgorithm, style.timeHeader, style.notesToStderr || s > 0 ? [] : heading, style.percentiles, style.ioSizes === true)).join("");
      // The accuracy note under the table (nccom's stdout is the table alone: its note goes to stderr).
      if (!args.json) {
        const note = accuracyNote(spec, loadAccuracy(), args.launchPs !== undefined, changed, shapesOf(scn, rows));
        if (style.notesToStderr) accuracyErr = note;
        else text += note;
      }
      if (style.notesToStderr && !args.json) for (const n of res.notes) err(`# ${n}\n`);
      // --explain: postOperation's reasoning for every size, before the table.
      // (The preset as loaded: the closure below does not see the narrowing of `spec`.)
      const device = spec;
      if (args.explain && !args.json) text = launchLine(device, args) + res.points.map((p) => `size ${p.row.bytes} B:\n${p.explain ? explainText(p.scenario, p.explain) : p.error instanceof CompileError ? refusedExplain(p.scenario, device) : ""}${foldLines(p.outcome ? [p.outcome] : [])}${p.outcome ? costLines([p.outcome]) : ""}`).join("") + "\n" + text;
      failed = res.points.flatMap((p) => (p.outcome?.mismatch ? [{ row: p.outcome.row, mismatch: p.outcome.mismatch }] : []));
      violated = res.points.flatMap((p) => (p.outcome && p.outcome.violations.length > 0 ? [{ row: p.outcome.row, violations: p.outcome.violations }] : []));
      if (args.stats) statsText = formatStats(res.points.flatMap((p) => (p.outcome ? [p.outcome] : [])));
      if (args.reportJson) writeAtomic(args.reportJson, nccomJson(rows));
      if (args.plot) {
        const series = new Map<string, PlotSeries["points"][number][]>();
        for (const r of rows) {
          const key = `${r.stream !== undefined ? `stream ${r.stream}: ` : ""}${r.op} ${r.dtype} (${r.algorithm})`;
          series.set(key, [...(series.get(key) ?? []), { bytes: r.bytes, busbwGBps: r.busbwGBps, timeUs: r.timeUs }]);
        }
        writeAtomic(args.plot, plotSvg(`${scn.name} on ${spec.name}, ${scn.replicaGroups[0]!.length} ranks`, [...series].map(([label, points]) => ({ label, points }))));
      }
    } else {
      const outcome = runScenario(scn, spec, log, runHooks);
      progress.done();
      if (outcome.kind === "hang") {
        // (op -1: each op ran alone; the program of them all at once hung.)
        const what = outcome.op >= 0 ? `op ${outcome.op} (${scn.ops[outcome.op]!.op})` : `the concurrent run of its ${scn.ops.length} ops (streams ${[...new Set(scn.ops.map((o) => o.stream))].join(", ")}; each op alone ran)`;
        err(`ccsim: ${what} of ${args.scenario} hung\n${formatHang(outcome.hang).join("\n")}\n`);
        return EXIT.HANG;
      }
      const rows = outcome.ops.map((o) => o.row);
      ran = outcome.ops;
      const c = outcome.concurrent;
      const concurrent: ConcurrentReport | undefined = c && {
        streams: c.streams,
        timeUs: c.timePs / 1e6,
        longestAloneUs: Math.max(...rows.map((r) => r.timeUs)),
        sumAloneUs: rows.reduce((a, r) => a + r.timeUs, 0),
        ops: scn.ops.map((o, k) => ({ op: o.op, stream: o.stream, endUs: c.opEndPs[k]! / 1e6 })),
        check: c.mismatch || c.violations.length > 0 ? "fail" : c.checked === "values" ? "pass" : "skipped",
      };
      if (args.json) text = formatJson(scn.name, rows, args.explain ? explainJson(outcome.explain, scn) : undefined, concurrent);
      else text = (args.explain ? launchLine(spec, args) + explainText(scn, outcome.explain) + foldLines(outcome.ops) + costLines(outcome.ops) + "\n" : "") + formatTable(rows) + (concurrent ? formatConcurrent(concurrent) : "") + accuracyNote(spec, loadAccuracy(), args.launchPs !== undefined, changed, shapesOf(scn, rows));
      failed = outcome.ops.flatMap((o) => (o.mismatch ? [{ row: o.row, mismatch: o.mismatch }] : []));
      violated = outcome.ops.flatMap((o) => (o.violations.length > 0 ? [{ row: o.row, violations: o.violations }] : []));
      if (c?.mismatch) failed.push({ row: { ...rows[c.mismatch.op]!, op: `${rows[c.mismatch.op]!.op} (run concurrently)` }, mismatch: c.mismatch.mismatch });
      if (c && c.violations.length > 0) violated.push({ row: { ...rows[0]!, op: "concurrent run" }, violations: c.violations });
      if (args.stats) statsText = formatStats(outcome.ops);
    }
    if (tracer) {
      const pods = Math.max(0, ...ran.map((o) => (o.folding?.folded ? o.folding.pods : 0)));
      if (pods > 0) tracer.folded = `the devices are pod 0's: a timing-only run of ${pods} alike pods simulated pod 0 for all (--no-fold traces every pod)`;
      writeAtomic(args.trace!, tracer.chunks());
      const cut = tracer.truncation();
      if (cut) err(`ccsim: --trace ${args.trace}: ${cut}\n`);
    }
    out(text + (statsText && !args.json ? "\n" + statsText : ""));
    if (accuracyErr) err(accuracyErr);
    if (statsText && args.json) err(statsText);
    for (const f of failed) {
      err(`ccsim: check failed for ${f.row.op} ${f.row.bytes} B ${f.row.dtype}: ${mismatchText(f.mismatch)}\n`);
    }
    for (const v of violated) for (const x of v.violations) err(`ccsim: check failed for ${v.row.op} ${v.row.bytes} B ${v.row.dtype}: ${x.kind}: ${x.message}\n`);
    // Sizes that failed were reported in their rows; the exit code says so at the end.
    // (Each distinct error once: a refusal usually holds at every size.)
    const seen = new Map<string, number>();
    for (const msg of sweepErrors.map((e) => e.render())) seen.set(msg, (seen.get(msg) ?? 0) + 1);
    for (const [msg, n] of seen) err(`ccsim: ${args.scenario}: ${msg}${n > 1 ? ` (${n} sweep points)` : ""}\n`);
    if (failed.length > 0 || violated.length > 0) return EXIT.CHECK_FAILED;
    if (sweepErrors.some((e) => e instanceof SimError)) return EXIT.INTERNAL;
    return sweepErrors.length > 0 ? EXIT.BAD_INPUT : EXIT.OK;
  } catch (e) {
    if (e instanceof UsageError) {
      err(`ccsim: ${e.message}\n`);
      return EXIT.BAD_INPUT;
    }
    if (e instanceof SimError) {
      err(`ccsim: internal error: the simulator rejected the emitted program: ${e.render()}\n`);
      return EXIT.INTERNAL;
    }
    if (e instanceof CcsimError) {
      // Show why the op went where it did, then the refusal.
      if (args.explain && scn && spec && e instanceof CompileError) err(refusedExplain(scn, spec));
      // Compile and encode errors come from the scenario's content: name its file.
      err(`ccsim: ${e.file === undefined ? `${args.scenario}: ` : ""}${e.render()}\n`);
      return EXIT.BAD_INPUT;
    }
    // (A merge's replay fails on results it cannot read: the merge says what that means.)
    if (style.merged) throw e;
    err(`ccsim: internal error: ${(e as Error).stack ?? String(e)}\n`);
    return EXIT.INTERNAL;
  }
}

asCommand(import.meta.url, (argv, out, err) => main(argv, out, err, {}, { progress: true, env: process.env }));

/**
 * --explain of a scenario the composer refused: how its ops went where they did, up to the
 * refusal (empty where the explanation itself needs what was refused: the error says enough).
 */
function refusedExplain(scn: Scenario, spec: DeviceSpec): string {
  try {
    return explainText(scn, explainScenario(scn, spec));
  } catch (e) {
    // (A bug in the explanation is not the user's refusal: it is an internal error.)
    if (!(e instanceof CcsimError)) throw e;
    return "";
  }
}

/**
 * --explain: for each op of several pods, whether one pod stood for all and why (see
 * src/encd/fold.ts); for each timing-only op, whether whole periods were skipped; for each checked
 * op, that it ran whole (the difference between a checked run's time and a timing-only run's).
 */
function foldLines(ops: readonly OpOutcome[]): string {
  return ops.map((o, i) => (o.folding ? `op ${i}: ${describeFolding(o.folding)}\n` : "") + (o.steady ? `op ${i}: ${describeSteady(o.steady)}\n` : "") + (o.checked !== "none" ? `op ${i}: ${checkedWhole(o.checked)}\n` : "")).join("");
}

/** Why a checked op simulates every device and every event. */
function checkedWhole(checked: "values" | "symbolic"): string {
  return `checked (${checked}): every device and every event simulated, each rank's data followed (folding alike pods into one, and skipping repeated periods, are for timing-only runs: --check none)`;
}

/** What skipping periods did in a run, in a line. */
function describeSteady(s: SteadyReport): string {
  // (A search stops because looking costs about an event per few numbers of state read.)
  const stopped = s.stoppedAt === undefined ? "" : `; the search stopped looking after ${s.stoppedAt} events, having run ${GIVE_UP_EVENTS / 2 ** 20} Mi events more than it skipped (the ranks of a wide ring, and channels that share a link, cross from one phase of a chunk to the next at different moments: the state comes back between those moments, but the program ahead does not repeat for long)`;
  if (s.marks === 0) return "no period looked for: the search compares the machine's state at the steps of the first core's first ring channel, which this run never stepped (a schedule on the mesh event tape: RDH, the mesh family, all-to-all, has no channel steps), so every event ran, as --no-fastforward runs them";
  if (s.periods === 0) return `no period skipped: the machine's state did not come back whole, with the program's bytes repeating, for a stretch worth skipping${stopped}; --no-fastforward runs the same`;
  return `steady state: ${s.periods} periods skipped in ${s.jumps} jump${s.jumps === 1 ? "" : "s"} (${(s.skippedPs / 1e6).toFixed(3)} us of simulated time, ${s.skippedEvents} events), the same picoseconds as running them${stopped} (--no-fastforward runs every event)`;
}

/** The rows that ran, as the accuracy note compares them with what the preset's tables measured. */
function shapesOf(scn: Scenario, rows: readonly ResultRow[]): RunShape[] {
  return rows.filter((r) => r.error === undefined).map((r) => ({ op: r.op as OpName, bytes: r.bytes, ranks: r.ranks, nodes: scn.nodes, algorithm: r.algorithm }));
}

/** --explain's first line: the fixed cost per collective every op of the run starts after, and where it comes from. */
function launchLine(spec: DeviceSpec, args: Args): string {
  const us = String(spec.topsp.launchPs / 1e6);
  // (--explain's first lines: the preset's fields a --set changed, then the fixed cost.)
  const sets = args.presetSets ? `preset: ${spec.name} with ${setsText(args.presetSets)} (--set)\n` : "";
  if (args.launchPs !== undefined) return `${sets}fixed cost per collective: ${us} us before the first entry (--launch-us: the whole of it, no host costs)\n`;
  return `${sets}fixed cost per collective: ${us} us before the first entry (${spec.name}'s topsp.launchPs; --launch-us sets the whole fixed cost), plus ${spec.name}'s host costs (each op's "fixed cost" line)\n`;
}

/** --explain: each op's fixed cost and its terms (docs/device-model.md §6, "Host costs"). */
function costLines(ops: readonly OpOutcome[]): string {
  return ops.map((o, i) => `op ${i}: fixed cost ${describeFixedCost(o.fixedCost)}\n`).join("");
}
