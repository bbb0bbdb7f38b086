// The JSON Schema beside the scenarios names the same keys the validator accepts.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseScenario } from "../../src/scenario/index.ts";
import { DTYPES } from "../../src/ir/dtypes.ts";
import { SCENARIO_OP_NAMES } from "../../src/ir/spec.ts";

const schema = JSON.parse(readFileSync("scenarios/scenario.schema.json", "utf8"));

describe("scenario.schema.json", () => {
  it("lists exactly the top-level and op keys the validator accepts", () => {
    const minimal = { name: "x", instance: "trn1", ranks: 2, ops: [{ op: "all-reduce", bytes: 8, dtype: "fp32" }] };
    for (const k of Object.keys(schema.properties)) {
      if (["name", "instance", "ranks", "ops"].includes(k)) continue;
      const sample: Record<string, unknown> = { faults: [{ kind: "link-slow", from: 0, to: 1, factor: 2 }], $schema: "s", description: "d", hierarchical: { intra: "ring" }, ranksPerDevice: 1, nodes: 1, replicaGroups: [[0, 1]], algorithm: "ring", allowedAlgorithms: ["ring", "mesh"], channels: 1, chunkBytes: 1024, ccDmaPacketBytes: [4096, 65536], seed: 1, check: "none", races: false, concurrent: true, timing: "each", buffers: "sbuf", rankOverrides: [{ rank: 1, op: 0, stream: 1 }] };
      expect(() => parseScenario("t.json", { ...minimal, [k]: sample[k] }), k).not.toThrow();
    }
    expect(() => parseScenario("t.json", { ...minimal, extra: 1 })).toThrow(/unknown key "extra"/);
    const opKeys = Object.keys(schema.properties.ops.items.properties);
    expect(opKeys).toEqual(["op", "bytes", "dtype", "reduce", "stream", "priorityClass", "counts", "pairs", "replicaGroups"]);
    expect(schema.properties.ops.items.properties.op.enum).toEqual([...SCENARIO_OP_NAMES]);
    expect(schema.properties.algorithm.enum).toHaveLength(12);
    expect(schema.properties.ops.items.properties.dtype.enum).toEqual([...DTYPES]);
  });
});
