// The mesh family on the device: timing against the alpha-beta form of its event schedule, routed
// over-subscription on a ring, golden bytes, hang reports, and random configurations checked.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { compileProgram } from "../../src/enc/compile.ts";
import { loadDevice } from "../../src/run/load.ts";
import { decodeSpadCtrlEntry } from "../../src/encd/ccop.ts";
import { decodeMeshEvent, MeshEventType } from "../../src/encd/mesh-event.ts";
import { hex } from "../../src/encd/bits.ts";
import { DESC_BYTES } from "../../src/encd/udma.ts";
import { EncAlgType, EncPattern } from "../../src/ir/enums.ts";
import { DTYPES, dtypeSize } from "../../src/ir/dtypes.ts";
import type { DeviceSpec, OpName } from "../../src/ir/spec.ts";
import { simulate, formatHang } from "../../sim/index.ts";
import { Fabric } from "../../sim/hw/fabric.ts";
import { dropFirstRemoteSemaInc } from "../helpers-image.ts";
import { expectRunChecks, ideal, scenario, trn1 } from "../helpers.ts";
import { expectGolden } from "../golden.ts";

const idealMesh = loadDevice("ideal-mesh");
const alpha = idealMesh.link.latencyPs;
const beta = 1e12 / idealMesh.link.bytesPerSecond;
const MESH = [EncAlgType.RING, EncAlgType.MESH];

function meshScenario(instance: string, op: OpName, n: number, S: number) {
  return scenario({ instance, ranks: n, algorithm: "mesh", allowedAlgorithms: [EncAlgType.MESH], channels: 1, check: "none", ops: [{ op, bytes: S, dtype: "fp32", reduce: "sum" }] });
}
function simTime(spec: DeviceSpec, op: OpName, n: number, S: number): number {
  const { image, layout } = compileProgram(meshScenario(spec.name, op, n, S), spec, [0]);
  expect(layout.ops[0]!.algorithm).toBe(EncAlgType.MESH);
  const r = simulate(spec, image, { storePayload: false });
  expect(r.hang).toBeUndefined();
  return r.opEndPs[0]!;
}

/**
 * The event schedule on a fully connected machine with an engine per peer: the handshake (one
 * 4-byte write per peer, alpha), then the broadcast (a block S/n to every peer at once, then its
 * 4-byte signal: (S/n)beta + alpha); completion is local.
 */
const meshForm = (n: number, S: number) => 2 * alpha + (S / n) * beta + 8 * beta;

describe("mesh on the fully connected ideal machine", () => {
  for (const op of ["all-gather", "all-to-all"] as const) {
    for (const n of [2, 4, 8, 16]) {
      it.each([1 << 16, 1 << 20, 1 << 26])(`${op} n=${n} S=%i agrees with 2α + (S/n)β within 1%`, (S) => {
        expect(Math.abs(simTime(idealMesh, op, n, S) / meshForm(n, S) - 1)).toBeLessThan(0.01);
      });
    }
  }
  it("tends to (S/n)β for large S", () => {
    for (const n of [2, 8, 16]) {
      const S = 1 << 26;
      expect(simTime(idealMesh, "all-gather", n, S) / ((S / n) * beta)).toBeLessThan(1.02);
    }
  });
});

describe("single-step mesh on the fully connected ideal machine", () => {
  const ssm = (n: number, S: number) => scenario({ instance: "ideal-mesh", ranks: n, algorithm: "single-step-mesh", allowedAlgorithms: [EncAlgType.SINGLE_STEP_MESH], channels: 1, check: "none", ops: [{ op: "all-reduce", bytes: S, dtype: "fp32", reduce: "sum" }] });
  /** Handshake (alpha), then every rank's whole buffer to every peer at once ((S)beta + alpha), its 4-byte signal; the reduce is free. */
  const ssmForm = (S: number) => 2 * alpha + S * beta + 8 * beta;
  for (const n of [2, 4, 8, 16]) {
    it.each([1 << 16, 1 << 20, 1 << 24])(`all-reduce n=${n} S=%i agrees with 2α + Sβ within 1%`, (S) => {
      const { image, layout } = compileProgram(ssm(n, S), idealMesh, [0]);
      expect(layout.ops[0]!.algorithm).toBe(EncAlgType.SINGLE_STEP_MESH);
      const r = simulate(idealMesh, image, { storePayload: false });
      expect(Math.abs(r.opEndPs[0]! / ssmForm(S) - 1)).toBeLessThan(0.01);
    });
  }
  it("moves (n-1)·n·S bytes over the links, against the two-step mesh's 2(n-1)·S", () => {
    const n = 8;
    const S = 1 << 20;
    const linkBytes = (scn: ReturnType<typeof ssm>) => {
      const { image } = compileProgram(scn, idealMesh, [0]);
      const r = simulate(idealMesh, image, { storePayload: false });
      return r.links.reduce((a, l) => a + l.bytes, 0);
    };
    const one = linkBytes(ssm(n, S));
    const two = linkBytes(scenario({ instance: "ideal-mesh", ranks: n, algorithm: "mesh", allowedAlgorithms: [EncAlgType.MESH], channels: 1, check: "none", ops: [{ op: "all-reduce", bytes: S, dtype: "fp32", reduce: "sum" }] }));
    // Payload plus the handshake / signal words (a few bytes per peer).
    expect(one / ((n - 1) * n * S)).toBeGreaterThan(1);
    expect(one / ((n - 1) * n * S)).toBeLessThan(1.001);
    expect(two / (2 * (n - 1) * S)).toBeGreaterThan(1);
    expect(two / (2 * (n - 1) * S)).toBeLessThan(1.001);
  });
});

describe("mesh on a ring: routed traffic over-subscribes links", () => {
  it.each([4, 8, 16])("n=%i: slower by the busiest link's load in blocks, within 5%", (n) => {
    const S = 1 << 26;
    const fabric = new Fabric(ideal, n);
    const load = new Map<string, number>();
    for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) if (i !== j) for (const l of fabric.route(i, j)) load.set(l.name, (load.get(l.name) ?? 0) + 1);
    const predicted = Math.max(...load.values());
    for (const op of ["all-gather", "all-to-all"] as const) {
      const ratio = simTime(ideal, op, n, S) / simTime(idealMesh, op, n, S);
      expect(Math.abs(ratio / predicted - 1), `${op}: ratio ${ratio}, predicted ${predicted}`).toBeLessThan(0.05);
    }
  });
});

describe("mesh wire bytes", () => {
  const { image } = compileProgram(meshScenario("trn1", "all-gather", 4, 4096), trn1, [0]);
  const t = image.devices[0]!.topsps[0]!;
  it("golden: the MESH cc_op_entry carries algo_type 1, FULL_MESH, and the {sema_shift_offset, sema_mask} union", () => {
    expect(hex(t.ctrlSpad.subarray(0, 8))).toBe("01 01 01 00 00 00 ff ff");
    const e = decodeSpadCtrlEntry(t.ctrlSpad, 0);
    expect([e.algoType, e.algoSubType, e.semaShiftOffset, e.semaMask]).toEqual([EncPattern.MESH, 0, 0, 0xffff]);
  });
  it("golden: the tape (first / handshake / broadcast / sync / last) and the handshake leg's descriptors", () => {
    const evs = [0, 1, 2, 3, 4].map((i) => decodeMeshEvent(t.meshConfig, i));
    expect(evs.map((e) => [e.eventType, e.waitEvent, e.dmaTrigger])).toEqual([
      [MeshEventType.FUNCTION_BARRIER_FIRST_COLL, false, false],
      [MeshEventType.LOCAL_HNDSHK, false, true],
      [MeshEventType.INTER_GRP_BRDCST, true, true],
      [MeshEventType.SYNC, true, true],
      [MeshEventType.FUNCTION_BARRIER_LAST_COLL, true, false],
    ]);
    expectGolden("mesh-ag4-rank0-event1.hex", hex(t.meshConfig.subarray(80, 160)) + "\n");
    // The handshake leg: one 4-byte write of the constant word to a peer's handshake semaphore INC window.
    const q = image.devices[0]!.queues.find((x) => x.engine === 4)!;
    expect(hex(q.tx.subarray(0, DESC_BYTES))).toBe("04 00 00 4d 03 00 08 01 00 00 00 00 00 00 00 00");
    expect(hex(q.rx.subarray(0, DESC_BYTES))).toBe("04 00 00 01 00 00 00 00 18 18 00 80 82 00 03 00");
  });
  it("a dropped handshake hangs the peer at its mesh event, named in the report", () => {
    const { image: img } = compileProgram(meshScenario("trn1", "all-gather", 4, 4096), trn1, [0]);
    dropFirstRemoteSemaInc(img, 0);
    const r = simulate(trn1, img, { storePayload: false });
    expect(r.hang).toBeDefined();
    expect(formatHang(r.hang!).join("\n")).toMatch(/dev1 topsp0 mesh tape waits on dev1:topsp0:sem6 \(mesh event 2\): value 2, awaiting >= 3/);
  });
});

describe("random mesh configurations", () => {
  it("complete and check on trn1", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(2, 3, 4, 8, 16),
        fc.constantFrom("all-gather", "all-reduce", "reduce-scatter", "all-to-all") as fc.Arbitrary<OpName>,
        fc.constantFrom(...DTYPES),
        fc.integer({ min: 1, max: 600 }),
        fc.integer({ min: 1, max: 4 }),
        (n, op, dtype, elems, channels) => {
          const bytes = elems * n * dtypeSize(dtype);
          const scn = scenario({ ranks: n, algorithm: "auto", allowedAlgorithms: MESH, channels, ops: [{ op, bytes, dtype, reduce: "sum" }] });
          expectRunChecks(scn, trn1);
        },
      ),
      { numRuns: 40, seed: 7 },
    );
  });
});

describe("random single-step mesh configurations", () => {
  it("complete and check on trn1 (all-reduce within the subtype's window, all-gather and reduce-scatter)", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(2, 3, 4, 8, 16),
        fc.constantFrom("all-gather", "all-reduce", "reduce-scatter") as fc.Arbitrary<OpName>,
        fc.constantFrom(...DTYPES),
        fc.integer({ min: 1, max: 300 }),
        (n, op, dtype, elems) => {
          const bytes = Math.min(elems * n, Math.floor(32768 / dtypeSize(dtype) / n) * n) * dtypeSize(dtype);
          const scn = scenario({ ranks: n, algorithm: "single-step-mesh", allowedAlgorithms: [EncAlgType.RING, EncAlgType.SINGLE_STEP_MESH], ops: [{ op, bytes, dtype, reduce: "sum" }] });
          const { layout } = compileProgram(scn, trn1, [0]);
          expect(layout.ops[0]!.algorithm).toBe(EncAlgType.SINGLE_STEP_MESH);
          expectRunChecks(scn, trn1);
        },
      ),
      { numRuns: 30, seed: 11 },
    );
  });
});

describe("routing", () => {
  it("takes shortest paths in dimension order on the trn1 torus (X, then Y)", () => {
    const f = new Fabric(trn1, 16);
    expect(f.route(0, 5).map((l) => l.name)).toEqual(["link 0->1", "link 1->5"]);
    // Two hops each way in both dimensions: X first (left before right on ties), then Y (up before down).
    expect(f.route(0, 10).map((l) => l.name)).toEqual(["link 0->3", "link 3->2", "link 2->14", "link 14->10"]);
    expect(f.route(0, 3).map((l) => l.name)).toEqual(["link 0->3"]); // the torus wrap
    expect(f.route(7, 7)).toEqual([]);
  });
});

describe("mesh folds: fewer peers than engines", () => {
  const withFolds = (k: number): DeviceSpec => ({ ...trn1, collectives: { ...trn1.collectives, meshFolds: k } });
  const two = (op: OpName, bytes: number, dtype: "fp32" | "bf16" = "fp32") =>
    scenario({ ranks: 2, ranksPerDevice: 2, algorithm: "mesh", allowedAlgorithms: [EncAlgType.MESH], ops: [{ op, bytes, dtype, reduce: "sum" }] });

  it.each(["all-reduce", "all-gather", "reduce-scatter", "all-to-all"] as OpName[])("a 2-rank %s spread over trn1's 4 folds checks its values, on 4 engines a rank", (op) => {
    expect(trn1.collectives.meshFolds).toBe(4);
    expectRunChecks(two(op, 4 * 2 * 1000 * 4 + 8), trn1, "mesh");
    const { image } = compileProgram(two(op, 1 << 20), trn1, [0]);
    // Each rank's mesh program: its 4 engines, after the 4 of its two ring channels.
    const meshQueues = image.devices[0]!.queues.filter((q) => q.tx.length > 0 && (q.engine % 16) >= 4);
    expect(new Set(meshQueues.map((q) => q.engine)).size).toBe(8);
  });

  it("three folds move a 2-rank all-reduce about three times as fast as one engine per peer", () => {
    const time = (k: number) => {
      const spec = withFolds(k);
      const r = simulate(spec, compileProgram({ ...two("all-reduce", 16 << 20), check: "none" }, spec, [0]).image, { storePayload: false });
      expect(r.hang).toBeUndefined();
      return r.opEndPs[0]!;
    };
    const ratio = time(1) / time(3);
    expect(ratio).toBeGreaterThan(2.5);
    expect(ratio).toBeLessThan(3.1);
  });

  it("more peers than folds: one engine per peer as before (8 ranks keep 7 engines with 4 folds)", () => {
    const scn = scenario({ ranks: 8, algorithm: "mesh", allowedAlgorithms: [EncAlgType.MESH], check: "none", ops: [{ op: "all-gather", bytes: 8 << 10, dtype: "fp32", reduce: "sum" }] });
    const a = simulate(trn1, compileProgram(scn, trn1, [0]).image, { storePayload: false });
    const b = simulate(withFolds(1), compileProgram(scn, withFolds(1), [0]).image, { storePayload: false });
    expect(a.opEndPs).toEqual(b.opEndPs);
  });
});
