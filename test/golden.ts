// Golden files: compare with test/golden/<name>; UPDATE_GOLDEN=1 rewrites them (review the diff).
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { expect } from "vitest";

export function expectGolden(name: string, actual: string): void {
  const file = `test/golden/${name}`;
  if (process.env.UPDATE_GOLDEN === "1" || (!existsSync(file) && !process.env.CI)) {
    writeFileSync(file, actual);
    return;
  }
  expect(actual).toBe(readFileSync(file, "utf8"));
}
