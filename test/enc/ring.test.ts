import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { adjacency, deviceRing, deviceRings } from "../../src/enc/ring-order.ts";
import { channelRange, halves, planChunks, setDynamicChunkSize } from "../../src/enc/chunks.ts";
import { compileProgram } from "../../src/enc/compile.ts";
import { parseReplicaGroups } from "../../src/enc/groups.ts";
import { decodeSpadCtrlEntry } from "../../src/encd/ccop.ts";
import { decodeSlotEntry, StepFlag } from "../../src/encd/slot.ts";
import { decodeChannelConfig } from "../../src/encd/channel.ts";
import { CompileError } from "../../src/ir/errors.ts";
import { scenario, trn1 } from "../helpers.ts";

const torus = adjacency(trn1.topology, 16);

describe("device ring order from the physical topology", () => {
  it("8 devices of two torus rows form a cycle over links, not rank order", () => {
    const r = deviceRing(torus, [0, 1, 2, 3, 4, 5, 6, 7]);
    expect(r.followsLinks).toBe(true);
    expect(r.order).toEqual([0, 1, 2, 3, 7, 6, 5, 4]);
  });

  it("every consecutive pair of a 16-device ring is a torus link", () => {
    const r = deviceRing(torus, [...Array(16).keys()]);
    expect(r.followsLinks).toBe(true);
    r.order.forEach((d, i) => expect(torus[d]).toContain(r.order[(i + 1) % 16]));
    expect(new Set(r.order).size).toBe(16);
  });

  it("another node's devices with the same links take the same cycles, shifted, whether searched or remembered", () => {
    // Two nodes of a 16-chip torus each, as a two-node fabric has them (ids 16-31 the second).
    const twoNodes = () => [...torus.map((row) => [...row]), ...torus.map((row) => row.map((e) => e + 16))];
    const second = [...Array(16).keys()].map((d) => d + 16);
    const searched = deviceRings(twoNodes(), second);
    const adj = twoNodes();
    const first = deviceRings(adj, [...Array(16).keys()]);
    const remembered = deviceRings(adj, second);
    expect(searched).toHaveLength(2);
    expect(remembered).toEqual(searched);
    expect(remembered).toEqual(first.map((r) => ({ order: r.order.map((d) => d + 16), followsLinks: true })));
    // Cycles of a set whose links differ are searched, not taken from an alike-sized set's.
    deviceRings(adj, [0, 1, 2, 3, 4, 5, 6, 7]);
    const columns = [16, 17, 20, 21, 24, 25, 28, 29];
    expect(deviceRings(adj, columns)).toEqual(deviceRings(twoNodes(), columns));
    // A tour that cannot follow links (routed through other devices) is searched each time.
    const tour = deviceRings(adj, [16, 21, 26]);
    expect(tour).toEqual([{ order: deviceRing(adj, [16, 21, 26]).order, followsLinks: false }]);
    expect(deviceRings(adj, [0, 5, 10])).toEqual([{ order: deviceRing(adj, [0, 5, 10]).order, followsLinks: false }]);
  });

  it("finds the two edge-disjoint Hamiltonian cycles of the 16-chip torus, so four channels use every link", () => {
    const rs = deviceRings(torus, [...Array(16).keys()]);
    expect(rs).toHaveLength(2);
    const edges = rs.map((r) => new Set(r.order.map((d, i) => [d, r.order[(i + 1) % 16]!].sort((a, b) => a - b).join("-"))));
    for (const [k, r] of rs.entries()) {
      expect(new Set(r.order).size).toBe(16);
      r.order.forEach((d, i) => expect(torus[d]).toContain(r.order[(i + 1) % 16]));
      expect(edges[k]!.size).toBe(16);
    }
    expect([...edges[0]!].filter((e) => edges[1]!.has(e))).toEqual([]);
    // Two rows of the torus have degree 3 inside: one cycle only.
    expect(deviceRings(torus, [0, 1, 2, 3, 4, 5, 6, 7])).toHaveLength(1);
    const { layout } = compileProgram(scenario({ ranks: 16, channels: 4, check: "none", ops: [{ op: "all-reduce", bytes: 4096, dtype: "fp32", reduce: "sum" }] }), trn1, [0]);
    const ch = layout.rings[0]!.channels;
    expect(ch[0]).toEqual(rs[0]!.order);
    expect(ch[2]).toEqual(rs[1]!.order);
    expect(ch[3]).toEqual([...rs[1]!.order].reverse());
  });

  it("falls back to a routed tour when the devices have no cycle on their own links", () => {
    const r = deviceRing(torus, [0, 2, 8, 10]);
    expect(r.followsLinks).toBe(false);
    expect([...r.order].sort((a, b) => a - b)).toEqual([0, 2, 8, 10]);
  });
});

describe("chunk sizing", () => {
  it("set_dynamic_chunk_size is 1/32 of chunk x nr_channel_chunks, granule aligned", () => {
    expect(setDynamicChunkSize(65536, 32)).toEqual({ chunk: 65536, nrChannelChunks: 32 });
    expect(setDynamicChunkSize(1000, 64, 8)).toEqual({ chunk: 2000, nrChannelChunks: 32 });
  });

  it("the short last group is re-clamped, even, never larger than the chunk, and the ranges tile the block", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5000 }), fc.integer({ min: 1, max: 4 }), fc.integer({ min: 8, max: 4096 }), (blockElems, channels, chunkBytes) => {
        const p = planChunks(blockElems, chunkBytes, 2, channels);
        expect(p.chunkElems % 2).toBe(0);
        const covered: number[] = [];
        for (let g = 0; g < p.groups; g++) {
          for (let c = 0; c < channels; c++) {
            const r = channelRange(p, g, c, blockElems);
            expect(r.hi - r.lo).toBeLessThanOrEqual(p.chunkElems);
            const [h0, h1] = halves(r);
            expect(h0.hi - h0.lo - (h1.hi - h1.lo)).toBeGreaterThanOrEqual(0);
            expect((h0.hi - h0.lo) * 2).toBeLessThanOrEqual(p.chunkElems);
            for (let i = r.lo; i < r.hi; i++) covered.push(i);
          }
        }
        expect(covered.sort((a, b) => a - b)).toEqual([...Array(blockElems).keys()]);
      }),
      { numRuns: 200 },
    );
  });
});

describe("replica groups", () => {
  it("accepts a partition and rejects range, duplicates and absent ranks with the seed's message", () => {
    expect(parseReplicaGroups([[0, 2], [1, 3]], 4)).toEqual([[0, 2], [1, 3]]);
    expect(() => parseReplicaGroups([[0, 4]], 4)).toThrow(CompileError);
    expect(() => parseReplicaGroups([[0, 1], [1]], 2)).toThrow(/appears twice/);
    expect(() => parseReplicaGroups([[0]], 2)).toThrow("replica groups (1/1) does not have myself 1");
  });
});

describe("emitted program for ring all-reduce", () => {
  const n = 4;
  const scn = scenario({ ranks: n, channels: 2, chunkBytes: 4096, check: "none", ops: [{ op: "all-reduce", bytes: 98304, dtype: "fp32", reduce: "sum" }] });
  const { image, layout } = compileProgram(scn, trn1, [0]);

  it("one ring cc_op_entry per TopSP naming its channels; channel 0's TopSP reports", () => {
    const d0 = image.devices[0]!;
    const entries = d0.topsps.map((t) => decodeSpadCtrlEntry(t.ctrlSpad, 0));
    expect(entries.map((e) => [e.algoType, e.channelList, e.reporter])).toEqual([
      [0, 0b01, true],
      [0, 0b10, false],
    ]);
    expect(layout.rings[0]!.channels).toEqual([
      [0, 1, 2, 3],
      [3, 2, 1, 0],
    ]);
  });

  it("the step program is (n-1) reduce-scatter and (n-1) all-gather steps of two halves per chunk group", () => {
    const t = image.devices[0]!.topsps[0]!;
    const cfg = decodeChannelConfig(t.ringConfig, 0);
    const spad = t.slotSpad[cfg.spadSlotIdx]!;
    const steps = Array.from({ length: spad.length / 8 }, (_, i) => decodeSlotEntry(spad, i * 8));
    const expanded = steps.flatMap((e) => Array(e.repeat).fill(e.flags));
    const groups = layout.ops[0]!.plan[0]!.groups;
    expect(groups).toBe(3);
    // per group: send x2, rrs x2(n-2), (rrc, dcs) x2, drs x2(n-2), dr x2, drain; then the completion step
    const perGroup = [
      ...Array(2).fill(StepFlag.WAIT_CREDIT),
      ...Array(2 * (n - 2)).fill(StepFlag.WAIT_RECV | StepFlag.WAIT_CREDIT),
      ...[StepFlag.WAIT_RECV, 0, StepFlag.WAIT_RECV, 0],
      ...Array(2 * (n - 2)).fill(StepFlag.WAIT_RECV),
      ...Array(2).fill(StepFlag.WAIT_RECV),
      StepFlag.DRAIN_CREDIT,
    ];
    expect(expanded).toEqual([...perGroup, ...perGroup, ...perGroup, StepFlag.LAST_SYNC]);
    expect(cfg.foldN).toBe(trn1.ring.foldN);
  });
});
