// Loader + validator for scenarios (scenarios/*.json); see scenarios/scenario.schema.json.
import { DTYPES, REDUCE_OPS, dtypeSize } from "../ir/dtypes.ts";
import { ALG_NAMES, ALGORITHMS, OP_NAMES, algTypeOf, type OpName, type OpSpec, type RankOverride, type Scenario } from "../ir/spec.ts";
import { Reader } from "./reader.ts";

const TOP_KEYS = ["$schema", "description", "name", "instance", "ranks", "ranksPerDevice", "nodes", "replicaGroups", "algorithm", "allowedAlgorithms", "channels", "chunkBytes", "seed", "check", "ops", "rankOverrides"] as const;
const OP_KEYS = ["op", "bytes", "dtype", "reduce", "stream", "priorityClass"] as const;
const OVERRIDE_KEYS = ["rank", "op", "bytes", "dtype", "reduce", "stream", "priorityClass"] as const;
/** Ops whose size must split into one block per group rank. */
const BLOCKED_OPS: readonly OpName[] = ["all-gather", "reduce-scatter", "all-to-all"];
/** Ops that take a reduce operation. */
const REDUCING_OPS: readonly OpName[] = ["all-reduce", "reduce-scatter", "reduce", "permute-reduce", "permute-reduce-implicit"];
export const MAX_STREAMS = 4;
export const PRIORITY_CLASSES = 5;

export const MAX_RANKS = 64;

export function parseScenario(file: string, json: unknown): Scenario {
  const r = new Reader(file, "", json);
  r.keys(TOP_KEYS);
  const name = r.get("name").string();
  const instanceR = r.get("instance");
  const instance = instanceR.string();
  if (!/^[A-Za-z0-9][A-Za-z0-9_-]*$/.test(instance)) instanceR.fail("SCN1005", "must be a device preset name (letters, digits, '-', '_')");
  const ranks = r.get("ranks").int(1, MAX_RANKS);
  const ranksPerDevice = r.opt("ranksPerDevice")?.int(1, 8) ?? 1;
  if (ranks % ranksPerDevice !== 0) r.get("ranksPerDevice").fail("SCN1006", `ranks (${ranks}) must be a multiple of ranksPerDevice`);
  const nodesR = r.opt("nodes");
  const nodes = nodesR?.int(1, MAX_RANKS) ?? 1;
  if (nodesR && ranks % nodes !== 0) nodesR.fail("SCN1006", `ranks (${ranks}) must be a multiple of nodes`);
  const groupsR = r.opt("replicaGroups");
  const replicaGroups = groupsR
    ? groupsR.items().map((g) => {
        const members = g.items().map((m) => m.int(0, Number.MAX_SAFE_INTEGER));
        if (members.length === 0) g.fail("SCN1005", "a replica group must not be empty");
        return members;
      })
    : [Array.from({ length: ranks }, (_, i) => i)];
  if (groupsR && replicaGroups.length === 0) groupsR.fail("SCN1005", "must list at least one group");
  const algorithm = r.opt("algorithm")?.oneOf(ALGORITHMS) ?? "auto";
  const allowedR = r.opt("allowedAlgorithms");
  if (allowedR && algorithm !== "auto") allowedR.fail("SCN1008", `give either "algorithm": "${algorithm}" (only that one is allowed) or allowedAlgorithms, not both`);
  const allowedAlgorithms =
    algorithm !== "auto"
      ? [algTypeOf(algorithm)]
      : allowedR?.items().map((a, i, all) => {
          const name = a.oneOf(ALG_NAMES);
          if (all.slice(0, i).some((b) => b.value === name)) a.fail("SCN1005", `"${name}" is listed twice`);
          return algTypeOf(name);
        });
  if (allowedAlgorithms && allowedAlgorithms.length === 0) allowedR!.fail("SCN1005", "must allow at least one algorithm");
  const channels = r.opt("channels")?.int(1, 32);
  const chunkBytes = r.opt("chunkBytes")?.int(64);
  const seed = r.opt("seed")?.int(0) ?? 1;
  const check = r.opt("check")?.oneOf(["values", "none"] as const) ?? "values";
  const opsR = r.get("ops");
  const opItems = opsR.items();
  if (opItems.length === 0) opsR.fail("SCN1005", "must list at least one op");
  const groupSizes = [...new Set(replicaGroups.map((g) => g.length))];
  const ops = opItems.map((o) => parseOp(o, groupSizes));
  const rankOverrides = (r.opt("rankOverrides")?.items() ?? []).map((o) => parseOverride(o, ranks, ops, groupSizes));
  return { name, instance, ranks, ranksPerDevice, nodes, replicaGroups, algorithm, allowedAlgorithms, channels, chunkBytes, seed, check, ops, rankOverrides };
}

function checkBytes(bytesR: Reader, op: OpName, bytes: number, dtype: OpSpec["dtype"], groupSizes: readonly number[]): void {
  const esize = dtypeSize(dtype);
  if (bytes % esize !== 0) bytesR.fail("SCN1006", `must be a multiple of the ${dtype} element size (${esize} bytes)`);
  if (BLOCKED_OPS.includes(op)) {
    for (const n of groupSizes) {
      if (bytes % (esize * n) !== 0) bytesR.fail("SCN1006", `${op} needs a multiple of element size x group ranks (${esize} x ${n} = ${esize * n} bytes)`);
    }
  }
}

function parseOp(o: Reader, groupSizes: readonly number[]): OpSpec {
  o.keys(OP_KEYS);
  const op = o.get("op").oneOf(OP_NAMES);
  const dtype = o.get("dtype").oneOf(DTYPES);
  const bytesR = o.get("bytes");
  const bytes = bytesR.int(1);
  const reduceR = o.opt("reduce");
  if (!REDUCING_OPS.includes(op) && reduceR) reduceR.fail("SCN1005", `${op} takes no reduce op`);
  const reduce = reduceR?.oneOf(REDUCE_OPS) ?? "sum";
  checkBytes(bytesR, op, bytes, dtype, groupSizes);
  const stream = o.opt("stream")?.int(0, MAX_STREAMS - 1) ?? 0;
  const priorityClass = o.opt("priorityClass")?.int(0, PRIORITY_CLASSES - 1) ?? 0;
  return { op, bytes, dtype, reduce, stream, priorityClass };
}

function parseOverride(o: Reader, ranks: number, ops: readonly OpSpec[], groupSizes: readonly number[]): RankOverride {
  o.keys(OVERRIDE_KEYS);
  const rank = o.get("rank").int(0, ranks - 1);
  const opIndex = o.get("op").int(0, ops.length - 1);
  const base = ops[opIndex]!;
  const out: { -readonly [K in keyof RankOverride]: RankOverride[K] } = { rank, op: opIndex };
  const dtype = o.opt("dtype")?.oneOf(DTYPES);
  if (dtype !== undefined) out.dtype = dtype;
  const bytesR = o.opt("bytes");
  if (bytesR) {
    out.bytes = bytesR.int(1);
    checkBytes(bytesR, base.op, out.bytes, dtype ?? base.dtype, groupSizes);
  }
  const reduce = o.opt("reduce")?.oneOf(REDUCE_OPS);
  if (reduce !== undefined) out.reduce = reduce;
  const stream = o.opt("stream")?.int(0, MAX_STREAMS - 1);
  if (stream !== undefined) out.stream = stream;
  const pc = o.opt("priorityClass")?.int(0, PRIORITY_CLASSES - 1);
  if (pc !== undefined) out.priorityClass = pc;
  return out;
}
