// The host network proxy: per ring channel, a work queue the device triggers through a semaphore.
// Entry k runs once the semaphore has counted its trigger (one increment per fold); the proxy reads
// the source, sends it through its node's NIC to the remote node's NIC, writes it there and
// increments the remote semaphores (one per remote fold) when it has landed.
import { SimError } from "../../src/ir/errors.ts";
import type { Tick } from "../../src/ir/time.ts";
import { ADDRESS_BLOCK, addressFields, decodeAddress, describeAddress, readAddress } from "../../src/encd/address.ts";
import { decodeProxyEntry, PROXY_ENTRY_BYTES, type ProxyEntry } from "../../src/encd/proxy-fifo.ts";
import { Prio, type Kernel } from "../kernel/kernel.ts";
import { PacketClock, type Fabric } from "./fabric.ts";
import type { SemaphoreBlock } from "./semaphore.ts";
import type { TraceSink } from "../trace.ts";
import { ThreadClock, type Access, type RaceDetector } from "../verify/races.ts";
import type { SymbolicMemory, SymStream } from "../verify/symbolic-memory.ts";
import type { SymPiece } from "./dma.ts";
import { steadyStable, steadyTag, type SteadyInput, type SteadyTag, type SteadyVisitor } from "../kernel/steady.ts";

export interface ProxyHost {
  readonly kernel: Kernel;
  readonly fabric: Fabric;
  readonly network: { readonly latencyPs: number; readonly messageCostPs: number };
  /** The bytes at `offset` of `device`'s HBM (a copy), or undefined where they are not kept (a timing-only run's payload). */
  payload(device: number, offset: number, len: number): Uint8Array | undefined;
  /** The device that stands for `device` in this run: itself, or its place in the unit (pod) a folded image holds. */
  home(device: number): number;
  land(addr: number, from: number, bytes: Uint8Array | undefined, len: number, acc?: Access, sym?: SymPiece): void;
  readonly trace: TraceSink | undefined;
  readonly races: RaceDetector | undefined;
  readonly symbolic: SymbolicMemory | undefined;
  /** Steady state: a payload-less write of `len` bytes at `addr` (as `from` addresses it) lands unseen (in a declared region). */
  quiet(addr: number, from: number, len: number): boolean;
  /** Steady state: the bytes at `offset` of `device`'s HBM are not kept (a timing-only run reads nothing there). */
  dropped(device: number, offset: number, len: number): boolean;
}

const ONE = new Uint8Array([1, 0, 0, 0]);

export class ProxyQueue {
  private k = 0;
  private target = 0;
  private lastLand: Tick = 0;
  /** Trigger semaphores entry k still waits for, and entries sent whose writes have not landed. */
  private pending = 0;
  private inflight = 0;
  private readonly n: number;
  /** Race detection: the proxy as a memory agent (its id, its epochs, what its triggers acquired). */
  private readonly agent: number;
  private epoch = 0;
  private readonly clock = new ThreadClock();
  constructor(
    private readonly host: ProxyHost,
    private readonly device: number,
    private readonly semas: SemaphoreBlock,
    private readonly topsp: number,
    private readonly sema: number,
    private readonly fifo: Uint8Array,
    /** Trigger semaphores: `sema` .. `sema + folds - 1`, one per DMA fold, each counting to the sum of the triggers. */
    private readonly folds = 1,
  ) {
    this.n = fifo.length / PROXY_ENTRY_BYTES;
    const trace = host.trace;
    if (trace) this.packet.onBusy = (res, bytes, a, b) => trace.link(res.name, bytes, a, b);
    this.agent = host.races ? host.races.agent(`proxy of dev${device} topsp${topsp}`, "entry") : -1;
    for (let f = 0; f < folds; f++) semas.proxyWaited.add(sema + f);
  }

  /** Entry k's last trigger has counted: run it, and go on. */
  private readonly triggered = steadyStable((): void => {
    if (--this.pending > 0) return;
    const k = this.k;
    this.fire(k, decodeProxyEntry(this.fifo, k));
    this.next();
  });

  start(): void {
    this.next();
  }

  /**
   * Run the entries whose triggers have counted, in order; wait for the first that has not. With
   * several trigger semaphores, an entry runs once every one has counted (when the last is seen).
   */
  private next(): void {
    while (this.k < this.n) {
      const k = this.k;
      const e = decodeProxyEntry(this.fifo, k);
      this.target += e.trigger;
      const target = this.target;
      let pending = 0;
      for (let f = 0; f < this.folds; f++) if (this.semas.values[this.sema + f]! < target) pending++;
      if (pending > 0) {
        this.pending = pending;
        for (let f = 0; f < this.folds; f++) if (this.semas.values[this.sema + f]! < target) this.semas.waitGe(this.sema + f, target, this.triggered);
        return;
      }
      this.fire(k, e);
    }
  }

  private fire(k: number, e: ProxyEntry): void {
    if (this.host.races) for (let f = 0; f < this.folds; f++) this.clock.acquire(this.semas.published(this.sema + f));
    this.k = k + 1;
    this.run(k, e);
  }

  private run(k: number, e: ProxyEntry): void {
    const host = this.host;
    const kern = host.kernel;
    // The entry's remote addresses name devices of its block; its source is this device's own.
    const remote = e.block * ADDRESS_BLOCK;
    // (Addresses read into one reused record, what is needed taken at once: no object an entry.)
    const a = this.addr;
    let data: Uint8Array | undefined;
    let stream: SymStream | undefined;
    const races = host.races;
    if (e.bytes > 0) {
      readAddress(e.src, this.device, a);
      if (a.kind !== "hbm" || a.device !== this.device) throw new SimError("SIM1515", `proxy of dev${this.device}: entry ${k} reads ${describeAddress(e.src, this.device)}, not this device's HBM`, { value: e.src });
      const offset = a.offset;
      if (readAddress(e.dst, remote, a).kind !== "hbm") throw new SimError("SIM1515", `proxy of dev${this.device}: entry ${k} writes ${describeAddress(e.dst, remote)}, not HBM`, { value: e.dst });
      data = host.payload(this.device, offset, e.bytes);
      if (races) races.read(this.device, offset, e.bytes, this.access(k, kern.now));
      stream = host.symbolic?.read(this.device, [{ off: offset, len: e.bytes }]);
    }
    const to = host.home(readAddress(e.sema, remote, a).device);
    const net = host.network;
    // Sending NIC, then the receiving one a network latency later; a credit is a 4-byte message.
    const bytes = Math.max(e.bytes, 4);
    const c = this.packet;
    c.begin(kern.now + net.messageCostPs);
    c.stage(host.fabric.nicTx[host.fabric.nicOf(this.device)]!, bytes, 0, net.latencyPs, true);
    c.stage(host.fabric.nicRx[host.fabric.nicOf(to)]!, bytes, 0, 0, false);
    const land = Math.max(c.end().land, this.lastLand);
    this.lastLand = land;
    const wacc = races ? this.access(k, land) : undefined;
    this.inflight++;
    const landing = this.landingOf(e, remote, data, wacc, stream);
    // (Its effect is its entry's, k entries back: entries alike land alike.)
    kern.at(land, Prio.LAND, kern.onMark ? steadyTag(landing, new LandingTag(this, k, data !== undefined || wacc !== undefined || stream !== undefined)) : landing);
  }

  /** The record entries' addresses are read into, and the clock their messages are timed on (reused). */
  private readonly addr = addressFields();
  private readonly packet = new PacketClock();

  /** Entry `k`'s memory access at `timePs` (race detection). */
  private access(k: number, timePs: number): Access {
    return { agent: this.agent, epoch: ++this.epoch, clock: this.clock.snapshot(), desc: k, timePs };
  }

  /**
   * An entry's landing at the remote end: its payload, then its semaphore increments. (Made here:
   * a closure held in a named const is named at each making where the loader keeps names, tsx.)
   */
  private landingOf(e: ProxyEntry, remote: number, data: Uint8Array | undefined, wacc: Access | undefined, stream: SymStream | undefined): () => void {
    const host = this.host;
    return () => {
      this.inflight--;
      if (e.bytes > 0) host.land(e.dst, remote, data, e.bytes, wacc, stream && { stream, at: 0 });
      for (let i = 0; i < e.semaN; i++) host.land(e.sema + 4 * i, remote, ONE, 4, wacc);
    };
  }

  /** Steady state: the entries as an input (entries alike trigger, send and land alike). */
  private input: SteadyInput | undefined;

  private steadyInput(): SteadyInput {
    const host = this.host;
    return (this.input ??= {
      count: this.n,
      alike: (x, y) => {
        const a = decodeProxyEntry(this.fifo, x);
        const b = decodeProxyEntry(this.fifo, y);
        if (a.trigger !== b.trigger || a.bytes !== b.bytes || a.semaN !== b.semaN || a.sema !== b.sema || a.block !== b.block) return false;
        if (a.bytes === 0) return true;
        const remote = a.block * ADDRESS_BLOCK;
        const sa = decodeAddress(a.src, this.device);
        const sb = decodeAddress(b.src, this.device);
        const srcAlike = a.src === b.src || (sa.kind === "hbm" && sb.kind === "hbm" && sa.device === this.device && sb.device === this.device && host.dropped(this.device, sa.offset, a.bytes) && host.dropped(this.device, sb.offset, a.bytes));
        return srcAlike && (a.dst === b.dst || (host.quiet(a.dst, remote, a.bytes) && host.quiet(b.dst, remote, b.bytes)));
      },
    });
  }

  /** Steady state: where the queue is in its entries, its trigger count (from the semaphores' values), and its writes on their way. */
  steady(v: SteadyVisitor): void {
    v.same(this.device);
    v.same(this.topsp);
    this.k = v.position(this.k, this.steadyInput(), this.inflight + 1, 1);
    for (let f = 0; f < this.folds; f++) v.same(this.target - this.semas.values[this.sema + f]!);
    this.target = this.semas.drift(v, this.sema, this.target);
    v.same(this.pending);
    v.same(this.inflight);
    this.lastLand = v.time(this.lastLand);
  }

  steadyLanding(v: SteadyVisitor, k: number, carries: boolean): void {
    if (carries) v.opaque = true;
    v.same(this.device);
    v.same(this.topsp);
    v.same(this.k - k);
  }

  /** What the queue still waits for, for hang reports. */
  waiting(): string | undefined {
    if (this.k >= this.n) return undefined;
    const semas = Array.from({ length: this.folds }, (_, f) => `sem${this.sema + f} (value ${this.semas.values[this.sema + f]})`);
    return `proxy of dev${this.device} topsp${this.topsp}: entry ${this.k} of ${this.n} waits for ${semas.join(", ")} >= ${this.target}`;
  }
}

/** A proxy's landing on its way, as steady state reads it: its entry, counted back from the queue's next. */
class LandingTag implements SteadyTag {
  private readonly queue: ProxyQueue;
  private readonly k: number;
  private readonly carries: boolean;
  constructor(queue: ProxyQueue, k: number, carries: boolean) {
    this.queue = queue;
    this.k = k;
    this.carries = carries;
  }
  steady(v: SteadyVisitor): void {
    this.queue.steadyLanding(v, this.k, this.carries);
  }
}
