// Work split over machines: a run of many independent pieces (a sweep's sizes, conformance cases)
// runs one shard of them (--shard I/N, or "auto" from a cluster scheduler's environment) and
// writes a partial file; `npm run merge` reads every shard's partial and prints what the whole run
// prints. The assignment of pieces to shards is fixed by the pieces' estimated costs (never by
// timing), so a shard run again does the same pieces.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { UsageError } from "../ir/errors.ts";
import { fromWire, toWire, WireError } from "./wire.ts";
import { PROJECT_ROOT } from "./paths.ts";
import { join, sep } from "node:path";
import { readTextFile } from "../scenario/text-file.ts";

export interface ShardSpec {
  /** 0 .. count - 1. */
  readonly index: number;
  readonly count: number;
}

/** The most pieces a sharded run has, and more (a sweep makes at most 4,096 sizes an op, conformance at most 100,000 cases). */
const MAX_PIECES = 1 << 20;
/** The most shards a run may be split into. */
export const MAX_SHARDS = 10_000;

/** --shard I/N, or "auto" (the scheduler's environment says). */
export function parseShardFlag(v: string, flag: string): ShardSpec | "auto" {
  if (v === "auto") return "auto";
  const m = /^(\d+)\/(\d+)$/.exec(v);
  if (!m) throw new UsageError(`${flag} must be I/N (shard I of N, from 0) or auto, not "${v}"`);
  const index = Number(m[1]);
  const count = Number(m[2]);
  if (count < 1 || count > MAX_SHARDS) throw new UsageError(`${flag} ${v}: N must be from 1 to ${MAX_SHARDS}`);
  if (index >= count) throw new UsageError(`${flag} ${v}: I must be below N (shards are numbered 0 to ${count - 1})`);
  return { index, count };
}

/** The variable a Kubernetes Indexed Job's shard count is read from (Kubernetes sets only the index). */
export const SHARDS_ENV = "CCSIM_SHARDS";

/**
 * The shard of `flag`: as given, or from a scheduler's environment — a Slurm job array
 * (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN of SLURM_ARRAY_TASK_COUNT) or a Kubernetes Indexed Job
 * (JOB_COMPLETION_INDEX of --shards N, else of CCSIM_SHARDS).
 */
export function resolveShard(flag: ShardSpec | "auto", shards: number | undefined, env: Readonly<Record<string, string | undefined>>): ShardSpec {
  if (flag !== "auto") {
    if (shards !== undefined && shards !== flag.count) throw new UsageError(`--shards ${shards} disagrees with --shard ${flag.index}/${flag.count}`);
    return flag;
  }
  const int = (name: string): number => {
    const v = env[name]!;
    if (!/^\d+$/.test(v)) throw new UsageError(`--shard auto: ${name} is "${v}", not a whole number`);
    // (Past 2^53 a number is not itself: said as written, not rounded.)
    const n = Number(v);
    if (!Number.isSafeInteger(n)) throw new UsageError(`--shard auto: ${name} is "${v}", far past any shard (${MAX_SHARDS} at most)`);
    return n;
  };
  const check = (index: number, count: number, where: string, past: string): ShardSpec => {
    if (count < 1 || count > MAX_SHARDS) throw new UsageError(`--shard auto: ${where} gives ${count} shards (1 to ${MAX_SHARDS})`);
    if (index >= count) throw new UsageError(`--shard auto: ${where} gives shard ${index} of ${count} (${past})`);
    return { index, count };
  };
  if (env["SLURM_ARRAY_TASK_ID"] !== undefined) {
    if (env["SLURM_ARRAY_TASK_COUNT"] === undefined) throw new UsageError("--shard auto: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not (run as a job array: sbatch --array=0-N)");
    const min = env["SLURM_ARRAY_TASK_MIN"] === undefined ? 0 : int("SLURM_ARRAY_TASK_MIN");
    const count = int("SLURM_ARRAY_TASK_COUNT");
    // (Each task runs one shard: a count of shards other than the array's tasks would leave shards no task runs, or run one twice.)
    if (shards !== undefined && shards !== count) throw new UsageError(`--shard auto: --shards ${shards} disagrees with the Slurm job array's ${count} tasks (SLURM_ARRAY_TASK_COUNT): each task runs one shard; leave --shards out, or give the array ${shards} tasks`);
    const id = int("SLURM_ARRAY_TASK_ID");
    if (id < min) throw new UsageError(`--shard auto: SLURM_ARRAY_TASK_ID ${id} is below SLURM_ARRAY_TASK_MIN ${min}: not a task of this job array`);
    return check(id - min, count, "the Slurm job array", "a job array with a step, or an index past the count?");
  }
  if (env["JOB_COMPLETION_INDEX"] !== undefined) {
    const count = shards ?? (env[SHARDS_ENV] !== undefined ? int(SHARDS_ENV) : undefined);
    if (count === undefined) throw new UsageError(`--shard auto: JOB_COMPLETION_INDEX is set (a Kubernetes Indexed Job) but the shard count is not: give --shards N or set ${SHARDS_ENV} (the Job's completions)`);
    return check(int("JOB_COMPLETION_INDEX"), count, "the Kubernetes Indexed Job", `an index past the Job's completions: --shards or ${SHARDS_ENV} must be its completions`);
  }
  throw new UsageError(`--shard auto: not under a scheduler: none of SLURM_ARRAY_TASK_ID (Slurm job arrays, with SLURM_ARRAY_TASK_COUNT and SLURM_ARRAY_TASK_MIN) or JOB_COMPLETION_INDEX (Kubernetes Indexed Jobs, with --shards N or ${SHARDS_ENV}) is set; give --shard I/N`);
}

/**
 * A piece's estimated cost, for the assignment: its bytes over its ranks, and a fixed share of
 * 64 MiB a rank (so that many small pieces do not all land on one shard). The share is measured:
 * on `nccom allr -r 64 -N 2 -b 8 -e 1G -f 2 -d fp32` a row takes about 0.27 s of composing and
 * setting up whatever its size, and 5 s more per GiB, so a small row weighs as 55 MiB would.
 */
export function pieceCost(bytes: number, ranks: number): number {
  return (bytes + 2 ** 26) * ranks;
}

/**
 * The shard each piece runs on: the biggest estimated cost first, each to the shard with the least
 * cost so far (ties: the lower index, then the lower shard). Depends on the costs alone.
 */
export function assignShards(cost: readonly number[], count: number): number[] {
  const load = new Array<number>(count).fill(0);
  const out = new Array<number>(cost.length);
  const order = cost.map((_, i) => i).sort((a, b) => cost[b]! - cost[a]! || a - b);
  for (const k of order) {
    let best = 0;
    for (let s = 1; s < count; s++) if (load[s]! < load[best]!) best = s;
    out[k] = best;
    load[best]! += cost[k]!;
  }
  return out;
}

/** How a run of many pieces runs them: all (no shard flag), one shard's, or none (a merge supplies every result). */
export type Pieces<R> =
  | { readonly kind: "shard"; readonly shard: ShardSpec }
  | { readonly kind: "merge"; readonly results: readonly R[]; readonly preset: string };

/** One shard's results: the pieces it ran, by index, of `total`. */
export interface ShardResults<R> {
  readonly kind: "partial";
  readonly total: number;
  readonly pieces: readonly { readonly index: number; readonly result: R }[];
  /** The preset(s) the pieces ran on, hashed. */
  readonly preset: string;
}

/** A preset's (or presets') content hash, as partials record it. */
export function presetHash(specs: unknown): string {
  return createHash("sha256").update(JSON.stringify(specs)).digest("hex").slice(0, 16);
}

export const PARTIAL_FORMAT = "ccsim-partial/1";

/** A partial file's content (what merge checks before it uses any of it). */
export interface PartialFile {
  readonly format: typeof PARTIAL_FORMAT;
  /** The command: nccom, sim or conformance. */
  readonly tool: string;
  /** Its arguments, the shard flags and --out left out. */
  readonly argv: readonly string[];
  readonly version: string;
  readonly preset: string;
  readonly shard: ShardSpec;
  readonly total: number;
  readonly pieces: readonly { readonly index: number; readonly result: unknown }[];
  /** The runtime's variables the command read (nccom: NEURON_LOGICAL_NC_CONFIG, NEURON_RT_DBG_CC_DMA_PACKET_SIZE), where set. */
  readonly env?: Readonly<Record<string, string>>;
}

function checksum(body: string): string {
  return createHash("sha256").update(body).digest("hex");
}

/** The partial's text: its body and a checksum over it (a truncated or edited file fails merge). */
export function partialText(p: PartialFile): string {
  const body = JSON.stringify({ ...p, pieces: p.pieces.map((x) => ({ index: x.index, result: toWire(x.result) })) });
  return `{"checksum":"${checksum(body)}","body":${body}}\n`;
}

/** A partial file that merge cannot use: the file and why. */
export class PartialError extends Error {
  constructor(
    readonly file: string,
    why: string,
  ) {
    super(file ? `${file}: ${why}` : why);
  }
}

/** Read and check one partial file (its checksum, format and fields). */
export function readPartial(file: string): PartialFile {
  let text: string;
  try {
    text = readTextFile(file);
  } catch (e) {
    throw new PartialError(file, `cannot read: ${(e as Error).message}`);
  }
  const m = /^\{"checksum":"([0-9a-f]{64})","body":([\s\S]*)\}\n?$/.exec(text);
  if (!m) throw new PartialError(file, "not a ccsim partial (or truncated): no checksum and body");
  if (checksum(m[2]!) !== m[1]) throw new PartialError(file, "its checksum does not match its content: the file was truncated or edited");
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(m[2]!) as Record<string, unknown>;
  } catch {
    throw new PartialError(file, "its body is not JSON");
  }
  if (body["format"] !== PARTIAL_FORMAT) throw new PartialError(file, `format ${JSON.stringify(body["format"])}, not ${PARTIAL_FORMAT}`);
  const shard = body["shard"] as ShardSpec | undefined;
  const pieces = body["pieces"];
  if (typeof body["tool"] !== "string" || !Array.isArray(body["argv"]) || !(body["argv"] as unknown[]).every((a) => typeof a === "string") || typeof body["version"] !== "string" || typeof body["preset"] !== "string" || !shard || !Number.isInteger(shard.index) || !Number.isInteger(shard.count) || !Number.isInteger(body["total"]) || !Array.isArray(pieces)) {
    throw new PartialError(file, "a field is missing or of the wrong type (tool, argv, version, preset, shard, total, pieces)");
  }
  const env = body["env"];
  if (env !== undefined && (typeof env !== "object" || env === null || Array.isArray(env) || !Object.values(env).every((v) => typeof v === "string"))) throw new PartialError(file, "env is not an object of strings: the partial was edited");
  // (Checked before anything is sized by them: a count edited to a billion made merge run out of memory.)
  if (shard.count < 1 || shard.count > MAX_SHARDS || shard.index < 0 || shard.index >= shard.count) throw new PartialError(file, `shard ${shard.index}/${shard.count} is not a shard I/N with 0 <= I < N <= ${MAX_SHARDS}: the partial was edited`);
  const total = body["total"] as number;
  if (total < 0 || total > MAX_PIECES) throw new PartialError(file, `${total} pieces in all, not 0 to ${MAX_PIECES}: the partial was edited`);
  try {
    const decoded = (pieces as { index: unknown; result: unknown }[]).map((x, i) => {
      if (!Number.isInteger(x.index) || (x.index as number) < 0 || (x.index as number) >= (body["total"] as number)) throw new PartialError(file, `piece ${i} has index ${String(x.index)}, outside 0..${(body["total"] as number) - 1}`);
      return { index: x.index as number, result: fromWire(x.result, `pieces[${i}].result`) };
    });
    return { ...(body as unknown as PartialFile), pieces: decoded };
  } catch (e) {
    if (e instanceof WireError) throw new PartialError(file, e.message);
    throw e;
  }
}

/**
 * Every shard's partial put together: one command, version, preset and N; each shard once; every
 * piece once; each result of the shape `shape` asks of its command's (what is wrong, or undefined).
 * Returns the command and every piece's result in order.
 */
export function mergePartials(files: readonly string[], build?: string, shape?: (tool: string, result: unknown) => string | undefined): { tool: string; argv: readonly string[]; preset: string; results: unknown[]; env: Readonly<Record<string, string>> } {
  if (files.length === 0) throw new PartialError("", "no partial files given");
  const parts = files.map((f) => ({ file: f, p: readPartial(f) }));
  const first = parts[0]!;
  // (`build`: the merging ccsim's; its reading of the results is the one that wrote them.)
  if (build !== undefined && first.p.version !== build) throw new PartialError(first.file, `written by ccsim ${first.p.version}, and this is ccsim ${build}: merge with the checkout that ran the shards (its sources, not its version alone, say the build)`);
  for (const { file, p } of parts.slice(1)) {
    if (p.tool !== first.p.tool || JSON.stringify(p.argv) !== JSON.stringify(first.p.argv)) throw new PartialError(file, `another command's partial: ${p.tool} ${p.argv.join(" ")} (${first.file}: ${first.p.tool} ${first.p.argv.join(" ")})`);
    if (envText(p.env) !== envText(first.p.env)) throw new PartialError(file, `ran with other runtime variables (${envText(p.env) || "none"}; ${first.file}: ${envText(first.p.env) || "none"})`);
    if (p.version !== first.p.version) throw new PartialError(file, `written by ccsim ${p.version}, ${first.file} by ${first.p.version}`);
    if (p.preset !== first.p.preset) throw new PartialError(file, `ran on another preset (content ${p.preset}; ${first.file}: ${first.p.preset})`);
    if (p.shard.count !== first.p.shard.count || p.total !== first.p.total) throw new PartialError(file, `shard ${p.shard.index}/${p.shard.count} of ${p.total} pieces, but ${first.file} is of ${first.p.shard.count} shards and ${first.p.total} pieces`);
  }
  const n = first.p.shard.count;
  const seen = new Map<number, string>();
  for (const { file, p } of parts) {
    const other = seen.get(p.shard.index);
    if (other !== undefined) throw new PartialError(file, `shard ${p.shard.index}/${n} given twice (also ${other})`);
    seen.set(p.shard.index, file);
  }
  const missing = Array.from({ length: n }, (_, i) => i).filter((i) => !seen.has(i));
  if (missing.length > 0) throw new PartialError("", `shard${missing.length > 1 ? "s" : ""} ${missing.join(", ")} of ${n} missing (run ${missing.length > 1 ? "them" : "it"} again: each shard is deterministic)`);
  const results = new Array<unknown>(first.p.total);
  const from = Array.from<string | undefined>({ length: first.p.total });
  for (const { file, p } of parts) {
    for (const x of p.pieces) {
      if (from[x.index] !== undefined) throw new PartialError(file, `piece ${x.index} is also in ${from[x.index]}: the shards overlap`);
      const wrong = shape?.(p.tool, x.result);
      if (wrong !== undefined) throw new PartialError(file, `piece ${x.index}: not a result of ${p.tool} (${wrong}): the partial was edited and checksummed again; run its shard again`);
      from[x.index] = file;
      results[x.index] = x.result;
    }
  }
  const absent = from.flatMap((f, i) => (f === undefined ? [i] : []));
  if (absent.length > 0) throw new PartialError("", `piece${absent.length > 1 ? "s" : ""} ${absent.slice(0, 10).join(", ")}${absent.length > 10 ? ", ..." : ""} of ${first.p.total} in no partial`);
  return { tool: first.p.tool, argv: first.p.argv, preset: first.p.preset, results, env: first.p.env ?? {} };
}

/** A partial's runtime variables as a shell line would set them, in name order. */
function envText(env: Readonly<Record<string, string>> | undefined): string {
  return Object.entries(env ?? {})
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
}

/**
 * ccsim's build as partials record it: package.json's version and a hash of the sources that run
 * (`0.1.0+src.1a2b3c4d5e6f`). The version alone is the same for every checkout, and a partial of
 * another checkout may hold results of another shape (a merge read one as its own and failed inside)
 * or other times: partials merge only with partials of the same sources, merged by those sources.
 */
export function ccsimVersion(): string {
  let version = "0";
  try {
    version = (JSON.parse(readFileSync(join(PROJECT_ROOT, "package.json"), "utf8")) as { version?: string }).version ?? "0";
  } catch {
    // (No package.json: version 0, the sources' hash still says which build.)
  }
  return `${version}+src.${(sourcesHash ??= hashSources())}`;
}

let sourcesHash: string | undefined;

/** A hash of the TypeScript sources of src/ and sim/ (their paths and contents, in path order). */
function hashSources(): string {
  const h = createHash("sha256");
  for (const dir of ["src", "sim"]) {
    let files: string[];
    try {
      files = (readdirSync(join(PROJECT_ROOT, dir), { recursive: true }) as string[]).filter((f) => f.endsWith(".ts")).sort();
    } catch {
      files = [];
    }
    for (const f of files) h.update(`${dir}/${f.split(sep).join("/")}\0`).update(readFileSync(join(PROJECT_ROOT, dir, f))).update("\0");
  }
  return h.digest("hex").slice(0, 12);
}

/**
 * Long runs say where they are: on a terminal a line redrawn as pieces end; otherwise (a batch
 * job's log) one line a minute.
 */
export function statusReporter(err: (s: string) => void, what: string, total: number, tty: boolean, now: () => number = () => performance.now()): { piece: (failed: boolean) => void; done: () => void } {
  const t0 = now();
  let done = 0;
  let failures = 0;
  let last = t0;
  const line = () => {
    const s = (now() - t0) / 1000;
    const left = done > 0 ? (s / done) * (total - done) : 0;
    return `${what}: ${done}/${total} done, ${failures} failed, ${s.toFixed(0)} s, about ${left.toFixed(0)} s left`;
  };
  return {
    piece: (failed) => {
      done++;
      if (failed) failures++;
      if (tty) err(`\r${line()} `);
      else if (now() - last >= 60_000) {
        last = now();
        err(`${line()}\n`);
      }
    },
    done: () => {
      if (tty && done > 0) err("\n");
    },
  };
}
