// Reading the two input files from disk (the only file access besides the CLI entry).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ScenarioError } from "../ir/errors.ts";
import type { DeviceSpec, Scenario } from "../ir/spec.ts";
import type { ScenarioSource } from "./overrides.ts";
import { parseDeviceSpec, parseJson, parseScenario } from "../scenario/index.ts";

export const DEFAULT_DEVICES_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "../../devices");

function readText(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch (e) {
    throw new ScenarioError("SCN1000", `cannot read file: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, { file });
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

export function loadDevice(instance: string, dir = DEFAULT_DEVICES_DIR, scenarioFile?: string): DeviceSpec {
  const file = join(dir, `${instance}.json`);
  if (!existsSync(file)) {
    const known = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith(".json") && !f.endsWith(".schema.json")).map((f) => f.slice(0, -5)).sort() : [];
    const listed = known.length > 0 ? `; presets there: ${known.join(", ")}` : "";
    throw new ScenarioError("SCN1201", `no device preset "${instance}" (looked for ${file}${listed})`, { ...(scenarioFile === undefined ? {} : { file: scenarioFile }), path: "instance", value: instance });
  }
  return parseDeviceSpec(file, parseJson(file, readText(file)));
}
