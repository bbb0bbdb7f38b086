// Reading the two input files from disk (the only file access besides the CLI entry).
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { ScenarioError } from "../ir/errors.ts";
import type { CalibrationAccuracy, DeviceSpec, Scenario } from "../ir/spec.ts";
import type { ScenarioSource } from "./overrides.ts";
import { PROJECT_ROOT } from "./paths.ts";
import { parseDeviceSpec, parseJson, parseScenario } from "../scenario/index.ts";
import { readTextFile } from "../scenario/text-file.ts";

export const DEFAULT_DEVICES_DIR = resolve(PROJECT_ROOT, "devices");

function readText(file: string): string {
  try {
    return readTextFile(file);
  } catch (e) {
    throw new ScenarioError("SCN1000", `cannot read file: ${(e as Error).message}`, { file });
  }
}

export function loadScenario(file: string): Scenario {
  return parseScenario(file, parseJson(file, readText(file)));
}

/** A scenario file's JSON, validated as the file it is (flags may change it later: see overrides.ts). */
export function loadScenarioSource(file: string): { source: ScenarioSource; scenario: Scenario } {
  const json = parseJson(file, readText(file));
  const scenario = parseScenario(file, json);
  return { source: { file, json: json as Record<string, unknown>, flags: "" }, scenario };
}

/** The file of preset `instance` in the presets folder `dir`. */
export function presetFile(instance: string, dir = DEFAULT_DEVICES_DIR): string {
  return join(dir, `${instance}.json`);
}

export function loadDevice(instance: string, dir = DEFAULT_DEVICES_DIR, scenarioFile?: string): DeviceSpec {
  const at = { ...(scenarioFile === undefined ? {} : { file: scenarioFile }), path: "instance", value: instance };
  const file = presetFile(instance, dir);
  if (!existsSync(file)) {
    // Why there is no preset: the folder is missing, a file, unreadable, or holds other presets.
    let kind: "missing" | "file" | "folder";
    try {
      kind = statSync(dir).isDirectory() ? "folder" : "file";
    } catch {
      kind = "missing";
    }
    if (kind === "missing") throw new ScenarioError("SCN1201", `no device preset "${instance}": the presets folder ${dir} does not exist (--devices names a folder of presets)`, at);
    if (kind === "file") throw new ScenarioError("SCN1201", `no device preset "${instance}": ${dir} is a file, not a folder of presets (--devices names a folder; --instance takes a preset file)`, at);
    let known: string[];
    try {
      known = readdirSync(dir).filter((f) => f.endsWith(".json") && !f.endsWith(".schema.json")).map((f) => f.slice(0, -5)).sort();
    } catch (e) {
      throw new ScenarioError("SCN1201", `no device preset "${instance}": cannot read the presets folder ${dir}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, at);
    }
    const listed = known.length > 0 ? `; presets there: ${known.join(", ")}` : "; that folder holds no presets";
    throw new ScenarioError("SCN1201", `no device preset "${instance}" (looked for ${file}${listed})`, at);
  }
  return parseDeviceSpec(file, parseJson(file, readText(file)));
}

/** The shipped presets, parsed once (by name; null: none ships by that name). */
const shipped = new Map<string, DeviceSpec | null>();

/**
 * Where `spec` differs from the preset of its name that ships in devices/ (dotted field paths, in
 * the preset's order; its description and sources are words, not figures, and left out):
 * undefined when no preset of that name ships. A preset file passed as --instance, or a folder of
 * them (--devices), may hold an edited copy under the shipped name, which the shipped preset's
 * calibration does not describe.
 */
export function differsFromShipped(spec: DeviceSpec): string[] | undefined {
  if (!shipped.has(spec.name)) {
    const file = presetFile(spec.name);
    let s: DeviceSpec | null = null;
    try {
      if (existsSync(file)) s = parseDeviceSpec(file, parseJson(file, readText(file)));
    } catch {
      s = null;
    }
    shipped.set(spec.name, s);
  }
  const base = shipped.get(spec.name);
  if (!base) return undefined;
  const out: string[] = [];
  const walk = (a: unknown, b: unknown, path: string): void => {
    if (a === b) return;
    const objects = typeof a === "object" && a !== null && typeof b === "object" && b !== null && Array.isArray(a) === Array.isArray(b);
    if (!objects || Array.isArray(a)) {
      if (!objects || JSON.stringify(a) !== JSON.stringify(b)) out.push(path);
      return;
    }
    const ra = a as Record<string, unknown>;
    const rb = b as Record<string, unknown>;
    for (const k of new Set([...Object.keys(ra), ...Object.keys(rb)])) {
      if (path === "" && (k === "description" || k === "sources")) continue;
      walk(ra[k], rb[k], path === "" ? k : `${path}.${k}`);
    }
  };
  walk(spec, base, "");
  return out;
}

/** A preset field a run changes (`--set`). */
export interface PresetSet {
  readonly path: string;
  readonly value: unknown;
}

/**
 * Preset `instance` with fields changed (`--set FIELD=VALUE`, in order), validated as a file is:
 * errors name the file, the flags and the field. The number fields set are noted as set (their
 * source), and the notes of fields a set took away are dropped. No sets: the preset as it is.
 */
export function loadDeviceWith(instance: string, dir = DEFAULT_DEVICES_DIR, sets: readonly PresetSet[] = [], scenarioFile?: string): DeviceSpec {
  if (sets.length === 0) return loadDevice(instance, dir, scenarioFile);
  const json = loadDeviceJson(instance, dir, scenarioFile);
  applySets(json, sets);
  return parseDeviceSpec(`${presetFile(instance, dir)} with ${setFlags(sets)}`, json, sets.map((s) => s.path));
}

/** `sets` made in a preset's JSON, in order (a path's missing sections made on the way). */
export function applySets(json: Record<string, unknown>, sets: readonly PresetSet[]): void {
  for (const { path, value } of sets) {
    const keys = path.split(".");
    let at: Record<string, unknown> = json;
    for (const k of keys.slice(0, -1)) {
      const next = at[k];
      if (typeof next !== "object" || next === null || Array.isArray(next)) at[k] = {};
      at = at[k] as Record<string, unknown>;
    }
    at[keys[keys.length - 1]!] = value;
  }
}

/** `sets` as a note reads them: `link.bytesPerSecond=20000000000, ring.foldN=1`. */
export function setsText(sets: readonly PresetSet[]): string {
  return sets.map((s) => `${s.path}=${JSON.stringify(s.value)}`).join(", ");
}

/** The flags that make `sets`: `--set link.bytesPerSecond=20000000000 ...`. */
export function setFlags(sets: readonly PresetSet[]): string {
  return sets.map((s) => `--set ${s.path}=${JSON.stringify(s.value)}`).join(" ");
}

/** A preset's JSON as its file holds it (after loadDevice found it valid: for variations of it). */
export function loadDeviceJson(instance: string, dir = DEFAULT_DEVICES_DIR, scenarioFile?: string): Record<string, unknown> {
  loadDevice(instance, dir, scenarioFile);
  const file = presetFile(instance, dir);
  return parseJson(file, readText(file)) as Record<string, unknown>;
}

/**
 * An --instance value: a preset name (looked up in `dir`), or a preset file (a path ending in
 * .json), which stands for the preset named by its file name in its own folder.
 */
export function resolveInstance(instance: string, dir: string): { instance: string; dir: string } {
  if (!instance.endsWith(".json")) return { instance, dir };
  const name = basename(instance, ".json");
  if (!/^[A-Za-z0-9][A-Za-z0-9_-]*$/.test(name)) throw new ScenarioError("SCN1011", `preset file ${instance}: its name must be letters, digits, '-', '_' before .json (it names the preset)`, { path: "instance", value: instance });
  return { instance: name, dir: resolve(dirname(instance)) };
}

export const ACCURACY_FILE = resolve(PROJECT_ROOT, "calibration/accuracy.json");

/** How far each calibrated preset is from measured tables (npm run calibrate -- --cross-validate --write-accuracy); {} when absent. */
export function loadAccuracy(file = ACCURACY_FILE): Readonly<Record<string, CalibrationAccuracy>> {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as Record<string, CalibrationAccuracy>;
  } catch {
    return {};
  }
}
