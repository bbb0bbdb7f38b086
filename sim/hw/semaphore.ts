// EVT_SEM: 256 signed 32-bit semaphores per TopSP with read / set / inc / dec windows, and waiters.
import type { Kernel } from "../kernel/kernel.ts";
import { Prio } from "../kernel/kernel.ts";
import { SemaClock, type Clock } from "../verify/races.ts";
import { SEMAPHORES_PER_TOPSP } from "../../src/encd/address.ts";
import { steadyTag, type SteadyTag, type SteadyVisitor } from "../kernel/steady.ts";

export interface Waiter {
  readonly sema: number;
  /** (A steady-state jump shifts the target of a count that drifts.) */
  target: number;
  readonly release: () => void;
}

export class SemaphoreBlock {
  readonly values: Int32Array;
  /**
   * Per semaphore, its waiters in the order they came: the first `waiting[sema]` of its list (the
   * lists keep their length, so that a wait and its wake-up allocate no array).
   */
  private readonly waiters: (Waiter | undefined)[][] = [];
  private readonly waiting: Int32Array;
  private readonly kernel: Kernel;
  private readonly wakePs: number;
  /** Called on every value change (for traces and tests). */
  onChange: ((sema: number, value: number) => void) | undefined;
  /**
   * Steady state: counts that may grow period after period — semaphores a host proxy waits on, a
   * channel's DMA completion counts (each wait's target is the count so far plus one) — and
   * semaphores a channel waits on for fixed values (they must come back), and where the values'
   * levels start.
   */
  readonly proxyWaited = new Set<number>();
  readonly countWaited = new Set<number>();
  readonly coreWaited = new Set<number>();
  levelBase = 0;
  steadyId = 0;
  /**
   * Steady state: the values when the search started (`startSteady`), and the semaphores whose
   * value differed from them at the last look (the others are as the image loaded them).
   */
  private initial: Int32Array | undefined;
  private moved: number[] = [];
  /** Race detection: per semaphore, the join of the clocks of every write that released it. */
  private clocks: (SemaClock | undefined)[] | undefined;

  constructor(kernel: Kernel, count: number, wakePs: number) {
    this.kernel = kernel;
    this.values = new Int32Array(count);
    // (Every index a semaphore address can name: one past a preset's count waits, never woken, as before.)
    this.waiting = new Int32Array(Math.max(count, SEMAPHORES_PER_TOPSP));
    this.wakePs = wakePs;
  }

  write(sema: number, window: "set" | "inc" | "dec", v: number): void {
    const old = this.values[sema]!;
    this.values[sema] = window === "set" ? v : window === "inc" ? old + v : old - v;
    this.onChange?.(sema, this.values[sema]!);
    this.check(sema);
  }

  /** Race detection: a write to `sema` publishes `clock` (and `agent`'s own `epoch`, when given). */
  release(sema: number, clock: Clock, agent = -1, epoch = 0): void {
    this.clocks ??= [];
    (this.clocks[sema] ??= new SemaClock()).release(clock, agent, epoch);
  }

  /** What a wait satisfied by `sema` now acquires. */
  published(sema: number): Clock | undefined {
    return this.clocks?.[sema]?.published();
  }

  /** Wait until value >= target; `release` runs `wakePs` after the write that satisfies it (now, if it already holds). */
  waitGe(sema: number, target: number, release: () => void): void {
    if (this.values[sema]! >= target) {
      release();
      return;
    }
    const list = (this.waiters[sema] ??= []);
    list[this.waiting[sema]!++] = { sema, target, release };
  }

  private check(sema: number): void {
    const n = this.waiting[sema]!;
    if (n === 0) return;
    const list = this.waiters[sema]!;
    const value = this.values[sema]!;
    // Wake the satisfied waiters in the order they came; keep the others, in order, in place.
    let kept = 0;
    for (let i = 0; i < n; i++) {
      const w = list[i]!;
      if (value < w.target) {
        list[kept++] = w;
        continue;
      }
      const wake = this.wakeOf(w);
      // (Tagged only while a steady-state search reads the state.)
      this.kernel.after(this.wakePs, Prio.WAKE, this.kernel.onMark ? steadyTag(wake, new WakeTag(this, w)) : wake);
    }
    // (The woken ones' places are cleared, not cut: cutting an array's length reallocates it at the next wait.)
    for (let i = kept; i < n; i++) list[i] = undefined;
    this.waiting[sema] = kept;
  }

  /**
   * A woken waiter's callback: it waits again (the value may have moved on). Made here, not named
   * in `check`: a closure held in a named const is named at each making where the module loader
   * keeps names (tsx), a property definition each wake-up.
   */
  private wakeOf(w: Waiter): () => void {
    return () => this.waitGe(w.sema, w.target, w.release);
  }

  /** Steady state: the values from now on are told from these. */
  startSteady(): void {
    this.initial = this.values.slice();
  }

  /** The level index of `sema` in the last steady-state visit (`steady`): undefined for one at its starting value then. */
  levelOf(sema: number): number | undefined {
    const i = this.moved.indexOf(sema);
    return i < 0 ? undefined : this.levelBase + i;
  }

  /**
   * Steady state: the values not at their starting value (in semaphore order), and the waiters in
   * order. A count that only grows (a proxy's triggers, a channel's DMA completions) may drift by a
   * fixed step a period (its waits' targets drift with it: they are said from the value).
   */
  steady(v: SteadyVisitor): void {
    this.levelBase = v.levelIndex;
    const values = this.values;
    // (A semaphore at its starting value at both marks is the same at both: only the others are said, by number.)
    const initial = this.initial ?? new Int32Array(values.length);
    const moved: number[] = [];
    for (let s = 0; s < values.length; s++) if (values[s] !== initial[s]) moved.push(s);
    this.moved = moved;
    v.same(moved.length);
    for (const s of moved) {
      v.same(s);
      values[s] = v.level(values[s]!, (this.proxyWaited.has(s) || this.countWaited.has(s)) && !this.coreWaited.has(s));
    }
    const semas: number[] = [];
    for (let s = 0; s < this.waiting.length; s++) if (this.waiting[s]! > 0) semas.push(s);
    v.same(semas.length);
    for (const s of semas) {
      const list = this.waiters[s]!;
      const n = this.waiting[s]!;
      v.same(s);
      v.same(n);
      for (let i = 0; i < n; i++) this.steadyWaiter(v, list[i]!);
    }
  }

  /** Steady state: `x`, a threshold on semaphore `sema`, shifted with its value (one at its starting value does not move). */
  drift(v: SteadyVisitor, sema: number, x: number): number {
    const i = this.levelOf(sema);
    return i === undefined ? x : v.drift(i, x);
  }

  /** Steady state: a waiter (in a list, or woken and on its way). */
  steadyWaiter(v: SteadyVisitor, w: Waiter): void {
    v.same(this.steadyId);
    v.same(w.sema);
    v.same(w.target - this.values[w.sema]!);
    w.target = this.drift(v, w.sema, w.target);
    v.fn(w.release);
  }
}

/** A woken waiter on its way, as steady state reads it. */
class WakeTag implements SteadyTag {
  private readonly block: SemaphoreBlock;
  private readonly waiter: Waiter;
  constructor(block: SemaphoreBlock, waiter: Waiter) {
    this.block = block;
    this.waiter = waiter;
  }
  steady(v: SteadyVisitor): void {
    this.block.steadyWaiter(v, this.waiter);
  }
}
