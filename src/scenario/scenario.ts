// Loader + validator for scenarios (scenarios/*.json); see scenarios/scenario.schema.json.
import { DTYPES, REDUCE_OPS, dtypeSize } from "../ir/dtypes.ts";
import { ALG_NAMES, ALGORITHMS, FAULT_KINDS, TIMINGS, HIER_INTER, HIER_INTRA, SCENARIO_OP_NAMES, algTypeOf, sameGroups, type Fault, type OpName, type OpSpec, type RankOverride, type Scenario } from "../ir/spec.ts";
import { opEntry } from "../ir/ops.ts";
import { Reader } from "./reader.ts";
import { MAX_CHUNK_BYTES } from "./device.ts";
import { MAX_DESC_BYTES } from "../encd/udma.ts";

const TOP_KEYS = ["$schema", "description", "name", "instance", "ranks", "ranksPerDevice", "nodes", "replicaGroups", "algorithm", "allowedAlgorithms", "hierarchical", "channels", "chunkBytes", "ccDmaPacketBytes", "seed", "check", "races", "concurrent", "timing", "buffers", "ops", "rankOverrides", "faults"] as const;
const OP_KEYS = ["op", "bytes", "dtype", "reduce", "stream", "priorityClass", "counts", "pairs", "replicaGroups"] as const;
const OVERRIDE_KEYS = ["rank", "op", "bytes", "dtype", "reduce", "stream", "priorityClass"] as const;
export const MAX_STREAMS = 4;
/** The least CC DMA packet a scenario may ask for (`ccDmaPacketBytes`; the preset's least descriptor cap); the most is a descriptor's 64 KiB. */
export const MIN_CC_PACKET_BYTES = 64;
export const PRIORITY_CLASSES = 5;

/** Ranks of a scenario: 128 trn1 nodes of 32, or 128 trn2 nodes of 64 (logical core size 2). */
export const MAX_RANKS = 8192;

export function parseScenario(file: string, json: unknown): Scenario {
  const r = new Reader(file, "", json);
  r.keys(TOP_KEYS);
  const name = r.get("name").string();
  const instanceR = r.get("instance");
  const instance = instanceR.string();
  if (!/^[A-Za-z0-9][A-Za-z0-9_-]*$/.test(instance)) instanceR.fail("SCN1011", "must be a device preset name (letters, digits, '-', '_')");
  const ranks = r.get("ranks").int(1, MAX_RANKS);
  const ranksPerDevice = r.opt("ranksPerDevice")?.int(1, 8) ?? 1;
  if (ranks % ranksPerDevice !== 0) r.get("ranksPerDevice").fail("SCN1006", `ranks (${ranks}) must be a multiple of ranksPerDevice`);
  const nodesR = r.opt("nodes");
  const nodes = nodesR?.int(1, MAX_RANKS) ?? 1;
  if (nodesR && ranks % nodes !== 0) nodesR.fail("SCN1006", `ranks (${ranks}) must be a multiple of nodes`);
  const groupsR = r.opt("replicaGroups");
  const replicaGroups = groupsR ? parseGroups(groupsR) : [Array.from({ length: ranks }, (_, i) => i)];
  const algorithm = r.opt("algorithm")?.oneOf(ALGORITHMS) ?? "auto";
  const allowedR = r.opt("allowedAlgorithms");
  if (allowedR && algorithm !== "auto") allowedR.fail("SCN1008", `give either "algorithm": "${algorithm}" (only that one is allowed) or allowedAlgorithms, not both`);
  const allowedAlgorithms =
    algorithm !== "auto"
      ? [algTypeOf(algorithm)]
      : allowedR?.items(ALG_NAMES.length).map((a, i, all) => {
          const name = a.oneOf(ALG_NAMES);
          if (all.slice(0, i).some((b) => b.value === name)) a.fail("SCN1013", `"${name}" is listed twice`);
          return algTypeOf(name);
        });
  if (allowedAlgorithms && allowedAlgorithms.length === 0) allowedR!.fail("SCN1012", "must allow at least one algorithm");
  const hierR = r.opt("hierarchical");
  hierR?.keys(["intra", "inter", "slices"]);
  const hierarchical = {
    intra: hierR?.opt("intra")?.oneOf(HIER_INTRA) ?? "auto",
    inter: hierR?.opt("inter")?.oneOf(HIER_INTER) ?? "auto",
    slices: hierR?.opt("slices")?.int(1, 16) ?? 1,
  };
  const channels = r.opt("channels")?.int(1, 32);
  const chunkBytes = r.opt("chunkBytes")?.int(64, MAX_CHUNK_BYTES);
  const packetR = r.opt("ccDmaPacketBytes");
  // One size for every CC stream, or a list: stream k's the k-th (the runtime's comma list), the last for the streams past it.
  if (packetR && typeof packetR.value !== "number" && !Array.isArray(packetR.value)) packetR.fail("SCN1003", "expected a size in bytes, or a list of them (one per CC stream)");
  const ccDmaPacketBytes = packetR && (Array.isArray(packetR.value) ? packetR.items(MAX_STREAMS).map((x) => x.int(MIN_CC_PACKET_BYTES, MAX_DESC_BYTES)) : [packetR.int(MIN_CC_PACKET_BYTES, MAX_DESC_BYTES)]);
  if (packetR && ccDmaPacketBytes!.length === 0) packetR.fail("SCN1012", "must give at least one size");
  const seed = r.opt("seed")?.int(0) ?? 1;
  const check = r.opt("check")?.oneOf(["values", "symbolic", "none"] as const) ?? "values";
  const races = r.opt("races")?.boolean() ?? true;
  const concurrent = r.opt("concurrent")?.boolean() ?? false;
  const timing = r.opt("timing")?.oneOf(TIMINGS) ?? "loop";
  const buffers = r.opt("buffers")?.oneOf(["hbm", "sbuf"] as const) ?? "hbm";
  const opsR = r.get("ops");
  const opItems = opsR.items();
  if (opItems.length === 0) opsR.fail("SCN1012", "must list at least one op");
  const groupSizes = [...new Set(replicaGroups.map((g) => g.length))];
  const ops = opItems.map((o) => parseOp(o, groupSizes, ranks));
  // A concurrent program runs a stream's ops over one set of groups (nccom-test's groups file is per stream).
  if (concurrent) {
    ops.forEach((op, i) => {
      const first = ops.findIndex((p) => p.stream === op.stream);
      if (!sameGroups(op.replicaGroups ?? replicaGroups, ops[first]!.replicaGroups ?? replicaGroups)) {
        opItems[i]!.fail("SCN1016", `runs on stream ${op.stream} over other replica groups than ops[${first}]: the ops of one stream share their groups`, op.stream);
      }
    });
  }
  const rankOverrides = (r.opt("rankOverrides")?.items() ?? []).map((o) => parseOverride(o, ranks, ops, groupSizes));
  const faults = (r.opt("faults")?.items(1024) ?? []).map(parseFault);
  return { name, instance, ranks, ranksPerDevice, nodes, replicaGroups, algorithm, allowedAlgorithms, hierarchical, channels, chunkBytes, ...(ccDmaPacketBytes ? { ccDmaPacketBytes } : {}), seed, check, races, ...(concurrent ? { concurrent } : {}), ...(timing !== "loop" ? { timing } : {}), ...(buffers === "sbuf" ? { buffers } : {}), ops, rankOverrides, ...(faults.length > 0 ? { faults } : {}) };
}

/** One fault: its kind, then exactly that kind's keys (devices and links are checked against the machine at run time). */
function parseFault(f: Reader): Fault {
  const kind = f.get("kind").oneOf(FAULT_KINDS);
  const us = (k: string, min = 0) => f.get(k).number(min, 1e9);
  switch (kind) {
    case "link-down":
      f.keys(["kind", "from", "to", "atUs"]);
      return { kind, from: f.get("from").int(0, 4095), to: f.get("to").int(0, 4095), atUs: us("atUs") };
    case "link-slow": {
      f.keys(["kind", "from", "to", "factor"]);
      const factor = f.get("factor").number(1, 1e6);
      return { kind, from: f.get("from").int(0, 4095), to: f.get("to").int(0, 4095), factor };
    }
    case "engine-stall":
      f.keys(["kind", "device", "engine", "atUs", "forUs"]);
      return { kind, device: f.get("device").int(0, 4095), engine: f.get("engine").int(0, 255), atUs: us("atUs"), forUs: us("forUs") };
    case "lost-increment": {
      f.keys(["kind", "device", "nth", "semaphore"]);
      const sema = f.opt("semaphore")?.int(0, 255);
      return { kind, device: f.get("device").int(0, 4095), nth: f.get("nth").int(1), ...(sema === undefined ? {} : { semaphore: sema }) };
    }
    case "drop-wait":
      f.keys(["kind", "device", "nth"]);
      return { kind, device: f.get("device").int(0, 4095), nth: f.get("nth").int(1) };
  }
}

function checkBytes(bytesR: Reader, op: OpName, bytes: number, dtype: OpSpec["dtype"], groupSizes: readonly number[]): void {
  const esize = dtypeSize(dtype);
  if (bytes % esize !== 0) bytesR.fail("SCN1006", `must be a multiple of the ${dtype} element size (${esize} bytes)`);
  if (opEntry(op).blocked) {
    for (const n of groupSizes) {
      if (bytes % (esize * n) !== 0) bytesR.fail("SCN1006", `${op} needs a multiple of element size x group ranks (${esize} x ${n} = ${esize * n} bytes)`);
    }
  }
}

/** A byte count of whole elements. */
function byteCount(c: Reader, dtype: OpSpec["dtype"]): number {
  const v = c.int(0);
  const esize = dtypeSize(dtype);
  if (v % esize !== 0) c.fail("SCN1006", `must be a multiple of the ${dtype} element size (${esize} bytes)`);
  return v;
}

/** Replica groups: a non-empty list of non-empty lists of rank ids (checked against the ranks at compile, as the runtime does). */
function parseGroups(groupsR: Reader): number[][] {
  const groups = groupsR.items(MAX_RANKS).map((g) => {
    const members = g.items(MAX_RANKS).map((m) => m.int(0, Number.MAX_SAFE_INTEGER));
    if (members.length === 0) g.fail("SCN1012", "a replica group must not be empty");
    return members;
  });
  if (groups.length === 0) groupsR.fail("SCN1012", "must list at least one group");
  return groups;
}

function parseOp(o: Reader, scnGroupSizes: readonly number[], ranks: number): OpSpec {
  o.keys(OP_KEYS);
  const ownR = o.opt("replicaGroups");
  const own = ownR ? parseGroups(ownR) : undefined;
  const groupSizes = own ? [...new Set(own.map((g) => g.length))] : scnGroupSizes;
  const op = o.get("op").oneOf(SCENARIO_OP_NAMES);
  const dtype = o.get("dtype").oneOf(DTYPES);
  const bytesR = o.get("bytes");
  const bytes = bytesR.int(1);
  const reduceR = o.opt("reduce");
  if (!opEntry(op).reduces && reduceR) reduceR.fail("SCN1014", `${op} takes no reduce op`);
  const reduce = reduceR?.oneOf(REDUCE_OPS) ?? "sum";
  checkBytes(bytesR, op, bytes, dtype, groupSizes);
  const stream = o.opt("stream")?.int(0, MAX_STREAMS - 1) ?? 0;
  const priorityClass = o.opt("priorityClass")?.int(0, PRIORITY_CLASSES - 1) ?? 0;
  const out: OpSpec = { op, bytes, dtype, reduce, stream, priorityClass, ...(own ? { replicaGroups: own } : {}) };
  const countsR = o.opt("counts");
  if (op === "all-gather-v") {
    // A vector: the bytes each group rank contributes; they add up to the gathered size.
    if (!countsR) o.fail("SCN1004", `all-gather-v needs "counts": the bytes each group rank contributes (they add up to "bytes")`, undefined, `${o.path}.counts`);
    if (groupSizes.length !== 1) countsR.fail("SCN1015", "all-gather-v needs every replica group to have the same size");
    const n = groupSizes[0]!;
    const cells = countsR.items(MAX_RANKS);
    if (cells.length !== n) countsR.fail("SCN1015", `needs ${n} entries (one per group rank), got ${cells.length}`, cells.length);
    const sizes = cells.map((c) => byteCount(c, dtype));
    const total = sizes.reduce((a, b) => a + b, 0);
    if (total !== bytes) countsR.fail("SCN1015", `adds up to ${total} bytes; "bytes" (the gathered size) is ${bytes}`, total);
    // Lowered to all-to-all-v: rank i sends its block to every rank.
    return { ...out, counts: sizes.map((c) => sizes.map(() => c)) };
  }
  if (opEntry(op).needs === "counts") {
    if (!countsR) o.fail("SCN1004", `all-to-all-v needs "counts": an n x n matrix of bytes rank i sends to rank j`, undefined, `${o.path}.counts`);
    if (groupSizes.length !== 1) countsR.fail("SCN1015", "all-to-all-v needs every replica group to have the same size");
    const n = groupSizes[0]!;
    const rows = countsR.items(MAX_RANKS);
    if (rows.length !== n) countsR.fail("SCN1015", `needs ${n} rows (one per group rank), got ${rows.length}`, rows.length);
    const counts = rows.map((row) => {
      const cells = row.items(MAX_RANKS);
      if (cells.length !== n) row.fail("SCN1015", `needs ${n} entries, got ${cells.length}`, cells.length);
      return cells.map((c) => byteCount(c, dtype));
    });
    return { ...out, counts };
  }
  if (countsR) countsR.fail("SCN1014", `only all-to-all-v and all-gather-v take counts`);
  const pairsR = o.opt("pairs");
  if (opEntry(op).needs === "pairs") {
    if (!pairsR) o.fail("SCN1004", `${op} needs "pairs": [[source, target], ...]`, undefined, `${o.path}.pairs`);
    const seenSrc = new Set<number>();
    const seenDst = new Set<number>();
    const pairs = pairsR.items(MAX_RANKS).map((p) => {
      const items = p.items(3);
      const a = items[0];
      const b = items[1];
      if (!a || !b || items.length !== 2) return p.fail("SCN1015", "a pair is [source, target]");
      const src = a.int(0, ranks - 1);
      const dst = b.int(0, ranks - 1);
      if (seenSrc.has(src)) a.fail("SCN1013", `rank ${src} sends twice`);
      if (seenDst.has(dst)) b.fail("SCN1013", `rank ${dst} receives twice`);
      seenSrc.add(src);
      seenDst.add(dst);
      return [src, dst] as const;
    });
    if (pairs.length === 0) pairsR.fail("SCN1012", "needs at least one pair");
    return { ...out, pairs };
  }
  if (pairsR) pairsR.fail("SCN1014", `only send, recv and the permute ops take pairs`);
  return out;
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
    checkBytes(bytesR, base.op, out.bytes, dtype ?? base.dtype, base.replicaGroups ? [...new Set(base.replicaGroups.map((g) => g.length))] : groupSizes);
  }
  const reduce = o.opt("reduce")?.oneOf(REDUCE_OPS);
  if (reduce !== undefined) out.reduce = reduce;
  const stream = o.opt("stream")?.int(0, MAX_STREAMS - 1);
  if (stream !== undefined) out.stream = stream;
  const pc = o.opt("priorityClass")?.int(0, PRIORITY_CLASSES - 1);
  if (pc !== undefined) out.priorityClass = pc;
  return out;
}
