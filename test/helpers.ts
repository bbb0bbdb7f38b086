// Shared test helpers: scenarios built in code, device presets from devices/.
import type { OpSpec, Scenario } from "../src/ir/spec.ts";
import { loadDevice } from "../src/cli/load.ts";

export type LooseOp = Omit<OpSpec, "stream" | "priorityClass"> & Partial<Pick<OpSpec, "stream" | "priorityClass">>;

export function scenario(over: Partial<Omit<Scenario, "ops">> & { ops: readonly LooseOp[] }): Scenario {
  const ranks = over.ranks ?? 8;
  const { ops, ...rest } = over;
  return {
    name: "test",
    instance: "trn1",
    ranks,
    ranksPerDevice: 1,
    nodes: 1,
    replicaGroups: [Array.from({ length: ranks }, (_, i) => i)],
    algorithm: "ring",
    allowedAlgorithms: [0],
    channels: undefined,
    chunkBytes: undefined,
    seed: 1,
    check: "values",
    rankOverrides: [],
    ...rest,
    ops: ops.map((o) => ({ stream: 0, priorityClass: 0, ...o })),
  };
}

export const trn1 = loadDevice("trn1");
export const ideal = loadDevice("ideal");
