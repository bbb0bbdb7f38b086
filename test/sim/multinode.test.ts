// Multi-node rings: the hops between nodes go through each node's host network proxy and NIC.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import pino from "pino";
import { compileProgram } from "../../src/enc/compile.ts";
import { runScenario } from "../../src/run/pipeline.ts";
import { dtypeSize } from "../../src/ir/dtypes.ts";
import type { OpName } from "../../src/ir/spec.ts";
import { simulate } from "../../sim/index.ts";
import { decodeProxyEntry, PROXY_ENTRY_BYTES } from "../../src/encd/proxy-fifo.ts";
import { decodeAddress } from "../../src/encd/address.ts";
import { expectRunChecks, scenario, trn1, anyDtype, collectiveOp } from "../helpers.ts";
import { CommType, EncAlgType } from "../../src/ir/enums.ts";
import { ccAlgorithmAllowed } from "../../src/enc/algorithms.ts";
import { loadDevice } from "../../src/run/load.ts";
import { commContext } from "../../src/enc/gates.ts";

const silent = pino({ level: "silent" });

describe("two trn1 nodes", () => {
  it("random ring configurations check across the network", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(1, 2),
        fc.constantFrom(4, 8, 16),
        collectiveOp,
        anyDtype,
        fc.integer({ min: 1, max: 500 }),
        fc.integer({ min: 1, max: 2 }),
        (rpd, ranks, op, dtype, elems, channels) => {
          const scn = scenario({ ranks, ranksPerDevice: rpd, nodes: 2, channels, chunkBytes: 2048, ops: [{ op, bytes: elems * ranks * dtypeSize(dtype), dtype, reduce: "sum" }] });
          expectRunChecks(scn, trn1);
        },
      ),
      { numRuns: 25, seed: 3 },
    );
  });

  it("inter-node traffic takes the NICs, never a NeuronLink, and the network latency shows in the time", () => {
    const scn = scenario({ ranks: 16, nodes: 2, channels: 2, check: "none", ops: [{ op: "all-gather", bytes: 1 << 20, dtype: "fp32", reduce: "sum" }] });
    const { image } = compileProgram(scn, trn1, [0]);
    // Node 1's devices are ids 16..23; every proxy entry goes to the other node.
    expect(image.devices.map((d) => d.device)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23]);
    for (const d of image.devices) {
      for (const q of d.proxyQueues) {
        for (let i = 0; i < q.fifo.length / PROXY_ENTRY_BYTES; i++) {
          const e = decodeProxyEntry(q.fifo, i);
          expect(Math.floor(decodeAddress(e.sema).device / 16)).not.toBe(Math.floor(d.device / 16));
        }
      }
    }
    const r = simulate(trn1, image, { storePayload: false });
    expect(r.hang).toBeUndefined();
    const nic = r.links.filter((l) => l.name.startsWith("nic"));
    expect(nic.map((l) => l.name)).toEqual(["nic0.tx", "nic1.tx", "nic0.rx", "nic1.rx"]);
    for (const l of nic) expect(l.bytes).toBeGreaterThan(0);
    for (const l of r.links.filter((x) => x.name.startsWith("link") && x.bytes > 0)) {
      const [a, b] = l.name.slice(5).split("->").map(Number);
      expect(Math.floor(a! / 16)).toBe(Math.floor(b! / 16));
    }
    expect(r.opEndPs[0]!).toBeGreaterThan(trn1.network!.latencyPs);
  });

  it("a network hop's deeper credit pool takes the round trips out of reduce-scatter", () => {
    const scn = scenario({ ranks: 16, nodes: 2, channels: 2, check: "none", ops: [{ op: "reduce-scatter", bytes: 1 << 20, dtype: "fp32", reduce: "sum" }] });
    const time = (slots: number): number => {
      const spec = { ...trn1, network: { ...trn1.network!, bufferSlots: slots } };
      const { image } = compileProgram(scn, spec, [0]);
      const r = simulate(spec, image, { storePayload: false });
      expect(r.hang).toBeUndefined();
      return r.opEndPs[0]!;
    };
    const shallow = time(trn1.ring.bufferSlots);
    const deep = time(64);
    // 4 slots: a ~32 us round trip per 4 pieces; 64 slots cover every piece of the op.
    expect(deep).toBeLessThan(shallow / 3);
    expect(deep).toBeGreaterThan(2 * trn1.network!.latencyPs);
  });

  it("the single-cycle ring is resolved for an all-reduce with one rank per node, and only then", () => {
    const allowed = [EncAlgType.RING, EncAlgType.SINGLE_CYCLE_RING];
    const ar = { op: "all-reduce" as const, bytes: 8192, dtype: "fp32" as const, reduce: "sum" as const };
    const one = runScenario(scenario({ ranks: 2, nodes: 2, algorithm: "auto", allowedAlgorithms: allowed, ops: [ar, { ...ar, op: "all-gather" }] }), trn1, silent);
    expect(one.kind).toBe("done");
    if (one.kind === "done") {
      expect(one.ops.map((o) => [o.row.algorithm, o.mismatch])).toEqual([["single-cycle-ring", undefined], ["ring", undefined]]);
    }
    expectRunChecks(scenario({ ranks: 4, nodes: 2, algorithm: "auto", allowedAlgorithms: allowed, ops: [ar] }), trn1, "ring");
  });

  it("a mesh across nodes checks: peers on the node by DMA, peers on the other node through the proxy", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(2, 4, 8),
        fc.constantFrom("all-gather", "all-reduce", "reduce-scatter", "all-to-all") as fc.Arbitrary<OpName>,
        anyDtype,
        fc.integer({ min: 1, max: 200 }),
        (ranks, op, dtype, elems) => {
          const scn = scenario({ ranks, nodes: 2, channels: 2, algorithm: "mesh", allowedAlgorithms: [EncAlgType.MESH], ops: [{ op, bytes: elems * ranks * dtypeSize(dtype), dtype, reduce: "sum" }] });
          expectRunChecks(scn, trn1, "mesh");
        },
      ),
      { numRuns: 12, seed: 17 },
    );
    const scn = scenario({ ranks: 8, nodes: 2, channels: 2, check: "none", algorithm: "mesh", allowedAlgorithms: [EncAlgType.MESH], ops: [{ op: "all-reduce", bytes: 16384, dtype: "fp32", reduce: "sum" }] });
    const { image } = compileProgram(scn, trn1, [0]);
    // Every rank has one proxy queue (its mesh program's), and every entry goes to the other node.
    for (const d of image.devices) {
      expect(d.proxyQueues).toHaveLength(1);
      const q = d.proxyQueues[0]!;
      for (let i = 0; i < q.fifo.length / PROXY_ENTRY_BYTES; i++) expect(Math.floor(decodeAddress(decodeProxyEntry(q.fifo, i).sema).device / 16)).not.toBe(Math.floor(d.device / 16));
    }
    const r = simulate(trn1, image, { storePayload: false });
    expect(r.hang).toBeUndefined();
    for (const l of r.links.filter((x) => x.name.startsWith("link") && x.bytes > 0)) {
      const [a, b] = l.name.slice(5).split("->").map(Number);
      expect(Math.floor(a! / 16)).toBe(Math.floor(b! / 16));
    }
  });

  it("a permute-reduce inside a node checks when its source's ring channel has a network hop's credits", () => {
    // Rank 3's ring next is rank 4 on the other node, so its channel starts with the network pool of
    // credits; its target 2 must offer that many slots.
    const op = { op: "permute-reduce" as const, bytes: 1 << 20, dtype: "fp32" as const, reduce: "sum" as const, pairs: [[3, 2]] as [number, number][] };
    expectRunChecks(scenario({ ranks: 8, nodes: 2, channels: 1, chunkBytes: 4096, ops: [op, op] }), trn1, "ring");
  });
});

describe("beyond one 64-device address block", () => {
  const proxyBlocks = (image: ReturnType<typeof compileProgram>["image"]) => {
    const out: { from: number; block: number }[] = [];
    for (const d of image.devices) for (const q of d.proxyQueues) for (let i = 0; i < q.fifo.length / PROXY_ENTRY_BYTES; i++) out.push({ from: d.device, block: decodeProxyEntry(q.fifo, i).block });
    return out;
  };

  it("ring, mesh and hierarchical ops over 8 trn1 nodes (128 device ids, 2 blocks) check values; proxy entries name the remote block", () => {
    fc.assert(
      fc.property(fc.constantFrom("ring", "mesh", "hier") as fc.Arbitrary<"ring" | "mesh" | "hier">, collectiveOp, anyDtype, fc.integer({ min: 1, max: 64 }), (alg, op, dtype, elems) => {
        const ranks = 16;
        const allowed = alg === "ring" ? [EncAlgType.RING] : alg === "mesh" ? [EncAlgType.MESH] : [EncAlgType.HIER, EncAlgType.RING];
        const scn = scenario({ ranks, nodes: 8, channels: 2, algorithm: alg, allowedAlgorithms: allowed, ops: [{ op, bytes: elems * ranks * dtypeSize(dtype), dtype, reduce: "sum" }] });
        expectRunChecks(scn, trn1);
      }),
      { numRuns: 12, seed: 23 },
    );
    const scn = scenario({ ranks: 16, nodes: 8, channels: 1, check: "none", ops: [{ op: "all-reduce", bytes: 65536, dtype: "fp32", reduce: "sum" }] });
    const { image } = compileProgram(scn, trn1, [0]);
    // Node k's two devices are ids 16k, 16k + 1: nodes 4..7 lie in block 1.
    expect(image.devices.map((d) => d.device)).toEqual([0, 1, 16, 17, 32, 33, 48, 49, 64, 65, 80, 81, 96, 97, 112, 113]);
    const blocks = proxyBlocks(image);
    // The ring crosses between blocks at node 3 -> 4 and node 7 -> 0 (and their credits back).
    expect(blocks.some((b) => Math.floor(b.from / 64) !== b.block)).toBe(true);
    expect(blocks.some((b) => Math.floor(b.from / 64) === b.block)).toBe(true);
    const r = simulate(trn1, image, { storePayload: false });
    expect(r.hang).toBeUndefined();
    expect(r.violations).toEqual([]);
  });

  it("a mesh spans at most 128 devices (ENC_MESH_MAX_NUM_DEVICES); a KangaRing at most 256 ranks", () => {
    const scn = scenario({ ranks: 256, ranksPerDevice: 2, nodes: 8, algorithm: "auto", allowedAlgorithms: undefined, check: "none", ops: [{ op: "all-reduce", bytes: 1 << 20, dtype: "fp32", reduce: "sum" }] });
    const c = commContext({ scn, spec: trn1, channels: 2, chunkBytes: trn1.ring.chunkBytes }, scn.replicaGroups[0]!);
    expect(c.deviceN).toBe(128);
    expect(ccAlgorithmAllowed(c, EncAlgType.MESH).ok).toBe(true);
    const wide = commContext({ scn: { ...scn, ranks: 512, nodes: 16, replicaGroups: [Array.from({ length: 512 }, (_, i) => i)] }, spec: trn1, channels: 2, chunkBytes: trn1.ring.chunkBytes }, Array.from({ length: 512 }, (_, i) => i));
    expect(ccAlgorithmAllowed(wide, EncAlgType.MESH).reason).toMatch(/spans 256 devices; a mesh spans at most 128/);
    expect(ccAlgorithmAllowed({ ...c, commType: CommType.INTRA, rankN: 257 }, EncAlgType.KANGARING).reason).toMatch(/rank_n 257 is above the 256 ranks/);
    expect(ccAlgorithmAllowed({ ...c, commType: CommType.INTRA, vcoreSize: 2, rankN: 256 }, EncAlgType.KANGARING).ok).toBe(true);
  });

  it("refuses node sizes that do not tile the address blocks, and pods over one block", () => {
    const net = loadDevice("ideal-net");
    const scn = scenario({ instance: "ideal-net", ranks: 66, nodes: 22, check: "none", ops: [{ op: "all-gather", bytes: 66 * 4, dtype: "fp32", reduce: "sum" }] });
    expect(() => compileProgram(scn, net, [0])).toThrow(/beyond 64 device ids a node's devices must tile/);
    // 64 ids or fewer: any node size.
    expect(() => compileProgram(scenario({ instance: "ideal-net", ranks: 63, nodes: 21, check: "none", ops: [{ op: "all-gather", bytes: 63 * 4, dtype: "fp32", reduce: "sum" }] }), net, [0])).not.toThrow();
  });
});
