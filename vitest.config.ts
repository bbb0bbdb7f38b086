import { availableParallelism } from "node:os";
import { relative } from "node:path";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * The files that take longest, longest first: vitest, without a record of earlier runs (a clean
 * clone, CI), starts the biggest files first, and these are small files whose cases are big, so
 * they came last and the suite waited on them alone (225 s against 200 s of work a core).
 */
const LONGEST = ["test/scenarios/", "test/sim/fold.test.ts", "test/enc/streamed.test.ts", "test/cli/merge.test.ts", "test/cli/calibrate.test.ts", "test/run/conformance"];

class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (f: TestSpecification): number => {
      const k = LONGEST.findIndex((p) => relative(process.cwd(), f.moduleId).startsWith(p));
      return k < 0 ? LONGEST.length : k;
    };
    return sorted.map((f, i) => ({ f, i })).sort((a, b) => rank(a.f) - rank(b.f) || a.i - b.i).map(({ f }) => f);
  }
}

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // Every core runs test files (vitest's default leaves one idle); the conformance matrix is split
    // over two files so that the slowest file is not the suite's floor.
    maxWorkers: Math.max(1, availableParallelism()),
    // Test files share a worker's module cache (each file importing the whole tool afresh was a
    // tenth of the suite); no test mocks modules or changes the environment.
    isolate: false,
    // The young generation the npm scripts give the tool (package.json), so that the suite runs it
    // as users do (a run's objects that live for the run were copied from one small semi-space to
    // the other until promoted). Collection on the thread that allocates: the suite keeps every core
    // busy with test files, and helper threads for the collector only took time from the other file
    // (the suite's CPU time 398 -> 383 s of tests, 207 -> 199 s whole; bench/README.md).
    execArgv: ["--max-semi-space-size=64", "--single-threaded-gc"],
    sequence: { sequencer: LongestFirst },
    // Command lines the tests start take their relative paths from the project's folder, wherever
    // `npm test` was typed (src/cli/entry.ts reads INIT_CWD as the user's folder).
    env: { INIT_CWD: process.cwd() },
  },
});
