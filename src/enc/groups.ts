// Replica groups and per-rank comm info (the enc_parse_replica_groups / enc_comm_info analogue).
import { CompileError, InternalError } from "../ir/errors.ts";
import { opGroups, sameGroups, type Scenario } from "../ir/spec.ts";

export interface CommInfo {
  /** Global rank. */
  readonly rank: number;
  /** Index of the rank's replica group. */
  readonly group: number;
  /** Rank within its group (the `rank` of enc_comm_info). */
  readonly groupRank: number;
  /** Ranks in the group (`rank_n`). */
  readonly rankN: number;
  readonly device: number;
  /** NeuronCore on the device. */
  readonly core: number;
  readonly node: number;
  readonly nodeN: number;
}

/**
 * Validate the groups as the runtime does (rank id range, uniqueness, every rank present) and return
 * them. The self-presence message is the seed's: "replica groups (%u/%u) does not have myself %u",
 * with the number of groups searched and the number of groups.
 */
export function parseReplicaGroups(groups: readonly (readonly number[])[], ranks: number, at = "replicaGroups"): number[][] {
  const seen = new Map<number, string>();
  groups.forEach((g, gi) =>
    g.forEach((r, i) => {
      const path = `${at}[${gi}][${i}]`;
      if (!Number.isInteger(r) || r < 0 || r >= ranks) throw new CompileError("CMP1001", `rank id ${r} is out of range 0..${ranks - 1}`, { path, value: r });
      const first = seen.get(r);
      if (first !== undefined) throw new CompileError("CMP1002", `rank ${r} appears twice (first at ${first})`, { path, value: r });
      seen.set(r, path);
    }),
  );
  for (let r = 0; r < ranks; r++) {
    if (!seen.has(r)) {
      throw new CompileError("CMP1003", `replica groups (${groups.length}/${groups.length}) does not have myself ${r}`, { path: at, value: r });
    }
  }
  return groups.map((g) => [...g]);
}

/**
 * Per-rank comm info. Ranks fill node 0's devices first, then node 1's, …; node k's device d has the
 * global id k * deviceIdsPerNode + d (a node has all its preset's device ids, used or not).
 */
export function commInfos(groups: readonly (readonly number[])[], ranks: number, ranksPerDevice: number, nodes: number, deviceIdsPerNode = Math.max(1, ranks / ranksPerDevice / nodes)): CommInfo[] {
  const out: CommInfo[] = new Array(ranks);
  const ranksPerNode = ranks / nodes;
  groups.forEach((g, gi) =>
    g.forEach((rank, groupRank) => {
      const node = Math.floor(rank / ranksPerNode);
      const device = node * deviceIdsPerNode + Math.floor((rank % ranksPerNode) / ranksPerDevice);
      out[rank] = {
        rank,
        group: gi,
        groupRank,
        rankN: g.length,
        device,
        core: rank % ranksPerDevice,
        node,
        nodeN: nodes,
      };
    }),
  );
  return out;
}

/**
 * The replica groups of ops `opIndices`, each op's checked as the scenario's are (errors name the
 * op's own groups where it has them); the first op's are the program's. Only a concurrent program
 * runs ops over different groups (each stream over its own).
 */
export function programGroups(scn: Scenario, opIndices: readonly number[]): number[][] {
  const where = (i: number) => (scn.ops[i]!.replicaGroups ? `ops[${i}].replicaGroups` : "replicaGroups");
  const [main, ...rest] = opIndices.map((i) => parseReplicaGroups(opGroups(scn, i), scn.ranks, where(i)));
  if (main === undefined) return parseReplicaGroups(scn.replicaGroups, scn.ranks);
  if (!scn.concurrent && rest.some((g) => !sameGroups(g, main))) throw new InternalError(`ops ${opIndices.join(", ")} over different replica groups in one program that does not run them concurrently`);
  return main;
}
