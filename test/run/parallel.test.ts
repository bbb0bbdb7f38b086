// Runs on worker threads (and the caller's): results in input order, whichever thread took a task.
import { describe, expect, it } from "vitest";
import { runParallel } from "../../src/run/parallel.ts";
import { biggestFirst } from "../../src/cli/sweep.ts";
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

  it("refuses an order that does not list every input once", () => {
    expect(() => runParallel<Input, Out>(MODULE, [1, 2, 3].map((x) => ({ x })), 2, { order: [0, 0, 1] })).toThrow(RangeError);
    expect(runParallel<Input, Out>(MODULE, [], 2)).toEqual([]);
  });

  it("biggestFirst sorts by work, ties in index order", () => {
    expect(biggestFirst([3, 9, 3, 1, 9])).toEqual([1, 4, 0, 2, 3]);
  });
});
