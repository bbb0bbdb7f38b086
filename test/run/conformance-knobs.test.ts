// The conformance matrix with channels, priority classes and a second op on another stream (a file of
// its own, beside the two halves of the plain matrix).
import { describe, expect, it } from "vitest";
import { generateCases, runCase, REFUSAL_CODES, setsCounts } from "../../src/run/conformance.ts";
import { CASES, CASE_TIMEOUT_MS, MATRIX, SEED, specs } from "./conformance-cases.ts";

describe("conformance matrix with channels, priority classes and a second op on another stream", () => {
  const cases = generateCases(SEED + 1, Math.ceil(CASES / 3), { ...MATRIX, knobs: true }, specs);
  it.each(cases.map((c) => [c.id, c.label, c] as const))("case %i: %s", (_id, _label, c) => {
    const o = runCase(c);
    if (o.kind === "fail") expect.fail(`${o.code}: ${o.message}`);
    // (A channel count the case sets may be refused: its channel sets need more engines than a rank has.)
    if (o.kind === "refused") expect(REFUSAL_CODES.has(o.code) || (o.code === "CMP1304" && setsCounts(c))).toBe(true);
    // (A case of many ranks checks values with race detection, whose clocks grow with the ranks: one
    // takes over a minute alone, more beside other test files.)
  }, CASE_TIMEOUT_MS);
});

describe("a channel count the case sets", () => {
  // `npm run conformance -- --seed 105 --knobs`'s case 284 (its default sizes): trn2-lnc1, 88 ranks
  // at 4 a device on 2 nodes, hierarchical, 2 channels: 3 channel sets x 2 channels x 4 folds need
  // 24 of a rank's 16 engines.
  const c = generateCases(105, 285, { maxBytes: 4 << 20, minBytes: 1, maxCheckedPayload: 64 << 20, knobs: true }, specs)[284]!;
  it("is refused where its channel sets need more engines than a rank has (CMP1304), not failed", () => {
    expect(c.scenario["instance"]).toBe("trn2-lnc1");
    expect(c.scenario["channels"]).toBe(2);
    expect(runCase(c)).toMatchObject({ kind: "refused", code: "CMP1304" });
  });
  it("and without it the composer picks a count that fits, and the case passes", () => {
    const { channels: _set, ...scenario } = c.scenario;
    expect(runCase({ ...c, scenario })).toMatchObject({ kind: "pass" });
  });
});
