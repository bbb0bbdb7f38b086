// The machine's topology, as fact about the hardware: which devices a preset's links join (within
// a node, across a pod's nodes), the order routing takes them, and the breadth-first walk both the
// composer's rings and the simulator's routes follow.

/** Device-to-device topology: an explicit neighbour table, or a plain ring sized to the devices in use. */
export type Topology =
  | {
      readonly kind: "table";
      readonly neighbours: readonly (readonly number[])[];
      /** Columns of the table in the order routing prefers them (dimension-order routing); default: by device id. */
      readonly routeOrder?: readonly number[];
      /**
       * An UltraServer pod: up to this many nodes whose same-position devices are joined by
       * NeuronLinks in a ring (Z links: device d of node k to device d of nodes k ± 1).
       */
      readonly podNodes?: number;
    }
  | { readonly kind: "ring" }
  /**
   * Every device reaches every other through one switch (NeuronSwitch-v1): a port per device, each
   * direction at link.bytesPerSecond, link.latencyPs per hop (two hops a transfer).
   */
  | { readonly kind: "switch" };

/**
 * The links of a topology as sorted adjacency lists; a ring topology has exactly `deviceCount`
 * devices (the ones in use).
 */
export function topologyAdjacency(topology: Topology, deviceCount: number): number[][] {
  if (topology.kind === "switch") return Array.from({ length: deviceCount }, (_, d) => Array.from({ length: deviceCount }, (_, e) => e).filter((e) => e !== d));
  if (topology.kind === "ring") {
    return Array.from({ length: deviceCount }, (_, d) =>
      deviceCount === 1 ? [] : [...new Set([(d + deviceCount - 1) % deviceCount, (d + 1) % deviceCount])].sort((a, b) => a - b),
    );
  }
  return topology.neighbours.map((row) => [...new Set(row)].sort((a, b) => a - b));
}

/**
 * The links in the order routing tries them: a table's columns in `routeOrder` (so shortest paths
 * take one dimension before the next), otherwise by device id.
 */
export function routingAdjacency(topology: Topology, deviceCount: number): number[][] {
  if (topology.kind === "table" && topology.routeOrder) {
    const order = topology.routeOrder;
    return topology.neighbours.map((row) => [...new Set(order.map((c) => row[c]!).filter((d) => d !== undefined))]);
  }
  return topologyAdjacency(topology, deviceCount);
}

/**
 * Breadth first from `src` over `adj`, neighbours in list order (so the result is deterministic):
 * each device's hop distance (Infinity: unreachable) and the first hop of a shortest path to it
 * (-1 for `src` and the unreachable). The composer's rings and the fabric's routes both walk this.
 */
export function breadthFirst(adj: readonly (readonly number[])[], src: number): { dist: number[]; first: number[] } {
  const dist = adj.map(() => Infinity);
  const first = adj.map(() => -1);
  dist[src] = 0;
  const queue = [src];
  for (let i = 0; i < queue.length; i++) {
    const u = queue[i]!;
    for (const v of adj[u] ?? []) {
      if (dist[v] !== Infinity) continue;
      dist[v] = dist[u]! + 1;
      first[v] = u === src ? v : first[u]!;
      queue.push(v);
    }
  }
  return { dist, first };
}

/**
 * One node's adjacency repeated for `nodes` nodes (node k's device d is k * (devices per node) + d);
 * in pods of `podNodes` > 1 nodes (nodes k*P .. k*P + P-1), device d of a node also links to
 * device d of the pod's nodes on either side in a ring (listed last, so routing takes the Z
 * dimension after the node's own).
 */
export function acrossNodes(local: readonly (readonly number[])[], nodes: number, podNodes = 1): number[][] {
  const n = local.length;
  const P = Math.min(podNodes, nodes);
  return Array.from({ length: nodes }, (_, k) =>
    local.map((row, d) => {
      const own = row.map((e) => k * n + e);
      if (P < 2) return own;
      const base = k - (k % P);
      const z = [...new Set([(base + ((k - base + 1) % P)) * n + d, (base + ((k - base + P - 1) % P)) * n + d])];
      return [...own, ...z];
    }),
  ).flat();
}

/** The devices a scenario's ranks fill on each node (ranks / ranks per device / nodes): one definition for the composer. */
export function devicesPerNode(scn: { readonly ranks: number; readonly ranksPerDevice: number; readonly nodes: number }): number {
  return scn.ranks / scn.ranksPerDevice / scn.nodes;
}

/**
 * Nodes per NeuronLink pod when `nodes` nodes of this topology run together: its pod size (all the
 * nodes, when fewer), 1 without pods. Pod k is nodes k*P .. k*P + P-1; DMA reaches every device of
 * its pod (Z rings), and only the network joins pods.
 */
export function podNodesOf(topology: Topology, nodes: number): number {
  if (nodes < 2 || topology.kind !== "table" || topology.podNodes === undefined) return 1;
  return Math.min(nodes, topology.podNodes);
}
