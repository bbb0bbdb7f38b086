// The steady-state search's history of marks: its budget counts the numbers of the marks it holds.
import { describe, expect, it } from "vitest";
import { History } from "../../sim/steady-state.ts";

/** Marks of `size` numbers each, added until the history holds more than `budget` (then the oldest go), as the search does. */
function fill(h: History<{ hash: number; size: number }>, sizes: readonly number[], budget: number): number {
  for (const [i, size] of sizes.entries()) {
    h.add({ hash: i % 3, size });
    while (h.length > 1 && h.values > budget) h.dropOldest();
  }
  return h.length;
}

describe("the history of marks", () => {
  it("counts what it holds: after dropping and clearing, a new run of marks gets the whole budget again", () => {
    const sizes = Array.from({ length: 40 }, (_, i) => 100 + (i % 7) * 10);
    const fresh = new History<{ hash: number; size: number }>();
    const held = fill(fresh, sizes, 1000);
    expect(held).toBeGreaterThan(5);
    expect(fresh.values).toBe(sizes.slice(-held).reduce((a, b) => a + b, 0));
    // (A jump clears the history; so does a change of cadence.)
    fresh.clear();
    expect([fresh.length, fresh.values, fresh.sameHash(0).length]).toEqual([0, 0, 0]);
    expect(fill(fresh, sizes, 1000)).toBe(held);
  });

  it("finds the marks of a hash, oldest first, and forgets those it drops", () => {
    const h = new History<{ hash: number; size: number; at: number }>();
    for (let at = 0; at < 6; at++) h.add({ hash: at % 2, size: 1, at });
    expect(h.sameHash(0).map((m) => m.at)).toEqual([0, 2, 4]);
    h.dropOldest();
    h.dropOldest();
    expect(h.sameHash(0).map((m) => m.at)).toEqual([2, 4]);
    expect(h.sameHash(1).map((m) => m.at)).toEqual([3, 5]);
    expect(h.oldest.at).toBe(2);
    expect(h.sameHash(7)).toEqual([]);
  });
});
