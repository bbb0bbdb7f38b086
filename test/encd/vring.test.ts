import { describe, expect, it } from "vitest";
import { dumpToPringPadded, Vring } from "../../src/encd/vring.ts";
import { decodeRx, decodeTx } from "../../src/encd/udma.ts";
import { hex } from "../../src/encd/bits.ts";
import { SdmaCceType } from "../../src/ir/enums.ts";

describe("vring -> pring", () => {
  it("splits a copy into <= 64 KiB pairs with DMB on the last chunk", () => {
    const v = new Vring("t");
    expect(v.addCopy(0x10000, 0x100000, 65536 + 100)).toEqual({ tx: 2, rx: 2 });
    const tx = v.txBytes();
    expect(decodeTx(tx, 0)).toMatchObject({ length: 65536, dmb: false, src: 0x10000 });
    expect(decodeTx(tx, 16)).toMatchObject({ length: 100, dmb: true, src: 0x20000 });
    expect(decodeRx(v.rxBytes(), 16)).toMatchObject({ length: 100, dst: 0x110000 });
  });

  it("tiles a CCE reduce into META + one descriptor per source + one RX", () => {
    const v = new Vring("t");
    expect(v.addCce(SdmaCceType.ADD, 10, [0x1000, 0x2000], 0x3000, 8192, 4096)).toEqual({ tx: 6, rx: 2 });
    const tx = v.txBytes();
    expect(decodeTx(tx, 0)).toMatchObject({ kind: "cce", length: 4096 });
    expect(decodeTx(tx, 16)).toMatchObject({ kind: "data", concat: true, last: false, src: 0x1000 });
    expect(decodeTx(tx, 32)).toMatchObject({ kind: "data", concat: false, last: true, src: 0x2000 });
    expect(decodeTx(tx, 64)).toMatchObject({ kind: "data", src: 0x2000 });
    expect(decodeTx(tx, 80)).toMatchObject({ src: 0x3000 });
  });

  it("golden padded pring: one copy pair then a 4-byte self-copy no-op pair", () => {
    const v = new Vring("t");
    v.addCopy(0x40, 0x80, 8);
    const p = dumpToPringPadded(v, 2, 2, 0x4);
    expect(hex(p.tx)).toBe("08 00 00 4d 03 00 08 01 40 00 00 00 00 00 00 00 04 00 00 4d 03 00 08 01 04 00 00 00 00 00 00 00");
    expect(hex(p.rx)).toBe("08 00 00 01 00 00 00 00 80 00 00 00 00 00 00 00 04 00 00 01 00 00 00 00 04 00 00 00 00 00 00 00");
  });

  it("fails to pad a vring that is already longer than the padded size", () => {
    const v = new Vring("big");
    v.addCopy(0, 64, 4);
    v.addCopy(0, 64, 4);
    expect(() => dumpToPringPadded(v, 1, 1, 0)).toThrow("Failed to pad vring big from 2 descriptors to 1 descriptors");
    expect(() => dumpToPringPadded(v, 3, 2, 0)).toThrow(/padding differ/);
  });
});
