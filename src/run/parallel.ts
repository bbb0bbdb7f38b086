// Independent runs on worker threads, with a synchronous caller: tasks go out to the workers and
// the caller blocks (Atomics.wait) until results come back, reading them with
// receiveMessageOnPort. Results come back in task order, so output does not depend on the jobs.
import { availableParallelism } from "node:os";
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort, type TransferListItem } from "node:worker_threads";
import { CompileError, EncodeError, ScenarioError, SimError, type CcsimError } from "../ir/errors.ts";

/** The machine's cores: the default number of jobs. */
export function defaultJobs(): number {
  return Math.max(1, availableParallelism());
}

type Outcome<R> = { readonly index: number; readonly result?: R; readonly error?: ErrorData };

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
}

/** The shared control words: results posted (the caller waits on it), and the next task to take. */
const POSTED = 0;
const NEXT = 1;

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
  const ctrl = new Int32Array(new SharedArrayBuffer(8));
  const threads = Math.min(jobs, inputs.length);
  const ports: MessagePort[] = [];
  const workers: Worker[] = [];
  for (let w = 0; w < (opts.local ? threads - 1 : threads); w++) {
    const ch = new MessageChannel();
    workers.push(moduleWorker(SELF, "serveTasks", { moduleUrl, port: ch.port2, ctrl, inputs, order }, [ch.port2]));
    ports.push(ch.port1);
  }
  let done = 0;
  const take = (o: Outcome<R>) => {
    results[o.index] = o;
    done++;
    if (o.result !== undefined) opts.onResult?.(o.index, o.result);
  };
  try {
    while (done < inputs.length) {
      const seen = Atomics.load(ctrl, POSTED);
      let got = false;
      for (const port of ports) {
        for (let m = receiveMessageOnPort(port); m; m = receiveMessageOnPort(port)) {
          take(m.message as Outcome<R>);
          got = true;
        }
      }
      if (got) continue;
      if (opts.local) {
        const k = Atomics.add(ctrl, NEXT, 1);
        if (k < order.length) {
          take(runTask(opts.local, order[k]!, inputs[order[k]!]!));
          continue;
        }
      }
      Atomics.wait(ctrl, POSTED, seen, 60_000);
    }
  } finally {
    // (Workers end when no task is left; one still running after an error is stopped.)
    for (const w of workers) void w.terminate();
  }
  const failed = results.find((o) => o!.error);
  if (failed?.error) throw revive(failed.error);
  return results.map((o) => o!.result as R);
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
 * A worker thread that loads TypeScript module `moduleUrl` (through tsx's loader) and calls its
 * export `entry` with `data` (whatever it posts, it posts on ports passed in `data`). It does not
 * keep the process alive.
 */
export function moduleWorker(moduleUrl: string, entry: string, data: Record<string, unknown>, transferList: TransferListItem[] = []): Worker {
  const code = `
const { workerData } = require("node:worker_threads");
import("tsx/esm/api").then((m) => { m.register(); return import(workerData.moduleUrl); }).then((mod) => mod[workerData.entry](workerData.data));`;
  const worker = new Worker(code, { eval: true, workerData: { moduleUrl, entry, data }, transferList });
  worker.unref();
  return worker;
}

/**
 * A worker's task loop (`moduleWorker(..., "serveTasks", ...)`): it takes the next task in `order`
 * (a shared counter) until none is left, running `task` of the task module on each; results go
 * back on the port.
 */
export async function serveTasks(data: { moduleUrl: string; port: MessagePort; ctrl: Int32Array; inputs: readonly unknown[]; order: readonly number[] }): Promise<void> {
  const mod = (await import(data.moduleUrl)) as { task: (input: unknown) => unknown };
  const { port, ctrl, inputs, order } = data;
  for (let k = Atomics.add(ctrl, NEXT, 1); k < order.length; k = Atomics.add(ctrl, NEXT, 1)) {
    port.postMessage(runTask(mod.task, order[k]!, inputs[order[k]!]));
    Atomics.add(ctrl, POSTED, 1);
    Atomics.notify(ctrl, POSTED);
  }
  port.close();
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
