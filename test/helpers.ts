// Shared test helpers: scenarios built in code, device presets from devices/.
import type { OpSpec, Scenario } from "../src/ir/spec.ts";
import { loadDevice } from "../src/cli/load.ts";

export function scenario(over: Partial<Scenario> & { ops: readonly OpSpec[] }): Scenario {
  const ranks = over.ranks ?? 8;
  return {
    name: "test",
    instance: "trn1",
    ranks,
    ranksPerDevice: 1,
    nodes: 1,
    replicaGroups: [Array.from({ length: ranks }, (_, i) => i)],
    algorithm: "ring",
    channels: undefined,
    chunkBytes: undefined,
    seed: 1,
    check: "values",
    ...over,
  };
}

export const trn1 = loadDevice("trn1");
export const ideal = loadDevice("ideal");
