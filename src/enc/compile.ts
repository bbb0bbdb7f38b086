// The composer entry: post each op (dispatch on enc_op_type, resolve the algorithm), place the ring
// channels on TopSPs / DMA engines / semaphores, compose every rank's channels, emit the image.
import { dtypeSize } from "../ir/dtypes.ts";
import { EncAlgType, EncOpType, encAlgorithmName } from "../ir/enums.ts";
import { CompileError } from "../ir/errors.ts";
import type { DeviceSpec, OpSpec, Scenario } from "../ir/spec.ts";
import { ALG_NAMES, acrossNodes } from "../ir/spec.ts";
import { NeighType } from "../encd/channel.ts";
import { semaAddr } from "../encd/address.ts";
import { ProgramBuilder, type BarrierRank, type EncdChannel, type MeshProgram, type ProgramImage } from "../encd/program.ts";
import { validateCcops } from "../encd/validate.ts";
import type { ChunkPlan } from "./chunks.ts";
import { checkSignatures, postOperations, type EncOperation, type Explanation } from "./post.ts";
import { commInfos, parseReplicaGroups, type CommInfo } from "./groups.ts";
import { composeChannelPermute, composeChannelRing, type NetHop, type RankBuffers } from "./ring.ts";
import type { ProxyEntry } from "../encd/proxy.ts";
import { composeMesh, meshSlotBytes, type MeshRank } from "./mesh.ts";
import { composeRdh, rdhStepSemas, type RdhRank } from "./rdh.ts";
import { composeChannelKangaring } from "./kangaring.ts";
import { planChunks } from "./chunks.ts";

import { StepFlag } from "../encd/slot.ts";
import { adjacency, deviceRing, deviceRings } from "./topology.ts";

export interface BufferRef {
  readonly addr: number;
  readonly bytes: number;
}

export interface RankLayout {
  readonly rank: number;
  readonly group: number;
  readonly groupRank: number;
  readonly device: number;
  readonly input: BufferRef;
  readonly output: BufferRef;
  /** Receive buffer of each channel. */
  readonly chbuf: readonly BufferRef[];
}

export interface OpLayout {
  readonly index: number;
  readonly spec: OpSpec;
  readonly opType: EncOpType;
  readonly algorithm: EncAlgType;
  /** Elements as nccom-test counts them (size / element size). */
  readonly count: number;
  readonly plan: readonly ChunkPlan[];
  readonly operation: EncOperation;
  readonly ranks: readonly RankLayout[];
}

export interface ProgramLayout {
  readonly channels: number;
  readonly foldN: number;
  /** Per replica group: the ring (global ranks) each channel follows, and whether it follows links. */
  readonly rings: readonly { readonly group: readonly number[]; readonly channels: readonly (readonly number[])[]; readonly followsLinks: boolean }[];
  readonly ops: readonly OpLayout[];
}

export interface CompiledProgram {
  readonly image: ProgramImage;
  readonly layout: ProgramLayout;
  /** postOperation's reasoning for every op of the scenario (per replica group). */
  readonly explain: readonly Explanation[];
  /** Things comm init logs (e.g. RDH skipped for want of mesh). */
  readonly warnings: readonly string[];
}

function check(cond: boolean, code: string, message: string, path: string, value: unknown): void {
  if (!cond) throw new CompileError(code, message, { path, value });
}

/** postOperation's reasoning for every op, without composing anything (for --explain when an op is refused). */
export function explainScenario(scn: Scenario, spec: DeviceSpec): readonly Explanation[] {
  const groups = parseReplicaGroups(scn.replicaGroups, scn.ranks);
  const channels = scn.channels ?? spec.ring.defaultChannels;
  return postOperations({ scn, spec, groups, channels, chunkBytes: scn.chunkBytes ?? spec.ring.chunkBytes }).explain;
}

/** Compile the ops `opIndices` of a scenario into one program image (ops chained in order). */
export function compileProgram(scn: Scenario, spec: DeviceSpec, opIndices: readonly number[]): CompiledProgram {
  check(scn.nodes === 1 || spec.network !== undefined, "CMP1301", `${spec.name} has no network: a multi-node scenario needs a preset with a "network" section`, "nodes", scn.nodes);
  // A rank is one logical core: virtualCoreSize physical NeuronCores, with their TopSPs and DMA engines.
  const vcore = spec.collectives.virtualCoreSize;
  const ranksPerDeviceMax = Math.floor(spec.coresPerDevice / vcore);
  check(scn.ranksPerDevice <= ranksPerDeviceMax, "CMP1302", `${spec.name} has ${spec.coresPerDevice} NeuronCores per device, ${ranksPerDeviceMax} rank(s) at logical core size ${vcore}`, "ranksPerDevice", scn.ranksPerDevice);
  const deviceCount = scn.ranks / scn.ranksPerDevice / scn.nodes;
  check(Number.isInteger(deviceCount), "CMP1303", `${scn.ranks} ranks do not fill whole devices of ${scn.ranksPerDevice} on each of ${scn.nodes} nodes`, "ranks", scn.ranks);
  check(deviceCount <= spec.devices, "CMP1303", `${scn.ranks} ranks at ${scn.ranksPerDevice} per device need ${deviceCount} devices${scn.nodes > 1 ? " per node" : ""}; ${spec.name} has ${spec.devices}`, "ranks", scn.ranks);
  // Device ids per node: all of a table preset's devices; a ring preset's is sized to what is used.
  const idsPerNode = spec.topology.kind === "ring" ? deviceCount : spec.devices;
  check(idsPerNode * scn.nodes <= 32, "CMP1303", `${scn.nodes} nodes of ${idsPerNode} devices exceed the 32 device ids of the address map`, "nodes", scn.nodes);
  const channels = scn.channels ?? spec.ring.defaultChannels;
  const foldN = spec.ring.foldN;
  const enginesPerRank = spec.dma.enginesPerCore * vcore;
  check(channels * foldN <= enginesPerRank, "CMP1304", `${channels} channels x ${foldN} folds need more DMA engines than the ${enginesPerRank} per rank`, "channels", channels);
  const tsPerRank = (spec.topsp.perDevice / spec.coresPerDevice) * vcore;
  const slotsPerTopsp = Math.ceil(channels / tsPerRank);
  // Ring channels' semaphores, then the mesh / RDH program's (handshake, data, data2, completion, RDH steps).
  const meshSemas = 4 + rdhStepSemas(2 ** Math.floor(Math.log2(Math.max(...scn.replicaGroups.map((g) => g.length)))));
  check(3 * foldN * slotsPerTopsp + meshSemas + slotsPerTopsp + 3 <= spec.topsp.semaphores, "CMP1305", `${channels} channels need more semaphores than a TopSP has`, "channels", channels);

  const groups = parseReplicaGroups(scn.replicaGroups, scn.ranks);
  checkSignatures(scn, groups);
  const chunkBytes = scn.chunkBytes ?? spec.ring.chunkBytes;
  const posted = postOperations({ scn, spec, groups, channels, chunkBytes });
  const refused = posted.refused.find((e) => e !== undefined);
  if (refused) throw refused;
  const info = commInfos(groups, scn.ranks, scn.ranksPerDevice, scn.nodes, idsPerNode);
  const adj = acrossNodes(adjacency(spec.topology, idsPerNode), scn.nodes);

  // Ring order per group: device cycles that follow links (two edge-disjoint ones where the topology
  // has them: channels 2c and 2c+1 take cycle c mod 2, forward and reversed); ranks of one device
  // stay adjacent.
  const rings = groups.map((g) => {
    const nodesOfGroup = [...new Set(g.map((r) => info[r]!.node))].sort((a, b) => a - b);
    // Across nodes: each node's cycle opened into a path, the paths joined node after node (the
    // joins are network hops).
    const devices = g.map((r) => info[r]!.device);
    const perNode = nodesOfGroup.length > 1 ? nodesOfGroup.map((k) => deviceRing(adj, devices.filter((d) => Math.floor(d / idsPerNode) === k))) : [];
    const cycles = perNode.length > 0 ? [{ order: perNode.flatMap((dr) => dr.order), followsLinks: perNode.every((dr) => dr.followsLinks) }] : deviceRings(adj, devices);
    const orders = cycles.map((dr) => dr.order.flatMap((d) => g.filter((r) => info[r]!.device === d).sort((a, b) => a - b)));
    return {
      group: g,
      channels: Array.from({ length: channels }, (_, c) => {
        const base = orders[Math.floor(c / 2) % orders.length]!;
        return c % 2 === 0 ? base : [...base].reverse();
      }),
      followsLinks: cycles.every((dr) => dr.followsLinks),
    };
  });

  const builder = new ProgramBuilder({ arch: spec.arch, maxDescriptorBytes: spec.dma.maxDescriptorBytes, cceMaxElements: spec.dma.cceMaxElements, nodes: scn.nodes, devicesPerNode: idsPerNode });
  const place = (rank: number, c: number) => {
    const ci = info[rank]!;
    const slot = Math.floor(c / tsPerRank);
    // Per channel: foldN recv-count, foldN send-credit and foldN completion semaphores.
    const base = 3 * foldN * slot;
    return { topsp: ci.core * tsPerRank + (c % tsPerRank), slot, recv: base, send: base + foldN, compl: base + 2 * foldN };
  };
  const neighbor = (a: CommInfo, b: CommInfo) => ({ netIdxAddrs: [], foldN, type: a.device === b.device ? NeighType.LOCAL : NeighType.P2P });
  const ringPos = (gi: number, c: number, rank: number) => {
    const ring = rings[gi]!.channels[c]!;
    const i = ring.indexOf(rank);
    return { ring, i, next: ring[(i + 1) % ring.length]!, prev: ring[(i + ring.length - 1) % ring.length]! };
  };

  // Receive slots of a rank's channel: a network hop gets the network's deeper pool (its credits
  // cover a round trip through both proxies), a link hop the ring's.
  const recvSlots = (rank: number, c: number): number => {
    const prev = ringPos(info[rank]!.group, c, rank).prev;
    return info[prev]!.node !== info[rank]!.node ? spec.network!.bufferSlots : spec.ring.bufferSlots;
  };
  const sendSlots = (rank: number, c: number): number => recvSlots(ringPos(info[rank]!.group, c, rank).next, c);

  const chans = new Map<string, EncdChannel>();
  for (let rank = 0; rank < scn.ranks; rank++) {
    const ci = info[rank]!;
    for (let c = 0; c < channels; c++) {
      const { next, prev } = ringPos(ci.group, c, rank);
      const p = place(rank, c);
      chans.set(
        `${rank}/${c}`,
        builder.addChannel({
          device: ci.device,
          topsp: p.topsp,
          channelId: c,
          slot: p.slot,
          engines: Array.from({ length: foldN }, (_, f) => ci.core * enginesPerRank + c * foldN + f),
          queue: spec.dma.collectiveQueue,
          recvSema: p.recv,
          sendSema: p.send,
          complSema: p.compl,
          reporter: c === 0,
          next: neighbor(ci, info[next]!),
          prev: neighbor(ci, info[prev]!),
          initialCredits: sendSlots(rank, c),
        }),
      );
    }
  }

  // Mesh programs are built on first use: TopSP 0 of the rank's core, the engines the ring channels
  // leave free, four semaphores after the ring channels'.
  const meshBase = 3 * foldN * slotsPerTopsp;
  const meshPlace = (rank: number) => ({
    topsp: info[rank]!.core * tsPerRank,
    semas: { handshake: meshBase, data: meshBase + 1, data2: meshBase + 2, compl: meshBase + 3 },
  });
  const meshPrograms = new Map<number, MeshProgram>();
  const meshProgram = (rank: number): MeshProgram => {
    let m = meshPrograms.get(rank);
    if (!m) {
      const ci = info[rank]!;
      const first = ci.core * enginesPerRank + channels * foldN;
      const free = Math.min(enginesPerRank, 32 - ((ci.core * enginesPerRank) % 32)) - channels * foldN;
      const peers = Math.max(1, groups[ci.group]!.length - 1);
      if (free < 1) throw new CompileError("CMP1306", `mesh needs a DMA engine the ${channels} ring channels x ${foldN} folds do not use`, { path: "channels", value: channels });
      const engines = Array.from({ length: Math.min(free, peers) }, (_, k) => first + k);
      m = builder.addMesh({ device: ci.device, topsp: meshPlace(rank).topsp, engines, queue: spec.dma.collectiveQueue, complSema: meshPlace(rank).semas.compl });
      meshPrograms.set(rank, m);
    }
    return m;
  };
  /** Kangaring's view of a group: its chips in ring order, each chip's ranks (adjacent group ranks). */
  const kangaringGroup = (g: readonly number[], gi: number, opType: EncOpType, count: number, esize: number) => {
    const firstOrder = rings[gi]!.channels[0]!;
    const devices = [...new Set(firstOrder.map((r) => info[r]!.device))];
    const chips = devices.map((d, index) => ({ index, ranks: g.filter((r) => info[r]!.device === d).sort((a, b) => info[a]!.groupRank - info[b]!.groupRank) }));
    const m = chips[0]!.ranks.length;
    for (const chip of chips) {
      const base = info[chip.ranks[0]!]!.groupRank;
      const ok = chip.ranks.length === m && chip.ranks.every((r, j) => info[r]!.groupRank === base + j) && base % m === 0;
      if (!ok) throw new CompileError("CMP1307", `kangaring needs each device's ranks to be ${m} adjacent ranks of replica group ${gi}`, { path: `replicaGroups[${gi}]`, value: chip.ranks });
    }
    // Chip c holds group ranks [c*m, c*m + m): chip blocks follow ring order by their first rank.
    const ordered = chips.map((chip) => ({ ...chip, index: info[chip.ranks[0]!]!.groupRank / m }));
    const rankBlock = opType === EncOpType.ALLREDUCE ? Math.ceil(count / g.length) : count / g.length;
    return { chips: ordered, m, rankBlock, plan: planChunks(Math.max(1, m * rankBlock), chunkBytes, esize, channels) };
  };
  // Network hops: one proxy work queue per (rank, channel), triggered by a semaphore after the
  // mesh / RDH ones; sends across nodes stage in local slots first.
  const proxyBase = 3 * foldN * slotsPerTopsp + meshSemas;
  const proxyQueues = new Map<string, ProxyEntry[]>();
  const netHop = (rank: number, c: number, toNext: boolean, fromPrev: boolean, halfBytes: number): NetHop => {
    const ci = info[rank]!;
    const p = place(rank, c);
    const key = `${rank}/${c}`;
    let entries = proxyQueues.get(key);
    if (!entries) {
      entries = builder.addProxyQueue(ci.device, p.topsp, proxyBase + p.slot);
      proxyQueues.set(key, entries);
    }
    const staging = toNext ? builder.allocHbm(ci.device, sendSlots(rank, c) * halfBytes) : 0;
    return { toNext, fromPrev, proxyInc: semaAddr(ci.device, p.topsp, proxyBase + p.slot, "inc"), entries, staging, foldN };
  };
  // Device barriers: three semaphores after the proxy triggers, arrivals on the queue below the
  // collective one of an engine of the TopSP's own; one barrier per node (DMA writes stay inside it).
  const barrierBase = proxyBase + slotsPerTopsp;
  const barrierQueue = spec.dma.collectiveQueue - 1;
  const barrier = (took: readonly { device: number; topsp: number }[]): void => {
    const byNode = new Map<number, Map<string, { device: number; members: { topsp: number; engine: number }[] }>>();
    for (const t of [...took].sort((a, b) => a.device - b.device || a.topsp - b.topsp)) {
      const core = Math.floor(t.topsp / tsPerRank);
      const node = Math.floor(t.device / idsPerNode);
      const ranks = byNode.get(node) ?? new Map();
      byNode.set(node, ranks);
      const key = `${t.device}/${core}`;
      const r = ranks.get(key) ?? { device: t.device, members: [] };
      ranks.set(key, r);
      r.members.push({ topsp: t.topsp, engine: core * enginesPerRank + (t.topsp % tsPerRank) });
    }
    for (const ranks of byNode.values()) builder.deviceBarrier([...ranks.values()] satisfies BarrierRank[], barrierBase, barrierQueue);
  };
  const ops: OpLayout[] = [];
  for (const index of opIndices) {
    const op = scn.ops[index]!;
    const path = `ops[${index}]`;
    const operation = posted.operations[index]!;
    const { opType, alg: algorithm, plans } = operation;
    const esize = dtypeSize(op.dtype);
    const count = op.bytes / esize;
    builder.beginOp();
    // Kangaring: chips in ring order per group, and a chunk plan over chip blocks.
    const kang = algorithm === EncAlgType.KANGARING ? groups.map((g, gi) => kangaringGroup(g, gi, opType, count, esize)) : undefined;
    const buffers = new Map<number, RankBuffers & { scratch: number }>();
    const pairSource = op.pairs ? new Map(op.pairs.map(([a, b]) => [b, a])) : undefined;
    const rankLayouts: RankLayout[] = [];
    for (let rank = 0; rank < scn.ranks; rank++) {
      const ci = info[rank]!;
      const n = groups[ci.group]!.length;
      const { inBytes, outBytes } = bufferBytes(op, opType, n, ci.groupRank);
      const input = builder.allocHbm(ci.device, inBytes);
      const output = builder.allocHbm(ci.device, outBytes);
      const halfBytes = kang ? kang[ci.group]!.plan.halfBytes : plans[ci.group]!.halfBytes;
      // A pairs op's source cycles through as many of our slots as it has credits.
      const src = pairSource?.get(rank);
      const chbufBytes = Array.from({ length: channels }, (_, c) => Math.max(recvSlots(rank, c), src === undefined ? 0 : sendSlots(src, c)) * halfBytes);
      const chbuf = algorithm === EncAlgType.MESH || algorithm === EncAlgType.INTRA_RDH ? [] : chbufBytes.map((b) => builder.allocHbm(ci.device, b));
      const reduces = opType === EncOpType.ALLREDUCE || opType === EncOpType.REDUCE_SCATTER;
      // Mesh: one slot per peer; RDH: a working copy and the halving steps' landing slots.
      const scratch = reduces && (algorithm === EncAlgType.MESH || algorithm === EncAlgType.INTRA_RDH) ? builder.allocHbm(ci.device, (algorithm === EncAlgType.MESH ? n : 2 * n) * meshSlotBytes(op, opType, n)) : 0;
      buffers.set(rank, { input, output, chbuf, scratch });
      rankLayouts.push({ rank, group: ci.group, groupRank: ci.groupRank, device: ci.device, input: { addr: input, bytes: inBytes }, output: { addr: output, bytes: outBytes }, chbuf: chbuf.map((addr, c) => ({ addr, bytes: chbufBytes[c]! })) });
    }
    if (kang) {
      groups.forEach((g, gi) => {
        const k = kang[gi]!;
        for (let c = 0; c < channels; c++) {
          // The chips in this channel's device order (its cycle, forward or reversed).
          const devOrder = [...new Set(rings[gi]!.channels[c]!.map((r) => info[r]!.device))];
          const order = devOrder.map((d) => k.chips.find((chip) => info[chip.ranks[0]!]!.device === d)!);
          order.forEach((chip, idx) => {
            const primary = chip.ranks[0]!;
            const nextP = order[(idx + 1) % order.length]!.ranks[0]!;
            const prevP = order[(idx + order.length - 1) % order.length]!.ranks[0]!;
            const pn = place(nextP, c);
            const pp = place(prevP, c);
            const signals = composeChannelKangaring(
              { op, opType, plan: k.plan, count, rankBlock: k.rankBlock, m: k.m, chips: order.length, bufferSlots: spec.ring.bufferSlots, reduceSliceBytes: operation.reduceSliceBytes },
              c,
              chans.get(`${primary}/${c}`)!,
              {
                na: Array.from({ length: order.length }, (_, j) => order[(idx + j) % order.length]!.index),
                chip: chip.ranks.map((r) => buffers.get(r)!),
                chipBase: info[primary]!.groupRank,
                secondaryInc: chip.ranks.slice(1).map((r) => semaAddr(info[r]!.device, place(r, c).topsp, place(r, c).recv, "inc")),
                next: buffers.get(nextP)!,
                nextRecvInc: semaAddr(info[nextP]!.device, pn.topsp, pn.recv, "inc"),
                prevSendInc: semaAddr(info[prevP]!.device, pp.topsp, pp.send, "inc"),
              },
            );
            // A secondary only waits for its primary's writes into its output.
            for (const r of chip.ranks.slice(1)) {
              const ch = chans.get(`${r}/${c}`)!;
              for (let i = 0; i < signals; i++) ch.markStep(StepFlag.WAIT_RECV);
              ch.markEnd();
            }
          });
        }
      });
    } else if (algorithm === EncAlgType.INTRA_RDH) {
      groups.forEach((g) => {
        const ranks = g.map((rank): RdhRank => {
          const ci = info[rank]!;
          const b = buffers.get(rank)!;
          const m = meshPlace(rank);
          return { groupRank: ci.groupRank, device: ci.device, topsp: m.topsp, handshake: m.semas.handshake, local: m.semas.data, stepSema: m.semas.compl + 1, compl: m.semas.compl, input: b.input, output: b.output, scratch: b.scratch };
        });
        g.forEach((rank, k) => composeRdh({ op, opType, ranks, count, reduceSliceBytes: operation.reduceSliceBytes }, ranks[k]!, meshProgram(rank), `${path}.op`));
      });
    } else if (algorithm === EncAlgType.MESH) {
      groups.forEach((g) => {
        const ranks = g.map((rank): MeshRank => {
          const ci = info[rank]!;
          const b = buffers.get(rank)!;
          return { groupRank: ci.groupRank, device: ci.device, topsp: meshPlace(rank).topsp, semas: meshPlace(rank).semas, input: b.input, output: b.output, scratch: b.scratch };
        });
        g.forEach((rank, k) => composeMesh({ op, opType, ranks, count, reduceSliceBytes: operation.reduceSliceBytes }, ranks[k]!, meshProgram(rank)));
      });
    } else if (op.pairs) {
      op.pairs.forEach(([a, b], k) =>
        check(info[a]!.node === info[b]!.node, "CMP1308", `ranks ${a} and ${b} are on different nodes (${info[a]!.node} and ${info[b]!.node}): ${op.op} across nodes is not supported yet`, `${path}.pairs[${k}]`, [a, b]),
      );
      const targetOf = new Map(op.pairs.map(([a, b]) => [a, b]));
      const reduce = opType === EncOpType.PERMUTE_REDUCE || opType === EncOpType.PERMUTE_REDUCE_IMPLICIT;
      for (let rank = 0; rank < scn.ranks; rank++) {
        const t = targetOf.get(rank);
        const src = pairSource!.get(rank);
        for (let c = 0; c < channels; c++) {
          const pt = t === undefined ? undefined : place(t, c);
          const ps = src === undefined ? undefined : place(src, c);
          composeChannelPermute(
            { op, channels, pieceBytes: plans[info[rank]!.group]!.halfBytes, reduceSliceBytes: operation.reduceSliceBytes, reduce },
            c,
            chans.get(`${rank}/${c}`)!,
            {
              me: buffers.get(rank)!,
              target: t === undefined ? undefined : { buffers: buffers.get(t)!, recvInc: semaAddr(info[t]!.device, pt!.topsp, pt!.recv, "inc"), self: t === rank },
              source: src === undefined ? undefined : { sendInc: semaAddr(info[src]!.device, ps!.topsp, ps!.send, "inc"), self: src === rank },
              sendSlots: sendSlots(rank, c),
              recvSlots: src === undefined ? 0 : sendSlots(src, c),
            },
          );
        }
      }
    } else {
      for (let rank = 0; rank < scn.ranks; rank++) {
        const ci = info[rank]!;
        const g = groups[ci.group]!;
        for (let c = 0; c < channels; c++) {
          const { ring, i, next, prev } = ringPos(ci.group, c, rank);
          const na = Array.from({ length: ring.length }, (_, j) => info[ring[(i + j) % ring.length]!]!.groupRank);
          const pn = place(next, c);
          const pp = place(prev, c);
          const toNext = info[next]!.node !== ci.node;
          const fromPrev = info[prev]!.node !== ci.node;
          const net = toNext || fromPrev ? netHop(rank, c, toNext, fromPrev, plans[ci.group]!.halfBytes) : undefined;
          composeChannelRing(
            { op, opType, plan: plans[ci.group]!, count, rankN: g.length, reduceSliceBytes: operation.reduceSliceBytes },
            c,
            chans.get(`${rank}/${c}`)!,
            {
              na,
              me: buffers.get(rank)!,
              next: buffers.get(next)!,
              nextRecvInc: semaAddr(info[next]!.device, pn.topsp, pn.recv, "inc"),
              prevSendInc: semaAddr(info[prev]!.device, pp.topsp, pp.send, "inc"),
              sendSlots: sendSlots(rank, c),
              recvSlots: recvSlots(rank, c),
              ...(net ? { net } : {}),
            },
          );
        }
      }
    }
    const took = builder.endOp();
    // The end of a multi-op program: every rank of a node meets.
    if (opIndices.length > 1 && index === opIndices[opIndices.length - 1]) barrier(took);
    ops.push({ index, spec: op, opType, algorithm, count, plan: plans, operation, ranks: rankLayouts });
  }
  const image = builder.build();
  validateCcops(image);
  return { image, layout: { channels, foldN, rings, ops }, explain: posted.explain, warnings: posted.warnings };
}

/** The algorithm as the scenario names it (the runtime's printed names are ambiguous: two "RDH", and "Invalid" for the single-cycle ring). */
export function algorithmLabel(alg: EncAlgType): string {
  return (ALG_NAMES as readonly string[])[alg] ?? `alg${alg}`;
}

/** Input and output bytes of one rank for an op (group of n ranks). */
export function bufferBytes(op: OpSpec, opType: EncOpType, n: number, groupRank: number): { inBytes: number; outBytes: number } {
  switch (opType) {
    case EncOpType.ALLGATHER:
      return { inBytes: op.bytes / n, outBytes: op.bytes };
    case EncOpType.REDUCE_SCATTER:
      return { inBytes: op.bytes, outBytes: op.bytes / n };
    case EncOpType.ALLTOALL_V: {
      const c = op.counts!;
      return { inBytes: c[groupRank]!.reduce((a, b) => a + b, 0), outBytes: c.reduce((a, row) => a + row[groupRank]!, 0) };
    }
    default:
      return { inBytes: op.bytes, outBytes: op.bytes };
  }
}
