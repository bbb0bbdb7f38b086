// Reading the two input files from disk (the only file access besides the CLI entry).
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ScenarioError } from "../ir/errors.ts";
import type { DeviceSpec, Scenario } from "../ir/spec.ts";
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

export function loadDevice(instance: string, dir = DEFAULT_DEVICES_DIR, scenarioFile?: string): DeviceSpec {
  const file = join(dir, `${instance}.json`);
  if (!existsSync(file)) {
    throw new ScenarioError("SCN1201", `no device preset "${instance}" (looked for ${file})`, { ...(scenarioFile === undefined ? {} : { file: scenarioFile }), path: "instance", value: instance });
  }
  return parseDeviceSpec(file, parseJson(file, readText(file)));
}
