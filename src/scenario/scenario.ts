// Loader + validator for scenarios (scenarios/*.json); see scenarios/scenario.schema.json.
import { DTYPES, REDUCE_OPS, dtypeSize } from "../ir/dtypes.ts";
import { ALGORITHMS, OP_NAMES, type OpSpec, type Scenario } from "../ir/spec.ts";
import { Reader } from "./reader.ts";

const TOP_KEYS = ["$schema", "description", "name", "instance", "ranks", "ranksPerDevice", "nodes", "replicaGroups", "algorithm", "channels", "chunkBytes", "seed", "check", "ops"] as const;
const OP_KEYS = ["op", "bytes", "dtype", "reduce"] as const;

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
  const channels = r.opt("channels")?.int(1, 32);
  const chunkBytes = r.opt("chunkBytes")?.int(64);
  const seed = r.opt("seed")?.int(0) ?? 1;
  const check = r.opt("check")?.oneOf(["values", "none"] as const) ?? "values";
  const opsR = r.get("ops");
  const opItems = opsR.items();
  if (opItems.length === 0) opsR.fail("SCN1005", "must list at least one op");
  const groupSizes = [...new Set(replicaGroups.map((g) => g.length))];
  const ops = opItems.map((o) => parseOp(o, groupSizes));
  return { name, instance, ranks, ranksPerDevice, nodes, replicaGroups, algorithm, channels, chunkBytes, seed, check, ops };
}

function parseOp(o: Reader, groupSizes: readonly number[]): OpSpec {
  o.keys(OP_KEYS);
  const op = o.get("op").oneOf(OP_NAMES);
  const dtype = o.get("dtype").oneOf(DTYPES);
  const bytesR = o.get("bytes");
  const bytes = bytesR.int(1);
  const reduceR = o.opt("reduce");
  if (op === "all-gather" && reduceR) reduceR.fail("SCN1005", "all-gather takes no reduce op");
  const reduce = reduceR?.oneOf(REDUCE_OPS) ?? "sum";
  const esize = dtypeSize(dtype);
  if (bytes % esize !== 0) bytesR.fail("SCN1006", `must be a multiple of the ${dtype} element size (${esize} bytes)`);
  if (op !== "all-reduce") {
    for (const n of groupSizes) {
      if (bytes % (esize * n) !== 0) bytesR.fail("SCN1006", `${op} needs a multiple of element size x group ranks (${esize} x ${n} = ${esize * n} bytes)`);
    }
  }
  return { op, bytes, dtype, reduce };
}
