// The emitter: lowers the composer's step leaves into a per-device program image of wire bytes.
//
// A channel's leaves call copy / reduce / semaInc / markStep / markEnd. Each call emits descriptors
// into the vring of every DMA fold of the channel (one queue per fold); markStep closes a step: all
// folds must have the same descriptor counts (short folds are padded with no-op pairs), the counts
// must fit the 16-bit tp_inc fields, and the step becomes one spad_slot_entry (identical neighbours
// merge into one entry with a repeat count). markEnd appends, per fold, the completion-semaphore
// write, then a LAST_SYNC step. endOp writes one cc_op_entry per TopSP naming its channels.
import { EncAlgMeshType, EncPattern, SdmaCceType } from "../ir/enums.ts";
import { EncodeError, InternalError } from "../ir/errors.ts";
import { packChannelConfig, ALGO_CONFIG_RING_BYTES, MAX_CHANNELS, type RingNeighbor } from "./channel.ts";
import { packSpadCtrlEntry, ringEntry, SPAD_CTRL_ENTRY_BYTES, type CcOpEntry } from "./ccop.ts";
import { ENGINES_PER_SENG, hbmAddr, semaAddr, tailDoorbellAddr } from "./address.ts";
import { packSlotEntry, SLOT_ENTRY_BYTES, StepFlag, type SlotEntry } from "./slot.ts";
import { dumpToPringPadded, Vring, VRING_DESC_LIMIT, WORD_BYTES, type VringStore } from "./vring.ts";
import { Signature } from "./signature.ts";
import { DescPages } from "./pages.ts";
import { GrownBytes } from "./bits.ts";
import { MESH_EVENT_BYTES, maxMeshEvents, NO_LEG, packMeshEvent, type DmaLeg, type MeshEvent } from "./mesh.ts";
import { ProxyFifo } from "./proxy.ts";
import { BARRIER_CONFIG_BYTES, NO_BARRIER, packBarrierConfig, type BarrierConfig, type BarrierStep } from "./barrier.ts";
import { MESH_SLOT, type DeviceImage, type MemorySegment, type ProgramImage, type QueueImage, type TopspImage } from "./image.ts";
export type { ProgramImage, QueueImage } from "./image.ts";

export interface EmitterParams {
  readonly arch: number;
  readonly maxDescriptorBytes: number;
  readonly cceMaxElements: number;
  readonly nodes?: number;
  readonly devicesPerNode?: number;
}

const MAX_DEVICES_TOTAL = 32;

/** Where a ring channel lives and what it is wired to; filled in by the composer. */
export interface ChannelPlacement {
  readonly device: number;
  readonly topsp: number;
  /** abs_id: the bit of channel_list and the record index in ring_channels[32]. */
  readonly channelId: number;
  readonly slot: number;
  /** One DMA engine per fold; all use `queue`. */
  readonly engines: readonly number[];
  readonly queue: number;
  readonly recvSema: number;
  readonly sendSema: number;
  readonly complSema: number;
  readonly reporter: boolean;
  readonly next: RingNeighbor;
  readonly prev: RingNeighbor;
  /** Initial value of each fold's send-credit semaphore: the receive-buffer slots of the next rank. */
  readonly initialCredits: number;
}

const TP_INC_MAX = 0xffff;

export { MESH_SLOT };

interface TopspState {
  ctrl: CcOpEntry[];
  ringConfig: Uint8Array;
  slots: Map<number, GrownBytes>;
  channels: Set<number>;
  mesh: MeshEvent[];
  /** The op index of the last mesh event appended (-1: none). */
  meshOp: number;
  /** enc_alg_mesh_type of the tape's last op (its cc_op_entry's algo_sub_type). */
  meshType: EncAlgMeshType;
  /** Device barriers by ctrl entry index. */
  barriers: Map<number, BarrierConfig>;
  /** The reported op each reporter entry completes (host bookkeeping). */
  reportOps: number[];
}

/** One participant of a device barrier: a TopSP and the DMA engine whose barrier queue carries its arrivals. */
export interface BarrierMember {
  readonly topsp: number;
  readonly engine: number;
}

/** A rank's part in a device barrier: its TopSPs, the first one leading. */
export interface BarrierRank {
  readonly device: number;
  readonly members: readonly BarrierMember[];
}

interface DeviceState {
  alloc: number;
  /** Semaphores that count up, by "topsp/sema": how much they end above where they start. */
  counters: Map<string, number>;
  constAddr: number;
  padAddr: number;
  memory: MemorySegment[];
  payload: { addr: number; bytes: number }[];
  semaphores: { topsp: number; sema: number; value: number }[];
  vrings: Map<string, { engine: number; queue: number; vring: Vring; stream?: VringStore }>;
  topsps: Map<number, TopspState>;
  proxies: { topsp: number; sema: number; folds: number; entries: ProxyFifo }[];
  /** Per TopSP: the DMA queue carrying its barrier arrivals. */
  barrierQueues: Map<number, { vring: Vring; mask: number; seng: number; engine: number }>;
}

/**
 * Where the builder puts descriptors: in the image (`keep`); nowhere but their counts, the image's
 * rings to be streamed into `stores` (`count`); or into `stores` while the program runs (`stream`,
 * the same composition run again on demand).
 */
export type RingMode = { readonly kind: "keep" } | { readonly kind: "count" | "stream"; readonly stores: Map<string, VringStore>; readonly fold?: RingFold };

/**
 * A folded composition: only devices below `unitDevices` (unit 0: pod 0) get
 * descriptors; the others' are counted (tallied, not packed). The counting pass hashes every
 * device's descriptor runs into `signatures` (by "device/engine/queue"), so units can be compared.
 */
export interface RingFold {
  readonly unitDevices: number;
  readonly signatures: Map<string, Signature>;
}

export class ProgramBuilder {
  readonly params: EmitterParams;
  private readonly rings: RingMode;
  private readonly devices = new Map<number, DeviceState>();
  private readonly channels: EncdChannel[] = [];
  private opIndex = -1;
  /** Cumulative arrivals each barrier semaphore has been promised (targets never reset). */
  private readonly barrierCounts = new Map<string, number>();

  constructor(params: EmitterParams, rings: RingMode = { kind: "keep" }) {
    this.params = params;
    this.rings = rings;
  }

  private dev(device: number): DeviceState {
    let d = this.devices.get(device);
    if (!d) {
      // The word 1 at offset 0, which semaphore increments copy, is the only initialized byte of
      // the 64 reserved; the pad word after it (no-op packets add it onto itself) is zero HBM.
      const consts = new Uint8Array(WORD_BYTES);
      new DataView(consts.buffer).setUint32(0, 1, true);
      d = {
        alloc: 64,
        constAddr: hbmAddr(device, 0),
        padAddr: hbmAddr(device, WORD_BYTES),
        memory: [{ addr: hbmAddr(device, 0), bytes: consts }],
        payload: [],
        semaphores: [],
        counters: new Map(),
        vrings: new Map(),
        topsps: new Map(),
        proxies: [],
        barrierQueues: new Map(),
      };
      this.devices.set(device, d);
    }
    return d;
  }

  /** Reserve `bytes` of HBM on `device` (4 KiB aligned); payload ranges keep no bytes in timing-only runs. */
  allocHbm(device: number, bytes: number, payload = true): number {
    const d = this.dev(device);
    const align = 4096;
    const off = Math.ceil(d.alloc / align) * align;
    d.alloc = off + Math.max(bytes, 1);
    const addr = hbmAddr(device, off);
    if (payload) d.payload.push({ addr, bytes });
    return addr;
  }

  /** Initial contents for `addr` (e.g. an input buffer). */
  setMemory(addr: number, bytes: Uint8Array, device: number): void {
    this.dev(device).memory.push({ addr, bytes });
  }

  constWord(device: number): number {
    return this.dev(device).constAddr;
  }

  addChannel(p: ChannelPlacement): EncdChannel {
    if (p.channelId === 0 && !p.reporter) {
      throw new EncodeError("ENC1608", "channel->id != 0 || channel->reporter fails: channel 0 must report", { path: "channel.reporter", value: p.reporter });
    }
    if (p.channelId < 0 || p.channelId >= MAX_CHANNELS) {
      throw new EncodeError("ENC1601", `channel abs_id ${p.channelId} is outside 0..31`, { path: "channel.abs_id", value: p.channelId });
    }
    const d = this.dev(p.device);
    let ts = d.topsps.get(p.topsp);
    if (!ts) {
      ts = this.newTopsp();
      d.topsps.set(p.topsp, ts);
    }
    if (ts.channels.has(p.channelId)) {
      throw new EncodeError("ENC1602", `TopSP ${p.topsp} of device ${p.device} already has channel ${p.channelId}`, { path: "channel.abs_id", value: p.channelId });
    }
    if (ts.slots.has(p.slot)) throw new EncodeError("ENC1603", `slot ${p.slot} of TopSP ${p.topsp} is taken`, { path: "channel.spad_slot_idx", value: p.slot });
    ts.channels.add(p.channelId);
    const steps = new GrownBytes(8 * SLOT_ENTRY_BYTES);
    ts.slots.set(p.slot, steps);
    const { vrings, mask, seng } = this.bindVrings(d, p.device, p.engines, p.queue);
    packChannelConfig(
      {
        next: p.next,
        prev: p.prev,
        recvSema: semaAddr(p.device, p.topsp, p.recvSema, "read"),
        sendSema: semaAddr(p.device, p.topsp, p.sendSema, "read"),
        postSema: 0,
        dmaComplSema: semaAddr(p.device, p.topsp, p.complSema, "read"),
        kringMine: 0,
        kringPeers: [],
        bcastM2sTail: tailDoorbellAddr(p.device, undefined, p.queue, "m2s", seng),
        bcastS2mTail: tailDoorbellAddr(p.device, undefined, p.queue, "s2m", seng),
        bcastMask: mask,
        channelId: p.channelId,
        spadSlotIdx: p.slot,
        foldN: p.engines.length,
        kangaringIsPrimary: 0,
        kangaringNumPeers: 0,
      },
      ts.ringConfig,
    );
    // Fold f uses semaphore id + f of each family; every fold's credit pool starts full.
    p.engines.forEach((_, f) => d.semaphores.push({ topsp: p.topsp, sema: p.sendSema + f, value: p.initialCredits }));
    const ch = new EncdChannel(this, p, vrings, steps, d.constAddr, d.padAddr);
    // A ring channel's completion semaphores count its ops (the host reads them; nothing consumes them).
    ch.countsCompletions = true;
    this.channels.push(ch);
    return ch;
  }

  private newTopsp(): TopspState {
    return { ctrl: [], ringConfig: new Uint8Array(ALGO_CONFIG_RING_BYTES), slots: new Map(), channels: new Set(), mesh: [], meshOp: -1, meshType: EncAlgMeshType.FULL_MESH, barriers: new Map(), reportOps: [] };
  }

  /** Bind one vring per engine; the engines must share a SENG, whose broadcast mask names them. */
  private bindVrings(d: DeviceState, device: number, engines: readonly number[], queue: number): { vrings: Vring[]; mask: number; seng: number } {
    let mask = 0;
    const seng = Math.floor((engines[0] ?? 0) / ENGINES_PER_SENG);
    const vrings = engines.map((engine) => {
      const key = `${engine}/${queue}`;
      if (d.vrings.has(key)) throw new EncodeError("ENC1604", `DMA engine ${engine} queue ${queue} of device ${device} is already bound`, { path: "channel.engines", value: engine });
      if (Math.floor(engine / ENGINES_PER_SENG) !== seng) {
        throw new EncodeError("ENC1605", `DMA engine ${engine} is not in SENG ${seng}: one broadcast mask names engines of one SENG`, { path: "channel.engines", value: engine });
      }
      const name = `dev${device}_eng${engine}_q${queue}`;
      const entry = { engine, queue, ...this.newVring(name, `${device}/${key}`, device) };
      d.vrings.set(key, entry);
      mask = (mask | (1 << (engine % ENGINES_PER_SENG))) >>> 0;
      return entry.vring;
    });
    return { vrings, mask, seng };
  }

  /** A vring as the ring mode has it, and the streamed rings it stands for (count mode). */
  private newVring(name: string, key: string, device: number): { vring: Vring; stream?: VringStore } {
    const m = this.rings;
    if (m.kind === "keep") return { vring: new Vring(name) };
    const fold = m.fold;
    // A folded program: pod 0's rings as usual, the other pods' only tallied; every one hashed when counting.
    const other = fold !== undefined && device >= fold.unitDevices;
    const counting = () => ({ tx: new DescPages(false), rx: new DescPages(false) });
    if (m.kind === "count") {
      let sig: Signature | undefined;
      if (fold) fold.signatures.set(key, (sig = new Signature()));
      const tally = { tally: true, ...(sig && fold ? { sig: { sig, device, unitDevices: fold.unitDevices } } : {}) };
      const vring = new Vring(name, VRING_DESC_LIMIT, counting(), tally);
      // (Every ring gets its stream: a program that is not folded after all streams them all.)
      const stream = { tx: new DescPages(), rx: new DescPages() };
      m.stores.set(key, stream);
      return { vring, stream };
    }
    if (other) return { vring: new Vring(name, VRING_DESC_LIMIT, counting(), { tally: true }) };
    const store = m.stores.get(key);
    if (!store) throw new InternalError(`streamed composition binds ${name}, which the counting pass did not`);
    if (!fold) return { vring: new Vring(name, VRING_DESC_LIMIT, store) };
    // A folded streaming pass hashes pod 0's rings too: they must hash as the counting pass's did.
    const sig = new Signature();
    fold.signatures.set(key, sig);
    return { vring: new Vring(name, VRING_DESC_LIMIT, store, { tally: false, sig: { sig, device, unitDevices: fold.unitDevices } }) };
  }

  /**
   * A rank's mesh program on one TopSP: DMA engines whose queues the event legs advance together,
   * a step stream (slot MESH_SLOT) holding each leg's descriptor counts, and the event tape.
   */
  addMesh(p: MeshPlacement): MeshProgram {
    const d = this.dev(p.device);
    let ts = d.topsps.get(p.topsp);
    if (!ts) {
      ts = this.newTopsp();
      d.topsps.set(p.topsp, ts);
    }
    if (ts.slots.has(MESH_SLOT)) throw new EncodeError("ENC1603", `slot ${MESH_SLOT} of TopSP ${p.topsp} is taken`, { path: "mesh.slot", value: MESH_SLOT });
    const steps = new GrownBytes(8 * SLOT_ENTRY_BYTES);
    ts.slots.set(MESH_SLOT, steps);
    const { vrings, mask, seng } = this.bindVrings(d, p.device, p.engines, p.queue);
    const placement: ChannelPlacement = {
      device: p.device,
      topsp: p.topsp,
      channelId: -1,
      slot: MESH_SLOT,
      engines: p.engines,
      queue: p.queue,
      recvSema: p.complSema,
      sendSema: p.complSema,
      complSema: p.complSema,
      reporter: true,
      next: { netIdxAddrs: [], foldN: p.engines.length, type: 0 },
      prev: { netIdxAddrs: [], foldN: p.engines.length, type: 0 },
      initialCredits: 0,
    };
    const dma = new EncdChannel(this, placement, vrings, steps, d.constAddr, d.padAddr);
    const leg: DmaLeg = { m2sTail: tailDoorbellAddr(p.device, undefined, p.queue, "m2s", seng), s2mTail: tailDoorbellAddr(p.device, undefined, p.queue, "s2m", seng), mask };
    const state = ts;
    const prog: MeshProgram = new MeshProgram(dma, leg, (e) => {
      if (state.mesh.length >= maxMeshEvents(this.params.arch)) {
        throw new EncodeError("ENC1702", `TopSP ${p.topsp} of device ${p.device} needs more than the ${maxMeshEvents(this.params.arch)} mesh events arch ${this.params.arch} holds`, { path: "mesh.events", value: state.mesh.length + 1 });
      }
      state.mesh.push(e);
      state.meshOp = this.opIndex;
      state.meshType = prog.meshType;
    });
    return prog;
  }

  /** A semaphore that counts (ends `n` higher than it starts): declared in the image for the verifier. */
  countUp(device: number, topsp: number, sema: number, n: number): void {
    const d = this.dev(device);
    const key = `${topsp}/${sema}`;
    d.counters.set(key, (d.counters.get(key) ?? 0) + n);
  }

  /** A network proxy work queue triggered by semaphores `sema` .. `sema + folds - 1` of `topsp` on `device` (one per DMA fold that feeds it). */
  addProxyQueue(device: number, topsp: number, sema: number, folds = 1): ProxyFifo {
    // (The streaming pass makes descriptors only: its entries are counted, not kept.)
    const q = { topsp, sema, folds, entries: new ProxyFifo(this.rings.kind !== "stream") };
    this.dev(device).proxies.push(q);
    return q.entries;
  }

  /** Ops closed with a report so far: the host's count of reported ops. */
  private reportedOps = 0;

  beginOp(): void {
    this.opIndex++;
  }

  get currentOp(): number {
    return this.opIndex;
  }

  /**
   * Close the current op: one cc_op_entry per TopSP that took part — RING naming the channels that
   * ran it, or MESH for a mesh event tape (one kind per TopSP per op).
   */
  endOp(report = true): { device: number; topsp: number }[] {
    const took: { device: number; topsp: number }[] = [];
    // The channels that ran in this op, by TopSP (one pass: a filter per TopSP was quadratic in ranks).
    const ran = new Map<number, EncdChannel[]>();
    for (const c of this.channels) {
      if (c.lastEndedOp !== this.opIndex) continue;
      const key = c.placement.device * 16 + c.placement.topsp;
      const list = ran.get(key);
      if (list) list.push(c);
      else ran.set(key, [c]);
    }
    for (const [device, d] of this.devices) {
      for (const [index, ts] of d.topsps) {
        const active = ran.get(device * 16 + index) ?? [];
        const mesh = ts.meshOp === this.opIndex;
        if (active.length > 0 && mesh) throw new InternalError(`dev${device} topsp${index} ran both ring channels and a mesh tape in op ${this.opIndex}`);
        if (mesh) {
          ts.ctrl.push({ ...ringEntry(0), algoType: EncPattern.MESH, algoSubType: ts.meshType, reporter: report, semaShiftOffset: 0, semaMask: 0xffff });
          if (report) ts.reportOps.push(this.reportedOps);
          took.push({ device, topsp: index });
          continue;
        }
        if (active.length === 0) {
          // Nothing for this TopSP in this op: a no-op entry keeps its entries in step with the op
          // sequence (a device barrier after the op holds it too).
          ts.ctrl.push(ringEntry(0, { reporter: false, algoType: EncPattern.RING }));
          took.push({ device, topsp: index });
          continue;
        }
        const channelList = active.reduce((m, c) => (m | (1 << c.placement.channelId)) >>> 0, 0);
        const reporter = report && active.some((c) => c.placement.reporter);
        ts.ctrl.push(ringEntry(channelList, { reporter, algoType: EncPattern.RING }));
        if (reporter) ts.reportOps.push(this.reportedOps);
        took.push({ device, topsp: index });
      }
    }
    if (report) this.reportedOps++;
    return took;
  }

  /**
   * A counted device barrier after each member's last entry, on semaphores semaBase..semaBase+2 of
   * every member: (0) the rank's other TopSPs arrive at its leader, (1) the leaders arrive at each
   * other, (2) each leader releases its rank's other TopSPs. Arrivals are semaphore increments on
   * the member's barrier queue; targets count up over the program.
   */
  deviceBarrier(ranks: readonly BarrierRank[], semaBase: number, queue: number): void {
    const target = (device: number, topsp: number, k: number, add: number): number => {
      const key = `${device}/${topsp}/${semaBase + k}`;
      const v = (this.barrierCounts.get(key) ?? 0) + add;
      this.barrierCounts.set(key, v);
      // Barrier semaphores count arrivals over the program (waits read them, nothing consumes them).
      this.countUp(device, topsp, semaBase + k, add);
      return v;
    };
    const read = (device: number, topsp: number, k: number) => semaAddr(device, topsp, semaBase + k, "read");
    const inc = (device: number, topsp: number, k: number) => semaAddr(device, topsp, semaBase + k, "inc");
    for (const r of ranks) {
      const leader = r.members[0];
      if (!leader) continue;
      r.members.forEach((m, j) => {
        const d = this.dev(r.device);
        const ts = d.topsps.get(m.topsp);
        if (!ts || ts.ctrl.length === 0) throw new InternalError(`barrier on dev${r.device} topsp${m.topsp}, which has no entry`);
        let q = d.barrierQueues.get(m.topsp);
        if (!q) {
          const bound = this.bindVrings(d, r.device, [m.engine], queue);
          q = { vring: bound.vrings[0]!, mask: bound.mask, seng: bound.seng, engine: m.engine };
          d.barrierQueues.set(m.topsp, q);
        }
        const vr = q.vring;
        const arrive = (targets: readonly number[]): { m2sVal: number; s2mVal: number } => {
          let tx = 0;
          let rx = 0;
          for (const a of targets) {
            const c = vr.addSemaphoreWrite(d.constAddr, a);
            tx += c.tx;
            rx += c.rx;
          }
          return { m2sVal: tx, s2mVal: rx };
        };
        const others = ranks.filter((o) => o !== r && o.members.length > 0);
        const steps: BarrierStep[] =
          j === 0
            ? [
                { m2sVal: 0, s2mVal: 0, waits: r.members.length > 1 ? [{ sema: read(r.device, m.topsp, 0), target: target(r.device, m.topsp, 0, r.members.length - 1) }] : [] },
                { ...arrive(others.map((o) => inc(o.device, o.members[0]!.topsp, 1))), waits: others.length > 0 ? [{ sema: read(r.device, m.topsp, 1), target: target(r.device, m.topsp, 1, others.length) }] : [] },
                { ...arrive(r.members.slice(1).map((o) => inc(r.device, o.topsp, 2))), waits: [] },
              ]
            : [
                { ...arrive([inc(r.device, leader.topsp, 0)]), waits: [] },
                { m2sVal: 0, s2mVal: 0, waits: [] },
                { m2sVal: 0, s2mVal: 0, waits: [{ sema: read(r.device, m.topsp, 2), target: target(r.device, m.topsp, 2, 1) }] },
              ];
        ts.barriers.set(ts.ctrl.length - 1, {
          ...NO_BARRIER,
          execute: true,
          steps,
          m2sTail: tailDoorbellAddr(r.device, undefined, queue, "m2s", q.seng),
          s2mTail: tailDoorbellAddr(r.device, undefined, queue, "s2m", q.seng),
          mask: q.mask,
          descCount: vr.txCount,
          enginesBitmap: q.mask & 0xffff,
          queueId: queue,
        });
      });
    }
  }

  build(): ProgramImage {
    const devices: DeviceImage[] = [];
    for (const device of [...this.devices.keys()].sort((a, b) => a - b)) {
      const d = this.dev(device);
      const queues: QueueImage[] = [...d.vrings.values()]
        .sort((a, b) => a.engine - b.engine || a.queue - b.queue)
        .map(({ engine, queue, vring, stream }): QueueImage => {
          if (!stream) return { engine, queue, ...dumpToPringPadded(vring, vring.txCount, vring.rxCount, d.padAddr) };
          return { engine, queue, tx: NO_BYTES, rx: NO_BYTES, streamed: { txCount: vring.txCount, rxCount: vring.rxCount, tx: stream.tx, rx: stream.rx, rxPins: vring.rxPins } };
        });
      const topsps: TopspImage[] = [...d.topsps.entries()]
        .sort((a, b) => a[0] - b[0])
        .map(([index, ts]) => {
          const ctrlSpad = new Uint8Array(ts.ctrl.length * SPAD_CTRL_ENTRY_BYTES);
          // Every op but the last triggers the next one on completion.
          ts.ctrl.forEach((e, i) => ctrlSpad.set(packSpadCtrlEntry({ ...e, triggerNext: i < ts.ctrl.length - 1 }), i * SPAD_CTRL_ENTRY_BYTES));
          const maxSlot = Math.max(-1, ...ts.slots.keys());
          const slotSpad = Array.from({ length: maxSlot + 1 }, (_, s) => ts.slots.get(s)?.view() ?? new Uint8Array(0));
          const meshConfig = new Uint8Array(maxMeshEvents(this.params.arch) * MESH_EVENT_BYTES);
          ts.mesh.forEach((e, i) => packMeshEvent(e, meshConfig, i));
          const barrierConfig = new Uint8Array(ts.ctrl.length * BARRIER_CONFIG_BYTES);
          for (const [i, b] of ts.barriers) packBarrierConfig(b, barrierConfig, i);
          return { index, ctrlSpad, opNum: ts.ctrl.length, ringConfig: ts.ringConfig, slotSpad, meshConfig, barrierConfig, reportOps: ts.reportOps };
        });
      const proxyQueues = d.proxies.filter((p) => p.entries.count > 0).map((p) => ({ topsp: p.topsp, sema: p.sema, ...(p.folds > 1 ? { folds: p.folds } : {}), fifo: p.entries.packed() }));
      // A proxy queue's trigger semaphores (one per fold) each end at the sum of the triggers.
      for (const p of d.proxies) for (let f = 0; f < p.folds; f++) this.countUp(device, p.topsp, p.sema + f, p.entries.triggers);
      const initial = new Map(d.semaphores.map((s) => [`${s.topsp}/${s.sema}`, s.value]));
      const finalSemaphores = [...d.counters].map(([key, n]) => {
        const [topsp, sema] = key.split("/").map(Number) as [number, number];
        return { topsp, sema, value: (initial.get(key) ?? 0) + n };
      });
      devices.push({ device, topsps, queues, memory: d.memory, payload: d.payload, scratch: [{ addr: d.padAddr, bytes: WORD_BYTES }], semaphores: d.semaphores, finalSemaphores, proxyQueues });
    }
    return { format: "ccsim-program-image", version: 1, arch: this.params.arch, nodes: this.params.nodes ?? 1, devicesPerNode: this.params.devicesPerNode ?? MAX_DEVICES_TOTAL, devices };
  }
}

const NO_BYTES = new Uint8Array(0);

/** Split `bytes` of whole `esize`-byte elements into `parts` contiguous shares (the last ones may be short or empty). */
export function splitWhole(bytes: number, esize: number, parts: number): readonly Share[] {
  if (bytes % esize !== 0) throw new InternalError(`transfer of ${bytes} bytes is not whole ${esize}-byte elements`);
  // A composition asks for the same few splits again and again: they are kept (read-only).
  const key = esize < 16 && parts < 1024 ? (bytes * 16 + esize) * 1024 + parts : Number.NaN;
  const cached = Number.isSafeInteger(key);
  const known = cached ? SPLITS.get(key) : undefined;
  if (known) return known;
  const elems = bytes / esize;
  const per = Math.ceil(elems / parts);
  const out = Object.freeze(
    Array.from({ length: parts }, (_, f) => {
      const start = Math.min(f * per, elems);
      const end = Math.min(start + per, elems);
      return Object.freeze({ off: start * esize, len: (end - start) * esize });
    }),
  );
  if (!cached) return out;
  if (SPLITS.size >= SPLITS_KEPT) SPLITS.clear();
  SPLITS.set(key, out);
  return out;
}

/** One fold's (or one part's) share of a transfer: an offset into it and a length. */
export interface Share {
  readonly off: number;
  readonly len: number;
}

/** Kept splits by (bytes, esize, parts), one number while it is a safe integer (esize < 16, parts < 1024). */
const SPLITS = new Map<number, readonly Share[]>();
const SPLITS_KEPT = 4096;

/** One ring channel of one rank, as the emitter sees it (the encd_dma_channel analogue). */
export class EncdChannel {
  readonly placement: ChannelPlacement;
  /** Its completion semaphores count ops (a ring channel's), rather than being waited on (a mesh program's). */
  countsCompletions = false;
  private readonly builder: ProgramBuilder;
  private readonly folds: readonly Vring[];
  private readonly steps: GrownBytes;
  private readonly constAddr: number;
  private readonly padAddr: number;
  /** Live tp_inc record per fold: descriptors emitted since the last step mark. */
  private readonly tx: number[];
  private readonly rx: number[];
  private lastEntry: { -readonly [K in keyof SlotEntry]: SlotEntry[K] } | undefined;
  endedOps = 0;
  /** The op index this channel last ended (-1: none). */
  lastEndedOp = -1;

  constructor(builder: ProgramBuilder, p: ChannelPlacement, folds: readonly Vring[], steps: GrownBytes, constAddr: number, padAddr: number) {
    this.builder = builder;
    this.placement = p;
    this.folds = folds;
    this.steps = steps;
    this.constAddr = constAddr;
    this.padAddr = padAddr;
    this.tx = folds.map(() => 0);
    this.rx = folds.map(() => 0);
  }

  get foldN(): number {
    return this.folds.length;
  }

  /** Split `bytes` (whole elements of `esize`) into one contiguous share per fold. */
  private shares(bytes: number, esize: number): readonly Share[] {
    return splitWhole(bytes, esize, this.folds.length);
  }

  private count(f: number, c: { tx: number; rx: number }): void {
    this.tx[f] = (this.tx[f] ?? 0) + c.tx;
    this.rx[f] = (this.rx[f] ?? 0) + c.rx;
  }

  /** encd_dma_copy: `bytes` from `src` to `dst`, shared across the folds. */
  copy(src: number, dst: number, bytes: number, esize: number): void {
    const shares = this.shares(bytes, esize);
    for (let f = 0; f < shares.length; f++) {
      const s = shares[f]!;
      if (s.len > 0) this.count(f, this.folds[f]!.addCopy(src + s.off, dst + s.off, s.len));
    }
  }

  /**
   * One read of `src`, written to every address of `dsts` (CCE replication: a one-source ADD packet
   * per `packetBytes` with several destinations; ENC1610 before v3); shared across the folds.
   */
  replicate(src: number, dsts: readonly number[], bytes: number, sdmaDtype: number, esize: number, packetBytes: number): void {
    if (dsts.length === 1) return this.copy(src, dsts[0]!, bytes, esize);
    this.reduce([src], dsts, bytes, SdmaCceType.ADD, sdmaDtype, esize, packetBytes);
  }

  /** encd_dma_reduce_copy: dst = op(srcs...) element-wise over `bytes`, in CCE packets of at most `packetBytes`. */
  reduce(srcs: readonly number[], dst: number | readonly number[], bytes: number, op: SdmaCceType, sdmaDtype: number, esize: number, packetBytes: number): void {
    const dsts = typeof dst === "number" ? [dst] : dst;
    if (dsts.length > 1 && this.builder.params.arch < 3) throw new EncodeError("ENC1610", "CCE replication not supported for v1/v2 archs", { path: "reduce.num_dests", value: dsts.length });
    if (packetBytes % esize !== 0 || packetBytes > this.builder.params.maxDescriptorBytes || packetBytes < esize) {
      throw new EncodeError("ENC1609", `CCE packet of ${packetBytes} bytes is not whole ${esize}-byte elements within one descriptor`, { path: "reduce.packet", value: packetBytes });
    }
    const packet = packetBytes;
    const shares = this.shares(bytes, esize);
    for (let f = 0; f < shares.length; f++) {
      const s = shares[f]!;
      if (s.len > 0) this.count(f, this.folds[f]!.addCce(op, sdmaDtype, srcs.map((a) => a + s.off), dsts.map((d) => d + s.off), s.len, packet));
    }
  }

  /**
   * A semaphore increment by 1, issued on every fold: fold f increments the semaphore after the one
   * `incBase` names by f (the per-fold recv_sema_ids / credit ids are consecutive).
   */
  semaInc(incBase: number): void {
    for (let f = 0; f < this.folds.length; f++) this.count(f, this.folds[f]!.addSemaphoreWrite(this.constAddr, incBase + 4 * f));
  }

  /**
   * Close a step: pad short folds to equal counts, guard the 16-bit counters, record the slot entry.
   * A deficit is paid in no-op copy pairs (1 TX + 1 RX) and, where a fold is short of reduce
   * packets (3 TX + 1 RX), in reduce-shaped no-ops on the pad word.
   */
  markStep(flags: number, drainTarget = 0): void {
    // Folds already even, as they almost always are, need no padding.
    const tx = this.tx;
    const rx = this.rx;
    let maxTx = tx[0]!;
    let maxRx = rx[0]!;
    let even = true;
    for (let f = 1; f < tx.length; f++) {
      if (tx[f] !== maxTx || rx[f] !== maxRx) even = false;
      maxTx = Math.max(maxTx, tx[f]!);
      maxRx = Math.max(maxRx, rx[f]!);
    }
    if (!even) this.padFolds(maxTx, maxRx);
    const m2s = this.tx[0] ?? 0;
    const s2m = this.rx[0] ?? 0;
    if (m2s > TP_INC_MAX - 1 || s2m > TP_INC_MAX - 1) {
      throw new EncodeError("ENC1607", `UINT16_MAX - channel->tp_inc_record.m2s_val > tx_descs_n[0] fails: a step needs ${m2s} tx / ${s2m} rx descriptors`, {
        path: `channel${this.placement.channelId}.tp_inc`,
        value: { m2s, s2m },
      });
    }
    const e = { m2s, s2m, repeat: 1, flags, drainTarget };
    const prev = this.lastEntry;
    if (prev && prev.m2s === m2s && prev.s2m === s2m && prev.flags === flags && prev.drainTarget === drainTarget && !(flags & StepFlag.LAST_SYNC) && prev.repeat < TP_INC_MAX) {
      // The last entry is this channel's own record (not kept elsewhere): its repeat grows in place.
      prev.repeat++;
      packSlotEntry(prev, this.steps.bytes, this.steps.length - SLOT_ENTRY_BYTES);
    } else {
      packSlotEntry(e, this.steps.grow(SLOT_ENTRY_BYTES), this.steps.length - SLOT_ENTRY_BYTES);
      this.lastEntry = e;
    }
    this.tx.fill(0);
    this.rx.fill(0);
  }

  /**
   * Pad short folds to the longest. A fold short of TX but not of RX (the others reduce many
   * sources) cannot be padded to the longest as it is: raise every fold by t no-op pairs until all
   * can be (t = 0 almost always).
   */
  private padFolds(maxTx: number, maxRx: number): void {
    let t = 0;
    while (t < 4 && this.folds.some((_, f) => !padPlan(maxTx + t - (this.tx[f] ?? 0), maxRx + t - (this.rx[f] ?? 0)))) t++;
    this.folds.forEach((v, f) => {
      const dTx = maxTx + t - (this.tx[f] ?? 0);
      const dRx = maxRx + t - (this.rx[f] ?? 0);
      const plan = padPlan(dTx, dRx);
      if (!plan) {
        throw new EncodeError("ENC1606", `fold ${f} cannot be padded: (m2s_val_prev - m2s_val_curr) == (s2m_val_prev - s2m_val_curr) fails (${dTx} vs ${dRx})`, {
          path: `channel${this.placement.channelId}.fold${f}`,
          value: { dTx, dRx },
        });
      }
      const { sources, fan } = plan;
      for (const k of sources) this.count(f, v.addCceNoop(this.padAddr, k));
      if (fan > 0) this.count(f, v.addReplicateNoop(this.padAddr, fan));
      for (let i = sources.length + fan; i < dRx; i++) this.count(f, v.addNoop(this.padAddr));
    });
  }

  /** mark_end: the per-fold completion-semaphore write, then the LAST_SYNC step. */
  markEnd(): void {
    this.semaInc(semaAddr(this.placement.device, this.placement.topsp, this.placement.complSema, "inc"));
    if (this.countsCompletions) this.folds.forEach((_, f) => this.builder.countUp(this.placement.device, this.placement.topsp, this.placement.complSema + f, 1));
    this.markStep(StepFlag.LAST_SYNC);
    for (const v of this.folds) v.pinLastRx();
    this.lastEntry = undefined;
    this.endedOps++;
    this.lastEndedOp = this.builder.currentOp;
  }

  /** A copy on fold `f` only (mesh programs give each destination its own engine). */
  copyOn(f: number, src: number, dst: number, bytes: number): void {
    if (bytes > 0) this.count(f, this.fold(f).addCopy(src, dst, bytes));
  }

  /** A reduce on fold `f` only. */
  reduceOn(f: number, srcs: readonly number[], dst: number, bytes: number, op: SdmaCceType, sdmaDtype: number, packetBytes: number): void {
    if (bytes > 0) this.count(f, this.fold(f).addCce(op, sdmaDtype, srcs, dst, bytes, packetBytes));
  }

  /** A semaphore increment by the word at `valueAddr` (default: the constant 1) on fold `f` only. */
  semaIncOn(f: number, incAddr: number, valueAddr = this.constAddr): void {
    this.count(f, this.fold(f).addSemaphoreWrite(valueAddr, incAddr));
  }

  private fold(f: number): Vring {
    const v = this.folds[f];
    if (!v) throw new InternalError(`fold ${f} of a ${this.folds.length}-fold DMA set`);
    return v;
  }
}

/**
 * How a fold short of dTx TX and dRx RX descriptors is padded: reduce-shaped no-ops (each one RX
 * and s + 1 TX, s >= 2 extra sources) for a TX surplus, one replicated no-op (2 TX, extra + 2 RX)
 * for an RX surplus, no-op copy pairs for the rest; undefined when no mix of them fits.
 */
function padPlan(dTx: number, dRx: number): { sources: number[]; fan: number } | undefined {
  // Each pad is one RX; a reduce-shaped pad with s sources adds s extra TX (s >= 2).
  const sources: number[] = [];
  let extra = dTx - dRx;
  while (extra > 0) {
    let k = Math.min(extra, 128);
    if (extra - k === 1) k--;
    if (k < 2) break;
    sources.push(k);
    extra -= k;
  }
  // Short of RX instead (a replicated packet): one replicated no-op of 2 TX and extra + 2 RX.
  const fan = extra < 0 && dTx >= 2 && -extra + 2 <= 256 ? -extra + 2 : 0;
  if (fan > 0) extra = 0;
  if (extra !== 0 || sources.length > dRx) return undefined;
  return { sources, fan };
}

/** Where a rank's mesh program lives. */
export interface MeshPlacement {
  readonly device: number;
  readonly topsp: number;
  readonly engines: readonly number[];
  readonly queue: number;
  /** The completion semaphore every engine increments at the end of an op. */
  readonly complSema: number;
}

/** A rank's mesh event tape under construction, with the DMA set its legs drive. */
export class MeshProgram {
  readonly dma: EncdChannel;
  readonly leg: DmaLeg;
  /** The mesh type (enc_alg_mesh_type) of the op being composed: its cc_op_entry's algo_sub_type. */
  meshType: EncAlgMeshType = EncAlgMeshType.FULL_MESH;
  private readonly push: (e: MeshEvent) => void;
  constructor(dma: EncdChannel, leg: DmaLeg, push: (e: MeshEvent) => void) {
    this.dma = dma;
    this.leg = leg;
    this.push = push;
  }

  /**
   * One event: optional wait (semaphore READ address >= waitVal), optional DMA leg (the descriptors
   * emitted on `dma` since the last leg become one step), optional direct semaphore triggers.
   */
  event(type: number, o: { wait?: { sema: number; value: number }; dma?: boolean; direct?: readonly number[] } = {}): void {
    if (o.dma) this.dma.markStep(0);
    const direct = o.direct ?? [];
    if (direct.length > 3) throw new InternalError(`a mesh event has 3 direct triggers, not ${direct.length}`);
    this.push({
      legs: [o.dma ? this.leg : NO_LEG, NO_LEG],
      directTrigger: [direct[0] ?? 0, direct[1] ?? 0, direct[2] ?? 0],
      waitSema: o.wait?.sema ?? 0,
      waitVal: o.wait?.value ?? 0,
      eventType: type,
      dmaTrigger: o.dma ?? false,
      directTriggerOn: direct.length > 0,
      waitEvent: o.wait !== undefined,
    });
  }
}
