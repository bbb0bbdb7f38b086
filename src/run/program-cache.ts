// Trials without recompiling: a fit runs the same points again and again with other rates,
// latencies and costs, and the composer never reads those (they time the machine, they do not
// shape the program), so a point's compiled program can run again under every trial's timing.
// A kept program is the streamed one drained whole: its descriptor rings in shared memory (a
// worker thread that runs it again reads the same bytes, not a copy), its feed gone.
import type { CompiledProgram } from "../enc/compile.ts";
import type { QueueImage } from "../encd/image.ts";
import type { DescPages } from "../encd/pages.ts";
import { DESC_BYTES } from "../encd/udma.ts";
import type { DeviceSpec, Scenario } from "../ir/spec.ts";

/**
 * A preset field that times the machine: every field named …Ps (a time) or …PerSecond (a rate).
 * The composer reads none of them (test/run/program-cache.test.ts compiles with them changed and
 * compares the bytes), so programs compiled under presets that differ only there are the same.
 */
const TIMING_FIELD = /(Ps|PerSecond)$/;

/** What a compiled program depends on: the scenario, and the preset without its timing fields, host costs and sources. */
export function programKey(scn: Scenario, spec: DeviceSpec, fold: boolean): string {
  const shape: Record<string, unknown> = {};
  for (const [section, value] of Object.entries(spec)) {
    if (section === "host" || section === "sources") continue;
    shape[section] = value !== null && typeof value === "object" && !Array.isArray(value) ? Object.fromEntries(Object.entries(value as Record<string, unknown>).filter(([k]) => !TIMING_FIELD.test(k))) : value;
  }
  return JSON.stringify({ scn, spec: shape, fold });
}

/**
 * A streamed program as one that runs again: its feed drained (every descriptor composed), each
 * queue's rings copied into shared memory. The same bytes the feed would have handed over, so
 * the same run (test/run/program-cache.test.ts).
 */
export function materialize(p: CompiledProgram): CompiledProgram {
  const feed = p.image.feed;
  if (feed) {
    while (feed.pull());
    feed.close?.();
  }
  const shared = (n: number): Uint8Array => new Uint8Array(new SharedArrayBuffer(n));
  // (A streamed ring's pages straight into shared memory: no whole copy made on the way.)
  const fromPages = (pages: DescPages, count: number): Uint8Array => {
    const out = shared(count * DESC_BYTES);
    pages.copyOut(0, count, out, 0);
    return out;
  };
  const copied = (bytes: Uint8Array): Uint8Array => {
    const out = shared(bytes.length);
    out.set(bytes);
    return out;
  };
  const whole = (q: QueueImage): QueueImage => (q.streamed ? { engine: q.engine, queue: q.queue, tx: fromPages(q.streamed.tx, q.streamed.txCount), rx: fromPages(q.streamed.rx, q.streamed.rxCount) } : { ...q, tx: copied(q.tx), rx: copied(q.rx) });
  const { feed: _feed, ...image } = p.image;
  return { ...p, image: { ...image, devices: image.devices.map((d) => ({ ...d, queues: d.queues.map(whole) })) } };
}

/** Bytes of descriptor rings a program holds. */
export function ringBytes(p: CompiledProgram): number {
  return p.image.devices.reduce((n, d) => n + d.queues.reduce((m, q) => m + q.tx.length + q.rx.length, 0), 0);
}

/**
 * Programs kept for running again, by `programKey`, up to `budgetBytes` of descriptor rings: the
 * first ones offered are kept, later ones that would pass the budget are not (they compile again).
 */
export class ProgramCache {
  private readonly kept = new Map<string, CompiledProgram>();
  private used = 0;
  constructor(readonly budgetBytes: number) {}

  get(key: string): CompiledProgram | undefined {
    return this.kept.get(key);
  }

  /** Room for more (a program offered now may be kept). */
  get open(): boolean {
    return this.used < this.budgetBytes;
  }

  /** Keep `p` under `key` if it fits in what is left of the budget. */
  offer(key: string, p: CompiledProgram): void {
    if (this.kept.has(key)) return;
    const n = ringBytes(p);
    if (this.used + n > this.budgetBytes) return;
    this.kept.set(key, p);
    this.used += n;
  }

  /** Programs kept, and their rings' bytes. */
  get size(): { readonly programs: number; readonly bytes: number } {
    return { programs: this.kept.size, bytes: this.used };
  }
}
