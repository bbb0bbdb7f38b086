// Independent runs on worker threads, with a synchronous caller: tasks go out to the workers and
// the caller blocks (Atomics.wait) until results come back, reading them with
// receiveMessageOnPort. Results come back in task order, so output does not depend on the jobs.
import { existsSync, readlinkSync } from "node:fs";
import { availableParallelism } from "node:os";
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort, type TransferListItem } from "node:worker_threads";
import { CompileError, EncodeError, InternalError, ScenarioError, SimError, type CcsimError } from "../ir/errors.ts";

/** The machine's cores: the default number of jobs. */
export function defaultJobs(): number {
  return Math.max(1, availableParallelism());
}

/**
 * Threads a run starts at most, whatever the jobs asked: four a core (at least 8). Past the cores
 * threads only share them, and each holds its own copy of the modules and a run's state: `-j 300`
 * on two cores took 14 GB and ran no faster. Results do not depend on the number.
 */
export function maxThreads(): number {
  return Math.max(8, 4 * defaultJobs());
}

/** Threads `jobs` asked for run `tasks` on: no more than the tasks, nor than `maxThreads`. */
export function threadsFor(jobs: number, tasks: number): number {
  return Math.min(jobs, tasks, maxThreads());
}

/** A task's result (or error), and which worker ran it (none: the caller). */
type Outcome<R> = { readonly index: number; readonly result?: R; readonly error?: ErrorData; readonly slot?: number };

/** An error as plain data (what crosses threads). */
export interface ErrorData {
  readonly name: string;
  readonly code?: string | undefined;
  readonly message: string;
  readonly path?: string | undefined;
  readonly value?: unknown;
  readonly file?: string | undefined;
  readonly stack?: string | undefined;
}

/** How `runParallel` runs its tasks. */
export interface ParallelOptions<T, R> {
  /** Called as each result comes in (in the order they finish). */
  readonly onResult?: (index: number, result: R) => void;
  /**
   * The task itself, to run on the calling thread too: between the workers' results it takes tasks
   * as they do, so `jobs` threads work with one worker fewer to start.
   */
  readonly local?: (input: T) => R;
  /** The order tasks are taken in (indices; default: input order). Biggest first balances the threads. */
  readonly order?: readonly number[];
  /** What task `index` is, for a message about it (default: its number). */
  readonly label?: (index: number) => string;
  /**
   * With `local`: when to start the workers, asked before each task the calling thread takes, with
   * the time since the call, the tasks it has run and the tasks left to take (default: at once). A
   * worker takes a few tenths of a second of a core to start and slows the caller meanwhile: tasks
   * that end sooner are better run by the caller alone.
   */
  readonly startWhen?: (progress: StartProgress) => boolean;
  /** Called when the workers start, with how many. */
  readonly onStart?: (workers: number) => void;
  /**
   * Workers kept from call to call (a fit's trials): they start once, at the first call, and keep
   * what their task module keeps between tasks; the call neither waits for them to start nor stops them.
   */
  readonly pool?: WorkerPool;
  /**
   * With `pool`: the batch as kept worker `held` is sent it. What a worker holds from an earlier
   * batch (named in `held`) need not cross again: the task module's `receive` kept it on arrival, and
   * this replaces it by its name; what it sends, it names in `held`.
   */
  readonly lighten?: (inputs: readonly T[], held: Set<string>) => readonly T[];
  /**
   * With `pool`: what a kept worker keeps of its own from running `input` (its task module's
   * `task` kept it, as `receive` keeps what is sent), named in its `held` so as not to be sent.
   */
  readonly keeps?: (input: T, result: R) => string | undefined;
  /**
   * With `pool`: what the caller's own run of `input` made that its kept workers should hold too
   * (a program it compiled): sent to each once the call's tasks are done, so that later batches
   * name it, and its crossing is this call's cost, not the next's. The task module's `hold` keeps it.
   */
  readonly share?: (input: T, result: R) => { readonly name: string; readonly item: unknown } | undefined;
}

/**
 * Worker threads that outlive a `runParallel` call: each loads the task module once and serves
 * one batch of tasks after another. A worker that stopped (out of memory) breaks the pool: the
 * call says so, and the next call starts the pool's workers anew.
 */
export class WorkerPool {
  private readonly live: { readonly worker: Worker; readonly port: MessagePort; readonly held: Set<string> }[] = [];
  private moduleUrl: string | undefined;

  /** At least `n` workers of `moduleUrl`'s tasks (started now where missing), with their ports. */
  take(moduleUrl: string, n: number): readonly { readonly worker: Worker; readonly port: MessagePort; readonly held: Set<string> }[] {
    if (this.moduleUrl !== undefined && this.moduleUrl !== moduleUrl) throw new RangeError("a worker pool serves one task module");
    this.moduleUrl = moduleUrl;
    while (this.live.length < n) {
      const ch = new MessageChannel();
      const worker = moduleWorker(SELF, "servePool", { moduleUrl, port: ch.port2 }, [ch.port2]);
      worker.on("error", () => {});
      this.live.push({ worker, port: ch.port1, held: new Set() });
    }
    return this.live.slice(0, n);
  }

  /** Items the caller let go of (by name, as `ParallelOptions.keeps` and `share` named them): each worker that holds one lets it go too. */
  drop(names: readonly string[]): void {
    for (const w of this.live) {
      const gone = names.filter((n) => w.held.delete(n));
      if (gone.length > 0) w.port.postMessage({ drop: gone });
    }
  }

  /** Stop every worker (the next call starts them anew). */
  close(): void {
    for (const w of this.live) void w.worker.terminate();
    this.live.length = 0;
  }
}

/** What `ParallelOptions.startWhen` is asked with: ms since the call, tasks the caller has run, tasks left to take. */
export interface StartProgress {
  readonly elapsedMs: number;
  readonly ran: number;
  readonly left: number;
}

/**
 * The shared control words: results posted (the caller waits on it), the next task to take, then
 * two per worker: its operating-system thread id (0: not known) and the task it is running plus one
 * (0: none).
 */
const POSTED = 0;
const NEXT = 1;
const tidWord = (w: number) => 2 + 2 * w;
const taskWord = (w: number) => 3 + 2 * w;
/** How often (ms) the waiting caller checks that the workers still live. */
const LIVENESS_MS = 1000;

/**
 * Run `task(input)` of module `moduleUrl` (which exports `task`) for every input on up to `jobs`
 * threads: worker threads (and the caller's, with `local`), each taking the next task in `order`
 * as it is free. Returns the results in input order, whatever order they finished in. A CcsimError
 * in a task is rethrown as such (the first in input order); anything else is rethrown as an Error
 * with the thread's stack.
 */
export function runParallel<T, R>(moduleUrl: string, inputs: readonly T[], jobs: number, opts: ParallelOptions<T, R> = {}): R[] {
  if (inputs.length === 0) return [];
  const order = opts.order ?? inputs.map((_, i) => i);
  if (order.length !== inputs.length || new Set(order).size !== inputs.length || order.some((i) => !(i >= 0 && i < inputs.length))) throw new RangeError("runParallel: order must list every input once");
  const results: (Outcome<R> | undefined)[] = new Array(inputs.length);
  const threads = threadsFor(jobs, inputs.length);
  const nWorkers = opts.local ? threads - 1 : threads;
  const ctrl = new Int32Array(new SharedArrayBuffer(4 * (2 + 2 * nWorkers)));
  const ports: MessagePort[] = [];
  const helds: Set<string>[] = [];
  const workers: Worker[] = [];
  const start = (): void => {
    if (opts.pool) {
      // Kept workers: the batch goes to each on its port.
      opts.pool.take(moduleUrl, nWorkers).forEach(({ port, held }, w) => {
        port.postMessage({ ctrl, slot: w, inputs: opts.lighten ? opts.lighten(inputs, held) : inputs, order });
        ports.push(port);
        helds.push(held);
      });
    } else {
      for (let w = 0; w < nWorkers; w++) {
        const ch = new MessageChannel();
        const worker = moduleWorker(SELF, "serveTasks", { moduleUrl, port: ch.port2, ctrl, slot: w, inputs, order }, [ch.port2]);
        // (A worker that fails says so through its task's result or `checkLiveness`; its exit event,
        // once the caller's thread runs events again, must not end the process.)
        worker.on("error", () => {});
        workers.push(worker);
        ports.push(ch.port1);
      }
    }
    opts.onStart?.(nWorkers);
  };
  // (Without a task of its own the caller waits: the workers start at once; kept ones have started.)
  const startWhen = opts.local && !opts.pool ? opts.startWhen : undefined;
  const t0 = performance.now();
  let ran = 0;
  let started = nWorkers === 0;
  if (!started && !startWhen) {
    start();
    started = true;
  }
  let done = 0;
  const take = (o: Outcome<R>) => {
    results[o.index] = o;
    if (o.slot !== undefined && o.result !== undefined && opts.keeps) {
      const name = opts.keeps(inputs[o.index]!, o.result);
      if (name !== undefined) helds[o.slot]?.add(name);
    }
    done++;
    if (o.result !== undefined) opts.onResult?.(o.index, o.result);
  };
  /** Take every result posted so far; true if there was one. */
  const drain = (): boolean => {
    let got = false;
    for (const port of ports) {
      for (let m = receiveMessageOnPort(port); m; m = receiveMessageOnPort(port)) {
        take(m.message as Outcome<R>);
        got = true;
      }
    }
    return got;
  };
  try {
    while (done < inputs.length) {
      const seen = Atomics.load(ctrl, POSTED);
      if (drain()) continue;
      if (opts.local) {
        if (!started && startWhen!({ elapsedMs: performance.now() - t0, ran, left: order.length - Atomics.load(ctrl, NEXT) })) {
          start();
          started = true;
        }
        const k = Atomics.add(ctrl, NEXT, 1);
        if (k < order.length) {
          take(runTask(opts.local, order[k]!, inputs[order[k]!]!));
          ran++;
          continue;
        }
      }
      if (Atomics.wait(ctrl, POSTED, seen, LIVENESS_MS) === "timed-out") checkLiveness(ctrl, nWorkers, drain, results, opts.label);
    }
  } catch (e) {
    // (A kept worker that stopped, or one left in a task: the pool starts anew next time.)
    opts.pool?.close();
    throw e;
  } finally {
    // (Workers end when no task is left; one still running after an error is stopped.)
    for (const w of workers) void w.terminate();
  }
  const failed = results.find((o) => o!.error);
  if (failed?.error) throw revive(failed.error);
  if (opts.share && ports.length > 0) shareOut(results as Outcome<R>[], inputs, opts.share, ports, helds);
  return results.map((o) => o!.result as R);
}

/** What the caller's own runs made, to every kept worker that does not hold it yet (`ParallelOptions.share`). */
function shareOut<T, R>(results: readonly Outcome<R>[], inputs: readonly T[], share: NonNullable<ParallelOptions<T, R>["share"]>, ports: readonly MessagePort[], helds: readonly Set<string>[]): void {
  const items = results.flatMap((o) => (o.slot === undefined && o.result !== undefined ? [share(inputs[o.index]!, o.result)] : [])).filter((x) => x !== undefined);
  ports.forEach((port, w) => {
    const send = items.filter((x) => !helds[w]!.has(x.name));
    if (send.length === 0) return;
    port.postMessage({ hold: send.map((x) => [x.name, x.item]) });
    for (const x of send) helds[w]!.add(x.name);
  });
}

/**
 * A worker thread ends without a word when V8 stops it (out of memory): the task it was running
 * would never post, and the caller, blocked, never sees the thread's exit event. So the caller
 * checks, while it waits, that each worker's thread still exists (Linux: /proc/self/task; where
 * that is not readable a worker's id stays 0 and is not checked).
 */
function checkLiveness<R>(ctrl: Int32Array, nWorkers: number, drain: () => boolean, results: readonly (Outcome<R> | undefined)[], label?: (index: number) => string): void {
  const gone = (w: number): boolean => {
    const tid = Atomics.load(ctrl, tidWord(w));
    return tid !== 0 && !existsSync(`/proc/self/task/${tid}`);
  };
  const dead = Array.from({ length: nWorkers }, (_, w) => w).filter(gone);
  if (dead.length === 0) return;
  // What they posted before they went is on their ports; a task one held without a result never will be.
  drain();
  for (const w of dead) {
    const held = Atomics.load(ctrl, taskWord(w)) - 1;
    if (held >= 0 && results[held] === undefined) {
      throw new InternalError(`worker thread ${w + 1} stopped while running task ${held + 1} of ${results.length}${label ? ` (${label(held)})` : ""}, without a result (out of memory?)`);
    }
  }
  // Every worker gone and tasks left that nobody took (a caller with a task of its own takes them itself).
  const left = results.filter((o) => o === undefined).length;
  if (dead.length === nWorkers && left > 0) throw new InternalError(`every worker thread stopped with ${left} of ${results.length} tasks not run`);
}

/** This thread's operating-system id (Linux), or 0. */
function osThreadId(): number {
  try {
    return Number(readlinkSync("/proc/thread-self").split("/").pop()) || 0;
  } catch {
    return 0;
  }
}

/** One task, its error as data. */
function runTask<T, R>(task: (input: T) => R, index: number, input: T): Outcome<R> {
  try {
    return { index, result: task(input) };
  } catch (e) {
    return { index, error: errorData(e) };
  }
}

const SELF = import.meta.url;

/**
 * A worker thread that loads module `moduleUrl` and calls its export `entry` with `data` (whatever
 * it posts, it posts on ports passed in `data`). A TypeScript module loads through tsx's loader (a
 * fifth of a second of a core before the first module); a compiled one (.build/, bin/run.mjs) as
 * it is. It does not keep the process alive.
 */
export function moduleWorker(moduleUrl: string, entry: string, data: Record<string, unknown>, transferList: TransferListItem[] = []): Worker {
  const load = moduleUrl.endsWith(".js") ? "import(workerData.moduleUrl)" : `import("tsx/esm/api").then((m) => { m.register(); return import(workerData.moduleUrl); })`;
  // (Dynamic imports only: the code runs as CommonJS or, where the process was started with
  // --input-type=module, which a worker inherits, as an ES module; \`require\` is not there then.)
  const code = `
import("node:worker_threads").then(({ workerData }) => ${load}.then((mod) => mod[workerData.entry](workerData.data)));`;
  const worker = new Worker(code, { eval: true, workerData: { moduleUrl, entry, data }, transferList });
  worker.unref();
  return worker;
}

/** What a worker loads: `task` runs one input; `receive`, if there, sees each batch as it arrives (before any of its tasks run). */
interface TaskModule {
  task(input: unknown): unknown;
  receive?(inputs: readonly unknown[]): void;
  hold?(items: readonly (readonly [string, unknown])[]): void;
  drop?(names: readonly string[]): void;
}

/**
 * @public (a worker thread calls it by name)
 * A worker's task loop (`moduleWorker(..., "serveTasks", ...)`): it takes the next task in `order`
 * (a shared counter) until none is left, running `task` of the task module on each; results go
 * back on the port.
 */
export async function serveTasks(data: { moduleUrl: string; port: MessagePort; ctrl: Int32Array; slot: number; inputs: readonly unknown[]; order: readonly number[] }): Promise<void> {
  Atomics.store(data.ctrl, tidWord(data.slot), osThreadId());
  const mod = (await import(data.moduleUrl)) as TaskModule;
  serveBatch(mod, data.port, data);
  data.port.close();
}

/** One batch on a worker: the next task in `order` (a shared counter) until none is left, each result posted on `port`. */
function serveBatch(mod: TaskModule, port: MessagePort, batch: { ctrl: Int32Array; slot: number; inputs: readonly unknown[]; order: readonly number[] }): void {
  const { ctrl, slot, inputs, order } = batch;
  const task = mod.task;
  mod.receive?.(inputs);
  for (let k = Atomics.add(ctrl, NEXT, 1); k < order.length; k = Atomics.add(ctrl, NEXT, 1)) {
    Atomics.store(ctrl, taskWord(slot), order[k]! + 1);
    port.postMessage({ ...runTask(task, order[k]!, inputs[order[k]!]), slot });
    Atomics.store(ctrl, taskWord(slot), 0);
    Atomics.add(ctrl, POSTED, 1);
    Atomics.notify(ctrl, POSTED);
  }
}

/**
 * @public (a worker thread calls it by name)
 * A kept worker's loop (`WorkerPool`): it loads the task module once, then serves each batch that
 * comes on its port (`serveBatch`, as `serveTasks` serves its one), and waits for the next.
 */
export async function servePool(data: { moduleUrl: string; port: MessagePort }): Promise<void> {
  const mod = (await import(data.moduleUrl)) as TaskModule;
  const tid = osThreadId();
  data.port.on("message", (msg: { ctrl: Int32Array; slot: number; inputs: readonly unknown[]; order: readonly number[] } | { hold: readonly (readonly [string, unknown])[] } | { drop: readonly string[] }) => {
    // What the caller made in the last batch, to hold for the next ones (`ParallelOptions.share`).
    if ("hold" in msg) {
      mod.hold?.(msg.hold);
      return;
    }
    // What the caller let go of (`WorkerPool.drop`).
    if ("drop" in msg) {
      mod.drop?.(msg.drop);
      return;
    }
    Atomics.store(msg.ctrl, tidWord(msg.slot), tid);
    serveBatch(mod, data.port, msg);
  });
}

/** An error as data that crosses threads (`revive` makes it an error again). */
export function errorData(e: unknown): ErrorData {
  const x = (e ?? {}) as Partial<Record<"name" | "code" | "message" | "path" | "file" | "stack", string>> & { value?: unknown };
  return { name: String(x.name), code: x.code, message: String(x.message), path: x.path, value: x.value, file: x.file, stack: x.stack };
}

/** A CcsimError sent across threads as data, made an error of its kind again. */
export function revive(e: ErrorData): Error {
  const opts = { ...(e.path !== undefined ? { path: e.path } : {}), ...(e.value !== undefined ? { value: e.value } : {}), ...(e.file !== undefined ? { file: e.file } : {}) };
  const make: Record<string, (c: string, m: string) => CcsimError> = {
    ScenarioError: (c, m) => new ScenarioError(c, m, opts),
    CompileError: (c, m) => new CompileError(c, m, opts),
    EncodeError: (c, m) => new EncodeError(c, m, opts),
    SimError: (c, m) => new SimError(c, m, opts),
  };
  const f = make[e.name];
  if (f && e.code) return f(e.code, e.message);
  const err = new Error(e.message);
  if (e.stack) err.stack = e.stack;
  return err;
}
