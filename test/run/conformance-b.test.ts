// The conformance matrix's second half (conformance.test.ts runs the first).
import { describe, expect, it } from "vitest";
import { generateCases, runCase, REFUSAL_CODES } from "../../src/run/conformance.ts";
import { CASES, SEED, secondHalf, specs } from "./conformance-cases.ts";

describe("conformance matrix, second half", () => {
  const cases = generateCases(SEED, CASES, { maxBytes: 1 << 20, maxCheckedPayload: 64 << 20 }, specs);
  it.each(secondHalf(cases).map((c) => [c.id, c.label, c] as const))("case %i: %s", (_id, _label, c) => {
    const o = runCase(c);
    if (o.kind === "fail") expect.fail(`${o.code}: ${o.message}`);
    if (o.kind === "refused") expect(REFUSAL_CODES.has(o.code)).toBe(true);
  });
});
