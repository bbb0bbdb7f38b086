// EVT_SEM: 256 signed 32-bit semaphores per TopSP with read / set / inc / dec windows, and waiters.
import type { Kernel } from "../kernel/kernel.ts";
import { Prio } from "../kernel/kernel.ts";
import { SemaClock, type Clock } from "../verify/races.ts";

export interface Waiter {
  readonly sema: number;
  readonly target: number;
  readonly release: () => void;
}

export class SemaphoreBlock {
  readonly values: Int32Array;
  private readonly waiters = new Map<number, Waiter[]>();
  private readonly kernel: Kernel;
  private readonly wakePs: number;
  /** Called on every value change (for traces and tests). */
  onChange: ((sema: number, value: number) => void) | undefined;
  /** Race detection: per semaphore, the join of the clocks of every write that released it. */
  private clocks: (SemaClock | undefined)[] | undefined;

  constructor(kernel: Kernel, count: number, wakePs: number) {
    this.kernel = kernel;
    this.values = new Int32Array(count);
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
    const list = this.waiters.get(sema);
    if (list) list.push({ sema, target, release });
    else this.waiters.set(sema, [{ sema, target, release }]);
  }

  private check(sema: number): void {
    const list = this.waiters.get(sema);
    if (!list || list.length === 0) return;
    const value = this.values[sema]!;
    // Wake the satisfied waiters in the order they came; keep the others, in order, in place.
    let kept = 0;
    for (let i = 0; i < list.length; i++) {
      const w = list[i]!;
      if (value >= w.target) this.kernel.after(this.wakePs, Prio.WAKE, () => this.waitGe(w.sema, w.target, w.release));
      else list[kept++] = w;
    }
    list.length = kept;
  }

  pendingWaiters(): Waiter[] {
    return [...this.waiters.values()].flat();
  }
}
