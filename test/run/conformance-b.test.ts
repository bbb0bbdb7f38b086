// The conformance matrix's second half (conformance.test.ts runs the first).
import { describe, expect, it } from "vitest";
import { generateCases, runCase, REFUSAL_CODES } from "../../src/run/conformance.ts";
import { CASES, MATRIX, SEED, secondHalf, specs } from "./conformance-cases.ts";

describe("conformance matrix, second half", () => {
  const cases = generateCases(SEED, CASES, MATRIX, specs);
  it.each(secondHalf(cases).map((c) => [c.id, c.label, c] as const))("case %i: %s", (_id, _label, c) => {
    const o = runCase(c);
    if (o.kind === "fail") expect.fail(`${o.code}: ${o.message}`);
    if (o.kind === "refused") expect(REFUSAL_CODES.has(o.code)).toBe(true);
  });
});

describe("conformance matrix above 64 ranks (timing only)", () => {
  // Groups of 65 to 128 ranks, run as a timing-only sweep runs them (alike pods folded): they run
  // or are refused, none hangs, and the verifier's checks that need no payload (stray writes,
  // unbalanced semaphores, rings left unconsumed) pass. Their values are `npm run conformance`'s.
  const cases = generateCases(SEED + 2, 8, { ...MATRIX, minRanks: 65, maxRanks: 128 }, specs);
  it("draws only groups above 64 ranks", () => {
    expect(cases.every((c) => (c.scenario["ranks"] as number) > 64)).toBe(true);
  });
  it.each(cases.map((c) => [c.id, c.label, c] as const))("case %i: %s", (_id, _label, c) => {
    const o = runCase({ ...c, scenario: { ...c.scenario, check: "none" } });
    if (o.kind === "fail") expect.fail(`${o.code}: ${o.message}`);
    if (o.kind === "refused") expect(REFUSAL_CODES.has(o.code)).toBe(true);
  });
});
