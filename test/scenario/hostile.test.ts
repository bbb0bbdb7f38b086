// Hostile scenario files: any shipped scenario with a field's value replaced, a field dropped or a
// stranger added, anywhere in it, is read or refused by a ScenarioError that names the file and
// the field path, never another exception; and so is its text cut short or edited. What reads is
// put to the composer's gates, which refuse it with their own error or admit it.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { readdirSync, readFileSync } from "node:fs";
import { CcsimError, ScenarioError } from "../../src/ir/errors.ts";
import { parseDeviceSpec, parseJson, parseScenario } from "../../src/scenario/index.ts";
import { explainScenario } from "../../src/enc/compile.ts";
import { loadDevice, loadScenario } from "../../src/run/load.ts";

const files = readdirSync("scenarios")
  .filter((f) => f.endsWith(".json") && !f.includes("schema"))
  .sort();
const texts = files.map((f) => readFileSync(`scenarios/${f}`, "utf8"));

/** Every path to a value in `x` (objects' keys, arrays' indices), the root included. */
function paths(x: unknown, at: (string | number)[] = []): (string | number)[][] {
  const out = [at];
  if (Array.isArray(x)) x.forEach((v, i) => out.push(...paths(v, [...at, i])));
  else if (x !== null && typeof x === "object") for (const [k, v] of Object.entries(x)) out.push(...paths(v, [...at, k]));
  return out;
}

/** Values no field wants, and values at the edges of the ones it does. */
const hostile: unknown[] = [null, true, false, 0, -1, 0.5, -0.5, 1e308, -1e308, 2 ** 53, 2 ** 31, 4294967296, NaN, "", "x", "all-reduce", "fp32", "ring", "auto", "1G", [], [[]], [0], [[0, 0]], [[-1]], {}, { op: "all-reduce" }, { bytes: 8 }, "\u0000", "é".repeat(300)];

/** `json` with the value at `path` replaced (`put`), removed (`drop`), or a stranger key added beside it (`add`). */
function edited(json: unknown, path: (string | number)[], how: "put" | "drop" | "add", value: unknown): unknown {
  const copy = structuredClone(json);
  if (path.length === 0) return how === "put" ? value : copy;
  let parent = copy as Record<string | number, unknown>;
  for (const k of path.slice(0, -1)) parent = parent[k] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  if (how === "put") parent[last] = value;
  else if (how === "drop") {
    if (Array.isArray(parent)) parent.splice(last as number, 1);
    else delete parent[last];
  } else if (!Array.isArray(parent)) parent["surprise"] = value;
  return copy;
}

/** Read the file's scenario, then put it to the composer's gates (nothing composed): a refusal is a ScenarioError naming the file, or the gates' own error. */
function readOrRefuse(file: string, parse: () => ReturnType<typeof parseScenario>): void {
  let scn: ReturnType<typeof parseScenario>;
  try {
    scn = parse();
  } catch (e) {
    if (!(e instanceof ScenarioError)) throw e;
    expect(e.file).toBe(file);
    expect(e.render()).toContain(file);
    return;
  }
  try {
    explainScenario(scn, loadDevice(scn.instance));
  } catch (e) {
    if (!(e instanceof CcsimError)) throw e;
  }
}

describe("hostile scenarios", () => {
  it("property: a value replaced, dropped or joined by a stranger anywhere is read or refused naming the file", () => {
    fc.assert(
      fc.property(fc.nat({ max: files.length - 1 }), fc.nat(), fc.constantFrom("put", "drop", "add"), fc.constantFrom(...hostile), (k, p, how, value) => {
        const json = JSON.parse(texts[k]!);
        const all = paths(json);
        const file = `edited-${files[k]}`;
        readOrRefuse(file, () => parseScenario(file, edited(json, all[p % all.length]!, how as "put" | "drop" | "add", value)));
      }),
      { numRuns: 2000, seed: 2026 },
    );
  });

  it("property: text cut short, or a character put in or taken out, is read or refused naming the file", () => {
    fc.assert(
      fc.property(fc.nat({ max: files.length - 1 }), fc.nat(), fc.constantFrom("end", "cut", "put"), fc.constantFrom("{", "}", "[", "]", ",", ":", '"', "0", "-", "e", "\u00a0", "\uFEFF"), (k, at, how, ch) => {
        const t = texts[k]!;
        const i = at % (t.length + 1);
        const text = how === "end" ? t.slice(0, i) : how === "cut" ? t.slice(0, i) + t.slice(i + 1) : t.slice(0, i) + ch + t.slice(i);
        const file = `edited-${files[k]}`;
        readOrRefuse(file, () => parseScenario(file, parseJson(file, text)));
      }),
      { numRuns: 400, seed: 2026 },
    );
  });
});

describe("hostile presets", () => {
  const presets = readdirSync("devices")
    .filter((f) => f.endsWith(".json") && !f.includes("schema"))
    .sort();
  const jsons = presets.map((f) => JSON.parse(readFileSync(`devices/${f}`, "utf8")) as unknown);
  const ring8 = loadScenario("scenarios/ring8.json");

  it("property: a preset with a value replaced, dropped or joined by a stranger is read or refused naming its file; one read, ring8 on it is explained or refused by the gates", () => {
    fc.assert(
      fc.property(fc.nat({ max: presets.length - 1 }), fc.nat(), fc.constantFrom("put", "drop", "add"), fc.constantFrom(...hostile), (k, p, how, value) => {
        const all = paths(jsons[k]);
        const file = `edited-${presets[k]}`;
        let spec: ReturnType<typeof parseDeviceSpec>;
        try {
          spec = parseDeviceSpec(file, edited(jsons[k], all[p % all.length]!, how as "put" | "drop" | "add", value));
        } catch (e) {
          if (!(e instanceof ScenarioError)) throw e;
          expect(e.file).toBe(file);
          return;
        }
        try {
          explainScenario({ ...ring8, instance: spec.name }, spec);
        } catch (e) {
          if (!(e instanceof CcsimError)) throw e;
        }
      }),
      { numRuns: 1500, seed: 2026 },
    );
  });
});
