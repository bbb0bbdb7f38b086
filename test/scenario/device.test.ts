import { readFileSync } from "node:fs";
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
    for (const f of ["devices/trn1.json", "devices/ideal.json"]) {
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
});
