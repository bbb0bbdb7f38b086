// The conformance matrix in the suite: seeded random legal configurations (every preset, rank
// counts with primes, placements, group shapes, all 13 ops, dtypes, reduce ops, sizes, auto and
// each named algorithm) either pass or are refused by the runtime before composing.
import { describe, expect, it } from "vitest";
import { generateCases, runCase, REFUSAL_CODES, CONFORMANCE_PRESETS } from "../../src/run/conformance.ts";
import { SCENARIO_OP_NAMES } from "../../src/ir/spec.ts";
import { main } from "../../src/cli/conformance.ts";

import { CASES, MATRIX, SEED, firstHalf, specs } from "./conformance-cases.ts";

describe("conformance matrix", () => {
  const cases = generateCases(SEED, CASES, MATRIX, specs);

  it("covers every preset, all 13 ops and all-gather-v, auto and named algorithms, several group shapes", () => {
    const field = (k: string) => new Set(cases.map((c) => JSON.stringify(k === "op" ? (c.scenario["ops"] as { op: string }[])[0]!.op : c.scenario[k])));
    expect(field("instance").size).toBe(CONFORMANCE_PRESETS.length);
    expect(field("op").size).toBe(SCENARIO_OP_NAMES.length);
    expect(field("algorithm").size).toBeGreaterThan(8);
    expect(new Set(cases.map((c) => (c.scenario["replicaGroups"] as number[][]).length)).size).toBeGreaterThan(3);
  });

  // The first half of the cases; conformance-b.test.ts runs the second (two files the suite's
  // workers can run side by side).
  it.each(firstHalf(cases).map((c) => [c.id, c.label, c] as const))("case %i: %s", (_id, _label, c) => {
    const o = runCase(c);
    if (o.kind === "fail") expect.fail(`${o.code}: ${o.message}`);
    if (o.kind === "refused") expect(REFUSAL_CODES.has(o.code)).toBe(true);
  });

  it("the same seed gives the same cases", () => {
    expect(generateCases(SEED, 20, MATRIX, specs)).toEqual(cases.slice(0, 20));
  });
});

describe("npm run conformance --verbose", () => {
  it("on one thread (lines as cases end) the lines and the summary are those of two threads", () => {
    const run = (jobs: string) => {
      const lines: string[] = [];
      const code = main(["--cases", "6", "--seed", "3", "--jobs", jobs, "--verbose"], (s) => lines.push(s), () => {});
      expect(code).toBe(0);
      return lines;
    };
    const one = run("1");
    const two = run("2");
    // The six case lines come first, one write each, before the summary.
    expect(one.slice(0, 6).every((l) => /^\s+\d+ (pass|refused|fail) /.test(l))).toBe(true);
    const noTime = (ls: string[]) => ls.join("").replace(/, [\d.]+ s\n/, "\n");
    expect(noTime(one)).toBe(noTime(two));
  });

  it("--dump ID draws ID + 1 cases, not --cases of them: the same scenario either way, at once", () => {
    const dumped = (cases: string) => {
      let out = "";
      expect(main(["--cases", cases, "--dump", "3"], (s) => (out += s), () => {})).toBe(0);
      return out;
    };
    expect(dumped("1000000000")).toBe(dumped("4"));
    let err = "";
    expect(main(["--cases", "3", "--dump", "3"], () => {}, (s) => (err += s))).toBe(1);
    expect(err).toMatch(/no case 3 \(3 cases\)/);
  });

  it("--vary-presets: cases vary the preset's ring (within the validator's bounds) and none fails", () => {
    const list = generateCases(7, 16, { maxBytes: 64 << 10, maxCheckedPayload: 1 << 20, varyPresets: true }, specs);
    const plain = generateCases(7, 16, { maxBytes: 64 << 10, maxCheckedPayload: 1 << 20 }, specs);
    // A separate random stream: the scenarios are the same cases, the presets vary.
    expect(list.map((c) => c.scenario)).toEqual(plain.map((c) => c.scenario));
    for (const c of list) {
      expect(c.preset?.["ring"]?.["bufferSlots"]).toBeGreaterThanOrEqual(3);
      const o = runCase(c);
      expect(o.kind, `${c.label}: ${o.kind === "pass" ? "" : o.message}`).not.toBe("fail");
    }
  });

  it("a size band that holds nothing, or beyond any preset, is refused before any work", () => {
    let err = "";
    expect(main(["--cases", "3", "--min-bytes", "1M", "--max-bytes", "1K"], () => {}, (s) => (err += s))).toBe(1);
    expect(err).toMatch(/--min-bytes 1048576 is above --max-bytes 1024/);
    expect(main(["--cases", "3", "--max-bytes", "99999999999999"], () => {}, (s) => (err += s))).toBe(1);
    expect(err).toMatch(/at most 17179869184 B/);
  });

  it("more cases than a run draws at once are refused before any is drawn (10^11 generated for ever); --dump draws up to its case", () => {
    let err = "";
    for (const n of ["100001", "99999999999"]) expect(main(["--cases", n], () => {}, (s) => (err += s))).toBe(1);
    expect(err).toMatch(/--cases 100001: at most 100000 a run .*more cases are more seeds/);
    expect(err).toMatch(/--cases 99999999999: at most 100000/);
  });
});
