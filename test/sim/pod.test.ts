// A Trn2 UltraServer pod: nodes joined by Z-link rings (same-position devices), so DMA reaches
// every device over NeuronLink and no hop goes through the network proxy.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { compileProgram } from "../../src/enc/compile.ts";
import { loadDevice } from "../../src/run/load.ts";
import { dtypeSize } from "../../src/ir/dtypes.ts";
import { EncAlgType } from "../../src/ir/enums.ts";
import { CompileError } from "../../src/ir/errors.ts";
import { acrossNodes } from "../../src/ir/topology.ts";
import { decodeProxyEntry, PROXY_ENTRY_BYTES } from "../../src/encd/proxy-fifo.ts";
import { decodeAddress } from "../../src/encd/address.ts";
import { ccAlgorithmAllowed } from "../../src/enc/algorithms.ts";
import { simulate } from "../../sim/index.ts";
import { expectRunChecks, scenario, anyDtype, collectiveOp } from "../helpers.ts";
import { commContext } from "../../src/enc/gates.ts";
import { parseScenario } from "../../src/scenario/scenario.ts";
import { runScenario } from "../../src/run/pipeline.ts";
import pino from "pino";

const pod = loadDevice("trn2-ultraserver");

describe("trn2 UltraServer pod", () => {
  it("adds Z links: device d of node k to device d of nodes k +- 1 (a 4x4x4 torus on 4 nodes)", () => {
    const local = [[1], [0]];
    expect(acrossNodes(local, 4, 4)).toEqual([
      [1, 2, 6],
      [0, 3, 7],
      [3, 4, 0],
      [2, 5, 1],
      [5, 6, 2],
      [4, 7, 3],
      [7, 0, 4],
      [6, 1, 5],
    ]);
    // Two nodes: one Z partner.
    expect(acrossNodes(local, 2, 4)[0]).toEqual([1, 2]);
    // Two pods of two nodes: Z links stay inside each pod.
    expect(acrossNodes(local, 4, 2)).toEqual([
      [1, 2],
      [0, 3],
      [3, 0],
      [2, 1],
      [5, 6],
      [4, 7],
      [7, 4],
      [6, 5],
    ]);
  });

  it("random ring configurations across 2 or 4 nodes check, over NeuronLinks only", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(2, 4),
        fc.constantFrom(2, 4, 8),
        collectiveOp,
        anyDtype,
        fc.integer({ min: 1, max: 200 }),
        fc.integer({ min: 1, max: 2 }),
        (nodes, perNode, op, dtype, elems, channels) => {
          const ranks = nodes * perNode;
          const scn = scenario({ instance: pod.name, ranks, nodes, channels, chunkBytes: 4096, ops: [{ op, bytes: elems * ranks * dtypeSize(dtype), dtype, reduce: "sum" }] });
          expectRunChecks(scn, pod);
        },
      ),
      { numRuns: 12, seed: 11 },
    );
  });

  it("crosses nodes on Z links, never through a proxy, and a hierarchical op's inter stage rides them too", () => {
    const scn = scenario({ instance: pod.name, ranks: 16, nodes: 4, channels: 2, check: "none", ops: [{ op: "all-gather", bytes: 1 << 18, dtype: "fp32", reduce: "sum" }] });
    const { image } = compileProgram(scn, pod, [0]);
    expect(image.devices.every((d) => d.proxyQueues.length === 0)).toBe(true);
    const r = simulate(pod, image, { storePayload: false });
    expect(r.hang).toBeUndefined();
    // Links between nodes join same-position devices (ids 16 apart per node step) and carry the ring.
    const zLinks = r.links.filter((l) => l.name.startsWith("link ")).map((l) => ({ ...l, ends: l.name.slice(5).split("->").map(Number) as [number, number] })).filter((l) => Math.floor(l.ends[0] / 16) !== Math.floor(l.ends[1] / 16));
    expect(zLinks.length).toBeGreaterThan(0);
    for (const l of zLinks) expect(l.ends[0] % 16).toBe(l.ends[1] % 16);
    expect(zLinks.reduce((n, l) => n + l.bytes, 0)).toBeGreaterThan(0);
    expect(r.links.filter((l) => l.name.includes("nic")).every((l) => l.bytes === 0)).toBe(true);
    const hier = scenario({ instance: pod.name, ranks: 16, nodes: 4, channels: 1, algorithm: "hier", allowedAlgorithms: [EncAlgType.HIER], hierarchical: { intra: "ring", inter: "ring" }, ops: [{ op: "all-reduce", bytes: 16 * 1000 * 4, dtype: "fp32", reduce: "sum" }] });
    expectRunChecks(hier, pod, "hier(ring,ring,ring)");
  });

  it("more nodes than the pod holds form pods joined by the network: Z links inside each, the proxies and NICs between", () => {
    fc.assert(
      fc.property(fc.constantFrom("ring", "hier") as fc.Arbitrary<"ring" | "hier">, collectiveOp, anyDtype, fc.integer({ min: 1, max: 64 }), (alg, op, dtype, elems) => {
        const ranks = 16;
        const allowed = alg === "ring" ? [EncAlgType.RING] : [EncAlgType.HIER, EncAlgType.RING];
        expectRunChecks(scenario({ instance: pod.name, ranks, nodes: 8, channels: 2, algorithm: alg, allowedAlgorithms: allowed, ops: [{ op, bytes: elems * ranks * dtypeSize(dtype), dtype, reduce: "sum" }] }), pod);
      }),
      { numRuns: 10, seed: 29 },
    );
    const scn = scenario({ instance: pod.name, ranks: 16, nodes: 8, channels: 1, check: "none", ops: [{ op: "all-gather", bytes: 1 << 16, dtype: "fp32", reduce: "sum" }] });
    const { image } = compileProgram(scn, pod, [0]);
    // The ring crosses between the two pods (nodes 0-3, 4-7) through proxies: the ends of each pod's path.
    const proxied = image.devices.filter((d) => d.proxyQueues.length > 0).map((d) => Math.floor(d.device / 16));
    expect(new Set(proxied.map((node) => Math.floor(node / 4)))).toEqual(new Set([0, 1]));
    for (const d of image.devices) for (const q of d.proxyQueues) for (let i = 0; i < q.fifo.length / PROXY_ENTRY_BYTES; i++) expect(Math.floor(decodeAddress(decodeProxyEntry(q.fifo, i).sema, decodeProxyEntry(q.fifo, i).block * 64).device / 64)).not.toBe(Math.floor(d.device / 64));
    const r = simulate(pod, image, { storePayload: false });
    expect(r.hang).toBeUndefined();
    const ends = r.links.filter((l) => l.name.startsWith("link ") && l.bytes > 0).map((l) => l.name.slice(5).split("->").map(Number) as [number, number]);
    expect(ends.some(([a, b]) => Math.floor(a / 16) !== Math.floor(b / 16))).toBe(true);
    for (const [a, b] of ends) expect(Math.floor(a / 64)).toBe(Math.floor(b / 64));
    expect(r.links.filter((l) => l.name.includes("nic")).some((l) => l.bytes > 0)).toBe(true);
    // A mesh may not mix pod and network peers; inside one pod it may.
    const mesh = (nodes: number) => commContext({ scn: { ...scn, nodes, ranks: nodes * 2, allowedAlgorithms: undefined }, spec: pod, channels: 1, chunkBytes: 4096 }, Array.from({ length: nodes * 2 }, (_, i) => i));
    expect(ccAlgorithmAllowed(mesh(8), EncAlgType.MESH).reason).toMatch(/spans 2 pods/);
    expect(ccAlgorithmAllowed(mesh(4), EncAlgType.MESH).ok).toBe(true);
  });

  // scenarios/trn2-us4x.json's shape (its 1,024 ranks run timing only in the suite) on the fewest
  // ranks that keep it: four ranks a device, more than one UltraServer, the hierarchical all-reduce
  // with a mesh in each node and a single-cycle ring between nodes, over EFA between the pods.
  it("four ranks a device over two UltraServers: the hierarchical all-reduce (mesh, single-cycle ring over EFA, mesh) checks its values, and pod 0 standing for both gives its time exactly", () => {
    const silent = pino({ level: "silent" });
    for (const bytes of [65536, 30002]) {
      const json = { name: "us2", instance: pod.name, algorithm: "auto", ranks: 64, ranksPerDevice: 4, nodes: 8, ops: [{ op: "all-reduce", bytes, dtype: "bf16", reduce: "sum" }] };
      const checked = runScenario(parseScenario("us2.json", json), pod, silent);
      const timing = runScenario(parseScenario("us2.json", { ...json, check: "none" }), pod, silent);
      if (checked.kind !== "done" || timing.kind !== "done") throw new Error(`${bytes} B: hung`);
      const [c] = checked.ops;
      const [t] = timing.ops;
      expect(c!.row.algorithm).toBe("hier(mesh,single-cycle-ring,mesh)");
      expect(c!.checked).toBe("values");
      expect(c!.row.check).toBe("pass");
      expect(c!.violations).toEqual([]);
      // Between the pods the network carries it (each chip's NIC).
      expect(c!.stats.links.some((l) => l.name.includes("nic") && l.bytes > 0)).toBe(true);
      expect(t!.folding).toMatchObject({ folded: true, pods: 2 });
      expect(t!.row.timeUs).toBe(c!.row.timeUs);
    }
  });

  it("refuses nodes that do not fill whole pods, and several pods without a network", () => {
    const scn = scenario({ instance: pod.name, ranks: 6, nodes: 6, ops: [{ op: "all-reduce", bytes: 4096, dtype: "fp32", reduce: "sum" }] });
    expect(() => compileProgram(scn, pod, [0])).toThrow(/6 nodes do not fill whole pods of 4 nodes/);
    const noNet = { ...pod, network: undefined };
    const eight = scenario({ instance: pod.name, ranks: 8, nodes: 8, ops: [{ op: "all-reduce", bytes: 4096, dtype: "fp32", reduce: "sum" }] });
    expect(() => compileProgram(eight, noNet, [0])).toThrow(CompileError);
    expect(() => compileProgram(eight, noNet, [0])).toThrow(/has no network: a multi-node scenario needs a preset with a "network" section \(or at most 4 nodes of its pod\)/);
  });
});
