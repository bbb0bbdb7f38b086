// Device memory: an image's whole pages are taken as loaded and copied before their first write;
// read-back a page at a time sees what reads see.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DeviceMemory, PAGE_BYTES } from "../../../sim/hw/memory.ts";
import { matches, toBytes } from "../../../src/check/values.ts";

const PAGE = PAGE_BYTES;

/** Byte for byte the same (a deep equality of a megabyte is slow). */
const same = (a: Uint8Array, b: Uint8Array): boolean => Buffer.from(a.buffer, a.byteOffset, a.length).equals(b);

/** The bytes `each` walks over [off, off + len), joined. */
function walked(m: DeviceMemory, off: number, len: number): Uint8Array {
  const out = new Uint8Array(len);
  m.each(off, len, (bytes, at) => {
    out.set(bytes, at);
    return true;
  });
  return out;
}

describe("device memory", () => {
  it("keeps a loaded image's bytes unchanged by later writes, and reads as if they had been copied (random loads and writes)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 3 * PAGE }),
        fc.integer({ min: 1, max: 4 * PAGE }),
        fc.array(fc.record({ at: fc.integer({ min: 0, max: 8 * PAGE }), len: fc.integer({ min: 1, max: 2 * PAGE }), v: fc.integer({ min: 1, max: 255 }) }), { maxLength: 6 }),
        (off, len, writes) => {
          const image = Uint8Array.from({ length: len }, (_, i) => (i * 7 + 3) & 0xff);
          const before = image.slice();
          const m = new DeviceMemory(true);
          // What the memory should hold: a plain model of it.
          const model = new Uint8Array(12 * PAGE);
          m.load(off, image);
          model.set(image, off);
          for (const w of writes) {
            const bytes = new Uint8Array(w.len).fill(w.v);
            m.write(w.at, bytes);
            model.set(bytes, w.at);
          }
          expect(same(image, before)).toBe(true);
          expect(same(m.read(0, model.length), model)).toBe(true);
          expect(same(walked(m, 0, model.length), model)).toBe(true);
          expect(same(walked(m, off + 5, 3 * PAGE), model.subarray(off + 5, off + 5 + 3 * PAGE))).toBe(true);
        },
      ),
      { numRuns: 60, seed: 7 },
    );
  });

  it("the walk stops where its function says", () => {
    const m = new DeviceMemory(true);
    const seen: number[] = [];
    m.each(100, 3 * PAGE, (_, at) => {
      seen.push(at);
      return seen.length < 2;
    });
    expect(seen).toEqual([0, PAGE - 100]);
  });
});

describe("an output checked where it lies", () => {
  const values = Int32Array.from({ length: 3 * PAGE }, (_, i) => (i % 2001) - 1000);
  const want = toBytes("fp32", values);
  const memoryWith = (bytes: Uint8Array): DeviceMemory => {
    const m = new DeviceMemory(true);
    m.write(12, bytes);
    return m;
  };
  it("matches its reference bytes, and not one byte changed in its last page, nor another length", () => {
    expect(matches("fp32", values, want.length, (fn) => memoryWith(want).each(12, want.length, fn))).toBe(true);
    const off = want.slice();
    off[want.length - 3]! ^= 1;
    expect(matches("fp32", values, want.length, (fn) => memoryWith(off).each(12, want.length, fn))).toBe(false);
    expect(matches("fp32", values, want.length - 4, (fn) => memoryWith(want).each(12, want.length - 4, fn))).toBe(false);
  });
});
