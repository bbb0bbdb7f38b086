import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseDeviceSpec } from "../../src/scenario/index.ts";

const trn1 = JSON.parse(readFileSync("devices/trn1.json", "utf8"));

describe("device presets", () => {
  it("trn1: 16 devices on a 4x4 torus, [up, left, down, right] neighbours", () => {
    const s = parseDeviceSpec("devices/trn1.json", trn1);
    expect(s.devices).toBe(16);
    expect(s.coresPerDevice).toBe(2);
    if (s.topology.kind !== "table") throw new Error("table expected");
    expect(s.topology.neighbours[0]).toEqual([12, 3, 4, 1]);
    expect(s.topology.neighbours[5]).toEqual([1, 4, 9, 6]);
  });

  it("every number carries a source or an assumption note", () => {
    const { sources, ...rest } = trn1;
    const noSource = { ...rest, sources: { ...sources, "link.latencyPs": undefined } };
    delete noSource.sources["link.latencyPs"];
    expect(() => parseDeviceSpec("d.json", noSource)).toThrow(/no source given for "link.latencyPs"/);
    for (const f of readdirSync("devices").filter((x) => !x.endsWith(".schema.json")).map((x) => `devices/${x}`)) {
      const s = parseDeviceSpec(f, JSON.parse(readFileSync(f, "utf8")));
      expect(Object.values(s.sources).every((v) => v.length > 10)).toBe(true);
    }
  });

  it("rejects asymmetric links and unknown keys", () => {
    const bad = structuredClone(trn1);
    bad.topology.neighbours[0][0] = 2;
    expect(() => parseDeviceSpec("d.json", bad)).toThrow(/link 0->2 has no reverse link/);
    expect(() => parseDeviceSpec("d.json", { ...trn1, turbo: true })).toThrow(/unknown key "turbo"/);
  });

  it("rejects devices the links do not connect (was an internal error at run time), naming one", () => {
    const none = { ...trn1, topology: { kind: "table", neighbours: trn1.topology.neighbours.map(() => []) } };
    expect(() => parseDeviceSpec("d.json", none)).toThrow(/device 1 cannot reach device 0 over the links \(nor can 14 more\)/);
    // Two halves of the torus cut apart: rows 0-1 and rows 2-3 joined by no link.
    const cut = structuredClone(trn1);
    cut.topology = { kind: "table", neighbours: [[1, 4], [0, 5], [3, 6], [2, 7], [0, 5], [1, 4], [2, 7], [3, 6], [9, 12], [8, 13], [11, 14], [10, 15], [8, 13], [9, 12], [10, 15], [11, 14]] };
    expect(() => parseDeviceSpec("d.json", cut)).toThrow(/device 2 cannot reach device 0/);
  });

  it("sizes have maxima that keep the arithmetic exact, and the error names the field", () => {
    const big = structuredClone(trn1);
    big.ring.chunkBytes = 2 ** 53 - 1;
    expect(() => parseDeviceSpec("d.json", big)).toThrow(/must be between 64 and 1073741824/);
    const w = structuredClone(trn1);
    w.collectives.meshMaxBytes = 2 ** 50;
    expect(() => parseDeviceSpec("d.json", w)).toThrow(/must be between 0 and 1099511627776/);
  });

  it("host costs: each needs a source, algorithm names are checked, and a cost is at most 10 ms", () => {
    const h = { ...trn1, host: { ...trn1.host, syncPs: 5 } };
    expect(() => parseDeviceSpec("d.json", h)).toThrow(/no source given for "host\.syncPs"/);
    const a = { ...trn1, host: { ...trn1.host, algorithmPs: { warp: 1 } }, sources: { ...trn1.sources, "host.algorithmPs.warp": "x" } };
    expect(() => parseDeviceSpec("d.json", a)).toThrow(/unknown algorithm "warp"/);
    const big = { ...trn1, host: { ...trn1.host, countsPs: 10_000_000_001 } };
    expect(() => parseDeviceSpec("d.json", big)).toThrow(/must be between 0 and 10000000000/);
  });
});

describe("presets beyond trn1", () => {
  it("trn2 at logical core size 2: a rank is two physical cores, with their TopSPs and one SENG's 32 engines", async () => {
    const { compileProgram } = await import("../../src/enc/compile.ts");
    const { loadDevice } = await import("../../src/run/load.ts");
    const { decodeChannelConfig } = await import("../../src/encd/channel.ts");
    const { decodeAddress } = await import("../../src/encd/address.ts");
    const { scenario } = await import("../helpers.ts");
    const trn2 = loadDevice("trn2");
    const { image } = compileProgram(scenario({ instance: "trn2", ranks: 8, ranksPerDevice: 4, channels: 2, check: "none", ops: [{ op: "all-reduce", bytes: 4096, dtype: "fp32", reduce: "sum" }] }), trn2, [0]);
    const d0 = image.devices[0]!;
    expect(d0.topsps.map((t) => t.index)).toEqual([0, 1, 4, 5, 8, 9, 12, 13]);
    const t4 = d0.topsps.find((t) => t.index === 4)!;
    const cfg = decodeChannelConfig(t4.ringConfig, 0);
    expect(decodeAddress(cfg.bcastM2sTail)).toMatchObject({ kind: "doorbell", seng: 1 });
    expect(cfg.bcastMask).toBe(0b1111);
    expect(d0.queues.map((q) => q.engine).filter((e) => e >= 32 && e < 64)).toEqual([32, 33, 34, 35, 36, 37, 38, 39]);
    expect(() => compileProgram(scenario({ instance: "trn2", ranks: 10, ranksPerDevice: 5, ops: [{ op: "all-reduce", bytes: 4096, dtype: "fp32", reduce: "sum" }] }), trn2, [0])).toThrow(/4 rank\(s\) at logical core size 2/);
  });

  it("inf2-24xl is a line: the ring's closing hop is routed back through the line", async () => {
    const { compileProgram } = await import("../../src/enc/compile.ts");
    const { loadDevice } = await import("../../src/run/load.ts");
    const { Fabric } = await import("../../sim/hw/fabric.ts");
    const { scenario } = await import("../helpers.ts");
    const inf2 = loadDevice("inf2-24xl");
    const { layout } = compileProgram(scenario({ instance: "inf2-24xl", ranks: 6, channels: 1, check: "none", ops: [{ op: "all-reduce", bytes: 4096, dtype: "fp32", reduce: "sum" }] }), inf2, [0]);
    expect(layout.rings[0]!.followsLinks).toBe(false);
    expect(layout.rings[0]!.channels[0]).toEqual([0, 1, 2, 3, 4, 5]);
    expect(new Fabric(inf2, 6).route(5, 0).map((l) => l.name)).toEqual(["link 5->4", "link 4->3", "link 3->2", "link 2->1", "link 1->0"]);
  });
});
