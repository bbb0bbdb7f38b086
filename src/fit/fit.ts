// Calibration: measured nccom-test tables (src/fit/log.ts) run as typed on a preset, and the
// preset's free parameters fitted to them. Two kinds of parameter:
// - fixed costs (topsp.launchPs and the host section): an op's time is its device time plus a
//   linear combination of them (src/run/fixed-cost.ts), so they are solved in closed form (non-
//   negative least squares on relative error) from device times, without simulating again;
// - device parameters (rates, latencies, engine and channel counts): each trial simulates every
//   point again, searched coordinate by coordinate within bounds around the starting preset.
// Cross-validation refits with each series held out and scores the held-out series.
import { dirname, isAbsolute, resolve } from "node:path";
import { CcsimError } from "../ir/errors.ts";
import { EncAlgType } from "../ir/enums.ts";
import { explainScenario } from "../enc/compile.ts";
import type { Explanation } from "../enc/post.ts";
import { withLaunch, type DeviceSpec, type OpName, type Scenario } from "../ir/spec.ts";
import { revive, WorkerPool } from "../run/parallel.ts";
import { runTasks, type SweepTask } from "../run/sweep-task.ts";
import { ProgramCache, programKey } from "../run/program-cache.ts";
import type { OpOutcome } from "../run/pipeline.ts";
import { busFactor } from "../report/table.ts";
import { fixedCostOf, fixedCostValue } from "../run/fixed-cost.ts";
import { sweepPoint } from "../run/overrides.ts";
import { UsageError } from "../command/args.ts";
import { LogError, type MeasuredLog } from "./log.ts";
import { parseNccomArgs } from "../command/nccom.ts";

/** One measured table as a series of points to run: its command line on a preset. */
export interface Series {
  readonly id: string;
  /** The preset it runs on (a name in the presets folder). */
  readonly instance: string;
  /** The folder of presets `instance` is in (default: the project's devices/). */
  readonly devicesDir?: string;
  /** nccom-test's arguments, file arguments made absolute, output flags left out. */
  readonly argv: readonly string[];
  /** The variables its command line set (`MeasuredLog.env`): the runtime's that nccom reads count. */
  readonly env: Readonly<Record<string, string>>;
  readonly era: MeasuredLog["era"];
  readonly file: string;
  readonly command: string;
  /** The op it times, on the largest of its groups, over how many nodes (what its calibration covers). */
  readonly op: OpName;
  readonly ranks: number;
  readonly nodes: number;
  readonly points: readonly { readonly bytes: number; readonly timeUs: number; readonly algorithm?: string; readonly line: number }[];
}

/** Flags of nccom-test whose value is a file to read (relative to the log's folder). */
const FILE_FLAGS = new Set(["--custom-src-target-pairs", "--custom-replica-groups", "--variable-size-op-metadata", "--streams-json"]);
/** Output flags a calibration run leaves out (it writes nothing), with how many values each takes. */
const OUTPUT_FLAGS: Readonly<Record<string, number>> = { "--report-to-json-file": 1, "--show-input-output-size": 0 };

/**
 * A series from a log's first table, checked against its command: the op's bus factor at the
 * command's ranks must be what the table's busbw / algbw shows, each row's type the command's
 * dtype, and a run of the command must be possible on `instance`.
 */
export function seriesOf(log: MeasuredLog, instance: string, id: string, devicesDir?: string): Series {
  const base = dirname(resolve(log.file));
  const argv: string[] = [];
  for (let i = 0; i < log.argv.length; i++) {
    const t = log.argv[i]!;
    if (t in OUTPUT_FLAGS) {
      i += OUTPUT_FLAGS[t]!;
      continue;
    }
    argv.push(t);
    if (FILE_FLAGS.has(t) && i + 1 < log.argv.length) {
      const f = log.argv[++i]!;
      argv.push(isAbsolute(f) ? f : resolve(base, f));
    }
  }
  if (log.tables.length > 1) throw new LogError(log.file, log.tables[1]![0]!.line, "several tables (--streams-json runs): one table a log for calibration");
  let parsed: ReturnType<typeof parseNccomArgs>;
  try {
    // (The series runs on `instance`: an --instance in the log's command gives way to it.)
    parsed = parseNccomArgs([...withoutFlags(argv, ["--instance"]), "--instance", instance], log.env, devicesDir);
  } catch (e) {
    // The command's own faults (bad flags, a scenario the flags build); anything else is ours.
    if (e instanceof CcsimError || e instanceof UsageError) throw new LogError(log.file, 1, `the command line does not run here: ${e instanceof CcsimError ? e.render() : e.message}`, log.argv.join(" "));
    throw e;
  }
  if (parsed === "help") throw new LogError(log.file, 1, "the command line asks for --help");
  // (A logical NeuronCore size the command sets, --lnc or NEURON_LOGICAL_NC_CONFIG, is a preset of its own: trn2 at LNC 1 is trn2-lnc1.)
  const ran = parsed.scenario["instance"];
  if (ran !== instance) throw new LogError(log.file, 1, `the command runs on ${String(ran)}, not on ${instance}, the preset being fitted: its logical NeuronCore size (--lnc, NEURON_LOGICAL_NC_CONFIG) is that preset's (fit it with --instance ${String(ran)})`, log.argv.join(" "));
  const rows = log.tables[0]!;
  const ranks = Math.max(...(parsed.scenario["replicaGroups"] as number[][] | undefined)?.map((g) => g.length) ?? [parsed.scenario["ranks"] as number]);
  const factor = busFactor(parsed.op, ranks);
  for (const r of rows) {
    if (r.dtype !== parsed.run.dtype) throw new LogError(log.file, r.line, `type ${r.dtype} is not the command's -d ${parsed.run.dtype}`, r.dtype);
    // busbw / algbw is the op's bus factor at the command's ranks (where both are printed large enough to tell).
    if (r.algbw >= 0.5 && Math.abs(r.busbw / r.algbw - factor) > 0.03 * factor + 0.02 / r.algbw) {
      throw new LogError(log.file, r.line, `busbw / algbw is ${(r.busbw / r.algbw).toFixed(3)}, but ${parsed.op} over ${ranks} ranks has bus factor ${factor.toFixed(3)}: the table is not this command's (its op or -r differ)`, r.busbw);
    }
  }
  const points = rows.map((r) => ({ bytes: r.bytes, timeUs: r.timeUs, line: r.line, ...(r.algorithm ? { algorithm: r.algorithm } : {}) }));
  const vars = Object.entries(log.env).map(([k, v]) => `${k}=${v} `).join("");
  const nodes = Number(parsed.scenario["nodes"] ?? 1);
  return { id, instance, ...(devicesDir ? { devicesDir } : {}), argv, env: log.env, era: log.era, file: log.file, command: `${vars}nccom-test ${log.argv.join(" ")}`, op: parsed.op, ranks, nodes, points };
}


/** What one point's run gives: its time, the device's share of it, and its fixed-cost features. */
export interface PointRun {
  readonly timeUs: number;
  readonly deviceUs: number;
  readonly features: Readonly<Record<string, number>>;
  readonly algorithm: string;
}

/** A command line without these flags and their values. */
function withoutFlags(argv: readonly string[], flags: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (flags.includes(argv[i]!)) i++;
    else out.push(argv[i]!);
  }
  return out;
}

/** The flags a point sets itself: its size (one size) and the series' preset. */
const POINT_FLAGS = ["-b", "--minbytes", "-e", "--maxbytes", "-f", "--stepfactor", "-i", "--stepbytes", "--instance"];

/** A point's scenario: the command at that size, timing only. */
export function pointScenario(s: Series, bytes: number): Scenario {
  const a = parseNccomArgs([...withoutFlags(s.argv, POINT_FLAGS), "--instance", s.instance, "-b", String(bytes), "-e", String(bytes)], s.env, s.devicesDir);
  if (a === "help") throw new Error("help");
  return sweepPoint({ file: s.id, json: a.scenario, flags: "" }, a.op, a.run.dtype, bytes, "none");
}

function pointRun(o: OpOutcome): PointRun {
  return { timeUs: o.row.timeUs, deviceUs: o.row.timeUs - o.fixedCost.totalPs / 1e6, features: o.fixedCost.features, algorithm: o.row.algorithm };
}

/**
 * Every point of a trial: on this thread and `jobs` - 1 worker threads (the sweep's own task,
 * biggest first, the workers started once the points left would take a second), in order.
 */
/** A point as a trial runs it: its series and size, its scenario (absent where it does not build), and what it is keyed by (Evaluator.keyed). */
interface TrialPoint {
  readonly s: Series;
  readonly bytes: number;
  readonly scn: Scenario | undefined;
  /** The device fields it depends on beyond its decision (`pointSpec`), and the decision. */
  readonly base: DeviceSpec;
  readonly decision: string;
  /** The device it runs on, where a batch mixes presets (`fillTogether`); else runPoints' own. */
  readonly device?: DeviceSpec;
}

/** What a trial's runs tell the next trials of the same programs: which found no period to skip, and how long each ran. */
interface RunMemory {
  readonly fruitless: Set<string>;
  readonly lastMs: Map<string, number>;
}

function runPoints(points: readonly TrialPoint[], spec: DeviceSpec, jobs: number, programs?: ProgramCache, pool?: WorkerPool, noFastForward = false, memory?: RunMemory, counts?: { compiled: number }): ({ run: PointRun } | { error: string })[] {
  const out: ({ run: PointRun } | { error: string } | undefined)[] = new Array(points.length);
  const inputs: SweepTask[] = [];
  const at: number[] = [];
  const keys: string[] = [];
  points.forEach((p, k) => {
    try {
      // (A point that does not build says why here.)
      const scenario = p.scn ?? pointScenario(p.s, p.bytes);
      // A program compiled for an earlier trial runs again; one not yet kept comes back to be. It
      // is named the way the point is keyed (the run's timing fields aside).
      const key = programs ? `${programKey(scenario, p.base, true)}|${p.decision}` : "";
      const program = programs?.get(key);
      // A kept program whose run found no period to skip runs every event in the next trials (the looking costs; the times are the same either way).
      const full = noFastForward || (program !== undefined && memory?.fruitless.has(key) === true);
      if (counts && !program) counts.compiled++;
      // (One the cache has no room for runs streamed, not drained whole for nothing.)
      const room = programs?.room ?? 0;
      inputs.push({ scenario, spec: p.device ?? spec, logLevel: "silent", unfolded: false, ...(full ? { noFastForward: true } : {}), ...(program ? { program, programKey: key } : room > 0 ? { keepProgram: true, keepBytes: room, programKey: key } : {}) });
      at.push(k);
      keys.push(key);
    } catch (e) {
      if (!(e instanceof CcsimError)) throw e;
      out[k] = { error: e.render() };
    }
  });
  // Once every point has run before, the longest first by their last runs: bytes x ranks put a
  // 64-rank mesh of a few bytes (a tenth of a second) after two-rank points of megabytes (a
  // millisecond), and a thread could be left alone with the meshes at a trial's end.
  const lastMs = memory && programs ? keys.map((key) => memory.lastMs.get(key)) : [];
  const cost = lastMs.length > 0 && lastMs.every((ms) => ms !== undefined) ? (lastMs as number[]) : undefined;
  const results = runTasks(inputs, jobs, pool, cost);
  results.forEach((r, i) => {
    const k = at[i]!;
    if (r.kind === "done") {
      if (r.program) programs!.offer(keys[i]!, r.program);
      if (programs && r.outcome.steady?.periods === 0) memory?.fruitless.add(keys[i]!);
      if (programs) memory?.lastMs.set(keys[i]!, r.outcome.wallMs);
      out[k] = { run: pointRun(r.outcome) };
    } else if (r.kind === "hang") out[k] = { error: `${points[k]!.s.id} hung at ${points[k]!.bytes} B` };
    else out[k] = { error: (revive(r.error) as CcsimError).render() };
  });
  return out as ({ run: PointRun } | { error: string })[];
}

/** A device parameter the fit may move, with its bounds. */
export interface DeviceParam {
  readonly field: string;
  readonly integer: boolean;
  /** A selection window (bytes per rank): searched by factors of two, from absent by a ladder of powers of four. */
  readonly window?: boolean;
  readonly min: number;
  readonly max: number;
}

function getField(spec: DeviceSpec, field: string): number {
  const [a, b] = field.split(".") as [string, string];
  const v = (spec as unknown as Record<string, Record<string, unknown>>)[a]?.[b];
  return typeof v === "number" ? v : Number.NaN;
}

function setField(spec: DeviceSpec, field: string, v: number): DeviceSpec {
  const [a, b] = field.split(".") as [string, string];
  const sec = (spec as unknown as Record<string, Record<string, unknown>>)[a]!;
  return { ...spec, [a]: { ...sec, [b]: v } } as DeviceSpec;
}

/** A spec's fixed costs set from `theta` (topsp.launchPs and the host section's fields). */
export function withFixedCosts(spec: DeviceSpec, theta: Readonly<Record<string, number>>): DeviceSpec {
  let s = spec;
  for (const [field, v] of Object.entries(theta)) {
    const ps = Math.max(0, Math.round(v / 10_000) * 10_000);
    if (field === "topsp.launchPs") s = { ...s, topsp: { ...s.topsp, launchPs: ps } };
    else if (field.startsWith("host.algorithmPs.")) s = { ...s, host: { ...s.host, algorithmPs: { ...s.host.algorithmPs, [field.slice(17)]: ps } } };
    else s = { ...s, host: { ...s.host, [field.slice(5)]: ps } };
  }
  return s;
}

/**
 * The device parameters the series can inform, bounded around the starting preset: rates from
 * half to twice (an engine's: half to the preset's, its theoretical rate), latencies a quarter to four times, engine and channel counts within what a rank
 * has. Network ones only where a series spans nodes; the permute's channels where one permutes.
 */
export function deviceParams(spec: DeviceSpec, series: readonly Series[], opts: { readonly windows?: boolean } = {}): DeviceParam[] {
  const rate = (field: string): DeviceParam => ({ field, integer: false, min: getField(spec, field) / 2, max: getField(spec, field) * 2 });
  const engines = spec.dma.enginesPerCore * spec.collectives.virtualCoreSize;
  // An engine's rate is the facts' theoretical figure at most (hardware-facts.md §6.4: the achievable one is lower).
  const ps: DeviceParam[] = [{ ...rate("dma.engineBytesPerSecond"), max: getField(spec, "dma.engineBytesPerSecond") }, rate("link.bytesPerSecond"), { field: "link.latencyPs", integer: false, min: getField(spec, "link.latencyPs") / 4, max: getField(spec, "link.latencyPs") * 4 }];
  ps.push({ field: "ring.defaultChannels", integer: true, min: 1, max: Math.max(1, Math.min(8, Math.floor(engines / spec.ring.foldN))) });
  ps.push({ field: "collectives.meshFolds", integer: true, min: 1, max: Math.max(1, Math.min(16, engines)) });
  if (series.some((s) => s.argv.includes("permute") || s.argv.includes("sendrecv"))) ps.push({ field: "collectives.permuteChannels", integer: true, min: 1, max: Math.max(1, Math.floor(engines / spec.ring.foldN)) });
  const multiNode = series.some((s) => {
    const k = s.argv.findIndex((t) => t === "-N" || t === "--nnodes");
    return k >= 0 && Number(s.argv[k + 1]) > 1;
  });
  if (multiNode && spec.network) {
    ps.push(rate("network.bytesPerSecond"));
    ps.push({ field: "network.messageCostPs", integer: false, min: 0, max: Math.max(4 * spec.network.messageCostPs, 20_000_000) });
  }
  if (opts.windows) {
    // The runtime's selection windows, where the series reach them: another runtime's tables may
    // show other limits than the seed's (its runtime's), so a fit from logs may move them.
    const window = (field: string): DeviceParam => ({ field, integer: true, window: true, min: 0, max: 2 ** 32 });
    const single = series.filter((s) => seriesFlag(s, ["-N", "--nnodes"]) === 1);
    if (single.some((s) => seriesFlag(s, ["-r", "--nworkers"]) === 2)) ps.push(window("collectives.meshMaxBytesTwoRanks"));
    if (single.some((s) => seriesFlag(s, ["-r", "--nworkers"]) > 2)) ps.push(window("collectives.meshMaxBytes"));
    if (multiNode) ps.push(window("collectives.meshMaxBytesMultiNode"), window("collectives.flatRingMinBytes"));
  }
  return ps.filter((p) => !(p.max <= p.min));
}

/** A series' numeric flag (one of `names`: "-r", "--nworkers"), 1 where its command does not give it. */
export function seriesFlag(s: Series, names: readonly string[]): number {
  const k = s.argv.findIndex((t) => names.includes(t));
  return k >= 0 ? Number(s.argv[k + 1]) : 1;
}

/** The values a coordinate search tries for `p` from `cur` in a round (whole steps for counts and windows in the first two). */
function triesOf(p: DeviceParam, cur: number, round: number, step: number): number[] {
  if (p.window) {
    // Whole factors of two and four in the first three rounds (a window's effect comes in steps:
    // the points it moves from one algorithm to another); from absent (never / the default),
    // every power of four from 64 B to the bound.
    if (round >= 3) return [];
    if (Number.isNaN(cur)) return Array.from({ length: 14 }, (_, k) => 4 ** (k + 3)).filter((v) => v <= p.max);
    return cur === 0 ? [64] : [cur / 4, cur / 2, cur * 2, cur * 4];
  }
  if (p.integer) return round >= 2 ? [] : [cur - 1, cur + 1, cur + 2];
  return cur === 0 ? [p.max / 4, p.max / 2] : [cur / step, cur * step, cur / step / step, cur * step * step];
}

/** Per point: its series, published time, and run (or the error it failed with). */
export interface Evaluated {
  readonly series: string;
  readonly bytes: number;
  readonly publishedUs: number;
  readonly publishedAlgorithm: string | undefined;
  readonly run: PointRun | undefined;
  readonly error?: string;
}

/**
 * The algorithm-selection windows (collectives.*): each is read by the gates alone, so a point's
 * run depends on them only through what the gates decide.
 */
export const WINDOW_FIELDS = ["collectives.meshMaxBytes", "collectives.meshMaxBytesTwoRanks", "collectives.meshMaxBytesMultiNode", "collectives.flatRingMinBytes"] as const;

/** A spec's device parameters as a cache key: no fixed costs, no sources, and (`windows` false) no selection windows. */
function deviceKey(spec: DeviceSpec, windows: boolean): string {
  const collectives = windows ? spec.collectives : Object.fromEntries(Object.entries(spec.collectives).filter(([k]) => !WINDOW_FIELDS.includes(`collectives.${k}` as (typeof WINDOW_FIELDS)[number])));
  return JSON.stringify({ ...spec, host: undefined, sources: undefined, collectives });
}

/**
 * Families whose composers build no mesh-tape program (src/enc/context.ts's meshProgram: mesh,
 * UltraServer mesh and RDH build one). collectives.meshFolds sizes a mesh program's engines, and
 * is read besides only by the mesh gate's step limit, whose verdict the decision holds: a point
 * whose every op resolves to one of these (a hierarchical op: every stage it selects) runs alike
 * whatever its meshFolds.
 */
const NO_MESH_TAPE: readonly EncAlgType[] = [EncAlgType.RING, EncAlgType.KANGARING, EncAlgType.SINGLE_CYCLE_RING];

/**
 * The fields of `spec` a point's program and run depend on beyond its decision (decisionKey):
 * not the selection windows (read by the gates alone), not ring.defaultChannels nor
 * collectives.permuteChannels (read only to choose the channel count, which the decision holds),
 * not collectives.meshFolds where `meshFree`, and not the network section where `oneNode` (a
 * point on one node sends nothing over it). Two specs alike here, with the same decision, compile
 * a point to the same bytes and run it to the same times (test/fit/keys.test.ts compiles them and
 * compares). For keys only: the fields left out are missing.
 */
export function pointSpec(spec: DeviceSpec, meshFree: boolean, oneNode: boolean): DeviceSpec {
  const drop = new Set<string>([...WINDOW_FIELDS.map((f) => f.slice("collectives.".length)), "permuteChannels", ...(meshFree ? ["meshFolds"] : [])]);
  const { defaultChannels: _channels, ...ring } = spec.ring;
  return { ...spec, ring: ring as DeviceSpec["ring"], collectives: Object.fromEntries(Object.entries(spec.collectives).filter(([k]) => !drop.has(k))) as unknown as DeviceSpec["collectives"], ...(oneNode ? { network: undefined } : {}) };
}

/**
 * What the gates decide for a point's ops on `spec` (each op's algorithm, its hierarchical stages,
 * its channels, every gate's yes or no), and whether no stage builds a mesh program: two specs
 * alike in `pointSpec` run a point alike when this is the same. A scenario the composer refuses
 * keys by the whole spec.
 */
export function decisionKey(scn: Scenario, spec: DeviceSpec): { readonly key: string; readonly meshFree: boolean } {
  try {
    const ex = explainScenario(scn, spec);
    const selections = (e: Explanation): string => (e.resolved.value === EncAlgType.HIER ? (/Hier algorithm selections[^;]*/.exec(e.gates.find((g) => g.gate === "hierarchical")!.verdict.reason)?.[0] ?? "") : "");
    // The families an op's program may compose: its own, or a hierarchical op's stage selections
    // (alg_intra_allg 3 ...; INVALID where a stage is not used; none read: not known, so not free).
    const families = (e: Explanation): EncAlgType[] => {
      if (e.resolved.value !== EncAlgType.HIER) return [e.resolved.value];
      const algs = [...selections(e).matchAll(/alg_\w+ (\d+)/g)].map((m) => Number(m[1]) as EncAlgType).filter((a) => a !== EncAlgType.INVALID);
      return algs.length > 0 ? algs : [EncAlgType.HIER];
    };
    return {
      key: JSON.stringify(ex.map((e) => [e.resolved.value, e.channels, e.gates.map((g) => (g.verdict.ok ? 1 : 0)).join(""), selections(e)])),
      meshFree: ex.every((e) => families(e).every((a) => NO_MESH_TAPE.includes(a))),
    };
  } catch (e) {
    if (e instanceof CcsimError) return { key: deviceKey(spec, true), meshFree: false };
    throw e;
  }
}

/**
 * Run every point of `series` up to `maxBytes` on `spec`. Runs are cached point by point, by the
 * device parameters and what the gates decide: a trial that moves a selection window runs again
 * only the points whose algorithm it changes; one that moves the fixed costs alone runs nothing.
 */
export class Evaluator {
  private readonly cache: Map<string, PointResult>;
  /** Parameter sets that ran at least one point. */
  trials = 0;
  /** Points simulated, over all trials. */
  pointsRun = 0;
  /** Of those, the ones compiled (no program kept for them). */
  pointsCompiled = 0;
  /** Each trial's wall-clock milliseconds (the first compiles; later ones run kept programs). */
  readonly trialMs: number[] = [];
  constructor(
    readonly series: readonly Series[],
    readonly maxBytes = Number.MAX_SAFE_INTEGER,
    /** Threads a trial's points run on (1: this one). */
    readonly jobs = 1,
    readonly onTrial?: () => void,
    /** Points already run (a merge of sharded runs: each shard's primed points). */
    preload?: ReadonlyMap<string, PointResult>,
    /** Keep compiled programs to run again under other timing (a fit's trials): up to this many bytes of descriptor rings (0: none). */
    reuseBytes = 0,
    /** Run every event of every point (--no-fastforward). */
    readonly noFastForward = false,
  ) {
    this.cache = new Map(preload ?? []);
    this.programs = reuseBytes > 0 ? new ProgramCache(reuseBytes) : undefined;
  }
  /** Programs kept for the next trials (trials without recompiling). */
  readonly programs: ProgramCache | undefined;
  /** Kept programs whose run skipped no period (the next trials run them without looking), and each point's last run time. */
  private readonly memory: RunMemory = { fruitless: new Set(), lastMs: new Map() };
  private pool: WorkerPool | undefined;

  /**
   * Done with the trials: stop the worker threads kept for them, and let the kept programs go (a
   * calibration fits its presets one after the other, each with its own evaluator: the programs
   * of those done stayed, and its budget held once a preset).
   */
  close(): void {
    this.pool?.close();
    this.pool = undefined;
    this.programs?.clear();
  }

  /**
   * The points of `only` up to maxBytes on `spec`, in order, each with its cache key: the device
   * fields it depends on beyond its decision (`pointSpec`), and the decision.
   */
  private keyed(spec: DeviceSpec, only: readonly Series[]): { device: DeviceSpec; points: (TrialPoint & { p: Series["points"][number] })[]; keys: string[] } {
    // The fixed costs shift a run exactly: the device's share is simulated with none.
    const device = withLaunch(spec, 0);
    // (A few shapes of the device a trial: each made and written out once.)
    const bases = new Map<string, { spec: DeviceSpec; key: string }>();
    const baseOf = (meshFree: boolean, oneNode: boolean): { spec: DeviceSpec; key: string } => {
      const shape = `${meshFree}/${oneNode}`;
      let b = bases.get(shape);
      if (!b) {
        const base = pointSpec(device, meshFree, oneNode);
        bases.set(shape, (b = { spec: base, key: deviceKey(base, true) }));
      }
      return b;
    };
    const keys: string[] = [];
    const points = only.flatMap((s) =>
      s.points
        .filter((p) => p.bytes <= this.maxBytes)
        .map((p) => {
          let scn: Scenario | undefined;
          try {
            scn = pointScenario(s, p.bytes);
          } catch (e) {
            if (!(e instanceof CcsimError)) throw e;
          }
          const decision = scn ? decisionKey(scn, device) : { key: "unbuilt", meshFree: false };
          const base = baseOf(decision.meshFree, scn?.nodes === 1);
          keys.push(`${base.key}|${s.id}|${p.bytes}|${decision.key}`);
          return { s, p, bytes: p.bytes, scn, base: base.spec, decision: decision.key };
        }),
    );
    return { device, points, keys };
  }

  /** The points of `keys` not cached yet (each key once). */
  private missing(points: readonly TrialPoint[], keys: readonly string[]): [string, TrialPoint][] {
    return [...new Map(points.map((p, k) => [keys[k]!, p] as const).filter(([key]) => !this.cache.has(key))).entries()];
  }

  /** The points of `spec` not run yet, on their device, with their keys: `fillTogether`'s share of this evaluator. */
  pending(spec: DeviceSpec, only: readonly Series[] = this.series): [string, TrialPoint][] {
    const { device, points, keys } = this.keyed(spec, only);
    return this.missing(points, keys).map(([key, p]) => [key, { ...p, device }]);
  }

  /**
   * Runs made for this evaluator elsewhere (`fillTogether`, in `ms` with other evaluators' points),
   * cached by their keys: a trial of its own, counted as `fill` counts one (a fit that kept no
   * programs said one trial fewer than the same fit keeping them).
   */
  accept(keys: readonly string[], runs: readonly PointResult[], ms: number): void {
    if (keys.length === 0) return;
    keys.forEach((key, i) => this.cache.set(key, runs[i]!));
    this.trials++;
    this.pointsRun += keys.length;
    this.pointsCompiled += keys.length;
    this.trialMs.push(ms);
    if (this.trials === 1) this.firstShared = true;
    this.onTrial?.();
  }

  /** Its first trial ran in one batch with other evaluators' points (`accept`): its time is the batch's. */
  firstShared = false;

  /** Run the points of `keys` not cached yet (each key once). */
  private fill(device: DeviceSpec, points: readonly TrialPoint[], keys: readonly string[]): void {
    const missing = this.missing(points, keys);
    if (missing.length === 0) return;
    this.trials++;
    this.pointsRun += missing.length;
    // (Trials that keep programs keep their worker threads too: started once, not each trial.)
    if (this.programs && this.jobs > 1) this.pool ??= new WorkerPool();
    this.programs?.nextRound();
    const t0 = performance.now();
    const counts = { compiled: 0 };
    const runs = runPoints(missing.map(([, p]) => p), device, this.jobs, this.programs, this.pool, this.noFastForward, this.memory, counts);
    this.pointsCompiled += counts.compiled;
    // (Programs the cache let go of for newer ones: the kept workers let them go too.)
    const dropped = this.programs?.takeDropped() ?? [];
    if (dropped.length > 0) this.pool?.drop(dropped);
    this.trialMs.push(performance.now() - t0);
    missing.forEach(([key], i) => this.cache.set(key, runs[i]!));
    this.onTrial?.();
  }

  run(spec: DeviceSpec, only: readonly Series[] = this.series): Evaluated[] {
    const { device, points, keys } = this.keyed(spec, only);
    this.fill(device, points, keys);
    return points.map(({ s, p }, k) => {
      const r = this.cache.get(keys[k]!)!;
      const e = { series: s.id, bytes: p.bytes, publishedUs: p.timeUs, publishedAlgorithm: p.algorithm };
      return "run" in r ? { ...e, run: { ...r.run, timeUs: r.run.deviceUs + fixedCostOf(spec, r.run.features).totalPs / 1e6 } } : { ...e, run: undefined, error: r.error };
    });
  }

  /**
   * Run only the points `take` picks (by their place in run()'s order on `only`) and return each
   * one's cache key and result: what a shard of a calibration run hands its merge.
   */
  prime(spec: DeviceSpec, take: (k: number) => boolean, only: readonly Series[] = this.series): { index: number; key: string; result: PointResult }[] {
    const { device, points, keys } = this.keyed(spec, only);
    const picked = points.map((_, k) => k).filter(take);
    this.fill(device, picked.map((k) => points[k]!), picked.map((k) => keys[k]!));
    return picked.map((k) => ({ index: k, key: keys[k]!, result: this.cache.get(keys[k]!)! }));
  }
}

/**
 * Run the points several evaluators (one a preset) have not run yet in one batch, on `jobs`
 * threads: a calibration's presets share the threads, instead of each preset's points waiting for
 * the last one's longest. For evaluators that keep no programs (their trials run from scratch).
 */
export function fillTogether(list: readonly { readonly ev: Evaluator; readonly spec: DeviceSpec }[], jobs: number, noFastForward = false): void {
  const pending = list.map(({ ev, spec }) => ev.pending(spec));
  const points = pending.flat();
  if (points.length === 0) return;
  // (Each point carries its own device: runPoints' spec stands for none of them.)
  const t0 = performance.now();
  const runs = runPoints(points.map(([, p]) => p), points[0]![1].device!, jobs, undefined, undefined, noFastForward);
  const ms = performance.now() - t0;
  let at = 0;
  pending.forEach((mine, i) => {
    list[i]!.ev.accept(mine.map(([key]) => key), runs.slice(at, at + mine.length), ms);
    at += mine.length;
  });
}

/** A point's run, or why it did not run. */
export type PointResult = { readonly run: PointRun } | { readonly error: string };

/** The fixed-cost fields a spec has (set or not): launch, the host section's, each algorithm's. */
function fixedFields(spec: DeviceSpec): string[] {
  return ["topsp.launchPs", "host.syncPs", "host.nodeSyncPs", "host.iterationPs", "host.countsPs", ...Object.keys(spec.host.algorithmPs).map((a) => `host.algorithmPs.${a}`)];
}

/**
 * exp(mean |ln(simulated / published)|) and the count within ±10 % and ±25 %, each a factor either
 * way on the same log scale (within ±25 %: 0.8 to 1.25 of the published time), as
 * ../shared/tools/published.mjs counts them.
 */
export interface ErrorSummary {
  readonly points: number;
  readonly failed: number;
  readonly within10: number;
  readonly within25: number;
  readonly geomeanErrorFactor: number;
  /** The largest |simulated / published - 1| (0 with no point run). */
  readonly worst: number;
}

export function summarize(ev: readonly Evaluated[]): ErrorSummary {
  const ran = ev.filter((e) => e.run);
  const ratios = ran.map((e) => e.run!.timeUs / e.publishedUs);
  const within = (f: number) => ratios.filter((r) => Math.abs(Math.log(r)) <= Math.log(1 + f) + 1e-12).length;
  return {
    points: ev.length,
    failed: ev.length - ran.length,
    within10: within(0.1),
    within25: within(0.25),
    geomeanErrorFactor: ran.length ? Math.exp(ratios.reduce((a, r) => a + Math.abs(Math.log(r)), 0) / ran.length) : Number.NaN,
    worst: ratios.reduce((a, r) => Math.max(a, Math.abs(r - 1)), 0),
  };
}

/** Sum of squared log errors (a failed point counts as a factor of 20). */
function cost(ev: readonly Evaluated[]): number {
  return ev.reduce((a, e) => a + (e.run ? Math.log(e.run.timeUs / e.publishedUs) ** 2 : Math.log(20) ** 2), 0);
}

/**
 * The fixed costs that fit the device times best: non-negative least squares on relative error
 * (coordinate descent), over the fields the points exercise; a field no point exercises keeps the
 * spec's value. A small pull towards the spec's values picks one answer where fields move together.
 */
export function solveFixedCosts(spec: DeviceSpec, ev: readonly Evaluated[]): Record<string, number> {
  const ran = ev.filter((e) => e.run);
  const fields = [...new Set(ran.flatMap((e) => Object.entries(e.run!.features).filter(([, x]) => x > 0).map(([f]) => f)))].sort();
  const theta: Record<string, number> = Object.fromEntries(fields.map((f) => [f, fixedCostValue(spec, f) / 1e6]));
  if (fields.length === 0) return {};
  const rows = ran.map((e) => ({ d: e.run!.deviceUs, p: e.publishedUs, x: fields.map((f) => e.run!.features[f] ?? 0) }));
  const prior = fields.map((f) => theta[f]!);
  // The pull is a ten-thousandth of a typical point's weight (1 / published time squared).
  const ridge = (1e-4 * rows.reduce((a, r) => a + 1 / (r.p * r.p), 0)) / rows.length;
  const th = fields.map((f) => theta[f]!);
  for (let iter = 0; iter < 5000; iter++) {
    let moved = 0;
    for (let k = 0; k < fields.length; k++) {
      let g = ridge * (th[k]! - prior[k]!);
      let h = ridge;
      for (const r of rows) {
        if (r.x[k] === 0) continue;
        const pred = r.d + r.x.reduce((a, x, j) => a + x * th[j]!, 0);
        const w = 1 / (r.p * r.p);
        g += w * (pred - r.p) * r.x[k]!;
        h += w * r.x[k]! * r.x[k]!;
      }
      const next = Math.max(0, th[k]! - g / h);
      moved = Math.max(moved, Math.abs(next - th[k]!));
      th[k] = next;
    }
    if (moved < 1e-7) break;
  }
  return Object.fromEntries(fields.map((f, k) => [f, th[k]! * 1e6]));
}

export interface FitResult {
  readonly spec: DeviceSpec;
  readonly before: ErrorSummary;
  readonly after: ErrorSummary;
  /** The fields that moved: from, to. */
  readonly moved: readonly { readonly field: string; readonly from: number; readonly to: number }[];
  readonly trials: number;
  readonly evaluated: readonly Evaluated[];
}

export interface FitOptions {
  readonly maxBytes?: number;
  /** Coordinate-search rounds over the device parameters, each with half the last's step (default 6; 0: fixed costs only). */
  readonly rounds?: number;
  /** After each trial: the best cost so far, the trials run and those planned (an estimate: cached trials cost nothing). */
  readonly progress?: ((best: number, trials: number, planned: number) => void) | undefined;
  /** The device parameters to search (default: deviceParams of the start). */
  readonly params?: readonly DeviceParam[];
  readonly evaluator?: Evaluator;
}

/** Fit `start`'s free parameters to `series` (all on `start`'s device). */
export function fit(start: DeviceSpec, series: readonly Series[], opts: FitOptions = {}): FitResult {
  const ev = opts.evaluator ?? new Evaluator(series, opts.maxBytes);
  const score = (spec: DeviceSpec): { spec: DeviceSpec; cost: number } => {
    const fitted = withFixedCosts(spec, solveFixedCosts(spec, ev.run(spec, series)));
    return { spec: fitted, cost: cost(ev.run(fitted, series)) };
  };
  const before = summarize(ev.run(start, series));
  const params = opts.params ?? deviceParams(start, series);
  const rounds = opts.rounds ?? 6;
  const planned = ev.trials + 1 + params.reduce((n, p) => n + (p.window ? 12 : p.integer ? 3 * Math.min(2, rounds) : 4 * rounds), 0);
  let best = score(start);
  opts.progress?.(best.cost, ev.trials, planned);
  for (let round = 0; round < rounds; round++) {
    // Steps shrink round by round: a factor of 2^(1/2), then 2^(1/4), ... down to 2^(1/64); counts
    // move by whole steps in the first two rounds.
    const step = 2 ** (0.5 / 2 ** round);
    for (const p of params) {
      const cur = getField(best.spec, p.field);
      for (const raw of triesOf(p, cur, round, step)) {
        const v = Math.round(raw);
        if (!(v >= p.min && v <= p.max) || v === cur) continue;
        let r: { spec: DeviceSpec; cost: number };
        try {
          r = score(setField(best.spec, p.field, v));
        } catch (e) {
          if (e instanceof CcsimError) continue;
          throw e;
        }
        if (r.cost < best.cost - 1e-9) best = r;
        opts.progress?.(best.cost, ev.trials, planned);
      }
    }
  }
  const evaluated = ev.run(best.spec, series);
  const moved: FitResult["moved"][number][] = [];
  for (const f of new Set([...params.map((p) => p.field), ...fixedFields(best.spec), ...fixedFields(start)])) {
    const from = f.startsWith("topsp.") || f.startsWith("host.") ? fixedCostValue(start, f) : getField(start, f);
    const to = f.startsWith("topsp.") || f.startsWith("host.") ? fixedCostValue(best.spec, f) : getField(best.spec, f);
    if (from !== to && !(Number.isNaN(from) && Number.isNaN(to))) moved.push({ field: f, from, to });
  }
  return { spec: best.spec, before, after: summarize(evaluated), moved, trials: ev.trials, evaluated };
}

/** One series held out: the fit on the others, scored on it. */
export interface HeldOut {
  readonly series: string;
  readonly summary: ErrorSummary;
  readonly evaluated: readonly Evaluated[];
}

/**
 * Leave-one-series-out: for each series, fit on the others from `start` with every fixed cost the
 * others do not exercise set to 0 (the held-out series cannot lend its own), and score it.
 */
export function crossValidate(start: DeviceSpec, series: readonly Series[], opts: FitOptions = {}): HeldOut[] {
  // (The device parameters searched are the caller's, or each refit's own deviceParams.)
  const out: HeldOut[] = [];
  const ev = opts.evaluator ?? new Evaluator(series, opts.maxBytes);
  for (const s of series) {
    const others = series.filter((o) => o !== s);
    if (others.length === 0) continue;
    const seen = new Set(ev.run(start, others).flatMap((e) => (e.run ? Object.entries(e.run.features).filter(([, x]) => x > 0).map(([f]) => f) : [])));
    const neutral = withFixedCosts(start, Object.fromEntries(fixedFields(start).filter((f) => !seen.has(f)).map((f) => [f, 0])));
    const r = fit(neutral, others, { ...opts, evaluator: ev });
    const held = ev.run(r.spec, [s]);
    out.push({ series: s.id, summary: summarize(held), evaluated: held });
  }
  return out;
}
