// Hierarchical (HIER) composition: one op split into stages on two levels of communicators —
// intra (each replica group's ranks on one node) and inter (the ranks at the same position on
// every node) — each stage composed by a flat algorithm (spec/hierarchical-rdh-and-proxy.md §1).
//
//   all-reduce      intra reduce-scatter -> inter all-reduce -> intra all-gather
//   reduce-scatter  intra reduce-scatter -> inter reduce-scatter
//   all-gather      inter all-gather     -> intra all-gather
import { dtypeSize } from "../ir/dtypes.ts";
import { EncOpType } from "../ir/enums.ts";
import type { OpSpec } from "../ir/spec.ts";
import { opEntry } from "../ir/ops.ts";
import type { CompileContext } from "./context.ts";
import type { Comm, StageRecord } from "./stage.ts";
import { hierBytes, hierStages } from "./hier-plan.ts";
import { opPacketBytes, type EncOperation } from "./gates.ts";

/** This op's hierarchical groups' parts of its stream's level comms. */
function hierLevels(ctx: CompileContext, op: OpSpec, hierGroups: readonly (readonly number[])[]): { intra: Comm; inter: Comm; intraAg?: Comm } {
  const inOp = new Set(hierGroups.flat());
  const level = (comm: Comm) => ctx.subComm(comm, (g) => inOp.has(g[0]!));
  const hc = ctx.hierCommsOf(op.stream);
  return { intra: level(hc.intra), inter: level(hc.inter), ...(hc.intraAg ? { intraAg: level(hc.intraAg) } : {}) };
}

/**
 * The bytes a hierarchical op's buffers need on every rank beyond its own size: an all-reduce that
 * does not split into whole blocks per rank of a node and per node runs padded to them (`hierBytes`).
 */
export function hierPadding(ctx: CompileContext, op: OpSpec, opType: EncOpType, hierGroups: readonly (readonly number[])[]): number {
  const { intra, inter } = hierLevels(ctx, op, hierGroups);
  return hierBytes(op, opType, intra.groups[0]!.length, inter.groups[0]!.length, ctx.scn.hierarchical.slices) - op.bytes;
}

/**
 * Compose a hierarchical op: step t runs stage s on slice t - s (one slice: the stages one after
 * another), each step one builder op closed by a device barrier; only the last step reports.
 * `alongside` composes the op's other (flat) groups in its first step.
 */
export function* composeHier(
  ctx: CompileContext,
  op: OpSpec,
  opType: EncOpType,
  operation: EncOperation,
  io: ReadonlyMap<number, { input: number; output: number }>,
  path: string,
  hierGroups: readonly (readonly number[])[],
  alongside: () => Generator<void, void>,
): Generator<void, { stages: StageRecord[]; selections: string; took: { device: number; topsp: number }[] }> {
  const { builder, scn, spec } = ctx;
  const { groups, info } = ctx.opGroupsOf(operation.index);
  const esize = dtypeSize(op.dtype);
  let took: { device: number; topsp: number }[] = [];
  const comms = hierLevels(ctx, op, hierGroups);
  const plan = hierStages({ ...scn, replicaGroups: hierGroups }, spec, comms, info, op, opType, ctx.channels, ctx.chunkBytes, path);
  /** Other groups' flat stages run in the op's first step. */
  let first = true;
  const beginStep = function* () {
    builder.beginOp(opPacketBytes(spec, scn, op));
    if (first) yield* alongside();
    first = false;
  };
  // Step t runs stage s on slice t - s (one slice: the stages one after another); stage s reads
  // what stage s - 1 wrote for that slice, through a scratch buffer per rank. The op's input and
  // output are cut into contiguous slices.
  const k = plan.slices;
  const n = plan.stages.length;
  // The shares the stages run on (an all-reduce's padded to whole blocks: the buffers' tails hold the padding).
  const share = (rank: number) => opEntry(op.op).buffers({ ...op, bytes: plan.bytes }, groups[info[rank]!.group]!.length, info[rank]!.groupRank);
  const inShare = (rank: number) => share(rank).inBytes / k;
  const outShare = (rank: number) => share(rank).outBytes / k;
  const scratch = new Map<string, number>();
  const out = (s: number, j: number, rank: number): number => {
    if (s === n - 1) return opOut(rank) + j * outShare(rank);
    const key = `${s}/${j}/${rank}`;
    let a = scratch.get(key);
    if (a === undefined) {
      a = builder.allocHbm(info[rank]!.device, plan.outBytes[s]!);
      scratch.set(key, a);
    }
    return a;
  };
  // A local block transpose before the first stage or after the last (node-by-node groups).
  const tr = plan.transpose;
  const trBuf = new Map<number, number>();
  if (tr) for (const rank of ctx.members(comms.intra)) trBuf.set(rank, builder.allocHbm(info[rank]!.device, tr.at === "first" ? inShare(rank) : outShare(rank)));
  const opIn = (rank: number) => (tr?.at === "first" ? trBuf.get(rank)! : io.get(rank)!.input);
  const opOut = (rank: number) => (tr?.at === "last" ? trBuf.get(rank)! : io.get(rank)!.output);
  const transposeStep = function* (from: (rank: number) => number, to: (rank: number) => number, bytes: (rank: number) => number, report: boolean): Generator<void, void> {
    yield* beginStep();
    for (const rank of ctx.members(comms.intra)) {
      // (A device this composition does not emit gets no program: a folded pass's other pods.)
      if (!ctx.emits(info[rank]!.device)) continue;
      const ch = ctx.chan(comms.intra, rank, 0);
      const b = bytes(rank) / (tr!.rows * tr!.cols);
      for (let r = 0; r < tr!.rows; r++) for (let c = 0; c < tr!.cols; c++) ch.copy(from(rank) + (r * tr!.cols + c) * b, to(rank) + (c * tr!.rows + r) * b, b, esize);
      ch.markStep(0);
      ch.markEnd();
    }
    took = builder.endOp(report);
  };
  if (tr?.at === "first") {
    yield* transposeStep((rank) => io.get(rank)!.input, opIn, inShare, false);
    ctx.barrier(took, op.stream);
  }
  const inp = (s: number, j: number, rank: number): number => (s === 0 ? opIn(rank) + j * inShare(rank) : out(s - 1, j, rank));
  for (let t = 0; t < k + n - 1; t++) {
    const last = t === k + n - 2 && tr?.at !== "last";
    yield* beginStep();
    for (const [s, st] of plan.stages.entries()) {
      const j = t - s;
      if (j < 0 || j >= k) continue;
      yield* ctx.runStage({ ...st, reduceSliceBytes: operation.reduceSliceBytes }, (rank) => ({ input: inp(s, j, rank), output: out(s, j, rank) }), k > 1 ? `${path}.slice${j}.stage${s}` : `${path}.stage${s}`);
    }
    took = builder.endOp(last);
    // Ranks meet before the next step reads this one's outputs.
    if (!last) ctx.barrier(took, op.stream);
  }
  if (tr?.at === "last") yield* transposeStep(opOut, (rank) => io.get(rank)!.output, outShare, true);
  return { stages: plan.stages.map((s): StageRecord => ({ level: s.level, op: s.op.op, alg: s.alg })), selections: plan.log, took };
}
