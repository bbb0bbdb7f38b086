// The compile context: one program's resources and communicators as it is composed — where every
// channel, mesh program, proxy queue and semaphore of a rank sits, the rings each replica group
// follows, the builder the composers emit into — and the stage machinery the family composers plug
// into (registry.ts names each family's composer; program-plan.ts decides what the program needs).
import { dtypeSize } from "../ir/dtypes.ts";
import { EncAlgMeshType, EncAlgType, type EncOpType } from "../ir/enums.ts";
import { CompileError } from "../ir/errors.ts";
import type { DeviceSpec, Scenario } from "../ir/spec.ts";
import { largestGroup, opGroups, sameGroups } from "../ir/spec.ts";
import { acrossNodes } from "../ir/topology.ts";
import { NeighType } from "../encd/channel.ts";
import { blockOf, semaAddr } from "../encd/address.ts";
import { ProgramBuilder, type BarrierRank, type RingMode } from "../encd/program.ts";
import { inUnits } from "../encd/fold.ts";
import type { ProxyFifo } from "../encd/proxy-fifo.ts";
import type { ChunkPlan } from "./chunks.ts";
import { checkSignatures, type Posted } from "./post.ts";
import { commInfos, programGroups, type CommInfo } from "./groups.ts";
import { algorithmEntry } from "./registry.ts";
import { adjacency, groupRings } from "./ring-order.ts";
import { check, concurrentOf, placementOf, postProgram, semaphoreLayout, setsPerStream, streamsOf } from "./program-plan.ts";
import type { NetQueue } from "./peer.ts";
import type { Comm, MeshPlace, NetHop, RingSet, Stage, StageBuffers } from "./stage.ts";
import { meshEngines, opPlan } from "./gates.ts";
import type { EncdChannel } from "../encd/channel-writer.ts";
import type { MeshProgram } from "../encd/mesh-writer.ts";




/** A hierarchical op's level comms. */
export interface HierComms {
  readonly intra: Comm;
  readonly inter: Comm;
  readonly intraAg?: Comm;
}


/** A comm on channel set `set`: its groups, each rank's place in them, each group's rings. */
function commOn(set: number, groups: readonly (readonly number[])[], ringsOf: (g: readonly number[]) => RingSet): Comm {
  const pos = new Map<number, { group: number; groupRank: number }>();
  groups.forEach((g, gi) => g.forEach((r, k) => pos.set(r, { group: gi, groupRank: k })));
  return { set, groups, pos, rings: groups.map(ringsOf) };
}

/**
 * A hierarchical op's two levels over the groups `hier` picks: each group split by node (order
 * kept), and the ranks at the same position on every node.
 */
function hierLevels(groups: readonly (readonly number[])[], hier: (gi: number) => boolean, nodeOf: (rank: number) => number): { intra: number[][]; inter: number[][] } {
  const intra: number[][] = [];
  const inter: number[][] = [];
  for (const [gi, g] of groups.entries()) {
    if (!hier(gi)) continue;
    const nodes = [...new Set(g.map(nodeOf))].sort((a, b) => a - b);
    const perNode = nodes.map((k) => g.filter((r) => nodeOf(r) === k));
    intra.push(...perNode);
    for (let l = 0; l < perNode[0]!.length; l++) inter.push(perNode.map((p) => p[l]!));
  }
  return { intra, inter };
}

export class CompileContext {
  readonly channels: number;
  readonly foldN: number;
  readonly chunkBytes: number;
  readonly groups: readonly (readonly number[])[];
  readonly posted: Posted;
  readonly info: readonly CommInfo[];
  readonly builder: ProgramBuilder;
  /** Whether this composition emits a device's programs (all but in a folded pass: its units' devices; the streaming pass, unit 0's). */
  readonly emits: (device: number) => boolean;
  /** The replica groups' own comm (channel set 0). */
  readonly main: Comm;
  /**
   * A concurrent-streams program: each stream's ops run on a TopSP and DMA queues of their own
   * (its channel set is its stream), the streams at once; the engines are shared.
   */
  readonly concurrent: boolean;
  /** The streams of a concurrent program, in order (their position picks TopSP and queue). */
  private readonly streams: readonly number[];
  private readonly streamComms = new Map<number, Comm>();
  /** A hierarchical op's level comms per stream: intra (set 1), inter (set 2), the pipelined intra all-gather's (set 3), after the stream's first set. */
  private readonly hierByStream = new Map<number, HierComms>();
  /** Channel sets per stream; their channels take engines of their own (the streams share them). */
  private readonly perStream: number;
  /** Stages composed so far, with their buffers (the layout reads the last receive buffers). */
  readonly stageLog: { st: Stage; buffers: ReadonlyMap<number, StageBuffers> }[] = [];
  readonly warnings: string[];

  /** Device ids of a NeuronLink pod (of a node, without pods): DMA reaches every device inside it. */
  private readonly podIds: number;
  private readonly enginesPerRank: number;
  private readonly tsPerRank: number;
  private readonly slotsPerTopsp: number;
  private readonly meshBase: number;
  private readonly proxyBase: number;
  private readonly barrierBase: number;
  private readonly meshProxySema: number;
  private readonly endBarrierBase: number;
  private readonly idsPerNode: number;
  private readonly opInfos = new Map<string, readonly CommInfo[]>();
  private readonly chans = new Map<string, EncdChannel>();
  private readonly meshPrograms = new Map<number, MeshProgram>();
  private readonly proxyQueues = new Map<string, ProxyFifo>();
  private readonly meshProxies = new Map<number, NetQueue>();

  constructor(
    readonly scn: Scenario,
    readonly spec: DeviceSpec,
    readonly opIndices: readonly number[],
    rings: RingMode,
  ) {
    // A folded streaming pass composes unit 0's ring-type channels; a counting pass of some units, theirs.
    const fold = rings.kind === "keep" ? undefined : rings.fold;
    const units = rings.kind === "stream" ? { from: 0, to: 1 } : fold?.units;
    this.emits = fold && units ? (device) => inUnits(device, fold.unitDevices, units) : () => true;
    // A pod (UltraServer) joins its nodes with NeuronLinks: DMA reaches every device of it, no proxy
    // needed; pods are joined by the network.
    const { podNodes, idsPerNode, podIds, vcore } = placementOf(scn, spec);
    this.podIds = podIds;
    const foldN = spec.ring.foldN;
    this.foldN = foldN;
    this.enginesPerRank = spec.dma.enginesPerCore * vcore;
    this.tsPerRank = (spec.topsp.perDevice / spec.coresPerDevice) * vcore;

    const groups = programGroups(scn, opIndices);
    this.groups = groups;
    checkSignatures(scn, groups);
    this.chunkBytes = scn.chunkBytes ?? spec.ring.chunkBytes;
    // A concurrent program gives each stream its channel sets on TopSPs of its own.
    this.concurrent = concurrentOf(scn, opIndices);
    this.streams = streamsOf(scn, opIndices);
    const { posted, channels, note } = postProgram(scn, spec, opIndices, this.chunkBytes);
    this.channels = channels;
    this.posted = posted;
    this.warnings = [...posted.warnings, ...(note ? [`channels: ${note}`] : [])];
    const refused = posted.refused.find((e) => e !== undefined);
    if (refused) throw refused;
    this.info = commInfos(groups, scn.ranks, scn.ranksPerDevice, scn.nodes, idsPerNode);
    this.idsPerNode = idsPerNode;
    // One TopSP may carry all of a concurrent stream's channels.
    this.slotsPerTopsp = this.concurrent ? channels : Math.ceil(channels / this.tsPerRank);
    if (this.concurrent) check(this.streams.length <= this.tsPerRank, "CMP1313", `${this.streams.length} concurrent streams need a TopSP each; a rank of ${spec.name} has ${this.tsPerRank}`, "concurrent", true);
    // (Stream p > 0 runs on queue collectiveQueue - 1 - p: below the device barrier's.)
    if (this.concurrent) check(this.streams.length <= spec.dma.collectiveQueue, "CMP1313", `${this.streams.length} concurrent streams need ${this.streams.length + 1} DMA queues at and below the collective queue (one each, and the device barrier's); ${spec.name}'s collective queue ${spec.dma.collectiveQueue} has ${spec.dma.collectiveQueue + 1}`, "concurrent", true);
    this.perStream = setsPerStream(scn, opIndices, posted);
    // Channel sets in use.
    const sets = this.perStream * this.streams.length;
    check(this.perStream * channels * foldN <= this.enginesPerRank, "CMP1304", `${channels} channels x ${foldN} folds${this.perStream > 1 ? ` x ${this.perStream} channel sets (hierarchical)` : ""} need more DMA engines than the ${this.enginesPerRank} per rank`, "channels", channels);
    check(sets * channels <= 32, "CMP1304", `${sets} channel sets of ${channels} channels exceed the 32 ring channel records`, "channels", channels);
    const semas = semaphoreLayout(foldN, this.slotsPerTopsp, this.perStream, largestGroup(scn), this.concurrent);
    ({ meshBase: this.meshBase, proxyBase: this.proxyBase, barrierBase: this.barrierBase, meshProxySema: this.meshProxySema, endBarrierBase: this.endBarrierBase } = semas);
    check(semas.used <= spec.topsp.semaphores, "CMP1305", `${channels} channel(s) need ${semas.used} semaphores on a TopSP; ${spec.name}'s TopSPs have ${spec.topsp.semaphores} (topsp.semaphores)`, "channels", channels);

    const adj = acrossNodes(adjacency(spec.topology, idsPerNode), scn.nodes, podNodes);
    const info = this.info;
    const deviceOf = (r: number) => info[r]!.device;
    const makeComm = (set: number, gs: readonly (readonly number[])[]): Comm => commOn(set, gs, (g) => groupRings(g, deviceOf, adj, podIds, channels));
    // Each stream runs over its ops' groups (a program that is not concurrent: the first op's).
    const streamOps = (st: number) => (this.concurrent ? opIndices.filter((i) => scn.ops[i]!.stream === st) : opIndices);
    this.main = makeComm(0, groups);
    this.streams.forEach((st, p) => this.streamComms.set(st, p === 0 ? this.main : makeComm(p * this.perStream, opGroups(scn, streamOps(st)[0]!))));
    // A hierarchical op's levels, each stream's own, on its sets.
    if (this.perStream > 1) {
      this.streams.forEach((st, p) => {
        // (Every op over the same groups counts: a stream's level comms are the program's where all share them.)
        const own = opGroups(scn, streamOps(st)[0]!);
        const ops = opIndices.filter((i) => sameGroups(opGroups(scn, i), own));
        const { intra, inter } = hierLevels(own, (gi) => ops.some((i) => posted.operations[i]!.groupAlgs[gi] === EncAlgType.HIER), (r) => info[r]!.node);
        const b = p * this.perStream;
        this.hierByStream.set(st, { intra: makeComm(b + 1, intra), inter: makeComm(b + 2, inter), ...(this.perStream === 4 ? { intraAg: makeComm(b + 3, intra) } : {}) });
      });
    }

    this.builder = new ProgramBuilder({ arch: spec.arch, maxDescriptorBytes: spec.dma.maxDescriptorBytes, cceMaxElements: spec.dma.cceMaxElements, nodes: scn.nodes, devicesPerNode: idsPerNode }, rings);
    this.addRingChannels();
  }

  /**
   * Every comm's ring channels, each rank's on its TopSP slot, engines and queue, wired to its ring
   * neighbours: of the ranks whose devices this composition emits (a folded pass makes no channel
   * for a device it does not compose: 0.2 s a pass at 4,096 ranks); `chan` makes another's if asked.
   */
  private addRingChannels(): void {
    const comms = this.streams.flatMap((st) => {
      const hc = this.hierByStream.get(st);
      return [this.streamComms.get(st)!, ...(hc ? [hc.intra, hc.inter, ...(hc.intraAg ? [hc.intraAg] : [])] : [])];
    });
    for (const comm of comms) {
      for (const rank of this.members(comm)) {
        if (!this.emits(this.info[rank]!.device)) continue;
        for (let c = 0; c < this.channels; c++) this.addChan(comm, rank, c);
      }
    }
  }

  /** Rank `rank`'s channel `c` of `comm`, made. */
  private addChan(comm: Comm, rank: number, c: number): EncdChannel {
    const { channels, foldN, info } = this;
    const ci = info[rank]!;
    const { next, prev } = this.ringPos(comm, c, rank);
    const p = this.place(rank, comm.set, c);
    const id = comm.set * channels + c;
    const chan = this.builder.addChannel({
      device: ci.device,
      topsp: p.topsp,
      channelId: id,
      slot: p.slot,
      // Concurrent streams share the engines, each on its own queue.
      engines: Array.from({ length: foldN }, (_, f) => ci.core * this.enginesPerRank + ((comm.set % this.perStream) * channels + c) * foldN + f),
      queue: this.streamQueue(comm.set),
      recvSema: p.recv,
      sendSema: p.send,
      complSema: p.compl,
      reporter: c === 0,
      next: this.neighbor(ci, info[next]!),
      prev: this.neighbor(ci, info[prev]!),
      initialCredits: this.sendSlots(comm, rank, c),
    });
    this.chans.set(`${comm.set}/${rank}/${c}`, chan);
    return chan;
  }

  /** Traffic between these devices goes through the network proxies (different nodes, no pod links). */
  crossesNetwork(a: number, b: number): boolean {
    return Math.floor(a / this.podIds) !== Math.floor(b / this.podIds);
  }

  viaNetwork(a: number, b: number): boolean {
    return this.crossesNetwork(this.info[a]!.device, this.info[b]!.device);
  }

  /** The ranks of a comm, in rank order. */
  members(comm: Comm): number[] {
    return [...comm.pos.keys()].sort((a, b) => a - b);
  }

  /** The part of a comm made of the groups `keep` admits (same channel set, same rings). */
  subComm(comm: Comm, keep: (g: readonly number[]) => boolean): Comm {
    const idx = comm.groups.map((g, gi) => (keep(g) ? gi : -1)).filter((gi) => gi >= 0);
    const gs = idx.map((gi) => comm.groups[gi]!);
    const pos = new Map<number, { group: number; groupRank: number }>();
    gs.forEach((g, gi) => g.forEach((r, k) => pos.set(r, { group: gi, groupRank: k })));
    return { set: comm.set, groups: gs, pos, rings: idx.map((gi) => comm.rings[gi]!) };
  }

  /** Op `index`'s replica groups (its own, or the program's) and each rank's place in them. */
  opGroupsOf(index: number): { groups: readonly (readonly number[])[]; info: readonly CommInfo[] } {
    const groups = opGroups(this.scn, index);
    if (sameGroups(groups, this.groups)) return { groups: this.groups, info: this.info };
    const key = JSON.stringify(groups);
    let info = this.opInfos.get(key);
    if (!info) this.opInfos.set(key, (info = commInfos(groups, this.scn.ranks, this.scn.ranksPerDevice, this.scn.nodes, this.idsPerNode)));
    return { groups, info };
  }

  /** The comm an op of `stream` runs its flat groups on (the main comm unless the program is concurrent). */
  commOf(stream: number): Comm {
    return this.concurrent ? this.streamComms.get(stream)! : this.main;
  }

  /** The level comms a hierarchical op of `stream` runs its stages on. */
  hierCommsOf(stream: number): HierComms {
    return this.hierByStream.get(this.concurrent ? stream : 0)!;
  }

  /**
   * A stream's DMA queue: the collective queue for the first, then the queues below the device
   * barrier's (collective - 2, - 3, ...).
   */
  private streamQueue(set: number): number {
    const p = Math.floor(set / this.perStream);
    return p <= 0 ? this.spec.dma.collectiveQueue : this.spec.dma.collectiveQueue - 1 - p;
  }

  /**
   * The rank-local TopSPs channel set `set` runs on: every TopSP; in a concurrent program, TopSP p
   * for the stream at position p > 0, and TopSP 0 with the surplus (those no stream takes) for the
   * first (the runtime gives surplus CC cores to stream 0).
   */
  private topspsOf(set: number): readonly number[] {
    const all = Array.from({ length: this.tsPerRank }, (_, t) => t);
    if (!this.concurrent) return all;
    const p = Math.floor(set / this.perStream);
    return p > 0 ? [p] : [0, ...all.slice(this.streams.length)];
  }

  /** Channel c of set `set`: channel 0 of every set sits on the rank's first TopSP of the set (the reporter's). */
  place(rank: number, set: number, c: number): { topsp: number; slot: number; recv: number; send: number; compl: number } {
    const ci = this.info[rank]!;
    const ts = this.topspsOf(set);
    // Streams sit on TopSPs of their own: slots (and their semaphores) count within a stream.
    const slot = (set % this.perStream) * this.slotsPerTopsp + Math.floor(c / ts.length);
    // Per channel: foldN recv-count, foldN send-credit and foldN completion semaphores.
    const base = 3 * this.foldN * slot;
    return { topsp: ci.core * this.tsPerRank + ts[c % ts.length]!, slot, recv: base, send: base + this.foldN, compl: base + 2 * this.foldN };
  }

  private neighbor(a: CommInfo, b: CommInfo) {
    return { netIdxAddrs: [], foldN: this.foldN, type: a.device === b.device ? NeighType.LOCAL : NeighType.P2P };
  }

  ringPos(comm: Comm, c: number, rank: number): { ring: readonly number[]; i: number; next: number; prev: number } {
    const ring = comm.rings[comm.pos.get(rank)!.group]!.channels[c]!;
    const i = ring.indexOf(rank);
    return { ring, i, next: ring[(i + 1) % ring.length]!, prev: ring[(i + ring.length - 1) % ring.length]! };
  }

  /**
   * Receive slots of a rank's channel: a network hop gets the network's deeper pool (its credits
   * cover a round trip through both proxies), a link hop the ring's.
   */
  recvSlots(comm: Comm, rank: number, c: number): number {
    const prev = this.ringPos(comm, c, rank).prev;
    return this.viaNetwork(prev, rank) ? this.spec.network!.bufferSlots : this.spec.ring.bufferSlots;
  }

  sendSlots(comm: Comm, rank: number, c: number): number {
    return this.recvSlots(comm, this.ringPos(comm, c, rank).next, c);
  }

  chan(comm: Comm, rank: number, c: number): EncdChannel {
    return this.chans.get(`${comm.set}/${rank}/${c}`) ?? this.addChan(comm, rank, c);
  }

  /** A rank's mesh program: TopSP 0 of its core, semaphores after the ring channels'. */
  meshPlace(rank: number): MeshPlace {
    const b = this.meshBase;
    return { topsp: this.info[rank]!.core * this.tsPerRank, semas: { handshake: b, data: b + 1, data2: b + 2, compl: b + 3 } };
  }

  /**
   * A rank's mesh program, built on first use on the engines the ring channels leave free, set to
   * the mesh type of the family `alg` about to compose on it.
   */
  meshProgram(comm: Comm, rank: number, alg: EncAlgType): MeshProgram {
    let m = this.meshPrograms.get(rank);
    if (!m) {
      const { spec, channels, foldN, perStream: sets } = this;
      const ci = this.info[rank]!;
      const used = sets * channels * foldN;
      const first = ci.core * this.enginesPerRank + used;
      const free = meshEngines(spec, channels, sets, ci.core);
      const peers = Math.max(1, comm.groups[comm.pos.get(rank)!.group]!.length - 1);
      if (free < 1) throw new CompileError("CMP1306", `mesh needs a DMA engine the ${channels} ring channels x ${foldN} folds${sets > 1 ? ` x ${sets} channel sets` : ""} do not use`, { path: "channels", value: channels });
      // One engine per peer, at least the preset's mesh folds, within what the ring channels leave.
      const engines = Array.from({ length: Math.min(free, Math.max(peers, spec.collectives.meshFolds)) }, (_, k) => first + k);
      const place = this.meshPlace(rank);
      m = this.builder.addMesh({ device: ci.device, topsp: place.topsp, engines, queue: spec.dma.collectiveQueue, complSema: place.semas.compl });
      this.meshPrograms.set(rank, m);
    }
    m.meshType = algorithmEntry(alg).meshType ?? EncAlgMeshType.FULL_MESH;
    return m;
  }

  /**
   * Network hops: one proxy work queue per (rank, channel), triggered by a semaphore after the
   * mesh / RDH ones; sends across nodes stage in local slots first.
   */
  proxyQueue(comm: Comm, rank: number, c: number): { entries: ProxyFifo; proxyInc: number } {
    const ci = this.info[rank]!;
    const p = this.place(rank, comm.set, c);
    const key = `${comm.set}/${rank}/${c}`;
    let entries = this.proxyQueues.get(key);
    if (!entries) {
      entries = this.builder.addProxyQueue(ci.device, p.topsp, this.proxyBase + p.slot * this.foldN, this.foldN);
      this.proxyQueues.set(key, entries);
    }
    return { entries, proxyInc: semaAddr(ci.device, p.topsp, this.proxyBase + p.slot * this.foldN, "inc") };
  }

  netHop(comm: Comm, rank: number, c: number, hop: { next: number; prev: number; toNext: boolean; fromPrev: boolean }, halfBytes: number): NetHop {
    const { toNext, fromPrev } = hop;
    const staging = toNext ? this.builder.allocHbm(this.info[rank]!.device, this.sendSlots(comm, rank, c) * halfBytes) : 0;
    const nextBlock = blockOf(this.info[hop.next]!.device);
    const prevBlock = blockOf(this.info[hop.prev]!.device);
    return { toNext, fromPrev, ...this.proxyQueue(comm, rank, c), staging, foldN: this.foldN, nextBlock, prevBlock };
  }

  /** A rank's network proxy queue for its mesh-tape programs (mesh, RDH), made on first use. */
  private meshProxy(rank: number): NetQueue {
    let q = this.meshProxies.get(rank);
    if (!q) {
      const ci = this.info[rank]!;
      const ts = this.meshPlace(rank).topsp;
      q = { entries: this.builder.addProxyQueue(ci.device, ts, this.meshProxySema), trigger: semaAddr(ci.device, ts, this.meshProxySema, "inc"), remote: (d) => this.crossesNetwork(ci.device, d) };
      this.meshProxies.set(rank, q);
    }
    return q;
  }

  /** The proxy queue a mesh-tape program of `rank` needs: when some peer of its group is across the network. */
  meshNet(rank: number, g: readonly number[]): { net?: NetQueue } {
    return g.some((r) => this.viaNetwork(rank, r)) ? { net: this.meshProxy(rank) } : {};
  }

  /**
   * Device barriers: arrivals on the queue below the collective one of an engine of the TopSP's
   * own; one barrier per node (DMA writes stay inside it), one for the whole pod.
   */
  barrier(all: readonly { device: number; topsp: number }[], stream?: number): void {
    const tsPerRank = this.tsPerRank;
    // In a concurrent program a stream's step barrier holds its own TopSPs only.
    const mine = this.concurrent && stream !== undefined ? new Set(this.topspsOf(this.streams.indexOf(stream) * this.perStream)) : undefined;
    const took = mine ? all.filter((t) => mine.has(t.topsp % tsPerRank)) : all;
    const byNode = new Map<number, Map<string, { device: number; members: { topsp: number; engine: number }[] }>>();
    for (const t of [...took].sort((a, b) => a.device - b.device || a.topsp - b.topsp)) {
      const core = Math.floor(t.topsp / tsPerRank);
      const node = Math.floor(t.device / this.podIds);
      const ranks = byNode.get(node) ?? new Map();
      byNode.set(node, ranks);
      const key = `${t.device}/${core}`;
      const r = ranks.get(key) ?? { device: t.device, members: [] };
      ranks.set(key, r);
      r.members.push({ topsp: t.topsp, engine: core * this.enginesPerRank + (t.topsp % tsPerRank) });
    }
    // (The program-end barrier of a concurrent program counts on semaphores of its own.)
    const base = stream === undefined ? this.endBarrierBase : this.barrierBase;
    for (const ranks of byNode.values()) this.builder.deviceBarrier([...ranks.values()] satisfies BarrierRank[], base, this.spec.dma.collectiveQueue - 1);
  }

  /** Chunk plans of a stage, per group of its comm (as postOperation plans a whole op). */
  stagePlans(comm: Comm, opType: EncOpType, count: number, esize: number): ChunkPlan[] {
    return comm.groups.map((g) => opPlan(opType, count, g.length, this.chunkBytes, esize, this.channels));
  }

  /** Buffers one stage of an op needs beyond its input and output: ring receive slots, mesh-tape scratch. */
  private stageBuffers(st: Stage, io: (rank: number) => { input: number; output: number }, halfBytes: (rank: number) => number, pairSource?: ReadonlyMap<number, number>): Map<number, StageBuffers> {
    const entry = algorithmEntry(st.alg);
    const buffers = new Map<number, StageBuffers>();
    for (const rank of this.members(st.comm)) {
      const ci = this.info[rank]!;
      const n = st.comm.groups[st.comm.pos.get(rank)!.group]!.length;
      // A pairs op's source cycles through as many of our slots as it has credits.
      const src = pairSource?.get(rank);
      const chbufBytes = Array.from({ length: this.channels }, (_, c) => Math.max(this.recvSlots(st.comm, rank, c), src === undefined ? 0 : this.sendSlots(st.comm, src, c)) * halfBytes(rank));
      const tape = entry.program === "mesh-tape";
      const chbuf = tape ? [] : chbufBytes.map((b) => this.builder.allocHbm(ci.device, b));
      // Mesh: one slot per peer; RDH: a working copy and the halving steps' landing slots.
      const scratch = tape ? entry.scratch?.(st.op, st.opType, n) : undefined;
      buffers.set(rank, { ...io(rank), chbuf, chbufBytes, scratch: scratch === undefined ? 0 : this.builder.allocHbm(ci.device, scratch) });
    }
    return buffers;
  }

  /** Allocate a stage's buffers and compose it; `io` gives each rank's input and output. */
  *runStage(st: Stage, io: (rank: number) => { input: number; output: number }, path: string, plans?: readonly ChunkPlan[]): Generator<void, void> {
    const entry = algorithmEntry(st.alg);
    const esize = dtypeSize(st.op.dtype);
    const p = entry.stagePlans?.(this, st) ?? plans ?? this.stagePlans(st.comm, st.opType, st.count, esize);
    const half = (rank: number) => p[st.comm.pos.get(rank)!.group]!.halfBytes;
    const pairSource = st.op.pairs ? new Map(st.op.pairs.map(([a, b]) => [b, a])) : undefined;
    const buffers = this.stageBuffers(st, io, half, pairSource);
    if (!entry.compose) throw new CompileError("CMP1203", `algorithm ${st.alg} is not supported yet`, { path, value: st.alg });
    // A folded program's streaming pass composes pod 0's channels only: nothing else is simulated
    // (the feed checks that pod 0's descriptors hash as the counting pass's did).
    const gens = entry.compose(this, st, buffers, p, path);
    yield* rounds(gens.filter((g) => this.emits(g.device)).map((g) => g.gen));
    this.stageLog.push({ st, buffers });
  }
}

/** One chunk group of each generator per round, until all are done; a streamed program hands over between rounds. */
export function* rounds(gens: Generator<void, unknown>[]): Generator<void, void> {
  // (Compacted in place: a new array and a closure call per round were a line of their own in composing 4,096 ranks.)
  const live = gens.slice();
  let n = live.length;
  while (n > 0) {
    let k = 0;
    for (let i = 0; i < n; i++) {
      const g = live[i]!;
      if (g.next().done !== true) live[k++] = g;
    }
    n = k;
    if (n > 0) yield;
  }
}
