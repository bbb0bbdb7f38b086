import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // Every core runs test files (vitest's default leaves one idle); the conformance matrix is split
    // over two files so that the slowest file is not the suite's floor.
    maxWorkers: Math.max(1, availableParallelism()),
    // Command lines the tests start take their relative paths from the project's folder, wherever
    // `npm test` was typed (src/cli/entry.ts reads INIT_CWD as the user's folder).
    env: { INIT_CWD: process.cwd() },
  },
});
