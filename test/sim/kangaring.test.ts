// Kangaring: only each chip's primary is on the ring; it reduces its chip's inputs (N reads, one
// write) and duplicates finished pieces into its secondaries' outputs.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import pino from "pino";
import { runScenario } from "../../src/cli/pipeline.ts";
import { EncAlgType } from "../../src/ir/enums.ts";
import { DTYPES, dtypeSize } from "../../src/ir/dtypes.ts";
import type { OpName } from "../../src/ir/spec.ts";
import { expectRunChecks, scenario, trn1 } from "../helpers.ts";

const silent = pino({ level: "silent" });
const KANG = [EncAlgType.RING, EncAlgType.KANGARING];

describe("kangaring on trn1", () => {
  it("random configurations (1 or 2 ranks per device, one or two groups) resolve to kangaring and check", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(1, 2),
        fc.boolean(),
        fc.constantFrom("all-gather", "all-reduce", "reduce-scatter") as fc.Arbitrary<OpName>,
        fc.constantFrom(...DTYPES),
        fc.integer({ min: 1, max: 400 }),
        fc.integer({ min: 0, max: 31 }),
        fc.integer({ min: 1, max: 2 }),
        (rpd, split, op, dtype, elems, extra, channels) => {
          const ranks = rpd === 2 ? 32 : 16;
          const groups = split && rpd === 2 ? [[...Array(16).keys()], [...Array(16).keys()].map((i) => i + 16)] : [[...Array(ranks).keys()]];
          const n = groups[0]!.length;
          const count = elems * n + (op === "all-reduce" ? extra % n : 0);
          const scn = scenario({ ranks, ranksPerDevice: rpd, replicaGroups: groups, algorithm: "auto", allowedAlgorithms: KANG, channels, chunkBytes: 4096, ops: [{ op, bytes: count * dtypeSize(dtype), dtype, reduce: "sum" }] });
          expectRunChecks(scn, trn1, "kangaring");
        },
      ),
      { numRuns: 30, seed: 5 },
    );
  });

  it("halves the hops of a small all-reduce on 32 ranks: faster than the ring of all ranks", () => {
    const time = (allowed: EncAlgType[]) => {
      const out = runScenario(scenario({ ranks: 32, ranksPerDevice: 2, algorithm: "auto", allowedAlgorithms: allowed, channels: 2, check: "none", ops: [{ op: "all-reduce", bytes: 4096, dtype: "fp32", reduce: "sum" }] }), trn1, silent);
      if (out.kind !== "done") throw new Error("hang");
      return out.ops[0]!.row;
    };
    const k = time(KANG);
    const r = time([EncAlgType.RING]);
    expect(k.algorithm).toBe("kangaring");
    expect(r.algorithm).toBe("ring");
    expect(k.timeUs).toBeLessThan(0.75 * r.timeUs);
  });
});
