// The conformance matrix: seeded random legal configurations over presets x ranks x placements x
// group shapes x ops x dtypes x reduce ops x sizes x algorithms, each run through the same path as
// a scenario file (parse, compile, simulate, check) and classified by outcome.
import seedrandom from "seedrandom";
import pino from "pino";
import { DTYPES, REDUCE_OPS, dtypeSize, type Dtype } from "../ir/dtypes.ts";
import { ALGORITHMS, groupsRanksLcm, SCENARIO_OP_NAMES, type DeviceSpec, type OpName } from "../ir/spec.ts";
import { CcsimError } from "../ir/errors.ts";
import { parseDeviceSpec, parseScenario } from "../scenario/index.ts";
import { applySets, loadDeviceJson, loadDeviceWith, setFlags, type PresetSet } from "./load.ts";
import { mismatchText, runScenario } from "./pipeline.ts";

/** Presets the matrix draws from (the instance presets; the ideal machines are for closed forms). */
export const CONFORMANCE_PRESETS = ["trn1", "trn2", "trn2-lnc1", "inf2-48xl", "inf2-24xl", "trn2-ultraserver"] as const;

/**
 * Errors that are the runtime's own refusals, raised before anything is composed: bad groups, an op
 * the dispatcher does not serve (broadcast, reduce, all-to-all without mesh), a placement the
 * instance cannot hold, a multi-node run without a network, buffers a device's HBM cannot hold.
 */
export const REFUSAL_CODES: ReadonlySet<string> = new Set(["CMP1001", "CMP1002", "CMP1003", "CMP1201", "CMP1202", "CMP1301", "CMP1302", "CMP1303", "CMP1312", "CMP1314"]);

export interface ConformanceCase {
  readonly id: number;
  /** The scenario, as a file would hold it. */
  readonly scenario: Record<string, unknown>;
  /** One line describing the case. */
  readonly label: string;
  /** --vary-presets: preset fields the case changes (section -> key -> value), each within the validator's bounds. */
  readonly preset?: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /** --set: preset fields the whole run changes, before a case's own. */
  readonly sets?: readonly PresetSet[];
}

export type CaseOutcome =
  | { readonly kind: "pass"; readonly algorithms: readonly string[] }
  | { readonly kind: "refused"; readonly code: string; readonly message: string }
  | { readonly kind: "fail"; readonly code: string; readonly message: string };

export interface GenerateOptions {
  /** Largest op size in bytes (sizes are log-uniform from one element, or minBytes, up to it). */
  readonly maxBytes: number;
  readonly minBytes?: number;
  /** Values are checked when every rank's input + output fit in this many bytes; symbolically above. */
  readonly maxCheckedPayload: number;
  readonly presets?: readonly string[];
  /** Also vary channels, priority classes and a second op on another stream (a separate random stream: the other draws stay as they are). */
  readonly knobs?: boolean;
  /** Also vary the preset's ring channels, receive slots, chunk and folds, and descriptors' most bytes (a separate random stream as well). */
  readonly varyPresets?: boolean;
  /** Rank counts drawn from [minRanks, maxRanks] (defaults 1 and CASE_RANKS_MAX); presets that hold fewer than minRanks are not drawn. */
  readonly minRanks?: number;
  readonly maxRanks?: number;
}

const BLOCKED: readonly OpName[] = ["all-gather", "reduce-scatter", "all-to-all"];
const REDUCING: readonly OpName[] = ["all-reduce", "reduce-scatter", "reduce", "permute-reduce", "permute-reduce-implicit"];
const PAIRS: readonly OpName[] = ["send", "recv", "permute", "permute-reduce", "permute-implicit", "permute-reduce-implicit"];

/** How many nodes a preset can join: through its network, or its pod's NeuronLinks. */
/** The matrix keeps to groups a case runs in seconds (scale has scenarios and the bench of its own). */
const CASE_RANKS_MAX = 128;

/** Nodes a case may take: with a network, enough to cross address blocks (8 trn1 nodes are 128 device ids) and pods (two UltraServers). */
function maxNodes(spec: DeviceSpec, podNodes: number): number {
  return spec.network ? Math.max(8, 2 * podNodes) : podNodes;
}

/** Seeded random legal configurations (deterministic for a seed). */
export function generateCases(seed: number, count: number, opts: GenerateOptions, specs: ReadonlyMap<string, DeviceSpec>): ConformanceCase[] {
  const rng = seedrandom(`conformance/${seed}`);
  const int = (lo: number, hi: number) => lo + Math.floor(rng() * (hi - lo + 1));
  const pick = <T>(xs: readonly T[]): T => xs[int(0, xs.length - 1)]!;
  const minRanks = opts.minRanks ?? 1;
  const most = (p: string) => {
    const spec = specs.get(p)!;
    const podNodes = spec.topology.kind === "table" ? (spec.topology.podNodes ?? 1) : 1;
    return spec.devices * Math.floor(spec.coresPerDevice / spec.collectives.virtualCoreSize) * maxNodes(spec, podNodes);
  };
  const presets = (opts.presets ?? CONFORMANCE_PRESETS).filter((p) => minRanks <= 1 || most(p) >= minRanks);
  const cases: ConformanceCase[] = [];
  for (let id = 0; id < count; id++) {
    const instance = pick(presets);
    const spec = specs.get(instance)!;
    const rpdMax = Math.floor(spec.coresPerDevice / spec.collectives.virtualCoreSize);
    const podNodes = spec.topology.kind === "table" ? (spec.topology.podNodes ?? 1) : 1;
    const nodesMax = maxNodes(spec, podNodes);
    const rankMax = Math.min(opts.maxRanks ?? CASE_RANKS_MAX, most(instance));
    // Ranks first (every count in the range up to the preset's most, primes included), then a
    // placement of them. Mostly counts some placement holds; one in five drawn from every count.
    const placeable = (n: number) => placementsOf(n, spec.devices, rpdMax, nodesMax, podNodes).length > 0;
    const counts = Array.from({ length: rankMax - minRanks + 1 }, (_, i) => minRanks + i);
    const fits = counts.filter(placeable);
    const ranks = rng() < 0.2 || fits.length === 0 ? int(minRanks, rankMax) : pick(fits);
    const placements = placementsOf(ranks, spec.devices, rpdMax, nodesMax, podNodes);
    // A count no placement holds is still generated: the runtime must refuse it.
    const { nodes, rpd } = placements.length > 0 ? pick(placements) : { nodes: 1, rpd: 1 };
    const groups = groupShape(ranks, int, pick);
    const sizes = [...new Set(groups.map((g) => g.length))];
    // The three collectives most often; every op of the 13 (and all-gather-v) some of the time.
    const op = rng() < 0.6 ? pick(["all-reduce", "all-gather", "reduce-scatter"] as const) : pick(SCENARIO_OP_NAMES.filter((o) => (o !== "all-to-all-v" && o !== "all-gather-v") || sizes.length === 1));
    const dtype: Dtype = pick(DTYPES);
    const esize = dtypeSize(dtype);
    const unit = BLOCKED.includes(op) ? groupsRanksLcm(groups) * esize : esize;
    const maxUnits = Math.max(1, Math.floor(opts.maxBytes / unit));
    const minUnits = Math.min(maxUnits, Math.max(1, Math.floor((opts.minBytes ?? 1) / unit)));
    const units = Math.max(1, Math.floor(2 ** (Math.log2(minUnits) + rng() * (Math.log2(maxUnits) - Math.log2(minUnits)))));
    const bytes = units * unit;
    const algorithm = rng() < 0.4 ? "auto" : pick(ALGORITHMS.filter((a) => a !== "auto"));
    const o: Record<string, unknown> = { op, bytes, dtype };
    if (REDUCING.includes(op)) o["reduce"] = pick(REDUCE_OPS);
    if (PAIRS.includes(op)) o["pairs"] = pairsFor(ranks, op, int, pick);
    if (op === "all-to-all-v") {
      const n = sizes[0]!;
      const cell = Math.max(1, Math.floor(bytes / n / n / esize));
      o["counts"] = Array.from({ length: n }, () => Array.from({ length: n }, () => int(0, 2 * cell) * esize));
      o["bytes"] = esize * n;
    }
    if (op === "all-gather-v") {
      const n = sizes[0]!;
      const cell = Math.max(1, Math.floor(bytes / n / esize));
      const counts: number[] = Array.from({ length: n }, () => int(0, 2 * cell) * esize);
      if (!counts.some((c) => c > 0)) counts[0] = esize;
      o["counts"] = counts;
      o["bytes"] = counts.reduce((a, b) => a + b, 0);
    }
    const payload = ranks * 2 * Math.max(bytes, ...(op === "all-to-all-v" ? [(o["counts"] as number[][]).flat().reduce((a, b) => a + b, 0)] : []), o["bytes"] as number);
    const scenario: Record<string, unknown> = {
      name: `conformance-${seed}-${id}`,
      instance,
      ranks,
      ranksPerDevice: rpd,
      nodes,
      replicaGroups: groups,
      algorithm,
      seed: id,
      check: payload <= opts.maxCheckedPayload ? "values" : "symbolic",
      ops: [o],
    };
    if (opts.knobs) {
      const k = seedrandom(`conformance/${seed}/knobs/${id}`);
      if (k() < 0.5) scenario["channels"] = 1 + Math.floor(k() * 4);
      o["priorityClass"] = Math.floor(k() * 5);
      if (k() < 0.4) {
        scenario["ops"] = [o, { ...o, stream: 1 + Math.floor(k() * 3), priorityClass: Math.floor(k() * 5) }];
        // Half of them also run together, each stream on its own TopSP.
        if (k() < 0.5) scenario["concurrent"] = true;
      }
    }
    let preset: ConformanceCase["preset"];
    if (opts.varyPresets) {
      // Combinations no single-knob test reaches (8 channels with 2 slots deadlocked every ring).
      const v = seedrandom(`conformance/${seed}/presets/${id}`);
      const vint = (lo: number, hi: number) => lo + Math.floor(v() * (hi - lo + 1));
      const ring = { defaultChannels: vint(1, 8), bufferSlots: vint(3, 8), chunkBytes: [4096, 65536, 262144, 1048576][vint(0, 3)]!, foldN: vint(1, 4) };
      // Half the cases cut their copies' descriptors (and CCE packets) below 64 KiB, at any size the validator takes.
      preset = { ring, ...(v() < 0.5 ? { dma: { maxDescriptorBytes: vint(64, 65536) } } : {}) };
    }
    const shape = groups.length === 1 ? "1 group" : `${groups.length} groups (${groups.map((g) => g.length).join("+")})`;
    const varied = preset ? Object.entries(preset).map(([section, kv]) => `, ${section} ${Object.entries(kv).map(([k, x]) => `${k} ${x}`).join(" ")}`).join("") : "";
    cases.push({ id, scenario, label: `${instance}${varied} ${ranks} ranks (${nodes} node(s) x ${rpd}/device), ${shape}, ${op} ${bytes} B ${dtype}, ${algorithm}`, ...(preset ? { preset } : {}) });
  }
  return cases;
}

/** (nodes, ranks per device) pairs that place `ranks` on whole devices. */
function placementsOf(ranks: number, devices: number, rpdMax: number, nodesMax: number, podNodes: number): { nodes: number; rpd: number }[] {
  const out: { nodes: number; rpd: number }[] = [];
  for (let nodes = 1; nodes <= nodesMax; nodes++) {
    // More nodes than a pod holds fill whole pods.
    if (nodes > podNodes && nodes % podNodes !== 0) continue;
    for (let rpd = 1; rpd <= rpdMax; rpd++) if (ranks % (nodes * rpd) === 0 && ranks / (nodes * rpd) <= devices) out.push({ nodes, rpd });
  }
  return out;
}

/** One group, equal contiguous partitions, strided partitions, or an uneven contiguous cut. */
function groupShape(ranks: number, int: (lo: number, hi: number) => number, pick: <T>(xs: readonly T[]) => T): number[][] {
  const all = Array.from({ length: ranks }, (_, i) => i);
  const divisors = all.map((i) => i + 1).filter((k) => k > 1 && k < ranks && ranks % k === 0);
  const shape = pick(["one", "one", "equal", "strided", "uneven"] as const);
  if (shape === "one" || ranks < 2) return [all];
  if (shape === "uneven") {
    const cut = int(1, ranks - 1);
    return [all.slice(0, cut), all.slice(cut)];
  }
  if (divisors.length === 0) return [all];
  const k = pick(divisors);
  return shape === "equal" ? Array.from({ length: k }, (_, j) => all.slice((j * ranks) / k, ((j + 1) * ranks) / k)) : Array.from({ length: k }, (_, j) => all.filter((r) => r % k === j));
}

/** Source / target pairs: a random partial permutation (send / recv: a few disjoint pairs). */
function pairsFor(ranks: number, op: OpName, int: (lo: number, hi: number) => number, pick: <T>(xs: readonly T[]) => T): [number, number][] {
  const perm = Array.from({ length: ranks }, (_, i) => i);
  for (let i = ranks - 1; i > 0; i--) {
    const j = int(0, i);
    [perm[i], perm[j]] = [perm[j]!, perm[i]!];
  }
  const n = op === "send" || op === "recv" ? Math.max(1, int(1, Math.max(1, Math.floor(ranks / 2)))) : int(1, ranks);
  const sources = perm.slice(0, n);
  const targets = pick([true, false]) ? sources.map((_, i) => sources[(i + 1) % n]!) : [...sources].reverse();
  return sources.map((s, i) => [s, targets[i]!]);
}

const silent = pino({ level: "silent" });

/**
 * The composer keeps a channel count the scenario (or a varied preset) sets and refuses it when its
 * channel sets need more DMA engines than a rank has, or more semaphores than a TopSP has (a
 * preset changed with --set to fewer): a refusal of that setting, as a user typing it gets. On a
 * shipped preset a count the composer chose itself always fits, so without a setting these codes
 * are failures.
 */
export const CHOSEN_COUNT_REFUSALS: ReadonlySet<string> = new Set(["CMP1304", "CMP1305"]);

/** The case sets a channel or fold count itself (the knobs' channels, a varied preset). */
export function setsCounts(c: ConformanceCase): boolean {
  return c.scenario["channels"] !== undefined || c.preset !== undefined || (c.sets?.length ?? 0) > 0;
}

/** Run one case through the scenario path and classify it. */
export function runCase(c: ConformanceCase, devicesDir?: string): CaseOutcome {
  try {
    const scn = parseScenario(`${c.scenario["name"]}.json`, c.scenario);
    const spec = c.preset ? variedPreset(scn.instance, c.preset, devicesDir, c.sets) : loadDeviceWith(scn.instance, devicesDir, c.sets);
    const out = runScenario(scn, spec, silent);
    if (out.kind === "hang") return { kind: "fail", code: "hang", message: out.op >= 0 ? `op ${out.op} hung` : "the concurrent run of its ops hung" };
    const broken = out.ops.find((o) => o.violations.length > 0);
    if (broken) return { kind: "fail", code: broken.violations[0]!.kind, message: broken.violations.map((v) => v.message).join("; ") };
    const bad = out.ops.find((o) => o.mismatch);
    if (bad) return { kind: "fail", code: "mismatch", message: mismatchText(bad.mismatch!) };
    // The ops run together ("concurrent"): the same checks on that run.
    const together = out.concurrent;
    if (together && together.violations.length > 0) return { kind: "fail", code: together.violations[0]!.kind, message: `run concurrently: ${together.violations.map((v) => v.message).join("; ")}` };
    if (together?.mismatch) return { kind: "fail", code: "mismatch", message: `run concurrently, op ${together.mismatch.op}: ${mismatchText(together.mismatch.mismatch)}` };
    return { kind: "pass", algorithms: out.ops.map((o) => o.row.algorithm) };
  } catch (e) {
    if (e instanceof CcsimError) {
      const refused = REFUSAL_CODES.has(e.code) || (CHOSEN_COUNT_REFUSALS.has(e.code) && setsCounts(c));
      return { kind: refused ? "refused" : "fail", code: e.code, message: e.render() };
    }
    return { kind: "fail", code: "internal", message: (e as Error).stack ?? String(e) };
  }
}

/** A preset with a case's fields changed (after the run's `sets`), validated as a file is. */
export function variedPreset(instance: string, fields: NonNullable<ConformanceCase["preset"]>, devicesDir?: string, sets: readonly PresetSet[] = []): DeviceSpec {
  const json = loadDeviceJson(instance, devicesDir);
  applySets(json, sets);
  for (const [section, kv] of Object.entries(fields)) json[section] = { ...(json[section] as Record<string, unknown>), ...kv };
  return parseDeviceSpec(`${instance}.json (${sets.length > 0 ? `${setFlags(sets)}, ` : ""}varied: ${JSON.stringify(fields)})`, json, sets.length > 0 ? sets.map((s) => s.path) : undefined);
}

/** Every preset the matrix uses, loaded once (with the run's `sets` made). */
export function loadPresets(presets: readonly string[] = CONFORMANCE_PRESETS, devicesDir?: string, sets: readonly PresetSet[] = []): Map<string, DeviceSpec> {
  return new Map(presets.map((p) => [p, loadDeviceWith(p, devicesDir, sets)]));
}

/** A worker thread's entry (parallel.ts): one case. */
export function task(c: ConformanceCase): CaseOutcome {
  return runCase(c);
}
