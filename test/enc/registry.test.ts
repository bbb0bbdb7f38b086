// The algorithm registry: one entry per enc_alg_type, the seed's precedence, and the facts the
// composer reads from it.
import { describe, expect, it } from "vitest";
import { EncAlgType, EncPattern } from "../../src/ir/enums.ts";
import { ALG_NAMES } from "../../src/ir/spec.ts";
import { ALGORITHMS, builtAlgorithms, meshFamily, precedenceOrder, tapeSemaphores } from "../../src/enc/registry.ts";
import { rdhStepSemas } from "../../src/enc/rdh.ts";
import { GATES } from "../../src/enc/stage.ts";

describe("algorithm registry", () => {
  it("has one entry per enc_alg_type 0..10, in enum order, named as scenarios name it", () => {
    expect(ALGORITHMS.map((e) => e.alg)).toEqual(Array.from({ length: 11 }, (_, i) => i));
    expect(ALGORITHMS.map((e) => e.label)).toEqual([...ALG_NAMES]);
  });

  it("orders the cascade as the seed does: HIER > INTRA_RDH > MESH > KANGARING > SINGLE_CYCLE_RING > INTER_RDH > RING", () => {
    expect(precedenceOrder().map((e) => e.alg)).toEqual([EncAlgType.HIER, EncAlgType.INTRA_RDH, EncAlgType.MESH, EncAlgType.KANGARING, EncAlgType.SINGLE_CYCLE_RING, EncAlgType.INTER_RDH, EncAlgType.RING]);
    // Every gate stands for exactly one cascade entry; RING has none.
    for (const g of GATES) expect(precedenceOrder().filter((e) => e.gate === g)).toHaveLength(1);
    expect(precedenceOrder().at(-1)!.gate).toBeUndefined();
  });

  it("names the mesh family, the device pattern of each family, and what this build composes", () => {
    expect(meshFamily()).toEqual([EncAlgType.MESH, EncAlgType.SINGLE_STEP_MESH, EncAlgType.TWO_STEP_POD_MESH, EncAlgType.LATENCY_OPT_MESH, EncAlgType.BW_OPT_MESH]);
    for (const e of ALGORITHMS) expect(e.pattern).toBe(e.program === "mesh-tape" ? EncPattern.MESH : EncPattern.RING);
    expect(builtAlgorithms()).toEqual(expect.arrayContaining([EncAlgType.RING, EncAlgType.HIER, EncAlgType.MESH, EncAlgType.KANGARING, EncAlgType.SINGLE_CYCLE_RING, EncAlgType.INTRA_RDH, EncAlgType.INTER_RDH]));
  });

  it("reserves the largest mesh-tape semaphore need: RDH's step semaphores over the mesh's four", () => {
    expect(tapeSemaphores(2)).toBe(4 + rdhStepSemas(2));
    expect(tapeSemaphores(12)).toBe(4 + rdhStepSemas(8));
    expect(tapeSemaphores(64)).toBe(4 + rdhStepSemas(64));
  });
});
