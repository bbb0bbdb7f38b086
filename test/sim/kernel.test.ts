import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { Kernel, Prio, Resource } from "../../sim/kernel/kernel.ts";
import { SimError } from "../../src/ir/errors.ts";

describe("event kernel", () => {
  it("orders by time, then priority, then insertion (FIFO ties)", () => {
    const k = new Kernel();
    const log: string[] = [];
    k.at(10, Prio.ENGINE, () => log.push("10e"));
    k.at(10, Prio.LAND, () => log.push("10l-a"));
    k.at(5, Prio.ENGINE, () => log.push("5"));
    k.at(10, Prio.LAND, () => log.push("10l-b"));
    k.at(10, Prio.WAKE, () => k.after(0, Prio.LAND, () => log.push("10l-late")));
    const s = k.run();
    expect(log).toEqual(["5", "10l-a", "10l-b", "10l-late", "10e"]);
    expect(s).toEqual({ events: 6, endPs: 10 });
  });

  it("rejects negative and non-integer delays and runaway models", () => {
    const k = new Kernel();
    expect(() => k.after(-3, Prio.WAKE, () => {})).toThrow(SimError);
    expect(() => k.after(1.5, Prio.WAKE, () => {})).toThrow(/non-integer/);
    const loop = new Kernel();
    const again = (): void => loop.after(1, Prio.WAKE, again);
    again();
    expect(() => loop.run(1000)).toThrow(/more than 1000 events/);
  });

  it("keeps a large random schedule sorted", () => {
    const k = new Kernel();
    const seen: number[] = [];
    let x = 12345;
    for (let i = 0; i < 5000; i++) {
      x = (x * 1103515245 + 12345) % 2 ** 31;
      const t = x % 1000;
      k.at(t, Prio.WAKE, () => seen.push(t));
    }
    k.run();
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
  });

  it("a resource books the earliest free slot of its length, filling gaps, as a plain interval list does", () => {
    // The reference: every booking kept, the earliest gap found by a scan from the start.
    const reference = () => {
      const booked: [number, number][] = [];
      return (earliest: number, dur: number): number => {
        let start = earliest;
        for (const [a, b] of booked) if (start + dur > a && start < b) start = b;
        booked.push([start, start + dur]);
        booked.sort((x, y) => x[0] - y[0]);
        return start;
      };
    };
    const request = fc.record({ advance: fc.integer({ min: 0, max: 50 }), ahead: fc.integer({ min: 0, max: 200 }), dur: fc.integer({ min: 1, max: 60 }) });
    fc.assert(
      fc.property(fc.array(request, { minLength: 1, maxLength: 300 }), (reqs) => {
        const r = new Resource("r", 1);
        const ref = reference();
        let now = 0;
        for (const q of reqs) {
          now += q.advance;
          const got = r.reserve(now + q.ahead, q.dur, now);
          expect(got).toBe(ref(now + q.ahead, q.dur));
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe("a resource as the steady-state search reads it", () => {
  it("is unused until first booked or counted, and used from then on", () => {
    const fresh = new Resource("link", 1e9);
    expect(fresh.usedSoFar()).toBe(false);
    // Booked: used, and still used once its bookings have ended and been forgotten (many of them,
    // so that the bookings array is compacted).
    const r = new Resource("link", 1e9);
    for (let i = 0; i < 100; i++) r.reserve(i * 10, 5, i * 10);
    expect(r.usedSoFar()).toBe(true);
    r.reserve(100_000, 0, 100_000);
    expect(r.usedSoFar()).toBe(true);
    // Counted busy or carrying bytes without a booking (a core's time, a stage's share): used.
    const busy = new Resource("core", 0);
    busy.busyPs += 7;
    expect(busy.usedSoFar()).toBe(true);
    const carried = new Resource("hbm", 0);
    carried.bytes += 64;
    expect(carried.usedSoFar()).toBe(true);
  });
});
