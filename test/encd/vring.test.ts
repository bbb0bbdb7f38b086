import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { dumpToPringPadded, Vring, VRING_DESC_LIMIT } from "../../src/encd/vring.ts";
import { DescPages } from "../../src/encd/pages.ts";
import { Signature, UnitAddresses } from "../../src/encd/signature.ts";
import { hbmAddr, semaAddr } from "../../src/encd/address.ts";
import { decodeRx, decodeTx, packCceMeta, packRx, packTx } from "../../src/encd/udma.ts";
import { CcsimError } from "../../src/ir/errors.ts";
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

  it("packs a CCE reduce's packets as the packers do one descriptor at a time (sources, replicated destinations, a short last packet, offsets, packets across a page's end)", () => {
    const cat = (parts: Uint8Array[]) => Uint8Array.from(parts.flatMap((b) => [...b]));
    fc.assert(
      fc.property(
        fc.record({
          op: fc.constantFrom(SdmaCceType.ADD, SdmaCceType.MAX, SdmaCceType.MIN),
          dtype: fc.constantFrom(6, 8, 10, 15),
          srcs: fc.array(fc.integer({ min: 0, max: 2 ** 40 }), { minLength: 1, maxLength: 5 }),
          dsts: fc.array(fc.integer({ min: 0, max: 2 ** 40 }), { minLength: 1, maxLength: 4 }),
          packet: fc.integer({ min: 1, max: 65536 }),
          packets: fc.integer({ min: 1, max: 5 }),
          short: fc.integer({ min: 0, max: 65535 }),
          off: fc.integer({ min: 0, max: 2 ** 20 }),
          // Copies before it, so that its packets start anywhere in a page (512 descriptors) and cross its end.
          before: fc.oneof(fc.integer({ min: 0, max: 8 }), fc.integer({ min: 500, max: 520 }), fc.integer({ min: 1015, max: 1030 })),
        }),
        (c) => {
          // (One source needs several destinations: a replication.)
          const dsts = c.srcs.length === 1 && c.dsts.length === 1 ? [...c.dsts, c.dsts[0]! + 4096] : c.dsts;
          const bytes = c.packet * c.packets - (c.short % c.packet);
          const v = new Vring("t");
          const tx: Uint8Array[] = [];
          const rx: Uint8Array[] = [];
          for (let i = 0; i < c.before; i++) {
            v.addCopy(0x100 + 4 * i, 0x8000 + 4 * i, 4);
            tx.push(packTx(0x100 + 4 * i, 4, 1, { first: true, last: true, dmb: true }));
            rx.push(packRx(0x8000 + 4 * i, 4, 1));
          }
          v.addCce(c.op, c.dtype, c.srcs, dsts, bytes, c.packet, c.off);
          for (let done = c.off; done < c.off + bytes; done += c.packet) {
            const chunk = Math.min(c.off + bytes - done, c.packet);
            tx.push(packCceMeta(c.op, c.dtype, chunk, 1, undefined, dsts.length));
            c.srcs.forEach((a, i) => tx.push(packTx(a + done, chunk, 1, i === c.srcs.length - 1 ? { last: true } : { concat: true }, 0)));
            for (const a of dsts) rx.push(packRx(a + done, chunk, 1));
          }
          expect(hex(v.txBytes())).toBe(hex(cat(tx)));
          expect(hex(v.rxBytes())).toBe(hex(cat(rx)));
          expect({ tx: v.totalTxBytes, rx: v.totalRxBytes }).toEqual({ tx: bytes * c.srcs.length + 4 * c.before, rx: bytes * dsts.length + 4 * c.before });
          expect({ tx: v.txCount, rx: v.rxCount }).toEqual({ tx: tx.length, rx: rx.length });
        },
      ),
      { numRuns: 300, seed: 7 },
    );
  });

  it("a CCE reduce that passes the ring's limit, or an address beyond 2^53, is refused where the packers refuse it", () => {
    const refusal = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return e instanceof CcsimError ? { code: e.code, message: e.message } : e;
      }
      return undefined;
    };
    // A limit of 10 descriptors a side: the third packet's META is the 11th TX descriptor.
    expect(refusal(() => new Vring("small", 10).addCce(SdmaCceType.ADD, 10, [0x1000, 0x2000, 0x3000], 0x4000, 3 * 4096, 4096))).toEqual({ code: "ENC1501", message: "Descriptor limit reached. Descriptors in vring small, Max allowed 10" });
    // The second source's second packet starts past 2^53 (its first ends there: the packers check where a descriptor starts).
    expect(refusal(() => new Vring("far").addCce(SdmaCceType.ADD, 10, [0x1000, 2 ** 53 - 3000], 0x4000, 8192, 4096))).toMatchObject({ code: "ENC1002", message: `field buf_ptr=${2 ** 53 - 3000 + 4096} is not a valid 64-bit address in udma_desc` });
    expect(refusal(() => new Vring("near").addCce(SdmaCceType.ADD, 10, [0x1000, 2 ** 53 - 6000], 0x4000, 8192, 4096))).toBeUndefined();
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

describe("a tallied vring's semaphore write", () => {
  it("counts, hashes, pins and sums as the 4-byte copy it is", () => {
    const tallied = () => {
      const sig = new Signature();
      const v = new Vring("t", VRING_DESC_LIMIT, { tx: new DescPages(false), rx: new DescPages(false) }, { tally: true, sig: { sig, addresses: new UnitAddresses(1, 16) } });
      return { v, sig };
    };
    const a = tallied();
    const b = tallied();
    const semas = [hbmAddr(1, 64), semaAddr(1, 0, 3, "inc"), semaAddr(17, 2, 5, "inc")];
    for (const s of semas) {
      expect(a.v.addSemaphoreWrite(hbmAddr(1, 8), s)).toEqual(b.v.addCopy(hbmAddr(1, 8), s, 4));
      a.v.pinLastRx();
      b.v.pinLastRx();
    }
    expect([a.v.txCount, a.v.rxCount, a.v.totalTxBytes, a.v.totalRxBytes]).toEqual([b.v.txCount, b.v.rxCount, b.v.totalTxBytes, b.v.totalRxBytes]);
    expect(a.sig.value).toBe(b.sig.value);
    expect(a.sig.cross).toEqual(b.sig.cross);
    expect([...a.v.rxPins]).toEqual([...b.v.rxPins]);
    expect(a.v.rxPins.size).toBe(3);
  });
});
