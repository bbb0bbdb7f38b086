// The discrete-event kernel: events ordered by (time, priority, sequence), time in integer picoseconds.
import { transferPs, WIDE_ZERO, type Tick } from "../../src/ir/time.ts";
import { SimError } from "../../src/ir/errors.ts";
import { Mode, type SteadyVisitor } from "./steady.ts";

/** Priorities at equal time: data landing first, then cores waking, then issue, then engines. */
export const Prio = { LAND: 0, WAKE: 1, ISSUE: 2, ENGINE: 3 } as const;
export type Prio = (typeof Prio)[keyof typeof Prio];

/** Priority and sequence in one number: p * 2^44 + s (exact in a double while s < 2^44). */
const PRIO_SCALE = 2 ** 44;

export interface RunSummary {
  readonly events: number;
  readonly endPs: Tick;
}

/**
 * The pending events are a binary heap on parallel typed arrays — times, (priority, sequence) keys
 * and slot numbers — so scheduling allocates nothing but the callback. A callback stays in its
 * slot of `fns` while its event moves in the heap: sifting copies numbers only (a callback moved
 * from slot to slot of the heap was the kernel's costliest line: each store of a young object into
 * the old array is recorded for the garbage collector).
 */
export class Kernel {
  now: Tick = 0;
  private seq = 0;
  /** Events run so far. */
  executed = 0;
  private size = 0;
  private times = new Float64Array(1024);
  private keys = new Float64Array(1024);
  private slots = new Int32Array(1024);
  /** Callbacks by slot; `free[0, freeN)` the slots not in use. */
  private fns: (() => void)[] = [];
  private free = new Int32Array(1024);
  private freeN = 0;
  /**
   * A component marks the moment a step pattern begins (steady-state detection): `onMark` runs
   * after the event that set it, between events.
   */
  marked = false;
  onMark: (() => void) | undefined = undefined;

  /** Schedule `fn` at absolute time `t` (not before now). */
  at(t: Tick, prio: Prio, fn: () => void): void {
    // (The error is built elsewhere: a small `at` is inlined where events are scheduled, so the
    // time is not boxed to be passed.)
    if (!Number.isSafeInteger(t) || t < this.now) this.badTime(t);
    const key = prio * PRIO_SCALE + this.seq++;
    if (this.size === this.times.length) this.grow();
    const times = this.times;
    const keys = this.keys;
    let i = this.size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const pt = times[parent]!;
      if (pt < t || (pt === t && keys[parent]! < key)) break;
      this.move(parent, i);
      i = parent;
    }
    let slot: number;
    if (this.freeN > 0) {
      slot = this.free[--this.freeN]!;
      this.fns[slot] = fn;
    } else {
      slot = this.fns.length;
      this.fns.push(fn);
    }
    this.put(i, t, key, slot);
  }

  private badTime(t: number): never {
    throw new SimError("SIM1001", `event time ${t} is not an integer at or after t=${this.now}`, { value: t });
  }

  /** Heap slot `from`'s event into slot `to`. */
  private move(from: number, to: number): void {
    this.times[to] = this.times[from]!;
    this.keys[to] = this.keys[from]!;
    this.slots[to] = this.slots[from]!;
  }

  private put(i: number, t: Tick, key: number, slot: number): void {
    this.times[i] = t;
    this.keys[i] = key;
    this.slots[i] = slot;
  }

  after(delay: Tick, prio: Prio, fn: () => void): void {
    if (!Number.isSafeInteger(delay) || delay < 0) throw new SimError("SIM1002", `negative or non-integer delay ${delay} at t=${this.now}`, { value: delay });
    this.at(this.now + delay, prio, fn);
  }

  get pending(): number {
    return this.size;
  }

  private grow(): void {
    const n = this.times.length * 2;
    const times = new Float64Array(n);
    const keys = new Float64Array(n);
    const slots = new Int32Array(n);
    const free = new Int32Array(n);
    times.set(this.times);
    keys.set(this.keys);
    slots.set(this.slots);
    free.set(this.free);
    this.times = times;
    this.keys = keys;
    this.slots = slots;
    this.free = free;
  }

  /** Remove the earliest event: its time becomes `now`; returns its callback. */
  private pop(): (() => void) | undefined {
    if (this.size === 0) return undefined;
    const times = this.times;
    const keys = this.keys;
    const slots = this.slots;
    const s0 = slots[0]!;
    const fn = this.fns[s0]!;
    this.fns[s0] = NOOP;
    this.free[this.freeN++] = s0;
    this.now = times[0]!;
    const n = --this.size;
    if (n > 0) {
      // Sift the last event down from the root.
      const t = times[n]!;
      const key = keys[n]!;
      const f = slots[n]!;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        let c = l;
        if (r < n) {
          const rt = times[r]!;
          const lt = times[l]!;
          if (rt < lt || (rt === lt && keys[r]! < keys[l]!)) c = r;
        }
        const ct = times[c]!;
        if (t < ct || (t === ct && key < keys[c]!)) break;
        this.move(c, i);
        i = c;
      }
      this.put(i, t, key, f);
    }
    return fn;
  }

  /**
   * Run until no event is pending (or `maxEvents` have run, which is an error: a runaway model).
   * `tick`, when given, is called every TICK_EVENTS events (a progress report's chance to look).
   */
  run(maxEvents = DEFAULT_MAX_EVENTS, tick?: () => void): RunSummary {
    // (Marks are looked for in a loop of their own: the plain loop, which most runs take, stays as
    // it was.)
    if (this.onMark) return this.runMarked(maxEvents, tick);
    for (;;) {
      const fn = this.pop();
      if (!fn) break;
      fn();
      if (++this.executed > maxEvents) this.runaway(maxEvents);
      if (tick && (this.executed & (TICK_EVENTS - 1)) === 0) tick();
    }
    return { events: this.executed, endPs: this.now };
  }

  /** `run` while a component marks moments (`onMark`); on in the plain loop once no one looks. */
  private runMarked(maxEvents: number, tick: (() => void) | undefined): RunSummary {
    for (;;) {
      const fn = this.pop();
      if (!fn) break;
      fn();
      if (this.marked) {
        this.marked = false;
        this.onMark?.();
      }
      if (++this.executed > maxEvents) this.runaway(maxEvents);
      if (tick && (this.executed & (TICK_EVENTS - 1)) === 0) tick();
      if (!this.onMark) return this.run(maxEvents, tick);
    }
    return { events: this.executed, endPs: this.now };
  }

  private runaway(maxEvents: number): never {
    throw new SimError("SIM1003", `more than ${maxEvents} events: the model does not converge`, { value: maxEvents });
  }

  /** Steady state: the clock, the events run, and every pending event (in the order they will run). */
  steady(v: SteadyVisitor): void {
    const order = Array.from({ length: this.size }, (_, i) => i).sort((a, b) => this.times[a]! - this.times[b]! || this.keys[a]! - this.keys[b]!);
    v.same(this.size);
    for (const i of order) {
      this.times[i] = v.time(this.times[i]!);
      v.same(Math.floor(this.keys[i]! / PRIO_SCALE));
      v.fn(this.fns[this.slots[i]!]!);
    }
    // (The event that marked is counted after the mark: the count read here is one short, alike each time.)
    this.executed = v.count(this.executed);
    if (v.mode === Mode.JUMP) this.now = v.time(this.now);
  }
}

/** Events a run may take before it is called a runaway model. */
export const DEFAULT_MAX_EVENTS = 2_000_000_000;

/** Events between two calls of a run's tick (a power of two). */
const TICK_EVENTS = 1 << 16;

/** A placeholder in free slots (so no callback is kept alive). */
const NOOP = (): void => {};

/**
 * A resource that serves one piece of work at a time. `freeAt` is the end of its last booking; a
 * booking may also fill an earlier idle gap (`reserve`), so work booked for the future does not
 * block work that could run now.
 */
export class Resource {
  readonly name: string;
  /** Bytes per second; 0 = no limit. */
  readonly rate: number;
  /** A fault: from this time on the resource carries nothing (a link that is down). */
  downAt: Tick | undefined;
  freeAt: Tick = WIDE_ZERO;
  busyPs = WIDE_ZERO;
  bytes = WIDE_ZERO;
  /**
   * Booked intervals, sorted and disjoint, as [start0, end0, start1, end1, ...] in `booked[0, len)`
   * from index `head` (the ones before it ended before an earlier `now`: forgotten, dropped in
   * batches). A typed array grown by doubling: booking allocates nothing. It starts at 32
   * intervals, about what a busy link or HBM holds (at 8, a 1,024-rank run's resources grew 40,000
   * times; starting at 32 took a tenth off its time).
   */
  private booked: Float64Array = new Float64Array(64);
  private len = 0;
  private head = 0;
  /** The last `psFor`: most packets are of one size. */
  private lastBytes = -1;
  private lastPs = 0;
  constructor(name: string, rate: number) {
    this.name = name;
    this.rate = rate;
  }

  /** Picoseconds to move `bytes` at the resource's rate (`transferPs`). */
  psFor(bytes: number): Tick {
    if (bytes !== this.lastBytes) {
      this.lastPs = transferPs(bytes, this.rate);
      this.lastBytes = bytes;
    }
    return this.lastPs;
  }

  /** Book `dur` at the earliest time >= `earliest` that is free; bookings ending before `now` are forgotten. */
  reserve(earliest: Tick, dur: Tick, now: Tick): Tick {
    let b = this.booked;
    let h = this.head;
    let n = this.len;
    while (h < n && b[h + 1]! <= now) h += 2;
    if (h >= 64 && 2 * h >= n) {
      b.copyWithin(0, h, n);
      n -= h;
      h = 0;
      this.len = n;
    }
    this.head = h;
    // After every booking (the usual case): append, or extend the last one it touches. (Small, so
    // that callers inline it; a booking into an earlier gap is `fit`'s.)
    if (n !== h && earliest < b[n - 1]!) return this.fit(earliest, dur);
    const end = earliest + dur;
    if (n > h && b[n - 1] === earliest) b[n - 1] = end;
    else {
      if (n + 2 > b.length) b = this.grow();
      b[n] = earliest;
      b[n + 1] = end;
      this.len = n + 2;
    }
    if (end > this.freeAt) this.freeAt = end;
    return earliest;
  }

  /** Book `dur` in the first gap from `earliest` that holds it, before the last booking's end. */
  private fit(earliest: Tick, dur: Tick): Tick {
    let b = this.booked;
    const h = this.head;
    let n = this.len;
    let start = earliest;
    let i = h;
    for (; i < n; i += 2) {
      if (start + dur <= b[i]!) break;
      if (start < b[i + 1]!) start = b[i + 1]!;
    }
    const end = start + dur;
    // Insert [start, end) before index i, merging with touching neighbours.
    const mergePrev = i >= h + 2 && b[i - 1] === start;
    const mergeNext = i < n && b[i] === end;
    if (mergePrev && mergeNext) {
      b[i - 1] = b[i + 1]!;
      b.copyWithin(i, i + 2, n);
      n -= 2;
    } else if (mergePrev) b[i - 1] = end;
    else if (mergeNext) b[i] = start;
    else {
      if (n + 2 > b.length) b = this.grow();
      b.copyWithin(i + 2, i, n);
      b[i] = start;
      b[i + 1] = end;
      n += 2;
    }
    this.len = n;
    if (end > this.freeAt) this.freeAt = end;
    return start;
  }

  /** Seen in use by `usedSoFar` (it stays so). */
  private used = false;

  /**
   * Steady state: whether the resource has been in use (booked, or counted busy or carrying bytes)
   * when this or an earlier mark looked. Once true it stays true, so two marks that find as many
   * resources used find the same ones; one never used holds its first state, which no period moves.
   */
  usedSoFar(): boolean {
    if (!this.used && (this.freeAt !== 0 || this.busyPs !== 0 || this.bytes !== 0 || this.len !== this.head)) this.used = true;
    return this.used;
  }

  /** Steady state: the bookings still ahead (from now, touching ones as one), `freeAt`, and the counters. */
  steady(v: SteadyVisitor): void {
    const b = this.booked;
    if (v.mode === Mode.SAVE) {
      const now = v.now;
      const at = v.valCount;
      v.same(0);
      let n = 0;
      let lastEnd = Number.NaN;
      for (let i = this.head; i < this.len; i += 2) {
        const s = Math.max(b[i]!, now);
        const e = b[i + 1]!;
        if (e <= now) continue;
        if (s === lastEnd) v.setVal(v.valCount - 1, e - now);
        else {
          v.same(s - now);
          v.same(e - now);
          n++;
        }
        lastEnd = e;
      }
      v.setVal(at, n);
    } else for (let i = this.head; i < this.len; i++) b[i] = v.time(b[i]!);
    this.freeAt = v.time(this.freeAt);
    this.busyPs = v.count(this.busyPs);
    this.bytes = v.count(this.bytes);
  }

  private grow(): Float64Array {
    const b = new Float64Array(this.booked.length * 2);
    b.set(this.booked.subarray(0, this.len));
    this.booked = b;
    return b;
  }
}
