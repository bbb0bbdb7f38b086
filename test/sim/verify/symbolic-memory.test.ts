import { describe, expect, it } from "vitest";
import { SymbolicMemory } from "../../../sim/verify/symbolic-memory.ts";
import { heapFull } from "../../../src/run/budgets.ts";
import { reduceHow } from "../../../src/ir/dtypes.ts";

const SUM_FP32 = reduceHow("sum", "fp32");
const SEEDS = 1000;

/** Seeds 0..n-1, 16 bytes each side by side on device 0, then all of them reduced into one read. */
function reduced(mem: SymbolicMemory, n: number) {
  for (let id = 0; id < n; id++) mem.seed(0, id * 16, 16, id);
  return mem.read(0, Array.from({ length: n }, (_, id) => ({ off: id * 16, len: 16 })), SUM_FP32);
}

describe("SymbolicMemory's look at the room left", () => {
  it("is told the bytes its sets of contributions hold outside the heap (4-byte ids and 8-byte offsets a term)", () => {
    const told: number[] = [];
    const mem = new SymbolicMemory((outside) => {
      told.push(outside);
      return undefined;
    });
    const stream = reduced(mem, SEEDS);
    // (The first write looks.)
    mem.write(0, SEEDS * 16, 16, stream, 0);
    // One set of one term per seed, then the running union's sets of 2, 3, ..., SEEDS terms.
    const terms = SEEDS + (SEEDS * (SEEDS + 1)) / 2 - 1;
    expect(told).toEqual([12 * terms]);
  });

  it("stops the run (SIM1518) when those bytes and the heap together pass nine tenths of the heap's limit, saying both", () => {
    // A union of many ranks' blocks at every step (a 1,024-rank ring's reduce-scatter) grew to
    // gigabytes of terms that a look at the heap alone never saw.
    const mem = new SymbolicMemory((outside) => heapFull(outside * 1e6));
    const stream = reduced(mem, SEEDS);
    let thrown: unknown;
    try {
      mem.write(0, SEEDS * 16, 16, stream, 0);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toMatchObject({ code: "SIM1518" });
    expect((thrown as Error).message).toMatch(/symbolic tracking outgrew its memory .*the JavaScript heap holds [\d.]+ GiB, and the sets of contributions [\d.]+ GiB outside it, together more than nine tenths of the heap's [\d.]+ GiB/);
    // Nothing outside the heap: the heap alone decides, as before.
    expect(heapFull(0)).toBeUndefined();
  });
});
