// --explain: postOperation's reasoning for every op, as text or as JSON data.
import { CommType, MetaringType } from "../ir/enums.ts";
import { OP_NAMES, opGroups, type OpName, type Scenario } from "../ir/spec.ts";
import { opEntry } from "../ir/ops.ts";
import type { Explanation } from "../enc/post.ts";
import { algorithmLabel } from "../enc/compile.ts";

const METARING_NAME = Object.fromEntries(Object.entries(MetaringType).map(([k, v]) => [v, k])) as Record<number, string>;
const commName = (t: CommType) => (t === CommType.INTER ? "INTER" : "INTRA");

/** An op with no enc_op_type of its own: what the runtime posts instead. */
const opTypeName = (t: number): string => (OP_NAMES as readonly string[])[t] ?? `op_type ${t}`;

function loweredTo(op: OpName): string | undefined {
  const entry = opEntry(op);
  if (opTypeName(entry.type) === op) return undefined;
  return `${op} has no enc_op_type; it is posted as op_type ${entry.type} (${opTypeName(entry.type)}): each rank sends its one input block to every rank (counts[i][j] = rank i's size, send displacement 0), landing at its all-gather-v displacement`;
}

export function explainJson(explain: readonly Explanation[], scn?: Scenario): unknown[] {
  return explain.map((e) => ({
    op: e.op,
    ...(scn && loweredTo(scn.ops[e.op]!.op) ? { lowered: { opType: opEntry(scn.ops[e.op]!.op).type, name: opTypeName(opEntry(scn.ops[e.op]!.op).type) } } : {}),
    group: e.group,
    commInit: {
      commType: commName(e.commInit.commType),
      family: e.commInit.family,
      rdhSkipped: e.commInit.rdhSkipped,
      allowed: e.commInit.allowed.map((a) => ({ alg: a.alg, name: a.name, allowed: a.verdict.ok, reason: a.verdict.reason })),
    },
    gates: e.gates.map((g) => ({ gate: g.gate, feasible: g.verdict.ok, reason: g.verdict.reason })),
    resolved: e.resolved,
    ...(e.fallback ? { fallback: e.fallback } : {}),
    metaringType: { value: e.metaringType, name: METARING_NAME[e.metaringType] },
    channels: e.channels,
    copySliceBytes: e.copySliceBytes,
    reduceSliceBytes: e.reduceSliceBytes,
    ...(e.packetBytes !== undefined ? { packetBytes: e.packetBytes } : {}),
    pipelineSliceN: e.pipelineSliceN,
    stream: e.stream,
    opSlotIdx: e.opSlotIdx,
    ...(e.hier ? { hier: { stages: e.hier.stages.map((st) => ({ level: st.level, op: st.op, alg: st.alg, name: algorithmLabel(st.alg) })), selections: e.hier.selections, ...(e.hier.padBytes ? { padBytes: e.hier.padBytes } : {}) } } : {}),
  }));
}

export function explainText(scn: Scenario, explain: readonly Explanation[]): string {
  const lines: string[] = [];
  for (const e of explain) {
    const op = scn.ops[e.op]!;
    const g = opGroups(scn, e.op)[e.group]!;
    lines.push(`op ${e.op}: ${op.op} ${op.bytes} B ${op.dtype}, replica group ${e.group} (${g.length} ranks), stream ${e.stream}, op_slot_idx ${e.opSlotIdx}`);
    const lowered = loweredTo(op.op);
    if (lowered) lines.push(`  lowered: ${lowered}`);
    const ci = e.commInit;
    lines.push(`  comm init (${commName(ci.commType)}): ${ci.family === "mesh" ? "mesh path (a mesh-family algorithm is allowed)" : "ring / kangaring path (no mesh-family algorithm allowed)"}${ci.rdhSkipped ? "; RDH skipped (needs mesh)" : ""}`);
    for (const a of ci.allowed) lines.push(`    ${String(a.alg).padStart(2)} ${a.name.padEnd(16)} ${a.verdict.ok ? "allowed" : "not allowed"}: ${a.verdict.reason}`);
    lines.push("  enc_can_post_* gates (all six run):");
    for (const x of e.gates) lines.push(`    ${x.gate.padEnd(17)} ${x.verdict.ok ? "feasible" : "no"}: ${x.verdict.reason}`);
    lines.push(`  resolved: enc_alg_type ${e.resolved.value} "${e.resolved.name}", metaring_type ${METARING_NAME[e.metaringType]} (${e.metaringType})`);
    if (e.fallback) lines.push(`  fallback: ${e.fallback}`);
    if (e.channelsNote) lines.push(`  channels: ${e.channelsNote}`);
    lines.push(`  operation: ${e.channels} channel(s), copy slice ${e.copySliceBytes} B, reduce slice ${e.reduceSliceBytes} B, ${e.pipelineSliceN} pipeline slice(s)${e.packetBytes !== undefined ? `, CC DMA packet ${e.packetBytes} B (copies cut at it; ${scn.ccDmaPacketBytes ? `stream ${e.stream}'s of ccDmaPacketBytes / NEURON_RT_DBG_CC_DMA_PACKET_SIZE` : "the preset's dma.maxDescriptorBytes"})` : ""}`);
    if (e.hier) {
      lines.push(`  hierarchical stages: ${e.hier.stages.map((st) => `${st.level} ${st.op} on ${algorithmLabel(st.alg)}`).join(" -> ")}`);
      lines.push(`    ${e.hier.selections}`);
      if (e.hier.padBytes) lines.push(`    padded by ${e.hier.padBytes} B to whole blocks per rank and per node (intra_slice = ceil(bytes / ranks per node)); the padding sits in the buffers' tails and is not compared`);
    }
  }
  return lines.join("\n") + "\n";
}
