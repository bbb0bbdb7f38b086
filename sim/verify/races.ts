// Race detection by happens-before over the machine's synchronisation: vector clocks carried by
// the memory agents (DMA queues, network proxies), the TopSPs that order them, and the semaphores
// between them.
//
// The edges: a TopSP's doorbell hands its clock to the descriptors it releases; a queue runs its
// packets in ring order; a packet's semaphore write (which lands after every earlier write of its
// queue) releases the packet's clock into the semaphore; a wait that a semaphore satisfies joins
// the semaphore's clock into the waiter; a core's own semaphore store releases its clock. A read of
// a range whose last write is not ordered before it, and a write over a range whose last write or
// reads are not ordered before it, are races. Accesses by one agent are in its program order.
import { RangeMap } from "./ranges.ts";

/**
 * A vector clock: entry a is the latest epoch of memory agent a known to be ordered before. Held in
 * chunks of CHUNK agents (a missing chunk, or one past the end, is all zeros) that are never changed
 * once made: a join that changes a chunk makes a new one, and a chunk one side already covers is
 * taken by reference. Agents are numbered device by device, so news of far agents travels as shared
 * chunks: a join compares most of them by reference, and copies a chunk of CHUNK entries, not the
 * clock, where it adds something (a machine of thousands of agents makes millions of joins).
 */
export type Clock = (Chunk | undefined)[];
type Chunk = number[];

const SHIFT = 6;
const CHUNK = 1 << SHIFT;
const MASK = CHUNK - 1;

/** A chunk of zeros (a plain array of small integers: allocated and read faster than a typed array this small). */
function zeros(): Chunk {
  const c: Chunk = [];
  for (let i = 0; i < CHUNK; i++) c.push(0);
  return c;
}

/** Entry `agent` of `c`. */
export function entry(c: Clock, agent: number): number {
  const ch = c[agent >> SHIFT];
  return ch === undefined ? 0 : ch[agent & MASK]!;
}

/**
 * A clock of these entries (tests, and clocks built by hand), as the run makes them: a chunk only
 * where an entry is above 0 (`raised` makes one for a positive epoch; joins keep or merge them), so
 * that a join that adds nothing gives back the clock it was given.
 */
export function clockOf(entries: readonly number[]): Clock {
  const c: Clock = [];
  for (let k = 0; k < entries.length; k += CHUNK) {
    const ch = zeros();
    for (let i = 0; i < CHUNK && k + i < entries.length; i++) ch[i] = entries[k + i]!;
    c.push(ch.some((x) => x > 0) ? ch : undefined);
  }
  return c;
}

/** The first `n` entries of `c`. */
export function entriesOf(c: Clock, n: number): number[] {
  return Array.from({ length: n }, (_, a) => entry(c, a));
}

/** Chunk `x` joined with `y`: `x` or `y` itself where one covers the other, else a new chunk. */
function joinChunk(x: Chunk | undefined, y: Chunk | undefined): Chunk | undefined {
  if (y === undefined || y === x) return x;
  if (x === undefined) return y;
  // x covers y (the usual case), or y covers x: each a loop on one test.
  let k = 0;
  while (k < CHUNK && y[k]! <= x[k]!) k++;
  if (k === CHUNK) return x;
  k = 0;
  while (k < CHUNK && x[k]! <= y[k]!) k++;
  if (k === CHUNK) return y;
  const out = x.slice();
  for (let k = 0; k < CHUNK; k++) if (y[k]! > out[k]!) out[k] = y[k]!;
  return out;
}

/** Chunk `x` with entry `i` at least `epoch`. */
function raised(x: Chunk | undefined, i: number, epoch: number): Chunk | undefined {
  if (x !== undefined && x[i]! >= epoch) return x;
  const out = x === undefined ? zeros() : x.slice();
  out[i] = epoch;
  return out;
}

/** `a` joined with `b` (and `agent` at `epoch`), as a new clock, or `a` itself when that adds nothing. */
export function joined(a: Clock, b: Clock, agent = -1, epoch = 0): Clock {
  let out: Clock | undefined;
  for (let k = 0; k < b.length; k++) {
    const x = a[k];
    const r = joinChunk(x, b[k]);
    if (r === x) continue;
    out ??= grown(a.slice(), b.length);
    out[k] = r;
  }
  if (agent >= 0 && epoch > 0) {
    const k = agent >> SHIFT;
    const x = (out ?? a)[k];
    const r = raised(x, agent & MASK, epoch);
    if (r !== x) {
      out ??= a.slice();
      grown(out, k + 1)[k] = r;
    }
  }
  return out ?? a;
}

/** Join `b` (and `agent` at `epoch`) into `a` in place; a clock nobody else holds. */
export function joinInto(a: Clock, b: Clock, agent = -1, epoch = 0): Clock {
  grown(a, b.length);
  for (let k = 0; k < b.length; k++) a[k] = joinChunk(a[k], b[k]);
  if (agent >= 0 && epoch > 0) {
    const k = agent >> SHIFT;
    grown(a, k + 1)[k] = raised(a[k], agent & MASK, epoch);
  }
  return a;
}

/** `c` with at least `n` chunks (missing ones undefined, not holes). */
function grown(c: Clock, n: number): Clock {
  while (c.length < n) c.push(undefined);
  return c;
}

/**
 * A semaphore's clock: the join of every clock released into it, made when a wait takes it. A
 * queue's (or proxy's) packets release ever later clocks of that agent (its clock only grows), so
 * of the releases since the last wait only each agent's latest clock, and its highest epoch, count:
 * a semaphore many packets increment joins once per releasing agent, not once per packet.
 */
export class SemaClock {
  private readonly vc: Clock = [];
  /** Releases since the last wait: per agent (in order of first release), its latest clock and highest epoch. */
  private readonly agents: number[] = [];
  private readonly clocks: Clock[] = [];
  private readonly epochs: number[] = [];

  /** A write by `agent` (at `epoch`) under `clock`; a core's own store has no agent (-1). */
  release(clock: Clock, agent: number, epoch: number): void {
    if (agent < 0) {
      joinInto(this.vc, clock);
      return;
    }
    const j = this.agents.indexOf(agent);
    if (j < 0) {
      this.agents.push(agent);
      this.clocks.push(clock);
      this.epochs.push(epoch);
      return;
    }
    this.clocks[j] = clock;
    if (epoch > this.epochs[j]!) this.epochs[j] = epoch;
  }

  /** The clock, for a wait it satisfied to join. */
  published(): Clock {
    const n = this.agents.length;
    for (let j = 0; j < n; j++) joinInto(this.vc, this.clocks[j]!, this.agents[j]!, this.epochs[j]!);
    if (n > 0) {
      this.agents.length = 0;
      this.clocks.length = 0;
      this.epochs.length = 0;
    }
    return this.vc;
  }
}

/** What shadow memory keeps of an access: which agent, its epoch, and where it came from. */
export interface Stamp {
  readonly agent: number;
  readonly epoch: number;
  /** The descriptor (DMA: tx index of the packet) or entry (proxy) it ran. */
  readonly desc: number;
  readonly timePs: number;
}

/** One memory access as it happens: its stamp and the clock it runs under (not kept once it is checked). */
export interface Access extends Stamp {
  readonly clock: Clock;
}

function stampOf(a: Access): Stamp {
  return { agent: a.agent, epoch: a.epoch, desc: a.desc, timePs: a.timePs };
}

/** `before` is ordered before an access of `agent` under `clock`. */
function ordered(before: Stamp, agent: number, clock: Clock): boolean {
  return before.agent === agent || entry(clock, before.agent) >= before.epoch;
}

/** A core or proxy's own clock, copied on write once it has been handed out. */
export class ThreadClock {
  private vc: Clock = [];
  private shared = false;

  /** Join what a semaphore publishes (a wait it satisfied). */
  acquire(from: Clock | undefined): void {
    if (!from || from.length === 0) return;
    if (!this.shared) {
      this.vc = joinInto(this.vc, from);
      return;
    }
    const next = joined(this.vc, from);
    if (next === this.vc) return;
    this.vc = next;
    this.shared = false;
  }

  /** The clock as of now, to hand to descriptors or a semaphore (never changed afterwards). */
  snapshot(): Clock {
    this.shared = true;
    return this.vc;
  }
}

/** A queue of doorbells, consumed from the front; `joined` counts the front ones already joined. */
class Fifo {
  private items: ({ before: number; after: number; clock: Clock } | undefined)[] = [];
  private head = 0;
  joined = 0;
  get length(): number {
    return this.items.length - this.head;
  }
  at(k: number): { before: number; after: number; clock: Clock } {
    return this.items[this.head + k]!;
  }
  push(x: { before: number; after: number; clock: Clock }): void {
    this.items.push(x);
  }
  shift(): void {
    // Let go of the doorbell's clock at once: a queue may run far behind its doorbells.
    this.items[this.head++] = undefined;
    this.joined = Math.max(0, this.joined - 1);
    // Compact now and then, so a long run does not keep every doorbell.
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }
}

/** A DMA queue as a memory agent: doorbells hand it clocks; each packet takes them in ring order. */
export class QueueClock {
  readonly agent: number;
  private epoch = 0;
  private vc: Clock = [];
  /** A packet holds `vc`: the next join copies it. */
  private shared = false;
  /** The clock joined last. */
  private lastJoined: Clock | undefined = undefined;
  /** Doorbells not yet fully consumed, per side in ring order, and how many of them are joined. */
  private readonly pending = { tx: new Fifo(), rx: new Fifo() };

  constructor(agent: number) {
    this.agent = agent;
  }

  doorbell(tx: boolean, before: number, n: number, clock: Clock): void {
    (tx ? this.pending.tx : this.pending.rx).push({ before, after: before + n, clock });
  }

  /** A packet taking tx descriptors up to `txEnd` and rx up to `rxEnd`: the clock it runs under. */
  issue(txEnd: number, rxEnd: number): Clock {
    this.take(this.pending.tx, txEnd);
    this.take(this.pending.rx, rxEnd);
    this.shared = true;
    return this.vc;
  }

  /** Join every doorbell of one side that released a descriptor below `end`; drop those wholly below it. */
  private take(f: Fifo, end: number): void {
    while (f.joined < f.length && f.at(f.joined).before < end) this.join(f.at(f.joined++).clock);
    while (f.length > 0 && f.at(0).after <= end) f.shift();
  }

  private join(c: Clock): void {
    // A doorbell's clock is a core's snapshot, never changed: one joined last adds nothing again
    // (a core's doorbells of one step share it).
    if (c === this.lastJoined) return;
    this.lastJoined = c;
    if (!this.shared) {
      this.vc = joinInto(this.vc, c);
      return;
    }
    const next = joined(this.vc, c);
    if (next !== this.vc) {
      this.vc = next;
      this.shared = false;
    }
  }

  /** The next epoch of this agent (one per packet read, one per write it lands). */
  tick(): number {
    return ++this.epoch;
  }
}

/** A range's last write, and the reads since that no later read is ordered after (one, or several). */
interface Cell {
  readonly write: Stamp | undefined;
  readonly reads: Stamp | readonly Stamp[] | undefined;
}

function readsOf(c: Cell | undefined): readonly Stamp[] {
  const r = c?.reads;
  return r === undefined ? [] : Array.isArray(r) ? r : [r as Stamp];
}

/** How a race is reported: a violation message. */
export type RaceSink = (message: string) => void;

export class RaceDetector {
  private readonly names: { name: string; entry: string }[] = [];
  private readonly memory = new Map<number, RangeMap<Cell>>();
  /** Per device: sorted [start, end) offsets exempt from tracking (the no-op descriptors' pad word). */
  private readonly exempt = new Map<number, { start: number; end: number }[]>();
  private readonly sink: RaceSink;

  constructor(sink: RaceSink) {
    this.sink = sink;
  }

  /** A memory agent: `name` (`dev3 dma2 q5`), `entry` how its descriptors are named (`tx`, `entry`). */
  agent(name: string, entry: string): number {
    this.names.push({ name, entry });
    return this.names.length - 1;
  }

  exemptRange(device: number, start: number, end: number): void {
    const list = this.exempt.get(device) ?? [];
    list.push({ start, end });
    list.sort((a, b) => a.start - b.start);
    this.exempt.set(device, list);
  }

  private who(a: Stamp): string {
    const n = this.names[a.agent]!;
    return `${n.name} ${n.entry}[${a.desc}]`;
  }

  private map(device: number): RangeMap<Cell> {
    let m = this.memory.get(device);
    if (!m) this.memory.set(device, (m = new RangeMap<Cell>()));
    return m;
  }

  private skipped(device: number, off: number, len: number): boolean {
    const list = this.exempt.get(device);
    return !!list && list.some((r) => off >= r.start && off + len <= r.end);
  }

  /** A read of [off, off + len) of device HBM, at issue. */
  read(device: number, off: number, len: number, acc: Access): void {
    if (len <= 0 || this.skipped(device, off, len)) return;
    // Shadow memory keeps stamps, not clocks: its size follows the ranges, not the agents.
    const me = stampOf(acc);
    this.map(device).update(off, off + len, (cell, a, b) => {
      const w = cell?.write;
      if (w && !ordered(w, acc.agent, acc.clock)) {
        this.sink(`${this.who(acc)} reads ${range(device, a, b)} at ${us(acc.timePs)}; ${this.who(w)} wrote it (landed ${us(w.timePs)}) and no semaphore orders that write before the read`);
      }
      // Reads ordered before this one are covered by it for any later write.
      let reads: Stamp | Stamp[] = me;
      for (const r of readsOf(cell)) {
        if (ordered(r, acc.agent, acc.clock)) continue;
        if (!Array.isArray(reads)) reads = [reads];
        reads.push(r);
      }
      return { write: w, reads };
    });
  }

  /** A write of [off, off + len) of device HBM, as it lands (`acc.timePs`: its landing time). */
  write(device: number, off: number, len: number, acc: Access): void {
    if (len <= 0 || this.skipped(device, off, len)) return;
    const written: Cell = { write: stampOf(acc), reads: undefined };
    this.map(device).update(off, off + len, (cell, a, b) => {
      const w = cell?.write;
      if (w && !ordered(w, acc.agent, acc.clock)) {
        this.sink(`${this.who(acc)} writes ${range(device, a, b)} (landing ${us(acc.timePs)}) over the write of ${this.who(w)} (landed ${us(w.timePs)}) and no semaphore orders the two`);
      }
      for (const r of readsOf(cell)) {
        if (!ordered(r, acc.agent, acc.clock)) {
          this.sink(`${this.who(acc)} writes ${range(device, a, b)} (landing ${us(acc.timePs)}) while ${this.who(r)} reads it (issued ${us(r.timePs)}) and no semaphore orders the read before the write`);
          break;
        }
      }
      return written;
    });
  }
}

function range(device: number, a: number, b: number): string {
  return `dev${device} HBM [0x${a.toString(16)}, 0x${b.toString(16)})`;
}

function us(ps: number): string {
  return `${(ps / 1e6).toFixed(3)} us`;
}
