// The discrete-event kernel: events ordered by (time, priority, sequence), time in integer picoseconds.
import type { Tick } from "../../src/ir/time.ts";
import { SimError } from "../../src/ir/errors.ts";

/** Priorities at equal time: data landing first, then cores waking, then issue, then engines. */
export const Prio = { LAND: 0, WAKE: 1, ISSUE: 2, ENGINE: 3 } as const;
export type Prio = (typeof Prio)[keyof typeof Prio];

interface Ev {
  t: Tick;
  p: number;
  s: number;
  fn: () => void;
}

function less(a: Ev, b: Ev): boolean {
  return a.t < b.t || (a.t === b.t && (a.p < b.p || (a.p === b.p && a.s < b.s)));
}

export interface RunSummary {
  readonly events: number;
  readonly endPs: Tick;
}

export class Kernel {
  now: Tick = 0;
  private seq = 0;
  private executed = 0;
  private readonly heap: Ev[] = [];

  /** Schedule `fn` at absolute time `t` (not before now). */
  at(t: Tick, prio: Prio, fn: () => void): void {
    if (!Number.isSafeInteger(t) || t < this.now) throw new SimError("SIM1001", `event time ${t} is not an integer at or after t=${this.now}`, { value: t });
    const ev: Ev = { t, p: prio, s: this.seq++, fn };
    const h = this.heap;
    h.push(ev);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!less(ev, h[parent]!)) break;
      h[i] = h[parent]!;
      i = parent;
    }
    h[i] = ev;
  }

  after(delay: Tick, prio: Prio, fn: () => void): void {
    if (!Number.isSafeInteger(delay) || delay < 0) throw new SimError("SIM1002", `negative or non-integer delay ${delay} at t=${this.now}`, { value: delay });
    this.at(this.now + delay, prio, fn);
  }

  get pending(): number {
    return this.heap.length;
  }

  private pop(): Ev | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (top === undefined || last === undefined || h.length === 0) return top;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= h.length) break;
      const r = l + 1;
      const c = r < h.length && less(h[r]!, h[l]!) ? r : l;
      if (!less(h[c]!, last)) break;
      h[i] = h[c]!;
      i = c;
    }
    h[i] = last;
    return top;
  }

  /** Run until no event is pending (or `maxEvents` have run, which is an error: a runaway model). */
  run(maxEvents = 2_000_000_000): RunSummary {
    for (;;) {
      const ev = this.pop();
      if (!ev) break;
      this.now = ev.t;
      ev.fn();
      if (++this.executed > maxEvents) throw new SimError("SIM1003", `more than ${maxEvents} events: the model does not converge`, { value: maxEvents });
    }
    return { events: this.executed, endPs: this.now };
  }
}

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
  freeAt: Tick = 0;
  busyPs = 0;
  bytes = 0;
  /** Booked intervals, sorted and disjoint, as [start0, end0, start1, end1, ...]. */
  private readonly booked: number[] = [];
  constructor(name: string, rate: number) {
    this.name = name;
    this.rate = rate;
  }

  /** Book `dur` at the earliest time >= `earliest` that is free; bookings ending before `now` are forgotten. */
  reserve(earliest: Tick, dur: Tick, now: Tick): Tick {
    const b = this.booked;
    let drop = 0;
    while (drop < b.length && b[drop + 1]! <= now) drop += 2;
    if (drop) b.splice(0, drop);
    let start = earliest;
    let i = 0;
    for (; i < b.length; i += 2) {
      if (start + dur <= b[i]!) break;
      if (start < b[i + 1]!) start = b[i + 1]!;
    }
    const end = start + dur;
    // Insert [start, end) before index i, merging with touching neighbours.
    const mergePrev = i >= 2 && b[i - 1] === start;
    const mergeNext = i < b.length && b[i] === end;
    if (mergePrev && mergeNext) {
      b[i - 1] = b[i + 1]!;
      b.splice(i, 2);
    } else if (mergePrev) b[i - 1] = end;
    else if (mergeNext) b[i] = start;
    else b.splice(i, 0, start, end);
    this.freeAt = Math.max(this.freeAt, end);
    return start;
  }
}
