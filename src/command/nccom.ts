// nccom-test's command line read into a scenario (no file): its ops and aliases, its flags, its
// placement of ranks. npm run nccom runs what this builds; calibration reads logged command lines
// with it.
import { dirname, resolve } from "node:path";
import { dtypeSize, type Dtype } from "../ir/dtypes.ts";
import { groupsRanksLcm, type OpName } from "../ir/spec.ts";
import { DEFAULT_DEVICES_DIR } from "../run/load.ts";
import { collectiveScenario } from "../run/collective.ts";
import type { StreamPlan } from "../run/overrides.ts";
import { parseScenario } from "../scenario/index.ts";
import { MAX_STREAMS } from "../scenario/scenario.ts";
import { opEntry } from "../ir/ops.ts";
import { opSweepSizes } from "../run/sweep.ts";
import { alltoallvMetadata, gatherMetadata, groupsOf, pairsOf, readJsonFile } from "./nccom-files.ts";
import { checkShardFlags, commonFlag, defaultArgs, flagValue, intFlag, oneOfFlag, PACKET_VARIABLE, packetsFromEnv, packetVariable, sweepOf, UsageError, withoutShardFlags, type Args, type RangeFlags } from "./args.ts";

/** nccom-test's op names and aliases, and the scenario op each runs as. */
export const NCCOM_OPS: Readonly<Record<string, OpName>> = {
  all_reduce: "all-reduce",
  allr: "all-reduce",
  all_gather: "all-gather",
  allg: "all-gather",
  reduce_scatter: "reduce-scatter",
  redsct: "reduce-scatter",
  sendrecv: "send",
  alltoall: "all-to-all",
  alltoallv: "all-to-all-v",
  all_gatherv: "all-gather-v",
  allgv: "all-gather-v",
  permute: "permute",
};


export interface NccomArgs {
  readonly run: Args;
  readonly op: OpName;
  readonly scenario: Record<string, unknown>;
  readonly dump: boolean;
  readonly ignored: readonly string[];
  /** -t / --stats: the percentile columns to print after the average (each iteration timed on its own). */
  readonly percentiles: readonly string[];
  /** --show-input-output-size: a rank's input and output bytes as two columns after the count. */
  readonly ioSizes: boolean;
  /** all_gatherv's per-rank bytes from --variable-size-op-metadata (a size of their sum runs them). */
  readonly counts?: readonly number[];
  /** alltoallv's bytes rank i sends rank j from --variable-size-op-metadata (a size of the largest rank's total runs them). */
  readonly matrix?: readonly (readonly number[])[];
  /** --coalesced-cc-size-ratio: each size runs as these shares of it, coalesced ops at once (two or more). */
  readonly coalesced?: readonly number[];
  /** --streams-json: the streams, each its op, sizes, ops an iteration and groups, run at once. */
  readonly streams?: readonly StreamPlan[];
  /** The files the command line names to be read (flag, path): no output may be written over one. */
  readonly inputs: readonly (readonly [string, string])[];
}

/** The runtime's variables nccom reads (a shard's partial records them; merge reads its command line with them). */
const READ_ENV = ["NEURON_LOGICAL_NC_CONFIG", PACKET_VARIABLE] as const;

/** Of `env`, the runtime's variables nccom reads, where set. */
export function runtimeVariables(env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  return Object.fromEntries(READ_ENV.flatMap((k) => (env[k] !== undefined && env[k]!.trim() !== "" ? [[k, env[k]!]] : [])));
}

/** Runtime variables that change how a real run moves collectives' data, which ccsim does not read, and why. */
const UNREAD_ENV: readonly (readonly [string, string])[] = [
  ["NEURON_RT_DBG_DMA_PACKETIZATION_SIZE", "it packetizes compute DMA, and a simulated run has no compute traffic"],
  ["NEURON_RT_DBG_INTRA_RDH_CHANNEL_BUFFER_SIZE", "intra-node RDH's channel buffers are sized as the composer sizes them"],
  ["NEURON_RT_RANKS_PER_NETWORK_PROXY", "the network proxies are placed as the composer places them (docs/device-model.md §6c)"],
];

/** The most coalesced ops: ccsim runs each on a CC stream of its own, and a rank has four (NEC_MAX_STREAM_N). */
const MAX_COALESCED = 4;

/** --input-shape / --output-shape [step0,step1][n0,n1] (free / partition dimension): whole numbers, as given. */
function shapeFlag(v: string, flag: string): string {
  if (!/^\[\s*\d+\s*,\s*\d+\s*\]\s*\[\s*\d+\s*,\s*\d+\s*\]$/.test(v)) throw new UsageError(`${flag} must be [step0,step1][n0,n1] (whole numbers), not "${v}"`);
  return v.replace(/\s+/g, "");
}

/** --coalesced-cc-size-ratio [a,b,...] (brackets optional): whole positive shares. */
function coalescedRatios(v: string, flag: string): number[] {
  const m = /^\[?\s*(\d+(?:\s*,\s*\d+)*)\s*\]?$/.exec(v);
  const parts = m ? m[1]!.split(",").map((x) => Number(x.trim())) : [];
  if (!m || parts.some((x) => !Number.isSafeInteger(x) || x < 1)) throw new UsageError(`${flag} must be a list of whole positive shares such as [1,2,1], not "${v}"`);
  if (parts.length > MAX_COALESCED) throw new UsageError(`${flag} ${v}: at most ${MAX_COALESCED} coalesced ops (each runs on a CC stream of its own; a rank has ${MAX_COALESCED})`);
  return parts;
}

/**
 * A size as coalesced ops: each share of it in whole units (an element, times the group's ranks
 * for all-gather and reduce-scatter), the last taking what does not split evenly; each on a
 * stream of its own, run at once.
 */
export function coalescedOps(op: Record<string, unknown>, bytes: number, ratios: readonly number[], unit: number): Record<string, unknown>[] {
  const total = ratios.reduce((a, r) => a + r, 0);
  const sizes = ratios.map((r) => Math.floor((bytes * r) / total / unit) * unit);
  sizes[sizes.length - 1] = bytes - sizes.slice(0, -1).reduce((a, x) => a + x, 0);
  return sizes.map((b, k) => ({ ...op, bytes: b, stream: k }));
}

/** Parse nccom-test's flags into a scenario and the run flags. */
/** Flags that take one value and may be given once, with their aliases. */
const ONCE: readonly (readonly string[])[] = [["-r", "--nworkers"], ["-N", "--nnodes"], ["-b", "--minbytes"], ["-e", "--maxbytes"], ["-f", "--stepfactor"], ["-i", "--stepbytes"], ["-d", "--datatype"], ["--instance"], ["--lnc"], ["--custom-replica-groups"], ["--custom-src-target-pairs"], ["--variable-size-op-metadata"], ["--data-parallel-dimension"], ["--coalesced-cc-size-ratio"], ["--input-shape"], ["--output-shape"], ["--cc-dim"], ["--report-to-json-file"], ["--streams-json"], ["-n", "--iters"], ["-w", "--warmup_iters"], ["-I", "--neff-iters"], ["-W", "--neff-warmup-iters"], ["--devices"], ["--launch-us"], ["--cc-dma-packet"]];

/** A flag given twice (or with its alias) is refused: nccom-test would take one of them, silently. */
export function checkOnce(argv: readonly string[]): void {
  const seen = new Map<number, string>();
  for (const t of argv) {
    const k = ONCE.findIndex((g) => g.includes(t));
    if (k < 0) continue;
    const before = seen.get(k);
    if (before !== undefined) throw new UsageError(`${t} given twice (${before === t ? t : `${before} and ${t}`}): give it once`);
    seen.set(k, t);
  }
}

export function parseNccomArgs(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, devicesDir = DEFAULT_DEVICES_DIR): NccomArgs | "help" {
  checkOnce(argv);
  const run: Args = { ...defaultArgs(), devices: devicesDir };
  const range: RangeFlags = {};
  let opName: string | undefined;
  /** The flag (-c or --check) the op came right after, if it did. */
  let opCheck: string | undefined;
  let ranks: number | undefined;
  let nodes = 1;
  let instance = "trn1";
  let lnc: number | undefined;
  let groups: unknown;
  let dpDim: number | undefined;
  let ioSizes = false;
  let pairs: unknown;
  let dump = false;
  const ignored: string[] = [];
  let stats: string[] | undefined;
  let metadata: { file: string; json?: unknown } | undefined;
  let coalesced: number[] | undefined;
  let sb2sb = false;
  let streamsFile: string | undefined;
  const inputs: [string, string][] = [];
  /** A file the command reads (its JSON), noted as an input. */
  const readInput = (file: string, flag: string): unknown => {
    inputs.push([flag, file]);
    return readJsonFile(file, flag);
  };
  const shapes: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const t = argv[i]!;
    // nccom-test's -t / --stats: time each iteration on its own and print these statistics
    // (avg, pNN); ccsim's per-resource statistics are --link-stats here.
    if (t === "-t" || t === "--stats") {
      stats = [];
      while (i + 1 < argv.length && /^(avg|p\d+(\.\d+)?)$/.test(argv[i + 1]!)) {
        const st = argv[++i]!;
        if (st !== "avg" && !(Number(st.slice(1)) > 0 && Number(st.slice(1)) < 100)) throw new UsageError(`${t} ${st}: a percentile is p1 ... p99`);
        if (!stats.includes(st)) stats.push(st);
      }
      continue;
    }
    if (t === "--link-stats") {
      run.stats = true;
      continue;
    }
    // nccom-test's -c / --check [random|all_ones] fills the inputs and compares the outputs with a
    // host golden: ccsim's values check. --check values|symbolic|none is ccsim's own.
    if (t === "-c" || (t === "--check" && !["values", "symbolic", "none"].includes(argv[i + 1] ?? ""))) {
      if (argv[i + 1] === "random" || argv[i + 1] === "all_ones") i++;
      run.check = "values";
      continue;
    }
    if (t === "--show-input-output-size") {
      ioSizes = true;
      continue;
    }
    if (t === "--streams-json") {
      streamsFile = flagValue(argv, i++, t);
      inputs.push([t, streamsFile]);
      continue;
    }
    if (t === "--variable-size-op-metadata") {
      metadata = { file: flagValue(argv, i++, t) };
      metadata.json = readInput(metadata.file, t);
      continue;
    }
    const used = commonFlag(argv, i, run, range);
    if (used >= 0) {
      i += used;
      continue;
    }
    const value = () => flagValue(argv, i++, t);
    switch (t) {
      case "-h":
      case "--help":
        return "help";
      case "-r":
      case "--nworkers":
        ranks = intFlag(value(), t, 1);
        break;
      case "-N":
      case "--nnodes":
        nodes = intFlag(value(), t, 1);
        break;
      case "--instance":
        instance = value();
        break;
      case "--lnc":
        lnc = intFlag(value(), t, 1);
        break;
      case "--custom-replica-groups":
        groups = readInput(value(), t);
        break;
      case "--data-parallel-dimension":
        dpDim = intFlag(value(), t, 1);
        break;
      case "--unique-buff":
        ignored.push(`${t}: each op already has its own input and output buffers in a simulated program (one op a program): the timing is the same`);
        break;
      case "--shared-output-buff":
        ignored.push(`${t}: two cores sharing one output buffer is not modelled: each rank writes its own, as without it`);
        break;
      case "--custom-src-target-pairs":
        pairs = readInput(value(), t);
        break;
      case "--sb2sb":
        sb2sb = true;
        break;
      case "--input-shape":
      case "--output-shape":
        shapes.push(`${t} ${shapeFlag(value(), t)}`);
        break;
      case "--cc-dim":
        shapes.push(`${t} ${oneOfFlag(value(), t, ["0", "1"] as const)}`);
        break;
      case "--coalesced-cc-size-ratio":
        coalesced = coalescedRatios(value(), t);
        break;
      case "--dump-scenario":
        dump = true;
        break;
      case "-n":
      case "--iters":
      case "-w":
      case "--warmup_iters":
      case "-s":
      case "--hosts":
      case "--hosts-file":
        ignored.push(`${t} ${value()} ignored (a simulation has no iterations, warm-up or hosts)`);
        break;
      case "--non-interactive":
        ignored.push(`${t} ignored (a simulation has no iterations, warm-up or hosts)`);
        break;
      case "--debug":
      case "-S":
      case "--slurm-mode":
        ignored.push(`${t} ignored (a simulation runs no hosts or processes to debug or place)`);
        break;
      case "--slurm-job-id":
      case "--vcpu-pin-mode":
      case "--data-collector-port":
      case "--data-collector-host":
        ignored.push(`${t} ${value()} ignored (a simulation runs no hosts or processes to debug or place)`);
        break;
      case "-I":
      case "--neff-iters":
      case "-W":
      case "--neff-warmup-iters":
        // In-NEFF iterations: the host launches a NEFF once for many ops, so the per-iteration launch
        // is amortized, as in the default timing (host.iterationPs counts only under -t / --stats).
        ignored.push(`${t} ${intFlag(value(), t, 0)}: timed as a NEFF's loop, the host's launch amortized (as without it)`);
        break;
      default:
        if (t.startsWith("-")) throw new UsageError(`unknown option ${t}`);
        {
          // (A word after -c / --check that is not one of its values is read as nccom-test reads it:
          // the op, as in the published `--check allg`; with a second op, one of them is most likely
          // a mistyped value, and the message says what the flag takes.)
          const check = argv[i - 1] === "-c" || argv[i - 1] === "--check" ? argv[i - 1] : undefined;
          if (opName !== undefined) {
            const flag = check ?? opCheck;
            throw new UsageError(`one op at a time (got ${opName} and ${t})${flag ? `; ${flag} takes random or all_ones (nccom-test's; both check values here) or values, symbolic or none (ccsim's), or nothing` : ""}`);
          }
          opName = t;
          opCheck = check;
        }
    }
  }
  const dtype: Dtype = run.dtype ?? "uint8";
  if (opName === undefined) throw new UsageError(`no op given (one of ${Object.keys(NCCOM_OPS).join(", ")})`);
  const op = NCCOM_OPS[opName];
  if (!op) throw new UsageError(`unknown op "${opName}" (one of ${Object.keys(NCCOM_OPS).join(", ")})${opCheck ? `; after ${opCheck} it is read as the op, as nccom-test reads it: ${opCheck} takes random or all_ones, or ccsim's values, symbolic or none` : ""}`);
  if (ranks === undefined) throw new UsageError("-r N is required: how many ranks");
  run.sweep = sweepOf(range);
  checkShardFlags(run);
  // trn2's logical NeuronCore: NEURON_LOGICAL_NC_CONFIG (or --lnc), default 2; LNC 1 is its own preset.
  // (Set to nothing, as `export NEURON_LOGICAL_NC_CONFIG=` leaves it, it is unset: as the packet variable, and as a shard's partial records it.)
  const lncEnv = env["NEURON_LOGICAL_NC_CONFIG"]?.trim();
  const lncSize = lnc ?? (lncEnv ? intFlag(lncEnv, "NEURON_LOGICAL_NC_CONFIG", 1) : undefined);
  if (instance === "trn2" && lncSize === 1) instance = "trn2-lnc1";
  else if (lncSize !== undefined && lncSize !== (instance.startsWith("trn2") && instance !== "trn2-lnc1" ? 2 : 1)) {
    throw new UsageError(`--lnc / NEURON_LOGICAL_NC_CONFIG ${lncSize} is not available on ${instance}`);
  }
  if (op !== "send" && op !== "permute" && pairs !== undefined) throw new UsageError(`--custom-src-target-pairs applies to sendrecv and permute, not ${opName}`);
  if (dpDim !== undefined && groups !== undefined) throw new UsageError("give --data-parallel-dimension or --custom-replica-groups, not both");
  const replicaGroups = dpDim !== undefined ? dataParallelGroups(ranks, dpDim) : groups === undefined ? undefined : groupsOf(groups);
  if ((op === "all-gather-v" || op === "all-to-all-v") && Array.isArray(replicaGroups) && replicaGroups.every((g) => Array.isArray(g))) {
    // (Counts are one per rank of a group, the same for every group: groups of other sizes are refused here, by the file's name.)
    const sizes = [...new Set((replicaGroups as unknown[][]).map((g) => g.length))];
    const file = inputs.find(([flag]) => flag === "--custom-replica-groups")?.[1];
    if (sizes.length > 1) throw new UsageError(`--custom-replica-groups ${file}: ${opName} needs replica groups of one size (its counts are one per rank of a group); these have ${sizes.join(", ")} ranks`);
  }
  const built = collectiveScenario({
    // (A shard's flags are not the command's: the merged run names it as the unsharded one. The
    // runtime's packet variable, set, is named as a shell line would set it.)
    name: `${packetVariable(env) ? `${PACKET_VARIABLE}=${packetVariable(env)} ` : ""}nccom ${withoutShardFlags(argv).join(" ")}`,
    op,
    ranks,
    nodes,
    instance,
    devicesDir: run.devices,
    dtype,
    ...(replicaGroups !== undefined ? { groups: replicaGroups } : {}),
    ...(op === "send" || op === "permute" ? { pairs: pairs === undefined ? defaultPairs(opName, ranks) : pairsOf(pairs) } : {}),
    ...(stats ? { timeEach: true } : {}),
    ...(run.presetSets ? { sets: run.presetSets } : {}),
  });
  const scenario = built.scenario;
  // The runtime's CC DMA packet size (--cc-dma-packet, a run's override, over its variable).
  const fromEnv = packetsFromEnv(env);
  const packets = run.ccDmaPacketBytes ?? fromEnv;
  if (packets) scenario["ccDmaPacketBytes"] = packets;
  // The runtime's other debugging knobs of collectives: set for an experiment, so said to be unread.
  for (const [name, why] of UNREAD_ENV) if (env[name] !== undefined && env[name] !== "") ignored.push(`${name}=${env[name]} ignored (${why})`);
  run.devices = built.devicesDir;
  let sizeCounts: number[] | undefined;
  let matrixCounts: number[][] | undefined;
  if (metadata) {
    if (op !== "all-gather-v" && op !== "all-to-all-v") throw new UsageError(`--variable-size-op-metadata applies to allgv and alltoallv, not ${opName}`);
    const n = Array.isArray(replicaGroups) && Array.isArray(replicaGroups[0]) ? (replicaGroups[0] as unknown[]).length : ranks;
    if (op === "all-gather-v") sizeCounts = gatherMetadata(metadata.file, metadata.json, n).map((c) => c * dtypeSize(dtype));
    else matrixCounts = alltoallvMetadata(metadata.file, metadata.json, n).map((row) => row.map((c) => c * dtypeSize(dtype)));
  }
  if (coalesced && coalesced.length > 1) {
    if (!["all-reduce", "all-gather", "reduce-scatter"].includes(op)) throw new UsageError(`--coalesced-cc-size-ratio coalesces all_reduce, all_gather and reduce_scatter ops, not ${opName}`);
    if (metadata) throw new UsageError("give --coalesced-cc-size-ratio or --variable-size-op-metadata, not both");
  }
  if (shapes.length > 0 && !sb2sb) throw new UsageError(`${shapes[0]!.split(" ")[0]} lays out SBUF buffers: give --sb2sb`);
  if (sb2sb) {
    ignored.push(`--sb2sb: every rank's input and output in SBUF, refused where they do not fit a rank's SBUF (the preset's sbuf.bytesPerCore); their traffic is timed as HBM's (SBUF's rate is not published)${shapes.length > 0 ? `; ${shapes.join(", ")}: the tensor's layout in SBUF's partitions, the same bytes moved` : ""}`);
    scenario["buffers"] = "sbuf";
  }
  run.op = op;
  run.dtype = dtype;
  // (The files the run's groups and pairs come from are named: an error in them says where it is.)
  const named = inputs.filter(([flag]) => flag === "--custom-replica-groups" || flag === "--custom-src-target-pairs").map(([flag, file]) => ` ${flag} ${file}`);
  run.scenario = `nccom-test ${opName} -r ${ranks}${nodes > 1 ? ` -N ${nodes}` : ""}${named.join("")}`;
  let streams: StreamPlan[] | undefined;
  if (streamsFile !== undefined) {
    if (coalesced && coalesced.length > 1) throw new UsageError("give --streams-json or --coalesced-cc-size-ratio, not both (coalesced ops take streams of their own)");
    streams = streamPlans(streamsFile, argv, env, devicesDir);
    run.scenario += ` --streams-json ${streamsFile}`;
  }
  return { run, op, scenario, dump, ignored, ...(streams ? { streams } : {}), ...(coalesced && coalesced.length > 1 ? { coalesced } : {}), ...(sizeCounts ? { counts: sizeCounts } : {}), ...(matrixCounts ? { matrix: matrixCounts } : {}), percentiles: (stats ?? []).filter((st) => st !== "avg"), ioSizes, inputs };
}

/** Flags a stream entry may not set: they are the command's, the same for every stream. */
const COMMAND_WIDE = new Set(["nworkers", "nnodes", "instance", "lnc", "streams_json", "coalesced_cc_size_ratio", "variable_size_op_metadata", "report_to_json_file", "devices", "launch_us", "sb2sb"]);

/**
 * nccom-test's --streams-json FILE: {"streams": [{...}, ...]}, stream s = entry s (at most four, a
 * rank's CC streams). An entry's keys are long-form flags with "-" written "_" ("operation" for the
 * op, "ops_per_iter" for its ops an iteration, default 1), over the command line's own flags; a
 * file it names (custom_replica_groups, custom_src_target_pairs) is found from the streams file's
 * folder. Each stream is read as its own command line, then sized as a sweep sizes its op.
 */
function streamPlans(file: string, argv: readonly string[], env: Readonly<Record<string, string | undefined>>, devicesDir: string): StreamPlan[] {
  const bad = (why: string): never => {
    throw new UsageError(`--streams-json: ${file}: ${why}`);
  };
  const json = readJsonFile(file, "--streams-json");
  const entries = (json as { streams?: unknown })?.streams;
  if (!Array.isArray(entries) || entries.length === 0) bad(`needs {"streams": [ {...}, ... ]}: a list of one entry a stream`);
  const list = entries as unknown[];
  if (list.length > MAX_STREAMS) bad(`${list.length} streams: a rank has ${MAX_STREAMS} CC streams (NEC_MAX_STREAM_N)`);
  const dir = dirname(file);
  // The command line without --streams-json and its op: what every stream starts from.
  const common: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--streams-json") i++;
    else if (NCCOM_OPS[argv[i]!] === undefined) common.push(argv[i]!);
  }
  const opOf = argv.find((t) => NCCOM_OPS[t] !== undefined);
  return list.map((raw, s) => {
    const where = `streams[${s}]`;
    if (raw === null || typeof raw !== "object" || Array.isArray(raw)) bad(`${where} must be an object of flags`);
    const entry = raw as Record<string, unknown>;
    let opName = opOf;
    let opsPerIter = 1;
    const over: string[] = [];
    const replaced = new Set<string>();
    for (const [key, v] of Object.entries(entry)) {
      if (key === "operation") {
        if (typeof v !== "string" || NCCOM_OPS[v] === undefined) bad(`${where}.operation must be one of ${Object.keys(NCCOM_OPS).join(", ")}, not ${JSON.stringify(v)}`);
        opName = v as string;
        continue;
      }
      if (key === "ops_per_iter") {
        if (!Number.isSafeInteger(v) || (v as number) < 1 || (v as number) > 64) bad(`${where}.ops_per_iter must be a whole number 1..64, not ${JSON.stringify(v)}`);
        opsPerIter = v as number;
        continue;
      }
      if (COMMAND_WIDE.has(key)) bad(`${where}.${key} is the command's, the same for every stream: give --${key.replace(/_/g, "-")} on the command line`);
      const flag = `--${key.replace(/_/g, "-")}`;
      const aliases = ONCE.find((g) => g.includes(flag)) ?? [flag];
      for (const a of aliases) replaced.add(a);
      if (v === true) over.push(flag);
      else if (v === false || v === null) continue;
      else if (typeof v === "string" || typeof v === "number") over.push(flag, key === "custom_replica_groups" || key === "custom_src_target_pairs" ? resolve(dir, String(v)) : String(v));
      else bad(`${where}.${key} must be a string, a number or true, not ${JSON.stringify(v)}`);
    }
    if (opName === undefined) bad(`${where} names no operation, and the command line gives none`);
    // The command line's flags the entry does not set (a flag with a value drops its value too).
    const kept: string[] = [];
    for (let i = 0; i < common.length; i++) {
      const t = common[i]!;
      if (replaced.has(t)) {
        if (i + 1 < common.length && !common[i + 1]!.startsWith("-")) i++;
        continue;
      }
      kept.push(t);
    }
    let one: NccomArgs | "help";
    try {
      one = parseNccomArgs([opName!, ...kept, ...over], env, devicesDir);
    } catch (e) {
      if (e instanceof UsageError) bad(`${where}: ${e.message}`);
      throw e;
    }
    if (one === "help" || one.coalesced || one.counts || one.matrix) return bad(`${where}: --help, coalesced ops and variable-size metadata do not apply to a stream`);
    const scn = parseScenario(`--streams-json ${file} ${where}`, one.scenario);
    const op = scn.ops[0]!;
    const groups = scn.replicaGroups;
    const sw = one.run.sweep!;
    const { sizes, unit } = opSweepSizes(op, groupsRanksLcm(groups), sw);
    if (sizes.length === 0) bad(`${where}: every size from ${sw.min} B to ${sw.max} B is below one unit of ${op.op} (${unit} B)`);
    const { bytes: _b, counts: _c, replicaGroups: _g, stream: _s, reduce, ...rest } = scn.ops[0]!;
    return { op: { ...rest, ...(opEntry(op.op).reduces ? { reduce } : {}) }, sizes, opsPerIter, replicaGroups: groups };
  });
}

/**
 * --data-parallel-dimension D: the op runs at once in sub-groups of D ranks, each taking one rank
 * every ranks / D (one rank per node when D is the node count): group g is g, g + R/D, g + 2R/D, ...
 */
function dataParallelGroups(ranks: number, d: number): number[][] {
  if (ranks % d !== 0) throw new UsageError(`--data-parallel-dimension ${d} does not divide -r ${ranks}`);
  const stride = ranks / d;
  return Array.from({ length: stride }, (_, g) => Array.from({ length: d }, (_, k) => g + k * stride));
}

function defaultPairs(opName: string, ranks: number): [number, number][] {
  // (sendrecv pairs rank 0 with 1, 2 with 3, ...: one rank alone has no partner.)
  if (opName === "sendrecv" && ranks < 2) throw new UsageError(`sendrecv -r ${ranks}: ranks are paired (0 with 1, 2 with 3, ...), so it needs -r 2 or more (or --custom-src-target-pairs)`);
  if (opName === "sendrecv") return Array.from({ length: ranks - (ranks % 2) }, (_, i) => [i, i ^ 1] as [number, number]);
  return Array.from({ length: ranks }, (_, i) => [i, (i + 1) % ranks] as [number, number]);
}
