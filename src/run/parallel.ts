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

/**
 * Run `task(input)` of module `moduleUrl` (which exports `task`) for every input on up to `jobs`
 * worker threads; returns the results in input order. A CcsimError in a task is rethrown as such
 * (the first in input order); anything else is rethrown as an Error with the worker's stack.
 */
export function runParallel<T, R>(moduleUrl: string, inputs: readonly T[], jobs: number, onResult?: (index: number, result: R) => void): R[] {
  const n = Math.min(jobs, inputs.length);
  const results: Outcome<R>[] = new Array(inputs.length);
  if (inputs.length === 0) return [];
  const signal = new Int32Array(new SharedArrayBuffer(4));
  const workers: { worker: Worker; port: MessagePort; busy: boolean }[] = [];
  for (let w = 0; w < n; w++) {
    const ch = new MessageChannel();
    const worker = moduleWorker(SELF, "serveTasks", { moduleUrl, port: ch.port2, signal }, [ch.port2]);
    workers.push({ worker, port: ch.port1, busy: false });
  }
  let next = 0;
  let done = 0;
  const feed = (w: (typeof workers)[number]) => {
    if (next >= inputs.length) return;
    w.worker.postMessage({ index: next, input: inputs[next] });
    next++;
    w.busy = true;
  };
  for (const w of workers) feed(w);
  try {
    while (done < inputs.length) {
      const seen = Atomics.load(signal, 0);
      let got = false;
      for (const w of workers) {
        for (let m = receiveMessageOnPort(w.port); m; m = receiveMessageOnPort(w.port)) {
          const o = m.message as Outcome<R>;
          results[o.index] = o;
          done++;
          got = true;
          w.busy = false;
          if (o.result !== undefined) onResult?.(o.index, o.result);
          feed(w);
        }
      }
      if (!got && done < inputs.length) Atomics.wait(signal, 0, seen, 60_000);
    }
  } finally {
    for (const w of workers) {
      w.worker.postMessage(null);
      void w.worker.terminate();
    }
  }
  const failed = results.find((o) => o.error);
  if (failed?.error) throw revive(failed.error);
  return results.map((o) => o.result as R);
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

/** A worker's task loop (`moduleWorker(..., "serveTasks", ...)`): each message runs `task` of the task module; results go back on the port. */
export async function serveTasks(data: { moduleUrl: string; port: MessagePort; signal: Int32Array }): Promise<void> {
  const { parentPort } = await import("node:worker_threads");
  const mod = (await import(data.moduleUrl)) as { task: (input: unknown) => unknown };
  const { port, signal } = data;
  parentPort!.on("message", (msg: { index: number; input: unknown } | null) => {
    if (msg === null) {
      port.close();
      parentPort!.close();
      return;
    }
    let out: Outcome<unknown>;
    try {
      out = { index: msg.index, result: mod.task(msg.input) };
    } catch (e) {
      out = { index: msg.index, error: errorData(e) };
    }
    port.postMessage(out);
    Atomics.add(signal, 0, 1);
    Atomics.notify(signal, 0);
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
