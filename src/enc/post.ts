// postOperation: validate, run all six enc_can_post_* gates, resolve one enc_alg_type by the fixed
// precedence, dispatch on the 13 enc_op_type values, and build the operation record.
import { createHash } from "node:crypto";
import { SDMA_DTYPE, dtypeSize } from "../ir/dtypes.ts";
import { EncAlgType, ENC_ALG_NAME, metaringTypeOf, type MetaringType } from "../ir/enums.ts";
import { CompileError } from "../ir/errors.ts";
import { ALG_NAMES, opGroups, opTypeOf, type OpSpec, type Scenario } from "../ir/spec.ts";
import { initComm, type CommInit } from "./algorithms.ts";
import { type ChunkPlan } from "./chunks.ts";
import { commInfos, type CommInfo } from "./groups.ts";
import { algorithmEntry } from "./registry.ts";
import { MAX_DESC_BYTES } from "../encd/udma.ts";
import { ALG_ENUM_NAME, commContext, dispatch, kangaringLayout, meshEngines, opPlan, opPacketBytes, opReduceSlice, resolvedAlgorithm, runGates, type EncOperation, type PostInputs } from "./gates.ts";
import type { CommContext, Verdict } from "./stage.ts";
import { hierPlanVerdict } from "./hier-plan.ts";
import type { Gate } from "./stage.ts";

export { GATES, type Gate } from "./stage.ts";

export interface Explanation {
  readonly op: number;
  readonly group: number;
  readonly commInit: CommInit;
  readonly gates: readonly { readonly gate: Gate; readonly verdict: Verdict }[];
  readonly resolved: { readonly value: EncAlgType; readonly name: string };
  readonly metaringType: MetaringType;
  readonly channels: number;
  readonly copySliceBytes: number;
  readonly reduceSliceBytes: number;
  /** The op's CC DMA packet where it is below a descriptor's 64 KiB (`opPacketBytes`): the most a copy descriptor moves. */
  readonly packetBytes?: number;
  readonly pipelineSliceN: number;
  readonly stream: number;
  readonly opSlotIdx: number;
  /** The scenario named an algorithm whose gate refused: what was asked, why not, what runs instead. */
  readonly fallback?: string;
  /** Why the program runs fewer channels than the preset's (its channel sets would not fit the rank's DMA engines). */
  readonly channelsNote?: string;
  /** A hierarchical op's stages and the runtime's selection line for them (filled in at compose). */
  readonly hier?: { readonly stages: readonly { readonly level: string; readonly op: string; readonly alg: EncAlgType }[]; readonly selections: string; readonly padBytes?: number };
}

export interface Posted {
  readonly operations: readonly EncOperation[];
  /** Per op: why the dispatch refused it (undefined = it goes to a composer this build has). */
  readonly refused: readonly (CompileError | undefined)[];
  /** posted_ops[stream]: operation indices per stream, in posting order. */
  readonly postedOps: readonly (readonly number[])[];
  readonly explain: readonly Explanation[];
  readonly warnings: readonly string[];
}

/**
 * When the scenario names one algorithm and the precedence resolved another, the runtime runs what
 * the gates admit; this says so (what was asked, why its gate refused, what runs).
 */
function fallbackNote(scn: Scenario, gates: readonly { gate: Gate; verdict: Verdict }[], alg: EncAlgType): string | undefined {
  if (scn.algorithm === "auto") return undefined;
  const asked = ALG_NAMES.indexOf(scn.algorithm) as EncAlgType;
  if (asked === alg) return undefined;
  const gate = algorithmEntry(asked).gate;
  const why = gate ? gates.find((x) => x.gate === gate)!.verdict.reason : "no enc_can_post_* gate admits it";
  return `"${scn.algorithm}" cannot run (${why}); the runtime falls back to ${ALG_NAMES[alg as number] ?? alg}`;
}

/** The arguments a rank posts for op `i`, after its overrides. */
export function rankOpArgs(scn: Scenario, rank: number, i: number): OpSpec {
  const o = scn.rankOverrides.find((x) => x.rank === rank && x.op === i);
  const { rank: _r, op: _o, ...change } = o ?? { rank, op: i };
  return { ...scn.ops[i]!, ...change };
}

/** enc_calculate_signature: a 16-byte MD5 over the group's op arguments as this rank posts them. */
export function opSignature(scn: Scenario, group: number, rank: number): Buffer {
  const args = scn.ops.map((_, i) => {
    const a = rankOpArgs(scn, rank, i);
    return [i, opTypeOf(a.op), a.bytes, SDMA_DTYPE[a.dtype], a.reduce, a.stream, a.priorityClass];
  });
  return createHash("md5").update(JSON.stringify({ group, args })).digest();
}

/** Cross-rank reconciliation of the signatures of every group, before anything runs. */
export function checkSignatures(scn: Scenario, groups: readonly (readonly number[])[]): void {
  groups.forEach((g, gi) => {
    const ref = opSignature(scn, gi, g[0]!);
    for (const rank of g.slice(1)) {
      if (!opSignature(scn, gi, rank).equals(ref)) {
        const op = scn.ops.findIndex((_, i) => JSON.stringify(rankOpArgs(scn, rank, i)) !== JSON.stringify(rankOpArgs(scn, g[0]!, i)));
        throw new CompileError(
          "CMP1501",
          `failed signature check from peer: ${rank}. This is likely caused by a compilation error generating mismatched collectives between the peers (replica group ${gi}, rank ${rank} differs from rank ${g[0]} at op ${op})`,
          { path: `rankOverrides`, value: { group: gi, rank, op } },
        );
      }
    }
  });
}

/**
 * Post every op of the scenario, in order: gates, precedence, dispatch, operation record. An op the
 * dispatch refuses is recorded in `refused` (the caller fails on the first), so its explanation is
 * still there to show.
 */
export function postOperations(inp: PostInputs): Posted {
  const { scn, spec, channels, chunkBytes } = inp;
  const warnings: string[] = [];
  const unsupported = (scn.allowedAlgorithms ?? []).filter((a) => !spec.collectives.supportedAlgorithms.includes(a));
  if (unsupported.length > 0) {
    warnings.push(`${spec.name} does not support ${unsupported.map((a) => `${ALG_ENUM_NAME[a]} (${a})`).join(", ")}: not allowed in this run, so ops fall back to what the gates admit (RING at last)`);
  }
  // Each set of replica groups (the scenario's, an op's own) is initialised once, as the runtime inits a comm.
  const comms = new Map<string, { inits: { c: CommContext; init: CommInit }[]; info: CommInfo[] }>();
  const commsOf = (groups: readonly (readonly number[])[]) => {
    const key = JSON.stringify(groups);
    let got = comms.get(key);
    if (!got) {
      got = { inits: groups.map((g) => {
        const c = commContext(inp, g);
        return { c, init: initComm(c, (m) => warnings.push(m)) };
      }), info: commInfos(groups, scn.ranks, scn.ranksPerDevice, scn.nodes) };
      comms.set(key, got);
    }
    return got;
  };
  const slot = [0, 0, 0, 0];
  const postedOps: number[][] = [[], [], [], []];
  const operations: EncOperation[] = [];
  const explain: Explanation[] = [];
  const refused: (CompileError | undefined)[] = scn.ops.map(() => undefined);
  scn.ops.forEach((op, index) => {
    const path = `ops[${index}]`;
    const opType = opTypeOf(op.op);
    const esize = dtypeSize(op.dtype);
    const opSlotIdx = slot[op.stream]!++;
    postedOps[op.stream]!.push(index);
    let first: EncOperation | undefined;
    const plans: ChunkPlan[] = [];
    const groupAlgs: EncAlgType[] = [];
    const copyBytes = opPacketBytes(spec, scn, op);
    const reduceSliceBytes = opReduceSlice(spec, op.dtype, op.priorityClass, copyBytes);
    const groups = opGroups(scn, index);
    const { inits, info } = commsOf(groups);
    groups.forEach((g, gi) => {
      const { c, init } = inits[gi]!;
      const gates = runGates(
        init,
        c,
        spec,
        opType,
        op.bytes,
        {
          kangaring: () => kangaringLayout(g, (r) => info[r]!.device),
          hierarchical: () => hierPlanVerdict(scn, spec, info, g, op, opType, channels, chunkBytes, path),
          meshEngines: meshEngines(spec, channels, 1),
          reduceSliceBytes,
          copyBytes,
          group: { members: g, where: { nodeOf: (r) => info[r]!.node, deviceOf: (r) => info[r]!.device } },
        },
        esize,
      );
      const alg = resolvedAlgorithm(gates);
      groupAlgs.push(alg);
      const fallback = fallbackNote(scn, gates, alg);
      if (fallback) warnings.push(`${path}, replica group ${gi}: ${fallback}`);
      const count = op.bytes / esize;
      const plan = opPlan(opType, count, g.length, chunkBytes, esize, channels);
      plans.push(plan);
      const rec: EncOperation = {
        index,
        opType,
        alg,
        metaringType: metaringTypeOf(alg),
        sdmaDtype: SDMA_DTYPE[op.dtype],
        channelN: channels,
        priorityClass: op.priorityClass,
        stream: op.stream,
        opSlotIdx,
        copySliceBytes: plan.halfBytes,
        reduceSliceBytes,
        pipelineSliceN: plan.groups,
        plans,
        groupAlgs,
      };
      explain.push({
        op: index,
        group: gi,
        commInit: init,
        gates,
        resolved: { value: alg, name: ENC_ALG_NAME[alg] },
        metaringType: rec.metaringType,
        channels,
        copySliceBytes: rec.copySliceBytes,
        reduceSliceBytes,
        ...(copyBytes < MAX_DESC_BYTES ? { packetBytes: copyBytes } : {}),
        pipelineSliceN: rec.pipelineSliceN,
        stream: op.stream,
        opSlotIdx,
        ...(fallback ? { fallback } : {}),
      });
      try {
        dispatch(opType, alg, g.length, `${path}.op`);
      } catch (e) {
        if (!(e instanceof CompileError)) throw e;
        // (All-to-all has the mesh alone: why the mesh gate said no is what the user can change.)
        const mesh = gates.find((v) => v.gate === "mesh")?.verdict;
        refused[index] ??= e.code === "CMP1201" && mesh && !mesh.ok ? new CompileError(e.code, `${e.message}; the mesh gate said no: ${mesh.reason}`, { path: e.path, value: op.op }) : e;
      }
      first ??= rec;
    });
    operations.push(first!);
  });
  return { operations, refused, postedOps, explain, warnings };
}
