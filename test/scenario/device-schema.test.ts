// devices/device.schema.json: every preset validates against it (a small validator for the schema
// keywords it uses), and it names exactly the keys the preset validator accepts.
import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseDeviceSpec } from "../../src/scenario/index.ts";

const schema = JSON.parse(readFileSync("devices/device.schema.json", "utf8"));
type S = Record<string, unknown>;

/** Errors of `v` against schema `s` (type, enum, minimum, maximum, multipleOf, items, min/maxItems, required, properties, additionalProperties). */
function validate(v: unknown, s: S, path = ""): string[] {
  const out: string[] = [];
  const t = s["type"];
  if (t === "integer" && !Number.isInteger(v)) return [`${path}: not an integer`];
  if (t === "string" && typeof v !== "string") return [`${path}: not a string`];
  if (t === "array" && !Array.isArray(v)) return [`${path}: not an array`];
  if (t === "object" && (typeof v !== "object" || v === null || Array.isArray(v))) return [`${path}: not an object`];
  if (s["enum"] && !(s["enum"] as unknown[]).includes(v)) out.push(`${path}: ${JSON.stringify(v)} not in enum`);
  if (typeof v === "number") {
    if (typeof s["minimum"] === "number" && v < s["minimum"]) out.push(`${path}: below minimum`);
    if (typeof s["maximum"] === "number" && v > s["maximum"]) out.push(`${path}: above maximum`);
    if (typeof s["multipleOf"] === "number" && v % s["multipleOf"] !== 0) out.push(`${path}: not a multiple`);
  }
  if (Array.isArray(v)) {
    if (typeof s["minItems"] === "number" && v.length < s["minItems"]) out.push(`${path}: too few items`);
    if (typeof s["maxItems"] === "number" && v.length > s["maxItems"]) out.push(`${path}: too many items`);
    if (s["items"]) v.forEach((x, i) => out.push(...validate(x, s["items"] as S, `${path}[${i}]`)));
  }
  if (t === "object" && typeof v === "object" && v !== null) {
    const o = v as Record<string, unknown>;
    for (const k of (s["required"] as string[] | undefined) ?? []) if (!(k in o)) out.push(`${path}.${k}: required`);
    const props = (s["properties"] as Record<string, S> | undefined) ?? {};
    for (const [k, x] of Object.entries(o)) {
      if (props[k]) out.push(...validate(x, props[k]!, `${path}.${k}`));
      else if (s["additionalProperties"] === false) out.push(`${path}.${k}: not allowed`);
      else if (typeof s["additionalProperties"] === "object") out.push(...validate(x, s["additionalProperties"] as S, `${path}.${k}`));
    }
  }
  return out;
}

const presets = readdirSync("devices").filter((f) => f.endsWith(".json") && f !== "device.schema.json");

describe("device.schema.json", () => {
  it.each(presets)("%s validates against the schema and the preset validator", (f) => {
    const json = JSON.parse(readFileSync(`devices/${f}`, "utf8"));
    expect(validate(json, schema)).toEqual([]);
    expect(() => parseDeviceSpec(f, json)).not.toThrow();
  });

  it("the schema catches what the validator catches: a wrong type, a number out of range, an unknown key", () => {
    const trn1 = JSON.parse(readFileSync("devices/trn1.json", "utf8"));
    expect(validate({ ...trn1, link: { ...trn1.link, latencyPs: Number.MAX_SAFE_INTEGER } }, schema)).toEqual([".link.latencyPs: above maximum"]);
    expect(validate({ ...trn1, dma: { ...trn1.dma, maxDescriptorBytes: 4 } }, schema)).toEqual([".dma.maxDescriptorBytes: below minimum"]);
    expect(validate({ ...trn1, colour: "blue" }, schema)).toEqual([".colour: not allowed"]);
    expect(() => parseDeviceSpec("t.json", { ...trn1, colour: "blue" })).toThrow(/unknown key "colour"/);
  });

  it("names the sections the validator reads", () => {
    expect(Object.keys(schema.properties)).toEqual(["$schema", "name", "description", "arch", "devices", "coresPerDevice", "topology", "topsp", "dma", "sbuf", "hbm", "link", "ring", "network", "collectives", "host", "sources"]);
    const trn1 = JSON.parse(readFileSync("devices/trn1.json", "utf8"));
    for (const sec of ["topsp", "dma", "hbm", "link", "ring", "network"]) expect(Object.keys(schema.properties[sec].properties).sort()).toEqual(Object.keys(trn1[sec]).sort());
  });
});
