// Kangaring: only each chip's primary is on the ring; it reduces its chip's inputs (N reads, one
// write) and duplicates finished pieces into its secondaries' outputs.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import pino from "pino";
import { runScenario } from "../../src/run/pipeline.ts";
import { EncAlgType } from "../../src/ir/enums.ts";
import { dtypeSize } from "../../src/ir/dtypes.ts";
import type { OpName } from "../../src/ir/spec.ts";
import { compileProgram } from "../../src/enc/compile.ts";
import { loadDevice } from "../../src/run/load.ts";
import { simulate } from "../../sim/index.ts";
import { DESC_BYTES, decodeTx } from "../../src/encd/udma.ts";
import { decodeSpadCtrlEntry } from "../../src/encd/ccop.ts";
import { decodeChannelConfig } from "../../src/encd/channel.ts";
import { decodeSlotEntry, StepFlag } from "../../src/encd/slot.ts";
import { expectRunChecks, scenario, trn1, anyDtype, collectiveOp } from "../helpers.ts";

const trn2 = loadDevice("trn2");

const silent = pino({ level: "silent" });
const KANG = [EncAlgType.RING, EncAlgType.KANGARING];

describe("kangaring on trn1", () => {
  it("random configurations (1 or 2 ranks per device, one or two groups) resolve to kangaring and check", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(1, 2),
        fc.boolean(),
        collectiveOp,
        anyDtype,
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

describe("kangaring on the two edge-disjoint cycles of 16 trn1 devices", () => {
  it("alternates primary and secondary between the cycles, and checks with 4 channels", () => {
    const scn = scenario({ ranks: 32, ranksPerDevice: 2, channels: 4, chunkBytes: 4096, algorithm: "auto", allowedAlgorithms: KANG, ops: [{ op: "all-reduce", bytes: 32 * 1000 * 4, dtype: "fp32", reduce: "sum" }] });
    expectRunChecks(scn, trn1, "kangaring");
    const { image } = compileProgram(scn, trn1, [0]);
    // On device 0 (ranks 0 and 1): which core's copy of channel c sends (waits for credit).
    const sender = (c: number) => {
      const cores: number[] = [];
      for (const t of image.devices[0]!.topsps) {
        if (!((decodeSpadCtrlEntry(t.ctrlSpad, 0).channelList >>> c) & 1)) continue;
        const spad = t.slotSpad[decodeChannelConfig(t.ringConfig, c).spadSlotIdx]!;
        for (let o = 0; o < spad.length; o += 8) if (decodeSlotEntry(spad, o).flags & StepFlag.WAIT_CREDIT) cores.push(Math.floor(t.index / 3));
      }
      return [...new Set(cores)];
    };
    expect([0, 1, 2, 3].map(sender)).toEqual([[0], [0], [1], [1]]);
  });
});

describe("kangaring on trn2 (CCE replication: one read, a write per destination)", () => {
  it("random configurations check", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(2, 4),
        collectiveOp,
        anyDtype,
        fc.integer({ min: 1, max: 200 }),
        fc.integer({ min: 1, max: 2 }),
        (rpd, op, dtype, elems, channels) => {
          const ranks = 8 * rpd;
          const scn = scenario({ instance: "trn2", ranks, ranksPerDevice: rpd, algorithm: "auto", allowedAlgorithms: [EncAlgType.KANGARING], channels, chunkBytes: 4096, ops: [{ op, bytes: elems * ranks * dtypeSize(dtype), dtype, reduce: "sum" }] });
          expectRunChecks(scn, trn2, "kangaring");
        },
      ),
      { numRuns: 12, seed: 7 },
    );
  });

  /** HBM bytes the simulator counted on every device (reads and writes), per byte of the op. */
  const hbmPerByte = (op: OpName, alg: EncAlgType): number => {
    const S = 1 << 22;
    const scn = scenario({ instance: "trn2", ranks: 32, ranksPerDevice: 2, channels: 2, check: "none", algorithm: "auto", allowedAlgorithms: [alg], ops: [{ op, bytes: S, dtype: "fp32", reduce: "sum" }] });
    const { image, layout } = compileProgram(scn, trn2, [0]);
    expect(layout.ops[0]!.algorithm).toBe(alg);
    const r = simulate(trn2, image, { storePayload: false });
    expect(r.hang).toBeUndefined();
    return r.hbm.reduce((n, h) => n + h.bytes, 0) / S;
  };

  it("touches HBM 3 times per all-gather byte where the ring touches it 4 times, 4 vs 6 for reduce-scatter (2 ranks per chip)", () => {
    expect(hbmPerByte("all-gather", EncAlgType.KANGARING) / hbmPerByte("all-gather", EncAlgType.RING)).toBeCloseTo(3 / 4, 2);
    expect(hbmPerByte("reduce-scatter", EncAlgType.KANGARING) / hbmPerByte("reduce-scatter", EncAlgType.RING)).toBeCloseTo(4 / 6, 2);
  });

  it("emits replicated CCE packets only where the arch has them", () => {
    const scn = scenario({ instance: "trn2", ranks: 16, ranksPerDevice: 2, channels: 1, check: "none", algorithm: "auto", allowedAlgorithms: [EncAlgType.KANGARING], ops: [{ op: "all-gather", bytes: 1 << 16, dtype: "fp32", reduce: "sum" }] });
    const dests = (spec: typeof trn2) => {
      const { image } = compileProgram({ ...scn, instance: spec.name }, spec, [0]);
      let n = 0;
      for (const d of image.devices) for (const q of d.queues) for (let o = 0; o < q.tx.length; o += DESC_BYTES) {
        const t = decodeTx(q.tx, o);
        if (t.kind === "cce" && t.dests > 1) n++;
      }
      return n;
    };
    expect(dests(trn2)).toBeGreaterThan(0);
    expect(dests({ ...trn2, arch: 2 })).toBe(0);
  });
});
