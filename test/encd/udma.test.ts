import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { cceMetaWord, decodeRx, decodeTx, descFields, encodeLength, isCmeDesc, META_CTRL_COPY, packCceMeta, packRx, packTx, readRx, readRxWords, readTx, readTxWords } from "../../src/encd/udma.ts";
import { hex, readAddr, wordsOf } from "../../src/encd/bits.ts";
import { SdmaCceType } from "../../src/ir/enums.ts";
import { EncodeError } from "../../src/ir/errors.ts";

describe("16-byte UDMA descriptor", () => {
  it("golden copy pair: TX FIRST|LAST|DMB, default meta_ctrl 03 00 08 01, source pointer; RX destination", () => {
    const tx = packTx(0x0001_0000_0000_1000, 4096, 1, { first: true, last: true, dmb: true });
    expect(hex(tx)).toBe("00 10 00 4d 03 00 08 01 00 10 00 00 00 00 01 00");
    const rx = packRx(0x0002_0000_0000_2000, 4096, 1);
    expect(hex(rx)).toBe("00 10 00 01 00 00 00 00 00 20 00 00 00 00 02 00");
  });

  it("encodes 64 KiB as length 0 and reads it back as 65536", () => {
    const tx = packTx(0, 65536, 1, { first: true, last: true });
    expect(hex(tx.subarray(0, 4))).toBe("00 00 00 0d");
    expect(decodeTx(tx, 0)).toMatchObject({ kind: "data", length: 65536 });
    expect(encodeLength(65536)).toBe(0);
    expect(() => encodeLength(65537)).toThrow(EncodeError);
    expect(() => encodeLength(0)).toThrow(/outside 1..65536/);
  });

  it("puts the ring id in bits 25:24", () => {
    for (const id of [0, 1, 2, 3]) {
      const w = new DataView(packRx(0, 4, id).buffer).getUint32(0, true);
      expect((w >>> 24) & 3).toBe(id);
      expect(decodeRx(packRx(0, 4, id), 0).ringId).toBe(id);
    }
    expect(() => packRx(0, 4, 4)).toThrow(/ring_id=4 does not fit 2 bits/);
  });

  it("golden CCE op words: add, max and min over fp32 share base 0x02000000 and differ in bits 2:0", () => {
    expect(cceMetaWord(SdmaCceType.ADD, 10).toString(16)).toBe("20aa080");
    expect(cceMetaWord(SdmaCceType.MAX, 10).toString(16)).toBe("20aaa12");
    expect(cceMetaWord(SdmaCceType.MIN, 10).toString(16)).toBe("20aaa13");
    expect(() => cceMetaWord(SdmaCceType.FMA, 10)).toThrow(/unsupported op! \(1\)/);
  });

  it("golden CCE META descriptor: FIRST|META|ring id, op word, length in word 2 (MIN/MAX marker 0x2000000)", () => {
    expect(hex(packCceMeta(SdmaCceType.ADD, 6, 4096, 1))).toBe("00 00 80 05 80 60 06 02 00 10 00 00 00 00 00 00");
    expect(hex(packCceMeta(SdmaCceType.MAX, 6, 4096, 1))).toBe("00 00 80 05 12 66 06 02 00 10 00 02 00 00 00 00");
    const d = decodeTx(packCceMeta(SdmaCceType.MIN, 8, 2048, 1), 0);
    expect(d).toMatchObject({ kind: "cce", op: SdmaCceType.MIN, dtype: 8, length: 2048, ringId: 1, dests: 1 });
  });

  it("replication (v3+): destinations - 1 in W3 bits 7:0 of the META descriptor", () => {
    const m = packCceMeta(SdmaCceType.ADD, 10, 4096, 1, undefined, 3);
    expect(hex(m)).toBe("00 00 80 05 80 a0 0a 02 00 10 00 00 02 00 00 00");
    expect(decodeTx(m, 0)).toMatchObject({ kind: "cce", dests: 3, length: 4096 });
    expect(() => packCceMeta(SdmaCceType.ADD, 10, 4096, 1, undefined, 257)).toThrow(EncodeError);
  });

  it("tells copies from compute by ssmae_op (is_cme_desc)", () => {
    expect(isCmeDesc(META_CTRL_COPY)).toBe(true);
    expect(isCmeDesc(cceMetaWord(SdmaCceType.ADD, 10))).toBe(false);
  });

  it("round-trips TX and RX descriptors", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 52 }), fc.integer({ min: 1, max: 65536 }), fc.integer({ min: 0, max: 3 }), fc.boolean(), fc.boolean(), fc.boolean(), (addr, len, ring, first, last, dmb) => {
        const t = decodeTx(packTx(addr, len, ring, { first, last, dmb }), 0);
        expect(t).toEqual({ kind: "data", length: len, ringId: ring, first, last, concat: false, dmb, metaCtrl: META_CTRL_COPY, src: addr });
        expect(decodeRx(packRx(addr, len, ring), 0)).toEqual({ length: len, ringId: ring, last: false, strongOrder: false, dst: addr });
      }),
      { numRuns: 300 },
    );
  });

  it("rejects addresses that are not safe non-negative integers", () => {
    expect(() => packTx(-1, 4, 1, {})).toThrow(/not a valid 64-bit address/);
    expect(() => packRx(2 ** 60, 4, 1)).toThrow(EncodeError);
  });

  it("decodes from a ring's words as from its bytes (aligned view or misaligned copy), every field", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 64, maxLength: 64 }), fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 3 }), (raw, shift, k) => {
        // The ring's bytes at byte offset `shift` of their buffer (not 4-aligned unless 0).
        const ring = new Uint8Array(raw.length + shift).subarray(shift);
        ring.set(raw);
        const w = wordsOf(ring);
        expect(w.length).toBe(16);
        expect(readTxWords(w, 4 * k, descFields())).toEqual(readTx(ring, 16 * k, descFields()));
        expect(readRxWords(w, 4 * k, descFields())).toEqual(readRx(ring, 16 * k, descFields()));
      }),
      { numRuns: 300 },
    );
    // A CCE META descriptor and a data descriptor above 2^53 (NaN address), through both.
    const ring = new Uint8Array(32);
    ring.set(packCceMeta(SdmaCceType.MAX, 10, 4096, 1, undefined, 2), 0);
    ring.set([0, 16, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x20, 0], 16);
    const w = wordsOf(ring);
    expect(readTxWords(w, 0, descFields())).toMatchObject({ meta: true, length: 4096, op: SdmaCceType.MAX, dtype: 10, dests: 2 });
    expect(readTxWords(w, 4, descFields()).src).toBeNaN();
    expect(readTxWords(w, 4, descFields())).toEqual(readTx(ring, 16, descFields()));
  });
});

describe("readAddr", () => {
  it("reads a little-endian u64 below 2^53 exactly, and NaN from 2^53 up", () => {
    const at = (v: bigint): number => {
      const view = new DataView(new ArrayBuffer(12));
      view.setBigUint64(4, v, true);
      return readAddr(view, 4);
    };
    for (const v of [0n, 5n, 0xffffffffn, 0x100000000n, 0x1_2345_6789_abcdn, 2n ** 53n - 1n]) expect(at(v)).toBe(Number(v));
    for (const v of [2n ** 53n, 2n ** 53n + 1n, 2n ** 64n - 1n]) expect(at(v)).toBeNaN();
  });
});
