// Property: for random rank counts, groups, channels, chunk sizes, dtypes and ops, the emitted
// program runs to completion on trn1 and every rank's output matches the reference bit for bit.
import { describe, it } from "vitest";
import fc from "fast-check";
import { DTYPES, dtypeSize } from "../../src/ir/dtypes.ts";
import { RING_OP_NAMES } from "../../src/ir/spec.ts";
import { expectRunChecks, scenario, trn1 } from "../helpers.ts";


describe("random ring configurations", () => {
  it("always complete and check", () => {
    fc.assert(
      fc.property(
        fc.record({
          ranks: fc.constantFrom(1, 2, 3, 4, 6, 8, 16),
          rpd: fc.constantFrom(1, 2),
          split: fc.boolean(),
          channels: fc.integer({ min: 1, max: 4 }),
          chunkBytes: fc.constantFrom(256, 1024, 8192, 65536),
          dtype: fc.constantFrom(...DTYPES),
          op: fc.constantFrom(...RING_OP_NAMES),
          reduce: fc.constantFrom("sum" as const, "max" as const, "min" as const),
          elemsPerRank: fc.integer({ min: 1, max: 3000 }),
          seed: fc.integer({ min: 0, max: 1000 }),
          extra: fc.integer({ min: 0, max: 15 }),
        }),
        (c) => {
          const ranks = c.ranks % c.rpd === 0 ? c.ranks : c.ranks * c.rpd;
          const groups = c.split && ranks % 2 === 0 && ranks >= 4 ? [[...Array(ranks / 2).keys()], [...Array(ranks / 2).keys()].map((i) => i + ranks / 2)] : [[...Array(ranks).keys()]];
          const n = groups[0]!.length;
          // All-reduce takes any element count: the last block is short (or empty).
          const elems = c.elemsPerRank * n + (c.op === "all-reduce" ? c.extra % n : 0);
          const bytes = elems * dtypeSize(c.dtype);
          const scn = scenario({
            ranks,
            ranksPerDevice: c.rpd,
            replicaGroups: groups,
            channels: c.channels,
            chunkBytes: c.chunkBytes,
            seed: c.seed,
            ops: [{ op: c.op, bytes, dtype: c.dtype, reduce: c.reduce }],
          });
          expectRunChecks(scn, trn1);
        },
      ),
      { numRuns: Number(process.env.CCSIM_PROPERTY_RUNS ?? 60), seed: Number(process.env.CCSIM_PROPERTY_SEED ?? 20261201) },
    );
  });
});
