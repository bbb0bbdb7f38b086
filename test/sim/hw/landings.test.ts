// A queue's pending semaphore landings: taken oldest first, across wrap-around and growth.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { Landings } from "../../../sim/hw/dma.ts";
import { InternalError } from "../../../src/ir/errors.ts";

describe("Landings", () => {
  it("gives back what was pushed in push order, whatever the interleaving of pushes and shifts", () => {
    fc.assert(
      fc.property(fc.array(fc.boolean(), { maxLength: 200 }), (ops) => {
        const l = new Landings();
        const model: number[] = [];
        let next = 0;
        for (const push of ops) {
          if (push || model.length === 0) {
            l.push(next, undefined, next + 1, undefined, undefined);
            model.push(next++);
          } else {
            const got = l.shift();
            const want = model.shift()!;
            expect([got.addr, got.len]).toEqual([want, want + 1]);
          }
        }
        for (const want of model) expect(l.shift().addr).toBe(want);
      }),
      { numRuns: 300 },
    );
  });

  it("grows while wrapped: 3 in, 2 out, 6 in, all out in order", () => {
    const l = new Landings();
    for (let i = 0; i < 3; i++) l.push(i, undefined, 4, undefined, undefined);
    expect([l.shift().addr, l.shift().addr]).toEqual([0, 1]);
    for (let i = 3; i < 9; i++) l.push(i, undefined, 4, undefined, undefined);
    expect(Array.from({ length: 7 }, () => l.shift().addr)).toEqual([2, 3, 4, 5, 6, 7, 8]);
    expect(() => l.shift()).toThrow(InternalError);
  });
});
