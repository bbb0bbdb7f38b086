import { describe, expect, it } from "vitest";
import { BARRIER_CONFIG_BYTES, decodeBarrierConfig, NO_BARRIER, packBarrierConfig, type BarrierConfig } from "../../src/encd/barrier.ts";
import { hex } from "../../src/encd/bits.ts";
import { EncodeError } from "../../src/ir/errors.ts";

const cfg: BarrierConfig = {
  ...NO_BARRIER,
  execute: true,
  steps: [
    { m2sVal: 0, s2mVal: 0, waits: [{ sema: 0x1122_3344_5566, target: 3 }] },
    { m2sVal: 0x0102, s2mVal: 0x0304, waits: [] },
  ],
  dmaSyncSemas: [0xaabb],
  dmaSyncValue: 7,
  m2sTail: 0x0fff_e000_f038,
  s2mTail: 0x0fff_e002_f038,
  mask: 0x8000_0001,
  descCount: 9,
  totalDescN: 10,
  enginesBitmap: 0x0001,
  queueId: 14,
};

describe("neff_barrier_config", () => {
  it("is 296 bytes: steps of 52 at 0, dma_sync_sema at 0xD0, apb broadcast at 0xF0, gate at 0x124", () => {
    const out = new Uint8Array(2 * BARRIER_CONFIG_BYTES);
    packBarrierConfig(cfg, out, 1);
    const b = out.subarray(BARRIER_CONFIG_BYTES);
    expect(out.subarray(0, BARRIER_CONFIG_BYTES).every((x) => x === 0)).toBe(true);
    // step 0: m2s/s2m 0, barrier_sema[0] at +4, target_sema_val[0] at +0x24
    expect(hex(b.subarray(0, 12))).toBe("00 00 00 00 66 55 44 33 22 11 00 00");
    expect(hex(b.subarray(0x24, 0x28))).toBe("03 00 00 00");
    // step 1 at +52: m2s_val 0x0102, s2m_val 0x0304
    expect(hex(b.subarray(52, 56))).toBe("02 01 04 03");
    expect(hex(b.subarray(0xd0, 0xd8))).toBe("bb aa 00 00 00 00 00 00");
    expect(hex(b.subarray(0xf0, 0x104))).toBe("38 f0 00 e0 ff 0f 00 00 38 f0 02 e0 ff 0f 00 00 01 00 00 80");
    expect(hex(b.subarray(0x10c, 0x110))).toBe("07 00 00 00");
    expect(hex(b.subarray(0x118, 0x125))).toBe("09 00 00 00 0a 00 00 00 01 00 0e 00 01");
  });

  it("decodes what it packs, unused slots as zero", () => {
    const out = new Uint8Array(BARRIER_CONFIG_BYTES);
    packBarrierConfig(cfg, out, 0);
    const d = decodeBarrierConfig(out, 0);
    expect(d.execute).toBe(true);
    expect(d.steps).toHaveLength(4);
    expect(d.steps[0]!.waits[0]).toEqual({ sema: 0x1122_3344_5566, target: 3 });
    expect(d.steps[0]!.waits[1]).toEqual({ sema: 0, target: 0 });
    expect(d.steps[1]).toMatchObject({ m2sVal: 0x0102, s2mVal: 0x0304 });
    expect(d.steps[3]).toEqual({ m2sVal: 0, s2mVal: 0, waits: Array(4).fill({ sema: 0, target: 0 }) });
    expect(d).toMatchObject({ dmaSyncValue: 7, m2sTail: cfg.m2sTail, s2mTail: cfg.s2mTail, mask: cfg.mask, descCount: 9, totalDescN: 10, enginesBitmap: 1, queueId: 14 });
  });

  it("refuses a field that does not fit", () => {
    expect(() => packBarrierConfig({ ...cfg, steps: [{ m2sVal: 0x10000, s2mVal: 0, waits: [] }] }, new Uint8Array(BARRIER_CONFIG_BYTES), 0)).toThrow(EncodeError);
    expect(() => packBarrierConfig({ ...cfg, queueId: 256 }, new Uint8Array(BARRIER_CONFIG_BYTES), 0)).toThrow(/queue_id/);
  });
});
