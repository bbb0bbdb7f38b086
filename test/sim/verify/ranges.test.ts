import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { RangeMap } from "../../../sim/verify/ranges.ts";

/** The map read back byte by byte (undefined where nothing is stored). */
function bytes(m: RangeMap<number>, n: number): (number | undefined)[] {
  const out: (number | undefined)[] = [];
  m.visit(0, n, (a, b, v) => {
    for (let k = a; k < b; k++) out.push(v);
  });
  return out;
}

describe("RangeMap", () => {
  it("a replacement whose right-edge merge empties its block (blocks of 2) leaves the map whole", () => {
    // The shrunk counterexample of the property below (it once threw reading a dropped block).
    const m = new RangeMap<number>((x, y) => x === y, 2);
    const ops = [
      { a: 523, len: 71, v: 3 },
      { a: 0, len: 1, v: 0 },
      { a: 2, len: 1, v: 0 },
      { a: 594, len: 1, v: 0 },
      { a: 3, len: 1, v: 1 },
      { a: 594, len: 2, v: 3 },
    ];
    for (const { a, len, v } of ops) m.update(a, a + len, () => v);
    const ref: (number | undefined)[] = new Array(600).fill(undefined);
    for (const { a, len, v } of ops) for (let k = a; k < Math.min(600, a + len); k++) ref[k] = v;
    expect(bytes(m, 600)).toEqual(ref);
  });

  it.each([128, 2])("agrees with a byte array under random updates, and merges equal neighbours (blocks of %i)", (block) => {
    const N = 600;
    const op = fc.record({ a: fc.integer({ min: 0, max: N - 1 }), len: fc.integer({ min: 1, max: 80 }), v: fc.integer({ min: -1, max: 3 }), shift: fc.boolean() });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 400 }), (ops) => {
        const m = new RangeMap<number>((x, y) => x === y, block);
        const ref: (number | undefined)[] = new Array(N).fill(undefined);
        for (const { a, len, v, shift } of ops) {
          const b = Math.min(N, a + len);
          // -1 clears; `shift` maps each stored piece (and fills gaps) instead of setting one value.
          if (shift) {
            m.update(a, b, (old) => (old === undefined ? (v < 0 ? undefined : v) : (old + 1) % 4));
            for (let k = a; k < b; k++) ref[k] = ref[k] === undefined ? v : (ref[k]! + 1) % 4;
          } else {
            m.update(a, b, () => (v < 0 ? undefined : v));
            for (let k = a; k < b; k++) ref[k] = v < 0 ? undefined : v;
          }
          for (let k = a; k < b; k++) if (ref[k] === -1) ref[k] = undefined;
        }
        expect(bytes(m, N)).toEqual(ref);
        // Maximal merging: no two stored pieces touch with the same value.
        let prev: { b: number; v: number | undefined } | undefined;
        m.visit(0, N, (a, b, v) => {
          if (prev && v !== undefined && prev.v === v) expect(prev.b).not.toBe(a);
          prev = { b, v };
        });
      }),
      { numRuns: 300 },
    );
  });

  it("keeps many pieces in order across blocks", () => {
    const m = new RangeMap<number>();
    // Interleaved inserts, as two channels writing alternate pieces would make them.
    for (let k = 0; k < 2000; k++) m.set(k * 20, k * 20 + 10, k);
    for (let k = 1999; k >= 0; k--) m.set(k * 20 + 10, k * 20 + 20, -k);
    expect(m.size).toBe(4000);
    const seen: number[] = [];
    m.visit(0, 40000, (a, _b, v) => {
      if (a % 20 === 0) seen.push(v!);
    });
    expect(seen).toEqual([...Array(2000).keys()]);
  });
});
