// Command-line flags of `npm run sim`.
import { DTYPES, type Dtype } from "../ir/dtypes.ts";
import { OP_NAMES, type OpName } from "../ir/spec.ts";
import { DEFAULT_DEVICES_DIR } from "../run/load.ts";
import { parseSize, SizeError, sweepSizes } from "./sizes.ts";

export class UsageError extends Error {}

export interface SweepArgs {
  readonly min: number;
  readonly max: number;
  readonly factor: number | undefined;
  readonly step: number | undefined;
}

export interface Args {
  scenario: string;
  json: boolean;
  explain: boolean;
  check: "values" | "none" | undefined;
  seed: number | undefined;
  devices: string;
  logLevel: string;
  /** Sweep mode (-b / -e given). */
  sweep: SweepArgs | undefined;
  op: OpName | undefined;
  dtype: Dtype | undefined;
  ranks: number | undefined;
  showAlgorithm: boolean;
  reportJson: string | undefined;
  plot: string | undefined;
  trace: string | undefined;
  stats: boolean;
}

export const LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];
/** nccom-test's default for both ends of a size range. */
const DEFAULT_SIZE = 32 * 1024 * 1024;

export function parseArgs(argv: readonly string[]): Args | "help" {
  const a: Partial<Args> = { json: false, explain: false, devices: DEFAULT_DEVICES_DIR, logLevel: "warn", showAlgorithm: false, stats: false };
  let min: number | undefined;
  let max: number | undefined;
  let factor: number | undefined;
  let step: number | undefined;
  const value = (i: number, flag: string): string => {
    const v = argv[i + 1];
    if (v === undefined || (v.startsWith("-") && !/^-\d/.test(v))) throw new UsageError(`${flag} needs a value`);
    return v;
  };
  const int = (v: string, flag: string, lo: number): number => {
    if (!/^\d+$/.test(v) || !Number.isSafeInteger(Number(v)) || Number(v) < lo) throw new UsageError(`${flag} must be an integer >= ${lo}, not "${v}"`);
    return Number(v);
  };
  const oneOf = <T extends string>(v: string, flag: string, allowed: readonly T[]): T => {
    if (!(allowed as readonly string[]).includes(v)) throw new UsageError(`${flag} must be one of ${allowed.join(", ")}, not "${v}"`);
    return v as T;
  };
  const size = (v: string, flag: string): number => {
    try {
      return parseSize(v, flag);
    } catch (e) {
      throw new UsageError((e as SizeError).message);
    }
  };
  for (let i = 0; i < argv.length; i++) {
    const t = argv[i]!;
    switch (t) {
      case "-h":
      case "--help":
        return "help";
      case "--json":
        a.json = true;
        break;
      case "--explain":
        a.explain = true;
        break;
      case "--stats":
        a.stats = true;
        break;
      case "--show-algorithm":
        a.showAlgorithm = true;
        break;
      case "--check": {
        const v = value(i++, t);
        if (v !== "values" && v !== "none") throw new UsageError(`--check must be values or none, not "${v}"`);
        a.check = v;
        break;
      }
      case "--seed":
        a.seed = int(value(i++, t), t, 0);
        break;
      case "--devices":
        a.devices = value(i++, t);
        break;
      case "--log-level":
        a.logLevel = oneOf(value(i++, t), t, LEVELS);
        break;
      case "-b":
      case "--minbytes":
        min = size(value(i++, t), t);
        break;
      case "-e":
      case "--maxbytes":
        max = size(value(i++, t), t);
        break;
      case "-f":
      case "--stepfactor":
        factor = int(value(i++, t), t, 2);
        break;
      case "-i":
      case "--stepbytes":
        step = size(value(i++, t), t);
        break;
      case "--op":
        a.op = oneOf(value(i++, t), t, OP_NAMES);
        break;
      case "-d":
      case "--datatype":
        a.dtype = oneOf(value(i++, t), t, DTYPES);
        break;
      case "-r":
      case "--nworkers":
        a.ranks = int(value(i++, t), t, 1);
        break;
      case "--report-to-json-file":
        a.reportJson = value(i++, t);
        break;
      case "--plot":
        a.plot = value(i++, t);
        break;
      case "--trace":
        a.trace = value(i++, t);
        break;
      default:
        if (t.startsWith("-")) throw new UsageError(`unknown option ${t}`);
        if (a.scenario !== undefined) throw new UsageError(`one scenario file at a time (got ${a.scenario} and ${t})`);
        a.scenario = t;
    }
  }
  if (a.scenario === undefined) throw new UsageError("no scenario file given");
  const sweeping = min !== undefined || max !== undefined || factor !== undefined || step !== undefined || a.op !== undefined || a.dtype !== undefined;
  if (factor !== undefined && step !== undefined) throw new UsageError("give a step factor (-f) or a step size (-i), not both");
  if (sweeping) {
    const lo = min ?? DEFAULT_SIZE;
    const hi = max ?? Math.max(lo, DEFAULT_SIZE);
    if (lo > hi) throw new UsageError(`-b ${lo} is above -e ${hi}`);
    a.sweep = { min: lo, max: hi, factor, step };
    try {
      sweepSizes({ min: lo, max: hi, ...(factor !== undefined ? { factor } : {}), ...(step !== undefined ? { step } : {}) });
    } catch (e) {
      throw new UsageError((e as SizeError).message);
    }
  }
  if (a.plot !== undefined && !a.sweep) throw new UsageError("--plot draws a sweep: give -b / -e");
  if (a.reportJson !== undefined && !a.sweep) throw new UsageError("--report-to-json-file writes a sweep: give -b / -e");
  return a as Args;
}
