// npm run bench: timing-only all-reduces — ring8 on trn1 at 64 MiB and 1 GiB, and 1,024 ranks on
// 32 trn1 nodes (scenarios/trn1-32x32.json, auto: hierarchical) at 1 GiB — each in a process of
// its own (so its wall time and peak RSS are its own), against a bare event loop (the simulator's
// kernel with empty events) measured in this run.
//
//   npm run bench [-- SIZE...] [--skip-1024] [--repeat N]
//     SIZEs (bytes) replace ring8's two sizes; --repeat runs the bare loop and each case N times
//     (each case in N processes) and prints medians, with every run's figure
import { spawnSync } from "node:child_process";
import { algorithmLabel, compileStreamed, describeFolding } from "../src/enc/compile.ts";
import { loadDevice, loadScenario } from "../src/run/load.ts";
import { busFactor, throughput } from "../src/report/table.ts";
import { simulate } from "../sim/index.ts";
import { threadFeed } from "../src/run/feed-thread.ts";
import { Kernel, Prio, Resource } from "../sim/kernel/kernel.ts";
import { bareLoop } from "./bare.ts";
import { PacketClock } from "../sim/hw/fabric.ts";
import { descFields, packCceMeta, packRx, packTx, readRxWords, readTxWords } from "../src/encd/udma.ts";
import { SdmaCceType } from "../src/ir/enums.ts";
import { hbmAddr } from "../src/encd/address.ts";
import { wordsOf } from "../src/encd/bits.ts";
import { INITIAL_RING_ID } from "../src/encd/vring.ts";


/**
 * The least a descriptor-level packet costs: the kernel with events that each decode one CCE packet
 * of ring8's kind from emitted bytes (a META descriptor, two sources, one destination) and book
 * its four stages (engine, source HBM, link, destination HBM) — 16 engines on 8 devices, one packet
 * in flight each. No validation, round-robin, landing or semaphore: the simulator's events cost at
 * least this.
 */
function packetFloor(n: number): number {
  const PACKETS = 1024;
  const ring = new Uint8Array(PACKETS * 4 * 16);
  for (let i = 0; i < PACKETS; i++) {
    const at = i * 64;
    ring.set(packCceMeta(SdmaCceType.ADD, 2, 4096, INITIAL_RING_ID), at);
    ring.set(packTx(hbmAddr(0, i * 8192), 4096, INITIAL_RING_ID, { concat: true }), at + 16);
    ring.set(packTx(hbmAddr(0, i * 8192 + 4096), 4096, INITIAL_RING_ID, { last: true }), at + 32);
    ring.set(packRx(hbmAddr(1, i * 4096), 4096, INITIAL_RING_ID, { last: true }), at + 48);
  }
  const words = wordsOf(ring);
  const k = new Kernel();
  const hbm = Array.from({ length: 8 }, (_, d) => new Resource(`hbm${d}`, 400e9));
  const links = Array.from({ length: 8 }, (_, d) => new Resource(`link${d}`, 100e9));
  let left = n;
  let sink = 0;
  const engines = Array.from({ length: 16 }, (_, e) => {
    const dev = e >> 1;
    const res = new Resource(`dma${e}`, 30e9);
    const f = descFields();
    const clock = new PacketClock();
    let d = e * 37;
    const step = (): void => {
      if (--left <= 0) return;
      let w = (d++ % PACKETS) * 16;
      readTxWords(words, w, f);
      const bytes = f.length;
      for (let s = 0; s < 2; s++) {
        w += 4;
        readTxWords(words, w, f);
        sink += f.src;
      }
      readRxWords(words, w + 4, f);
      sink += f.dst;
      clock.begin(k.now);
      clock.stage(res, bytes, 0, 0, true);
      clock.stage(hbm[dev], 2 * bytes, 0, 0, true);
      clock.stage(links[dev], bytes, 0, 500_000, true);
      clock.stage(hbm[(dev + 1) % 8], bytes, 0, 0, false);
      k.at(clock.end().engineFree, Prio.ENGINE, step);
    };
    return step;
  });
  engines.forEach((step, e) => k.after(e, Prio.ENGINE, step));
  const t0 = performance.now();
  k.run();
  if (!Number.isFinite(sink)) throw new Error("packet floor: a descriptor decoded to no address");
  return n / ((performance.now() - t0) / 1000);
}

const CASES = {
  ring8: { file: "scenarios/ring8.json", what: "8 ranks," },
  hier1024: { file: "scenarios/trn1-32x32.json", what: "1,024 ranks on 32 trn1 nodes, auto:" },
} as const;
type CaseName = keyof typeof CASES;

/** One case, in this process: compile (the counting pass), simulate, print, and report as JSON on the last line. */
function runCase(name: CaseName, bytes: number): void {
  const c = CASES[name];
  const base = loadScenario(c.file);
  const spec = loadDevice(base.instance);
  const scn = { ...base, check: "none" as const, ops: [{ op: "all-reduce" as const, bytes, dtype: "fp32" as const, reduce: "sum" as const, stream: 0, priorityClass: 0 }] };
  const t0 = performance.now();
  // As npm run sim does: the rings stream into the run (compile = the counting pass; the run composes
  // them), and a program of alike pods runs pod 0 alone (src/encd/fold.ts).
  const { image, layout, folding } = compileStreamed(scn, spec, [0], { fold: true, runner: threadFeed() });
  const t1 = performance.now();
  const r = simulate(spec, image, { storePayload: false });
  const t2 = performance.now();
  if (r.hang) throw new Error(`bench run ${name} hung at ${bytes} bytes`);
  const tp = throughput(bytes, r.opEndPs[0]!, busFactor("all-reduce", scn.ranks));
  const descs = image.devices.reduce((n, d) => n + d.queues.reduce((k, q) => k + (q.streamed ? q.streamed.txCount + q.streamed.rxCount : (q.tx.length + q.rx.length) / 16), 0), 0);
  const op = layout.ops[0]!;
  const alg = algorithmLabel(op.algorithm, op.stages);
  console.log(
    [
      `all-reduce ${bytes} B fp32, ${c.what} ${alg}`,
      `  simulated: ${tp.timeUs.toFixed(2)} us, algbw ${tp.algbwGBps.toFixed(2)} GB/s, busbw ${tp.busbwGBps.toFixed(2)} GB/s`,
      ...(folding ? [`  ${describeFolding(folding)}`] : []),
      `  compile (counting pass): ${((t1 - t0) / 1000).toFixed(2)} s wall, ${descs} descriptors of the devices simulated`,
      `  simulate (rings composed as they stream in): ${((t2 - t1) / 1000).toFixed(2)} s wall, ${r.events} events, ${r.packets} DMA packets`,
    ].join("\n"),
  );
  console.log(JSON.stringify({ events: r.events, simulateS: (t2 - t1) / 1000, peakRssMiB: process.resourceUsage().maxRSS / 1024 }));
}

/** The median of `xs` (the mean of the middle two for an even count). */
function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

const args = process.argv.slice(2);
if (args[0] === "--case") {
  runCase(args[1] as CaseName, Number(args[2]));
} else {
  const r = args.indexOf("--repeat");
  const repeat = r >= 0 ? Number(args[r + 1]) : 1;
  if (!Number.isInteger(repeat) || repeat < 1) {
    process.stderr.write(`bench: --repeat takes a whole number of runs >= 1, not ${JSON.stringify(args[r + 1])}\n`);
    process.exit(1);
  }
  const sizeArgs = args.filter((a, i) => a !== "--skip-1024" && a !== "--repeat" && (r < 0 || i !== r + 1));
  const bares = Array.from({ length: repeat }, () => bareLoop(10_000_000));
  const bare = median(bares);
  const bareS = 10_000_000 / bare;
  const of = repeat > 1 ? ` (median of ${repeat}: ${bares.map((b) => (b / 1e6).toFixed(1)).join(", ")} M)` : "";
  console.log(`bare event loop: ${Math.round(bare)} events/s${of} (10 M events in ${bareS.toFixed(2)} s, the simulator's kernel)`);
  const floors = Array.from({ length: repeat }, () => packetFloor(5_000_000));
  const floor = median(floors);
  const fof = repeat > 1 ? `, median of ${repeat}: ${floors.map((b) => `${((100 * b) / bare).toFixed(1)} %`).join(", ")}` : "";
  console.log(`packet floor: ${Math.round(floor)} events/s, ${((100 * floor) / bare).toFixed(1)} % of the bare loop${fof} (each event decodes a CCE packet's 4 descriptors and books its 4 stages, nothing else)`);
  const sizes = sizeArgs.map(Number).filter((n) => n > 0);
  const runs: [CaseName, number][] = (sizes.length ? sizes : [64 << 20, 1 << 30]).map((b) => ["ring8", b]);
  if (!args.includes("--skip-1024")) runs.push(["hier1024", 1 << 30]);
  for (const [name, bytes] of runs) {
    const walls: number[] = [];
    const rates: number[] = [];
    const rss: number[] = [];
    let lines: string[] = [];
    for (let k = 0; k < repeat; k++) {
      const t0 = performance.now();
      const child = spawnSync(process.execPath, [...process.execArgv, process.argv[1]!, "--case", name, String(bytes)], { encoding: "utf8", maxBuffer: 1 << 24 });
      walls.push((performance.now() - t0) / 1000);
      if (child.status !== 0) {
        process.stderr.write(child.stderr);
        throw new Error(`bench case ${name} ${bytes} B failed (exit ${child.status})`);
      }
      lines = child.stdout.trimEnd().split("\n");
      const m = JSON.parse(lines.pop()!) as { events: number; simulateS: number; peakRssMiB: number };
      rates.push(m.events / m.simulateS);
      rss.push(m.peakRssMiB);
    }
    // (The lines of the last run; the figures below are medians over the runs.)
    const rate = median(rates);
    const wall = median(walls);
    const each = (xs: number[], f: (x: number) => string) => (repeat > 1 ? ` [${xs.map(f).join(", ")}]` : "");
    console.log(lines.join("\n"));
    console.log(`  ${Math.round(rate)} events/s simulated, ${((100 * rate) / bare).toFixed(1)} % of the bare loop${repeat > 1 ? `, median of ${repeat}` : ""}${each(rates, (x) => `${((100 * x) / bare).toFixed(1)} %`)}`);
    console.log(`  whole process: ${wall.toFixed(2)} s wall (${(wall / bareS).toFixed(1)}x the bare loop's 10 M events)${each(walls, (x) => `${x.toFixed(2)} s`)}, peak RSS ${median(rss).toFixed(0)} MiB`);
  }
}
