// The scenarios the suite runs end to end, split over three test files (the suite's workers run
// them side by side; one file of them all was the suite's longest by far).
import { readdirSync, readFileSync } from "node:fs";
import { expect } from "vitest";
import { main } from "../../src/cli/sim.ts";

export const SCENARIO_FILES = readdirSync("scenarios")
  .filter((f) => f.endsWith(".json") && !f.endsWith(".schema.json"))
  .sort();

/** The scenarios of more than 256 ranks (a file of their own: they take as long as the rest's halves). */
export const BIG_SCENARIOS = SCENARIO_FILES.filter((f) => (JSON.parse(readFileSync(`scenarios/${f}`, "utf8")) as { ranks: number }).ranks > 256);

/** Every other one of the rest, from the first (`half` 0) or the second (1). */
export const scenarioHalf = (half: 0 | 1): string[] => SCENARIO_FILES.filter((f) => !BIG_SCENARIOS.includes(f)).filter((_, k) => k % 2 === half);

/**
 * Run `scenarios/<f>` as a user would (its JSON report): it exits 0 and every row passes its check
 * (a timing-only scenario's rows say the check was skipped).
 */
export function runsAndPasses(f: string): void {
  const timingOnly = (JSON.parse(readFileSync(`scenarios/${f}`, "utf8")) as { check?: string }).check === "none";
  let out = "";
  let err = "";
  const code = main([`scenarios/${f}`, "--json"], (s) => (out += s), (s) => (err += s));
  expect(err).toBe("");
  expect(code).toBe(0);
  const j = JSON.parse(out);
  expect(j.results.length).toBeGreaterThan(0);
  for (const r of j.results) {
    expect(r.check).toBe(timingOnly ? "skipped" : "pass");
    expect(r.timeUs).toBeGreaterThan(0);
  }
}
