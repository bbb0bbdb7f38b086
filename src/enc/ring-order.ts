// Device-level ring order re-derived from the physical topology: a cycle that follows links.
import { breadthFirst, topologyAdjacency } from "../ir/topology.ts";
import type { RingSet } from "./stage.ts";

/** Adjacency lists of the machine's devices (sorted, de-duplicated). */
export const adjacency = topologyAdjacency;

/** Hop distances from `src` over the adjacency (breadth first). */
export function hopDistances(adj: readonly (readonly number[])[], src: number): number[] {
  return breadthFirst(adj, src).dist;
}

export interface DeviceRing {
  /** Devices in ring order, starting at the lowest id. */
  readonly order: number[];
  /** True when every consecutive pair (and the closing pair) is a direct link. */
  readonly followsLinks: boolean;
}

/**
 * A Hamiltonian cycle through `devices` on links between them (depth first, lowest id first, so
 * the result is deterministic). When none exists (or the search budget runs out) fall back to a
 * nearest-neighbour tour by hop distance, whose non-adjacent steps the fabric routes hop by hop.
 */
export function deviceRing(adj: readonly (readonly number[])[], devices: readonly number[]): DeviceRing {
  const set = [...new Set(devices)].sort((a, b) => a - b);
  if (set.length <= 2) {
    const ok = set.length < 2 || (adj[set[0]!] ?? []).includes(set[1]!);
    return { order: set, followsLinks: ok };
  }
  const inSet = new Set(set);
  const start = set[0]!;
  const path = [start];
  const used = new Set(path);
  let budget = 2_000_000;
  const dfs = (): boolean => {
    if (--budget < 0) return false;
    const u = path[path.length - 1]!;
    if (path.length === set.length) return (adj[u] ?? []).includes(start);
    for (const v of adj[u] ?? []) {
      if (!inSet.has(v) || used.has(v)) continue;
      used.add(v);
      path.push(v);
      if (dfs()) return true;
      path.pop();
      used.delete(v);
    }
    return false;
  };
  if (dfs()) return { order: path, followsLinks: true };
  const order = [start];
  const left = new Set(set.slice(1));
  while (left.size > 0) {
    const dist = hopDistances(adj, order[order.length - 1]!);
    let best = -1;
    for (const v of left) if (best < 0 || dist[v]! < dist[best]!) best = v;
    order.push(best);
    left.delete(best);
  }
  return { order, followsLinks: false };
}

const edgeKey = (a: number, b: number): string => (a < b ? `${a}-${b}` : `${b}-${a}`);

/** Hamiltonian cycles through `set` on the given adjacency (depth first, lowest id first), lazily. */
function* hamiltonianCycles(adj: readonly (readonly number[])[], set: readonly number[], budget: { left: number }): Generator<number[]> {
  const inSet = new Set(set);
  const start = set[0]!;
  const path = [start];
  const used = new Set(path);
  function* dfs(): Generator<number[]> {
    if (--budget.left < 0) return;
    const u = path[path.length - 1]!;
    if (path.length === set.length) {
      if ((adj[u] ?? []).includes(start)) yield [...path];
      return;
    }
    for (const v of adj[u] ?? []) {
      if (!inSet.has(v) || used.has(v)) continue;
      used.add(v);
      path.push(v);
      yield* dfs();
      path.pop();
      used.delete(v);
    }
  }
  yield* dfs();
}

/**
 * Up to two edge-disjoint Hamiltonian cycles through `devices` ("multiple cycles on mutually
 * exclusive wires", e.g. the two of a 16-chip torus), so that channels can use every link; one
 * cycle (or the routed fallback of deviceRing) when that is all there is.
 */
export function deviceRings(adj: readonly (readonly number[])[], devices: readonly number[]): DeviceRing[] {
  const set = [...new Set(devices)].sort((a, b) => a - b);
  // Cycles that follow links depend on the links among the devices alone: another node's devices
  // with the same links (ids shifted) take the same cycles, shifted (4,096 ranks: 128 nodes, one
  // search). A fallback tour routes over other devices: searched each time.
  const base = set[0] ?? 0;
  const inSet = new Set(set);
  const key = set.map((d) => `${d - base}:${(adj[d] ?? []).filter((e) => inSet.has(e)).map((e) => e - base).join(",")}`).join(" ");
  let memo = RINGS.get(adj);
  if (!memo) RINGS.set(adj, (memo = new Map()));
  const known = memo.get(key);
  if (known) return known.map((r) => ({ order: r.order.map((d) => d + base), followsLinks: true }));
  const rings = searchRings(adj, set);
  if (rings.every((r) => r.followsLinks)) memo.set(key, rings.map((r) => ({ order: r.order.map((d) => d - base), followsLinks: true })));
  return rings;
}

/** Cycles found through sets of devices, by adjacency and by the links among a set's devices (relative to its lowest id). */
const RINGS = new WeakMap<readonly (readonly number[])[], Map<string, DeviceRing[]>>();

/** `deviceRings` of the sorted, de-duplicated `set`, searched. */
function searchRings(adj: readonly (readonly number[])[], set: readonly number[]): DeviceRing[] {
  const first = deviceRing(adj, set);
  if (!first.followsLinks || set.length < 5) return [first];
  const budget = { left: 200_000 };
  let candidates = 0;
  for (const cycle of hamiltonianCycles(adj, set, budget)) {
    if (++candidates > 2000) break;
    const taken = new Set(cycle.map((d, i) => edgeKey(d, cycle[(i + 1) % cycle.length]!)));
    const rest = adj.map((row, d) => row.filter((e) => !taken.has(edgeKey(d, e))));
    if (set.some((d) => rest[d]!.filter((e) => set.includes(e)).length < 2)) continue;
    const second = hamiltonianCycles(rest, set, { left: 20_000 }).next();
    if (!second.done) return [{ order: cycle, followsLinks: true }, { order: second.value, followsLinks: true }];
  }
  return [first];
}

/**
 * The rings a replica group's channels follow: device cycles that follow links (two edge-disjoint
 * ones where the topology has them: channels 2c and 2c+1 take cycle c mod 2, forward and
 * reversed), ranks of one device adjacent. Across the network each node's (pod's) cycle is opened
 * into a path and the paths joined node after node (the joins are network hops).
 */
export function groupRings(g: readonly number[], deviceOf: (rank: number) => number, adj: readonly (readonly number[])[], podIds: number, channels: number): RingSet {
  const podsOfGroup = [...new Set(g.map((r) => Math.floor(deviceOf(r) / podIds)))].sort((a, b) => a - b);
  const devices = [...new Set(g.map(deviceOf))];
  const perNode = podsOfGroup.length > 1 ? podsOfGroup.map((k) => deviceRing(adj, devices.filter((d) => Math.floor(d / podIds) === k))) : [];
  const cycles = perNode.length > 0 ? [{ order: perNode.flatMap((dr) => dr.order), followsLinks: perNode.every((dr) => dr.followsLinks) }] : deviceRings(adj, devices);
  const orders = cycles.map((dr) => dr.order.flatMap((d) => g.filter((r) => deviceOf(r) === d).sort((a, b) => a - b)));
  return {
    group: g,
    channels: Array.from({ length: channels }, (_, c) => {
      const base = orders[Math.floor(c / 2) % orders.length]!;
      return c % 2 === 0 ? base : [...base].reverse();
    }),
    cycle: Array.from({ length: channels }, (_, c) => Math.floor(c / 2) % orders.length),
    followsLinks: cycles.every((dr) => dr.followsLinks),
  };
}
