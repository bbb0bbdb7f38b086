// Descriptor pages: a list grows page by page, drops the pages its engine has run, and a page it
// drops is handed to the next list that grows — whose descriptors read back as packed.
import { describe, expect, it } from "vitest";
import { DescPages, forgetFreePages, freePages, PAGE_DESCS } from "../../src/encd/pages.ts";
import { DESC_BYTES, packCceMeta, packRx, packTx, readRx, descFields } from "../../src/encd/udma.ts";
import { SdmaCceType } from "../../src/ir/enums.ts";

function fill(list: DescPages, n: number, base: number): void {
  for (let i = 0; i < n; i++) packRx(base + 16 * i, 4 + (i % 100), 1, {}, list.next());
}

describe("descriptor pages", () => {
  it("lists that share a counter count every descriptor appended to any of them, packed one by one or appended in runs", () => {
    const shared = { n: 0 };
    const a = new DescPages(true, shared);
    const b = new DescPages(true, shared);
    const alone = new DescPages();
    fill(a, PAGE_DESCS + 3, 0x1000);
    fill(alone, 5, 0x1000);
    const run = new Uint8Array(3 * PAGE_DESCS * DESC_BYTES);
    b.append(run, DESC_BYTES, 3 * PAGE_DESCS - 1);
    fill(b, 2, 0x2000);
    expect(shared.n).toBe(a.count + b.count);
    expect(shared.n).toBe(PAGE_DESCS + 3 + 3 * PAGE_DESCS + 1);
    expect(alone.count).toBe(5);
  });

  it("a run page dropped by one list and reused by another reads back as the new list packed it", () => {
    const a = new DescPages();
    fill(a, 3 * PAGE_DESCS, 0x1000);
    a.release(2 * PAGE_DESCS);
    expect(a.heldPages).toBe(1);
    const b = new DescPages();
    fill(b, 2 * PAGE_DESCS + 7, 0x900000);
    const f = descFields();
    for (let i = 0; i < b.count; i++) {
      readRx(b.page(i), b.offsetOf(i), f);
      expect([f.dst, f.length]).toEqual([0x900000 + 16 * i, 4 + (i % 100)]);
    }
    // The first list still holds its last page, untouched.
    readRx(a.page(3 * PAGE_DESCS - 1), a.offsetOf(3 * PAGE_DESCS - 1), f);
    expect(f.dst).toBe(0x1000 + 16 * (3 * PAGE_DESCS - 1));
    expect(() => a.page(0)).toThrow(/not held/);
    expect(b.flat().length).toBe(b.count * DESC_BYTES);
  });

  it("packs through a page's words the bytes a packer writes byte by byte (kept pages and a counting slot)", () => {
    const kept = new DescPages();
    const counted = new DescPages(false);
    const addrs = [0, 0xffffffff, 0x100000000, 2 ** 48 + 0x1234_5678, 2 ** 53 - 1];
    for (const addr of addrs) {
      for (const list of [kept, counted]) {
        const expected = [packTx(addr, 4096, 1, { last: true, dmb: true }), packRx(addr, 65536, 1, { strongOrder: true }), packCceMeta(SdmaCceType.MAX, 10, 4096, 1)];
        const got = [packTx(addr, 4096, 1, { last: true, dmb: true }, undefined, list.next()), packRx(addr, 65536, 1, { strongOrder: true }, list.next()), packCceMeta(SdmaCceType.MAX, 10, 4096, 1, list.next())];
        got.forEach((bytes, k) => {
          const at = list.keeps ? list.offsetOf(list.count - 3 + k) : 0;
          if (!list.keeps && k < 2) return; // a counting list holds its last descriptor only
          expect(bytes.subarray(at, at + DESC_BYTES)).toEqual(expected[k]);
        });
      }
    }
    expect(kept.count).toBe(3 * addrs.length);
  });

  it("free pages are forgotten when a program is done with its rings: the next list packs into fresh ones", () => {
    const a = new DescPages();
    fill(a, 2 * PAGE_DESCS, 0x1000);
    const first = a.page(0);
    a.release(2 * PAGE_DESCS);
    expect(freePages()).toBeGreaterThanOrEqual(2);
    // Reused while the pool holds it (the last dropped is handed out first)...
    const b = new DescPages();
    fill(b, 2 * PAGE_DESCS, 0x2000);
    expect([b.page(0), b.page(PAGE_DESCS)]).toContain(first);
    b.release(2 * PAGE_DESCS);
    // ...and not once the pool is let go (a pooled page kept its whole slab alive).
    forgetFreePages();
    expect(freePages()).toBe(0);
    const c = new DescPages();
    fill(c, 2 * PAGE_DESCS, 0x3000);
    expect([c.page(0), c.page(PAGE_DESCS)]).not.toContain(first);
  });
});
