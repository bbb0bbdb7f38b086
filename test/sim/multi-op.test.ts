// Several ops in one image: each TopSP walks its cc_op entries, trigger_next chaining them.
import { describe, expect, it } from "vitest";
import { compileProgram } from "../../src/enc/compile.ts";
import { compare, generateValues, referenceValues, toBytes } from "../../src/check/values.ts";
import { decodeSpadCtrlEntry } from "../../src/encd/ccop.ts";
import { decodeAddress } from "../../src/encd/address.ts";
import { BARRIER_CONFIG_BYTES, decodeBarrierConfig } from "../../src/encd/barrier.ts";
import { dtypeSize } from "../../src/ir/dtypes.ts";
import { simulate } from "../../sim/index.ts";
import type { RingOpName } from "../../src/ir/spec.ts";
import { scenario, trn1 } from "../helpers.ts";

describe("multi-op program image", () => {
  it("runs three chained ops in order and every output checks", () => {
    const scn = scenario({
      ranks: 4,
      channels: 2,
      ops: [
        { op: "all-reduce", bytes: 65536, dtype: "fp32", reduce: "sum" },
        { op: "all-gather", bytes: 32768, dtype: "bf16", reduce: "sum" },
        { op: "reduce-scatter", bytes: 32768, dtype: "int32", reduce: "min" },
      ],
    });
    const { image, layout } = compileProgram(scn, trn1, [0, 1, 2]);
    const t0 = image.devices[0]!.topsps[0]!;
    expect(t0.opNum).toBe(3);
    expect([0, 1, 2].map((i) => decodeSpadCtrlEntry(t0.ctrlSpad, i * 8).triggerNext)).toEqual([true, true, false]);
    const expected = layout.ops.map((ol, i) => {
      const op = scn.ops[i]!;
      const inputs = ol.ranks.map((rl) => generateValues(1, i, rl.rank, op.dtype, rl.input.bytes / dtypeSize(op.dtype), op.reduce, 4));
      ol.ranks.forEach((rl, k) => image.devices.find((d) => d.device === decodeAddress(rl.input.addr).device)!.memory.push({ addr: rl.input.addr, bytes: toBytes(op.dtype, inputs[k]!) }));
      return referenceValues(op.op as RingOpName, op.dtype, op.reduce, inputs);
    });
    const r = simulate(trn1, image, { storePayload: true });
    expect(r.hang).toBeUndefined();
    expect(r.opEndPs).toHaveLength(3);
    expect(r.opEndPs[0]!).toBeLessThan(r.opEndPs[1]!);
    expect(r.opEndPs[1]!).toBeLessThan(r.opEndPs[2]!);
    layout.ops.forEach((ol, i) => ol.ranks.forEach((rl, k) => expect(compare(scn.ops[i]!.dtype, rl.rank, expected[i]![k]!, r.read(rl.output.addr, rl.output.bytes))).toBeUndefined()));
  });

  it("ends with a counted device barrier: every TopSP that ran the last op meets the others, and a missing arrival hangs there", () => {
    const scn = scenario({
      ranks: 4,
      channels: 2,
      check: "none",
      ops: [
        { op: "all-reduce", bytes: 65536, dtype: "fp32", reduce: "sum" },
        { op: "all-gather", bytes: 32768, dtype: "bf16", reduce: "sum" },
      ],
    });
    const { image } = compileProgram(scn, trn1, [0, 1]);
    const tops = image.devices.flatMap((d) => d.topsps.filter((t) => t.opNum > 0).map((t) => ({ d, t })));
    for (const { t } of tops) {
      expect(decodeBarrierConfig(t.barrierConfig, 0).execute).toBe(false);
      expect(decodeBarrierConfig(t.barrierConfig, 1).execute).toBe(true);
    }
    // Rank 0's leader waits for its other TopSP (step 0) and for the 3 other leaders (step 1).
    const lead = decodeBarrierConfig(image.devices[0]!.topsps[0]!.barrierConfig, 1);
    expect(lead.steps[0]!.waits[0]!.target).toBe(1);
    expect(lead.steps[1]!.waits[0]!.target).toBe(3);
    expect(lead.steps[1]!.m2sVal).toBeGreaterThan(0);
    const r = simulate(trn1, image, { storePayload: false });
    expect(r.hang).toBeUndefined();
    expect(r.endPs).toBeGreaterThan(r.opEndPs[1]!);
    // One more arrival awaited than anyone sends: the leader stops in the barrier.
    const t0 = image.devices[0]!.topsps[0]!;
    const v = new DataView(t0.barrierConfig.buffer, t0.barrierConfig.byteOffset + BARRIER_CONFIG_BYTES);
    v.setUint32(52 + 0x24, 4, true);
    const h = simulate(trn1, image, { storePayload: false }).hang;
    expect(h?.waits.some((w) => w.device === 0 && w.topsp === 0 && w.channel === -2 && w.role === "barrier step 1" && w.awaited === 4)).toBe(true);
  });
});
