// The streaming composition on a worker thread (src/run/feed-thread.ts): the rings get the same
// bytes in the same order, so a run fed from the thread equals a run composing in its own thread —
// its events, packets, times and every resource's bytes and busy time — over configurations of
// several shapes (flat rings, a hierarchical op, a folded program, a mesh, concurrent streams);
// and a composition that fails on the thread fails the run with its own error.
import { describe, expect, it } from "vitest";
import { parseScenario } from "../../src/scenario/index.ts";
import { loadDevice } from "../../src/run/load.ts";
import { compileProgram, compileStreamed, countUnits } from "../../src/enc/compile.ts";
import { simulate } from "../../sim/index.ts";
import { feedThreadsStarted, threadFeed } from "../../src/run/feed-thread.ts";
import { DescPages } from "../../src/encd/pages.ts";
import { runScenario } from "../../src/run/pipeline.ts";
import pino from "pino";

interface Shape {
  readonly name: string;
  readonly instance: string;
  readonly ranks: number;
  readonly nodes?: number;
  readonly algorithm?: string;
  readonly ops: readonly { op: string; bytes: number; dtype?: string; stream?: number }[];
  readonly concurrent?: boolean;
  readonly fold?: boolean;
}

const SHAPES: Shape[] = [
  { name: "ring8 all-reduce", instance: "trn1", ranks: 8, algorithm: "ring", ops: [{ op: "all-reduce", bytes: 3 << 20 }] },
  { name: "ring8 all-gather bf16", instance: "trn1", ranks: 8, ops: [{ op: "all-gather", bytes: (5 << 20) + 4096, dtype: "bf16" }] },
  { name: "hierarchical, two nodes", instance: "trn1", ranks: 64, nodes: 2, algorithm: "hier", ops: [{ op: "all-reduce", bytes: 8 << 20 }] },
  { name: "folded, four nodes", instance: "trn1", ranks: 128, nodes: 4, ops: [{ op: "reduce-scatter", bytes: 16 << 20 }], fold: true },
  { name: "mesh on trn2", instance: "trn2", ranks: 16, algorithm: "mesh", ops: [{ op: "all-reduce", bytes: 1 << 20 }] },
  { name: "two streams at once", instance: "trn1", ranks: 16, concurrent: true, ops: [{ op: "all-reduce", bytes: 2 << 20, stream: 0 }, { op: "all-gather", bytes: 1 << 20, stream: 1 }] },
];

function scenarioOf(s: Shape) {
  return parseScenario(`${s.name}.json`, {
    name: s.name,
    instance: s.instance,
    ranks: s.ranks,
    ...(s.nodes ? { nodes: s.nodes, ranksPerDevice: 2 } : {}),
    ...(s.algorithm ? { algorithm: s.algorithm } : {}),
    ...(s.concurrent ? { concurrent: true } : {}),
    check: "none",
    ops: s.ops.map((o) => ({ op: o.op, bytes: o.bytes, dtype: o.dtype ?? "fp32", ...(o.op === "all-reduce" || o.op === "reduce-scatter" ? { reduce: "sum" } : {}), ...(o.stream !== undefined ? { stream: o.stream } : {}) })),
  });
}

/** What a run computes, all of it (resources by name). */
function outcome(r: ReturnType<typeof simulate>) {
  return { events: r.events, packets: r.packets, endPs: r.endPs, opEndPs: r.opEndPs, hang: r.hang, violations: r.violations, links: r.links, engines: r.engines, hbm: r.hbm };
}

describe("the streaming composition on a worker thread", () => {
  it.each(SHAPES)("$name: the run fed from the thread equals the run composing in its own", (s) => {
    const spec = loadDevice(s.instance);
    const scn = scenarioOf(s);
    const ops = s.concurrent ? s.ops.map((_, i) => i) : [0];
    const here = compileStreamed(scn, spec, ops, { fold: s.fold === true });
    const a = outcome(simulate(spec, here.image, { storePayload: false }));
    expect(a.hang).toBeUndefined();
    // Fed by the thread from its first batch; and composing here until the thread catches up.
    for (const composeWhileStarting of [false, true]) {
      const there = compileStreamed(scn, spec, ops, { fold: s.fold === true, runner: threadFeed(0, { composeWhileStarting }) });
      if (s.fold) expect(there.folding?.folded).toBe(true);
      expect(outcome(simulate(spec, there.image, { storePayload: false }))).toEqual(a);
    }
    // And the rings get every descriptor of a whole composition (pulled to the end, nothing run).
    const whole = compileProgram(scn, spec, ops).image;
    const fed = compileStreamed(scn, spec, ops, { fold: s.fold === true, runner: threadFeed(0, { composeWhileStarting: false }) }).image;
    while (fed.feed!.pull());
    for (const d of fed.devices) {
      for (const q of d.queues) {
        const w = whole.devices.find((x) => x.device === d.device)!.queues.find((x) => x.engine === q.engine && x.queue === q.queue)!;
        expect(Buffer.compare(q.streamed!.tx.flat(), w.tx.subarray(0, q.streamed!.txCount * 16))).toBe(0);
        expect(Buffer.compare(q.streamed!.rx.flat(), w.rx.subarray(0, q.streamed!.rxCount * 16))).toBe(0);
      }
    }
  });

  it("the thread fills the buffers the run gives back: a pass of many batches makes about as many as it may post ahead", () => {
    // ring8 at 512 MiB: about 4 M descriptors, over 40 batches (of 64 K descriptors, and the rest of
    // a step); the thread posts at most 1 M descriptors (16 batches) the run has not taken. (A
    // fresh buffer each: one a batch.)
    const spec = loadDevice("trn1");
    const scn = scenarioOf({ name: "ring8 512 MiB", instance: "trn1", ranks: 8, algorithm: "ring", ops: [{ op: "all-reduce", bytes: 512 << 20 }] });
    const runner = threadFeed(0, { composeWhileStarting: false });
    const c = compileStreamed(scn, spec, [0], { runner });
    const stores = c.image.devices.flatMap((d) => d.queues.flatMap((q) => [q.streamed!.tx, q.streamed!.rx]));
    let pulls = 0;
    while (c.image.feed!.pull()) {
      pulls++;
      for (const st of stores) st.release(st.count);
    }
    expect(runner.threads.used).toBe(1);
    expect(pulls).toBeGreaterThan(40);
    expect(runner.threads.buffers).toBeGreaterThan(0);
    expect(runner.threads.buffers).toBeLessThanOrEqual(20);
  });

  it("composing here, then fed by the thread from a batch that overlaps what is composed: the same run", () => {
    const spec = loadDevice("trn1");
    const scn = scenarioOf({ name: "ring8 64 MiB", instance: "trn1", ranks: 8, algorithm: "ring", ops: [{ op: "all-reduce", bytes: 64 << 20 }] });
    const a = outcome(simulate(spec, compileStreamed(scn, spec, [0]).image, { storePayload: false }));
    // (A thread of its own: one kept from an earlier run may be ready at once.)
    const c = compileStreamed(scn, spec, [0], { runner: threadFeed(0, { kept: false }) });
    // The thread is not ready yet: the first step is composed here. Then the thread has posted
    // batches from step 0 on; the run drops what it holds and takes the rest.
    expect(c.image.feed!.pull()).toBe(true);
    const stores = c.image.devices.flatMap((d) => d.queues.map((q) => q.streamed!.tx.count));
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1500);
    expect(c.image.feed!.pull()).toBe(true);
    // The second pull took more than one step's worth: a batch of the thread's.
    const after = c.image.devices.flatMap((d) => d.queues.map((q) => q.streamed!.tx.count));
    expect(after.reduce((x, y) => x + y, 0) - stores.reduce((x, y) => x + y, 0)).toBeGreaterThan(stores.reduce((x, y) => x + y, 0));
    // Every descriptor the rings hold is the one a whole composition puts there.
    const whole = compileProgram(scn, spec, [0]).image;
    for (const d of c.image.devices) {
      for (const q of d.queues) {
        const w = whole.devices.find((x) => x.device === d.device)!.queues.find((x) => x.engine === q.engine && x.queue === q.queue)!;
        const tx = q.streamed!.tx.flat();
        const rx = q.streamed!.rx.flat();
        expect(Buffer.compare(tx, w.tx.subarray(0, tx.length))).toBe(0);
        expect(Buffer.compare(rx, w.rx.subarray(0, rx.length))).toBe(0);
      }
    }
    expect(outcome(simulate(spec, c.image, { storePayload: false }))).toEqual(a);
  });

  it("a values check passes with the rings composed on the thread", () => {
    const scn = parseScenario("values.json", { name: "values", instance: "trn1", ranks: 8, check: "values", ops: [{ op: "all-reduce", bytes: 1 << 20, dtype: "fp32", reduce: "sum" }] });
    const spec = loadDevice("trn1");
    const out = runScenario(scn, spec, pino({ level: "silent" }), { composeThread: { minDescriptors: 0 } });
    expect(out.kind).toBe("done");
    if (out.kind === "done") expect(out.ops[0]!.row.check).toBe("pass");
  });

  it("declines programs below its size, and lets a thread it started go", () => {
    const spec = loadDevice("trn1");
    // The hierarchical shape: its descriptors move more than a KiB each over the ranks.
    const scn = scenarioOf(SHAPES[2]!);
    const counted = compileStreamed(scn, spec, [0]).image.devices.reduce((n, d) => n + d.queues.reduce((k, q) => k + q.streamed!.txCount + q.streamed!.rxCount, 0), 0);
    // Started before the count (the op moves 64 x 8 MiB, a KiB a descriptor or more), then let go:
    // the program has fewer descriptors than the runner's floor. It runs here.
    const runner = threadFeed(counted + 1);
    expect(64 * (8 << 20)).toBeGreaterThanOrEqual((counted + 1) * 1024);
    const c = compileStreamed(scn, spec, [0], { runner });
    expect(runner.threads).toMatchObject({ started: 1, used: 0, split: 0 });
    expect(simulate(spec, c.image, { storePayload: false }).hang).toBeUndefined();
    // At its floor it is used.
    const used = threadFeed(counted);
    simulate(spec, compileStreamed(scn, spec, [0], { runner: used }).image, { storePayload: false });
    expect(used.threads).toMatchObject({ started: 1, used: 1, split: 0 });
  });

  it("a thread is started before the count only where the op's bytes, at a copy's 16 KiB or a quarter of a reduce's CCE packet a descriptor, reach the floor", () => {
    const spec = loadDevice("trn1");
    // The all-gather moves 8 x 5 MiB in 64 KiB copies: a few thousand descriptors, where a KiB a
    // descriptor (a reduce's) would make it forty thousand.
    const gather = scenarioOf(SHAPES[1]!);
    const moved = gather.ops[0]!.bytes * gather.ranks;
    const floor = Math.ceil(moved / 4096);
    const copies = threadFeed(floor);
    simulate(spec, compileStreamed(gather, spec, [0], { runner: copies }).image, { storePayload: false });
    expect(copies.threads).toMatchObject({ started: 0, used: 0 });
    const reduce = scenarioOf({ ...SHAPES[0]!, ops: [{ op: "all-reduce", bytes: gather.ops[0]!.bytes }] });
    const reduces = threadFeed(floor);
    simulate(spec, compileStreamed(reduce, spec, [0], { runner: reduces }).image, { storePayload: false });
    expect(reduces.threads.started).toBe(1);
    // A reduce's descriptors go by its CCE packet: trn1's uint8 packet is a quarter of its fp32 one,
    // so at a floor of 512 bytes a descriptor the uint8 all-reduce starts one and the fp32 one none.
    const at = (dtype: string) => {
      const runner = threadFeed(Math.ceil(moved / 512));
      compileStreamed(scenarioOf({ ...SHAPES[0]!, ops: [{ op: "all-reduce", bytes: gather.ops[0]!.bytes, dtype }] }), spec, [0], { runner });
      runner.cancel!();
      return runner.threads.started;
    };
    expect(at("fp32")).toBe(0);
    expect(at("uint8")).toBe(1);
  });

  it("a thread a run is done with serves the next run (one started for all three), and one that went silent is not kept", () => {
    const spec = loadDevice("trn1");
    const scn = scenarioOf(SHAPES[0]!);
    const a = outcome(simulate(spec, compileStreamed(scn, spec, [0]).image, { storePayload: false }));
    const run = (opts: Parameters<typeof threadFeed>[1]) => outcome(simulate(spec, compileStreamed(scn, spec, [0], { runner: threadFeed(0, opts) }).image, { storePayload: false }));
    // (A thread kept from an earlier test of this file may serve the first run.)
    const before = feedThreadsStarted;
    expect(run({ composeWhileStarting: false })).toEqual(a);
    const first = feedThreadsStarted;
    expect(first - before).toBeLessThanOrEqual(1);
    expect(run({ composeWhileStarting: false })).toEqual(a);
    expect(run({})).toEqual(a);
    expect(feedThreadsStarted).toBe(first);
    // A thread that never serves (no such entry) goes silent: stopped, not kept; the next run of it starts another.
    const broken = { entry: "noSuchEntry", stallMs: 1000, composeWhileStarting: false };
    expect(() => run(broken)).toThrow(/composed nothing/);
    const after = feedThreadsStarted;
    expect(() => run(broken)).toThrow(/composed nothing/);
    expect(feedThreadsStarted).toBe(after + 1);
  });

  it("a composition that fails on the thread fails the run with its error", () => {
    const spec = loadDevice("trn1");
    const scn = scenarioOf(SHAPES[0]!);
    // A job whose rings the pass does not know: it stops on its first ring.
    const src = threadFeed(0, { composeWhileStarting: false }).run({ scn, spec, opIndices: [0], keys: [], descriptors: 1 }, new Map())!;
    expect(() => src.step()).toThrow(/which the counting pass did not/);
    expect(src.step()).toBe(false);
  });

  it("a program refused while counting lets the thread it started go", () => {
    const spec = loadDevice("trn1");
    // A broadcast: the dispatcher does not serve it (CMP1202), found while counting.
    const scn = scenarioOf({ name: "refused", instance: "trn1", ranks: 8, ops: [{ op: "broadcast", bytes: 8 << 20 }] });
    const runner = threadFeed(1);
    let closed = 0;
    const cancel = runner.cancel!.bind(runner);
    runner.cancel = () => {
      closed++;
      cancel();
    };
    expect(() => compileStreamed(scn, spec, [0], { runner })).toThrow(/not supported operation/);
    expect(runner.threads.started).toBe(1);
    expect(closed).toBe(1);
  });

  it("a thread that fails to start: the run composes here, or (fed from the thread) gives up with an internal error", () => {
    const spec = loadDevice("trn1");
    const scn = scenarioOf(SHAPES[0]!);
    const a = outcome(simulate(spec, compileStreamed(scn, spec, [0]).image, { storePayload: false }));
    const broken = { entry: "noSuchEntry", stallMs: 1500 };
    const here = compileStreamed(scn, spec, [0], { runner: threadFeed(0, broken) });
    expect(outcome(simulate(spec, here.image, { storePayload: false }))).toEqual(a);
    const fed = compileStreamed(scn, spec, [0], { runner: threadFeed(0, { ...broken, composeWhileStarting: false }) });
    expect(() => simulate(spec, fed.image, { storePayload: false })).toThrow(/composed nothing for 1.5 s/);
  });

  it("a folded program's pods counted on two threads (half each): the same folding, reason and rings as counted on one", () => {
    const cases: Shape[] = [
      SHAPES[3]!,
      // Three pods: the thread counts one, this thread two.
      { name: "folded, three nodes", instance: "trn1", ranks: 96, nodes: 3, algorithm: "hier", ops: [{ op: "all-reduce", bytes: 6 << 20 }], fold: true },
      // Not alike (a mesh across nodes sends to pod 0 first): refused, with the reason one thread gives.
      { name: "mesh across nodes", instance: "trn1", ranks: 128, nodes: 4, algorithm: "mesh", ops: [{ op: "all-gather", bytes: 128 << 10 }], fold: true },
      // A flat ring over the nodes (each pass makes the channels of its own pods' ranks alone).
      { name: "flat ring, four nodes", instance: "trn1", ranks: 64, nodes: 4, algorithm: "ring", ops: [{ op: "all-reduce", bytes: 4 << 20 }], fold: true },
      // Kangaring with CCE replication (arch v3), and two ops at once (the stream binds two ops' rings).
      { name: "trn2 hierarchical, four nodes", instance: "trn2", ranks: 128, nodes: 4, algorithm: "hier", ops: [{ op: "all-reduce", bytes: (8 << 20) + 4096 }], fold: true },
      { name: "two streams, four nodes", instance: "trn1", ranks: 128, nodes: 4, concurrent: true, ops: [{ op: "all-reduce", bytes: 4 << 20, stream: 0 }, { op: "all-gather", bytes: 2 << 20, stream: 1 }], fold: true },
    ];
    for (const s of cases) {
      const spec = loadDevice(s.instance);
      const scn = scenarioOf(s);
      const ops = s.concurrent ? s.ops.map((_, i) => i) : [0];
      const one = compileStreamed(scn, spec, ops, { fold: true });
      const runner = threadFeed(0, { composeWhileStarting: false, splitMinPods: 2 });
      const count = runner.count!.bind(runner);
      let asked = 0;
      runner.count = (job) => {
        asked++;
        expect(job.units).toEqual({ from: Math.ceil(scn.nodes / 2), to: scn.nodes });
        return count(job);
      };
      // A folded program's stream is pod 0's: the halves' counts made streams for its rings alone.
      const run = runner.run.bind(runner);
      let keys: readonly string[] = [];
      runner.run = (job, stores) => {
        keys = job.keys;
        return run(job, stores);
      };
      const two = compileStreamed(scn, spec, ops, { fold: true, runner });
      expect(asked, s.name).toBe(1);
      if (two.folding?.folded) {
        const podDevices = two.folding.podDevices!;
        expect(keys.length, s.name).toBeGreaterThan(0);
        expect(keys.filter((k) => Number(k.split("/")[0]) >= podDevices), s.name).toEqual([]);
        // (Every device of pod 0 with a ring: a ring of 16 ranks a node over trn1's 16 devices uses 8.)
        const ringed = two.image.devices.filter((d) => d.queues.some((q) => q.streamed !== undefined)).map((d) => d.device);
        expect([...new Set(keys.map((k) => Number(k.split("/")[0])))].sort((a, b) => a - b), s.name).toEqual(ringed);
      }
      expect(runner.threads.split, s.name).toBe(1);
      // The thread streamed pod 0 as soon as its count ended, and the run took that stream; not
      // alike, the run stopped it (and the thread with it) and streamed the whole program on another.
      const alike = s.name !== "mesh across nodes";
      expect(runner.threads, s.name).toMatchObject(alike ? { started: 1, used: 1, early: 1 } : { started: 2, used: 1, early: 0 });
      expect(one.folding?.folded, s.name).toBe(alike);
      expect(two.folding, s.name).toEqual(one.folding);
      expect(two.image.devices.map((d) => d.device)).toEqual(one.image.devices.map((d) => d.device));
      while (one.image.feed!.pull());
      while (two.image.feed!.pull());
      for (const [a, b] of one.image.devices.map((d, i) => [d, two.image.devices[i]!] as const)) {
        for (const [qa, qb] of a.queues.map((q, i) => [q, b.queues[i]!] as const)) {
          expect(Buffer.compare(qb.streamed!.tx.flat(), qa.streamed!.tx.flat()), `${s.name} dev${a.device}`).toBe(0);
          expect(Buffer.compare(qb.streamed!.rx.flat(), qa.streamed!.rx.flat()), `${s.name} dev${a.device}`).toBe(0);
        }
      }
    }
  }, 120_000);

  it("a folded program of fewer pods than the split's floor is counted on one thread", () => {
    const spec = loadDevice("trn1");
    const runner = threadFeed(0);
    compileStreamed(scenarioOf(SHAPES[3]!), spec, [0], { fold: true, runner }).image.feed!.close!();
    expect(runner.threads).toMatchObject({ started: 1, used: 1, split: 0 });
  });

  it("a counting pass of some pods gives their devices the signatures a count of every pod gives them", () => {
    for (const s of [SHAPES[3]!, { name: "mesh across nodes", instance: "trn1", ranks: 128, nodes: 4, algorithm: "mesh", ops: [{ op: "all-gather", bytes: 128 << 10 }], fold: true }]) {
      const spec = loadDevice(s.instance);
      const scn = scenarioOf(s);
      const unitDevices = 16;
      const every = countUnits({ scn, spec, opIndices: [0], unitDevices, units: { from: 0, to: 4 } }).sigs;
      const last = countUnits({ scn, spec, opIndices: [0], unitDevices, units: { from: 2, to: 4 } }).sigs;
      expect(last.map((d) => d.device)).toEqual(every.filter((d) => d.device >= 32).map((d) => d.device));
      expect(last, s.name).toEqual(every.filter((d) => d.device >= 32));
      // (Not the first pods' signatures: the pods' programs differ in what they name.)
      expect(countUnits({ scn, spec, opIndices: [0], unitDevices, units: { from: 0, to: 2 } }).sigs).not.toEqual(last);
    }
  }, 60_000);

  it("a folded program whose thread never counts: this thread counts every pod, the same folding", () => {
    const spec = loadDevice("trn1");
    const scn = scenarioOf(SHAPES[3]!);
    const one = compileStreamed(scn, spec, [0], { fold: true });
    const runner = threadFeed(0, { entry: "noSuchEntry", stallMs: 1500, splitMinPods: 2 });
    const two = compileStreamed(scn, spec, [0], { fold: true, runner });
    expect(runner.threads.split).toBe(1);
    expect(two.folding).toEqual(one.folding);
    expect(outcome(simulate(spec, two.image, { storePayload: false }))).toEqual(outcome(simulate(spec, one.image, { storePayload: false })));
  }, 60_000);

  it("a run that stops early lets the thread go", () => {
    const spec = loadDevice("trn1");
    const scn = scenarioOf(SHAPES[0]!);
    const c = compileStreamed(scn, spec, [0], { runner: threadFeed(0) });
    // One batch, then the run is over.
    expect(c.image.feed!.pull()).toBe(true);
    c.image.feed!.close!();
    expect(c.image.feed!.pull()).toBe(false);
  });
});

describe("descriptor pages copied in bulk", () => {
  it("copyOut then append reproduces the descriptors across page boundaries", () => {
    const src = new DescPages();
    for (let i = 0; i < 1300; i++) {
      const slot = src.next();
      for (let b = 0; b < 16; b++) slot.bytes[slot.offset + b] = (i * 7 + b) & 0xff;
    }
    const dst = new DescPages();
    // In uneven pieces, as batches come.
    for (const [from, to] of [[0, 1], [1, 500], [500, 1030], [1030, 1300]] as const) {
      const buf = new Uint8Array((to - from) * 16);
      src.copyOut(from, to, buf, 0);
      dst.append(buf, 0, to - from);
    }
    expect(dst.count).toBe(1300);
    expect(dst.flat()).toEqual(src.flat());
    expect(() => new DescPages(false).append(new Uint8Array(16), 0, 1)).toThrow(/counting/);
  });
});
