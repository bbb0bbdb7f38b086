// Runs on worker threads (and the caller's): results in input order, whichever thread took a task.
import { describe, expect, it } from "vitest";
import { defaultJobs, maxThreads, runParallel, threadsFor, WorkerPool } from "../../src/run/parallel.ts";
import { InternalError } from "../../src/ir/errors.ts";
import { biggestFirst, startWorkers } from "../../src/run/sweep-task.ts";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { ScenarioError } from "../../src/ir/errors.ts";
import { task, type Input } from "./fixtures/parallel-task.ts";

const MODULE = new URL("./fixtures/parallel-task.ts", import.meta.url).href;
type Out = ReturnType<typeof task>;

describe("runParallel", () => {
  it("returns results in input order, the caller taking tasks too, in the order given", () => {
    const xs = Array.from({ length: 24 }, (_, i) => i + 20);
    const seen = new Int32Array(new SharedArrayBuffer(4));
    const inputs = xs.map((x) => ({ x, seen }));
    const done: number[] = [];
    const out = runParallel<Input, Out>(MODULE, inputs, 2, { local: task, order: biggestFirst(xs), onResult: (i) => done.push(i) });
    expect(out.map((o) => o.square)).toEqual(xs.map((x) => x * x));
    // Both threads worked: the caller and one worker.
    expect(out.some((o) => o.main)).toBe(true);
    expect(out.some((o) => !o.main)).toBe(true);
    expect(new Set(out.map((o) => o.thread)).size).toBe(2);
    // Every result reported once; the biggest were taken first.
    expect([...done].sort((a, b) => a - b)).toEqual(inputs.map((_, i) => i));
    expect(done.slice(0, 2).every((i) => i >= xs.length - 4)).toBe(true);
  });

  it("without a local task runs on workers only", () => {
    const out = runParallel<Input, Out>(MODULE, [1, 2, 3, 4].map((x) => ({ x })), 2);
    expect(out.map((o) => o.square)).toEqual([1, 4, 9, 16]);
    expect(out.every((o) => !o.main)).toBe(true);
  });

  it("rethrows the first failed task's error in input order, as its kind", () => {
    const inputs = [1, 13, 2, 3].map((x) => ({ x }));
    expect(() => runParallel<Input, Out>(MODULE, inputs, 2, { local: task })).toThrow(ScenarioError);
    expect(() => runParallel<Input, Out>(MODULE, inputs, 2)).toThrow(/thirteen/);
  });

  it("a worker thread that stops in a task is an internal error, not a wait for good", () => {
    // (Where the thread cannot be watched — no /proc/self/task — the caller would wait: not tested there.)
    if (!existsSync("/proc/thread-self")) return;
    // In a child process with a time limit: a caller that waits for good must fail the test, not hang it.
    const script = fileURLToPath(new URL("./fixtures/parallel-dies.ts", import.meta.url));
    const child = spawnSync(process.execPath, ["--import", "tsx", script], { encoding: "utf8", timeout: 60_000 });
    expect(child.signal).toBeNull();
    expect(child.stdout.trim()).toBe("InternalError: internal error: worker thread 1 stopped while running task 2 of 3 (x = 99), without a result (out of memory?)");
  });

  it("workers start where the process runs its code as ES modules (--input-type=module, which they inherit)", () => {
    // (In a child process with a time limit: a worker whose start-up code cannot run never says so,
    // and a caller without a task of its own would wait for it for good.)
    const parallel = JSON.stringify(new URL("../../src/run/parallel.ts", import.meta.url).href);
    const code = `const { runParallel } = await import(${parallel}); console.log(JSON.stringify(runParallel(${JSON.stringify(MODULE)}, [1, 2, 3].map((x) => ({ x })), 2).map((o) => o.square)));`;
    const child = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], { encoding: "utf8", timeout: 60_000 });
    expect(child.signal, child.stderr).toBeNull();
    expect(child.stdout.trim()).toBe("[1,4,9]");
  });

  it("a pool's workers serve call after call: the same threads, their module's state kept", () => {
    const pool = new WorkerPool();
    try {
      // Three calls: which worker takes which task is the machine's timing (one may take a whole
      // call), but no call starts a thread, and each thread's count of tasks goes on from call to
      // call (its module loaded once). With two threads, two of the three calls share one.
      const calls = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]].map((xs) => runParallel<Input, Out>(MODULE, xs.map((x) => ({ x })), 2, { pool }));
      expect(calls[1]!.map((o) => o.square)).toEqual([25, 36, 49, 64]);
      expect(calls.flat().every((o) => !o.main)).toBe(true);
      expect(new Set(calls.flat().map((o) => o.thread)).size).toBeLessThanOrEqual(2);
      const ran = new Map<number, number>();
      const served = new Map<number, number>();
      for (const out of calls) {
        const now = new Map<number, number[]>();
        for (const o of out) now.set(o.thread, [...(now.get(o.thread) ?? []), o.calls]);
        for (const [thread, counts] of now) {
          const before = ran.get(thread) ?? 0;
          // This call's tasks on the thread are its counts before + 1 .. before + n.
          expect(counts.sort((x, y) => x - y)).toEqual(counts.map((_, k) => before + k + 1));
          ran.set(thread, before + counts.length);
          served.set(thread, (served.get(thread) ?? 0) + 1);
        }
      }
      expect(Math.max(...served.values())).toBeGreaterThanOrEqual(2);
      expect(() => runParallel<Input, Out>(MODULE, [1, 13].map((x) => ({ x })), 2, { pool })).toThrow(/thirteen/);
      // A task's error is that call's: the workers serve the next one.
      expect(runParallel<Input, Out>(MODULE, [2, 3].map((x) => ({ x })), 2, { pool }).map((o) => o.square)).toEqual([4, 9]);
    } finally {
      pool.close();
    }
  });

  it("a pool whose worker stops says so, and starts anew at the next call", () => {
    if (!existsSync("/proc/thread-self")) return;
    const pool = new WorkerPool();
    try {
      expect(() => runParallel<Input, Out>(MODULE, [2, 99, 3].map((x) => ({ x })), 1, { pool })).toThrow(InternalError);
      expect(runParallel<Input, Out>(MODULE, [2, 3].map((x) => ({ x })), 1, { pool }).map((o) => o.square)).toEqual([4, 9]);
    } finally {
      pool.close();
    }
  });

  it("refuses an order that does not list every input once", () => {
    expect(() => runParallel<Input, Out>(MODULE, [1, 2, 3].map((x) => ({ x })), 2, { order: [0, 0, 1] })).toThrow(RangeError);
    expect(runParallel<Input, Out>(MODULE, [], 2)).toEqual([]);
  });

  it("starts no worker while startWhen says no: the caller runs every task", () => {
    const asked: { ran: number; left: number }[] = [];
    let starts = 0;
    const out = runParallel<Input, Out>(MODULE, [1, 2, 3, 4].map((x) => ({ x })), 2, {
      local: task,
      startWhen: ({ ran, left }) => (asked.push({ ran, left }), false),
      onStart: () => starts++,
    });
    expect(out.map((o) => o.square)).toEqual([1, 4, 9, 16]);
    expect(out.every((o) => o.main)).toBe(true);
    expect(starts).toBe(0);
    // Asked before each of the caller's tasks, with what it has run and what is left.
    expect(asked).toEqual([
      { ran: 0, left: 4 },
      { ran: 1, left: 3 },
      { ran: 2, left: 2 },
      { ran: 3, left: 1 },
    ]);
  });

  it("starts the workers when startWhen says so, and they take the tasks left", () => {
    const seen = new Int32Array(new SharedArrayBuffer(4));
    const starts: number[] = [];
    // The first task runs before any worker; each later one the caller runs waits until a worker has run one.
    const inputs = [{ x: 1 }, ...[2, 3, 4, 5, 6].map((x) => ({ x, seen }))];
    const out = runParallel<Input, Out>(MODULE, inputs, 2, { local: task, startWhen: ({ ran }) => ran >= 1, onStart: (n) => starts.push(n) });
    expect(out.map((o) => o.square)).toEqual([1, 4, 9, 16, 25, 36]);
    expect(starts).toEqual([1]);
    expect(out[0]!.main).toBe(true);
    expect(out.some((o) => !o.main)).toBe(true);
  });

  it("a sweep starts its workers at once for a big point, else once its points left would take a second", () => {
    const big = startWorkers([2 ** 31, 1024]);
    expect(big({ elapsedMs: 0, ran: 0, left: 2 })).toBe(true);
    const small = startWorkers([2 ** 31 - 1, 1024, 1024]);
    expect(small({ elapsedMs: 0, ran: 0, left: 3 })).toBe(false);
    // 700 ms for 2 points: 350 ms each, 3 left (1.05 s) — yes; 2 left (0.7 s) — no.
    expect(small({ elapsedMs: 700, ran: 2, left: 3 })).toBe(true);
    expect(small({ elapsedMs: 700, ran: 2, left: 2 })).toBe(false);
    // Not before 700 ms, and never for one point left.
    expect(small({ elapsedMs: 600, ran: 1, left: 10 })).toBe(false);
    expect(small({ elapsedMs: 5000, ran: 1, left: 1 })).toBe(false);
  });

  it("threads: no more than the tasks, nor than four a core (at least 8), however many jobs are asked", () => {
    expect(threadsFor(4, 100)).toBe(4);
    expect(threadsFor(64, 3)).toBe(3);
    expect(maxThreads()).toBe(Math.max(8, 4 * defaultJobs()));
    expect(threadsFor(300, 4096)).toBe(maxThreads());
    expect(threadsFor(1, 1)).toBe(1);
  });

  it("biggestFirst sorts by work, ties in index order", () => {
    expect(biggestFirst([3, 9, 3, 1, 9])).toEqual([1, 4, 0, 2, 3]);
  });
});
