// The hierarchical plan: a HIER op's stages on its two levels of communicators and the algorithm
// each stage takes (the runtime's selection lists, first feasible wins), and the hierarchical
// gate's verdict from it (spec/hierarchical-rdh-and-proxy.md §1).
import { dtypeSize } from "../ir/dtypes.ts";
import { EncAlgType, EncOpType, encAlgorithmName } from "../ir/enums.ts";
import { CompileError } from "../ir/errors.ts";
import type { DeviceSpec, OpName, OpSpec, Scenario } from "../ir/spec.ts";
import { algTypeOf } from "../ir/spec.ts";
import { opEntry } from "../ir/ops.ts";
import { initComm } from "./algorithms.ts";
import type { CommInfo } from "./groups.ts";
import { algorithmEntry } from "./registry.ts";
import type { Comm, Stage, Verdict } from "./stage.ts";
import { commContext, dispatch, multiStream, kangaringLayout, meshEngines, meshMemberOf, opPacketBytes, opReduceSlice, runGates } from "./gates.ts";
import { INTRA_RDH_RANKS } from "./rdh.ts";

export interface HierPlan {
  /** The bytes the stages run on (all slices): the op's, or an all-reduce's padded to whole blocks (`hierBytes`). */
  readonly bytes: number;
  /** The stages of one slice (the whole op when `slices` is 1). */
  readonly stages: readonly (Omit<Stage, "reduceSliceBytes"> & { readonly level: "intra" | "inter" })[];
  /** Output bytes per rank of each stage of one slice (the last one's is the op's output share). */
  readonly outBytes: readonly number[];
  /** Pipeline slices: step t runs stage s of slice t - s, every stage on its own channel set. */
  readonly slices: number;
  /**
   * A local block transpose (rows x cols blocks to cols x rows) before the first stage or after
   * the last, for node-by-node groups of a reduce-scatter / all-gather.
   */
  readonly transpose?: { readonly at: "first" | "last"; readonly rows: number; readonly cols: number };
  /** The runtime's selection line. */
  readonly log: string;
}

/** The runtime's selection lists per stage slot (first feasible wins). */
const INTRA_LIST: readonly EncAlgType[] = [EncAlgType.INTRA_RDH, EncAlgType.MESH, EncAlgType.KANGARING];
const INTER_ALLR_LIST: readonly EncAlgType[] = [EncAlgType.MESH, EncAlgType.INTER_RDH, EncAlgType.SINGLE_CYCLE_RING];
const INTER_LIST: readonly EncAlgType[] = [EncAlgType.MESH, EncAlgType.INTER_RDH];

const OP_TYPE: Partial<Record<OpName, EncOpType>> = { "all-reduce": EncOpType.ALLREDUCE, "reduce-scatter": EncOpType.REDUCE_SCATTER, "all-gather": EncOpType.ALLGATHER };

/**
 * The bytes a hierarchical op's stages run on. An all-reduce's intra-node slice is
 * ceil(bytes per slice / ranks per node) whole elements (spec/hierarchical-rdh-and-proxy.md §1:
 * intra_slice = ceil(per_rank_bytes / intra.rank_n)), so a size that does not split evenly runs
 * padded: to whole blocks per rank of a node and, so that every node's inter-node stage cuts its
 * slice alike (the runtime's remainder split there is not published), per node too — at most
 * slices x ranks - 1 elements, in the tails of the op's buffers (`hierPadding`), never compared.
 * Reduce-scatter and all-gather sizes are whole blocks already.
 */
export function hierBytes(op: OpSpec, opType: EncOpType, localN: number, nodeN: number, slices: number): number {
  if (opType !== EncOpType.ALLREDUCE) return op.bytes;
  const block = slices * localN * nodeN * dtypeSize(op.dtype);
  return Math.ceil(op.bytes / block) * block;
}

/** Split a hierarchical op into its stages and pick each stage's algorithm. */
export function hierStages(
  scn: Scenario,
  spec: DeviceSpec,
  comms: { readonly intra: Comm; readonly inter: Comm; readonly intraAg?: Comm },
  info: readonly CommInfo[],
  op: OpSpec,
  opType: EncOpType,
  channels: number,
  chunkBytes: number,
  path: string,
): HierPlan {
  const esize = dtypeSize(op.dtype);
  const localN = comms.intra.groups[0]!.length;
  const nodeN = comms.inter.groups[0]!.length;
  const slices = scn.hierarchical.slices;
  if (slices > 1 && opType !== EncOpType.ALLREDUCE) {
    throw new CompileError("CMP1309", `hierarchical pipelining ("slices": ${slices}) applies to all-reduce only; a ${op.op}'s rank blocks would not stay contiguous in slices`, { path: "hierarchical.slices", value: slices });
  }
  // Each slice is a contiguous share of the op (all-reduce only), in whole blocks per rank of a node.
  const s = hierBytes(op, opType, localN, nodeN, slices) / slices;
  // Reduce-scatter and all-gather blocks stay contiguous at both levels when group rank g is
  // (position on its node) * nodes + node. Node by node (g = node * ranks per node + position),
  // the op's N x L blocks are transposed locally first (reduce-scatter) or last (all-gather).
  let transpose: HierPlan["transpose"];
  if (opType !== EncOpType.ALLREDUCE) {
    const order = (pick: (p: number, nodes: readonly number[]) => number | undefined) =>
      scn.replicaGroups.every((g) => {
        const nodes = [...new Set(g.map((r) => info[r]!.node))].sort((a, b) => a - b);
        return g.every((r, p) => info[r]!.node === pick(p, nodes));
      });
    if (order((p, nodes) => nodes[p % nodes.length])) transpose = undefined;
    else if (order((p, nodes) => nodes[Math.floor(p / localN)])) transpose = opType === EncOpType.REDUCE_SCATTER ? { at: "first", rows: nodeN, cols: localN } : { at: "last", rows: localN, cols: nodeN };
    else {
      throw new CompileError("CMP1309", `a hierarchical ${op.op} needs each replica group ordered node by node (group rank p on node p / ${localN}) or position by position (on node p mod ${nodeN})`, { path: "replicaGroups", value: scn.replicaGroups.map((g) => g.length) });
    }
  }
  const stage = (level: "intra" | "inter", name: OpName, bytes: number, list: readonly EncAlgType[], comm = comms[level]) => {
    const stageType = OP_TYPE[name]!;
    const choice = level === "intra" ? scn.hierarchical.intra : scn.hierarchical.inter;
    let alg: EncAlgType;
    if (choice !== "auto") {
      alg = algTypeOf(choice);
      const n = comm.groups[0]!.length;
      // Mesh, RDH and kangaring refuse several streams, chosen or not: the stage gates' rule (a
      // stage of them beside another stream's op shares its buffers' addresses and races).
      if (alg !== EncAlgType.RING && alg !== EncAlgType.SINGLE_CYCLE_RING && multiStream(scn)) {
        throw new CompileError("CMP1310", `the ${level}-node ${name} stage cannot run ${choice} beside other streams' ops (mesh, RDH and kangaring refuse several streams): a program of several streams runs its hierarchical stages on ring or single-cycle-ring (or auto)`, { path: `hierarchical.${level}`, value: choice });
      }
      if (alg === EncAlgType.INTRA_RDH && !INTRA_RDH_RANKS.includes(n)) {
        throw new CompileError("CMP1310", `the intra-node RDH scheduler takes rank_n in {${INTRA_RDH_RANKS.join(", ")}}, not the ${n} ranks of the ${level}-node ${name} stage`, { path: `hierarchical.${level}`, value: choice });
      }
    } else {
      // The stage gates see every algorithm the preset supports (the scenario's allowed set picks HIER itself).
      const inp = { scn: { ...scn, allowedAlgorithms: undefined }, spec, channels, chunkBytes };
      const c = commContext(inp, comm.groups[0]!);
      const copyBytes = opPacketBytes(spec, scn, op);
      const limits = {
        kangaring: () => kangaringLayout(comm.groups[0]!, (r) => info[r]!.device),
        meshEngines: meshEngines(spec, channels, slices > 1 ? 4 : 3),
        reduceSliceBytes: opReduceSlice(spec, op.dtype, op.priorityClass, copyBytes),
        copyBytes,
      };
      const gates = runGates(initComm(c, () => {}), c, spec, stageType, bytes, limits, esize);
      const can = (a: EncAlgType) => gates.some((x) => x.gate === algorithmEntry(a).gate && x.verdict.ok);
      alg = meshMemberOf(list.find(can) ?? EncAlgType.INVALID, gates);
    }
    return { level, comm, op: { ...op, op: name, bytes }, opType: stageType, alg, count: bytes / esize };
  };
  const stages =
    opType === EncOpType.ALLREDUCE
      ? [stage("intra", "reduce-scatter", s, INTRA_LIST), stage("inter", "all-reduce", s / localN, INTER_ALLR_LIST), stage("intra", "all-gather", s, INTRA_LIST, slices > 1 ? comms.intraAg! : comms.intra)]
      : opType === EncOpType.REDUCE_SCATTER
        ? [stage("intra", "reduce-scatter", s, INTRA_LIST), stage("inter", "reduce-scatter", s / localN, INTER_LIST)]
        : [stage("inter", "all-gather", s / localN, INTER_LIST), stage("intra", "all-gather", s, INTRA_LIST)];
  const outBytes = opType === EncOpType.ALLREDUCE ? [s / localN, s / localN, s] : opType === EncOpType.REDUCE_SCATTER ? [s / localN, s / localN / nodeN] : [s / localN, s];
  const slot = (level: string, name: string) => stages.find((x) => x.level === level && x.op.op === name)?.alg ?? EncAlgType.INVALID;
  const log = `Hier algorithm selections - alg_intra_allg ${slot("intra", "all-gather")} alg_intra_redsct ${slot("intra", "reduce-scatter")} alg_inter_allr ${slot("inter", "all-reduce")} alg_inter_allg ${slot("inter", "all-gather")} alg_inter_redsct ${slot("inter", "reduce-scatter")}`;
  stages.forEach((st, k) => {
    if (st.alg === EncAlgType.INVALID) {
      throw new CompileError("CMP1310", `Invalid allr alg types: no algorithm the ${st.level}-node ${st.op.op} stage admits (${log}); name one with "hierarchical": { "${st.level}": ... }`, { path: `${path}.stage${k}`, value: st.op.op });
    }
    const entry = algorithmEntry(st.alg);
    if (!entry.stageLevels.includes(st.level)) throw new CompileError("CMP1310", `${encAlgorithmName(st.alg)} cannot run a ${st.level}-node stage`, { path: `${path}.stage${k}`, value: st.alg });
    if (!entry.ops.includes(st.opType)) throw new CompileError("CMP1310", `the ${entry.label.replace(/-(?=[^-]*$)/, " ")} runs ${entry.ops.map((o) => opEntry(o).name).join(" / ")} only, not the ${st.level}-node ${st.op.op} stage`, { path: `${path}.stage${k}`, value: st.alg });
    // The pipelined variant is ring-only: stages of different slices run at once on their channel sets.
    if (slices > 1 && !entry.pipelinedStage) {
      throw new CompileError("CMP1310", `the pipelined hierarchical variant ("slices": ${slices}) runs ring-type stages only, not ${encAlgorithmName(st.alg)} for the ${st.level}-node ${st.op.op}`, { path: `${path}.stage${k}`, value: st.alg });
    }
    // The same dispatch a flat op goes through (refuses what this build does not compose).
    dispatch(st.opType, st.alg, st.comm.groups[0]!.length, `${path}.stage${k}`);
  });
  return { bytes: s * slices, stages, outBytes, slices, log, ...(transpose ? { transpose } : {}) };
}

/**
 * The hierarchical gate's view of the composer's limits for one replica group: plan its stages on
 * that group's two levels (the ranks on each node; the ranks at one position on every node) and
 * say why not when the plan cannot be made.
 */
export function hierPlanVerdict(scn: Scenario, spec: DeviceSpec, info: readonly CommInfo[], group: readonly number[], op: OpSpec, opType: EncOpType, channels: number, chunkBytes: number, path: string): Verdict {
  const nodes = [...new Set(group.map((r) => info[r]!.node))].sort((a, b) => a - b);
  const perNode = nodes.map((k) => group.filter((r) => info[r]!.node === k));
  const light = (set: number, groups: readonly (readonly number[])[]): Comm => ({ set, groups, pos: new Map(), rings: [] });
  const intra = light(1, perNode);
  const inter = light(2, perNode[0]!.map((_, l) => perNode.map((p) => p[l]!)));
  try {
    const plan = hierStages({ ...scn, replicaGroups: [group] }, spec, { intra, inter, intraAg: light(3, perNode) }, info, op, opType, channels, chunkBytes, path);
    return { ok: true, reason: plan.log };
  } catch (e) {
    if (e instanceof CompileError) return { ok: false, reason: `${e.message} [${e.code}]` };
    throw e;
  }
}

