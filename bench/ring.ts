// npm run bench: ring8 all-reduce on trn1 at 64 MiB and 1 GiB (timing only), simulated events per
// wall second, against a bare event loop (the simulator's kernel with empty events) in the same run.
import { compileStreamed } from "../src/enc/compile.ts";
import { loadDevice, loadScenario } from "../src/run/load.ts";
import { busFactor, throughput } from "../src/report/table.ts";
import { simulate } from "../sim/index.ts";
import { Kernel, Prio } from "../sim/kernel/kernel.ts";

/** The kernel alone: `n` events that each schedule the next at a pseudo-random delay, 64 in flight. */
function bareLoop(n: number): number {
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
const bare = bareLoop(10_000_000);
console.log(`bare event loop: ${Math.round(bare)} events/s (10 M events, the simulator's kernel)`);

const spec = loadDevice("trn1");
const base = loadScenario("scenarios/ring8.json");
const sizes = process.argv.slice(2).map(Number).filter((n) => n > 0);
const rows: string[] = [];
for (const bytes of sizes.length ? sizes : [64 << 20, 1 << 30]) {
  const scn = { ...base, check: "none" as const, ops: [{ op: "all-reduce" as const, bytes, dtype: "fp32" as const, reduce: "sum" as const, stream: 0, priorityClass: 0 }] };
  const t0 = performance.now();
  // As npm run sim does: the rings stream into the run (compile = the counting pass; the run composes them).
  const { image } = compileStreamed(scn, spec, [0]);
  const t1 = performance.now();
  const r = simulate(spec, image, { storePayload: false });
  const t2 = performance.now();
  if (r.hang) throw new Error(`bench run hung at ${bytes} bytes`);
  const tp = throughput(bytes, r.opEndPs[0]!, busFactor("all-reduce", scn.ranks));
  const descs = image.devices.reduce((n, d) => n + d.queues.reduce((k, q) => k + (q.streamed ? q.streamed.txCount + q.streamed.rxCount : (q.tx.length + q.rx.length) / 16), 0), 0);
  rows.push(
    [
      `all-reduce ${bytes} B fp32, 8 ranks, ${scn.channels} channels`,
      `  simulated: ${tp.timeUs.toFixed(2)} us, algbw ${tp.algbwGBps.toFixed(2)} GB/s, busbw ${tp.busbwGBps.toFixed(2)} GB/s`,
      `  compile (counting pass): ${((t1 - t0) / 1000).toFixed(2)} s wall, ${descs} descriptors`,
      `  simulate (rings composed as they stream in): ${((t2 - t1) / 1000).toFixed(2)} s wall, ${r.events} events, ${r.packets} DMA packets, ${Math.round(r.events / ((t2 - t1) / 1000))} events/s (${((100 * r.events) / ((t2 - t1) / 1000) / bare).toFixed(1)} % of the bare loop)`,
      `  peak RSS so far: ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MiB`,
    ].join("\n"),
  );
  console.log(rows[rows.length - 1]);
}
