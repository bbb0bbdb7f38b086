// Unit-relative address hashing: the codes `addUnitAddress` keeps between calls change nothing it
// hashes. Each hash is checked against the same addresses decoded one by one (`unitAddressCode`),
// over address streams that revisit a few devices' HBM windows and semaphores from several
// devices and unit sizes, so kept codes are hit, missed and overwritten in between.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { addUnitAddress, Signature, UnitAddresses, unitAddressCode } from "../../src/encd/signature.ts";
import { hbmAddr, semaAddr, tailDoorbellAddr } from "../../src/encd/address.ts";

/** One address of device `d`: HBM, a semaphore window, a queue doorbell. */
const address = (devices: readonly number[]) =>
  fc.oneof(
    fc.record({ d: fc.constantFrom(...devices), off: fc.integer({ min: 0, max: 2 ** 36 }) }).map(({ d, off }) => hbmAddr(d, off)),
    fc.record({ d: fc.constantFrom(...devices), t: fc.integer({ min: 0, max: 15 }), s: fc.integer({ min: 0, max: 255 }), w: fc.constantFrom("read" as const, "set" as const, "inc" as const, "dec" as const) }).map(({ d, t, s, w }) => semaAddr(d, t, s, w)),
    fc.record({ d: fc.constantFrom(...devices), e: fc.integer({ min: 0, max: 15 }), q: fc.integer({ min: 0, max: 15 }), m2s: fc.boolean() }).map(({ d, e, q, m2s }) => tailDoorbellAddr(d, e, q, m2s ? "m2s" : "s2m")),
  );

describe("unit-relative address hashing", () => {
  it("hashes every address as decoding it alone does, whatever was hashed before", () => {
    const devices = [0, 1, 5, 31, 64, 97, 130];
    const call = fc.record({ addr: address(devices), from: fc.constantFrom(...devices), own: fc.option(fc.constantFrom(...devices), { nil: undefined }), unit: fc.constantFrom(1, 2, 16, 32, 64) });
    fc.assert(
      fc.property(fc.array(call, { minLength: 1, maxLength: 300 }), (calls) => {
        const kept = new Signature();
        const decoded = new Signature();
        for (const c of calls) {
          const own = c.own ?? c.from;
          addUnitAddress(kept, c.addr, c.from, c.unit, own);
          const u = unitAddressCode(c.addr, c.from, c.unit, own);
          if (u.other) decoded.cross.push(u.device);
          decoded.add(u.code);
        }
        expect(kept.value).toBe(decoded.value);
        expect(kept.cross).toEqual(decoded.cross);
      }),
      { numRuns: 300, seed: 7 },
    );
  });

  it("a device's own coder hashes every address as addUnitAddress does, its kept places hit, missed and replaced", () => {
    const devices = [0, 1, 5, 31, 33, 64, 97];
    fc.assert(
      fc.property(fc.constantFrom(...devices), fc.constantFrom(1, 2, 16, 32, 64), fc.array(address(devices), { minLength: 1, maxLength: 40 }), fc.array(fc.nat(), { minLength: 1, maxLength: 400 }), (from, unit, places, picks) => {
        // A stream that comes back to a few places (more of them than the coder keeps, now and then).
        const coder = new UnitAddresses(from, unit);
        const kept = new Signature();
        const plain = new Signature();
        for (const k of picks) {
          const addr = places[k % places.length]!;
          coder.add(kept, addr);
          addUnitAddress(plain, addr, from, unit);
        }
        expect(kept.value).toBe(plain.value);
        expect(kept.cross).toEqual(plain.cross);
      }),
      { numRuns: 300, seed: 8 },
    );
  });

  it("codes an HBM address by its device's place and unit, not its offset; a semaphore by its number", () => {
    const a = unitAddressCode(hbmAddr(33, 0x1000), 1, 32);
    const b = unitAddressCode(hbmAddr(33, 0x7000_0000), 1, 32);
    expect(a).toEqual(b);
    expect(a.other).toBe(true);
    expect(a.device).toBe(33);
    expect(unitAddressCode(hbmAddr(1, 0), 1, 32).other).toBe(false);
    expect(unitAddressCode(semaAddr(2, 0, 3, "inc"), 2, 32).code).not.toBe(unitAddressCode(semaAddr(2, 0, 4, "inc"), 2, 32).code);
  });
});
