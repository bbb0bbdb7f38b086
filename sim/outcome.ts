// What a run leaves: its result, a hang report when something still waits, and the verifier's
// end-of-run checks (semaphores back where they started, rings consumed).
import type { Tick } from "../src/ir/time.ts";
import type { ProgramImage } from "../src/encd/image.ts";
import type { ProxyQueue } from "./hw/proxy.ts";
import type { Term } from "./verify/symbolic-memory.ts";
import type { DeviceModel } from "./image-loader.ts";
import type { SteadyReport } from "./steady-state.ts";

export interface HangWait {
  readonly device: number;
  readonly topsp: number;
  readonly channel: number;
  readonly semaphore: string;
  readonly role: string;
  readonly value: number;
  readonly awaited: number;
}

export interface HangReport {
  readonly timePs: Tick;
  readonly waits: readonly HangWait[];
  /** TopSPs that never finished their op entries. */
  readonly unfinished: readonly string[];
  readonly pendingDma: readonly string[];
  /** Injected faults that took effect (a link held a write, an increment was lost, ...). */
  readonly faults: readonly string[];
}

/** Bytes moved and time busy, per resource (a link direction, a DMA engine, a device's HBM). */
export interface ResourceStat {
  readonly name: string;
  readonly bytes: number;
  readonly busyPs: number;
}
export type LinkStat = ResourceStat;

export interface SimResult {
  readonly endPs: Tick;
  readonly events: number;
  /** Periods skipped once the run's state repeated (timing-only runs; sim/steady-state.ts). */
  readonly steady?: SteadyReport;
  /** Completion time of each op (the last reporter to finish it). */
  readonly opEndPs: readonly Tick[];
  readonly hang: HangReport | undefined;
  readonly packets: number;
  readonly links: readonly LinkStat[];
  readonly engines: readonly ResourceStat[];
  readonly hbm: readonly ResourceStat[];
  /** Read simulated memory (HBM) back; `addr` as device `from` addresses it (default 0). */
  read(addr: number, len: number, from?: number): Uint8Array;
  /** Read HBM back a page at a time, without a copy: views (zeros where nothing was written) and where each starts; `fn` returning false stops. */
  each(addr: number, len: number, fn: (bytes: Uint8Array, at: number) => boolean, from?: number): void;
  /** Symbolic runs: the pieces of HBM [addr, addr + len) (offsets from addr) and the seed terms each holds. */
  symbolic(addr: number, len: number, fn: (start: number, end: number, terms: readonly Term[], how: number) => void, from?: number): void;
  /**
   * What the verifier saw go wrong in a run that finished: writes outside every region the image
   * declares, semaphores not back at their initial values, descriptor rings not fully consumed.
   */
  readonly violations: readonly Violation[];
}

export interface Violation {
  readonly kind: "race" | "stray write" | "unbalanced semaphore" | "ring not consumed";
  readonly message: string;
}

/** Violations of one kind kept in full; the rest are counted. */
export const VIOLATIONS_KEPT = 8;

/** After the run: what still waits (a TopSP on a semaphore, a queue with descriptors, a proxy) — a hang — or nothing. */
export function hangReport(devices: ReadonlyMap<number, DeviceModel>, proxies: readonly ProxyQueue[], endPs: Tick, faultNotes: readonly string[]): HangReport | undefined {
  const waits: HangWait[] = [];
  const unfinished: string[] = [];
  const pendingDma: string[] = [];
  for (const m of devices.values()) {
    for (const t of m.topsps.values()) {
      if (!t.done) unfinished.push(t.name);
      for (const w of t.waits()) {
        waits.push({
          device: t.device,
          topsp: t.index,
          channel: w.channel,
          semaphore: `dev${t.device}:topsp${t.index}:sem${w.wait.sema}`,
          role: w.wait.role,
          value: w.value,
          awaited: w.wait.target,
        });
      }
    }
    for (const e of m.engines.values()) for (const p of e.pending()) pendingDma.push(`dev${e.device} dma${e.index} q${p.queue}: ${p.tx} tx / ${p.rx} rx descriptors handed over but not run`);
  }
  for (const p of proxies) {
    const w = p.waiting();
    if (w) pendingDma.push(w);
  }
  return unfinished.length > 0 || waits.length > 0 ? { timePs: endPs, waits, unfinished, pendingDma, faults: [...faultNotes] } : undefined;
}

/** A finished program leaves every semaphore where it started and every ring consumed. */
export function checkBalance(image: ProgramImage, devices: ReadonlyMap<number, DeviceModel>, violation: (kind: Violation["kind"], message: string) => void, seen: ReadonlyMap<Violation["kind"], number>, violations: Violation[]): void {
  // Where each semaphore must end, by block (device/topsp): its final value if the image says one,
  // else its initial value, else 0. (Looked up a block at a time: a key a semaphore was most of a
  // small run's end.)
  const initial = new Map<string, Map<number, number>>();
  for (const di of image.devices) {
    for (const s of [...di.semaphores, ...(di.finalSemaphores ?? [])]) {
      const key = `${di.device}/${s.topsp}`;
      let block = initial.get(key);
      if (!block) initial.set(key, (block = new Map()));
      block.set(s.sema, s.value);
    }
  }
  for (const [d, m] of devices) {
    for (const [ts, b] of m.semas) {
      const block = initial.get(`${d}/${ts}`);
      const values = b.values;
      for (let sema = 0; sema < values.length; sema++) {
        const v = values[sema]!;
        const want = block?.get(sema) ?? 0;
        if (v !== want) violation("unbalanced semaphore", `dev${d}:topsp${ts}:sem${sema} ends at ${v}, not at ${want}`);
      }
    }
    for (const e of m.engines.values()) {
      for (const q of e.queues.values()) {
        if (q.txHead !== q.txCount || q.rxHead !== q.rxCount) violation("ring not consumed", `dev${d} dma${e.index} q${q.id}: ${q.txCount - q.txHead} tx / ${q.rxCount - q.rxHead} rx descriptors never run`);
      }
    }
  }
  for (const [kind, n] of seen) if (n > VIOLATIONS_KEPT) violations.push({ kind, message: `... and ${n - VIOLATIONS_KEPT} more` });
}

export function stat(r: { name: string; bytes: number; busyPs: number }): ResourceStat {
  return { name: r.name, bytes: r.bytes, busyPs: r.busyPs };
}

/** Render a hang report as lines for a user. */
export function formatHang(h: HangReport): string[] {
  const lines = [`hang at t=${(h.timePs / 1e6).toFixed(3)} us: no event pending, ${h.unfinished.length} TopSP(s) unfinished`];
  for (const w of h.waits) lines.push(`  dev${w.device} topsp${w.topsp} ${w.channel === -1 ? "mesh tape" : w.channel === -2 ? "device barrier" : `channel ${w.channel}`} waits on ${w.semaphore} (${w.role}): value ${w.value}, awaiting >= ${w.awaited}`);
  for (const u of h.unfinished) if (!h.waits.some((w) => `dev${w.device} topsp${w.topsp}` === u)) lines.push(`  ${u}: unfinished without a wait`);
  for (const p of h.pendingDma) lines.push(`  ${p}`);
  for (const f of h.faults) lines.push(`  fault: ${f}`);
  return lines;
}
