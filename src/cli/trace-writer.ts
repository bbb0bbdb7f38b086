// --trace: collect the simulator's spans and counters into the Chrome / Perfetto trace-event format.
import type { TraceSink } from "../../sim/index.ts";

/** One trace event (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU). */
export interface TraceEvent {
  readonly name: string;
  readonly ph: "X" | "C" | "M";
  readonly ts: number;
  readonly pid: number;
  readonly tid?: number;
  readonly dur?: number;
  readonly cat?: string;
  readonly args?: Record<string, unknown>;
}

/** pid of the track group holding the links (devices use their id as pid). */
export const FABRIC_PID = 1000;
const us = (ps: number): number => ps / 1e6;

/** Trace events kept by default (each about 1 KB in memory and 120 bytes in the file). */
export const DEFAULT_TRACE_EVENTS = 500_000;

export class TraceCollector {
  private readonly events: TraceEvent[] = [];
  /** The most events kept; those recorded after are counted, not kept. */
  readonly limit: number;
  /** Events recorded past the limit, and the simulated time (us) the first of them ended at: where the trace stops. */
  dropped = 0;
  stoppedAtUs = 0;

  constructor(limit = DEFAULT_TRACE_EVENTS) {
    this.limit = limit;
  }

  /** Keep `e` if there is room; otherwise count it. */
  private keep(e: TraceEvent): void {
    if (this.events.length < this.limit) this.events.push(e);
    else if (this.dropped++ === 0) this.stoppedAtUs = e.ts + (e.dur ?? 0);
  }
  private readonly threads = new Map<string, { pid: number; tid: number; name: string }>();
  private readonly pids = new Map<number, string>();
  private offset = 0;
  private end = 0;

  private track(pid: number, key: string, name: string, pname: string): number {
    this.pids.set(pid, pname);
    const id = `${pid}/${key}`;
    let t = this.threads.get(id);
    if (!t) {
      t = { pid, tid: [...this.threads.values()].filter((x) => x.pid === pid).length + 1, name };
      this.threads.set(id, t);
    }
    return t.tid;
  }

  private span(pid: number, tid: number, name: string, cat: string, start: number, end: number, args: Record<string, unknown>): void {
    this.keep({ name, ph: "X", cat, ts: us(this.offset + start), dur: us(end - start), pid, tid, args });
    this.end = Math.max(this.end, this.offset + end);
  }

  /** A sink for the next simulation run (op); its time starts where the previous run ended. */
  sink(label: string): TraceSink {
    this.offset = this.end;
    const dev = (d: number) => `device ${d}`;
    return {
      entry: (d, ts, op, channels, start, end) =>
        this.span(d, this.track(d, `topsp${ts}`, `TopSP ${ts}`, dev(d)), `${label}: cc_op ${op}`, "topsp", start, end, { op, channel_list: channels }),
      wait: (d, ts, ch, sema, role, target, start, end) =>
        this.span(d, this.track(d, `topsp${ts}`, `TopSP ${ts}`, dev(d)), `wait sem${sema} (${role})`, "wait", start, end, { channel: ch, sema, target }),
      packet: (d, eng, q, kind, bytes, dst, start, end) =>
        this.span(d, this.track(d, `dma${eng}.q${q}`, `DMA ${eng} queue ${q}`, dev(d)), `${kind} ${bytes} B`, "dma", start, end, { bytes, dst }),
      link: (name, bytes, start, end) => this.span(FABRIC_PID, this.track(FABRIC_PID, name, name, "links"), `${bytes} B`, "link", start, end, { bytes }),
      sema: (d, ts, sema, value, t) => {
        this.pids.set(d, dev(d));
        this.keep({ name: `topsp${ts} sem${sema}`, ph: "C", ts: us(this.offset + t), pid: d, args: { value } });
      },
    };
  }

  /** Set when a run simulated pod 0 for alike pods: what the trace's devices stand for. */
  folded: string | undefined;

  /** What the trace left out, for the user (undefined: nothing). */
  truncation(): string | undefined {
    if (this.dropped === 0) return undefined;
    return `kept the first ${this.limit} trace events; recording stopped at ${this.stoppedAtUs.toFixed(3)} us of simulated time and ${this.dropped} more were left out (--trace-limit N keeps more)`;
  }

  /**
   * The whole trace, in pieces to write one after another (a long run's trace is larger than one
   * string may be): metadata first, then events by time (ties keep their order); a truncated
   * trace says so in `otherData`.
   */
  *chunks(): Generator<string> {
    const meta: TraceEvent[] = [
      ...[...this.pids].map(([pid, name]) => ({ name: "process_name", ph: "M" as const, ts: 0, pid, args: { name } })),
      ...[...this.threads.values()].map((t) => ({ name: "thread_name", ph: "M" as const, ts: 0, pid: t.pid, tid: t.tid, args: { name: t.name } })),
    ];
    const sorted = this.events.map((e, i) => ({ e, i })).sort((a, b) => a.e.ts - b.e.ts || a.i - b.i).map((x) => x.e);
    const all = [...meta, ...sorted];
    const cut = this.truncation();
    const other = { ...(cut ? { truncated: cut } : {}), ...(this.folded ? { folded: this.folded } : {}) };
    yield `{"displayTimeUnit":"ns",${Object.keys(other).length > 0 ? `"otherData":${JSON.stringify(other)},` : ""}"traceEvents":[`;
    const PIECE = 10_000;
    for (let i = 0; i < all.length; i += PIECE) {
      yield (i > 0 ? "," : "") + all.slice(i, i + PIECE).map((e) => JSON.stringify(e)).join(",");
    }
    yield "]}\n";
  }
}
