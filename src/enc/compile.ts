// The composer entry: post each op (dispatch on enc_op_type, resolve the algorithm), place the ring
// channels on TopSPs / DMA engines / semaphores, compose every rank's channels, emit the image.
import { dtypeSize } from "../ir/dtypes.ts";
import { EncAlgType, EncOpType, encAlgorithmName } from "../ir/enums.ts";
import { CompileError, InternalError } from "../ir/errors.ts";
import type { DeviceSpec, OpSpec, Scenario } from "../ir/spec.ts";
import { ALG_NAMES, acrossNodes, podLinked } from "../ir/spec.ts";
import { NeighType } from "../encd/channel.ts";
import { HBM_LIMIT, MAX_DEVICES, semaAddr } from "../encd/address.ts";
import { ProgramBuilder, type BarrierRank, type EncdChannel, type MeshProgram, type ProgramImage, type RingMode } from "../encd/program.ts";
import type { VringStore } from "../encd/vring.ts";
import { validateCcops } from "../encd/validate.ts";
import type { ChunkPlan } from "./chunks.ts";
import { checkSignatures, meshEngines, opPlan, postOperations, type EncOperation, type Explanation } from "./post.ts";
import { commInfos, parseReplicaGroups, type CommInfo } from "./groups.ts";
import { composeChannelPermute, composeChannelRing, type NetHop, type RankBuffers } from "./ring.ts";
import type { ProxyEntry } from "../encd/proxy.ts";
import { composeMesh, meshSlotBytes, type MeshRank } from "./mesh.ts";
import { composeRdh, rdhStepSemas, type RdhRank } from "./rdh.ts";
import { composeChannelKangaring } from "./kangaring.ts";
import { planChunks } from "./chunks.ts";

import { StepFlag } from "../encd/slot.ts";
import { adjacency, deviceRing, deviceRings } from "./topology.ts";
import { hierStages, type Comm, type RingSet, type Stage, type StageRecord } from "./hier.ts";
import type { NetQueue } from "./peer.ts";

/** A rank's buffers for one stage: input, output, ring receive slots, mesh / RDH scratch. */
interface StageBuffers extends RankBuffers {
  readonly chbufBytes: readonly number[];
  readonly scratch: number;
}

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
  /** A hierarchical op's stages (empty for a flat op), and the runtime's selection line for them. */
  readonly stages: readonly StageRecord[];
  readonly selections?: string;
}

export interface ProgramLayout {
  readonly channels: number;
  readonly foldN: number;
  /** Per replica group: the ring (global ranks) each channel follows, and whether it follows links. */
  readonly rings: readonly RingSet[];
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
  return drain(composeProgram(scn, spec, opIndices, { kind: "keep" }))!;
}

/**
 * The same program with streamed rings: the image holds every byte stream but the descriptor
 * rings, whose counts it knows (a first pass counts them); its feed composes the program again,
 * chunk group by chunk group, as the simulator's engines reach descriptors not yet emitted — so a
 * run holds the descriptors in flight, not the whole op's.
 */
export function compileStreamed(scn: Scenario, spec: DeviceSpec, opIndices: readonly number[]): CompiledProgram {
  const stores = new Map<string, VringStore>();
  const counted = drain(composeProgram(scn, spec, opIndices, { kind: "count", stores }))!;
  const again = composeProgram(scn, spec, opIndices, { kind: "stream", stores });
  let done = false;
  const feed = {
    pull(): boolean {
      if (done) return false;
      done = again.next().done === true;
      if (done) {
        // The second composition must emit exactly what the first counted.
        for (const d of counted.image.devices) {
          for (const q of d.queues) {
            const st = q.streamed!;
            if (st.tx.count !== st.txCount || st.rx.count !== st.rxCount) throw new InternalError(`dev${d.device} dma${q.engine} q${q.queue}: the streamed composition emitted ${st.tx.count}/${st.rx.count} descriptors, the counting one ${st.txCount}/${st.rxCount}`);
          }
        }
      }
      return true;
    },
  };
  return { ...counted, image: { ...counted.image, feed } };
}

function drain<T>(g: Generator<void, T>): T {
  for (;;) {
    const r = g.next();
    if (r.done) return r.value;
  }
}

/** One chunk group of each generator per round, until all are done; a streamed program hands over between rounds. */
function* rounds(gens: Generator<void, unknown>[]): Generator<void, void> {
  let live = gens;
  while (live.length > 0) {
    live = live.filter((g) => g.next().done !== true);
    if (live.length > 0) yield;
  }
}

/**
 * Compose the program: a generator that pauses between chunk groups of ring-type stages and
 * returns the compiled program (nothing in `stream` mode, whose only product is the descriptors).
 */
function* composeProgram(scn: Scenario, spec: DeviceSpec, opIndices: readonly number[], rings: RingMode): Generator<void, CompiledProgram | undefined> {
  // A pod (UltraServer) joins its nodes with NeuronLinks: DMA reaches every device, no proxy needed.
  const pod = podLinked(spec.topology, scn.nodes);
  check(scn.nodes === 1 || pod || spec.network !== undefined, "CMP1301", `${spec.name} has no network: a multi-node scenario needs a preset with a "network" section${spec.topology.kind === "table" && spec.topology.podNodes ? ` (or at most ${spec.topology.podNodes} nodes of its pod)` : ""}`, "nodes", scn.nodes);
  // A rank is one logical core: virtualCoreSize physical NeuronCores, with their TopSPs and DMA engines.
  const vcore = spec.collectives.virtualCoreSize;
  const ranksPerDeviceMax = Math.floor(spec.coresPerDevice / vcore);
  check(scn.ranksPerDevice <= ranksPerDeviceMax, "CMP1302", `${spec.name} has ${spec.coresPerDevice} NeuronCores per device, ${ranksPerDeviceMax} rank(s) at logical core size ${vcore}`, "ranksPerDevice", scn.ranksPerDevice);
  const deviceCount = scn.ranks / scn.ranksPerDevice / scn.nodes;
  check(Number.isInteger(deviceCount), "CMP1303", `${scn.ranks} ranks do not fill whole devices of ${scn.ranksPerDevice} on each of ${scn.nodes} nodes`, "ranks", scn.ranks);
  check(deviceCount <= spec.devices, "CMP1303", `${scn.ranks} ranks at ${scn.ranksPerDevice} per device need ${deviceCount} devices${scn.nodes > 1 ? " per node" : ""}; ${spec.name} has ${spec.devices}`, "ranks", scn.ranks);
  // Device ids per node: all of a table preset's devices; a ring preset's is sized to what is used.
  const idsPerNode = spec.topology.kind === "ring" ? deviceCount : spec.devices;
  check(idsPerNode * scn.nodes <= MAX_DEVICES, "CMP1303", `${scn.nodes} nodes of ${idsPerNode} devices exceed the ${MAX_DEVICES} device ids of the address map`, "nodes", scn.nodes);
  const channels = scn.channels ?? spec.ring.defaultChannels;
  const foldN = spec.ring.foldN;
  const enginesPerRank = spec.dma.enginesPerCore * vcore;
  const tsPerRank = (spec.topsp.perDevice / spec.coresPerDevice) * vcore;
  const slotsPerTopsp = Math.ceil(channels / tsPerRank);

  const groups = parseReplicaGroups(scn.replicaGroups, scn.ranks);
  checkSignatures(scn, groups);
  const chunkBytes = scn.chunkBytes ?? spec.ring.chunkBytes;
  const posted = postOperations({ scn, spec, groups, channels, chunkBytes });
  const refused = posted.refused.find((e) => e !== undefined);
  if (refused) throw refused;
  const info = commInfos(groups, scn.ranks, scn.ranksPerDevice, scn.nodes, idsPerNode);
  const adj = acrossNodes(adjacency(spec.topology, idsPerNode), scn.nodes, pod);
  /** Traffic between these devices goes through the network proxies (different nodes, no pod links). */
  const crossesNetwork = (a: number, b: number) => !pod && Math.floor(a / idsPerNode) !== Math.floor(b / idsPerNode);
  const viaNetwork = (a: number, b: number) => crossesNetwork(info[a]!.device, info[b]!.device);

  // Channel sets: 0 for the replica groups' own rings; a hierarchical op adds 1 (its intra-node
  // stages) and 2 (its inter-node stage), each with its own semaphores, slots and DMA engines.
  const hier = opIndices.some((i) => posted.operations[i]!.groupAlgs.includes(EncAlgType.HIER));
  // A pipelined hierarchical all-reduce runs its intra all-gather beside the next slices' intra
  // reduce-scatter: a fourth channel set.
  const pipelined = hier && scn.hierarchical.slices > 1;
  const sets = hier ? (pipelined ? 4 : 3) : 1;
  check(sets * channels * foldN <= enginesPerRank, "CMP1304", `${channels} channels x ${foldN} folds${sets > 1 ? ` x ${sets} channel sets (hierarchical)` : ""} need more DMA engines than the ${enginesPerRank} per rank`, "channels", channels);
  check(sets * channels <= 32, "CMP1304", `${sets} channel sets of ${channels} channels exceed the 32 ring channel records`, "channels", channels);
  // Ring channels' semaphores, then the mesh / RDH program's (handshake, data, data2, completion,
  // RDH steps), the proxy triggers (one per slot), the device barrier's three.
  const ringSemas = 3 * foldN * slotsPerTopsp * sets;
  const meshSemas = 4 + rdhStepSemas(2 ** Math.floor(Math.log2(Math.max(...scn.replicaGroups.map((g) => g.length)))));
  const proxyBase = ringSemas + meshSemas;
  const barrierBase = proxyBase + sets * slotsPerTopsp;
  // Then the trigger of the proxy queue of a mesh-tape program (mesh, RDH) across nodes.
  const meshProxySema = barrierBase + 3;
  check(meshProxySema + 1 <= spec.topsp.semaphores, "CMP1305", `${channels} channels need more semaphores than a TopSP has`, "channels", channels);

  // Ring order per group: device cycles that follow links (two edge-disjoint ones where the topology
  // has them: channels 2c and 2c+1 take cycle c mod 2, forward and reversed); ranks of one device
  // stay adjacent.
  const ringsOf = (g: readonly number[]): RingSet => {
    const nodesOfGroup = [...new Set(g.map((r) => info[r]!.node))].sort((a, b) => a - b);
    // Across nodes: each node's cycle opened into a path, the paths joined node after node (the
    // joins are network hops).
    const devices = [...new Set(g.map((r) => info[r]!.device))];
    const perNode = nodesOfGroup.length > 1 && !pod ? nodesOfGroup.map((k) => deviceRing(adj, devices.filter((d) => Math.floor(d / idsPerNode) === k))) : [];
    const cycles = perNode.length > 0 ? [{ order: perNode.flatMap((dr) => dr.order), followsLinks: perNode.every((dr) => dr.followsLinks) }] : deviceRings(adj, devices);
    const orders = cycles.map((dr) => dr.order.flatMap((d) => g.filter((r) => info[r]!.device === d).sort((a, b) => a - b)));
    return {
      group: g,
      channels: Array.from({ length: channels }, (_, c) => {
        const base = orders[Math.floor(c / 2) % orders.length]!;
        return c % 2 === 0 ? base : [...base].reverse();
      }),
      cycle: Array.from({ length: channels }, (_, c) => Math.floor(c / 2) % orders.length),
      followsLinks: cycles.every((dr) => dr.followsLinks),
    };
  };
  const makeComm = (set: number, gs: readonly (readonly number[])[]): Comm => {
    const pos = new Map<number, { group: number; groupRank: number }>();
    gs.forEach((g, gi) => g.forEach((r, k) => pos.set(r, { group: gi, groupRank: k })));
    return { set, groups: gs, pos, rings: gs.map(ringsOf) };
  };
  /** The ranks of a comm, in rank order. */
  const members = (comm: Comm): number[] => [...comm.pos.keys()].sort((a, b) => a - b);
  /** The part of a comm made of the groups `keep` admits (same channel set, same rings). */
  const subComm = (comm: Comm, keep: (g: readonly number[]) => boolean): Comm => {
    const idx = comm.groups.map((g, gi) => (keep(g) ? gi : -1)).filter((gi) => gi >= 0);
    const gs = idx.map((gi) => comm.groups[gi]!);
    const pos = new Map<number, { group: number; groupRank: number }>();
    gs.forEach((g, gi) => g.forEach((r, k) => pos.set(r, { group: gi, groupRank: k })));
    return { set: comm.set, groups: gs, pos, rings: idx.map((gi) => comm.rings[gi]!) };
  };
  const main = makeComm(0, groups);
  // A hierarchical op's levels: each replica group split by node (order kept), and the ranks at
  // the same position on every node.
  const hierComms = hier
    ? (() => {
        const intra: number[][] = [];
        const inter: number[][] = [];
        for (const [gi, g] of groups.entries()) {
          if (!opIndices.some((i) => posted.operations[i]!.groupAlgs[gi] === EncAlgType.HIER)) continue;
          const nodes = [...new Set(g.map((r) => info[r]!.node))].sort((a, b) => a - b);
          const perNode = nodes.map((k) => g.filter((r) => info[r]!.node === k));
          intra.push(...perNode);
          for (let l = 0; l < perNode[0]!.length; l++) inter.push(perNode.map((p) => p[l]!));
        }
        return { intra: makeComm(1, intra), inter: makeComm(2, inter), ...(pipelined ? { intraAg: makeComm(3, intra) } : {}) };
      })()
    : undefined;

  const builder = new ProgramBuilder({ arch: spec.arch, maxDescriptorBytes: spec.dma.maxDescriptorBytes, cceMaxElements: spec.dma.cceMaxElements, nodes: scn.nodes, devicesPerNode: idsPerNode }, rings);
  /** Channel c of set `set`: channel 0 of every set sits on the rank's first TopSP (the reporter's). */
  const place = (rank: number, set: number, c: number) => {
    const ci = info[rank]!;
    const slot = set * slotsPerTopsp + Math.floor(c / tsPerRank);
    // Per channel: foldN recv-count, foldN send-credit and foldN completion semaphores.
    const base = 3 * foldN * slot;
    return { topsp: ci.core * tsPerRank + (c % tsPerRank), slot, recv: base, send: base + foldN, compl: base + 2 * foldN };
  };
  const neighbor = (a: CommInfo, b: CommInfo) => ({ netIdxAddrs: [], foldN, type: a.device === b.device ? NeighType.LOCAL : NeighType.P2P });
  const ringPos = (comm: Comm, c: number, rank: number) => {
    const ring = comm.rings[comm.pos.get(rank)!.group]!.channels[c]!;
    const i = ring.indexOf(rank);
    return { ring, i, next: ring[(i + 1) % ring.length]!, prev: ring[(i + ring.length - 1) % ring.length]! };
  };

  // Receive slots of a rank's channel: a network hop gets the network's deeper pool (its credits
  // cover a round trip through both proxies), a link hop the ring's.
  const recvSlots = (comm: Comm, rank: number, c: number): number => {
    const prev = ringPos(comm, c, rank).prev;
    return viaNetwork(prev, rank) ? spec.network!.bufferSlots : spec.ring.bufferSlots;
  };
  const sendSlots = (comm: Comm, rank: number, c: number): number => recvSlots(comm, ringPos(comm, c, rank).next, c);

  const chans = new Map<string, EncdChannel>();
  const chan = (comm: Comm, rank: number, c: number): EncdChannel => chans.get(`${comm.set}/${rank}/${c}`)!;
  for (const comm of [main, ...(hierComms ? [hierComms.intra, hierComms.inter, ...(hierComms.intraAg ? [hierComms.intraAg] : [])] : [])]) {
    for (const rank of members(comm)) {
      const ci = info[rank]!;
      for (let c = 0; c < channels; c++) {
        const { next, prev } = ringPos(comm, c, rank);
        const p = place(rank, comm.set, c);
        const id = comm.set * channels + c;
        chans.set(
          `${comm.set}/${rank}/${c}`,
          builder.addChannel({
            device: ci.device,
            topsp: p.topsp,
            channelId: id,
            slot: p.slot,
            engines: Array.from({ length: foldN }, (_, f) => ci.core * enginesPerRank + id * foldN + f),
            queue: spec.dma.collectiveQueue,
            recvSema: p.recv,
            sendSema: p.send,
            complSema: p.compl,
            reporter: c === 0,
            next: neighbor(ci, info[next]!),
            prev: neighbor(ci, info[prev]!),
            initialCredits: sendSlots(comm, rank, c),
          }),
        );
      }
    }
  }

  // Mesh programs are built on first use: TopSP 0 of the rank's core, the engines the ring channels
  // leave free, four semaphores after the ring channels'.
  const meshBase = ringSemas;
  const meshPlace = (rank: number) => ({
    topsp: info[rank]!.core * tsPerRank,
    semas: { handshake: meshBase, data: meshBase + 1, data2: meshBase + 2, compl: meshBase + 3 },
  });
  const meshPrograms = new Map<number, MeshProgram>();
  const meshProgram = (comm: Comm, rank: number): MeshProgram => {
    let m = meshPrograms.get(rank);
    if (!m) {
      const ci = info[rank]!;
      const used = sets * channels * foldN;
      const first = ci.core * enginesPerRank + used;
      const free = meshEngines(spec, channels, sets, ci.core);
      const peers = Math.max(1, comm.groups[comm.pos.get(rank)!.group]!.length - 1);
      if (free < 1) throw new CompileError("CMP1306", `mesh needs a DMA engine the ${channels} ring channels x ${foldN} folds${sets > 1 ? ` x ${sets} channel sets` : ""} do not use`, { path: "channels", value: channels });
      // One engine per peer, at least the preset's mesh folds, within what the ring channels leave.
      const engines = Array.from({ length: Math.min(free, Math.max(peers, spec.collectives.meshFolds)) }, (_, k) => first + k);
      m = builder.addMesh({ device: ci.device, topsp: meshPlace(rank).topsp, engines, queue: spec.dma.collectiveQueue, complSema: meshPlace(rank).semas.compl });
      meshPrograms.set(rank, m);
    }
    return m;
  };
  /** Kangaring's view of a group: its chips in ring order, each chip's ranks (adjacent group ranks). */
  const kangaringGroup = (comm: Comm, gi: number, opType: EncOpType, count: number, esize: number) => {
    const g = comm.groups[gi]!;
    const gr = (r: number) => comm.pos.get(r)!.groupRank;
    const firstOrder = comm.rings[gi]!.channels[0]!;
    const devices = [...new Set(firstOrder.map((r) => info[r]!.device))];
    const chips = devices.map((d, index) => ({ index, ranks: g.filter((r) => info[r]!.device === d).sort((a, b) => gr(a) - gr(b)) }));
    const m = chips[0]!.ranks.length;
    for (const chip of chips) {
      const base = gr(chip.ranks[0]!);
      const ok = chip.ranks.length === m && chip.ranks.every((r, j) => gr(r) === base + j) && base % m === 0;
      if (!ok) throw new CompileError("CMP1307", `kangaring needs each device's ranks to be ${m} adjacent ranks of replica group ${gi}`, { path: `replicaGroups[${gi}]`, value: chip.ranks });
    }
    // Chip c holds group ranks [c*m, c*m + m): chip blocks follow ring order by their first rank.
    const ordered = chips.map((chip) => ({ ...chip, index: gr(chip.ranks[0]!) / m }));
    const rankBlock = opType === EncOpType.ALLREDUCE ? Math.ceil(count / g.length) : count / g.length;
    return { chips: ordered, m, rankBlock, plan: planChunks(Math.max(1, m * rankBlock), chunkBytes, esize, channels) };
  };
  // Network hops: one proxy work queue per (rank, channel), triggered by a semaphore after the
  // mesh / RDH ones; sends across nodes stage in local slots first.
  const proxyQueues = new Map<string, ProxyEntry[]>();
  const proxyQueue = (comm: Comm, rank: number, c: number): { entries: ProxyEntry[]; proxyInc: number } => {
    const ci = info[rank]!;
    const p = place(rank, comm.set, c);
    const key = `${comm.set}/${rank}/${c}`;
    let entries = proxyQueues.get(key);
    if (!entries) {
      entries = builder.addProxyQueue(ci.device, p.topsp, proxyBase + p.slot);
      proxyQueues.set(key, entries);
    }
    return { entries, proxyInc: semaAddr(ci.device, p.topsp, proxyBase + p.slot, "inc") };
  };
  const netHop = (comm: Comm, rank: number, c: number, toNext: boolean, fromPrev: boolean, halfBytes: number): NetHop => {
    const staging = toNext ? builder.allocHbm(info[rank]!.device, sendSlots(comm, rank, c) * halfBytes) : 0;
    return { toNext, fromPrev, ...proxyQueue(comm, rank, c), staging, foldN };
  };

  /** A rank's network proxy queue for its mesh-tape programs (mesh, RDH), made on first use. */
  const meshProxies = new Map<number, NetQueue>();
  const meshProxy = (rank: number): NetQueue => {
    let q = meshProxies.get(rank);
    if (!q) {
      const ci = info[rank]!;
      const ts = meshPlace(rank).topsp;
      q = { entries: builder.addProxyQueue(ci.device, ts, meshProxySema), trigger: semaAddr(ci.device, ts, meshProxySema, "inc"), remote: (d) => crossesNetwork(ci.device, d) };
      meshProxies.set(rank, q);
    }
    return q;
  };
  /** The proxy queue a mesh-tape program of `rank` needs: when some peer of its group is across the network. */
  const meshNet = (rank: number, g: readonly number[]) => (g.some((r) => viaNetwork(rank, r)) ? { net: meshProxy(rank) } : {});

  // Device barriers: arrivals on the queue below the collective one of an engine of the TopSP's
  // own; one barrier per node (DMA writes stay inside it), one for the whole pod.
  const barrierQueue = spec.dma.collectiveQueue - 1;
  const barrier = (took: readonly { device: number; topsp: number }[]): void => {
    const byNode = new Map<number, Map<string, { device: number; members: { topsp: number; engine: number }[] }>>();
    for (const t of [...took].sort((a, b) => a.device - b.device || a.topsp - b.topsp)) {
      const core = Math.floor(t.topsp / tsPerRank);
      const node = pod ? 0 : Math.floor(t.device / idsPerNode);
      const ranks = byNode.get(node) ?? new Map();
      byNode.set(node, ranks);
      const key = `${t.device}/${core}`;
      const r = ranks.get(key) ?? { device: t.device, members: [] };
      ranks.set(key, r);
      r.members.push({ topsp: t.topsp, engine: core * enginesPerRank + (t.topsp % tsPerRank) });
    }
    for (const ranks of byNode.values()) builder.deviceBarrier([...ranks.values()] satisfies BarrierRank[], barrierBase, barrierQueue);
  };

  /** Buffers one stage of an op needs beyond its input and output: ring receive slots, mesh / RDH scratch. */
  const stageBuffers = (st: Stage, io: (rank: number) => { input: number; output: number }, halfBytes: (rank: number) => number, pairSource?: ReadonlyMap<number, number>) => {
    const buffers = new Map<number, StageBuffers>();
    for (const rank of members(st.comm)) {
      const ci = info[rank]!;
      const n = st.comm.groups[st.comm.pos.get(rank)!.group]!.length;
      // A pairs op's source cycles through as many of our slots as it has credits.
      const src = pairSource?.get(rank);
      const chbufBytes = Array.from({ length: channels }, (_, c) => Math.max(recvSlots(st.comm, rank, c), src === undefined ? 0 : sendSlots(st.comm, src, c)) * halfBytes(rank));
      const meshLike = st.alg === EncAlgType.MESH || st.alg === EncAlgType.INTRA_RDH || st.alg === EncAlgType.INTER_RDH;
      const chbuf = meshLike ? [] : chbufBytes.map((b) => builder.allocHbm(ci.device, b));
      const reduces = st.opType === EncOpType.ALLREDUCE || st.opType === EncOpType.REDUCE_SCATTER;
      // Mesh: one slot per peer; RDH: a working copy and the halving steps' landing slots.
      const scratch = reduces && meshLike ? builder.allocHbm(ci.device, (st.alg === EncAlgType.MESH ? n : 2 * n) * meshSlotBytes(st.op, st.opType, n)) : 0;
      buffers.set(rank, { ...io(rank), chbuf, chbufBytes, scratch });
    }
    return buffers;
  };

  /** Compose one stage (a whole op, or one level of a hierarchical op) on every rank. */
  const composeStage = function* (st: Stage, buffers: ReadonlyMap<number, StageBuffers>, plans: readonly ChunkPlan[], kang: ReturnType<typeof kangaringGroup>[] | undefined, path: string): Generator<void, void> {
    const { comm, op, opType, alg, count, reduceSliceBytes } = st;
    const gr = (r: number) => comm.pos.get(r)!.groupRank;
    // Ring-type channels are composed side by side, one chunk group each per round.
    const gens: Generator<void, unknown>[] = [];
    if (kang) {
      comm.groups.forEach((_, gi) => {
        const k = kang[gi]!;
        for (let c = 0; c < channels; c++) {
          // The chips in this channel's device order (its cycle, forward or reversed).
          const devOrder = [...new Set(comm.rings[gi]!.channels[c]!.map((r) => info[r]!.device))];
          const order = devOrder.map((d) => k.chips.find((chip) => info[chip.ranks[0]!]!.device === d)!);
          // Primary and secondary roles alternate between the device cycles.
          const pi = comm.rings[gi]!.cycle[c]! % k.m;
          order.forEach((chip, idx) => {
            const primary = chip.ranks[pi]!;
            const secondaries = chip.ranks.filter((_, j) => j !== pi);
            const nextP = order[(idx + 1) % order.length]!.ranks[pi]!;
            const prevP = order[(idx + order.length - 1) % order.length]!.ranks[pi]!;
            const pn = place(nextP, comm.set, c);
            const pp = place(prevP, comm.set, c);
            const primaryGen = composeChannelKangaring(
              { op, opType, plan: k.plan, count, rankBlock: k.rankBlock, m: k.m, chips: order.length, bufferSlots: spec.ring.bufferSlots, reduceSliceBytes, replication: spec.arch >= 3 },
              c,
              chan(comm, primary, c),
              {
                na: Array.from({ length: order.length }, (_, j) => order[(idx + j) % order.length]!.index),
                chip: chip.ranks.map((r) => buffers.get(r)!),
                primary: pi,
                chipBase: gr(chip.ranks[0]!),
                secondaryInc: secondaries.map((r) => semaAddr(info[r]!.device, place(r, comm.set, c).topsp, place(r, comm.set, c).recv, "inc")),
                next: buffers.get(nextP)!,
                nextRecvInc: semaAddr(info[nextP]!.device, pn.topsp, pn.recv, "inc"),
                prevSendInc: semaAddr(info[prevP]!.device, pp.topsp, pp.send, "inc"),
              },
            );
            // A secondary only waits for its primary's writes into its output.
            gens.push(
              (function* () {
                const signals = yield* primaryGen;
                for (const r of secondaries) {
                  const ch = chan(comm, r, c);
                  for (let i = 0; i < signals; i++) ch.markStep(StepFlag.WAIT_RECV);
                  ch.markEnd();
                }
              })(),
            );
          });
        }
      });
    } else if (alg === EncAlgType.INTRA_RDH || alg === EncAlgType.INTER_RDH) {
      comm.groups.forEach((g) => {
        const ranks = g.map((rank): RdhRank => {
          const b = buffers.get(rank)!;
          const m = meshPlace(rank);
          return { groupRank: gr(rank), device: info[rank]!.device, topsp: m.topsp, handshake: m.semas.handshake, local: m.semas.data, stepSema: m.semas.compl + 1, compl: m.semas.compl, input: b.input, output: b.output, scratch: b.scratch };
        });
        const name = alg === EncAlgType.INTER_RDH ? '7 INTER_RDH ("RDH")' : '5 INTRA_RDH ("RDH")';
        // Across nodes every partner is remote: the program's transfers go through the rank's proxy queue.
        g.forEach((rank, k) => composeRdh({ op, opType, ranks, count, reduceSliceBytes, name, ...meshNet(rank, g) }, ranks[k]!, meshProgram(comm, rank), `${path}.op`));
      });
    } else if (alg === EncAlgType.MESH) {
      comm.groups.forEach((g) => {
        const ranks = g.map((rank): MeshRank => {
          const b = buffers.get(rank)!;
          return { groupRank: gr(rank), device: info[rank]!.device, topsp: meshPlace(rank).topsp, semas: meshPlace(rank).semas, input: b.input, output: b.output, scratch: b.scratch };
        });
        g.forEach((rank, k) => composeMesh({ op, opType, ranks, count, reduceSliceBytes, ...meshNet(rank, g) }, ranks[k]!, meshProgram(comm, rank)));
      });
    } else if (op.pairs) {
      const targetOf = new Map(op.pairs.map(([a, b]) => [a, b]));
      const sourceOf = new Map(op.pairs.map(([a, b]) => [b, a]));
      const reduce = opType === EncOpType.PERMUTE_REDUCE || opType === EncOpType.PERMUTE_REDUCE_IMPLICIT;
      for (let rank = 0; rank < scn.ranks; rank++) {
        const t = targetOf.get(rank);
        const src = sourceOf.get(rank);
        for (let c = 0; c < channels; c++) {
          const pt = t === undefined ? undefined : place(t, comm.set, c);
          const ps = src === undefined ? undefined : place(src, comm.set, c);
          const toTarget = t !== undefined && viaNetwork(rank, t);
          const fromSource = src !== undefined && viaNetwork(src, rank);
          const net = toTarget || fromSource ? { toTarget, fromSource, ...proxyQueue(comm, rank, c), foldN } : undefined;
          gens.push(composeChannelPermute(
            { op, channels, pieceBytes: plans[comm.pos.get(rank)!.group]!.halfBytes, reduceSliceBytes, reduce },
            c,
            chan(comm, rank, c),
            {
              me: buffers.get(rank)!,
              target: t === undefined ? undefined : { buffers: buffers.get(t)!, recvInc: semaAddr(info[t]!.device, pt!.topsp, pt!.recv, "inc"), self: t === rank },
              source: src === undefined ? undefined : { sendInc: semaAddr(info[src]!.device, ps!.topsp, ps!.send, "inc"), self: src === rank },
              sendSlots: sendSlots(comm, rank, c),
              recvSlots: src === undefined ? 0 : sendSlots(comm, src, c),
              ...(net ? { net } : {}),
            },
          ));
        }
      }
    } else {
      for (const rank of members(comm)) {
        const ci = info[rank]!;
        const gi = comm.pos.get(rank)!.group;
        for (let c = 0; c < channels; c++) {
          const { ring, i, next, prev } = ringPos(comm, c, rank);
          const na = ring.map((_, j) => gr(ring[(i + j) % ring.length]!));
          const pn = place(next, comm.set, c);
          const pp = place(prev, comm.set, c);
          const toNext = viaNetwork(rank, next);
          const fromPrev = viaNetwork(rank, prev);
          const net = toNext || fromPrev ? netHop(comm, rank, c, toNext, fromPrev, plans[gi]!.halfBytes) : undefined;
          gens.push(composeChannelRing(
            { op, opType, plan: plans[gi]!, count, rankN: comm.groups[gi]!.length, reduceSliceBytes },
            c,
            chan(comm, rank, c),
            {
              na,
              me: buffers.get(rank)!,
              next: buffers.get(next)!,
              nextRecvInc: semaAddr(info[next]!.device, pn.topsp, pn.recv, "inc"),
              prevSendInc: semaAddr(info[prev]!.device, pp.topsp, pp.send, "inc"),
              sendSlots: sendSlots(comm, rank, c),
              recvSlots: recvSlots(comm, rank, c),
              ...(net ? { net } : {}),
            },
          ));
        }
      }
    }
    yield* rounds(gens);
  };

  /** Chunk plans of a stage, per group of its comm (as postOperation plans a whole op). */
  const stagePlans = (comm: Comm, opType: EncOpType, count: number, esize: number): ChunkPlan[] =>
    comm.groups.map((g) => opPlan(opType, count, g.length, chunkBytes, esize, channels));

  /** Allocate a stage's buffers and compose it; `io` gives each rank's input and output. */
  const runStage = function* (st: Stage, io: (rank: number) => { input: number; output: number }, path: string, plans?: readonly ChunkPlan[]): Generator<void, void> {
    const esize = dtypeSize(st.op.dtype);
    const kang = st.alg === EncAlgType.KANGARING ? st.comm.groups.map((_, gi) => kangaringGroup(st.comm, gi, st.opType, st.count, esize)) : undefined;
    const p = plans ?? stagePlans(st.comm, st.opType, st.count, esize);
    const half = (rank: number) => (kang ? kang[st.comm.pos.get(rank)!.group]!.plan.halfBytes : p[st.comm.pos.get(rank)!.group]!.halfBytes);
    const pairSource = st.op.pairs ? new Map(st.op.pairs.map(([a, b]) => [b, a])) : undefined;
    const buffers = stageBuffers(st, io, half, pairSource);
    yield* composeStage(st, buffers, p, kang, path);
    stageLog.push({ st, buffers });
  };
  const stageLog: { st: Stage; buffers: ReadonlyMap<number, StageBuffers> }[] = [];

  /**
   * A hierarchical op: step t runs stage s on slice t - s (one slice: the stages one after
   * another), each step one builder op closed by a device barrier; only the last step reports.
   */
  const composeHier = function* (op: OpSpec, opType: EncOpType, operation: EncOperation, io: ReadonlyMap<number, { input: number; output: number }>, path: string, hierGroups: readonly (readonly number[])[], alongside: () => Generator<void, void>) {
    const esize = dtypeSize(op.dtype);
    let took: { device: number; topsp: number }[] = [];
    // This op's hierarchical groups: their ranks' parts of the level comms.
    const inOp = new Set(hierGroups.flat());
    const level = (comm: Comm) => subComm(comm, (g) => inOp.has(g[0]!));
    const comms = { intra: level(hierComms!.intra), inter: level(hierComms!.inter), ...(hierComms!.intraAg ? { intraAg: level(hierComms!.intraAg) } : {}) };
    const plan = hierStages({ ...scn, replicaGroups: hierGroups }, spec, comms, info, op, opType, channels, chunkBytes, path);
    /** Other groups' flat stages run in the op's first step. */
    let first = true;
    const beginStep = function* () {
      builder.beginOp();
      if (first) yield* alongside();
      first = false;
    };
    // Step t runs stage s on slice t - s (one slice: the stages one after another); stage s reads
    // what stage s - 1 wrote for that slice, through a scratch buffer per rank. The op's input and
    // output are cut into contiguous slices.
    const k = plan.slices;
    const n = plan.stages.length;
    const inShare = (rank: number) => bufferBytes(op, opType, groups[info[rank]!.group]!.length, info[rank]!.groupRank).inBytes / k;
    const outShare = (rank: number) => bufferBytes(op, opType, groups[info[rank]!.group]!.length, info[rank]!.groupRank).outBytes / k;
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
    if (tr) for (const rank of members(comms.intra)) trBuf.set(rank, builder.allocHbm(info[rank]!.device, tr.at === "first" ? inShare(rank) : outShare(rank)));
    const opIn = (rank: number) => (tr?.at === "first" ? trBuf.get(rank)! : io.get(rank)!.input);
    const opOut = (rank: number) => (tr?.at === "last" ? trBuf.get(rank)! : io.get(rank)!.output);
    const transposeStep = function* (from: (rank: number) => number, to: (rank: number) => number, bytes: (rank: number) => number, report: boolean): Generator<void, void> {
      yield* beginStep();
      for (const rank of members(comms.intra)) {
        const ch = chan(comms.intra, rank, 0);
        const b = bytes(rank) / (tr!.rows * tr!.cols);
        for (let r = 0; r < tr!.rows; r++) for (let c = 0; c < tr!.cols; c++) ch.copy(from(rank) + (r * tr!.cols + c) * b, to(rank) + (c * tr!.rows + r) * b, b, esize);
        ch.markStep(0);
        ch.markEnd();
      }
      took = builder.endOp(report);
    };
    if (tr?.at === "first") {
      yield* transposeStep((rank) => io.get(rank)!.input, opIn, inShare, false);
      barrier(took);
    }
    const inp = (s: number, j: number, rank: number): number => (s === 0 ? opIn(rank) + j * inShare(rank) : out(s - 1, j, rank));
    for (let t = 0; t < k + n - 1; t++) {
      const last = t === k + n - 2 && tr?.at !== "last";
      yield* beginStep();
      for (const [s, st] of plan.stages.entries()) {
        const j = t - s;
        if (j < 0 || j >= k) continue;
        yield* runStage({ ...st, reduceSliceBytes: operation.reduceSliceBytes }, (rank) => ({ input: inp(s, j, rank), output: out(s, j, rank) }), k > 1 ? `${path}.slice${j}.stage${s}` : `${path}.stage${s}`);
      }
      took = builder.endOp(last);
      // Ranks meet before the next step reads this one's outputs.
      if (!last) barrier(took);
    }
    if (tr?.at === "last") yield* transposeStep(opOut, (rank) => io.get(rank)!.output, outShare, true);
    return { stages: plan.stages.map((s): StageRecord => ({ level: s.level, op: s.op.op, alg: s.alg })), selections: plan.log, took };
  };

  const warnings = [...posted.warnings];
  const ops: OpLayout[] = [];
  for (const index of opIndices) {
    const op = scn.ops[index]!;
    const path = `ops[${index}]`;
    const operation = posted.operations[index]!;
    const { opType, plans, groupAlgs } = operation;
    // Groups of different shapes may resolve differently: the op's algorithm is group 0's, and
    // each distinct flat algorithm composes its own groups.
    const algorithm = groupAlgs[0]!;
    const mixed = new Set(groupAlgs).size > 1;
    const logStart = stageLog.length;
    const esize = dtypeSize(op.dtype);
    const count = op.bytes / esize;
    // Every rank's input and output as the scenario op sees them.
    const rankLayouts: RankLayout[] = [];
    const io = new Map<number, { input: number; output: number }>();
    // The op's buffers must fit a device's address window (checked before anything is placed).
    const perDevice = new Map<number, number>();
    for (let rank = 0; rank < scn.ranks; rank++) {
      const ci = info[rank]!;
      const { inBytes, outBytes } = bufferBytes(op, opType, groups[ci.group]!.length, ci.groupRank);
      perDevice.set(ci.device, (perDevice.get(ci.device) ?? 0) + inBytes + outBytes);
    }
    const most = Math.max(...perDevice.values());
    check(most < HBM_LIMIT / 2, "CMP1311", `the op's input and output buffers need ${most} bytes on one device; a device's HBM window holds ${HBM_LIMIT} (half of it for buffers)`, `${path}.${op.counts ? "counts" : "bytes"}`, op.counts ? most : op.bytes);
    for (let rank = 0; rank < scn.ranks; rank++) {
      const ci = info[rank]!;
      const { inBytes, outBytes } = bufferBytes(op, opType, groups[ci.group]!.length, ci.groupRank);
      const input = builder.allocHbm(ci.device, inBytes);
      const output = builder.allocHbm(ci.device, outBytes);
      io.set(rank, { input, output });
    }
    let stages: readonly StageRecord[] = [];
    let selections: string | undefined;
    let took: { device: number; topsp: number }[];
    const algOf = (g: readonly number[]) => groupAlgs[info[g[0]!]!.group]!;
    const flatAlgs = [...new Set(groupAlgs.filter((a) => a !== EncAlgType.HIER))];
    const flat = function* () {
      for (const alg of flatAlgs) {
        const comm = mixed ? subComm(main, (g) => algOf(g) === alg) : main;
        yield* runStage({ comm, op, opType, alg, count, reduceSliceBytes: operation.reduceSliceBytes }, (rank) => io.get(rank)!, path, alg === EncAlgType.KANGARING || mixed ? undefined : plans);
      }
    };
    if (groupAlgs.includes(EncAlgType.HIER)) {
      ({ stages, selections, took } = yield* composeHier(op, opType, operation, io, path, groups.filter((g) => algOf(g) === EncAlgType.HIER), flat));
    } else {
      builder.beginOp();
      yield* flat();
      took = builder.endOp();
    }
    /** A rank's receive buffers in the last stage it took part in. */
    const chbufOf = (rank: number) => {
      const last = stageLog.slice(logStart).reverse().find((x) => x.buffers.has(rank))!;
      const b = last.buffers.get(rank)!;
      return b.chbuf.map((addr, c) => ({ addr, bytes: b.chbufBytes[c]! }));
    };
    for (let rank = 0; rank < scn.ranks; rank++) {
      const ci = info[rank]!;
      const { inBytes, outBytes } = bufferBytes(op, opType, groups[ci.group]!.length, ci.groupRank);
      rankLayouts.push({ rank, group: ci.group, groupRank: ci.groupRank, device: ci.device, input: { addr: io.get(rank)!.input, bytes: inBytes }, output: { addr: io.get(rank)!.output, bytes: outBytes }, chbuf: chbufOf(rank) });
    }
    // The end of a multi-op program: every rank of a node meets.
    if (opIndices.length > 1 && index === opIndices[opIndices.length - 1]) barrier(took);
    ops.push({ index, spec: op, opType, algorithm, count, plan: plans, operation, ranks: rankLayouts, stages, ...(selections ? { selections } : {}) });
  }
  if (rings.kind === "stream") return undefined;
  const image = builder.build();
  validateCcops(image);
  return { image, layout: { channels, foldN, rings: main.rings, ops }, explain: posted.explain, warnings };
}

/** The algorithm as the scenario names it (the runtime's printed names are ambiguous: two "RDH", and "Invalid" for the single-cycle ring). */
export function algorithmLabel(alg: EncAlgType, stages: readonly StageRecord[] = []): string {
  const name = (ALG_NAMES as readonly string[])[alg] ?? `alg${alg}`;
  return stages.length > 0 ? `${name}(${stages.map((s) => algorithmLabel(s.alg)).join(",")})` : name;
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
