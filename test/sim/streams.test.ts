// Concurrent streams: a "concurrent" scenario's ops run in one program, each stream on a TopSP and
// DMA queue of its own, the streams at once, sharing engines and links.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import pino from "pino";
import { compileProgram } from "../../src/enc/compile.ts";
import { decodeSpadCtrlEntry, SPAD_CTRL_ENTRY_BYTES } from "../../src/encd/ccop.ts";
import { loadDevice, loadScenario } from "../../src/run/load.ts";
import { runScenario } from "../../src/run/pipeline.ts";
import { collectiveOp, scenario, trn1 } from "../helpers.ts";
import { EncAlgType } from "../../src/ir/enums.ts";

const log = pino({ level: "silent" });
const trn2 = loadDevice("trn2");
const op = (o: "all-reduce" | "all-gather" | "reduce-scatter", bytes: number, stream: number) => ({ op: o, bytes, dtype: "fp32" as const, reduce: "sum" as const, stream });

describe("streams4.json", () => {
  const scn = loadScenario("scenarios/streams4.json");
  const out = runScenario(scn, trn2, log);
  it("runs its four streams together: less than the sum of the ops alone, more than the longest; values pass", () => {
    expect(out.kind).toBe("done");
    if (out.kind !== "done") return;
    const alone = out.ops.map((o) => o.stats.timePs);
    const c = out.concurrent!;
    expect(c.streams).toEqual([0, 1, 2, 3]);
    expect(c.timePs).toBeLessThan(alone.reduce((a, b) => a + b, 0));
    expect(c.timePs).toBeGreaterThan(Math.max(...alone));
    expect(c.checked).toBe("values");
    expect(c.mismatch).toBeUndefined();
    expect(c.violations).toEqual([]);
    // Every op ends no earlier than it would alone (the streams contend, they do not help).
    c.opEndPs.forEach((t, k) => expect(t).toBeGreaterThanOrEqual(alone[k]!));
  });
});

describe("placement", () => {
  const scn = scenario({ instance: "trn2", ranks: 8, ranksPerDevice: 4, concurrent: true, ops: [op("all-reduce", 1 << 16, 0), op("all-gather", 1 << 16, 1), op("all-reduce", 1 << 16, 3)] });
  const { image } = compileProgram(scn, trn2, [0, 1, 2]);
  const dev0 = image.devices.find((d) => d.device === 0)!;
  it("the stream at position p > 0 runs on the rank's TopSP p; the first stream keeps TopSP 0 and the surplus", () => {
    // Rank 0 has TopSPs 0..3: streams 0, 1, 3 take TopSP 0 (and 3, the surplus), 1 and 2.
    const channelList = (ts: number, k: number) => decodeSpadCtrlEntry(dev0.topsps.find((t) => t.index === ts)!.ctrlSpad, k * SPAD_CTRL_ENTRY_BYTES).channelList;
    const busy = (ts: number) => [0, 1, 2].filter((k) => channelList(ts, k) !== 0);
    expect(busy(0)).toEqual([0]);
    expect(busy(1)).toEqual([1]);
    expect(busy(2)).toEqual([2]);
    expect(busy(3)).toEqual([0]);
    // Each reporter entry names the op it completes.
    expect(dev0.topsps.find((t) => t.index === 2)!.reportOps).toEqual([2]);
  });
  it("shares the DMA engines, each stream on its own queue (the collective queue, then below the barrier's)", () => {
    const cq = trn2.dma.collectiveQueue;
    const queuesOf = (engine: number) => dev0.queues.filter((q) => q.engine === engine).map((q) => q.queue).sort((a, b) => b - a);
    // Engine 0 carries channel 0 of all three streams (the barrier's queue, cq - 1, aside).
    expect(queuesOf(0).filter((q) => q !== cq - 1)).toEqual([cq, cq - 2, cq - 3]);
  });
});

describe("ops of one stream chain, streams overlap", () => {
  it("a stream's second op ends after its first; another stream's op ends before the first stream's second", () => {
    const scn = scenario({ ranks: 8, concurrent: true, check: "none", ops: [op("all-reduce", 1 << 20, 0), op("all-reduce", 1 << 20, 0), op("all-gather", 1 << 18, 1)] });
    const out = runScenario(scn, trn1, log);
    if (out.kind !== "done") throw new Error("hang");
    const [a, b, g] = out.concurrent!.opEndPs;
    expect(b!).toBeGreaterThan(a!);
    expect(g!).toBeLessThan(b!);
  });

  it("hierarchical ops run concurrently too, each stream's stages on its own TopSPs (trn1, 2 nodes; and pipelined)", () => {
    for (const slices of [1, 2]) {
      const scn = scenario({ ranks: 16, nodes: 2, algorithm: "hier", allowedAlgorithms: [EncAlgType.HIER], hierarchical: { intra: "ring", inter: "ring", slices }, concurrent: true, ops: [op("all-reduce", 1 << 20, 0), op("all-reduce", 1 << 19, 1), op("all-reduce", 1 << 18, 2)] });
      const out = runScenario(scn, trn1, log);
      if (out.kind !== "done") throw new Error("hang");
      const c = out.concurrent!;
      expect(c.mismatch).toBeUndefined();
      expect(c.violations).toEqual([]);
      expect(c.timePs).toBeLessThan(out.ops.reduce((a, o) => a + o.stats.timePs, 0));
    }
  });

  it("a hierarchical stage chosen as mesh, RDH or kangaring is refused beside other streams, as the stage gates refuse them (its buffers raced the other stream's)", () => {
    // A scenario generator's find: trn1-legacy, 4 ranks on 2 nodes, an all-gather on stream 0 and an
    // all-reduce on stream 1 with hierarchical.intra "mesh": run together, the values came out wrong,
    // with races. The hierarchical gate now refuses the stage, and the op runs on the ring.
    const legacy = loadDevice("trn1-legacy");
    const scn = scenario({ instance: "trn1-legacy", ranks: 4, nodes: 2, algorithm: "auto", allowedAlgorithms: [EncAlgType.RING, EncAlgType.HIER], hierarchical: { intra: "mesh", inter: "single-cycle-ring" }, concurrent: true, ops: [{ op: "all-gather", bytes: 1048592, dtype: "int32", reduce: "sum", stream: 0 }, { op: "all-reduce", bytes: 4096, dtype: "int32", reduce: "sum", stream: 1 }] });
    for (const intra of ["mesh", "kangaring", "intra-rdh"] as const) {
      const out = runScenario({ ...scn, hierarchical: { ...scn.hierarchical, intra } }, legacy, log);
      if (out.kind !== "done") throw new Error("hang");
      expect(out.ops[1]!.row.algorithm).toBe("ring");
      expect(out.concurrent!.mismatch).toBeUndefined();
      expect(out.concurrent!.violations).toEqual([]);
    }
    // Stages on the ring family run hierarchical, and check their values together.
    const out = runScenario({ ...scn, hierarchical: { ...scn.hierarchical, intra: "ring" } }, legacy, log);
    if (out.kind !== "done") throw new Error("hang");
    expect(out.ops[1]!.row.algorithm).toMatch(/^hier/);
    expect(out.concurrent!.mismatch).toBeUndefined();
    expect(out.concurrent!.violations).toEqual([]);
  });

  it("a stream that ends early does not arrive at another stream's step barrier: the program-end barrier counts on semaphores of its own (trn1, 2 nodes, stream 0 on TopSPs 0 and 2)", () => {
    // Stream 1's short op reaches the program-end barrier while stream 0's hierarchical all-reduce
    // is still between its stages; on shared semaphores its arrival stood in for stream 0's
    // second TopSP's, and the last stage read what the inter-node stage had not finished writing.
    const scn = scenario({ ranks: 4, nodes: 2, ranksPerDevice: 2, algorithm: "auto", allowedAlgorithms: [EncAlgType.HIER, EncAlgType.RING], hierarchical: { intra: "ring", inter: "ring" }, concurrent: true, ops: [op("all-reduce", 16384, 0), op("all-gather", 1024, 1)] });
    const out = runScenario(scn, trn1, log);
    if (out.kind !== "done") throw new Error("hang");
    const c = out.concurrent!;
    expect(c.checked).toBe("values");
    expect(c.violations).toEqual([]);
    expect(c.mismatch).toBeUndefined();
    // Stream 0 has the rank's surplus TopSP (trn1: three a rank, two streams).
    const { image } = compileProgram(scn, trn1, [0, 1]);
    expect(image.devices[0]!.topsps.map((t) => t.index)).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it("random concurrent programs on trn1 (two streams) and trn2 (up to four) check their values", () => {
    fc.assert(
      fc.property(fc.constantFrom("trn1", "trn2"), fc.array(fc.tuple(collectiveOp, fc.integer({ min: 1, max: 64 }), fc.integer({ min: 0, max: 3 })), { minLength: 2, maxLength: 4 }), (instance, ops) => {
        const spec = instance === "trn1" ? trn1 : trn2;
        const streams = instance === "trn1" ? 2 : 4;
        const ranks = instance === "trn1" ? 8 : 8;
        const scn = scenario({ instance, ranks, ranksPerDevice: instance === "trn1" ? 1 : 4, concurrent: true, ops: ops.map(([o, k, s]) => ({ ...op(o as "all-reduce", k * 1024 * ranks, s % streams) })) });
        const out = runScenario(scn, spec, log);
        expect(out.kind).toBe("done");
        if (out.kind !== "done") return;
        expect(out.concurrent!.mismatch).toBeUndefined();
        expect(out.concurrent!.violations).toEqual([]);
        expect(out.concurrent!.checked).toBe("values");
      }),
      { numRuns: 12, seed: 5 },
    );
  });
});

describe("a ring channel's proxy queue under concurrent streams", () => {
  it("waits for every fold's share: a fold a step ahead (its engine idle while the other's serves another stream) does not stand in for a slower one", () => {
    // Found by conformance (seed 51, case 35): 8-rank groups strided over 5 trn1 nodes, two tiny
    // all-reduces on two streams. With one trigger semaphore counting every fold, the proxy read a
    // staged share before it landed (a race); each fold now counts on a semaphore of its own.
    const groups = Array.from({ length: 10 }, (_, g) => Array.from({ length: 8 }, (_, i) => g + 10 * i));
    const scn = scenario({
      ranks: 80,
      ranksPerDevice: 2,
      nodes: 5,
      replicaGroups: groups,
      ops: [
        { op: "all-reduce", bytes: 26, dtype: "fp16", reduce: "min", priorityClass: 3 },
        { op: "all-reduce", bytes: 26, dtype: "fp16", reduce: "min", stream: 1 },
      ],
      concurrent: true,
    });
    const out = runScenario(scn, trn1, log);
    expect(out.kind).toBe("done");
    if (out.kind !== "done") return;
    expect(out.concurrent!.checked).toBe("values");
    expect(out.concurrent!.violations).toEqual([]);
    expect(out.concurrent!.mismatch).toBeUndefined();
  });
});
