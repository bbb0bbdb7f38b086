// A preset the validator accepts never yields a program that hangs: random legal trn1 variants
// (ring channels, receive slots, chunk and fold sizes) under small ops of every ring-family
// collective, faults off. Two receive slots deadlocked every ring; the validator now refuses them.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { readFileSync } from "node:fs";
import pino from "pino";
import { parseDeviceSpec, parseScenario } from "../../src/scenario/index.ts";
import { runScenario } from "../../src/run/pipeline.ts";
import { CcsimError } from "../../src/ir/errors.ts";

const trn1 = JSON.parse(readFileSync("devices/trn1.json", "utf8"));
const silent = pino({ level: "silent" });

describe("legal presets never deadlock", () => {
  it("two ring slots are refused with the reason", () => {
    const j = structuredClone(trn1);
    j.ring.bufferSlots = 2;
    expect(() => parseDeviceSpec("p.json", j)).toThrow(/must be at least 3: .*deadlocks/);
  });

  it("random channels, slots, chunks and folds x small ring, all-gather, reduce-scatter and all-reduce ops: no hang", () => {
    fc.assert(
      fc.property(
        fc.record({
          channels: fc.integer({ min: 1, max: 8 }),
          slots: fc.integer({ min: 3, max: 6 }),
          chunkKiB: fc.constantFrom(1, 4, 64, 256),
          foldN: fc.integer({ min: 1, max: 2 }),
          ranks: fc.constantFrom(2, 4, 6, 8),
          op: fc.constantFrom("all-reduce", "all-gather", "reduce-scatter"),
          elemsPerRank: fc.integer({ min: 1, max: 3000 }),
          algorithm: fc.constantFrom("auto", "ring"),
        }),
        (c) => {
          const j = structuredClone(trn1);
          j.ring.defaultChannels = c.channels;
          j.ring.bufferSlots = c.slots;
          j.ring.chunkBytes = c.chunkKiB * 1024;
          j.ring.foldN = c.foldN;
          const spec = parseDeviceSpec("p.json", j);
          const scn = parseScenario("s.json", { name: "p", instance: "trn1", ranks: c.ranks, ranksPerDevice: 2, algorithm: c.algorithm, check: "none", ops: [{ op: c.op, bytes: 4 * c.ranks * c.elemsPerRank, dtype: "fp32" }] });
          try {
            const out = runScenario(scn, spec, silent);
            expect(out.kind, JSON.stringify(c)).toBe("done");
          } catch (e) {
            // A refusal (the composer's own, before any program) is a clear answer, not a hang.
            if (!(e instanceof CcsimError)) throw e;
          }
        },
      ),
      { numRuns: 40, seed: 35 },
    );
  });
});
