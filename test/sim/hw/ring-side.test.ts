// A ring side as the steady-state search reads it: comparing a run of descriptors a page at a time
// finds what comparing them one by one finds, on whole rings and on paged (streamed) ones.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { RingSide } from "../../../sim/hw/dma.ts";
import { DescPages } from "../../../src/encd/pages.ts";
import { DESC_BYTES, LEN_CTRL } from "../../../src/encd/udma.ts";

/** Descriptors from a few shapes (so runs of alike ones occur): word 0's flags, a length, an address. */
function ring(shapes: readonly number[]): Uint8Array {
  const out = new Uint8Array(shapes.length * DESC_BYTES);
  const v = new DataView(out.buffer);
  shapes.forEach((s, k) => {
    const meta = s % 7 === 0 ? LEN_CTRL.META : 0;
    v.setUint32(k * DESC_BYTES, LEN_CTRL.LAST | meta | (64 + (s % 2)), true);
    v.setUint32(k * DESC_BYTES + 4, s % 3 === 0 ? 1 : 0, true);
    // Addresses that differ (the judge decides), and words 3 above 2^32 now and then.
    v.setUint32(k * DESC_BYTES + 8, 4096 * (s % 5), true);
    v.setUint32(k * DESC_BYTES + 12, s % 11 === 0 ? 1 : 0, true);
  });
  return out;
}

function paged(bytes: Uint8Array): RingSide {
  const pages = new DescPages();
  pages.append(bytes, 0, bytes.length / DESC_BYTES);
  return RingSide.streamed(pages, bytes.length / DESC_BYTES, undefined);
}

describe("a ring side's descriptors compared a stride apart", () => {
  it("a run compared a page at a time ends where comparing one by one does", () => {
    // (Addresses alike when they agree mod 3 of their 4 KiB blocks: runs end at address changes too.)
    const judge = (a: number, b: number): boolean => Math.floor(a / 4096) % 3 === Math.floor(b / 4096) % 3;
    fc.assert(
      fc.property(fc.constantFrom(4, 60, 5000), fc.integer({ min: 1, max: 1500 }), fc.nat(), fc.constantFrom(1, 2, 3, 6, 300, 513), fc.integer({ min: 0, max: 1600 }), fc.integer({ min: 0, max: 1600 }), fc.boolean(), fc.constantFrom(-1, 0, 1, 511), (every, length, seed, d, y0, upTo, streamed, edge) => {
        // A repeating pattern (a stride of 3) with noise about once in `every` descriptors (runs
        // from a few descriptors to more than a page of 512), and at one place of every page.
        const noise = (k: number) => (Math.imul(k + 1, 2654435761) + seed) >>> 0;
        const shapes = Array.from({ length }, (_, k) => (noise(k) % every === 0 || k % 512 === edge ? 7 * k + 1 : k % 3));
        const bytes = ring(shapes);
        const side = streamed ? paged(bytes) : RingSide.whole(bytes);
        const input = side.steadyInput(judge);
        let y = y0;
        while (y < upTo && y + d < input.count && input.alike(y, y + d)) y++;
        expect(input.alikeUpTo!(y0, d, upTo)).toBe(y);
      }),
      { numRuns: 400, seed: 5 },
    );
  });
});
