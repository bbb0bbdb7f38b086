// Shared test helpers: scenarios built in code, device presets from devices/.
import type { HierChoice, OpName, OpSpec, Scenario } from "../src/ir/spec.ts";
import type { DeviceSpec } from "../src/ir/spec.ts";
import { loadDevice } from "../src/run/load.ts";
import { runScenario } from "../src/run/pipeline.ts";
import { expect } from "vitest";
import pino from "pino";
import fc from "fast-check";
import { DTYPES } from "../src/ir/dtypes.ts";
import { CcsimError } from "../src/ir/errors.ts";

export type LooseOp = Omit<OpSpec, "stream" | "priorityClass"> & Partial<Pick<OpSpec, "stream" | "priorityClass">>;

export function scenario(over: Partial<Omit<Scenario, "ops" | "hierarchical">> & { ops: readonly LooseOp[]; hierarchical?: Partial<HierChoice> }): Scenario {
  const ranks = over.ranks ?? 8;
  const { ops, hierarchical, ...rest } = over;
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
    races: true,
    rankOverrides: [],
    ...rest,
    hierarchical: { intra: "auto", inter: "auto", slices: 1, ...hierarchical },
    ops: ops.map((o) => ({ stream: 0, priorityClass: 0, ...o })),
  };
}

export const trn1 = loadDevice("trn1");
export const ideal = loadDevice("ideal");

const silent = pino({ level: "silent" });

/** Run a scenario end to end: every op completes, its values check, and (if named) it took `algorithm`. */
export function expectRunChecks(scn: Scenario, spec: DeviceSpec, algorithm?: string): void {
  const out = runScenario(scn, spec, silent);
  expect(out.kind).toBe("done");
  if (out.kind !== "done") return;
  for (const o of out.ops) {
    if (algorithm !== undefined) expect(o.row.algorithm).toBe(algorithm);
    expect(o.mismatch).toBeUndefined();
    expect(o.violations).toEqual([]);
  }
}

/** Property-test arbitraries: the three collectives, and every dtype. */
export const collectiveOp = fc.constantFrom("all-gather", "all-reduce", "reduce-scatter") as fc.Arbitrary<OpName>;
export const anyDtype = fc.constantFrom(...DTYPES);

/** The CcsimError `fn` is refused with (any other outcome fails the test). */
export function refusal(fn: () => unknown): CcsimError {
  try {
    fn();
  } catch (e) {
    if (e instanceof CcsimError) return e;
    throw e;
  }
  throw new Error("not refused");
}
