// Descriptor pages: a list grows page by page, drops the pages its engine has run, and a page it
// drops is handed to the next list that grows — whose descriptors read back as packed.
import { describe, expect, it } from "vitest";
import { DescPages, PAGE_DESCS } from "../../src/encd/pages.ts";
import { DESC_BYTES, packRx, readRx, descFields } from "../../src/encd/udma.ts";

function fill(list: DescPages, n: number, base: number): void {
  for (let i = 0; i < n; i++) packRx(base + 16 * i, 4 + (i % 100), 1, {}, list.next());
}

describe("descriptor pages", () => {
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
});
