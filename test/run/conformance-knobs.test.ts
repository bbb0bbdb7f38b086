// The conformance matrix with channels, priority classes and a second op on another stream (a file of
// its own, beside the two halves of the plain matrix).
import { describe, expect, it } from "vitest";
import { generateCases, runCase, REFUSAL_CODES } from "../../src/run/conformance.ts";
import { CASES, CASE_TIMEOUT_MS, MATRIX, SEED, specs } from "./conformance-cases.ts";

describe("conformance matrix with channels, priority classes and a second op on another stream", () => {
  const cases = generateCases(SEED + 1, Math.ceil(CASES / 3), { ...MATRIX, knobs: true }, specs);
  it.each(cases.map((c) => [c.id, c.label, c] as const))("case %i: %s", (_id, _label, c) => {
    const o = runCase(c);
    if (o.kind === "fail") expect.fail(`${o.code}: ${o.message}`);
    if (o.kind === "refused") expect(REFUSAL_CODES.has(o.code)).toBe(true);
    // (A case of many ranks checks values with race detection, whose clocks grow with the ranks: one
    // takes over a minute alone, more beside other test files.)
  }, CASE_TIMEOUT_MS);
});

