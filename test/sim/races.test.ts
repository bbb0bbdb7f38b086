// Race detection: a read of data whose write no semaphore orders before it, or a write over data
// not yet consumed, fails the check (exit 3) even when the values pass; correct programs are clean.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { runSim } from "../run-sim.ts";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main, EXIT } from "../../src/cli/sim.ts";
import { clockOf, entriesOf, entry, joined, joinInto, QueueClock, SemaClock, ThreadClock, type Clock } from "../../sim/verify/races.ts";
import { dropMeshWait } from "../helpers-image.ts";

const run = runSim;

/** ring8's all-reduce alone, with faults, written where the CLI can read it. */
function ring8With(faults: unknown[], extra: Record<string, unknown> = {}): string {
  const scn = JSON.parse(readFileSync("scenarios/ring8.json", "utf8"));
  const path = join(mkdtempSync(join(tmpdir(), "ccsim-race-")), "ring8-fault.json");
  writeFileSync(path, JSON.stringify({ ...scn, ops: scn.ops.slice(0, 1), faults, ...extra }));
  return path;
}

describe("race detection", () => {
  it("the dropped receive-wait of a ring reduce step: the values still pass, the race is reported (exit 3)", () => {
    // Device 3's second waiting step is a reduce step that waits for its neighbour's data.
    const r = run([ring8With([{ kind: "drop-wait", device: 3, nth: 2 }])]);
    expect(r.code).toBe(EXIT.CHECK_FAILED);
    expect(r.err).not.toMatch(/element \d+: expected/);
    expect(r.err).toMatch(/check failed for all-reduce 4194304 B fp32: race: dev3 dma\d+ q\d+ tx\[\d+\] reads dev3 HBM \[0x[0-9a-f]+, 0x[0-9a-f]+\) at \d+\.\d{3} us; dev2 dma\d+ q\d+ tx\[\d+\] wrote it \(landed \d+\.\d{3} us\) and no semaphore orders that write before the read/);
  });

  it("a dropped credit wait: the writer overwrites data its reader has not consumed", () => {
    // On links at half the old 96 GB/s (engines at 27 GiB/s) the reader lags enough that no later increment of the credit semaphore
    // (whose clock a wait joins whole) covers the overwrite; at trn1's full rate it hides behind one.
    const dir = mkdtempSync(join(tmpdir(), "ccsim-race-devices-"));
    const trn1 = JSON.parse(readFileSync("devices/trn1.json", "utf8"));
    // (The rates are set here, not taken from trn1's fitted ones: the race needs this lag.)
    writeFileSync(join(dir, "trn1.json"), JSON.stringify({ ...trn1, link: { ...trn1.link, bytesPerSecond: 48e9 }, dma: { ...trn1.dma, engineBytesPerSecond: 28991029248 } }));
    const r = run([ring8With([{ kind: "drop-wait", device: 3, nth: 1 }]), "--devices", dir]);
    expect(r.code).toBe(EXIT.CHECK_FAILED);
    expect(r.err).toMatch(/race: dev3 dma\d+ q\d+ tx\[\d+\] writes dev7 HBM \[0x[0-9a-f]+, 0x[0-9a-f]+\) \(landing \d+\.\d{3} us\) while dev7 dma\d+ q\d+ tx\[\d+\] reads it \(issued \d+\.\d{3} us\) and no semaphore orders the read before the write/);
  });

  it("a mesh-tape event that lost its wait (intra RDH on rdh16): the values pass, the race is reported", () => {
    let where = "";
    let err = "";
    const code = main(["scenarios/rdh16.json"], () => {}, (s) => (err += s), { mutateImage: (img, op) => void (op === 0 && (where = dropMeshWait(img, 2, 2))) });
    expect(where).toBe("dev2 topsp0 event 4");
    expect(code).toBe(EXIT.CHECK_FAILED);
    expect(err).not.toMatch(/element \d+: expected/);
    expect(err).toMatch(/race: dev2 dma\d+ q15 tx\[\d+\] reads dev2 HBM \[0x[0-9a-f]+, 0x[0-9a-f]+\) at \d+\.\d{3} us; dev\d+ dma\d+ q15 tx\[\d+\] wrote it/);
  });

  it("--races off (or \"races\": false) skips race detection; --races takes on or off", () => {
    // The dropped wait also leaves semaphores unbalanced, which the verifier still reports.
    const off = run([ring8With([{ kind: "drop-wait", device: 3, nth: 2 }]), "--races", "off"]);
    expect(off.err).not.toMatch(/race:/);
    expect(off.err).toMatch(/unbalanced semaphore/);
    const file = run([ring8With([{ kind: "drop-wait", device: 3, nth: 2 }], { races: false })]);
    expect(file.err).not.toMatch(/race:/);
    const on = run([ring8With([{ kind: "drop-wait", device: 3, nth: 2 }], { races: false }), "--races", "on"]);
    expect(on.err).toMatch(/race:/);
    expect(run(["scenarios/ring8.json", "--races", "maybe"])).toMatchObject({ code: EXIT.BAD_INPUT, err: expect.stringMatching(/--races must be one of on, off, not "maybe"/) });
    expect(run([ring8With([], { races: "yes" })])).toMatchObject({ code: EXIT.BAD_INPUT, err: expect.stringMatching(/races: expected true or false/) });
  });

  it("timing-only runs (check none) skip race detection (the verifier's other checks still run)", () => {
    const r = run([ring8With([{ kind: "drop-wait", device: 3, nth: 2 }], { check: "none" })]);
    expect(r.err).not.toMatch(/race:/);
    expect(r.err).toMatch(/unbalanced semaphore/);
  });
});

describe("vector clocks", () => {
  it("join keeps the larger entry and returns the same clock when nothing is added", () => {
    const a = clockOf([3, 0, 5]);
    expect(joined(a, clockOf([1, 0, 5]))).toBe(a);
    expect(entriesOf(joined(a, clockOf([1, 4])), 3)).toEqual([3, 4, 5]);
    expect(entriesOf(joined(a, [], 4, 7), 5)).toEqual([3, 0, 5, 0, 7]);
    expect(entriesOf(a, 3)).toEqual([3, 0, 5]);
  });

  it("shares the chunks one side covers and copies only a chunk that changes", () => {
    // Three chunks of 64 agents; b is ahead in the second only.
    const a = clockOf(Array.from({ length: 192 }, (_, i) => i % 7));
    const b = joined(a, clockOf([...Array(64).fill(0), 99]));
    expect(b[0]).toBe(a[0]);
    expect(b[1]).not.toBe(a[1]);
    expect(b[2]).toBe(a[2]);
    expect(entry(b, 64)).toBe(99);
    expect(entry(a, 64)).toBe(64 % 7);
    // An agent's own epoch far past the end: chunks in between stay missing (zeros).
    const c = joined([], [], 1000, 3);
    expect(c.length).toBe((1000 >> 6) + 1);
    expect(entry(c, 1000)).toBe(3);
    expect(entry(c, 999)).toBe(0);
    expect(entry(c, 5000)).toBe(0);
  });

  it("joined and joinInto agree with entry-by-entry maxima over random clocks of up to 300 agents", () => {
    const flat = fc.array(fc.nat(20), { maxLength: 300 });
    fc.assert(
      fc.property(flat, flat, fc.integer({ min: -1, max: 320 }), fc.nat(30), (xs, ys, agent, epoch) => {
        const want = Array.from({ length: Math.max(xs.length, ys.length, agent + 1) }, (_, i) => Math.max(xs[i] ?? 0, ys[i] ?? 0, i === agent ? epoch : 0));
        const a = clockOf(xs);
        const before = entriesOf(a, xs.length);
        const j = joined(a, clockOf(ys), agent, epoch);
        expect(entriesOf(j, want.length + 70)).toEqual([...want, ...Array(70).fill(0)]);
        expect(entriesOf(a, xs.length)).toEqual(before);
        if (want.every((v, i) => v === (xs[i] ?? 0))) expect(j).toBe(a);
        const b = clockOf(ys);
        const keep = entriesOf(b, ys.length);
        expect(entriesOf(joinInto(clockOf(xs), b, agent, epoch), want.length + 70)).toEqual([...want, ...Array(70).fill(0)]);
        expect(entriesOf(b, ys.length)).toEqual(keep);
      }),
      // (A clock of zeros only, joined into an empty one: it adds nothing, so the same clock comes back.)
      { examples: [[[], [0], 0, 0]] },
    );
  });

  it("a semaphore's clock is the join of what was released into it, and what a waiter took never changes", () => {
    // Each agent releases ever later clocks (a queue's clock only grows); -1 is a core's own store.
    const release = fc.record({ kind: fc.constant("release" as const), entries: fc.array(fc.nat(9), { maxLength: 200 }), agent: fc.integer({ min: -1, max: 5 }), epoch: fc.nat(40) });
    const wait = fc.record({ kind: fc.constant("wait" as const) });
    fc.assert(
      fc.property(fc.array(fc.oneof(release, wait), { maxLength: 30 }), (steps) => {
        const sema = new SemaClock();
        let want: number[] = [];
        const byAgent = new Map<number, number[]>();
        const taken: { clock: Clock; entries: number[] }[] = [];
        for (const st of steps) {
          if (st.kind === "wait") {
            const t = new ThreadClock();
            t.acquire(sema.published());
            const clock = t.snapshot();
            expect(entriesOf(clock, 260)).toEqual(Array.from({ length: 260 }, (_, i) => want[i] ?? 0));
            taken.push({ clock, entries: entriesOf(clock, 260) });
            continue;
          }
          const before = byAgent.get(st.agent) ?? [];
          const e = Array.from({ length: 260 }, (_, i) => Math.max(st.entries[i] ?? 0, st.agent >= 0 ? (before[i] ?? 0) : 0));
          byAgent.set(st.agent, e);
          want = Array.from({ length: 260 }, (_, i) => Math.max(want[i] ?? 0, e[i]!, i === st.agent ? st.epoch : 0));
          sema.release(clockOf(e), st.agent, st.agent >= 0 ? st.epoch : 0);
        }
        expect(entriesOf(sema.published(), 260)).toEqual(Array.from({ length: 260 }, (_, i) => want[i] ?? 0));
        for (const t of taken) expect(entriesOf(t.clock, 260)).toEqual(t.entries);
      }),
    );
  });

  it("a queue's packet runs under the doorbells that released its descriptors, not later ones", () => {
    const q = new QueueClock(0);
    q.doorbell(true, 0, 2, clockOf([0, 1]));
    q.doorbell(true, 2, 2, clockOf([0, 9]));
    expect(entriesOf(q.issue(2, 0), 2)).toEqual([0, 1]);
    expect(entriesOf(q.issue(4, 0), 2)).toEqual([0, 9]);
  });

  it("a core's snapshot does not change when it acquires more later", () => {
    const t = new ThreadClock();
    t.acquire(clockOf([2]));
    const s = t.snapshot();
    t.acquire(clockOf([5, 1]));
    expect(entriesOf(s, 2)).toEqual([2, 0]);
    expect(entriesOf(t.snapshot(), 2)).toEqual([5, 1]);
  });
});
