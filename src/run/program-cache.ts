// Trials without recompiling: a fit runs the same points again and again with other rates,
// latencies and costs, and the composer never reads those (they time the machine, they do not
// shape the program), so a point's compiled program can run again under every trial's timing.
// A kept program is the streamed one drained whole: its descriptor rings in shared memory (a
// worker thread that runs it again reads the same bytes, not a copy), its feed gone.
import type { CompiledProgram } from "../enc/compile.ts";
import type { QueueImage } from "../encd/image.ts";
import type { DescPages } from "../encd/pages.ts";
import { DESC_BYTES } from "../encd/udma.ts";
import { InternalError } from "../ir/errors.ts";
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
 * the same run (test/run/program-cache.test.ts). A streamed ring is copied as its descriptors
 * arrive and their pages go back to be composed into again, as a run's engines let them go: the
 * program is held once, in shared memory, not also whole in pages first (the older runtime's 1
 * GiB two-node point, 570 MiB of rings, held both at once).
 */
export function materialize(p: CompiledProgram): CompiledProgram {
  const shared = (n: number): Uint8Array => new Uint8Array(new SharedArrayBuffer(n));
  /** A streamed ring side: its pages, the shared copy, and how much of it is copied. */
  const sides: { readonly pages: DescPages; readonly out: Uint8Array; done: number }[] = [];
  const side = (pages: DescPages, count: number): Uint8Array => {
    const out = shared(count * DESC_BYTES);
    sides.push({ pages, out, done: 0 });
    return out;
  };
  const copied = (bytes: Uint8Array): Uint8Array => {
    const out = shared(bytes.length);
    out.set(bytes);
    return out;
  };
  const whole = (q: QueueImage): QueueImage => (q.streamed ? { engine: q.engine, queue: q.queue, tx: side(q.streamed.tx, q.streamed.txCount), rx: side(q.streamed.rx, q.streamed.rxCount) } : { ...q, tx: copied(q.tx), rx: copied(q.rx) });
  const { feed, ...image } = p.image;
  const out = { ...p, image: { ...image, devices: image.devices.map((d) => ({ ...d, queues: d.queues.map(whole) })) } };
  // What has arrived, copied, and its whole pages let go.
  const take = (): void => {
    for (const s of sides) {
      const n = s.pages.count;
      if (n === s.done) continue;
      s.pages.copyOut(s.done, n, s.out, s.done * DESC_BYTES);
      s.done = n;
      s.pages.release(n);
    }
  };
  take();
  if (feed) {
    while (feed.pull()) take();
    feed.close?.();
    take();
  }
  for (const s of sides) if (s.done * DESC_BYTES !== s.out.length) throw new InternalError(`a streamed ring drained at ${s.done} of its ${s.out.length / DESC_BYTES} descriptors`);
  return out;
}

/** Bytes of descriptor rings a program holds, or will hold once its streamed rings have arrived. */
export function ringBytes(p: CompiledProgram): number {
  return p.image.devices.reduce((n, d) => n + d.queues.reduce((m, q) => m + (q.streamed ? (q.streamed.txCount + q.streamed.rxCount) * DESC_BYTES : q.tx.length + q.rx.length), 0), 0);
}

/**
 * Programs kept for running again, by `programKey`, up to `budgetBytes` of descriptor rings. A
 * fit's trials come in rounds (`nextRound`: one a trial); when a program offered would pass the
 * budget, the programs no round has used for longest make room for it, but never one used in the
 * round under way (a round that needs more than the budget keeps what it met first and compiles
 * the rest again, rather than each program pushing out the next one it needs). A fit that moves a
 * count the composer reads (ring.defaultChannels) needs new programs from then on: those of the
 * old count go.
 */
export class ProgramCache {
  /** By key, the least recently used first. */
  private readonly kept = new Map<string, { readonly program: CompiledProgram; readonly bytes: number; round: number }>();
  private used = 0;
  private round = 0;
  /** Keys let go since `takeDropped` was last called (what kept worker threads hold may go too). */
  private dropped: string[] = [];
  constructor(readonly budgetBytes: number) {}

  /** A new round of uses begins (a fit's next trial). */
  nextRound(): void {
    this.round++;
  }

  get(key: string): CompiledProgram | undefined {
    const e = this.kept.get(key);
    if (!e) return undefined;
    e.round = this.round;
    this.kept.delete(key);
    this.kept.set(key, e);
    return e.program;
  }

  /**
   * The most ring bytes a program offered now could be kept with: the budget left, and the
   * programs of earlier rounds it would let go (0: none would be kept).
   */
  get room(): number {
    let room = this.budgetBytes - this.used;
    for (const e of this.kept.values()) if (e.round < this.round) room += e.bytes;
    return Math.max(0, room);
  }

  /** Keep `p` under `key` if it fits in the budget, letting go of programs of earlier rounds (least recently used first) to make room. */
  offer(key: string, p: CompiledProgram): void {
    if (this.kept.has(key)) return;
    const n = ringBytes(p);
    let room = this.budgetBytes - this.used;
    for (const e of this.kept.values()) {
      if (room >= n || e.round === this.round) break;
      room += e.bytes;
    }
    if (room < n) {
      // (Not kept here, so not by the kept workers either: one may have kept it on compiling it.)
      this.dropped.push(key);
      return;
    }
    for (const [k, e] of this.kept) {
      if (this.used + n <= this.budgetBytes) break;
      this.kept.delete(k);
      this.used -= e.bytes;
      this.dropped.push(k);
    }
    this.kept.set(key, { program: p, bytes: n, round: this.round });
    this.used += n;
  }

  /** The keys let go (or offered and not kept) since the last call. */
  takeDropped(): string[] {
    const d = this.dropped;
    this.dropped = [];
    return d;
  }

  /** Let every program go. */
  clear(): void {
    this.kept.clear();
    this.used = 0;
    this.dropped = [];
  }

  /** Programs kept, and their rings' bytes. */
  get size(): { readonly programs: number; readonly bytes: number } {
    return { programs: this.kept.size, bytes: this.used };
  }
}
