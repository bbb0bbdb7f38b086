// A preset the validator accepts never yields a program that hangs: random legal trn1 variants
// (ring channels, receive slots, chunk and fold sizes) under small ops of every ring-family
// collective, faults off. Two receive slots deadlocked every ring; the validator now refuses them.
// Then every shipped preset with any of its numbers set to the validator's bounds (or near
// them): each run either is refused with a reason or ends, its values checked and passing.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { readFileSync } from "node:fs";
import pino from "pino";
import { parseDeviceSpec, parseScenario } from "../../src/scenario/index.ts";
import { runScenario } from "../../src/run/pipeline.ts";
import { CcsimError } from "../../src/ir/errors.ts";
import { refusal } from "../helpers.ts";

const trn1 = JSON.parse(readFileSync("devices/trn1.json", "utf8"));
const PRESETS = ["trn1", "trn1-legacy", "trn2", "trn2-lnc1", "trn2-ultraserver", "trn3", "inf2-48xl"] as const;
const preset = Object.fromEntries(PRESETS.map((n) => [n, JSON.parse(readFileSync(`devices/${n}.json`, "utf8"))]));
/** A preset's numbers and the validator's bounds for them (devices/device.schema.json), small bounds cut to what a small run can reach. */
const BOUNDS: readonly (readonly [string, string, number, number])[] = [
  ["topsp", "semaphores", 1, 256], ["topsp", "entryDecodePs", 0, 1e6], ["topsp", "stepIssuePs", 0, 1e6], ["topsp", "semaWakePs", 0, 1e6],
  ["dma", "enginesPerCore", 1, 32], ["dma", "queuesPerEngine", 1, 16], ["dma", "collectiveQueue", 1, 15], ["dma", "engineBytesPerSecond", 0, 1e15], ["dma", "descriptorCostPs", 0, 1e6],
  ["dma", "maxDescriptorBytes", 64, 65536], ["dma", "cceMaxElements", 1, 1 << 20], ["hbm", "bytesPerSecond", 0, 1e15],
  ["link", "bytesPerSecond", 0, 1e15], ["link", "latencyPs", 0, 1e7], ["ring", "foldN", 1, 4], ["ring", "chunkBytes", 64, 1 << 22], ["ring", "bufferSlots", 3, 64],
  ["ring", "defaultChannels", 1, 32], ["network", "bytesPerSecond", 0, 1e15], ["network", "latencyPs", 0, 1e7], ["network", "messageCostPs", 0, 1e6], ["network", "bufferSlots", 2, 255],
  ["collectives", "meshMaxBytes", 0, 1 << 20], ["collectives", "meshMaxBytesTwoRanks", 0, 1 << 20], ["collectives", "meshMaxBytesMultiNode", 0, 1 << 20],
  ["collectives", "flatRingMinBytes", 0, 1 << 20], ["collectives", "rdhMinBytes", 0, 1 << 20], ["collectives", "rdhMaxBytes", 0, 1 << 22],
  ["collectives", "meshFolds", 1, 32], ["collectives", "permuteChannels", 1, 32], ["topsp", "perDevice", 1, 16],
];
const silent = pino({ level: "silent" });
/** Encoder errors that are the runtime's own refusals (its vring limit, its padding and tp_inc asserts, the mesh tape's size), not encodings out of range. */
const RUNTIME_LIMITS = new Set(["ENC1501", "ENC1503", "ENC1606", "ENC1607", "ENC1702"]);

describe("legal presets never deadlock", () => {
  it("two ring slots are refused with the reason", () => {
    const j = structuredClone(trn1);
    j.ring.bufferSlots = 2;
    expect(() => parseDeviceSpec("p.json", j)).toThrow(/must be at least 3: .*deadlocks/);
  });

  it("the collective queue: 0 is refused with the reason (a device barrier runs on the queue below it; it was an encoder error, found with four concurrent streams); a concurrent program needs a queue a stream below it", () => {
    const j = structuredClone(preset["trn3"]);
    j.dma.collectiveQueue = 0;
    expect(refusal(() => parseDeviceSpec("p.json", j)).render()).toMatch(/p\.json: dma\.collectiveQueue: must be at least 1: a device barrier runs on the queue below the collective one .*\[SCN1101\]/);
    const run = (queue: number, streams: number) => {
      const k = structuredClone(preset["trn3"]);
      k.dma.collectiveQueue = queue;
      const spec = parseDeviceSpec("p.json", k);
      const ops = Array.from({ length: streams }, (_, stream) => ({ op: "all-reduce", bytes: 4096, dtype: "fp32", stream }));
      return runScenario(parseScenario("s.json", { name: "p", instance: "trn3", ranks: 4, concurrent: true, check: "values", ops }), spec, silent);
    };
    for (const streams of [2, 4]) {
      const out = run(streams, streams);
      expect(out.kind).toBe("done");
      if (out.kind === "done") expect(out.concurrent?.mismatch).toBeUndefined();
      expect(() => run(streams - 1, streams)).toThrow(`${streams} concurrent streams need ${streams + 1} DMA queues at and below the collective queue (one each, and the device barrier's); trn3's collective queue ${streams - 1} has ${streams}`);
    }
  });

  it("a network hop's slots: 255 run (each step across the network drains them all), 256 are refused with the reason, not at encoding", () => {
    const run = (slots: number) => {
      const j = structuredClone(trn1);
      j.network.bufferSlots = slots;
      const spec = parseDeviceSpec("p.json", j);
      const scn = parseScenario("s.json", { name: "p", instance: "trn1", ranks: 4, nodes: 2, algorithm: "ring", check: "values", ops: [{ op: "all-reduce", bytes: 4096, dtype: "fp32" }] });
      return runScenario(scn, spec, silent);
    };
    const out = run(255);
    expect(out.kind).toBe("done");
    if (out.kind === "done") expect(out.ops[0]!.row.check).toBe("pass");
    const refused = refusal(() => run(256));
    expect(refused.code).toBe("SCN1005");
    expect(refused.render()).toMatch(/p\.json.*network\.bufferSlots.*at most 255.*8 bits/s);
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

  it("any preset's numbers at the validator's bounds x small ops of every collective, values checked: refused with a reason, or ends and passes", () => {
    fc.assert(
      fc.property(
        fc.record({
          base: fc.constantFrom(...PRESETS),
          // Each change: a field, and where in its range (its minimum, its maximum, a few above the minimum, or anywhere).
          changes: fc.array(fc.record({ field: fc.integer({ min: 0, max: BOUNDS.length - 1 }), at: fc.oneof(fc.constantFrom(0, 1), fc.integer({ min: 2, max: 17 }), fc.double({ min: 0, max: 1, noNaN: true })) }), { minLength: 1, maxLength: 4 }),
          op: fc.constantFrom("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "permute"),
          ranks: fc.constantFrom(2, 4, 6, 8),
          twoNodes: fc.boolean(),
          elemsPerRank: fc.integer({ min: 1, max: 20_000 }),
          dtype: fc.constantFrom("fp32", "bf16", "int8"),
        }),
        (c) => {
          const j = structuredClone(preset[c.base]);
          const changed: string[] = [];
          for (const { field, at } of c.changes) {
            const [section, key, lo, hi] = BOUNDS[field]!;
            if (!j[section] || !(key in j[section])) continue;
            const v = at === 0 ? lo : at === 1 ? hi : at >= 2 ? Math.min(hi, lo + at) : Math.round(lo + (at as number) * (hi - lo));
            j[section][key] = v;
            changed.push(`${section}.${key}=${v}`);
          }
          const nodes = c.twoNodes && j.network ? 2 : 1;
          const ranks = c.ranks * nodes;
          const esize = c.dtype === "fp32" ? 4 : c.dtype === "bf16" ? 2 : 1;
          const what = `${c.base} ${changed.join(", ")}: ${c.op} ${ranks} ranks on ${nodes} node(s), ${c.elemsPerRank * ranks * esize} B ${c.dtype}`;
          let out: ReturnType<typeof runScenario>;
          try {
            const spec = parseDeviceSpec("p.json", j);
            const scn = parseScenario("s.json", {
              name: "p",
              instance: c.base,
              ranks,
              nodes,
              check: "values",
              ops: [{ op: c.op, bytes: c.elemsPerRank * ranks * esize, dtype: c.dtype, ...(c.op === "permute" ? { pairs: Array.from({ length: ranks }, (_, r) => [r, (r + 1) % ranks]) } : {}) }],
            });
            out = runScenario(scn, spec, silent);
          } catch (e) {
            // A refusal (the validator's, the composer's before any program, or one of the runtime's
            // own limits the encoder mirrors) is a clear answer; any other encoder error (a field that
            // does not fit its encoding, an address out of range, a slot taken twice) is a bound the
            // validator let through.
            if (e instanceof CcsimError && (!e.code.startsWith("ENC") || RUNTIME_LIMITS.has(e.code))) return;
            throw new Error(`${what}: ${String(e)}`);
          }
          expect(out.kind, what).toBe("done");
          if (out.kind !== "done") return;
          for (const o of out.ops) {
            expect(o.row.check, what).toBe("pass");
            expect(o.violations, what).toEqual([]);
          }
        },
      ),
      { numRuns: 60, seed: 36 },
    );
  });
});
