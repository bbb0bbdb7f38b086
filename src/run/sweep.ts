// Sweeps like nccom-test: one op (or each op of the scenario) over a range of sizes, or several streams at once; on this thread, worker threads or one shard.
import { UsageError, type CcsimError } from "../ir/errors.ts";
import type { Logger } from "pino";
import { dtypeSize } from "../ir/dtypes.ts";
import { opEntry } from "../ir/ops.ts";
import { groupsRanksLcm, type CheckMode, type DeviceSpec, type OpName, type OpSpec, type Scenario } from "../ir/spec.ts";
import { type OpOutcome, type PipelineHooks } from "./pipeline.ts";
import type { HangReport } from "../../sim/index.ts";
import type { Explanation } from "../enc/post.ts";
import { revive, runParallel, type ErrorData } from "./parallel.ts";
import { biggestFirst, runPoint, startWorkers, task, type SweepTask, type SweepTaskResult } from "./sweep-task.ts";
import type { ResultRow } from "../report/table.ts";
import type { Dtype } from "../ir/dtypes.ts";
import { sweepSizes } from "../ir/sizes.ts";
import { siblingUrl } from "./paths.ts";
import { streamPoints, streamsPoint, sweepPoint, type ScenarioSource } from "./overrides.ts";
import { valuesCheckFit } from "./budgets.ts";
import { assignShards, pieceCost, presetHash, type Pieces, type ShardResults, type ShardSpec } from "./shard.ts";


/** What a sweep is asked to run (a command line's flags: npm run sim's or nccom-test's). */
export interface SweepRequest {
  readonly sweep?: { readonly min: number; readonly max: number; readonly factor?: number | undefined; readonly step?: number | undefined } | undefined;
  /** The op to sweep (default: each op of the scenario) and its element type. */
  readonly op?: OpName | undefined;
  readonly dtype?: Dtype | undefined;
  readonly check?: CheckMode | undefined;
  /** Worker threads; 1 runs every point on this thread. */
  readonly jobs?: number | undefined;
  readonly logLevel: string;
}

export interface SweepPoint {
  /** The row (a failed size: its size, count and type, and the error). */
  readonly row: ResultRow;
  /** What the run did (absent when the size failed). */
  readonly outcome?: OpOutcome;
  /** Why the size failed: the error, which does not stop the sizes after it. */
  readonly error?: CcsimError;
  /** The point's scenario and postOperation's reasoning for it (for --explain). */
  readonly scenario: Scenario;
  readonly explain?: readonly Explanation[];
  /** How the outputs were checked (none: timing only, no payload kept). */
  readonly checked: CheckMode;
  /** A multistream sweep's point: one row per stream (each stream's block of the output). */
  readonly streams?: readonly ResultRow[];
}

export type SweepResult =
  | { readonly kind: "done"; readonly points: readonly SweepPoint[]; readonly notes: readonly string[] }
  | { readonly kind: "hang"; readonly op: OpSpec; readonly hang: HangReport; /** A multistream point: every stream's op, run at once. */ readonly streams?: readonly OpSpec[] };

const SWEEP_TASK = siblingUrl(import.meta.url, "./sweep-task.ts");

export { biggestFirst, startWorkers };

/**
 * An op's sizes in a sweep over groups of `n` ranks: each asked size in whole units of the op (an
 * element, times the ranks for an op whose size is one block a rank), rounded down, and those
 * below one unit left out; the notes say which (nccom-test's count column would show it).
 */
export function opSweepSizes(op: Pick<OpSpec, "op" | "dtype">, n: number, sweep: NonNullable<SweepRequest["sweep"]>): { sizes: number[]; unit: number; notes: string[] } {
  const blocked = opEntry(op.op).blocked;
  const unit = dtypeSize(op.dtype) * (blocked ? n : 1);
  const what = blocked ? `element size x ${n} ranks` : "one element";
  const asked = sweepSizes({ min: sweep.min, max: sweep.max, ...(sweep.factor !== undefined ? { factor: sweep.factor } : {}), ...(sweep.step !== undefined ? { step: sweep.step } : {}) });
  const notes: string[] = [];
  const rounded = asked.filter((s) => s >= unit && s % unit !== 0);
  if (rounded.length > 0) notes.push(`${op.op} ${op.dtype}: ${rounded.length} size(s) rounded down to whole ${unit} B (${what}): ${rounded.slice(0, 3).map((s) => `${s} -> ${Math.floor(s / unit) * unit}`).join(", ")}${rounded.length > 3 ? ", ..." : ""}`);
  const skipped = asked.filter((s) => s < unit).length;
  if (skipped) notes.push(`${op.op} ${op.dtype}: ${skipped} size(s) below ${unit} B (${what}) skipped`);
  return { sizes: [...new Set(asked.map((s) => Math.floor(s / unit) * unit))].filter((s) => s > 0), unit, notes };
}

/**
 * The sizes at which a source that splits each point into several ops (`splitOp`: coalesced ops)
 * gives every op some bytes; a note names those left out (a share rounds down to nothing, and an
 * op of no bytes is not an op).
 */
export function splitSizes(src: ScenarioSource, op: Pick<OpSpec, "op" | "dtype">, sizes: readonly number[]): { sizes: number[]; notes: string[] } {
  const split = src.splitOp;
  if (!split) return { sizes: [...sizes], notes: [] };
  const whole: number[] = [];
  const left: number[] = [];
  for (const bytes of sizes) (split({ op: op.op, dtype: op.dtype, bytes }, bytes).every((o) => typeof o["bytes"] === "number" && o["bytes"] > 0) ? whole : left).push(bytes);
  const notes = left.length === 0 ? [] : [`${op.op} ${op.dtype}: ${left.length} size(s) skipped, too small to split into the coalesced ops (a share rounds down to 0 B): ${left.slice(0, 3).join(", ")}${left.length > 3 ? ", ..." : ""} B`];
  return { sizes: whole, notes };
}

/**
 * Run a sweep of the scenario `scn` (parsed from `src`, overrides applied): every point is the
 * scenario with one op at one size, validated as a file is.
 */
export function runSweep(src: ScenarioSource, scn: Scenario, spec: DeviceSpec, args: SweepRequest, log: Logger, hooks: PipelineHooks, progress?: (done: number, total: number, events: number) => void): SweepResult;
export function runSweep(src: ScenarioSource, scn: Scenario, spec: DeviceSpec, args: SweepRequest, log: Logger, hooks: PipelineHooks, progress: ((done: number, total: number, events: number) => void) | undefined, pieces: Pieces<SweepTaskResult> | undefined): SweepResult | ShardResults<SweepTaskResult>;
export function runSweep(src: ScenarioSource, scn: Scenario, spec: DeviceSpec, args: SweepRequest, log: Logger, hooks: PipelineHooks, progress?: (done: number, total: number, events: number) => void, pieces?: Pieces<SweepTaskResult>): SweepResult | ShardResults<SweepTaskResult> {
  if (src.streams) return runStreams(src, spec, args, log, hooks, progress, pieces);
  const sweep = args.sweep!;
  // (An op swept by --op that needs pairs takes them from the scenario's op of its kind: a scenario without one has none to give.)
  if (args.op && opEntry(args.op).needs === "pairs" && !scn.ops.some((o) => o.op === args.op)) {
    throw new UsageError(`--op ${args.op}: ${src.file} has no ${args.op} op to take its "pairs" (source and target ranks) from; add one to the scenario (npm run nccom -- ${args.op === "send" ? "sendrecv" : "permute"} pairs ranks by default)`);
  }
  // (Sizes in whole blocks of every group: uneven groups of 3 and 5 ranks take blocks of 15.)
  const n = groupsRanksLcm(scn.replicaGroups);
  const ops: OpSpec[] = args.op
    ? [{ ...(scn.ops.find((o) => o.op === args.op) ?? { op: args.op, bytes: 0, dtype: "fp32", reduce: "sum", stream: 0, priorityClass: 0 }), ...(args.dtype ? { dtype: args.dtype } : {}) }]
    : scn.ops.filter((o, i) => scn.ops.findIndex((p) => p.op === o.op) === i).map((o) => ({ ...o, ...(args.dtype ? { dtype: args.dtype } : {}) }));
  const notes: string[] = [];
  const plan = ops.flatMap((op) => {
    const sized = opSweepSizes(op, n, sweep);
    const split = splitSizes(src, op, sized.sizes);
    notes.push(...sized.notes, ...split.notes);
    return split.sizes.map((bytes) => ({ ...op, bytes }));
  });
  if (plan.length === 0) throw new UsageError(`no size to run: every size from ${sweep.min} B to ${sweep.max} B is below one unit of the op${src.splitOp ? " or too small to split into the coalesced ops" : ""} (${notes.join("; ")})`);
  const want: CheckMode = args.check ?? "none";
  const points: SweepPoint[] = [];
  // Every point is validated before the first one runs.
  const points0 = plan.map((op) => {
    const point = sweepPoint(src, op.op, args.dtype, op.bytes, want);
    // Values where they fit, symbolic above (the point's op: a counts op has its counts there).
    const checked: CheckMode = want === "values" && !valuesCheckFit(point.ops[0]!, point.replicaGroups).fits ? "symbolic" : want;
    return { op, checked, one: checked === want ? point : { ...point, check: checked } };
  });
  if (pieces?.kind === "shard") return runShard(points0.map((p) => p.one), spec, args, log, hooks, pieces.shard, progress);
  const results = pointResults(points0.map((p) => p.one), spec, args, log, hooks, pieces, progress);
  for (const { op, checked, one } of points0) {
    const r = results.next().value!;
    // A size that fails is reported in its row; the sweep goes on.
    if (r.kind === "error") {
      const e = revive(r.error) as CcsimError;
      const esize = dtypeSize(op.dtype);
      points.push({ row: { op: op.op, bytes: op.bytes, count: op.bytes / esize, dtype: op.dtype, ranks: n, algorithm: "-", timeUs: 0, algbwGBps: 0, busbwGBps: 0, check: "skipped", error: e.render() }, error: e, checked, scenario: one });
      continue;
    }
    if (r.kind === "hang") return { kind: "hang", op, hang: r.hang };
    points.push({ row: r.outcome.row, outcome: r.outcome, checked, scenario: one, explain: r.explain });
  }
  // (Sizes that were refused ran no check.)
  const ran = points.filter((p) => !p.error);
  // How each size was checked in the end: a symbolic check that outgrew memory ran timed only.
  const actual = (p: (typeof points)[number]) => p.outcome?.checked ?? p.checked;
  const unchecked = want === "none" ? [] : ran.filter((p) => actual(p) === "none");
  const symbolic = ran.filter((p) => actual(p) === "symbolic");
  const values = ran.filter((p) => actual(p) === "values");
  const every = unchecked.length ? "every other size" : "every size";
  if (want === "none") notes.push("timing only: no payload bytes kept (--check values compares results where they fit in memory, symbolically above; --check symbolic everywhere)");
  else if (ran.length === 0) notes.push("no size ran: nothing checked");
  else if (unchecked.length === ran.length) notes.push("no size was checked");
  else if (want === "symbolic") notes.push(`checked symbolically at ${every} (contributions by range, no payload kept)`);
  else if (symbolic.length && values.length) notes.push(`values checked up to ${Math.max(...values.map((p) => p.row.bytes))} B; symbolically above (${symbolic.length} sizes)`);
  else if (symbolic.length) notes.push(`checked symbolically at ${every}: no size's payload fits in memory for a values check`);
  else notes.push(`values checked at ${every}`);
  if (unchecked.length) notes.push(`not checked at ${unchecked.map((p) => `${p.row.bytes} B`).join(", ")}: symbolic tracking outgrew memory (timed only)`);
  return { kind: "done", points, notes };
}

/**
 * A multistream sweep (nccom-test's --streams-json): point k runs every stream's op at its k-th
 * size at once; each point gives one row per stream. Values are checked where every op's payload
 * fits (the concurrent run's check), else the points run timed only and say so.
 */
function runStreams(src: ScenarioSource, spec: DeviceSpec, args: SweepRequest, log: Logger, hooks: PipelineHooks, progress: ((done: number, total: number, events: number) => void) | undefined, pieces: Pieces<SweepTaskResult> | undefined): SweepResult | ShardResults<SweepTaskResult> {
  const streams = src.streams!;
  const want: CheckMode = args.check ?? "none";
  const notes: string[] = [];
  const scenarios = Array.from({ length: streamPoints(streams) }, (_, k) => {
    const point = streamsPoint(src, k, want);
    const fits = point.ops.every((op) => valuesCheckFit(op, op.replicaGroups ?? point.replicaGroups).fits);
    return want === "values" && !fits ? { ...point, check: "none" as const } : point;
  });
  if (pieces?.kind === "shard") return runShard(scenarios, spec, args, log, hooks, pieces.shard, progress);
  const results = pointResults(scenarios, spec, args, log, hooks, pieces, progress);
  const points: SweepPoint[] = [];
  for (const one of scenarios) {
    const r = results.next().value!;
    if (r.kind === "hang") return { kind: "hang", op: one.ops[0]!, hang: r.hang, streams: one.ops };
    // A failed point: the error in every stream's row (its op at its size).
    if (r.kind === "error") {
      const e = revive(inStream(r.error, one)) as CcsimError;
      const rows = streams.map((_, s): ResultRow => {
        const op = one.ops.find((o) => o.stream === s)!;
        return { op: op.op, bytes: op.bytes, count: op.bytes / dtypeSize(op.dtype), dtype: op.dtype, ranks: (op.replicaGroups ?? one.replicaGroups)[0]!.length, algorithm: "-", timeUs: 0, algbwGBps: 0, busbwGBps: 0, check: "skipped", stream: s, error: e.render() };
      });
      points.push({ row: rows[0]!, error: e, checked: one.check, scenario: one, streams: rows });
      continue;
    }
    const rows = r.streams ?? [{ ...r.outcome.row, stream: 0 }];
    points.push({ row: r.outcome.row, outcome: r.outcome, checked: one.check, scenario: one, explain: r.explain, streams: rows });
  }
  const unchecked = points.filter((p) => p.checked !== want).length;
  if (want === "none") notes.push("timing only: no payload bytes kept (-c / --check values compares every stream's results)");
  else if (unchecked > 0) notes.push(`not checked where the streams' payload does not fit in memory: ${unchecked} of ${points.length} points (timed only)`);
  else notes.push("values checked at every point, each op alone and all streams at once");
  notes.push(`${streams.length} streams at once, each its own block; a stream's time is the end of its last op of an iteration (ops_per_iter) in the run of all streams together`);
  return { kind: "done", points, notes };
}

/**
 * An error at op k of a multistream point, named by its stream too: the point's ops are every
 * stream's ops of an iteration one after another (ops_per_iter of them a stream), so `ops[5]` is
 * the streams file's `streams[2]` when the first two streams run 3 and 2 ops an iteration.
 */
function inStream(e: ErrorData, point: Scenario): ErrorData {
  const k = e.path === undefined ? undefined : /^ops\[(\d+)\]/.exec(e.path)?.[1];
  const s = k === undefined ? undefined : point.ops[Number(k)]?.stream;
  return s === undefined ? e : { ...e, path: `streams[${s}] (${e.path})` };
}

/**
 * Every point's result, in order: a merge's from the shards' partials; with --jobs above 1 (and no
 * hooks into the run) from this thread and worker threads, biggest first (bytes x ranks), each
 * thread taking the next as it is free; otherwise each run here as it is asked for (a hang stops
 * the sweep before the next). Progress counts each point as it ends.
 */
function* pointResults(scenarios: readonly Scenario[], spec: DeviceSpec, args: SweepRequest, log: Logger, hooks: PipelineHooks, pieces: Pieces<SweepTaskResult> | undefined, progress: ((done: number, total: number, events: number) => void) | undefined): Generator<SweepTaskResult, void> {
  let events = 0;
  let finished = 0;
  const count = (r: SweepTaskResult) => {
    if (r.kind === "done") events += r.outcome.events;
    progress?.(++finished, scenarios.length, events);
  };
  const parallel = pieces === undefined && (args.jobs ?? 1) > 1 && scenarios.length >= 2 && !hooks.mutateImage && !hooks.trace;
  const results = parallel ? inParallel(scenarios, spec, args, hooks, count) : [];
  for (const [k, one] of scenarios.entries()) {
    if (parallel) {
      yield results[k]!;
      continue;
    }
    const r = pieces?.kind === "merge" ? pieces.results[k]! : runPoint(one, spec, log, hooks);
    count(r);
    yield r;
  }
}

/**
 * Sweep points on this thread and `args.jobs` - 1 worker threads, biggest first (bytes x ranks),
 * the workers started as startWorkers says; results in input order.
 */
function inParallel(scenarios: readonly Scenario[], spec: DeviceSpec, args: SweepRequest, hooks: PipelineHooks, onResult: (r: SweepTaskResult) => void): SweepTaskResult[] {
  const inputs = scenarios.map((scenario): SweepTask => ({ scenario, spec, logLevel: args.logLevel, unfolded: hooks.unfolded === true, ...(hooks.noFastForward ? { noFastForward: true } : {}) }));
  const work = scenarios.map((t) => t.ops[0]!.bytes * t.ranks);
  const label = (k: number) => `${scenarios[k]!.ops[0]!.op} ${scenarios[k]!.ops[0]!.bytes} B`;
  return runParallel<SweepTask, SweepTaskResult>(SWEEP_TASK, inputs, args.jobs ?? 1, { local: task, order: biggestFirst(work), startWhen: startWorkers(work), label, onResult: (_k, r) => onResult(r) });
}

/** One shard's points (assignShards over their estimated costs), run as a sweep runs them. */
function runShard(scenarios: readonly Scenario[], spec: DeviceSpec, args: SweepRequest, log: Logger, hooks: PipelineHooks, shard: ShardSpec, progress?: (done: number, total: number, events: number) => void): ShardResults<SweepTaskResult> {
  const owner = assignShards(scenarios.map((scn) => pieceCost(scn.ops.reduce((a, o) => a + o.bytes, 0), scn.ranks)), shard.count);
  const mine = scenarios.filter((_, k) => owner[k] === shard.index);
  let finished = 0;
  let events = 0;
  const note = (r: SweepTaskResult) => {
    if (r.kind === "done") events += r.outcome.events;
    progress?.(++finished, mine.length, events);
  };
  const results =
    (args.jobs ?? 1) > 1 && mine.length >= 2 && !hooks.mutateImage
      ? inParallel(mine, spec, args, hooks, note)
      : mine.map((scn) => {
          const r = runPoint(scn, spec, log, hooks);
          note(r);
          return r;
        });
  const index = scenarios.flatMap((_, k) => (owner[k] === shard.index ? [k] : []));
  return { kind: "partial", total: scenarios.length, pieces: index.map((k, i) => ({ index: k, result: results[i]! })), preset: presetHash(spec) };
}
