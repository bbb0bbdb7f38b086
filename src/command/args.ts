// Command-line flags of `npm run sim`.
import { DTYPES, type Dtype } from "../ir/dtypes.ts";
import { SCENARIO_OP_NAMES, type CheckMode, type OpName } from "../ir/spec.ts";
import { DEFAULT_DEVICES_DIR, type PresetSet } from "../run/load.ts";
import { defaultJobs } from "../run/parallel.ts";
import { parseSize, SizeError, sweepSizes } from "../ir/sizes.ts";

import { UsageError } from "../ir/errors.ts";
import { parseShardFlag, type ShardSpec } from "../run/shard.ts";
import { MAX_STREAMS, MIN_CC_PACKET_BYTES } from "../scenario/scenario.ts";
import { MAX_DESC_BYTES } from "../encd/udma.ts";

export { UsageError };

export interface SweepArgs {
  readonly min: number;
  readonly max: number;
  readonly factor: number | undefined;
  readonly step: number | undefined;
  /** A scenario's sweep asked for by --op or -d alone: at nccom-test's default size, not the file's (said above the table). */
  readonly sizesDefaulted?: boolean;
}

export interface Args {
  scenario: string;
  json: boolean;
  explain: boolean;
  check: CheckMode | undefined;
  /** --races on|off (undefined: the scenario's). */
  races: boolean | undefined;
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
  /** The most trace events kept (undefined: the collector's default). */
  traceLimit: number | undefined;
  stats: boolean;
  /** Worker threads for independent runs (sweep sizes); 1 runs them on this thread. */
  jobs: number;
  /** --launch-us: the runtime's fixed cost per collective (topsp.launchPs) in ps, instead of the preset's. */
  launchPs: number | undefined;
  /** --instance: the preset the scenario runs on instead of its own (a name, or a preset file). */
  instance?: string | undefined;
  /** --no-fold: simulate every pod of a timing-only run even when the pods' programs are alike. */
  noFold: boolean;
  /** --no-fastforward: run every event of a timing-only run, no period skipped once its state repeats. */
  noFastForward: boolean;
  /** --cc-dma-packet: the scenario's CC DMA packet sizes (`ccDmaPacketBytes`) instead of its own. */
  ccDmaPacketBytes?: number[] | undefined;
  /** --set FIELD=VALUE (repeatable): preset fields changed for this run, in order. */
  presetSets?: PresetSet[] | undefined;
  /** --shard I/N or auto: run one shard of the sweep's sizes and write a partial (--out). */
  shard?: ShardSpec | "auto" | undefined;
  /** --shards N: the shard count under a Kubernetes Indexed Job (--shard auto). */
  shards?: number | undefined;
  /** --out FILE: where a shard's partial goes. */
  out?: string | undefined;
}

export const LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];
/** nccom-test's default for both ends of a size range. */
const DEFAULT_SIZE = 32 * 1024 * 1024;
/** Flag value readers; each fails with a UsageError naming the flag. */
export function flagValue(argv: readonly string[], i: number, flag: string): string {
  const v = argv[i + 1];
  if (v === undefined || (v.startsWith("-") && !/^-\d/.test(v))) throw new UsageError(`${flag} needs a value`);
  return v;
}

export function intFlag(v: string, flag: string, lo: number): number {
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(Number(v)) || Number(v) < lo) throw new UsageError(`${flag} must be an integer >= ${lo}, not "${v}"`);
  return Number(v);
}

/**
 * CC DMA packet sizes as the runtime's NEURON_RT_DBG_CC_DMA_PACKET_SIZE takes them (and
 * --cc-dma-packet): bytes, or a comma list of them, one per CC stream (a scenario's
 * `ccDmaPacketBytes`); `name` says where they were given.
 */
export function packetSizes(v: string, name: string): number[] {
  const sizes = v.split(",").map((x) => x.trim());
  if (sizes.length > MAX_STREAMS) throw new UsageError(`${name} "${v}": ${sizes.length} sizes, one per CC stream, and a rank has ${MAX_STREAMS}`);
  return sizes.map((x) => {
    if (!/^\d+$/.test(x) || Number(x) < MIN_CC_PACKET_BYTES || Number(x) > MAX_DESC_BYTES) throw new UsageError(`${name} "${v}": "${x}" is not a packet size in bytes from ${MIN_CC_PACKET_BYTES} to ${MAX_DESC_BYTES} (64 KiB, the default and the most)`);
    return Number(x);
  });
}

/** The runtime's CC DMA packet variable (npm run nccom and replay read it; a scenario's `ccDmaPacketBytes`). */
export const PACKET_VARIABLE = "NEURON_RT_DBG_CC_DMA_PACKET_SIZE";

/** `PACKET_VARIABLE`'s value where it is set (not blank). */
export function packetVariable(env: Readonly<Record<string, string | undefined>>): string | undefined {
  const v = env[PACKET_VARIABLE]?.trim();
  return v ? v : undefined;
}

/** The packet sizes `PACKET_VARIABLE` sets, if it is set (a wrong one refused, named). */
export function packetsFromEnv(env: Readonly<Record<string, string | undefined>>): number[] | undefined {
  const v = packetVariable(env);
  return v === undefined ? undefined : packetSizes(v, PACKET_VARIABLE);
}

/**
 * `--set FIELD=VALUE`: a preset field by its dotted path (`link.bytesPerSecond`), and its value as
 * JSON (`2e11`, `[65536,4096]`, `true`), else as the text itself (`--set topology.kind=ring`).
 */
export function presetSetFlag(v: string, flag: string): PresetSet {
  const eq = v.indexOf("=");
  const path = eq < 0 ? v : v.slice(0, eq);
  if (eq < 0 || !/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_-]+)*$/.test(path)) throw new UsageError(`${flag} "${v}": expected FIELD=VALUE, a preset field by its dotted path (e.g. ${flag} link.bytesPerSecond=2e11)`);
  const text = v.slice(eq + 1);
  if (text === "") throw new UsageError(`${flag} "${v}": no value after "="`);
  let value: unknown = text;
  try {
    value = JSON.parse(text);
  } catch {
    value = text;
  }
  if (path === "name" || path === "description" || path === "sources" || path.startsWith("sources.")) throw new UsageError(`${flag} "${v}": ${path.split(".")[0]} is not a figure of the preset; --set changes its figures (the run's name stays the preset's)`);
  return { path, value };
}

/** A word as a shell line would need it: as it is, or in single quotes. */
function shellWord(w: string): string {
  return /^[\w.,=+:@%/-]+$/.test(w) ? w : `'${w.replace(/'/g, "'\\''")}'`;
}

/** `sets` as flags on a shell line, each after a space: ` --set link.bytesPerSecond=20000000000 --set 'x=[1,2]'`. */
export function setFlagWords(sets: readonly PresetSet[]): string {
  return sets.map((x) => ` --set ${shellWord(`${x.path}=${typeof x.value === "string" ? x.value : JSON.stringify(x.value)}`)}`).join("");
}

/** The longest fixed cost a preset may give (1 ms, in us). */
const LAUNCH_US_MAX = 1000;

/** A time in microseconds (decimals allowed, to the picosecond), 0 to `max`: returned in picoseconds. */
export function usFlag(v: string, flag: string, max: number): number {
  if (!/^\d+(\.\d{1,6})?$/.test(v) || Number(v) > max) throw new UsageError(`${flag} must be a time in microseconds from 0 to ${max} (up to 6 decimals), not "${v}"`);
  return Math.round(Number(v) * 1e6);
}

export function oneOfFlag<T extends string>(v: string, flag: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(v)) throw new UsageError(`${flag} must be one of ${allowed.join(", ")}, not "${v}"`);
  return v as T;
}

export function sizeFlag(v: string, flag: string): number {
  try {
    return parseSize(v, flag);
  } catch (e) {
    throw new UsageError((e as SizeError).message);
  }
}

/** A sweep's size range as the flags give it (-b, -e, -f, -i). */
export interface RangeFlags {
  min?: number;
  max?: number;
  factor?: number;
  step?: number;
}

/**
 * The flags both command lines share: output (--json, --explain, --stats, --trace, --plot,
 * --show-algorithm, --report-to-json-file), --check, --seed, --devices, --launch-us, --log-level, the size range
 * (-b, -e, -f, -i) and -d. Returns how many values it consumed after `argv[i]`, or -1 when it is not
 * one of them.
 */
export function commonFlag(argv: readonly string[], i: number, a: Partial<Args>, range: RangeFlags): number {
  const t = argv[i]!;
  const value = () => flagValue(argv, i, t);
  switch (t) {
    case "--json":
      a.json = true;
      return 0;
    case "--explain":
      a.explain = true;
      return 0;
    case "--stats":
      a.stats = true;
      return 0;
    case "--no-fold":
      a.noFold = true;
      return 0;
    case "--no-fastforward":
      a.noFastForward = true;
      return 0;
    case "--show-algorithm":
      a.showAlgorithm = true;
      return 0;
    case "--jobs":
    case "-j":
      a.jobs = intFlag(value(), t, 1);
      return 1;
    case "--check":
      a.check = oneOfFlag(value(), t, ["values", "symbolic", "none"] as const);
      return 1;
    case "--races":
      a.races = oneOfFlag(value(), t, ["on", "off"] as const) === "on";
      return 1;
    case "--seed":
      a.seed = intFlag(value(), t, 0);
      return 1;
    case "--devices":
      a.devices = value();
      return 1;
    case "--launch-us":
      a.launchPs = usFlag(value(), t, LAUNCH_US_MAX);
      return 1;
    case "--cc-dma-packet":
      a.ccDmaPacketBytes = packetSizes(value(), t);
      return 1;
    case "--set":
      a.presetSets = [...(a.presetSets ?? []), presetSetFlag(value(), t)];
      return 1;
    case "--log-level":
      a.logLevel = oneOfFlag(value(), t, LEVELS);
      return 1;
    case "--report-to-json-file":
      a.reportJson = value();
      return 1;
    case "--plot":
      a.plot = value();
      return 1;
    case "--trace":
      a.trace = value();
      return 1;
    case "--trace-limit":
      a.traceLimit = intFlag(value(), t, 1);
      return 1;
    case "--shard":
      a.shard = parseShardFlag(value(), t);
      return 1;
    case "--shards":
      a.shards = intFlag(value(), t, 1);
      return 1;
    case "--out":
      a.out = value();
      return 1;
    case "-b":
    case "--minbytes":
      range.min = sizeFlag(value(), t);
      return 1;
    case "-e":
    case "--maxbytes":
      range.max = sizeFlag(value(), t);
      return 1;
    case "-f":
    case "--stepfactor":
      range.factor = intFlag(value(), t, 2);
      return 1;
    case "-i":
    case "--stepbytes":
      range.step = sizeFlag(value(), t);
      return 1;
    case "-d":
    case "--datatype":
      // nccom-test's "fp8" is E4M3.
      a.dtype = oneOfFlag(((v) => (v === "fp8" ? "fp8e4" : v))(value()), t, DTYPES);
      return 1;
    default:
      return -1;
  }
}

/** The sweep a size range makes (nccom-test's defaults), its sizes counted and checked. */
export function sweepOf(range: RangeFlags): SweepArgs {
  const { min, max, factor, step } = range;
  if (factor !== undefined && step !== undefined) throw new UsageError("give a step factor (-f) or a step size (-i), not both");
  const lo = min ?? DEFAULT_SIZE;
  const hi = max ?? Math.max(lo, DEFAULT_SIZE);
  if (lo > hi) throw new UsageError(`-b ${lo} is above -e ${hi}`);
  try {
    sweepSizes({ min: lo, max: hi, ...(factor !== undefined ? { factor } : {}), ...(step !== undefined ? { step } : {}) });
  } catch (e) {
    throw new UsageError((e as SizeError).message);
  }
  return { min: lo, max: hi, factor, step };
}

/** Every flag unset: what a run does by default. */
export function defaultArgs(): Args {
  return { scenario: "", json: false, explain: false, check: undefined, races: undefined, seed: undefined, devices: DEFAULT_DEVICES_DIR, logLevel: "warn", sweep: undefined, op: undefined, dtype: undefined, ranks: undefined, showAlgorithm: false, reportJson: undefined, plot: undefined, trace: undefined, traceLimit: undefined, stats: false, jobs: defaultJobs(), launchPs: undefined, noFold: false, noFastForward: false };
}

export function parseArgs(argv: readonly string[]): Args | "help" {
  const a: Partial<Args> = defaultArgs();
  delete a.scenario;
  const range: RangeFlags = {};
  for (let i = 0; i < argv.length; i++) {
    const t = argv[i]!;
    const used = commonFlag(argv, i, a, range);
    if (used >= 0) {
      i += used;
      continue;
    }
    switch (t) {
      case "-h":
      case "--help":
        return "help";
      case "--op":
        a.op = oneOfFlag(flagValue(argv, i++, t), t, SCENARIO_OP_NAMES);
        break;
      case "-r":
      case "--nworkers":
        a.ranks = intFlag(flagValue(argv, i++, t), t, 1);
        break;
      case "--instance":
        a.instance = flagValue(argv, i++, t);
        break;
      default:
        if (t.startsWith("-")) throw new UsageError(`unknown option ${t}`);
        if (a.scenario !== undefined) throw new UsageError(`one scenario file at a time (got ${a.scenario} and ${t})`);
        a.scenario = t;
    }
  }
  if (a.scenario === undefined) throw new UsageError("no scenario file given");
  const sweeping = Object.values(range).some((v) => v !== undefined) || a.op !== undefined || a.dtype !== undefined;
  if (range.factor !== undefined && range.step !== undefined) throw new UsageError("give a step factor (-f) or a step size (-i), not both");
  if (sweeping) a.sweep = { ...sweepOf(range), ...(range.min === undefined && range.max === undefined ? { sizesDefaulted: true } : {}) };
  if (a.plot !== undefined && !a.sweep) throw new UsageError("--plot draws a sweep: give -b / -e");
  if (a.reportJson !== undefined && !a.sweep) throw new UsageError("--report-to-json-file writes a sweep: give -b / -e");
  if (a.shard !== undefined && !a.sweep) throw new UsageError("--shard splits a sweep's sizes: give -b / -e");
  checkShardFlags(a);
  return a as Args;
}

/** The flags that make a run one shard of itself, with their values. */
export const SHARD_FLAGS = ["--shard", "--shards", "--out"] as const;

/** A command line without its shard flags: the command every shard of it runs, and the merge replays. */
export function withoutShardFlags(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if ((SHARD_FLAGS as readonly string[]).includes(argv[i]!)) i++;
    else out.push(argv[i]!);
  }
  return out;
}

/** --shard needs --out (and the reverse), and leaves tracing to an unsharded run. */
export function checkShardFlags(a: Partial<Args>): void {
  if (a.shard === undefined && a.shards !== undefined) throw new UsageError("--shards N goes with --shard auto");
  if (a.shard !== undefined && a.out === undefined) throw new UsageError("--shard writes its results to a partial file: give --out FILE (then npm run merge -- FILE...)");
  if (a.shard === undefined && a.out !== undefined) throw new UsageError("--out names a shard's partial file: give --shard I/N (or auto)");
  if (a.shard !== undefined && a.trace !== undefined) throw new UsageError("--trace follows one run: trace a size without --shard");
}
