// SDMA engines: queues of TX/RX physical rings advanced by tail-pointer doorbells, served
// round-robin at packet boundaries, one packet at a time; in-engine reduce for CCE packets.
import { InternalError, SimError } from "../../src/ir/errors.ts";
import { WIDE_ZERO, type Tick } from "../../src/ir/time.ts";
import { addressFields, describeAddress, HBM_LIMIT, hbmAddr, readAddress } from "../../src/encd/address.ts";
import type { TraceSink } from "../trace.ts";
import { DESC_BYTES, decodeLength, LEN_CTRL } from "../../src/encd/udma.ts";
import { wordsOf } from "../../src/encd/bits.ts";
import { INITIAL_RING_ID } from "../../src/encd/vring.ts";
import { PAGE_DESCS, type DescPages } from "../../src/encd/pages.ts";
import type { DescriptorFeed } from "../../src/encd/image.ts";
import { Kernel, Prio, Resource } from "../kernel/kernel.ts";
import { Mode, steadyStable, type SteadyInput, type SteadyVisitor } from "../kernel/steady.ts";
import { cceReduce } from "./cce.ts";
import { takeBytes } from "./arena.ts";
import { regionAt, type Region } from "./memory.ts";
import { PacketClock, type Fabric } from "./fabric.ts";
import type { Access, Clock, QueueClock, RaceDetector } from "../verify/races.ts";
import type { SymbolicMemory, SymStream } from "../verify/symbolic-memory.ts";
import { howOf } from "../../src/ir/dtypes.ts";

/** A landing write's symbolic value: stream bytes from `at` (symbolic checks). */
export interface SymPiece {
  readonly stream: SymStream;
  readonly at: number;
}

export interface DmaHost {
  readonly kernel: Kernel;
  readonly fabric: Fabric;
  readonly trace: TraceSink | undefined;
  /** A device's HBM, as its engines read it. */
  memory(device: number): LocalMemory;
  /** The device that stands for `device` in this run: itself, or its place in the unit a folded image holds. */
  home(device: number): number;
  /** Apply a write that has landed (HBM or a semaphore window); `acc` is the access, when races are tracked. */
  /** Write at `addr` as device `from` addresses it (its own address block). */
  land(addr: number, from: number, bytes: Uint8Array | undefined, len: number, acc?: Access, sym?: SymPiece): void;
  /**
   * The regions of `device`'s HBM (sorted) in which a payload-less write changes nothing the run
   * observes when it lands: declared regions, undefined while races or symbolic values are
   * tracked. Such a landing needs no event.
   */
  quietRegions(device: number): readonly Region[] | undefined;
  /** Race detection, when on. */
  readonly races: RaceDetector | undefined;
  /** Symbolic payload, when on. */
  readonly symbolic: SymbolicMemory | undefined;
  /** An injected fault took effect (for the hang report). */
  faultHit?(message: string): void;
}

/** HBM as an engine reads it. */
export interface LocalMemory {
  /** A copy of the bytes at `offset` (the caller's to keep). */
  read(offset: number, len: number): Uint8Array;
  /** The bytes at `offset`, read at once (valid until the next write: a view where they lie in one page). */
  peek(offset: number, len: number): Uint8Array;
  /** Writes that have kept bytes so far (a read's bytes are unchanged while it stands still). */
  readonly keptWrites: number;
  /** True when these bytes are not kept (timing-only payload). */
  dropped(offset: number, len: number): boolean;
  /** The widest range around `offset` that is all dropped; undefined where `offset` is kept. */
  droppedAround(offset: number): Region | undefined;
}

/**
 * One side of a queue's ring: the whole ring as emitted, or a streamed one whose descriptors arrive
 * (from the program's feed) when the engine reaches them and whose run pages are dropped.
 */
export class RingSide {
  /** Descriptors in the ring (over the whole program). */
  readonly count: number;
  private readonly whole: Uint8Array | undefined;
  private readonly pages: DescPages | undefined;
  private readonly feed: DescriptorFeed | undefined;
  /** Steady state: descriptors from here on are kept (compared with later ones), even once run. */
  private keep = Number.POSITIVE_INFINITY;
  private released = 0;
  private constructor(count: number, whole: Uint8Array | undefined, pages: DescPages | undefined, feed: DescriptorFeed | undefined) {
    this.count = count;
    this.whole = whole;
    this.pages = pages;
    this.feed = feed;
  }
  static whole(bytes: Uint8Array): RingSide {
    return new RingSide(bytes.length / DESC_BYTES, bytes, undefined, undefined);
  }
  static streamed(pages: DescPages, count: number, feed: DescriptorFeed | undefined): RingSide {
    return new RingSide(count, undefined, pages, feed);
  }
  /**
   * The words of the last descriptor's page (or of the whole ring) looked up: descriptor `base`
   * at word 0, descriptors [lo, hi) held then (indices only grow).
   */
  private cur: Uint32Array | undefined;
  private base = 0;
  private lo = 0;
  private hi = 0;
  /** Where `words` found its descriptor: its first word's index. */
  at = 0;
  /** The descriptors from the last `words` call's up to this one lie in the same words, 4 apart. */
  get end(): number {
    return this.hi;
  }

  /** The little-endian words holding descriptor `i` (it starts at word `at`), fed first if it has not arrived. */
  words(i: number): Uint32Array {
    if (i >= this.lo && i < this.hi) {
      this.at = (i - this.base) << 2;
      return this.cur!;
    }
    return this.load(i);
  }

  private load(i: number): Uint32Array {
    const page = this.pageOf(i);
    this.cur = page.words;
    this.base = page.base;
    this.lo = i;
    this.hi = page.hi;
    this.at = (i - this.base) << 2;
    return this.cur;
  }

  /** The words of the page (or whole ring) holding descriptor `i`: descriptors [base, hi) in it, `i` fed first if it has not arrived. */
  pageOf(i: number): { readonly words: Uint32Array; readonly base: number; readonly hi: number } {
    if (this.whole) return { words: wordsOf(this.whole), base: 0, hi: this.count };
    const pages = this.pages!;
    while (i >= pages.count) {
      if (!this.feed?.pull()) throw new SimError("SIM1312", `descriptor ${i} of a streamed ring of ${this.count} never arrived: its feed ended at ${pages.count}`, { value: i });
    }
    // The rest of its page that has arrived (a page is never dropped before the engine passes it).
    const base = i - (i % PAGE_DESCS);
    return { words: wordsOf(pages.page(i)), base, hi: Math.min(pages.count, base + PAGE_DESCS) };
  }

  /** The engine has run every descriptor below `upTo`. */
  release(upTo: number): void {
    this.released = upTo;
    this.pages?.release(Math.min(upTo, this.keep));
  }

  /** Steady state: descriptor `i`'s page is still held (a dropped page is handed out again). */
  holds(i: number): boolean {
    return !this.pages || this.pages.holds(i);
  }

  /** Steady state: this side as an input, its descriptors' addresses judged alike by `judge`. */
  steadyInput(judge: AddressJudge): SteadyInput {
    const a = new RereadingCursor(this);
    const b = new RereadingCursor(this);
    /** Descriptors at words `i` of `wa` and `j` of `wb` act alike. */
    const same = (wa: Uint32Array, i: number, wb: Uint32Array, j: number): boolean => {
      if (wa[i] !== wb[j] || wa[i + 1] !== wb[j + 1]) return false;
      if (wa[i + 2] === wb[j + 2] && wa[i + 3] === wb[j + 3]) return true;
      // A META descriptor's words 2 and 3 are its op's: they must be the same.
      if ((wa[i]! & LEN_CTRL.META) !== 0) return false;
      return judge(wa[i + 2]! + wa[i + 3]! * 2 ** 32, wb[j + 2]! + wb[j + 3]! * 2 ** 32, decodeLength(wa[i]!));
    };
    return {
      count: this.count,
      alike: (x, y) => {
        const wa = a.words(x);
        return same(wa, a.at, b.words(y), b.at);
      },
      alikeUpTo: (y, d, upTo) => {
        const end = Math.min(upTo, this.count - d);
        while (y < end) {
          const wa = a.words(y);
          const wb = b.words(y + d);
          // (Both pages hold the run from here to the nearer of their ends: nothing is dropped or handed out while it is compared.)
          const n = Math.min(end - y, a.hi - y, b.hi - (y + d));
          for (let k = 0, i = a.at, j = b.at; k < n; k++, i += 4, j += 4) if (!same(wa, i, wb, j)) return y + k;
          y += n;
        }
        return y;
      },
      keepFrom: (x) => {
        this.keep = x;
        this.pages?.release(Math.min(this.released, x));
      },
    };
  }
}

/**
 * A reader of a ring side that goes back and forth (steady state's comparisons), a page at a
 * time: the page it read last may have been dropped since, and handed out again, so it looks
 * again when that page is no longer held.
 */
class RereadingCursor {
  private readonly side: RingSide;
  private page: { readonly words: Uint32Array; readonly base: number; readonly hi: number } | undefined;
  /** Where `words` found its descriptor: its first word's index. */
  at = 0;
  constructor(side: RingSide) {
    this.side = side;
  }

  words(i: number): Uint32Array {
    let p = this.page;
    if (!p || i < p.base || i >= p.hi || !this.side.holds(p.base)) p = this.page = this.side.pageOf(i);
    this.at = (i - p.base) << 2;
    return p.words;
  }

  /** The end of the descriptors the page `words` found holds. */
  get hi(): number {
    return this.page!.hi;
  }
}

/** Descriptors `x` and `y` of a ring side act alike when run: same words, but for addresses the judge finds alike. */
type AddressJudge = (a: number, b: number, len: number) => boolean;

/** A write waiting to land (a record of `Landings`, reused). */
interface Landing {
  addr: number;
  piece: Uint8Array | undefined;
  len: number;
  acc: Access | undefined;
  sym: SymPiece | undefined;
}

/**
 * A queue's semaphore writes scheduled to land, oldest first. Each lands at or after every earlier
 * write of its queue (`DmaQueue.lastLand`), so they land in the order they were scheduled (equal
 * times in scheduling order): one callback per queue takes the oldest, no closure per write.
 */
export class Landings {
  private ring: Landing[] = [];
  private head = 0;
  private size = 0;

  push(addr: number, piece: Uint8Array | undefined, len: number, acc: Access | undefined, sym: SymPiece | undefined): void {
    if (this.size === this.ring.length) {
      // Full: a twice longer ring, oldest first.
      const old = this.ring;
      const n = old.length;
      this.ring = Array.from({ length: Math.max(4, 2 * n) }, (_, i) => (i < n ? old[(this.head + i) % n]! : { addr: 0, piece: undefined, len: 0, acc: undefined, sym: undefined }));
      this.head = 0;
    }
    const l = this.ring[(this.head + this.size++) % this.ring.length]!;
    l.addr = addr;
    l.piece = piece;
    l.len = len;
    l.acc = acc;
    l.sym = sym;
  }

  /** Steady state: the writes on their way, oldest first. */
  steady(v: SteadyVisitor): void {
    v.same(this.size);
    for (let i = 0; i < this.size; i++) {
      const l = this.ring[(this.head + i) % this.ring.length]!;
      if (l.acc || l.sym) v.opaque = true;
      v.same(l.addr);
      v.same(l.len);
      v.bytes(l.piece);
    }
  }

  /** The oldest (valid until the next push). */
  shift(): Landing {
    if (this.size === 0) throw new InternalError("a semaphore landing fired with none scheduled");
    const l = this.ring[this.head]!;
    this.head = (this.head + 1) % this.ring.length;
    this.size--;
    return l;
  }
}

export class DmaQueue {
  readonly id: number;
  readonly tx: RingSide;
  readonly rx: RingSide;
  txTail = 0;
  rxTail = 0;
  txHead = 0;
  rxHead = 0;
  lastLand: Tick = WIDE_ZERO;
  /**
   * Its head packet was found not fully posted (or none there) and no doorbell has rung since: the
   * engine does not parse it again until one does (an engine of a mesh serves dozens of queues).
   */
  stalled = false;
  /** Its semaphore writes on their way, and the event that lands the oldest (its engine's). */
  readonly landings = new Landings();
  landNext: () => void = () => {};
  /** Race detection: the queue as a memory agent. */
  readonly clock: QueueClock | undefined;
  constructor(id: number, tx: RingSide, rx: RingSide, clock?: QueueClock) {
    this.id = id;
    this.tx = tx;
    this.rx = rx;
    this.clock = clock;
  }
  get txCount(): number {
    return this.tx.count;
  }
  get rxCount(): number {
    return this.rx.count;
  }

  /** Steady state: the rings as inputs (made at the first look). */
  steadyTx: SteadyInput | undefined;
  steadyRx: SteadyInput | undefined;

  /** Steady state: where the engine is in each ring (it reads descriptors from the head to the tail), and the writes on their way. */
  steady(v: SteadyVisitor, tx: SteadyInput, rx: SteadyInput): void {
    v.same(this.id);
    this.txHead = v.position(this.txHead, tx);
    this.txTail = v.position(this.txTail, tx);
    this.rxHead = v.position(this.rxHead, rx);
    this.rxTail = v.position(this.rxTail, rx);
    v.same(this.txTail - this.txHead);
    v.same(this.rxTail - this.rxHead);
    v.same(this.stalled ? 1 : 0);
    // (A jump's skipped descriptors are run: their pages go.)
    if (v.mode === Mode.JUMP) {
      this.tx.release(this.txHead);
      this.rx.release(this.rxHead);
    }
    this.lastLand = v.time(this.lastLand);
    this.landings.steady(v);
  }
}

/** A LEN_CTRL word's ring id. */
function ringIdOf(w0: number): number {
  return (w0 & LEN_CTRL.RING_ID_MASK) >>> LEN_CTRL.RING_ID_SHIFT;
}

/** `Packet.op` of a plain copy (a CCE op is 0..7). */
const NO_OP = -1;

/** The packet an engine parsed last: its descriptors' fields, in arrays the engine reuses. */
class Packet {
  nTx = 0;
  nRx = 0;
  /** The CCE op of a reduce packet; NO_OP for a copy. */
  op = NO_OP;
  dtype = 0;
  /** Bytes the packet writes (a replicated CCE result counts once per destination). */
  bytes = 0;
  nSrc = 0;
  nDst = 0;
  readonly srcAddr: number[] = [];
  readonly srcLen: number[] = [];
  readonly dstAddr: number[] = [];
  readonly dstLen: number[] = [];
  /** Local HBM offsets of the sources (filled when the packet runs). */
  readonly srcOff: number[] = [];
}

export interface EngineParams {
  readonly bytesPerSecond: number;
  readonly descriptorCostPs: number;
}

export class DmaEngine {
  readonly device: number;
  readonly index: number;
  readonly queues = new Map<number, DmaQueue>();
  /** The queues by id, the round-robin order. */
  private order: DmaQueue[] = [];
  readonly res: Resource;
  packets = 0;
  /** Injected stalls: [start, end) windows in which the engine starts no packet. */
  readonly stalls: [Tick, Tick][] = [];
  /** Stopped for good: a packet of it is held by a link that is down. */
  private stuck = false;
  private busy = false;
  private rr = 0;
  private readonly host: DmaHost;
  private readonly params: EngineParams;
  /** The packet being started, and the record descriptors decode into (reused). */
  private readonly pkt = new Packet();
  /** The timing of the packet being started (reused). */
  private readonly clock = new PacketClock();
  /** The record addresses decode into (read at once, never kept). */
  private readonly addr = addressFields();
  /** Its device's HBM (looked up at the first packet). */
  private mem: LocalMemory | undefined;
  /** The bytes of the last one-source copy that read kept bytes, where they were, and `LocalMemory.keptWrites` then. */
  private kept: Uint8Array = new Uint8Array(0);
  private keptOff = -1;
  private keptWrites = -1;
  /** Its own HBM's first address (`local`), and its HBM. */
  private readonly own: number;
  private readonly ownHbm: Resource | undefined;
  /** The last destination device (`toDevice`). */
  private to = -1;
  private toBase = Number.NaN;
  private toLinks: readonly Resource[] = [];
  private toHbm: Resource | undefined;
  private toQuiet: readonly Region[] | undefined;
  /** The quiet region the last destination's last quiet write was in. */
  private quietLo = WIDE_ZERO;
  private quietHi = WIDE_ZERO;

  constructor(host: DmaHost, device: number, index: number, params: EngineParams) {
    this.host = host;
    this.device = device;
    this.index = index;
    this.params = params;
    this.own = hbmAddr(device, 0);
    this.ownHbm = host.fabric.hbm[device];
    this.res = new Resource(`dev${device}.dma${index}`, params.bytesPerSecond);
    if (host.trace) this.clock.onBusy = this.linkTracer(host.trace);
  }

  addQueue(q: DmaQueue): void {
    q.landNext = steadyStable(() => {
      const l = q.landings.shift();
      this.host.land(l.addr, this.device, l.piece, l.len, l.acc, l.sym);
    });
    this.queues.set(q.id, q);
    this.order = [...this.queues.values()].sort((a, b) => a.id - b.id);
  }

  /** A tail-pointer increment doorbell: `n` more descriptors on one side of queue `q`. */
  doorbell(q: number, dir: "m2s" | "s2m", n: number, clock?: Clock): void {
    const queue = this.queues.get(q);
    if (!queue) throw new SimError("SIM1301", `doorbell for dev${this.device} dma${this.index} queue ${q}, which has no ring`, { value: q });
    if (queue.clock && clock) queue.clock.doorbell(dir === "m2s", dir === "m2s" ? queue.txTail : queue.rxTail, n, clock);
    if (dir === "m2s") queue.txTail += n;
    else queue.rxTail += n;
    queue.stalled = false;
    if (queue.txTail > queue.txCount || queue.rxTail > queue.rxCount) {
      throw new SimError("SIM1302", `dev${this.device} dma${this.index} q${q}: tail pointer passes the end of the ring (${queue.txTail}/${queue.txCount} tx, ${queue.rxTail}/${queue.rxCount} rx)`, { value: n });
    }
    this.kick();
  }

  private where(q: DmaQueue, i: number): string {
    return `dev${this.device} dma${this.index} q${q.id} tx[${i}]`;
  }

  /** Parse the packet at the head of `q` into `this.pkt`; false when its descriptors are not all posted yet. */
  private parse(q: DmaQueue): boolean {
    if (q.txHead >= q.txTail) return false;
    const p = this.pkt;
    // The descriptors' words are read where they lie, a page at a time (`RingSide.words`, `end`):
    // its LEN_CTRL word 0, a META descriptor's op words 1-3, an address's words 2-3.
    const tx = q.tx;
    let w = tx.words(q.txHead);
    let a = tx.at;
    let end = tx.end;
    let w0 = w[a]!;
    if (ringIdOf(w0) !== INITIAL_RING_ID) throw new SimError("SIM1303", `${this.where(q, q.txHead)}: ring id ${ringIdOf(w0)}, expected ${INITIAL_RING_ID}`, { value: ringIdOf(w0) });
    let i = q.txHead;
    let op = NO_OP;
    let dtype = 0;
    let bytes = 0;
    let dests = 1;
    if ((w0 & LEN_CTRL.META) !== 0) {
      const w1 = w[a + 1]!;
      op = w1 & 7;
      dtype = (w1 >>> 16) & 0xf;
      bytes = w[a + 2]! & 0xffffff;
      dests = (w[a + 3]! & 0xff) + 1;
      i++;
      a += 4;
    }
    let nSrc = 0;
    let srcBytes = 0;
    for (;;) {
      if (i >= q.txTail) return false;
      if (i >= end) {
        w = tx.words(i);
        a = tx.at;
        end = tx.end;
      }
      w0 = w[a]!;
      if ((w0 & LEN_CTRL.META) !== 0) throw new SimError("SIM1304", `${this.where(q, i)}: META descriptor inside a packet`, { value: i });
      if (ringIdOf(w0) !== INITIAL_RING_ID) throw new SimError("SIM1303", `${this.where(q, i)}: ring id ${ringIdOf(w0)}, expected ${INITIAL_RING_ID}`, { value: ringIdOf(w0) });
      const hi = w[a + 3]!;
      if (hi > 0x1fffff) throw new SimError("SIM1305", `${this.where(q, i)}: source address beyond 2^53`, { value: i });
      const len = decodeLength(w0);
      p.srcAddr[nSrc] = hi * 0x100000000 + w[a + 2]!;
      p.srcLen[nSrc++] = len;
      srcBytes += len;
      i++;
      a += 4;
      if ((w0 & LEN_CTRL.LAST) !== 0) break;
      if ((w0 & LEN_CTRL.CONCAT) === 0 && op === NO_OP) throw new SimError("SIM1306", `${this.where(q, i - 1)}: descriptor neither LAST nor CONCAT`, { value: i - 1 });
    }
    const nTx = i - q.txHead;
    if (op !== NO_OP) for (let k = 0; k < nSrc; k++) if (p.srcLen[k] !== bytes) throw new SimError("SIM1307", `${this.where(q, q.txHead)}: CCE sources differ in length from the packet (${bytes})`, { value: p.srcLen.slice(0, nSrc) });
    // A CCE packet writes its result to each of its destinations (replication).
    const need = op === NO_OP ? srcBytes : bytes * dests;
    let nDst = 0;
    let got = 0;
    let j = q.rxHead;
    const rx = q.rx;
    end = -1;
    while (got < need) {
      if (j >= q.rxTail) return false;
      if (j >= end) {
        w = rx.words(j);
        a = rx.at;
        end = rx.end;
      }
      w0 = w[a]!;
      if (ringIdOf(w0) !== INITIAL_RING_ID) throw new SimError("SIM1303", `dev${this.device} dma${this.index} q${q.id} rx[${j}]: ring id ${ringIdOf(w0)}, expected ${INITIAL_RING_ID}`, { value: ringIdOf(w0) });
      const len = decodeLength(w0);
      if (dests > 1 && len !== bytes) throw new SimError("SIM1311", `dev${this.device} dma${this.index} q${q.id} rx[${j}]: a replicated CCE packet of ${bytes} bytes needs ${dests} rx descriptors of that length, not ${len}`, { value: len });
      const hi = w[a + 3]!;
      p.dstAddr[nDst] = hi > 0x1fffff ? Number.NaN : hi * 0x100000000 + w[a + 2]!;
      p.dstLen[nDst++] = len;
      got += len;
      j++;
      a += 4;
    }
    if (got !== need) throw new SimError("SIM1308", `dev${this.device} dma${this.index} q${q.id}: rx descriptors cover ${got} bytes, the packet has ${need}`, { value: got });
    p.nTx = nTx;
    p.nRx = j - q.rxHead;
    p.op = op;
    p.dtype = dtype;
    p.bytes = need;
    p.nSrc = nSrc;
    p.nDst = nDst;
    return true;
  }

  /** Start the next ready packet if the engine is idle (round-robin over queues). */
  kick(): void {
    if (this.busy || this.stuck) return;
    const now = this.host.kernel.now;
    const stall = this.stalls.length > 0 ? this.stalls.find(([a, b]) => now >= a && now < b) : undefined;
    if (stall) {
      this.host.kernel.at(stall[1], Prio.ENGINE, () => this.kick());
      return;
    }
    const order = this.order;
    for (let k = 0; k < order.length; k++) {
      const q = order[(this.rr + k) % order.length]!;
      if (q.stalled) continue;
      if (!this.parse(q)) {
        q.stalled = true;
        continue;
      }
      this.rr = (this.rr + k + 1) % order.length;
      this.run(q, this.pkt);
      return;
    }
  }

  /** The local HBM offset `addr` reads (an engine reads its own device's HBM only). */
  private local(addr: number, len: number): number {
    // Its own HBM is the addresses [own, own + HBM_LIMIT): one subtraction (the decode for the rest).
    let off = addr - this.own;
    if (!(off >= 0 && off < HBM_LIMIT)) {
      const a = readAddress(addr, this.device, this.addr);
      if (a.kind !== "hbm" || a.device !== this.device) {
        throw new SimError("SIM1309", `dev${this.device} dma${this.index} reads 0x${addr.toString(16)}, which is not its own HBM (${a.kind} of dev${a.device})`, { value: addr });
      }
      off = a.offset - 0;
    }
    if (off + len > Number.MAX_SAFE_INTEGER) throw new SimError("SIM1305", "source range overflows", { value: addr });
    return off;
  }

  /**
   * Where the last packet's destination device is kept: its HBM's addresses start at `toBase`, and
   * the links to it and its HBM (its stand-in's, folded) are `toLinks` and `toHbm`. Packets go to a
   * few devices, mostly the last one.
   */
  private toDevice(device: number): void {
    this.to = device;
    this.toBase = hbmAddr(device, 0);
    this.toLinks = this.host.fabric.route(this.device, device);
    this.toHbm = this.host.fabric.hbm[this.host.home(device)];
    this.toQuiet = this.host.quietRegions(device);
    this.quietLo = this.quietHi = WIDE_ZERO;
  }

  /**
   * A payload-less write of [offset, offset + len) of the last destination's HBM needs no landing
   * (`DmaHost.quietRegions`), and it is not in the region the last quiet one was (`run` checks
   * that first: a call V8 does not inline boxes the offset it passes).
   */
  private quietElsewhere(offset: number, len: number): boolean {
    const r = this.toQuiet && regionAt(this.toQuiet, offset, len);
    if (!r) return false;
    this.quietLo = r.start;
    this.quietHi = r.end;
    return true;
  }

  private run(q: DmaQueue, p: Packet): void {
    const k = this.host.kernel;
    const host = this.host;
    const qc = host.races ? q.clock : undefined;
    const acc = qc && this.access(q, qc, p);
    q.txHead += p.nTx;
    q.rxHead += p.nRx;
    q.tx.release(q.txHead);
    q.rx.release(q.rxHead);
    this.busy = true;
    this.packets++;
    // Read the sources now; the write lands later.
    const mem = (this.mem ??= host.memory(this.device));
    const offs = p.srcOff;
    let dropped = false;
    let readBytes = 0;
    for (let i = 0; i < p.nSrc; i++) {
      const len = p.srcLen[i]!;
      const off = this.local(p.srcAddr[i]!, len);
      offs[i] = off;
      dropped ||= mem.dropped(off, len);
      readBytes += len;
    }
    if (acc) for (let i = 0; i < p.nSrc; i++) host.races!.read(this.device, offs[i]!, p.srcLen[i]!, acc);
    const stream = host.symbolic?.read(this.device, this.sources(p), p.op === NO_OP ? undefined : howOf(p.op, p.dtype));
    const data = dropped ? undefined : this.payload(mem, p);
    // Source reads are charged piece by piece, the extra reads of a reduce with the first one.
    let readsLeft = readBytes;
    const fixed = this.params.descriptorCostPs * (p.nTx + p.nRx);
    let engineFree = k.now - 0;
    let o = 0;
    for (let j = 0; j < p.nDst; j++) {
      const addr = p.dstAddr[j]!;
      const len = p.dstLen[j]!;
      // Its HBM the usual case (the last device's, a subtraction away), else decoded.
      let toHbm = true;
      let dstOffset = addr - this.toBase;
      if (!(dstOffset >= 0 && dstOffset < HBM_LIMIT)) {
        toHbm = this.destination(p, j, q);
        dstOffset = this.addr.offset - 0;
      }
      const first = j === 0;
      const share = Math.min(readsLeft, len + (first ? Math.max(0, readBytes - p.bytes) : 0));
      readsLeft -= share;
      // The engine's byte rate applies to the stream it writes; source reads are charged to HBM.
      const links = this.toLinks;
      if (host.fabric.linksDown && this.cut(links, q, len, addr)) return;
      const sameHbm = links.length === 0 && toHbm;
      // The packet's stages on the engine's reused clock: engine, source HBM, links, destination HBM.
      // The engine is free once its data is on the first link; later hops buffer and forward.
      const c = this.clock;
      c.begin(Math.max(k.now, engineFree));
      c.stage(this.res, len, first ? fixed : 0, 0, true);
      c.stage(this.ownHbm, share + (sameHbm ? len : 0), 0, 0, true);
      for (let h = 0; h < links.length; h++) c.stage(links[h], len, 0, host.fabric.latencyPs, h === 0);
      if (!sameHbm && toHbm) c.stage(this.toHbm, len, 0, 0, false);
      const t = c.end();
      engineFree = Math.max(engineFree, t.engineFree);
      // A semaphore write lands after every earlier write of its queue (it signals their completion).
      const land = toHbm ? t.land : Math.max(t.land, q.lastLand);
      q.lastLand = Math.max(q.lastLand, land);
      // (The whole of a one-destination packet's data is its piece: no view made.)
      const piece = data === undefined ? undefined : o === 0 && len === data.length ? data : data.subarray(o, o + len);
      // A replicated reduce's one result lands at each destination.
      const sym = stream && { stream, at: o % stream.length };
      o += len;
      const wacc = acc && { ...acc, epoch: qc!.tick(), timePs: land - 0 };
      if (!toHbm) {
        q.landings.push(addr, piece, len, wacc, sym);
        k.at(land, Prio.LAND, q.landNext);
      } else if (piece || !((dstOffset >= this.quietLo && dstOffset + len <= this.quietHi) || this.quietElsewhere(dstOffset, len))) {
        this.landAt(land, addr, piece, len, wacc, sym);
      }
      host.trace?.packet(this.device, this.index, q.id, p.op === NO_OP ? "copy" : "cce", len, describeAddress(addr, this.device), k.now, land);
    }
    k.at(engineFree, Prio.ENGINE, this.freed);
  }

  // The closures of the packet path live in these methods: a closure in `run` that captures its
  // locals would make it allocate a context for them on every packet, closure made or not.

  /** Decode a destination that is not the last device's HBM into `this.addr` (its device becomes the last one); true for HBM, false for a semaphore. */
  private destination(p: Packet, j: number, q: DmaQueue): boolean {
    // (The address is looked up here, not passed: a call V8 does not inline boxes a double argument.)
    const addr = p.dstAddr[j]!;
    const dst = readAddress(addr, this.device, this.addr);
    const toHbm = dst.kind === "hbm";
    if ((!toHbm && dst.kind !== "sema") || dst.device >= this.host.fabric.deviceCount) {
      throw new SimError("SIM1310", `dev${this.device} dma${this.index} q${q.id} writes 0x${addr.toString(16)}, which is not HBM or a semaphore`, { value: addr });
    }
    if (dst.device !== this.to) this.toDevice(dst.device);
    return toHbm;
  }

  /** A packet's access, for race detection. */
  private access(q: DmaQueue, qc: QueueClock, p: Packet): Access {
    return { agent: qc.agent, epoch: qc.tick(), clock: qc.issue(q.txHead + p.nTx, q.rxHead + p.nRx), desc: q.txHead, timePs: this.host.kernel.now };
  }

  /** The bytes a packet writes, read (and reduced) at its start: a payload run's, or a kept constant's. */
  private payload(mem: LocalMemory, p: Packet): Uint8Array {
    if (p.op !== NO_OP) {
      const result = cceReduce(p.op, p.dtype, this.readSources(mem, p));
      if (result.length >= p.bytes) return result;
      // (A result that does not tile the packet is the model's fault: said, not copied for ever.)
      if (result.length === 0 || p.bytes % result.length !== 0) throw new InternalError(`dev${this.device} dma${this.index}: a CCE result of ${result.length} bytes for a packet of ${p.bytes}`);
      // Replication: the one result lands at every destination.
      const data = takeBytes(p.bytes);
      for (let o = 0; o < p.bytes; o += result.length) data.set(result, o);
      return data;
    }
    if (p.nSrc === 1) {
      // A kept constant (a semaphore write's value), most often the one read last: its bytes again
      // while no write has kept bytes since (no one changes the data of a landing).
      const off = p.srcOff[0]!;
      const len = p.srcLen[0]!;
      if (off !== this.keptOff || len !== this.kept.length || mem.keptWrites !== this.keptWrites) {
        this.kept = mem.read(off, len);
        this.keptOff = off;
        this.keptWrites = mem.keptWrites;
      }
      return this.kept;
    }
    const data = takeBytes(p.bytes);
    let o = 0;
    for (let i = 0; i < p.nSrc; i++) {
      data.set(mem.read(p.srcOff[i]!, p.srcLen[i]!), o);
      o += p.srcLen[i]!;
    }
    return data;
  }

  /** A link of the route is down (a fault): the write never gets across, and its engine waits for it for good. */
  private cut(links: readonly Resource[], q: DmaQueue, len: number, addr: number): boolean {
    const now = this.host.kernel.now;
    const down = links.find((l) => l.downAt !== undefined && now >= l.downAt);
    if (!down) return false;
    this.stuck = true;
    this.host.faultHit?.(`${down.name} is down (fault since ${(down.downAt! / 1e6).toFixed(3)} us): dev${this.device} dma${this.index} q${q.id} holds a ${len}-byte write to ${describeAddress(addr, this.device)} and stops`);
    return true;
  }

  /** Schedule a write's landing. */
  private landAt(land: Tick, addr: number, piece: Uint8Array | undefined, len: number, wacc: Access | undefined, sym: SymPiece | undefined): void {
    this.host.kernel.at(land, Prio.LAND, () => this.host.land(addr, this.device, piece, len, wacc, sym));
  }

  /** The sources' bytes (a payload run's reduce). */
  private readSources(mem: LocalMemory, p: Packet): Uint8Array[] {
    // (Reduced at once: views will do.)
    return this.sources(p).map((s) => mem.peek(s.off, s.len));
  }

  /** Busy spans of links, for a trace. */
  private linkTracer(trace: TraceSink): (res: Resource, bytes: number, start: Tick, end: Tick) => void {
    return (res, bytes, a, b) => {
      if (res.name.startsWith("link")) trace.link(res.name, bytes, a, b);
    };
  }

  /** The packet's sources as local HBM ranges (payload and symbolic runs). */
  private sources(p: Packet): { off: number; len: number }[] {
    return Array.from({ length: p.nSrc }, (_, i) => ({ off: p.srcOff[i]!, len: p.srcLen[i]! }));
  }

  /** The engine's packet is off its hands: take the next one. */
  private readonly freed = steadyStable((): void => {
    this.busy = false;
    this.kick();
  });

  /** Steady state: the engine (its packet in progress, its round-robin turn, its counters) and its queues. */
  steady(v: SteadyVisitor): void {
    if (this.stalls.length > 0) v.opaque = true;
    v.same(this.busy ? 1 : 0);
    v.same(this.stuck ? 1 : 0);
    v.same(this.rr);
    this.packets = v.count(this.packets);
    this.res.steady(v);
    for (const q of this.order) {
      q.steadyTx ??= q.tx.steadyInput(this.srcAlike);
      q.steadyRx ??= q.rx.steadyInput(this.dstAlike);
      q.steady(v, q.steadyTx, q.steadyRx);
    }
  }

  /** The last address ranges found all read alike (its own HBM, bytes dropped), and all written alike (a quiet region). */
  private readonly srcSpan = { lo: 0, hi: 0 };
  private readonly dstSpan = { lo: 0, hi: 0, device: -1 };
  private readonly alikeAddr = addressFields();

  /**
   * Two sources a run reads alike: its own HBM, where bytes are not kept (a timing-only run reads
   * nothing from either). A kept source (a constant) must be the same address.
   */
  private readonly srcAlike = (a: number, b: number, len: number): boolean => this.unread(a, len) && this.unread(b, len);

  /** [addr, addr + len) is its own HBM, all of it dropped. */
  private unread(addr: number, len: number): boolean {
    const s = this.srcSpan;
    if (addr >= s.lo && addr + len <= s.hi) return true;
    const off = addr - this.own;
    if (!(off >= 0 && off < HBM_LIMIT)) return false;
    const r = (this.mem ??= this.host.memory(this.device)).droppedAround(off);
    if (!r) return false;
    s.lo = this.own + r.start;
    s.hi = this.own + Math.min(r.end, HBM_LIMIT);
    return addr + len <= s.hi;
  }

  /**
   * Two destinations a run writes alike: one device's HBM (the same route), each in a region where
   * a payload-less write lands unseen (`DmaHost.quietRegions`). A semaphore must be the same address.
   */
  private readonly dstAlike = (a: number, b: number, len: number): boolean => {
    const d = this.quietDevice(a, len);
    return d >= 0 && this.quietDevice(b, len) === d;
  };

  /** The device whose quiet HBM region holds [addr, addr + len); -1 where none does. */
  private quietDevice(addr: number, len: number): number {
    const s = this.dstSpan;
    if (addr >= s.lo && addr + len <= s.hi) return s.device;
    const d = readAddress(addr, this.device, this.alikeAddr);
    if (d.kind !== "hbm") return -1;
    const quiet = this.host.quietRegions(d.device);
    const r = quiet && regionAt(quiet, d.offset, len);
    if (!r) return -1;
    const base = addr - d.offset;
    s.lo = base + r.start;
    s.hi = base + r.end;
    s.device = d.device;
    return d.device;
  }

  /** Descriptors handed to the engine but not yet taken (for hang reports). */
  pending(): { queue: number; tx: number; rx: number }[] {
    return [...this.queues.values()].filter((q) => q.txTail > q.txHead || q.rxTail > q.rxHead).map((q) => ({ queue: q.id, tx: q.txTail - q.txHead, rx: q.rxTail - q.rxHead }));
  }
}
