// One sweep point, as a worker thread runs it (see parallel.ts): load the preset, run the scenario,
// hand back what the sweep reports.
import { isMainThread } from "node:worker_threads";
import type { Logger } from "pino";
import { stderrLog } from "./stderr-log.ts";
import type { DeviceSpec, Scenario } from "../ir/spec.ts";
import { CcsimError, InternalError } from "../ir/errors.ts";
import type { Explanation } from "../enc/post.ts";
import type { CompiledProgram } from "../enc/compile.ts";
import type { HangReport } from "../../sim/index.ts";
import { runScenario, type ConcurrentOutcome, type OpOutcome, type PipelineHooks } from "./pipeline.ts";
import { busFactor, throughput, type ResultRow } from "../report/table.ts";
import { runParallel, type StartProgress, type WorkerPool } from "./parallel.ts";

export interface SweepTask {
  readonly scenario: Scenario;
  /** The device the sweep runs on (its preset, with --launch-us applied). */
  readonly spec: DeviceSpec;
  readonly logLevel: string;
  /** Simulate every pod (--no-fold). */
  readonly unfolded: boolean;
  /** Run every event (--no-fastforward). */
  readonly noFastForward?: boolean;
  /** Trials without recompiling (src/run/program-cache.ts): the point's program, compiled before; or, without one, whether to hand back the one compiled. */
  readonly program?: CompiledProgram;
  readonly keepProgram?: boolean;
  /** With `keepProgram`: the most descriptor-ring bytes the caller can keep (a bigger program is not handed back). */
  readonly keepBytes?: number;
  /**
   * The name `program` goes by (its `programKey`): a kept worker that was sent it once keeps it
   * (`receive`), and later batches send it the name alone, as `heldProgram` (`lighten`).
   */
  readonly programKey?: string;
  readonly heldProgram?: string;
}

/** The programs this thread was sent in a batch, by name (a kept worker's, for the trials after). */
const HELD = new Map<string, CompiledProgram>();

/** @public (parallel.ts calls it on a worker) A batch has arrived: keep the programs it names. */
export function receive(inputs: readonly SweepTask[]): void {
  for (const t of inputs) if (t.program && t.programKey !== undefined) HELD.set(t.programKey, t.program);
}

/** A batch as a kept worker that holds the programs named in `held` is sent it: those by name (parallel.ts's `lighten`). */
export function lighten(inputs: readonly SweepTask[], held: Set<string>): SweepTask[] {
  return inputs.map((t) => {
    if (!t.program || t.programKey === undefined) return t;
    if (!held.has(t.programKey)) {
      held.add(t.programKey);
      return t;
    }
    const { program: _sent, ...rest } = t;
    return { ...rest, heldProgram: t.programKey };
  });
}

export type SweepTaskResult =
  | { readonly kind: "done"; readonly outcome: OpOutcome; readonly explain: readonly Explanation[]; readonly streams?: readonly ResultRow[]; readonly program?: CompiledProgram }
  | { readonly kind: "hang"; readonly hang: HangReport }
  | { readonly kind: "error"; readonly error: { readonly name: string; readonly code: string; readonly message: string; readonly path: string; readonly value: unknown; readonly file?: string } };

/**
 * With a pool (parallel.ts's `keeps`): the program a kept worker compiled for a task and keeps
 * itself, by name (`task`), so that later batches name it rather than send it back.
 */
export function keeps(t: SweepTask, r: SweepTaskResult): string | undefined {
  return t.keepProgram && t.programKey !== undefined && r.kind === "done" && r.program ? t.programKey : undefined;
}

/** With a pool (parallel.ts's `share`): the program the caller compiled for a task, for its kept workers to hold. */
export function share(t: SweepTask, r: SweepTaskResult): { name: string; item: CompiledProgram } | undefined {
  const name = keeps(t, r);
  return name !== undefined && r.kind === "done" && r.program ? { name, item: r.program } : undefined;
}

/** @public (parallel.ts calls it on a kept worker) Programs the caller compiled, to hold by name. */
export function hold(items: readonly (readonly [string, CompiledProgram])[]): void {
  for (const [name, program] of items) HELD.set(name, program);
}

/** @public (parallel.ts calls it on a kept worker) Programs the caller let go of: let them go here too. */
export function drop(names: readonly string[]): void {
  for (const name of names) HELD.delete(name);
}

/** A worker thread's entry (parallel.ts): one sweep point. */
export function task(t: SweepTask): SweepTaskResult {
  const log = stderrLog(t.logLevel);
  let kept: CompiledProgram | undefined;
  const program = t.program ?? (t.heldProgram !== undefined ? HELD.get(t.heldProgram) : undefined);
  if (t.heldProgram !== undefined && !program) throw new InternalError(`a worker was sent a program's name it does not hold (${t.heldProgram.slice(0, 80)})`);
  const r = runPoint(t.scenario, t.spec, log, { ...(t.unfolded ? { unfolded: true } : {}), ...(t.noFastForward ? { noFastForward: true } : {}), ...(program ? { program } : t.keepProgram ? { keepProgram: (p: CompiledProgram) => (kept = p), ...(t.keepBytes !== undefined ? { keepBytes: t.keepBytes } : {}) } : {}) });
  if (!kept || r.kind !== "done") return r;
  // A kept worker keeps what it compiled too (the caller keeps it as well: it runs it, and names it in later batches).
  if (!isMainThread && t.programKey !== undefined) HELD.set(t.programKey, kept);
  return { ...r, program: kept };
}

/** Run one point's scenario; a CcsimError comes back as data (it crosses threads), the sweep goes on. */
export function runPoint(scenario: Scenario, spec: DeviceSpec, log: Logger, hooks: PipelineHooks = {}): SweepTaskResult {
  try {
    const out = runScenario(scenario, spec, log, hooks);
    if (out.kind === "hang") return { kind: "hang", hang: out.hang };
    if (out.concurrent) return { kind: "done", outcome: coalesced(scenario, out.ops, out.concurrent), explain: out.explain, streams: streamRows(scenario, out.ops, out.concurrent) };
    return { kind: "done", outcome: out.ops[0]!, explain: out.explain };
  } catch (e) {
    if (!(e instanceof CcsimError)) throw e;
    return { kind: "error", error: { name: e.name, code: e.code, message: e.message, path: e.path, value: e.value, ...(e.file !== undefined ? { file: e.file } : {}) } };
  }
}

/**
 * When a sweep's worker threads start. A worker takes a few tenths of a second of a core to start
 * (loading the modules), and slows this thread meanwhile, so a sweep of small points runs faster on
 * this thread alone. A sweep with a point that moves BIG_POINT bytes or more over its ranks (ring8's
 * 256 MiB, about 0.3 s) starts them at once: this thread takes that point first, the workers the
 * next ones as they come up. Another starts them once this thread has run points for START_AFTER_MS
 * and the points left, at the mean time of those run, would take REST_MS or more.
 */
const BIG_POINT = 2 ** 31;
const START_AFTER_MS = 700;
const REST_MS = 1000;

export function startWorkers(work: readonly number[]): (p: StartProgress) => boolean {
  if (Math.max(...work) >= BIG_POINT) return () => true;
  return ({ elapsedMs, ran, left }) => elapsedMs >= START_AFTER_MS && left >= 2 && (elapsedMs / Math.max(1, ran)) * left >= REST_MS;
}

/** Indices of `work` from the biggest to the smallest (ties in index order). */
export function biggestFirst(work: readonly number[]): number[] {
  return work.map((_, i) => i).sort((a, b) => work[b]! - work[a]! || a - b);
}

const SELF = import.meta.url;

/**
 * Every task, in order: on this thread and up to `jobs` - 1 worker threads, biggest first (bytes
 * x ranks, or `cost`: what each is known to take, a kept program's last run), the workers started
 * as `startWorkers` says (or kept in `pool`, started once).
 */
export function runTasks(inputs: readonly SweepTask[], jobs: number, pool?: WorkerPool, cost?: readonly number[]): SweepTaskResult[] {
  const work = inputs.map((t) => t.scenario.ops[0]!.bytes * t.scenario.ranks);
  if (jobs <= 1 || inputs.length < 2) return inputs.map((t) => task(t));
  return runParallel<SweepTask, SweepTaskResult>(SELF, inputs, jobs, { local: task, order: biggestFirst(cost ?? work), startWhen: startWorkers(work), ...(pool ? { pool, lighten, keeps, share } : {}) });
}

/**
 * A concurrent point's rows, one per stream (nccom-test's --streams-json blocks): a stream's op
 * (its first; the others are its further ops of an iteration) at the time the stream's last op ends
 * in the run of all streams at once, checked there and alone.
 */
function streamRows(scn: Scenario, ops: readonly OpOutcome[], c: ConcurrentOutcome): ResultRow[] {
  return c.streams.map((stream) => {
    const mine = scn.ops.map((o, k) => k).filter((k) => scn.ops[k]!.stream === stream);
    const first = ops[mine[0]!]!.row;
    const endPs = Math.max(...mine.map((k) => c.opEndPs[k]!));
    const failed = (c.mismatch !== undefined && mine.includes(c.mismatch.op)) || mine.some((k) => ops[k]!.row.check === "fail");
    const algorithms = [...new Set(mine.map((k) => ops[k]!.row.algorithm))].join("+");
    return { ...first, stream, algorithm: algorithms, ...throughput(first.bytes, endPs, busFactor(scn.ops[mine[0]!]!.op, first.ranks)), check: failed || c.violations.length > 0 ? "fail" : c.checked === "values" ? "pass" : first.check };
  });
}

/**
 * A point of several ops run at once (coalesced ops, each on a stream of its own) as one row: the
 * ops' bytes together, in the time the last one ends; each op's own run checked as well.
 */
function coalesced(scn: Scenario, ops: readonly OpOutcome[], c: ConcurrentOutcome): OpOutcome {
  const first = ops[0]!;
  const bytes = ops.reduce((a, o) => a + o.row.bytes, 0);
  const algorithms = [...new Set(ops.map((o) => o.row.algorithm))].join("+");
  const failed = c.mismatch !== undefined || c.violations.length > 0 || ops.some((o) => o.row.check === "fail");
  const row: ResultRow = {
    ...first.row,
    bytes,
    count: ops.reduce((a, o) => a + o.row.count, 0),
    algorithm: algorithms,
    ...throughput(bytes, c.timePs, busFactor(scn.ops[0]!.op, first.row.ranks)),
    check: failed ? "fail" : c.checked === "values" ? "pass" : first.row.check,
  };
  // The fixed cost the streams started after: the largest of the ops'.
  const fixedCost = ops.map((o) => o.fixedCost).reduce((a, f) => (f.totalPs > a.totalPs ? f : a));
  return { ...first, row, mismatch: c.mismatch?.mismatch ?? ops.find((o) => o.mismatch)?.mismatch, violations: [...ops.flatMap((o) => o.violations), ...c.violations], events: c.events, fixedCost };
}
