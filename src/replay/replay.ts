// Replay an HLO module's collectives: each collective as the scenario `npm run nccom` builds for
// the same op, size, type, ranks and groups (src/run/collective.ts), each distinct one simulated
// once per preset, counted as many times as one step runs it. The total is the collectives in
// program order on one stream: no overlap with compute or with each other is modelled.
import { dtypeSize, type Dtype } from "../ir/dtypes.ts";
import { CcsimError, UsageError, type ScenarioError } from "../ir/errors.ts";
import type { DeviceSpec, OpName } from "../ir/spec.ts";
import { collectiveScenario } from "../run/collective.ts";
import { loadDeviceWith, type PresetSet } from "../run/load.ts";
import { sweepPoint } from "../run/overrides.ts";
import { revive } from "../run/parallel.ts";
import { runTasks, type SweepTask } from "../run/sweep-task.ts";
import { HloError, type ArrayShape, type HloCollective, type HloModule, type HloReduce } from "./hlo.ts";
import { MAX_RANKS } from "../scenario/scenario.ts";

/** How an HLO element type moves: as `dtype`, `bits` per HLO element; `note` when it is not its own type. */
interface ElementMove {
  readonly dtype: Dtype;
  readonly bits: number;
  readonly note?: string;
}

const ELEMENTS: Readonly<Record<string, ElementMove>> = {
  pred: { dtype: "uint8", bits: 8, note: "pred moves as uint8 (one byte each)" },
  s8: { dtype: "int8", bits: 8 },
  u8: { dtype: "uint8", bits: 8 },
  s16: { dtype: "int16", bits: 16 },
  u16: { dtype: "uint16", bits: 16 },
  f16: { dtype: "fp16", bits: 16 },
  bf16: { dtype: "bf16", bits: 16 },
  s32: { dtype: "int32", bits: 32 },
  u32: { dtype: "uint32", bits: 32 },
  f32: { dtype: "fp32", bits: 32 },
  f8e4m3fn: { dtype: "fp8e4", bits: 8 },
  f8e5m2: { dtype: "fp8e5", bits: 8 },
  f8e4m3: { dtype: "fp8e4", bits: 8, note: "f8e4m3 moves as fp8e4 (E4M3FN): same bytes" },
  f8e4m3fnuz: { dtype: "fp8e4", bits: 8, note: "f8e4m3fnuz moves as fp8e4: same bytes" },
  f8e4m3b11fnuz: { dtype: "fp8e4", bits: 8, note: "f8e4m3b11fnuz moves as fp8e4: same bytes" },
  f8e5m2fnuz: { dtype: "fp8e5", bits: 8, note: "f8e5m2fnuz moves as fp8e5: same bytes" },
  f8e3m4: { dtype: "uint8", bits: 8, note: "f8e3m4 moves as uint8 (ccsim has no such type): same bytes" },
  s64: { dtype: "int32", bits: 64, note: "s64 moves as two int32 (ccsim has no 64-bit type): same bytes" },
  u64: { dtype: "uint32", bits: 64, note: "u64 moves as two uint32 (ccsim has no 64-bit type): same bytes" },
  f64: { dtype: "fp32", bits: 64, note: "f64 moves as two fp32 (ccsim has no 64-bit type): same bytes" },
  c64: { dtype: "fp32", bits: 64, note: "c64 moves as two fp32 (its real and imaginary parts)" },
  c128: { dtype: "fp32", bits: 128, note: "c128 moves as four fp32 (ccsim has no 64-bit type): same bytes" },
  s4: { dtype: "uint8", bits: 4, note: "s4 moves packed, as uint8 (two per byte)" },
  u4: { dtype: "uint8", bits: 4, note: "u4 moves packed, as uint8 (two per byte)" },
  s2: { dtype: "uint8", bits: 2, note: "s2 moves packed, as uint8 (four per byte)" },
  u2: { dtype: "uint8", bits: 2, note: "u2 moves packed, as uint8 (four per byte)" },
  f4e2m1fn: { dtype: "uint8", bits: 4, note: "f4e2m1fn moves packed, as uint8 (two per byte)" },
  token: { dtype: "uint8", bits: 0 },
};

/** The scenario op an HLO collective runs as. */
const AS_OP: Readonly<Record<HloCollective["op"], OpName>> = {
  "all-reduce": "all-reduce",
  "all-gather": "all-gather",
  "reduce-scatter": "reduce-scatter",
  "all-to-all": "all-to-all",
  "collective-permute": "permute",
  send: "send",
};

/**
 * The reduction ccsim times an HLO reduction as: its own where the CCE has it, else one that moves
 * the same bytes through the CCE (said in a note). On pred and unsigned values `or` is a max and
 * `and` a min, the same result too.
 */
const TIMED_AS: Readonly<Record<HloReduce, { readonly as: "sum" | "max" | "min"; readonly note?: string }>> = {
  sum: { as: "sum" },
  max: { as: "max" },
  min: { as: "min" },
  product: { as: "sum", note: "a product is timed as a sum (the same bytes through the CCE; ccsim has no product)" },
  or: { as: "max", note: "an or is timed as a max (the same bytes through the CCE; on pred and unsigned values, the same result)" },
  and: { as: "min", note: "an and is timed as a min (the same bytes through the CCE; on pred and unsigned values, the same result)" },
  xor: { as: "sum", note: "a xor is timed as a sum (the same bytes through the CCE; ccsim has no xor)" },
};

/** What a send row is. */
const SEND_NOTE = "a send and its recv (the same channel_id) are one transfer, timed once, as npm run nccom -- sendrecv with their pairs (--custom-src-target-pairs)";

/** One distinct collective of the module (op, bytes, type, groups or pairs, reduction). */
export interface ReplayRow {
  readonly key: string;
  readonly op: OpName;
  readonly hloOp: string;
  /** Its instructions (names) and the line of the first. */
  readonly instructions: readonly string[];
  readonly line: number;
  /** Runs per step, over all its instructions. */
  readonly count: number;
  /** The op's size as nccom-test states it (all-gather: the gathered output). */
  readonly bytes: number;
  readonly dtype: Dtype;
  /** The HLO arrays it moves, e.g. bf16[4096] (operands; combined collectives list several). */
  readonly hloTypes: string;
  readonly groupSize: number;
  readonly groups?: readonly (readonly number[])[];
  readonly pairs?: readonly (readonly [number, number])[];
  readonly reduce?: "sum" | "max" | "min";
  /** It moves nothing (groups of one rank, no pairs, or zero bytes): 0 us, not simulated. */
  readonly empty: boolean;
  readonly notes: readonly string[];
}

export interface ReplayPlan {
  readonly module: HloModule;
  readonly ranks: number;
  readonly nodes: number;
  readonly rows: readonly ReplayRow[];
  readonly warnings: readonly string[];
}

/** Rank count and distinct collectives of a module. */
export function planReplay(mod: HloModule, opts: { ranks?: number; nodes: number }): ReplayPlan {
  const R = mod.replicaCount ?? 1;
  const P = mod.numPartitions ?? 1;
  const stated = R * P > 1 ? R * P : undefined;
  // (Before a collective's ids are listed: they number up to replicas x partitions.)
  if (R * P > MAX_RANKS) throw new HloError(mod.file, 1, `replica_count x num_partitions is ${R * P}: ccsim runs at most ${MAX_RANKS} ranks`);
  let largest = -1;
  for (const { c } of mod.collectives) for (const id of globalIds(c, R, P)) largest = Math.max(largest, id);
  const ranks = opts.ranks ?? Math.max(stated ?? 0, largest + 1);
  if (ranks > MAX_RANKS) {
    // (Said before any list of ranks is made: a module's ids or counts may be anything.)
    const naming = opts.ranks === undefined && largest + 1 === ranks ? mod.collectives.find(({ c }) => globalIds(c, R, P).includes(largest))?.c : undefined;
    const why = opts.ranks !== undefined ? `--ranks ${ranks}` : naming ? `${naming.opcode} ${naming.name} names rank ${largest}` : `its groups name ${ranks} ranks`;
    throw new HloError(mod.file, naming?.line ?? 1, `${why}: ccsim runs at most ${MAX_RANKS} ranks`);
  }
  if (ranks < 1) {
    const first = mod.collectives[0]?.c;
    throw new HloError(mod.file, first?.line ?? 1, "no rank count: the module states neither replica_count nor num_partitions and its groups name no rank; give --ranks N");
  }
  const warnings = [...mod.warnings];
  const rows = new Map<string, { row: ReplayRow; names: string[]; notes: string[]; count: number }>();
  for (const { c, count } of mod.collectives) {
    const fail = (msg: string): never => {
      throw new HloError(mod.file, c.line, `${c.opcode} ${c.name}: ${msg}`);
    };
    const move = movedAs(c, fail);
    const op = AS_OP[c.op];
    let groups: number[][] | undefined;
    let pairs: [number, number][] | undefined;
    if (c.pairs) {
      pairs = expandPairs(c, R, P).filter(([s, t]) => s !== t);
      for (const [s, t] of pairs) if (Math.max(s, t) >= ranks) fail(`source_target_pairs name rank ${Math.max(s, t)}, but there are ${ranks} ranks (--ranks)`);
      const seen = new Set<number>();
      for (const [s] of pairs) {
        if (seen.has(s)) fail(`rank ${s} is the source of two pairs`);
        seen.add(s);
      }
    } else {
      groups = expandGroups(c, R, P, ranks);
      const seen = new Set<number>();
      for (const g of groups) {
        for (const id of g) {
          if (id >= ranks) fail(`replica_groups name rank ${id}, but there are ${ranks} ranks (--ranks)`);
          if (seen.has(id)) fail(`rank ${id} is in two replica groups (groups overlap)`);
          seen.add(id);
        }
      }
      if (seen.size < ranks) {
        const missing = Array.from({ length: ranks }, (_, k) => k).filter((k) => !seen.has(k));
        fail(`its replica groups cover ${seen.size} of ${ranks} ranks (not ${missing.slice(0, 4).join(", ")}${missing.length > 4 ? ", ..." : ""}); ccsim runs a collective whose groups cover every rank (--ranks ${seen.size}?)`);
      }
    }
    const groupSize = groups ? Math.max(...groups.map((g) => g.length)) : 2;
    const bytes = c.op === "all-gather" ? move.bytes * groupSize : move.bytes;
    // (A shape may print any number of elements; no device holds 2^53 bytes, and past them the count is not exact.)
    if (!Number.isSafeInteger(bytes)) fail(`moves ${c.operands.map((o) => o.text).join(", ")}${c.op === "all-gather" ? ` from each of ${groupSize} ranks` : ""}: more than 2^53 bytes, more than any device holds`);
    const timed = c.reduce === undefined ? undefined : TIMED_AS[c.reduce];
    const reduce = timed?.as;
    const notes = [...move.notes, ...(timed?.note ? [timed.note] : []), ...(c.op === "send" ? [SEND_NOTE] : [])];
    const empty = bytes === 0 || (groups !== undefined && groupSize === 1) || (pairs !== undefined && pairs.length === 0);
    const key = JSON.stringify([op, bytes, move.dtype, reduce ?? null, groups ?? null, pairs ?? null]);
    const have = rows.get(key);
    if (have) {
      have.count += count;
      if (!have.names.includes(c.name)) have.names.push(c.name);
      for (const n of notes) if (!have.notes.includes(n)) have.notes.push(n);
      continue;
    }
    rows.set(key, {
      row: {
        key,
        op,
        hloOp: c.op,
        instructions: [],
        line: c.line,
        count: 0,
        bytes,
        dtype: move.dtype,
        hloTypes: move.types,
        groupSize: pairs ? 2 : groupSize,
        ...(groups ? { groups } : {}),
        ...(pairs ? { pairs } : {}),
        ...(reduce ? { reduce } : {}),
        empty,
        notes: [],
      },
      names: [c.name],
      notes,
      count,
    });
  }
  return { module: mod, ranks, nodes: opts.nodes, rows: [...rows.values()].map((r) => ({ ...r.row, instructions: r.names, notes: r.notes, count: r.count })), warnings };
}

/** Every id a collective names, as global rank ids. */
function globalIds(c: HloCollective, R: number, P: number): number[] {
  if (c.pairs) return expandPairs(c, R, P).flat();
  return (c.groups ? expandGroups(c, R, P, 0) : []).flat();
}

/**
 * A collective's groups as global ranks. Under use_global_device_ids the ids are global already;
 * with a channel_id alone they are partition ids, one set of groups per replica; with neither,
 * replica ids, one set per partition. No groups (`{}`) is every id of that kind. A module with
 * replicas only or partitions only (or stating neither) has one kind of id: the ranks themselves.
 */
function expandGroups(c: HloCollective, R: number, P: number, ranks: number): number[][] {
  if (c.mode === "flattened" || R === 1 || P === 1) return c.groups ? c.groups.map((g) => [...g]) : [Array.from({ length: ranks }, (_, k) => k)];
  if (c.mode === "cross-partition") {
    const local = c.groups ?? [Array.from({ length: P }, (_, k) => k)];
    return Array.from({ length: R }, (_, r) => local.map((g) => g.map((q) => r * P + q))).flat();
  }
  const local = c.groups ?? [Array.from({ length: R }, (_, k) => k)];
  return Array.from({ length: P }, (_, p) => local.map((g) => g.map((r) => r * P + p))).flat();
}

function expandPairs(c: HloCollective, R: number, P: number): [number, number][] {
  const pairs = (c.pairs ?? []).map(([s, t]) => [s, t] as [number, number]);
  if (c.mode === "flattened" || R === 1 || P === 1) return pairs;
  if (c.mode === "cross-partition") return Array.from({ length: R }, (_, r) => pairs.map(([s, t]) => [r * P + s, r * P + t] as [number, number])).flat();
  return Array.from({ length: P }, (_, p) => pairs.map(([s, t]) => [s * P + p, t * P + p] as [number, number])).flat();
}

/** What a collective's operands move: bytes, the type they move as, and what was mapped. */
function movedAs(c: HloCollective, fail: (msg: string) => never): { bytes: number; dtype: Dtype; types: string; notes: string[] } {
  const notes = new Set<string>();
  let bytes = 0;
  let biggest: { dtype: Dtype; bytes: number } | undefined;
  for (const a of c.operands) {
    const m = ELEMENTS[a.type];
    if (!m) fail(`element type '${a.type}' is not one replay knows (${Object.keys(ELEMENTS).join(", ")})`);
    if (m!.note) notes.add(m!.note);
    const b = Math.ceil((a.elements * m!.bits) / 8);
    bytes += b;
    if (m!.bits > 0 && (!biggest || b > biggest.bytes)) biggest = { dtype: m!.dtype, bytes: b };
  }
  const dtype = biggest?.dtype ?? "uint8";
  const dtypes = new Set(c.operands.filter((a) => ELEMENTS[a.type]!.bits > 0).map((a) => ELEMENTS[a.type]!.dtype));
  const esize = dtypeSize(dtype);
  if (dtypes.size > 1) notes.add(`a combined collective of ${[...dtypes].join(" and ")}: timed as ${dtype}, its largest part, over all ${bytes} bytes`);
  if (bytes % esize !== 0) {
    notes.add(`${bytes} bytes rounded up to whole ${dtype} elements`);
    bytes += esize - (bytes % esize);
  }
  return { bytes, dtype, types: typesText(c.operands), notes: [...notes] };
}

function typesText(arrays: readonly ArrayShape[]): string {
  const t = arrays.map((a) => a.text);
  return t.length <= 3 ? t.join(",") : `${t.slice(0, 2).join(",")},+${t.length - 2}`;
}

/** One row's simulation on one preset. */
export interface ReplayCell {
  readonly timeUs: number;
  readonly algorithm: string;
}

export class ReplayRunError extends Error {
  constructor(
    message: string,
    readonly hang: boolean,
  ) {
    super(message);
  }
}

/**
 * Every row on every instance (`cells[row][instance]`), each distinct collective simulated once
 * per preset, on `jobs` threads. A row the preset refuses, or that hangs, is an error naming its
 * instruction and line. `packets`: the runtime's CC DMA packet sizes (a scenario's
 * `ccDmaPacketBytes`), if not its default; `sets`: preset fields changed on every instance (--set).
 */
export function runReplay(plan: ReplayPlan, instances: readonly string[], devicesDir: string, jobs: number, packets?: readonly number[], sets?: readonly PresetSet[]): ReplayCell[][] {
  const cells: (ReplayCell | undefined)[][] = plan.rows.map(() => instances.map(() => undefined));
  const inputs: SweepTask[] = [];
  const at: [number, number][] = [];
  const specs = new Map<string, DeviceSpec>();
  plan.rows.forEach((row, i) => {
    instances.forEach((inst, j) => {
      if (row.empty) {
        cells[i]![j] = { timeUs: 0, algorithm: "none" };
        return;
      }
      try {
        const built = collectiveScenario({
          name: `replay ${plan.module.name} ${row.instructions[0]}`,
          op: row.op,
          ranks: plan.ranks,
          nodes: plan.nodes,
          instance: inst,
          devicesDir,
          dtype: row.dtype,
          ...(row.groups ? { groups: row.groups } : {}),
          ...(row.pairs ? { pairs: row.pairs } : {}),
          ...(row.reduce ? { reduce: row.reduce } : {}),
          ...(sets ? { sets } : {}),
        });
        if (packets) built.scenario["ccDmaPacketBytes"] = packets;
        const key = `${built.devicesDir}/${built.instance}`;
        if (!specs.has(key)) specs.set(key, loadDeviceWith(built.instance, built.devicesDir, sets));
        const scenario = sweepPoint({ file: `${plan.module.file}:${row.line}`, json: built.scenario, flags: "" }, row.op, row.dtype, row.bytes, "none");
        inputs.push({ scenario, spec: specs.get(key)!, logLevel: "silent", unfolded: false });
        at.push([i, j]);
      } catch (e) {
        if (e instanceof CcsimError) throw rowError(plan, row, inst, (e as ScenarioError).render());
        if (e instanceof UsageError) throw rowError(plan, row, inst, e.message);
        throw e;
      }
    });
  });
  const results = runTasks(inputs, jobs);
  results.forEach((r, k) => {
    const [i, j] = at[k]!;
    const row = plan.rows[i]!;
    if (r.kind === "done") cells[i]![j] = { timeUs: r.outcome.row.timeUs, algorithm: r.outcome.row.algorithm };
    else if (r.kind === "hang") throw new ReplayRunError(`${plan.module.file}:${row.line}: ${row.instructions[0]} on ${instances[j]}: the simulated program hung (${r.hang.unfinished.length} TopSP queues unfinished)`, true);
    else throw rowError(plan, row, instances[j]!, (revive(r.error) as CcsimError).render());
  });
  return cells as ReplayCell[][];
}

function rowError(plan: ReplayPlan, row: ReplayRow, instance: string, why: string): ReplayRunError {
  return new ReplayRunError(`${plan.module.file}:${row.line}: ${row.hloOp} ${row.instructions[0]} (${row.bytes} B ${row.dtype}, ${plan.ranks} ranks) does not run on ${instance}: ${why}`, false);
}
