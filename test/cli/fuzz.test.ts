// A fuzz corpus of malformed input: every field of a scenario and of a device preset replaced by
// values of the wrong kind, required keys removed, unknown keys added, and bad flag combinations.
// Each exits 1 naming the file, the field path and the value; never a stack trace, never exit 2,
// and no output file is left behind.
import { afterAll, describe, expect, it } from "vitest";
import { runSim } from "../run-sim.ts";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EXIT } from "../../src/cli/sim.ts";

const dir = mkdtempSync(join(tmpdir(), "ccsim-fuzz-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const run = runSim;

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Path = (string | number)[];

/** Every path in a JSON value (objects' keys and arrays' indices), parents before children. */
function paths(v: Json, at: Path = []): Path[] {
  const out: Path[] = at.length ? [at] : [];
  if (Array.isArray(v)) v.forEach((x, i) => out.push(...paths(x, [...at, i])));
  else if (v !== null && typeof v === "object") for (const [k, x] of Object.entries(v)) out.push(...paths(x, [...at, k]));
  return out;
}

function setAt(v: Json, p: Path, x: Json | undefined): Json {
  const copy = structuredClone(v) as Json;
  let o = copy as Record<string | number, Json>;
  for (const k of p.slice(0, -1)) o = o[k] as Record<string | number, Json>;
  const last = p[p.length - 1]!;
  if (x === undefined) delete o[last];
  else o[last] = x;
  return copy;
}

/** Stands for a 100,000-deep array, spliced into the file's text (too deep to build as a value). */
const DEEP = "__a 100000-deep array__";
const text = (v: Json) => JSON.stringify(v).replace(JSON.stringify(DEEP), "[".repeat(100_000) + "]".repeat(100_000));

const show = (p: Path) => p.map((k, i) => (typeof k === "number" ? `[${k}]` : i === 0 ? k : `.${k}`)).join("");

/** Values of the wrong kind for a field holding `v` (none of them is legal anywhere it stands). */
function wrong(v: Json): Json[] {
  const common: Json[] = [null, { nested: true }, DEEP];
  if (typeof v === "number") return [...common, "12", -1, 1.5, 2 ** 60];
  if (typeof v === "string") return [...common, 7, true];
  if (Array.isArray(v)) return [null, "x", 3, { a: 1 }];
  return [null, "x", 3, []];
}

function expectClean(r: { code: number; out: string; err: string }, file: string, field: string): void {
  expect(r.code, r.err).toBe(EXIT.BAD_INPUT);
  expect(r.err).toContain(file);
  expect(r.err).toContain(field);
  expect(r.err).not.toMatch(/\n\s+at |internal error/);
  expect(r.out).toBe("");
}

describe("malformed scenarios", () => {
  const base = JSON.parse(readFileSync("scenarios/permute8.json", "utf8")) as Json;
  const alltoallv = JSON.parse(readFileSync("scenarios/alltoallv8.json", "utf8")) as Json;
  const cases: { label: string; json: Json; field: string }[] = [];
  for (const [name, doc] of [
    ["permute8", base],
    ["alltoallv8", alltoallv],
  ] as const) {
    for (const p of paths(doc)) {
      if (p[0] === "$schema" || p[0] === "description") continue;
      const cur = p.reduce<Json>((o, k) => (o as Record<string | number, Json>)[k]!, doc);
      // Values deep inside the counts matrix or the pairs: the first row / pair stands for the rest.
      if (p.some((k, i) => typeof k === "number" && k > 0 && i > 1)) continue;
      for (const w of wrong(cur)) cases.push({ label: `${name} ${show(p)} = ${JSON.stringify(w).slice(0, 20)}`, json: setAt(doc, p, w), field: String(p[0]) });
    }
    for (const req of [["name"], ["instance"], ["ops"], ["ops", 0, "op"], ["ops", 0, "bytes"], ["ops", 0, "dtype"]] as Path[]) {
      cases.push({ label: `${name} without ${show(req)}`, json: setAt(doc, req, undefined), field: show(req) });
    }
    cases.push({ label: `${name} with an unknown top-level key`, json: setAt(doc, ["colour"], "blue"), field: "colour" });
    cases.push({ label: `${name} with an unknown op key`, json: setAt(doc, ["ops", 0, "colour"], "blue"), field: "ops[0].colour" });
  }

  it("the corpus is large", () => expect(cases.length).toBeGreaterThanOrEqual(100));

  it.each(cases.map((c, i) => [i, c.label, c] as const))("%i %s", (i, _label, c) => {
    const file = join(dir, `scenario-${i}.json`);
    writeFileSync(file, text(c.json));
    const report = join(dir, `report-${i}.json`);
    const r = run([file, "--check", "none", "-b", "1K", "-e", "2K", "--report-to-json-file", report]);
    expectClean(r, file, c.field);
    expect(existsSync(report)).toBe(false);
  });
});

describe("malformed device presets", () => {
  const preset = JSON.parse(readFileSync("devices/trn1.json", "utf8")) as Json;
  const numeric = paths(preset).filter((p) => p[0] !== "sources" && p[0] !== "topology" && typeof p.reduce<Json>((o, k) => (o as Record<string | number, Json>)[k]!, preset) === "number");
  const cases = numeric.flatMap((p) => ["x", -1, 1.5, 2 ** 60, null, DEEP].map((w) => ({ label: `${show(p)} = ${JSON.stringify(w)}`, json: setAt(preset, p, w), field: show(p) })));
  cases.push({ label: "link.latencyPs = 2^53 - 1", json: setAt(preset, ["link", "latencyPs"], Number.MAX_SAFE_INTEGER), field: "link.latencyPs" });
  cases.push({ label: "dma.maxDescriptorBytes = 4", json: setAt(preset, ["dma", "maxDescriptorBytes"], 4), field: "dma.maxDescriptorBytes" });
  cases.push({ label: "a source note missing", json: setAt(preset, ["sources", "link.latencyPs"], undefined), field: "sources.link.latencyPs" });

  it("the corpus is large", () => expect(cases.length).toBeGreaterThanOrEqual(100));

  it.each(cases.map((c, i) => [i, c.label, c] as const))("%i %s", (i, _label, c) => {
    const d = join(dir, `devices-${i}`);
    mkdirSync(d, { recursive: true });
    for (const f of readdirSync("devices")) if (f !== "trn1.json") copyFileSync(join("devices", f), join(d, f));
    writeFileSync(join(d, "trn1.json"), text(c.json));
    const r = run(["scenarios/ring8.json", "--devices", d]);
    expectClean(r, join(d, "trn1.json"), c.field);
  });
});

describe("bad flag combinations", () => {
  const s = "scenarios/ring8.json";
  const trace = join(dir, "trace.json");
  it.each([
    [[s, "--frobnicate"], "--frobnicate"],
    [[s, "-r"], "-r needs a value"],
    [[s, "-r", "0"], "-r"],
    [[s, "-r", "abc"], "-r"],
    [[s, "-r", "100"], "ranks"],
    [[s, "-b", "2K", "-e", "1K"], "-b"],
    [[s, "-b", "1K", "-e", "4K", "-f", "1"], "-f"],
    [[s, "-b", "1K", "-e", "4K", "-f", "2", "-i", "1K"], "not both"],
    [[s, "-b", "1Q"], "-b"],
    [[s, "--check", "maybe"], "--check"],
    [[s, "--seed", "-1"], "--seed"],
    [[s, "--log-level", "loud"], "--log-level"],
    [[s, "--plot", join(dir, "p.svg")], "--plot"],
    [[s, "--report-to-json-file", join(dir, "r.json")], "--report-to-json-file"],
    [[s, "-d", "fp64"], "-d"],
    [[s, "--op", "gossip"], "--op"],
    [[s, "--op", "send", "-b", "1K"], "--op send"],
    // A sweep gives all-to-all-v uniform counts; ring8's ring-only run refuses it at every size.
    [[s, "--op", "all-to-all-v", "-b", "1K"], "alltoall cannot be supported without Mesh algorithm"],
    [[s, "-r", "3"], "-r 3"],
    [[s, "-r", "5", "--check", "none"], "-r 5"],
    [["scenarios/permute8.json", "-r", "2"], "-r 2"],
    [["scenarios/sendrecv2.json", "-r", "1"], "-r 1"],
    [["scenarios/alltoallv8.json", "-r", "4"], "-r 4"],
    [[s, "-b", "1", "-e", "1T", "-i", "1"], "at most 4096"],
    [[s, s], "one scenario file at a time"],
    [[], "no scenario file given"],
    [["no/such/file.json"], "no/such/file.json"],
    [[s, "--devices", join(dir, "nowhere")], "no device preset"],
    [[s, "--trace", join(dir, "no", "such", "dir", "t.json")], "cannot write"],
  ])("%j", (args, says) => {
    const r = run(args as string[]);
    expect(r.code, r.err).toBe(EXIT.BAD_INPUT);
    expect(r.err).toContain(says);
    expect(r.err).not.toMatch(/\n\s+at |internal error/);
    expect(existsSync(trace)).toBe(false);
  });
});
