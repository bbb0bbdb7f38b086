import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { decodeSpadCtrlEntry, packSpadCtrlEntry, ringEntry, type CcOpEntry } from "../../src/encd/ccop.ts";
import { hex } from "../../src/encd/bits.ts";
import { EncAlgType, EncPattern } from "../../src/ir/enums.ts";
import { EncodeError } from "../../src/ir/errors.ts";

describe("spad_ctrl_entry / cc_op_entry", () => {
  it("packs a ring entry: header cc_op=1, algo_type nibble, trigger_next bit 15, channel_list at +4", () => {
    const bytes = packSpadCtrlEntry(ringEntry(0b101, { triggerNext: true, reporter: true }));
    expect(hex(bytes)).toBe("01 80 01 00 05 00 00 00");
  });

  it("packs the mesh view: sema_shift_offset u16 at +4, sema_mask u16 at +6, sub_type in bits 6:4", () => {
    const e: CcOpEntry = { ...ringEntry(0), algoType: EncPattern.MESH, algoSubType: 3, semaShiftOffset: 0x1234, semaMask: 0xabcd, ringWaitComplete: true, ringSendComplete: true, safeMode: true, uniqueTensors: true };
    expect(hex(packSpadCtrlEntry(e))).toBe("01 31 1e 00 34 12 cd ab");
  });

  it("decodes both union views of the same bytes", () => {
    const d = decodeSpadCtrlEntry(Uint8Array.from([0x01, 0x00, 0x00, 0x00, 0x34, 0x12, 0xcd, 0xab]));
    expect(d.ccOp).toBe(true);
    expect(d.channelList).toBe(0xabcd1234);
    expect(d.semaShiftOffset).toBe(0x1234);
    expect(d.semaMask).toBe(0xabcd);
  });

  it("safe_mode is bit 19 of the little-endian 32-bit view of container bytes 0..3", () => {
    const b = packSpadCtrlEntry(ringEntry(1, { safeMode: true }));
    const w = new DataView(b.buffer).getUint32(0, true);
    expect((w >>> 19) & 1).toBe(1);
  });

  it("merges reserved bits from the previous slot content", () => {
    const old = Uint8Array.from([0xfe, 0, 0xe0, 0, 0, 0, 0, 0]);
    const b = packSpadCtrlEntry(ringEntry(1), old);
    expect(b[0]).toBe(0xff);
    expect(b[2]).toBe(0xe0);
  });

  it("refuses an enc_alg_type in the 4-bit algo_type (11 fits the nibble but is not a pattern)", () => {
    expect(() => packSpadCtrlEntry({ ...ringEntry(1), algoType: EncAlgType.INVALID })).toThrow(EncodeError);
    expect(() => packSpadCtrlEntry({ ...ringEntry(1), algoType: 16 })).toThrow(/does not fit 4 bits/);
    expect(() => packSpadCtrlEntry({ ...ringEntry(1), algoSubType: 8 })).toThrow(/algo_sub_type/);
    expect(() => packSpadCtrlEntry(ringEntry(2 ** 32))).toThrow(/channel_list/);
  });

  it("round-trips decode(encode(x)) = x", () => {
    const bool = fc.boolean();
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1 }), fc.integer({ min: 0, max: 7 }), bool, bool, bool, bool, bool, bool, fc.integer({ min: 0, max: 0xffffffff }), (algoType, algoSubType, triggerNext, reporter, ringWaitComplete, ringSendComplete, safeMode, uniqueTensors, u) => {
        const e: CcOpEntry = { algoType, algoSubType, triggerNext, reporter, ringWaitComplete, ringSendComplete, safeMode, uniqueTensors, channelList: u, semaShiftOffset: u & 0xffff, semaMask: u >>> 16 };
        const d = decodeSpadCtrlEntry(packSpadCtrlEntry(e));
        expect({ ...d, ccOp: undefined, headerReserved: undefined, flagsReserved: undefined }).toEqual({ ...e, ccOp: undefined, headerReserved: undefined, flagsReserved: undefined });
        expect(d.ccOp).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});
