// The emitter: lowers the composer's step leaves into a per-device program image of wire bytes.
//
// A channel's leaves call copy / reduce / semaInc / markStep / markEnd. Each call emits descriptors
// into the vring of every DMA fold of the channel (one queue per fold); markStep closes a step: all
// folds must have the same descriptor counts (short folds are padded with no-op pairs), the counts
// must fit the 16-bit tp_inc fields, and the step becomes one spad_slot_entry (identical neighbours
// merge into one entry with a repeat count). markEnd appends, per fold, the completion-semaphore
// write, then a LAST_SYNC step. endOp writes one cc_op_entry per TopSP naming its channels.
import { EncAlgMeshType, EncPattern } from "../ir/enums.ts";
import { EncodeError, InternalError } from "../ir/errors.ts";
import { packChannelConfig, ALGO_CONFIG_RING_BYTES, MAX_CHANNELS } from "./channel.ts";
import { packSpadCtrlEntry, ringEntry, SPAD_CTRL_ENTRY_BYTES, type CcOpEntry } from "./ccop.ts";
import { ENGINES_PER_SENG, hbmAddr, semaAddr, tailDoorbellAddr } from "./address.ts";
import { SLOT_ENTRY_BYTES } from "./slot.ts";
import { dumpToPringPadded, Vring, VRING_DESC_LIMIT, WORD_BYTES, type VringStore } from "./vring.ts";
import { Signature, UnitAddresses } from "./signature.ts";
import { DescPages } from "./pages.ts";
import { GrownBytes } from "./bits.ts";
import { MESH_EVENT_BYTES, maxMeshEvents, packMeshEvent, type DmaLeg, type MeshEvent } from "./mesh-event.ts";
import { ProxyFifo } from "./proxy-fifo.ts";
import { inUnits } from "./fold.ts";
import { BARRIER_CONFIG_BYTES, NO_BARRIER, packBarrierConfig, type BarrierConfig, type BarrierStep } from "./barrier.ts";
import { MESH_SLOT, type DeviceImage, type MemorySegment, type ProgramImage, type QueueImage, type TopspImage } from "./image.ts";
export type { ProgramImage, QueueImage } from "./image.ts";
import { EncdChannel, type ChannelPlacement, type EmitterParams } from "./channel-writer.ts";
import { MeshProgram, type MeshPlacement } from "./mesh-writer.ts";

const NO_BYTES = new Uint8Array(0);


const MAX_DEVICES_TOTAL = 32;


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
export type RingMode =
  | { readonly kind: "keep" }
  | { readonly kind: "count"; readonly stores: Map<string, VringStore>; readonly fold?: RingFold }
  /** `open`: a ring the stores do not hold yet gets one, made by `open` (a stream started before its keys are known); else it is an error. */
  | { readonly kind: "stream"; readonly stores: Map<string, VringStore>; readonly fold?: RingFold; readonly open?: () => VringStore };

/**
 * A folded composition: only devices below `unitDevices` (unit 0: pod 0) get
 * descriptors; the others' are counted (tallied, not packed). The counting pass hashes every
 * device's descriptor runs into `signatures` (by "device/engine/queue"), so units can be compared.
 */
export interface RingFold {
  readonly unitDevices: number;
  readonly signatures: Map<string, Signature>;
  /**
   * A counting pass of units [from, to) only: the ring-type channels of the other units' devices
   * are not composed (their rings stay empty). Two passes on two threads count a program's halves.
   */
  readonly units?: { readonly from: number; readonly to: number };
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
    this.copyBytes = params.maxDescriptorBytes;
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

  /** Each device's hashing of unit-relative addresses, shared by its rings (they name the same few places). */
  private readonly coders = new Map<number, UnitAddresses>();
  private unitAddresses(device: number, unitDevices: number): UnitAddresses {
    let c = this.coders.get(device);
    if (!c) this.coders.set(device, (c = new UnitAddresses(device, unitDevices)));
    return c;
  }

  /** The stream of the rings a pass of some units counts and no streaming pass will fill (`newVring`): empty, shared. */
  private unstreamed: VringStore | undefined;

  /** A vring as the ring mode has it, and the streamed rings it stands for (count mode). */
  private newVring(name: string, key: string, device: number): { vring: Vring; stream?: VringStore } {
    const m = this.rings;
    if (m.kind === "keep") return { vring: new Vring(name) };
    const fold = m.fold;
    // A folded program: pod 0's rings as usual, the other pods' only tallied; every one hashed when counting.
    const other = fold !== undefined && device >= fold.unitDevices;
    const counting = () => ({ tx: new DescPages(false), rx: new DescPages(false) });
    if (m.kind === "count") {
      // A pass that counts some units only (`fold.units`, one of two threads' halves) hashes their
      // devices' rings alone, and gives a stream to unit 0's alone: it is folded, and its stream is
      // unit 0's; or not, and the whole program is counted again. (A stream for every ring of 4,096
      // ranks was 150,000 lists made, and walked by every batch of the streaming pass.)
      const units = fold?.units;
      const hashed = fold !== undefined && inUnits(device, fold.unitDevices, units);
      let sig: Signature | undefined;
      if (hashed) fold.signatures.set(key, (sig = new Signature()));
      const tally = { tally: true, ...(sig && fold ? { sig: { sig, addresses: this.unitAddresses(device, fold.unitDevices) } } : {}) };
      const vring = new Vring(name, VRING_DESC_LIMIT, counting(), tally);
      // (Otherwise every ring gets its stream: a program that is not folded after all streams them all.)
      if (units && other) return { vring, stream: (this.unstreamed ??= counting()) };
      const stream = { tx: new DescPages(), rx: new DescPages() };
      m.stores.set(key, stream);
      return { vring, stream };
    }
    if (other) return { vring: new Vring(name, VRING_DESC_LIMIT, counting(), { tally: true }) };
    let store = m.stores.get(key);
    if (!store && m.open) m.stores.set(key, (store = m.open()));
    if (!store) throw new InternalError(`streamed composition binds ${name}, which the counting pass did not`);
    if (!fold) return { vring: new Vring(name, VRING_DESC_LIMIT, store) };
    // A folded streaming pass hashes pod 0's rings too: they must hash as the counting pass's did.
    const sig = new Signature();
    fold.signatures.set(key, sig);
    return { vring: new Vring(name, VRING_DESC_LIMIT, store, { tally: false, sig: { sig, addresses: this.unitAddresses(device, fold.unitDevices) } }) };
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

  /** The current op's copy descriptors' largest size (`beginOp`): the preset's descriptor cap unless the op's CC DMA packet is smaller. */
  copyBytes: number;

  /** The next op begins; `copyBytes`: its CC DMA packet (`opPacketBytes`), the most a copy descriptor of it moves. */
  beginOp(copyBytes = this.params.maxDescriptorBytes): void {
    this.opIndex++;
    this.copyBytes = copyBytes;
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

  /** The program's image: of every device, or of those `keep` accepts (a pass that counts some units reads theirs and unit 0's alone). */
  build(keep: (device: number) => boolean = () => true): ProgramImage {
    const devices: DeviceImage[] = [];
    for (const device of [...this.devices.keys()].filter(keep).sort((a, b) => a - b)) {
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
