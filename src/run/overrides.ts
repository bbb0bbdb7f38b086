// Command-line overrides of a scenario (-r, --check, --seed, and a sweep's --op / -d / sizes): they
// change the scenario's JSON and the result is validated exactly as a file is, with the flags named
// in every error.
import { DTYPES, dtypeSize, type Dtype } from "../ir/dtypes.ts";
import type { CheckMode, OpName, Scenario } from "../ir/spec.ts";
import { parseScenario } from "../scenario/index.ts";

export interface Overrides {
  /** -r: that many ranks, one replica group of all of them (rank overrides dropped). */
  readonly ranks?: number | undefined;
  readonly check?: CheckMode | undefined;
  readonly races?: boolean | undefined;
  readonly seed?: number | undefined;
  /** --instance: another device preset's name. */
  readonly instance?: string | undefined;
  /** --cc-dma-packet: CC DMA packet sizes, one or one per stream (`ccDmaPacketBytes`). */
  readonly ccDmaPacketBytes?: readonly number[] | undefined;
}

type Json = Record<string, unknown>;

/** A scenario as its file holds it, with what the flags change, and how to name that in errors. */
export interface ScenarioSource {
  readonly file: string;
  readonly json: Json;
  /** The flags applied ("" for none), e.g. "-r 3 --check none". */
  readonly flags: string;
  /** How a sweep point's op follows its size beyond `bytes` (e.g. an all-to-all-v's counts). */
  readonly sizeOp?: (op: Json, bytes: number) => Json;
  /** A sweep point as several ops at once (coalesced ops, each on a stream of its own): the point runs them concurrently. */
  readonly splitOp?: (op: Json, bytes: number) => Json[];
  /**
   * A multistream sweep (nccom-test's --streams-json): stream s runs its op at its own sizes, all
   * streams at once; point k takes each stream's k-th size (its last, once a stream has run them all).
   */
  readonly streams?: readonly StreamPlan[];
}

/** One stream of a multistream sweep: its op (without a size), its sizes, its ops an iteration, its replica groups. */
export interface StreamPlan {
  readonly op: Json;
  readonly sizes: readonly number[];
  readonly opsPerIter: number;
  readonly replicaGroups: readonly (readonly number[])[];
}

/** The points of a multistream sweep: as many as the longest stream's sizes. */
export function streamPoints(streams: readonly StreamPlan[]): number {
  return Math.max(...streams.map((s) => s.sizes.length));
}

/** Stream `s`'s size at point `k` of a multistream sweep. */
export function streamSize(st: StreamPlan, k: number): number {
  return st.sizes[Math.min(k, st.sizes.length - 1)]!;
}

/** The ops of point k of a multistream sweep, as a scenario file lists them. */
export function streamsPointJson(streams: readonly StreamPlan[], k: number): Json[] {
  return streams.flatMap((st, s) => {
    const bytes = streamSize(st, k);
    const n = st.replicaGroups[0]!.length;
    let op: Json = { ...st.op, bytes, stream: s, replicaGroups: st.replicaGroups };
    if (op["op"] === "all-gather-v") op = gatherCounts(op, bytes, n);
    else if (op["op"] === "all-to-all-v") op = uniformCounts(op, bytes, n);
    return Array.from({ length: st.opsPerIter }, () => op);
  });
}

/**
 * Point k of a multistream sweep: every stream's ops at its k-th size, each on its stream over its
 * replica groups, run concurrently (and each op alone first), validated as a file is.
 */
export function streamsPoint(src: ScenarioSource, k: number, check: CheckMode): Scenario {
  const streams = src.streams!;
  const json: Json = { ...src.json, ops: streamsPointJson(streams, k), check, concurrent: true };
  delete json["rankOverrides"];
  delete json["replicaGroups"];
  const flags = [src.flags, `point ${k} (${streams.map((st, s) => `stream ${s} ${st.op["op"]} ${streamSize(st, k)} B`).join(", ")})`].filter((f) => f).join(" ");
  return parseScenario(`${src.file} with ${flags}`, json);
}

function label(src: ScenarioSource): string {
  return src.flags ? `${src.file} with ${src.flags}` : src.file;
}

/** Parse a scenario source; errors name the file and the flags that shaped it. */
export function parseSource(src: ScenarioSource): Scenario {
  return parseScenario(label(src), src.json);
}

/** Apply the overrides to a scenario's JSON (already valid as a file). */
export function withOverrides(src: ScenarioSource, o: Overrides): ScenarioSource {
  const json: Json = { ...src.json };
  const flags: string[] = src.flags ? [src.flags] : [];
  if (o.ranks !== undefined && o.ranks !== json["ranks"]) {
    json["ranks"] = o.ranks;
    delete json["replicaGroups"];
    delete json["rankOverrides"];
    flags.push(`-r ${o.ranks}`);
  }
  if (o.check !== undefined) {
    json["check"] = o.check;
    flags.push(`--check ${o.check}`);
  }
  if (o.races !== undefined) {
    json["races"] = o.races;
    flags.push(`--races ${o.races ? "on" : "off"}`);
  }
  if (o.seed !== undefined) {
    json["seed"] = o.seed;
    flags.push(`--seed ${o.seed}`);
  }
  if (o.instance !== undefined && o.instance !== json["instance"]) {
    json["instance"] = o.instance;
    flags.push(`--instance ${o.instance}`);
  }
  if (o.ccDmaPacketBytes !== undefined) {
    json["ccDmaPacketBytes"] = o.ccDmaPacketBytes;
    flags.push(`--cc-dma-packet ${o.ccDmaPacketBytes.join(",")}`);
  }
  return { ...src, json, flags: flags.join(" ") };
}

/**
 * What a sweep validates before its points: it runs the scenario's ops at its own sizes, so with
 * one replica group of all ranks (the file's, or -r's) each op is taken at one block (element size
 * x ranks) — a size of the file that -r's rank count does not divide is no reason to refuse.
 */
export function sweepSource(src: ScenarioSource): ScenarioSource {
  const ranks = src.json["ranks"];
  const ops = src.json["ops"];
  if (src.json["replicaGroups"] !== undefined || typeof ranks !== "number" || !Array.isArray(ops)) return src;
  const sized = ops.map((o: unknown) => {
    if (typeof o !== "object" || o === null || Array.isArray(o)) return o;
    const dtype = (o as Json)["dtype"] ?? "fp32";
    if (!(DTYPES as readonly unknown[]).includes(dtype)) return o;
    const esize = dtypeSize(dtype as Dtype);
    // Counts follow the rank count too: an element from every rank (to every rank).
    if ((o as Json)["op"] === "all-gather-v") return { ...(o as Json), bytes: esize * ranks, counts: Array.from({ length: ranks }, () => esize) };
    if ((o as Json)["op"] === "all-to-all-v") return { ...(o as Json), counts: Array.from({ length: ranks }, () => Array.from({ length: ranks }, () => esize)) };
    return "counts" in o ? o : { ...(o as Json), bytes: esize * ranks };
  });
  return { ...src, json: { ...src.json, ops: sized } };
}

/**
 * One op of a sweep: the scenario's op of that name (or a bare one for an op the scenario lacks),
 * with the sweep's dtype and size, validated as the file's ops are.
 */
export function sweepPoint(src: ScenarioSource, op: OpName, dtype: Dtype | undefined, bytes: number, check: CheckMode): Scenario {
  const flags = [src.flags, `--op ${op}`, ...(dtype ? [`-d ${dtype}`] : []), `size ${bytes}`].filter((f) => f).join(" ");
  return parseScenario(`${src.file} with ${flags}`, sweepPointJson(src, op, dtype, bytes, check));
}

/** `sweepPoint`'s scenario as JSON, not validated (nccom's --dump-scenario prints its first). */
export function sweepPointJson(src: ScenarioSource, op: OpName, dtype: Dtype | undefined, bytes: number, check: CheckMode): Json {
  const ops = (src.json["ops"] as Json[]) ?? [];
  const base: Json = ops.find((o) => o["op"] === op) ?? { op };
  let point: Json = { ...base, bytes, ...(dtype ? { dtype } : {}) };
  if (point["dtype"] === undefined) point["dtype"] = "fp32";
  if (src.sizeOp) point = src.sizeOp(point, bytes);
  else if (op === "all-gather-v" || op === "all-to-all-v") {
    // One count per rank of the (first) group, whatever the file's list held.
    const groups = src.json["replicaGroups"];
    const n = Array.isArray(groups) && Array.isArray(groups[0]) ? groups[0].length : src.json["ranks"];
    point = (op === "all-gather-v" ? gatherCounts : uniformCounts)(point, bytes, typeof n === "number" ? n : undefined);
  }
  const split = src.splitOp?.(point, bytes);
  const json: Json = { ...src.json, ops: split ?? [point], check, ...(split && split.length > 1 ? { concurrent: true } : {}) };
  delete json["rankOverrides"];
  return json;
}

/**
 * A counts op at a sweep size: its rank count (given, or its counts' length) and the per-rank
 * share of the size in whole elements; undefined when the op says neither.
 */
function countShare(op: Json, bytes: number, ranks: number | undefined): { n: number; cell: number } | undefined {
  const counts = op["counts"];
  const n = ranks ?? (Array.isArray(counts) ? counts.length : 0);
  if (!Number.isInteger(n) || n < 1) return undefined;
  const esize = DTYPES.includes(op["dtype"] as Dtype) ? dtypeSize(op["dtype"] as Dtype) : 1;
  return { n, cell: Math.floor(bytes / n / esize) * esize };
}

/**
 * all-gather-v at a sweep size: the gathered bytes split over the group's ranks in whole elements
 * (the last rank takes what does not split evenly).
 */
export function gatherCounts(op: Json, bytes: number, ranks?: number): Json {
  const s = countShare(op, bytes, ranks);
  if (!s) return op;
  return { ...op, counts: Array.from({ length: s.n }, (_, k) => (k === s.n - 1 ? bytes - s.cell * (s.n - 1) : s.cell)) };
}

/** all-to-all-v at a sweep size: every rank sends size / n bytes to every rank (whole elements). */
export function uniformCounts(op: Json, bytes: number, ranks?: number): Json {
  const s = countShare(op, bytes, ranks);
  if (!s) return op;
  return { ...op, counts: Array.from({ length: s.n }, () => Array.from({ length: s.n }, () => s.cell)) };
}
