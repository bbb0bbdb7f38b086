// One collective as nccom-test states it (op, ranks over nodes, groups or pairs, type) made a
// scenario: ranks fill NeuronCores in order, as many per device as it has logical cores. Used by
// `npm run nccom` and by HLO replay, so the same collective is the same scenario in both.
import { dtypeSize, type Dtype } from "../ir/dtypes.ts";
import { UsageError } from "../ir/errors.ts";
import { groupsRanksLcm, type OpName } from "../ir/spec.ts";
import { loadDeviceWith, resolveInstance, type PresetSet } from "./load.ts";

export interface CollectiveRequest {
  /** The scenario's name. */
  readonly name: string;
  readonly op: OpName;
  readonly ranks: number;
  readonly nodes: number;
  /** A preset name in `devicesDir`, or a preset file (FILE.json). */
  readonly instance: string;
  readonly devicesDir: string;
  readonly dtype: Dtype;
  /** Replica groups (checked by the scenario's validation); all ranks in one group when absent. */
  readonly groups?: unknown;
  /** Source / target pairs of send and permute. */
  readonly pairs?: unknown;
  /** The reduction of a reducing op (default sum). */
  readonly reduce?: "sum" | "max" | "min";
  /** Time every iteration on its own (nccom-test's --stats). */
  readonly timeEach?: boolean;
  /** Preset fields the run changes (`--set`): ranks fill the NeuronCores the changed preset has. */
  readonly sets?: readonly PresetSet[];
}

export interface CollectiveScenario {
  readonly scenario: Record<string, unknown>;
  /** The preset's name and folder (a preset file resolved). */
  readonly instance: string;
  readonly devicesDir: string;
}

/** The scenario of one collective, its op at one element per rank (a sweep sets the size). */
export function collectiveScenario(r: CollectiveRequest): CollectiveScenario {
  const where = resolveInstance(r.instance, r.devicesDir);
  const spec = loadDeviceWith(where.instance, where.dir, r.sets);
  if (r.ranks % r.nodes !== 0) throw new UsageError(`-r ${r.ranks} does not split over -N ${r.nodes} nodes`);
  const perNode = r.ranks / r.nodes;
  const cores = Math.floor(spec.coresPerDevice / spec.collectives.virtualCoreSize);
  const rpd = Math.min(perNode, cores);
  if (perNode % rpd !== 0) throw new UsageError(`-r ${r.ranks} on ${r.nodes} node(s) does not fill whole ${where.instance} devices of ${cores} NeuronCores`);
  const esize = dtypeSize(r.dtype);
  const o: Record<string, unknown> = { op: r.op, bytes: esize * (isGroups(r.groups) ? groupsRanksLcm(r.groups) : r.ranks), dtype: r.dtype, ...(r.reduce && r.reduce !== "sum" ? { reduce: r.reduce } : {}) };
  if (r.op === "send" || r.op === "permute") o["pairs"] = r.pairs;
  if (r.op === "all-to-all-v" || r.op === "all-gather-v") {
    const g = r.groups;
    const n = Array.isArray(g) && Array.isArray(g[0]) ? (g[0] as unknown[]).length : r.ranks;
    o["counts"] = r.op === "all-gather-v" ? Array.from({ length: n }, () => esize) : Array.from({ length: n }, () => Array.from({ length: n }, () => esize));
    if (r.op === "all-gather-v") o["bytes"] = esize * n;
  }
  const scenario: Record<string, unknown> = {
    name: r.name.slice(0, 200),
    instance: where.instance,
    ranks: r.ranks,
    ranksPerDevice: rpd,
    nodes: r.nodes,
    ...(r.groups !== undefined ? { replicaGroups: r.groups } : {}),
    algorithm: "auto",
    check: "none",
    ...(r.timeEach ? { timing: "each" } : {}),
    ops: [o],
  };
  return { scenario, instance: where.instance, devicesDir: where.dir };
}

/** Replica groups as given (checked later by the scenario's validation): a list of lists. */
function isGroups(groups: unknown): groups is unknown[][] {
  return Array.isArray(groups) && groups.every((g) => Array.isArray(g));
}
