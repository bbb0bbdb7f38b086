// The enc_can_post_* gate battery and what it reads: a comm's gate context, the six gates with
// their composer limits (16-bit step counters, layouts, RDH windows), the fixed precedence that
// resolves one enc_alg_type, the 13-case dispatch, and the operation record the composer gets.
import { dtypeSize } from "../ir/dtypes.ts";
import { CommType, EncAlgType, EncOpType, ENC_ALG_NAME, type MetaringType } from "../ir/enums.ts";
import { CompileError } from "../ir/errors.ts";
import { type DeviceSpec, type OpSpec, type Scenario } from "../ir/spec.ts";
import { devicesPerNode, podNodesOf } from "../ir/topology.ts";
import { allowedMask, type CommInit } from "./algorithms.ts";
import { planChunks, type ChunkPlan } from "./chunks.ts";
import { algorithmEntry, builtAlgorithms, meshVariants, precedenceOrder } from "./registry.ts";
import { OPS } from "../ir/ops.ts";
import type { CommContext, Verdict } from "./stage.ts";
import { COLLECTIVES } from "./kit.ts";
import type { Gate, GroupPlaces } from "./stage.ts";

/** What a family's composer can build beyond its admission gate, asked only when the gate admits. */
export interface ComposerLimits {
  readonly kangaring?: () => Verdict;
  readonly hierarchical?: () => Verdict;
  /** DMA engines a mesh-tape program (mesh, RDH) of this comm gets; the step-size limit needs it. */
  readonly meshEngines?: number;
  readonly reduceSliceBytes?: number;
  /** The op's copy descriptors' largest size (`opPacketBytes`; default the preset's descriptor cap). */
  readonly copyBytes?: number;
  /** The group and where its ranks sit, for families that need a layout (the pod mesh's grid). */
  readonly group?: { readonly members: readonly number[]; readonly where: GroupPlaces };
}

/** A step's descriptors per queue must stay below the 16-bit TopSP increment counters. */
const STEP_DESCRIPTORS_MAX = 0xffff - 1;

/**
 * The largest step a mesh-tape program would emit on one engine, against the 16-bit counters: a
 * mesh reduce reads all n blocks of the engine's share in CCE packets, an RDH halving step reduces
 * half the buffer with two sources, a copy leg moves a block (or half the buffer) in descriptors of
 * at most `copyBytes` (the op's packet, `opPacketBytes`). The runtime's op_max_limit keeps its mesh
 * subtypes inside this; an op above it goes on down the precedence.
 */
export function stepLimit(alg: EncAlgType, opType: EncOpType, bytes: number, n: number, esize: number, spec: DeviceSpec, engines: number, reduceSlice: number, copyBytes = spec.dma.maxDescriptorBytes): Verdict {
  const E = Math.max(1, Math.min(engines, Math.max(n - 1, spec.collectives.meshFolds)));
  const reduces = opType === EncOpType.ALLREDUCE || opType === EncOpType.REDUCE_SCATTER;
  const block = Math.ceil(bytes / esize / n) * esize;
  const per = (b: number, unit: number) => Math.ceil(Math.ceil(b / esize / E) * esize / unit);
  let tx: number;
  // An all-reduce's mesh leg also sends the engine's reduced share to every peer; every leg ends
  // in a few semaphore writes (SLACK covers them).
  const SLACK = 64;
  const exchange = algorithmEntry(alg).exchange;
  if (exchange === "whole-buffer" && opType === EncOpType.ALLREDUCE) {
    // Single step: the whole buffer to every peer (a peer's copy split over its S engines), then
    // each engine reduces its share of the buffer from all n copies.
    const S = Math.max(1, Math.floor(E / Math.max(1, n - 1)));
    const broadcast = Math.ceil((n - 1) / E) * Math.ceil(Math.ceil(bytes / esize / S) * esize / copyBytes);
    tx = Math.max(broadcast, per(bytes, reduceSlice) * (n + 1));
  } else if (exchange !== "halving") {
    tx = reduces ? per(block, reduceSlice) * (n + 1) : Math.ceil((n - 1) / E) * Math.ceil(block / copyBytes);
    if (opType === EncOpType.ALLREDUCE) tx += (n - 1) * per(block, copyBytes);
  } else tx = reduces ? per(bytes / 2, reduceSlice) * 3 : per(bytes / 2, copyBytes);
  tx += SLACK;
  if (tx > STEP_DESCRIPTORS_MAX) return no(`its largest step would need ${tx} descriptors on one of ${E} engines, above the 16-bit step counters (${STEP_DESCRIPTORS_MAX})`);
  return ok(`largest step ${tx} descriptors per engine`);
}

/**
 * Kangaring pairs the ranks of one device: each device of the group must hold the same number of
 * its ranks, adjacent in group order and aligned to that number.
 */
export function kangaringLayout(group: readonly number[], deviceOf: (rank: number) => number): Verdict {
  const byDevice = new Map<number, number[]>();
  group.forEach((r, k) => byDevice.set(deviceOf(r), [...(byDevice.get(deviceOf(r)) ?? []), k]));
  const m = byDevice.values().next().value!.length;
  for (const ks of byDevice.values()) {
    if (ks.length !== m || ks[0]! % m !== 0 || ks.some((k, j) => k !== ks[0]! + j)) {
      return no(`each device must hold ${m} adjacent ranks of the group (a device holds group ranks ${ks.join(", ")}) [CMP1307]`);
    }
  }
  return ok(`${byDevice.size} devices of ${m} adjacent ranks`);
}

/** Enum names (ENC_ALG_*) without the prefix, for messages: the printed names repeat themselves. */
export const ALG_ENUM_NAME = Object.fromEntries(Object.entries(EncAlgType).map(([k, v]) => [v, k])) as Record<number, string>;


/** The enc_operation analogue: what the composer needs to know about one posted op. */
export interface EncOperation {
  readonly index: number;
  readonly opType: EncOpType;
  readonly alg: EncAlgType;
  readonly metaringType: MetaringType;
  readonly sdmaDtype: number;
  readonly channelN: number;
  readonly priorityClass: number;
  readonly stream: number;
  /** op_slot_idx: the op's position on its stream (curr_op_slot_idx[stream]). */
  readonly opSlotIdx: number;
  /** Bytes per copy slice (a half chunk) and per reduce slice (one CCE packet). */
  readonly copySliceBytes: number;
  readonly reduceSliceBytes: number;
  /** Pipeline slices: chunk groups the ring schedule repeats. */
  readonly pipelineSliceN: number;
  /** Chunk plan per replica group (groups may differ in size). */
  readonly plans: readonly ChunkPlan[];
  /** The algorithm each replica group resolved (groups of different shapes may differ). */
  readonly groupAlgs: readonly EncAlgType[];
}

export interface PostInputs {
  readonly scn: Scenario;
  readonly spec: DeviceSpec;
  readonly channels: number;
  readonly chunkBytes: number;
}

/** The program's ops are on several streams (mesh, RDH and kangaring refuse them, whether their gates run or a stage names them). */
export function multiStream(scn: Pick<Scenario, "ops">): boolean {
  return new Set(scn.ops.map((o) => o.stream)).size > 1;
}

/** The comm context of one replica group, from the scenario and the preset. */
export function commContext(inp: PostInputs, group: readonly number[]): CommContext {
  const { scn, spec } = inp;
  const allowed = scn.allowedAlgorithms ?? spec.collectives.supportedAlgorithms;
  const perNodeDevices = devicesPerNode(scn);
  const podNodes = podNodesOf(spec.topology, scn.nodes);
  const perNode = new Map<number, number>();
  const devices = new Set<number>();
  const pods = new Set<number>();
  for (const r of group) {
    const device = Math.floor(r / scn.ranksPerDevice);
    devices.add(device);
    const node = Math.floor(device / perNodeDevices);
    perNode.set(node, (perNode.get(node) ?? 0) + 1);
    pods.add(Math.floor(node / podNodes));
  }
  return {
    commType: perNode.size > 1 ? CommType.INTER : CommType.INTRA,
    rankN: group.length,
    nodeN: perNode.size,
    // The group's ranks on each node; when nodes hold different numbers, the fewest (so that
    // node_n * local_rank_n != rank_n says the group is not a node-by-position grid).
    localRankN: Math.min(...perNode.values()),
    deviceN: devices.size,
    podN: pods.size,
    vcoreSize: spec.collectives.virtualCoreSize,
    multiStream: multiStream(scn),
    allowedBits: allowedMask(allowed.filter((a) => spec.collectives.supportedAlgorithms.includes(a))),
    meshSupported: spec.collectives.supportedAlgorithms.includes(EncAlgType.MESH),
    podEnabled: spec.collectives.supportedAlgorithms.includes(EncAlgType.TWO_STEP_POD_MESH),
    neuronSwitch: spec.collectives.supportedAlgorithms.includes(EncAlgType.LATENCY_OPT_MESH) || spec.collectives.supportedAlgorithms.includes(EncAlgType.BW_OPT_MESH),
    srcTargetPairsId: -1,
    hierarchicalCc: 0,
    rdhCcMode: allowed.includes(EncAlgType.INTRA_RDH) ? 1 : 0,
    dbg: 0,
  };
}

const ok = (reason: string): Verdict => ({ ok: true, reason });
const no = (reason: string): Verdict => ({ ok: false, reason });

/** An algorithm's comm-init verdict, then whether it serves the op (its registry entry's ops). */
function familyGate(init: CommInit, alg: EncAlgType, opType: EncOpType, what: string): Verdict {
  const a = init.allowed[alg]!.verdict;
  if (!a.ok) return no(`${ALG_ENUM_NAME[alg]} not allowed: ${a.reason}`);
  if (!algorithmEntry(alg).ops.includes(opType)) return no(`${what} does not serve op_type ${opType}`);
  return ok(a.reason);
}

/** The six enc_can_post_* gates for one op. All run; none short-circuits another. */
export function runGates(init: CommInit, c: CommContext, spec: DeviceSpec, opType: EncOpType, bytes: number, limits: ComposerLimits = {}, esize = 1): { gate: Gate; verdict: Verdict }[] {
  /** A mesh-tape program runs on the DMA engines the ring channels leave free: there must be one. */
  const engines = (): Verdict => {
    if (limits.meshEngines === undefined || limits.meshEngines >= 1) return ok("");
    return no(`the ring channels' folds take every DMA engine of the rank: none is left for a mesh-tape program [CMP1306]`);
  };
  const steps = (alg: EncAlgType) => (): Verdict => {
    const e = engines();
    if (!e.ok || limits.meshEngines === undefined) return e;
    return keep(stepLimit(alg, opType, bytes, c.rankN, esize, spec, limits.meshEngines, limits.reduceSliceBytes ?? spec.dma.maxDescriptorBytes, limits.copyBytes));
  };
  const meshLimit = c.nodeN === 1 && c.rankN === 2 ? spec.collectives.meshMaxBytesTwoRanks : c.nodeN > 1 ? (spec.collectives.meshMaxBytesMultiNode ?? spec.collectives.meshMaxBytes) : spec.collectives.meshMaxBytes;
  // The subtypes' size windows apply to the bytes per rank.
  const perRank = Math.ceil(bytes / c.rankN);
  /** One mesh-family member's admission: its allowed bit, its ops, its subtype's size window, its steps. */
  const meshMember = (alg: EncAlgType): Verdict => {
    const entry = algorithmEntry(alg);
    const v = familyGate(init, alg, opType, alg === EncAlgType.MESH ? "mesh" : entry.label);
    if (!v.ok) return v;
    // The subtype windows are the collectives' op_max_limit, on the block each peer sends (t1's
    // limit is min(0x8000, the channel buffer per group)); all-to-all has no other home than mesh.
    if (!COLLECTIVES.includes(opType)) return andThen(ok("all-to-all is served by mesh at any size"), engines);
    const sent = entry.peerBlock?.(opType, bytes, c.rankN) ?? { bytes: perRank, what: "per rank" };
    const subtype = alg === EncAlgType.MESH ? "the mesh subtype's" : `the ${entry.label} subtype's`;
    if (sent.bytes > meshLimit) return no(`${sent.bytes} bytes ${sent.what} is above ${subtype} op_max_limit (${meshLimit})`);
    const layout = entry.groupLayout && limits.group ? () => entry.groupLayout!(limits.group!.members, limits.group!.where) : undefined;
    return andThen(andThen(ok(`${sent.bytes} bytes ${sent.what} within op_max_limit ${meshLimit}`), layout), steps(alg));
  };
  /** enc_can_post_mesh: the first mesh-family member this build composes that admits the op (MESH's refusal otherwise). */
  const mesh = ((): Verdict => {
    // (MESH's own reason says what would allow it: a switch, the instance, several streams.)
    if (init.family !== "mesh") return no(`comm init built no mesh family (no mesh algorithm allowed; MESH: ${init.allowed[EncAlgType.MESH]!.verdict.reason})`);
    // Refused: the first allowed member's reason (MESH's when none is allowed).
    let refusal: Verdict | undefined;
    let meshRefusal: Verdict | undefined;
    for (const e of meshVariants()) {
      const v = meshMember(e.alg);
      if (v.ok) return e.alg === EncAlgType.MESH ? v : { ok: true, reason: `${e.label}: ${v.reason}`, variant: e.alg };
      if (e.alg === EncAlgType.MESH) meshRefusal = v;
      if (init.allowed[e.alg]!.verdict.ok) refusal ??= e.alg === EncAlgType.MESH ? v : no(`${e.label}: ${v.reason}`);
    }
    return refusal ?? meshRefusal ?? no("no mesh-family algorithm this build composes is allowed");
  })();
  return [
    { gate: "kangaring", verdict: andThen(familyGate(init, EncAlgType.KANGARING, opType, "kangaring"), limits.kangaring) },
    { gate: "mesh", verdict: mesh },
    { gate: "intra_rdh", verdict: andThen(rdhWindow(familyGate(init, EncAlgType.INTRA_RDH, opType, "intra RDH"), spec, perRank), steps(EncAlgType.INTRA_RDH)) },
    { gate: "inter_rdh", verdict: andThen(familyGate(init, EncAlgType.INTER_RDH, opType, "inter RDH"), steps(EncAlgType.INTER_RDH)) },
    { gate: "single_cycle_ring", verdict: familyGate(init, EncAlgType.SINGLE_CYCLE_RING, opType, "single-cycle ring (all-reduce only)") },
    { gate: "hierarchical", verdict: andThen(andThen(familyGate(init, EncAlgType.HIER, opType, "hierarchical"), () => flatRingWindow(spec, perRank)), limits.hierarchical) },
  ];
}

/** A gate's verdict, then (when it admits) the composer's own limits. */
function andThen(v: Verdict, limits?: () => Verdict): Verdict {
  if (!v.ok || !limits) return v;
  const l = limits();
  return l.ok ? (l.reason ? ok(`${v.reason}; ${l.reason}`) : v) : l;
}

/** A limit's refusal as is; its admission adds nothing to the gate's reason. */
function keep(v: Verdict): Verdict {
  return v.ok ? ok("") : v;
}

/** Large messages across nodes take the flat ring on an instance with a flatRingMinBytes (hardware-facts.md §7.2). */
function flatRingWindow(spec: DeviceSpec, perRank: number): Verdict {
  const from = spec.collectives.flatRingMinBytes;
  if (from === undefined) return ok("");
  if (perRank >= from) return no(`${perRank} bytes per rank is at or above flatRingMinBytes (${from}): this runtime runs large messages across nodes on the flat ring`);
  return ok(`${perRank} bytes per rank below flatRingMinBytes (${from})`);
}

/** RDH is a mesh subtype with its own op_min_limit / op_max_limit window, on the bytes per rank (as the mesh's). */
function rdhWindow(v: Verdict, spec: DeviceSpec, perRank: number): Verdict {
  if (!v.ok) return v;
  const { rdhMinBytes: lo, rdhMaxBytes: hi } = spec.collectives;
  if (perRank < lo || perRank > hi) return no(`${perRank} bytes per rank is outside the RDH subtype's window [${lo}, ${hi}]`);
  return hi === Number.MAX_SAFE_INTEGER && lo === 0 ? v : ok(`${v.reason}; ${perRank} bytes per rank within [${lo}, ${hi}]`);
}

/**
 * The fixed precedence over the gates' results, the registry's order:
 * HIER (only when no flat-ring family is feasible) > INTRA_RDH > MESH > KANGARING > SINGLE_CYCLE_RING > INTER_RDH > RING.
 */
export function resolveAlgorithm(can: Readonly<Record<Gate, boolean>>, ringDrvAlg = false): EncAlgType {
  for (const e of precedenceOrder()) {
    if (e.gate === undefined) return e.alg;
    if (!can[e.gate]) continue;
    if (e.yieldsTo && (e.yieldsTo.some((g) => can[g]) || ringDrvAlg)) continue;
    return e.alg;
  }
  return EncAlgType.RING;
}

/** The precedence over a battery's verdicts, the mesh slot resolved to the member its gate admitted. */
export function resolvedAlgorithm(gates: readonly { gate: Gate; verdict: Verdict }[]): EncAlgType {
  const can = Object.fromEntries(gates.map((x) => [x.gate, x.verdict.ok])) as Record<Gate, boolean>;
  return meshMemberOf(resolveAlgorithm(can), gates);
}

/** The cascade's mesh slot stands for the mesh-family member its gate admitted; any other algorithm for itself. */
export function meshMemberOf(alg: EncAlgType, gates: readonly { gate: Gate; verdict: Verdict }[]): EncAlgType {
  return alg === EncAlgType.MESH ? (gates.find((x) => x.gate === "mesh")!.verdict.variant ?? alg) : alg;
}

/**
 * Bytes per CCE packet of an op (the operation's reduce slice): its priority class's, within its
 * CC DMA packet (`packet`: `opPacketBytes`, by default one descriptor) and the CCE's element cap.
 */
export function opReduceSlice(spec: DeviceSpec, dtype: OpSpec["dtype"], priorityClass: number, packet = spec.dma.maxDescriptorBytes): number {
  const esize = dtypeSize(dtype);
  return Math.max(32, Math.floor(Math.min(packet, spec.dma.cceMaxElements * esize, spec.collectives.cceReducePacketBytes[priorityClass]!) / 32) * 32);
}

/**
 * An op's CC DMA packet, the most bytes one of its descriptors moves: its stream's size from the
 * scenario (`ccDmaPacketBytes`, the runtime's NEURON_RT_DBG_CC_DMA_PACKET_SIZE; 64 KiB when not
 * given) within the preset's descriptor cap.
 */
export function opPacketBytes(spec: DeviceSpec, scn: Pick<Scenario, "ccDmaPacketBytes">, op: Pick<OpSpec, "stream">): number {
  const list = scn.ccDmaPacketBytes;
  return Math.min(spec.dma.maxDescriptorBytes, list ? list[Math.min(op.stream, list.length - 1)]! : spec.dma.maxDescriptorBytes);
}

/**
 * DMA engines a rank's mesh-tape program gets: what `sets` channel sets of ring channels leave of
 * the rank's engines, within the 32-engine broadcast window its first engine sits in.
 */
export function meshEngines(spec: DeviceSpec, channels: number, sets: number, core = 0): number {
  const perRank = spec.dma.enginesPerCore * spec.collectives.virtualCoreSize;
  return Math.min(perRank, 32 - ((core * perRank) % 32)) - sets * channels * spec.ring.foldN;
}

/** The chunk plan of an op over a group of n ranks: all-reduce blocks round up, the others split evenly. */
export function opPlan(opType: EncOpType, count: number, n: number, chunkBytes: number, esize: number, channels: number): ChunkPlan {
  const blockElems = opType === EncOpType.ALLREDUCE ? Math.ceil(count / n) : Math.floor(count / n);
  return planChunks(Math.max(1, blockElems), chunkBytes, esize, channels);
}

function notYet(what: string, path: string, value: unknown): never {
  throw new CompileError("CMP1203", `${what} is not supported yet`, { path, value });
}

/**
 * The 13-case enc_op_type dispatch: route the op to its handler (the op registry's), or fail as
 * the runtime does. Returns when the op goes to a composer this build has.
 */
export function dispatch(opType: EncOpType, alg: EncAlgType, rankN: number, path: string): void {
  const algName = `algorithm ${alg} ${ALG_ENUM_NAME[alg]} ("${ENC_ALG_NAME[alg]}")`;
  const handler = OPS[opType]?.handler ?? "unsupported";
  switch (handler) {
    case "collective":
      if (!builtAlgorithms().includes(alg)) notYet(algName, path, alg);
      return;
    case "p2p":
      // The ring family's p2p_channel.
      if (alg !== EncAlgType.RING) notYet(`${algName} for point-to-point`, path, alg);
      return;
    case "alltoall":
      // ALLTOALL and ALLTOALL_V share one handler, which asserts alg == ENC_ALG_MESH.
      if (alg !== EncAlgType.MESH) throw new CompileError("CMP1201", `alltoall cannot be supported without Mesh algorithm, rank_n(${rankN})`, { path, value: opType });
      return;
    case "permute":
      // PERMUTE_IMPLICIT shares the permute handler.
      if (alg !== EncAlgType.RING) notYet(`${algName} in the permute handler`, path, alg);
      return;
    case "permute-reduce":
      // The explicit and implicit permute-reduce share one handler.
      if (alg !== EncAlgType.RING) notYet(`${algName} in the permute-reduce handler`, path, alg);
      return;
    case "unsupported":
      // BROADCAST and REDUCE fall to the default branch.
      throw new CompileError("CMP1202", `not supported operation (op_type ${opType})`, { path, value: opType });
  }
}

