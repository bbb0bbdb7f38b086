// The fixed cost of one collective beyond the device's work: the runtime's launch and the host
// costs of the preset's `host` section (docs/device-model.md §6, "Host costs"). The simulator
// starts every TopSP this long after the run starts (topsp.launchPs), an exact shift of the run.
import type { EncAlgType } from "../ir/enums.ts";
import { ALG_NAMES, opGroups, type AlgName, type DeviceSpec, type Scenario } from "../ir/spec.ts";

/** What an op's fixed cost depends on, besides the preset. */
export interface FixedCostShape {
  /** Ranks of the largest replica group (what the launch barrier spans). */
  readonly ranks: number;
  readonly nodes: number;
  /** Every iteration timed on its own (nccom-test --stats / -t). */
  readonly each: boolean;
  /** A variable-size op (all-gather-v, all-to-all-v): its counts are staged from the host. */
  readonly variable: boolean;
  /** The algorithms the op's groups resolved to (enc_alg_type values). */
  readonly algorithms: readonly EncAlgType[];
}

/** One term of the fixed cost: its preset field, how many times it counts, and its picoseconds. */
export interface FixedCostTerm {
  readonly field: string;
  readonly times: number;
  readonly ps: number;
}

export interface FixedCost {
  readonly totalPs: number;
  /** How many times each field counts for this op (fixedCostFeatures). */
  readonly features: Readonly<Record<string, number>>;
  /** The terms that count (times > 0 and a cost), in the order the preset lists them. */
  readonly terms: readonly FixedCostTerm[];
}

/**
 * Algorithms with no setup of their own beyond the launch. The flat ring may have one: a ring that
 * spans nodes opens its network connections through the proxy (the older runtime's tables show one,
 * calibration/; the shipped presets give it none).
 */
const NO_SETUP = new Set(["single-cycle-ring"]);

/** ⌈log2 n⌉: the rounds of a dissemination barrier over n ranks (0 for one rank). */
export function barrierRounds(n: number): number {
  return n <= 1 ? 0 : Math.ceil(Math.log2(n));
}

/**
 * The feature vector of an op's fixed cost: per preset field, how many times it counts. The cost
 * is linear in the preset's fields (the calibration fits them in closed form from these).
 */
export function fixedCostFeatures(shape: FixedCostShape): Record<string, number> {
  const f: Record<string, number> = {
    "topsp.launchPs": 1,
    "host.syncPs": barrierRounds(shape.ranks),
    "host.nodeSyncPs": Math.max(0, shape.nodes - 1),
    "host.iterationPs": shape.each ? 1 : 0,
    "host.countsPs": shape.variable ? 1 : 0,
  };
  // The op waits for its slowest group: the largest setup among its groups' algorithms counts once.
  // The single-cycle ring has none: its channels need no handshake before the first step (the mesh
  // subtypes open with LOCAL_HNDSHK / GLOBAL_HNDSHK events; spec/mesh-composer-topology-switch.md §6).
  for (const a of new Set(shape.algorithms)) {
    const name = (ALG_NAMES as readonly string[])[a];
    if (name !== undefined && !NO_SETUP.has(name)) f[`host.algorithmPs.${name}`] = 1;
  }
  return f;
}

/** The preset's value of a fixed-cost field (0 where it gives none). */
export function fixedCostValue(spec: DeviceSpec, field: string): number {
  if (field === "topsp.launchPs") return spec.topsp.launchPs;
  if (field.startsWith("host.algorithmPs.")) return spec.host.algorithmPs[field.slice("host.algorithmPs.".length) as AlgName] ?? 0;
  const k = field.slice("host.".length) as "syncPs" | "nodeSyncPs" | "iterationPs" | "countsPs";
  return spec.host[k] ?? 0;
}

export function fixedCost(spec: DeviceSpec, shape: FixedCostShape): FixedCost {
  return fixedCostOf(spec, fixedCostFeatures(shape));
}

/** The fixed cost of an op whose features are known: every term, the largest algorithm setup once. */
export function fixedCostOf(spec: DeviceSpec, features: Readonly<Record<string, number>>): FixedCost {
  const terms: FixedCostTerm[] = [];
  let algorithm: FixedCostTerm | undefined;
  for (const [field, times] of Object.entries(features)) {
    const ps = fixedCostValue(spec, field) * times;
    if (times === 0 || ps === 0) continue;
    if (field.startsWith("host.algorithmPs.")) {
      if (!algorithm || ps > algorithm.ps) algorithm = { field, times, ps };
      continue;
    }
    terms.push({ field, times, ps });
  }
  if (algorithm) terms.push(algorithm);
  return { totalPs: terms.reduce((a, t) => a + t.ps, 0), features, terms };
}

/** The shape of op `i` of a scenario, once its groups' algorithms are known. */
export function opShape(scn: Scenario, i: number, algorithms: readonly EncAlgType[]): FixedCostShape {
  const op = scn.ops[i]!;
  return {
    ranks: Math.max(...opGroups(scn, i).map((g) => g.length)),
    nodes: scn.nodes,
    each: scn.timing === "each",
    variable: op.op === "all-gather-v" || op.op === "all-to-all-v",
    algorithms,
  };
}

/** The device as op `i` runs on it: topsp.launchPs is the op's whole fixed cost. */
export function opSpec(spec: DeviceSpec, cost: FixedCost): DeviceSpec {
  return { ...spec, topsp: { ...spec.topsp, launchPs: cost.totalPs } };
}

/** One line for --explain: the fixed cost and its terms. */
export function describeFixedCost(cost: FixedCost): string {
  const us = (ps: number) => `${+(ps / 1e6).toFixed(3)} us`;
  if (cost.terms.length === 0) return "0 us";
  return `${us(cost.totalPs)} = ${cost.terms.map((t) => (t.times === 1 ? `${t.field} ${us(t.ps)}` : `${t.field} ${us(t.ps / t.times)} x ${t.times}`)).join(" + ")}`;
}
