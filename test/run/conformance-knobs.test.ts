// The conformance matrix with channels, priority classes and a second op on another stream (a file of
// its own, beside the two halves of the plain matrix).
import { describe, expect, it } from "vitest";
import { CHOSEN_COUNT_REFUSALS, generateCases, loadPresets, runCase, REFUSAL_CODES, setsCounts } from "../../src/run/conformance.ts";
import { CASES, CASE_TIMEOUT_MS, MATRIX, SEED, specs } from "./conformance-cases.ts";

describe("conformance matrix with channels, priority classes and a second op on another stream", () => {
  const cases = generateCases(SEED + 1, Math.ceil(CASES / 3), { ...MATRIX, knobs: true }, specs);
  it.each(cases.map((c) => [c.id, c.label, c] as const))("case %i: %s", (_id, _label, c) => {
    const o = runCase(c);
    if (o.kind === "fail") expect.fail(`${o.code}: ${o.message}`);
    // (A channel count the case sets may be refused: its channel sets need more engines than a rank has.)
    if (o.kind === "refused") expect(REFUSAL_CODES.has(o.code) || (CHOSEN_COUNT_REFUSALS.has(o.code) && setsCounts(c))).toBe(true);
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

describe("a preset changed to fewer semaphores than the channels need", () => {
  // `npm run conformance -- --seed 31337 --knobs --set topsp.semaphores=32`'s case 53: trn2, 45 ranks
  // on 5 nodes, reduce-scatter: the preset's 4 channels need more of a TopSP's semaphores than 32.
  const sets = [{ path: "topsp.semaphores", value: 32 }];
  const presets = loadPresets(["trn1", "trn2", "trn2-lnc1", "inf2-48xl", "inf2-24xl", "trn2-ultraserver"], undefined, sets);
  const c = { ...generateCases(31337, 54, { maxBytes: 4 << 20, minBytes: 1, maxCheckedPayload: 64 << 20, knobs: true }, presets)[53]!, sets };
  it("is refused (CMP1305), the message naming the semaphores needed and the preset's field", () => {
    expect(c.scenario["instance"]).toBe("trn2");
    const o = runCase(c);
    expect(o).toMatchObject({ kind: "refused", code: "CMP1305" });
    expect(o.kind === "refused" && o.message).toMatch(/4 channel\(s\) need \d+ semaphores on a TopSP; trn2's TopSPs have 32 \(topsp\.semaphores\)/);
  });
  it("and on the shipped preset the same case passes", () => {
    const { sets: _sets, ...shipped } = c;
    expect(runCase(shipped)).toMatchObject({ kind: "pass" });
  });
});
