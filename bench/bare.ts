// The bare event loop: the simulator's kernel with events that do nothing but schedule the next, at
// a pseudo-random delay, 64 in flight. Run as a process (`node --import tsx bench/bare.ts`), its
// 10 M events' whole-process wall time is B, the machine's speed every benchmark row is read by
// (npm run bench:table; .ci/run prints it after the suite).
import { Kernel, Prio } from "../sim/kernel/kernel.ts";
import { asCommand } from "../src/cli/entry.ts";

/** Run `n` events; returns events per second of the loop alone. */
export function bareLoop(n: number): number {
  const k = new Kernel();
  let left = n;
  let x = 12345;
  const step = () => {
    if (--left <= 0) return;
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    k.after(1 + (x % 1000), Prio.ENGINE, step);
  };
  for (let i = 0; i < 64; i++) k.after(i, Prio.ENGINE, step);
  const t0 = performance.now();
  k.run();
  return n / ((performance.now() - t0) / 1000);
}

asCommand(import.meta.url, () => {
  bareLoop(10_000_000);
  return 0;
});
