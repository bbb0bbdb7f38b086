// The composer front end as the seed specifies it: comm init, the six-gate battery, the precedence,
// the 13-case dispatch, the operation record, op signatures, the two algorithm axes, the cc-op
// validate pass. Each test is named after the seed statement it checks.
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import pino from "pino";
import { CommType, EncAlgType, EncOpType, EncPattern, ENC_ALG_NAME, MetaringType } from "../../src/ir/enums.ts";
import { algTypeOf, type AlgName, type OpName } from "../../src/ir/spec.ts";
import { ccAlgorithmAllowed, initComm, RDH_WITHOUT_MESH, allowedMask } from "../../src/enc/algorithms.ts";
import { checkSignatures, GATES, opSignature, postOperations, type Gate } from "../../src/enc/post.ts";
import { compileProgram, explainScenario } from "../../src/enc/compile.ts";
import { validateCcops, MUST_INCREMENT } from "../../src/encd/validate.ts";
import { decodeSpadCtrlEntry } from "../../src/encd/ccop.ts";
import { decodeTx, DESC_BYTES } from "../../src/encd/udma.ts";
import { parseScenario } from "../../src/scenario/index.ts";
import { runScenario } from "../../src/run/pipeline.ts";
import { main } from "../../src/cli/sim.ts";
import { ideal, scenario, trn1, type LooseOp } from "../helpers.ts";
import { loadDevice } from "../../src/run/load.ts";
import type { CommContext } from "../../src/enc/stage.ts";
import { dispatch, resolveAlgorithm, runGates } from "../../src/enc/gates.ts";

const ctx = (over: Partial<CommContext> = {}): CommContext => ({
  commType: CommType.INTRA,
  rankN: 8,
  nodeN: 1,
  localRankN: 8,
  deviceN: 8,
  podN: 1,
  vcoreSize: 1,
  multiStream: false,
  allowedBits: allowedMask([...Array(11).keys()] as EncAlgType[]),
  meshSupported: true,
  podEnabled: false,
  neuronSwitch: false,
  srcTargetPairsId: -1,
  hierarchicalCc: 0,
  rdhCcMode: 1,
  dbg: 0,
  ...over,
});
const algs = (...names: AlgName[]) => names.map(algTypeOf);
const op = (o: OpName, bytes = 4096): LooseOp => ({ op: o, bytes, dtype: "fp32", reduce: "sum" });
const auto = (over: Parameters<typeof scenario>[0]) => scenario({ algorithm: "auto", allowedAlgorithms: undefined, ...over });
const none = { warn: () => {} };

describe("comm init: 'If any MESH-family algorithm is allowed it takes the mesh path; otherwise it falls to RING / KANGARING'", () => {
  it("polls every enc_alg_type's gate and picks the family", () => {
    expect(initComm(ctx({ allowedBits: allowedMask(algs("ring", "single-step-mesh")) }), none.warn).family).toBe("mesh");
    expect(initComm(ctx({ allowedBits: allowedMask(algs("ring", "kangaring")) }), none.warn).family).toBe("ring/kangaring");
    expect(initComm(ctx(), none.warn).allowed).toHaveLength(11);
  });

  it("'Detected usage of RDH while mesh is not allowed. RDH construction will be skipped because it depends on Mesh.'", () => {
    const warnings: string[] = [];
    const init = initComm(ctx({ allowedBits: allowedMask(algs("ring", "intra-rdh")) }), (m) => warnings.push(m));
    expect(warnings).toEqual([RDH_WITHOUT_MESH]);
    expect(RDH_WITHOUT_MESH).toBe("Detected usage of RDH while mesh is not allowed. RDH construction will be skipped because it depends on Mesh.");
    expect(init.rdhSkipped).toBe(true);
    expect(init.allowed[EncAlgType.INTRA_RDH]!.verdict.ok).toBe(false);
  });

  it("warns when the scenario allows an algorithm the preset does not support (it cannot be chosen)", () => {
    const { warnings, layout } = compileProgram(scenario({ instance: "ideal", ranks: 4, nodes: 1, algorithm: "hier", allowedAlgorithms: [EncAlgType.HIER], ops: [op("all-reduce")] }), ideal, [0]);
    expect(warnings).toContain("ideal does not support HIER (1): not allowed in this run, so ops fall back to what the gates admit (RING at last)");
    expect(layout.ops[0]!.algorithm).toBe(EncAlgType.RING);
  });

  it("logs that line through the run's logger, and the op still runs on the ring", () => {
    let logged = "";
    const log = pino({ level: "warn", base: null, timestamp: false }, new Writable({ write: (c, _e, cb) => ((logged += String(c)), cb()) }));
    const out = runScenario(auto({ ranks: 4, allowedAlgorithms: algs("ring", "intra-rdh"), ops: [op("all-reduce")] }), trn1, log);
    expect(out.kind).toBe("done");
    expect(JSON.parse(logged.trim().split("\n")[0]!).msg).toBe(RDH_WITHOUT_MESH);
  });

  it("a scenario's named algorithm is the only one allowed; the default is what the instance supports", () => {
    const s = parseScenario("s.json", { name: "x", instance: "trn1", ranks: 2, algorithm: "ring", ops: [{ op: "all-reduce", bytes: 8, dtype: "fp32" }] });
    expect(s.allowedAlgorithms).toEqual([EncAlgType.RING]);
    const a = parseScenario("s.json", { name: "x", instance: "trn1", ranks: 2, ops: [{ op: "all-reduce", bytes: 8, dtype: "fp32" }] });
    expect(a.allowedAlgorithms).toBeUndefined();
    const p = postOperations({ scn: auto({ ranks: 2, ops: [op("all-reduce", 1 << 20)] }), spec: trn1, channels: 1, chunkBytes: 65536 });
    expect(p.explain[0]!.commInit.allowed.filter((x) => x.verdict.ok).map((x) => x.alg)).toContain(EncAlgType.MESH);
  });
});

describe("admission gates: 'bit (alg + 11*comm_type) of cc_allowed_alg_types must be set; then the per-alg conditions'", () => {
  it("the allowed bit comes first", () => {
    expect(ccAlgorithmAllowed(ctx({ allowedBits: 0n }), EncAlgType.RING).reason).toMatch(/bit 0 of cc_allowed_alg_types is clear/);
    expect(ccAlgorithmAllowed(ctx({ commType: CommType.INTER, allowedBits: allowedMask([EncAlgType.RING]) }), EncAlgType.RING).ok).toBe(true);
  });
  it("KANGARING: (vcore_size == 2 and rank_n > 4) or (vcore_size == 1 and rank_n > 8); intra only; not multi-stream", () => {
    expect(ccAlgorithmAllowed(ctx({ rankN: 8 }), EncAlgType.KANGARING).ok).toBe(false);
    expect(ccAlgorithmAllowed(ctx({ rankN: 16 }), EncAlgType.KANGARING).ok).toBe(true);
    expect(ccAlgorithmAllowed(ctx({ rankN: 5, vcoreSize: 2 }), EncAlgType.KANGARING).ok).toBe(true);
    expect(ccAlgorithmAllowed(ctx({ rankN: 16, multiStream: true }), EncAlgType.KANGARING).reason).toBe("multi-stream");
    expect(ccAlgorithmAllowed(ctx({ rankN: 16, commType: CommType.INTER }), EncAlgType.KANGARING).ok).toBe(false);
  });
  it("SINGLE_CYCLE_RING: INTER only, node_n > 1, rank_n == node_n; INTER_RDH: rank_n a power of two above 7", () => {
    expect(ccAlgorithmAllowed(ctx(), EncAlgType.SINGLE_CYCLE_RING).reason).toBe("INTER comm only");
    expect(ccAlgorithmAllowed(ctx({ commType: CommType.INTER, nodeN: 8, rankN: 8, localRankN: 1 }), EncAlgType.SINGLE_CYCLE_RING).ok).toBe(true);
    expect(ccAlgorithmAllowed(ctx({ commType: CommType.INTER, nodeN: 8, rankN: 8, localRankN: 1 }), EncAlgType.INTER_RDH).ok).toBe(true);
    expect(ccAlgorithmAllowed(ctx({ commType: CommType.INTER, nodeN: 6, rankN: 6, localRankN: 1 }), EncAlgType.INTER_RDH).ok).toBe(false);
  });
  it("HIER: INTER comm, local_rank_n > 1, node_n * local_rank_n == rank_n; INTRA_RDH needs rdh_cc_mode", () => {
    expect(ccAlgorithmAllowed(ctx({ commType: CommType.INTER, nodeN: 2, rankN: 16, localRankN: 8 }), EncAlgType.HIER).ok).toBe(true);
    expect(ccAlgorithmAllowed(ctx({ commType: CommType.INTER, nodeN: 2, rankN: 2, localRankN: 1 }), EncAlgType.HIER).ok).toBe(false);
    expect(ccAlgorithmAllowed(ctx({ rdhCcMode: 0 }), EncAlgType.INTRA_RDH).reason).toBe("rdh_cc_mode == 0");
  });
  it("mesh subtypes' size windows, per rank: t1 min(0x8000, per_group); t0 (one node, two ranks) 0x10000000", () => {
    const init = initComm(ctx(), none.warn);
    // 8 ranks: 32 KiB per rank is 256 KiB of all-reduce.
    expect(runGates(init, ctx(), trn1, EncOpType.ALLREDUCE, 8 * 32768).find((g) => g.gate === "mesh")!.verdict.ok).toBe(true);
    expect(runGates(init, ctx(), trn1, EncOpType.ALLREDUCE, 8 * 32768 + 8).find((g) => g.gate === "mesh")!.verdict.reason).toMatch(/32769 bytes per rank is above the mesh subtype's op_max_limit \(32768\)/);
    const two = ctx({ rankN: 2, localRankN: 2 });
    expect(runGates(initComm(two, none.warn), two, trn1, EncOpType.ALLREDUCE, 1 << 29).find((g) => g.gate === "mesh")!.verdict.ok).toBe(true);
    expect(runGates(initComm(two, none.warn), two, trn1, EncOpType.ALLREDUCE, (1 << 29) + 8).find((g) => g.gate === "mesh")!.verdict.ok).toBe(false);
  });
});

describe("postOperation: 'every enc_can_post_* gate runs unconditionally before the precedence cascade'", () => {
  it("all six gates report a verdict for every op, feasible or not", () => {
    const p = postOperations({ scn: auto({ ranks: 16, ops: [op("all-reduce", 1024), op("all-gather", 1 << 20)] }), spec: trn1, channels: 1, chunkBytes: 65536 });
    for (const e of p.explain) expect(e.gates.map((g) => g.gate)).toEqual([...GATES]);
    // The first op: mesh (small), kangaring (16 ranks) and intra RDH are all feasible at once.
    const feasible = p.explain[0]!.gates.filter((g) => g.verdict.ok).map((g) => g.gate);
    expect(feasible).toEqual(["kangaring", "mesh", "intra_rdh"]);
    expect(p.explain[0]!.resolved).toEqual({ value: EncAlgType.INTRA_RDH, name: "RDH" });
  }, 0);

  it("on trn2 (64 ranks, 4 per chip) the per-rank windows move all-reduce from mesh to RDH to kangaring as it grows", () => {
    const trn2 = loadDevice("trn2");
    // Mesh up to 32 KiB per rank, RDH from 32769 B to 896 KiB per rank (56 MiB over 64 ranks).
    const sizes = [2 << 20, (2 << 20) + 256, 56 << 20, (56 << 20) + 256];
    const scn = { ...auto({ ranks: 64, ops: sizes.map((b) => op("all-reduce", b)) }), instance: "trn2", ranksPerDevice: 4, allowedAlgorithms: undefined };
    const resolved = explainScenario(scn, trn2).map((e) => e.resolved.value);
    expect(resolved).toEqual([EncAlgType.MESH, EncAlgType.INTRA_RDH, EncAlgType.INTRA_RDH, EncAlgType.KANGARING]);
    const rdh = explainScenario(scn, trn2)[3]!.gates.find((g) => g.gate === "intra_rdh")!.verdict;
    expect(rdh.reason).toBe(`917508 bytes per rank is outside the RDH subtype's window [32769, 917504]`);
  });

  it("trn2 -r 16 (4 chips of 4) picks what the published --show-algorithm column shows: mesh at 128 KiB, RDH at 2 MiB, kangaring at 32 MiB", () => {
    const trn2 = loadDevice("trn2");
    const scn = { ...auto({ ranks: 16, ops: [128 << 10, 2 << 20, 32 << 20].map((b) => op("all-reduce", b)) }), instance: "trn2", ranksPerDevice: 4, allowedAlgorithms: undefined };
    expect(explainScenario(scn, trn2).map((e) => e.resolved.value)).toEqual([EncAlgType.MESH, EncAlgType.INTRA_RDH, EncAlgType.KANGARING]);
  });

  it("'HIER > INTRA_RDH > MESH > KANGARING > SINGLE_CYCLE_RING > INTER_RDH > RING': precedence, not the battery order, decides", () => {
    const can = (...g: Gate[]) => Object.fromEntries(GATES.map((x) => [x, g.includes(x)])) as Record<Gate, boolean>;
    expect(resolveAlgorithm(can("kangaring", "mesh"))).toBe(EncAlgType.MESH);
    expect(resolveAlgorithm(can("kangaring", "inter_rdh"))).toBe(EncAlgType.KANGARING);
    expect(resolveAlgorithm(can("single_cycle_ring", "inter_rdh"))).toBe(EncAlgType.SINGLE_CYCLE_RING);
    expect(resolveAlgorithm(can("intra_rdh", "mesh", "kangaring"))).toBe(EncAlgType.INTRA_RDH);
    expect(resolveAlgorithm(can())).toBe(EncAlgType.RING);
  });

  it("'hierarchical wins only when no flat-ring family is feasible'", () => {
    const can = (...g: Gate[]) => Object.fromEntries(GATES.map((x) => [x, g.includes(x)])) as Record<Gate, boolean>;
    expect(resolveAlgorithm(can("hierarchical"))).toBe(EncAlgType.HIER);
    expect(resolveAlgorithm(can("hierarchical", "kangaring"))).toBe(EncAlgType.KANGARING);
    expect(resolveAlgorithm(can("hierarchical", "inter_rdh"))).toBe(EncAlgType.HIER);
    expect(resolveAlgorithm(can("hierarchical"), true)).toBe(EncAlgType.RING);
  });

  it("the mesh slot runs the first mesh-family member the gate admits: MESH, then SINGLE_STEP_MESH", () => {
    const resolved = (allowed: AlgName[], bytes: number, o: OpName = "all-reduce") => explainScenario(auto({ ranks: 16, allowedAlgorithms: algs(...allowed), ops: [op(o, bytes)] }), trn1)[0]!;
    // auto (both allowed): the two-step mesh.
    expect(resolved(["ring", "mesh", "single-step-mesh"], 16384).resolved.value).toBe(EncAlgType.MESH);
    // The single-step mesh where MESH is not allowed, its gate reason naming it.
    const e = resolved(["ring", "single-step-mesh"], 16384);
    expect([e.resolved.value, e.resolved.name]).toEqual([EncAlgType.SINGLE_STEP_MESH, "Single Step Mesh"]);
    expect(e.gates.find((g) => g.gate === "mesh")!.verdict.reason).toMatch(/^single-step-mesh: 16384 bytes per peer/);
    // Its window is on what a peer sends: the whole buffer of an all-reduce, a block of an all-gather.
    const big = resolved(["ring", "single-step-mesh"], 65536);
    expect(big.resolved.value).toBe(EncAlgType.RING);
    expect(big.gates.find((g) => g.gate === "mesh")!.verdict.reason).toMatch(/single-step-mesh subtype's op_max_limit \(32768\)/);
    expect(resolved(["ring", "single-step-mesh"], 65536, "all-gather").resolved.value).toBe(EncAlgType.SINGLE_STEP_MESH);
    // All-to-all has only MESH: without it the handler refuses.
    expect(() => compileProgram(auto({ ranks: 8, allowedAlgorithms: algs("ring", "single-step-mesh"), ops: [op("all-to-all", 8192)] }), trn1, [0])).toThrow(/alltoall cannot be supported without Mesh algorithm, rank_n\(8\); the mesh gate said no: single-step-mesh: single-step-mesh does not serve op_type 7$/);
  });

  it("all-to-all beside another stream: the refusal says why the mesh is not there (MESH's own reason: several streams), not only that it is not", () => {
    const scn = { ...auto({ ranks: 8, concurrent: true, ops: [{ ...op("all-reduce"), stream: 0 }, { ...op("all-to-all", 8192), stream: 1 }] }) };
    expect(() => compileProgram(scn, trn1, [1])).toThrow(/alltoall cannot be supported without Mesh algorithm, rank_n\(8\); the mesh gate said no: comm init built no mesh family \(no mesh algorithm allowed; MESH: mesh does not work with multiple streams\)$/);
    // Alone, the same op goes to the mesh.
    expect(() => compileProgram(auto({ ranks: 8, ops: [op("all-to-all", 8192)] }), trn1, [0])).not.toThrow();
  });

  it("all-to-all needs a DMA engine for its mesh program: ring channels that take them all leave the runtime's refusal, not a composer error", () => {
    const lnc1 = loadDevice("trn2-lnc1");
    const scn = { ...auto({ ranks: 16, channels: 4, ops: [op("all-to-all", 16 * 64)] }), instance: "trn2-lnc1", ranksPerDevice: 8 };
    const e = explainScenario(scn, lnc1)[0]!;
    expect(e.gates.find((g) => g.gate === "mesh")!.verdict.reason).toMatch(/none is left for a mesh-tape program \[CMP1306\]/);
    expect(() => compileProgram(scn, lnc1, [0])).toThrow(/alltoall cannot be supported without Mesh algorithm, rank_n\(16\); the mesh gate said no: .*none is left for a mesh-tape program \[CMP1306\]$/);
  });

  it("a handler that does not take the resolved algorithm fails with 'not supported yet' naming it, never a silent fallback", () => {
    expect(() => dispatch(EncOpType.SEND, EncAlgType.TWO_STEP_POD_MESH, 16, "p")).toThrow('algorithm 8 TWO_STEP_POD_MESH ("UltraServer Mesh") for point-to-point is not supported yet');
    expect(() => dispatch(EncOpType.PERMUTE, EncAlgType.LATENCY_OPT_MESH, 16, "p")).toThrow('algorithm 9 LATENCY_OPT_MESH ("Mesh") in the permute handler is not supported yet');
    // Every family of the roster composes the collectives now.
    for (let a = 0; a <= 10; a++) expect(() => dispatch(EncOpType.ALLREDUCE, a as EncAlgType, 16, "p")).not.toThrow();
    // A gate knows its composer's limits: 6 ranks have no intra RDH schedule, so auto goes on down the cascade.
    expect(compileProgram(auto({ ranks: 6, allowedAlgorithms: algs("ring", "mesh", "intra-rdh"), ops: [op("all-reduce", 1 << 20)] }), trn1, [0]).layout.ops[0]!.algorithm).toBe(EncAlgType.RING);
    // Where no other family is feasible the cascade's own last rule is the ring.
    expect(compileProgram(auto({ ranks: 4, allowedAlgorithms: algs("ring", "mesh"), ops: [op("all-reduce", 1 << 20)] }), trn1, [0]).layout.ops[0]!.algorithm).toBe(EncAlgType.RING);
    // Intra RDH outranks mesh and kangaring; kangaring outranks the ring.
    expect(compileProgram(auto({ ranks: 16, ops: [op("all-reduce", 1024)] }), trn1, [0]).layout.ops[0]!.algorithm).toBe(EncAlgType.INTRA_RDH);
    expect(compileProgram(auto({ ranks: 16, allowedAlgorithms: algs("ring", "kangaring"), ops: [op("all-reduce", 1 << 20)] }), trn1, [0]).layout.ops[0]!.algorithm).toBe(EncAlgType.KANGARING);
  });
});

describe("the 13-case enc_op_type dispatch", () => {
  it("BROADCAST / REDUCE land on the unsupported default", () => {
    expect(() => dispatch(EncOpType.BROADCAST, EncAlgType.RING, 8, "p")).toThrow("not supported operation (op_type 2)");
    expect(() => dispatch(EncOpType.REDUCE, EncAlgType.RING, 8, "p")).toThrow("not supported operation (op_type 3)");
  });
  it("ALLTOALL / ALLTOALL_V assert alg == ENC_ALG_MESH: ring-only fails with the seed's message and the rank count", () => {
    for (const t of [EncOpType.ALLTOALL, EncOpType.ALLTOALL_V]) expect(() => dispatch(t, EncAlgType.RING, 8, "p")).toThrow("alltoall cannot be supported without Mesh algorithm, rank_n(8)");
    expect(() => dispatch(EncOpType.ALLTOALL_V, EncAlgType.MESH, 8, "p")).not.toThrow();
  });
  it("the implicit permutes alias the explicit handlers: four opcodes onto two composer bodies", () => {
    const msg = (t: EncOpType) => {
      try {
        dispatch(t, EncAlgType.MESH, 8, "p");
      } catch (e) {
        return (e as Error).message;
      }
      return "";
    };
    expect(msg(EncOpType.PERMUTE_IMPLICIT)).toBe(msg(EncOpType.PERMUTE));
    expect(msg(EncOpType.PERMUTE_REDUCE_IMPLICIT)).toBe(msg(EncOpType.PERMUTE_REDUCE));
    expect(msg(EncOpType.PERMUTE)).toMatch(/in the permute handler/);
    expect(msg(EncOpType.PERMUTE_REDUCE)).toMatch(/in the permute-reduce handler/);
    for (const t of [EncOpType.SEND, EncOpType.RECV, EncOpType.PERMUTE, EncOpType.PERMUTE_REDUCE_IMPLICIT, EncOpType.ALLREDUCE]) expect(() => dispatch(t, EncAlgType.RING, 8, "p")).not.toThrow();
  });
  it("through the CLI: broadcast, reduce and all-to-all on a ring-only run each exit 1 with the message", () => {
    for (const [o, m] of [
      ["broadcast", /not supported operation \(op_type 2\)/],
      ["reduce", /not supported operation \(op_type 3\)/],
      ["all-to-all", /alltoall cannot be supported without Mesh algorithm, rank_n\(8\)/],
    ] as const) {
      let err = "";
      const code = main([`test/fixtures/ops/${o}.json`], () => {}, (s) => (err += s));
      expect(code, o).toBe(1);
      expect(err).toMatch(m);
      expect(err).toContain("ops[0].op");
    }
  });
});

describe("the operation record (enc_operation)", () => {
  it("op_slot_idx from curr_op_slot_idx[stream]; posted ops per stream and overall", () => {
    const ops = [0, 1, 0, 1, 0].map((stream) => ({ ...op("all-reduce", 8192), stream }));
    const p = postOperations({ scn: scenario({ ranks: 2, ops }), spec: trn1, channels: 2, chunkBytes: 4096 });
    expect(p.operations.map((o) => [o.stream, o.opSlotIdx])).toEqual([
      [0, 0],
      [1, 0],
      [0, 1],
      [1, 1],
      [0, 2],
    ]);
    expect(p.postedOps.slice(0, 2)).toEqual([
      [0, 2, 4],
      [1, 3],
    ]);
    const o = p.operations[0]!;
    expect(o).toMatchObject({ alg: EncAlgType.RING, metaringType: MetaringType.RING, channelN: 2, priorityClass: 0, sdmaDtype: 10, copySliceBytes: 2048, reduceSliceBytes: 4096, pipelineSliceN: 1 });
  });
  it("the priority class picks the CCE reduce packet size, and the emitted packets follow it", () => {
    const spec = { ...ideal, collectives: { ...ideal.collectives, cceReducePacketBytes: [65536, 32768, 16384, 8192, 4096] } };
    const scn = scenario({ instance: "ideal", ranks: 2, channels: 1, check: "none", ops: [{ ...op("reduce-scatter", 1 << 20), priorityClass: 2 }] });
    const { image, layout } = compileProgram(scn, spec, [0]);
    expect(layout.ops[0]!.operation.reduceSliceBytes).toBe(16384);
    const q = image.devices[0]!.queues[0]!;
    const lens = new Set<number>();
    for (let i = 0; i < q.tx.length / DESC_BYTES; i++) {
      const d = decodeTx(q.tx, i * DESC_BYTES);
      if (d.kind === "cce") lens.add(d.length);
    }
    expect(Math.max(...lens)).toBe(16384);
  });
});

describe("op signature: 'a 16-byte MD5 over the group's enc_op_args, computed in the PARSE state for cross-rank reconciliation'", () => {
  it("is 16 bytes, equal across a group's ranks, different when one rank's op differs", () => {
    const scn = scenario({ ranks: 4, ops: [op("all-reduce"), op("all-gather")] });
    expect(opSignature(scn, 0, 0)).toHaveLength(16);
    expect(opSignature(scn, 0, 1).equals(opSignature(scn, 0, 3))).toBe(true);
    const bad = { ...scn, rankOverrides: [{ rank: 2, op: 1, bytes: 8192 }] };
    expect(opSignature(bad, 0, 2).equals(opSignature(bad, 0, 0))).toBe(false);
    expect(() => checkSignatures(bad, [[0, 1, 2, 3]])).toThrow(/replica group 0, rank 2 differs from rank 0 at op 1/);
  });
  it("a mismatch stops the run before anything runs: exit 1 naming the group, the rank and the op", () => {
    let out = "";
    let err = "";
    const code = main(["test/fixtures/ops/signature-mismatch.json"], (s) => (out += s), (s) => (err += s));
    expect(code).toBe(1);
    expect(out).toBe("");
    expect(err).toMatch(/failed signature check from peer: 5\. This is likely caused by a compilation error generating mismatched collectives between the peers \(replica group 1, rank 5 differs from rank 4 at op 1\)/);
    expect(err).toContain("[CMP1501]");
  });
});

describe("two axes never conflated: 'the emitter packs only the 4-bit device enc_pattern_t into cc_op_entry.algo_type'", () => {
  it("a ring op's entries carry ENC_PATTERN_RING whatever the host algorithm's value", () => {
    const { image, layout } = compileProgram(scenario({ ranks: 2, ops: [op("all-reduce")] }), trn1, [0]);
    expect(layout.ops[0]!.algorithm).toBe(EncAlgType.RING);
    for (const d of image.devices) for (const t of d.topsps) expect(decodeSpadCtrlEntry(t.ctrlSpad, 0).algoType).toBe(EncPattern.RING);
    // The printed-name quirks the explanation shows.
    expect([ENC_ALG_NAME[EncAlgType.SINGLE_CYCLE_RING], ENC_ALG_NAME[EncAlgType.INTRA_RDH], ENC_ALG_NAME[EncAlgType.INTER_RDH], ENC_ALG_NAME[EncAlgType.LATENCY_OPT_MESH]]).toEqual(["Invalid", "RDH", "RDH", "Mesh"]);
  });
});

describe("the cc-op validate pass (enc_validate_and_merge_ccops)", () => {
  const fresh = () => compileProgram(scenario({ ranks: 2, channels: 1, check: "none", ops: [op("all-reduce"), op("all-gather")] }), trn1, [0, 1]).image;
  it("accepts what the emitter builds, ops merged into one ordered stream per TopSP", () => {
    const img = fresh();
    expect(() => validateCcops(img)).not.toThrow();
    expect(img.devices[0]!.topsps[0]!.opNum).toBe(2);
  });
  it(`rejects an op that does not increment its completion semaphore: '${MUST_INCREMENT}'`, () => {
    const img = fresh();
    const q = img.devices[0]!.queues.find((x) => x.engine === 1 && x.queue === trn1.dma.collectiveQueue)!;
    const last = q.rx.length / DESC_BYTES - 1;
    new DataView(q.rx.buffer, q.rx.byteOffset).setBigUint64(last * DESC_BYTES + 8, 4n, true);
    expect(() => validateCcops(img)).toThrow(/^Collective instruction must increment semaphore when done \(dev0.topsp0 channel 0 fold 1, op 1\)$/);
  });
  it("rejects folds with unequal descriptor counts", () => {
    const img = fresh();
    const d = img.devices[0]!;
    const cut = { ...img, devices: [{ ...d, queues: d.queues.map((q) => (q.engine === 1 && q.queue === trn1.dma.collectiveQueue ? { ...q, tx: q.tx.subarray(16), rx: q.rx.subarray(16) } : q)) }, ...img.devices.slice(1)] };
    expect(() => validateCcops(cut)).toThrow(/its folds have unequal descriptor counts/);
  });
  it("rejects a step whose counts overflow the 16-bit tp_inc counter", () => {
    const img = fresh();
    new DataView(img.devices[0]!.topsps[0]!.slotSpad[0]!.buffer).setUint16(0, 0xffff, true);
    expect(() => validateCcops(img)).toThrow(/overflows the 16-bit tp_inc counter/);
  });
});

describe("--explain", () => {
  it("prints the family decision, six gate verdicts with reasons, the resolved algorithm and the record, and adds 'explain' to --json", () => {
    let out = "";
    expect(main(["scenarios/ring8.json", "--explain", "--check", "none"], (s) => (out += s), () => {})).toBe(0);
    expect(out).toContain("comm init (INTRA): ring / kangaring path (no mesh-family algorithm allowed)");
    for (const g of GATES) expect(out).toMatch(new RegExp(`\\n    ${g}\\s+no: `));
    expect(out).toContain('resolved: enc_alg_type 0 "Ring", metaring_type RING (0)');
    expect(out).toMatch(/operation: 2 channel\(s\), copy slice 131072 B, reduce slice 4096 B, 1 pipeline slice\(s\)/);
    expect(out).toMatch(/size\(B\)\s+count\(elems\)/);
    let json = "";
    main(["scenarios/ring8.json", "--explain", "--json", "--check", "none"], (s) => (json += s), () => {});
    const j = JSON.parse(json);
    expect(j.explain).toHaveLength(3);
    expect(j.explain[0].gates).toHaveLength(6);
    expect(j.explain[0].resolved).toEqual({ value: 0, name: "Ring" });
    expect(j.explain[0].commInit.allowed[4]).toMatchObject({ alg: 4, name: "Invalid", allowed: false });
    expect(Object.keys(JSON.parse((() => { let s = ""; main(["scenarios/ring8.json", "--json", "--check", "none"], (x) => (s += x), () => {}); return s; })()))).toEqual(["scenario", "results"]);
  });
});
