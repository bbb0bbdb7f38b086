// Steady state costs once: find a period in a timing-only run and skip whole periods of it.
//
// At every mark (a step of one core's first channel) the machine's whole state is read
// (sim/kernel/steady.ts says what that is and why a match is exact). When it equals the state at
// an earlier mark — times from now, ring and stream positions each moved by one stride, counters
// and the counts that only grow (DMA completions, proxy triggers) by one increment — the run
// since that mark is a period. The program's
// bytes ahead are then compared, unit by unit, with the bytes one stride back; for as many whole
// periods as they repeat (and the ones the period read with them), the run would repeat the period
// exactly, so the state is shifted by that many periods at once. What the state cannot say (a
// callback of a mesh tape, a barrier, a fault) is never matched: such runs go the full way.
import type { Kernel, Resource } from "./kernel/kernel.ts";
import { SteadyVisitor, type PeriodStep, type SteadyInput } from "./kernel/steady.ts";
import type { DeviceModel } from "./image-loader.ts";
import type { ProxyQueue } from "./hw/proxy.ts";
import type { SemaphoreBlock } from "./hw/semaphore.ts";

/** What skipping periods did in a run. */
export interface SteadyReport {
  /** Jumps made, periods skipped in all, and the simulated time and events they stood for. */
  readonly jumps: number;
  readonly periods: number;
  readonly skippedPs: number;
  readonly skippedEvents: number;
  /** Events (skipped ones included) when the search stopped looking, having run GIVE_UP_EVENTS more than it skipped; absent: it looked to the end. */
  readonly stoppedAt?: number;
  /** Moments it was given to look at (the first core's first ring channel's steps): 0, it never looked (a schedule on the mesh event tape has none). */
  readonly marks: number;
}

/** The machine as the steady-state search reads it (in an order fixed for the run). */
export interface SteadyParts {
  readonly kernel: Kernel;
  /** The semaphore blocks so far (`addBlock` adds one made later). */
  readonly blocks: SemaphoreBlock[];
  /** Resources not owned by an engine or a core: links, HBM, NICs. */
  readonly resources: readonly Resource[];
  readonly devices: readonly DeviceModel[];
  readonly proxies: readonly ProxyQueue[];
  /** The rest of the run's state that must be the same (ops ended, violations seen). */
  readonly rest: (v: SteadyVisitor) => void;
  readonly maxEvents: number;
  /** Descriptors in the program's rings (a quarter of them may be held for the history: `PIN_UNITS`). */
  readonly descriptors: number;
  /** Tests: skip any repeat of at least this many events (by default, a jump must be worth the looking). */
  readonly minSkip?: number;
}

/**
 * Marks compared back: as many as hold this many values in all (a ring of N ranks comes back to
 * the same state after N chunks: ring8 1 GiB's period is 264 marks of 1,100 values).
 */
const HISTORY_VALUES = 1 << 22;
/**
 * Units the history keeps from being dropped (a streamed ring's descriptors, counted from each of
 * a side's head and tail): 2 Mi, 32 MiB of descriptors (ring8 1 GiB's period keeps 0.75 Mi), or a
 * quarter of the program's descriptors where that is more. A long period needs its units kept
 * from its first mark: the two-node hierarchical all-reduce (64 ranks, 1 GiB, 24.4 M descriptors)
 * repeats 16 slices apart, which keeps between 5 M and 6 M; at 2 Mi it was never found. (A fixed
 * 8 Mi cost the 256 MiB run of the same, which finds no long period, 70 MB and a tenth of its time
 * in fresh memory.)
 */
const PIN_UNITS = 1 << 21;
const PIN_SHARE = 4;
/**
 * Units of an input compared ahead before a jump, then the next round: a streamed program is
 * composed as far as the comparisons read, so this bounds what it holds (ring8 1 GiB compared
 * whole before its one jump held its 130 MB of descriptors at once).
 */
const ROUND_UNITS = 1 << 13;
/** Numbers of state read per event run, at most, before marks are looked at less often (up to every MAX_EVERY-th). */
const READ_PER_EVENT = 4;
/**
 * Events run after which a run that has skipped fewer than it ran stops looking. A period must be
 * seen whole before it is skipped, and some come late and long: a 32-rank kangaring
 * reduce-scatter's ranks move apart chunk group by chunk group, then hold, and at 1 GiB (uint8)
 * repeat 2,258,944 events apart, found at 2.66 M events (at 1 Mi the search stopped first: 7.1-8.9
 * s against 4.5 s). A run that never repeats (the older runtime's two-node flat ring) looks over
 * its first 3 Mi events, a few per cent of its time.
 */
export const GIVE_UP_EVENTS = 3 << 20;
/** Marks looked at without comparing, at most, after fruitless comparisons. */
const MAX_BACKOFF = 64;
const MAX_EVERY = 1024;
/** A jump skips at least this many events, and an eighth of those run so far (shorter repeats run on: the marks they keep may find a longer period). */
const MIN_SKIP_EVENTS = 1 << 14;

interface Snapshot {
  readonly now: number;
  readonly hash: number;
  readonly vals: Float64Array;
  readonly pos: Float64Array;
  readonly inputs: readonly SteadyInput[];
  readonly lo: readonly number[];
  readonly hi: readonly number[];
  readonly counts: Float64Array;
  readonly levels: Float64Array;
  readonly free: readonly boolean[];
  /** Numbers it holds (for the history's budget). */
  readonly size: number;
}

export class SteadyState {
  private readonly parts: SteadyParts;
  private readonly history = new History();
  /** What comparing the program's bytes has found so far, by input and stride (the bytes never change). */
  private readonly verified = new Map<SteadyInput, Map<number, Verified>>();
  private jumps = 0;
  private periods = 0;
  private skippedPs = 0;
  private skippedEvents = 0;
  private stoppedAt: number | undefined;

  /** Units the history may keep (`PIN_UNITS`). */
  private readonly pinUnits: number;

  constructor(parts: SteadyParts) {
    this.parts = parts;
    this.pinUnits = Math.max(PIN_UNITS, Math.floor(parts.descriptors / PIN_SHARE));
    parts.blocks.forEach((b, i) => (b.steadyId = i));
    parts.kernel.onMark = () => this.mark();
    for (const b of parts.blocks) b.startSteady();
  }

  /** A semaphore block made during the run (its first write): read after the others. */
  addBlock(b: SemaphoreBlock): void {
    b.steadyId = this.parts.blocks.length;
    b.startSteady();
    this.parts.blocks.push(b);
  }

  get report(): SteadyReport {
    return { jumps: this.jumps, periods: this.periods, skippedPs: this.skippedPs, skippedEvents: this.skippedEvents, ...(this.stoppedAt !== undefined ? { stoppedAt: this.stoppedAt } : {}), marks: this.marks };
  }

  /**
   * The whole machine, in one order: semaphores first (their levels are what waits drift by), then
   * events, resources, devices, proxies. Of the resources, those used so far, how many first: a run
   * of thousands of devices folded to one pod has links, HBM and NICs for every device, and the
   * others, never used, were two-thirds of what each mark read at 4,096 ranks (a resource never
   * used holds its first state, which no period moves). Returns how many were left unread.
   */
  private visit(v: SteadyVisitor): number {
    const p = this.parts;
    for (const b of p.blocks) b.steady(v);
    p.kernel.steady(v);
    let used = 0;
    for (const r of p.resources) if (r.usedSoFar()) used++;
    v.same(used);
    for (const r of p.resources) if (r.usedSoFar()) r.steady(v);
    for (const m of p.devices) {
      m.memory.steady(v);
      for (const e of m.engines.values()) e.steady(v);
      for (const t of m.topsps.values()) t.steady(v);
    }
    for (const q of p.proxies) q.steady(v);
    p.rest(v);
    return p.resources.length - used;
  }

  /** What the last mark read its values into (the next one reads into it again). */
  private scratch: Float64Array | undefined;

  /** Marks so far, and every `every`-th is looked at; numbers read and events run since the cadence was set. */
  private marks = 0;
  private every = 1;
  private read = 0;
  private since = 0;
  /** Looks at earlier marks of the same state skipped before the next one, and the wait after the next fruitless look. */
  private wait = 0;
  private backoff = 1;

  private mark(): void {
    const k = this.parts.kernel;
    if (this.marks++ % this.every !== 0) return;
    // A run that has run GIVE_UP_EVENTS more events than it has skipped stops looking: the
    // looking would cost more than it saves. (What it has skipped buys more looking: a two-node
    // hierarchical all-reduce repeats 16 slices apart, then one slice apart, the second period
    // found after as many events again.)
    if (this.parts.minSkip === undefined && k.executed - 2 * this.skippedEvents > GIVE_UP_EVENTS) {
      k.onMark = undefined;
      this.stoppedAt = k.executed;
      this.forget();
      return;
    }
    // Reading the state costs about as much per number as the run does per event: when it reads
    // more than READ_PER_EVENT numbers an event, it looks at every other mark of those it did
    // (a period of an even number of marks is still found; the history starts again).
    if (this.read > READ_PER_EVENT * (k.executed - this.since) && this.every < MAX_EVERY) {
      this.every *= 2;
      this.read = 0;
      this.since = k.executed;
      this.forget();
      if ((this.marks - 1) % this.every !== 0) return;
    }
    const now = k.now;
    const v = SteadyVisitor.save(now, this.scratch);
    // (The marks looked at, and how far back they are kept, go by the whole machine's size: an
    // unused resource counts as the two values and two counters it would give. Long periods need
    // the reach: 4,096 ranks repeat 686,080 events apart.)
    const unread = this.visit(v);
    this.scratch = v.buffer;
    this.read += v.valCount + v.levels.length + v.pos.length + 2 * unread;
    if (v.opaque) return;
    // (What says the state's shape — inputs, read extents, which levels drift — is the last mark's
    // most of the time: shared, not kept again.)
    const shape = this.shapeOf(v);
    const snap: Snapshot = { now, hash: hashOf(v.vals), vals: v.vals.slice(), pos: Float64Array.from(v.pos), ...shape, counts: Float64Array.from(v.counts), levels: Float64Array.from(v.levels), size: v.valCount + v.pos.length + v.counts.length + v.levels.length + 4 * unread };
    // Of the earlier marks the state is the same as, the one whose period repeats over the most
    // events ahead; skipped if that is worth it (a short stretch of repeats is left to run, so the
    // marks go on and a longer period can be found).
    let best: Period | undefined;
    let bestPeriods = 0;
    // (After a look that found nothing worth a jump, the next looks wait a while, longer each time.)
    const look = this.wait-- <= 0;
    for (const a of look ? candidates(this.history.sameHash(snap.hash), snap) : []) {
      const p = Period.between(a, snap, this.verified);
      if (!p) continue;
      const n = p.verify(this.limit(p));
      if (n * p.events > bestPeriods * (best?.events ?? 0)) {
        best = p;
        bestPeriods = n;
      }
    }
    const worth = best !== undefined && bestPeriods * best.events >= this.worth();
    if (look && !worth) {
      this.wait = this.backoff;
      this.backoff = Math.min(MAX_BACKOFF, 2 * this.backoff);
    }
    if (worth) {
      this.backoff = 1;
      this.skip(best!, bestPeriods);
      this.forget();
      return;
    }
    this.remember(snap);
  }

  /** Events a jump must skip to be taken. */
  private worth(): number {
    return this.parts.minSkip ?? Math.max(MIN_SKIP_EVENTS, this.parts.kernel.executed / 8);
  }

  /** The periods a jump may skip at once: a round of comparisons, and no further than the run's event limit. */
  private limit(p: Period): number {
    const round = Math.max(1, Math.floor(ROUND_UNITS / p.maxStride));
    return p.events > 0 ? Math.min(round, Math.floor((this.parts.maxEvents - this.parts.kernel.executed) / p.events) - 1) : round;
  }

  /** Skip `periods` periods of `p`, then as many more as its bytes ahead repeat, round by round. */
  private skip(p: Period, periods: number): void {
    // The marks' hold on the inputs is let go: the jump's rounds compare units from each moving
    // input's frontier on, and nothing else reads them, so each round's jump drops the pages its
    // engines skipped and the next round composes into them (held back to the oldest mark, every
    // descriptor of ring8 1 GiB's jump was composed into fresh memory first: 130 MB).
    this.forget();
    p.keepAhead();
    this.kept = p.inputs;
    let n = periods;
    while (n > 0) {
      this.visit(SteadyVisitor.jump(this.parts.kernel.now, { periods: n, step: p.step }));
      this.periods += n;
      this.skippedPs += n * p.step.dt;
      this.skippedEvents += n * p.events;
      const limit = this.limit(p);
      p.advance(n);
      if (n < limit) break;
      n = p.verify(limit);
      p.keepAhead();
    }
    this.jumps++;
  }

  private shape: Pick<Snapshot, "inputs" | "lo" | "hi" | "free"> | undefined;

  private shapeOf(v: SteadyVisitor): Pick<Snapshot, "inputs" | "lo" | "hi" | "free"> {
    const s = this.shape;
    if (s && sameList(s.inputs, v.inputs) && sameList(s.lo, v.lo) && sameList(s.hi, v.hi) && sameList(s.free, v.free)) return s;
    return (this.shape = { inputs: v.inputs, lo: v.lo, hi: v.hi, free: v.free });
  }

  private remember(s: Snapshot): void {
    const h = this.history;
    h.add(s);
    let dropped = false;
    while (h.length > 1 && (h.values > HISTORY_VALUES || pins(h.oldest, s) > this.pinUnits)) {
      h.dropOldest();
      dropped = true;
    }
    // A streamed ring keeps its descriptors from the oldest remembered mark on (they are compared
    // with later ones; positions only grow between jumps, so the oldest mark's are the least).
    if (dropped || h.length === 1) {
      const oldest = h.oldest;
      // (An input's least position: a ring side's head, not its tail.)
      const from = new Map<SteadyInput, number>();
      oldest.inputs.forEach((inp, i) => from.set(inp, Math.min(from.get(inp) ?? Infinity, oldest.pos[i]! - oldest.lo[i]!)));
      for (const [inp, x] of from) inp.keepFrom?.(Math.max(0, x));
      // (An input the oldest mark no longer reads keeps nothing more.)
      for (const inp of this.kept) if (!from.has(inp)) inp.keepFrom?.(Infinity);
      this.kept = [...from.keys()];
    }
  }

  /** Inputs told to keep their units from some position (`remember`). */
  private kept: SteadyInput[] = [];

  private forget(): void {
    for (const inp of this.kept) inp.keepFrom?.(Infinity);
    this.kept = [];
    this.history.clear();
  }
}

/** What a history holds of a mark: its state's hash and the numbers it keeps. */
interface HeldMark {
  readonly hash: number;
  readonly size: number;
}

/**
 * The marks remembered, oldest first, found by their state's hash; `values` counts the numbers
 * they hold (the budget is on it). Cleared, it holds nothing and counts nothing: a history started
 * again after a jump has the whole budget (4,096 ranks' second period, 686,080 events long, was
 * found only once a cleared history stopped counting the numbers of the marks it had let go).
 */
export class History<S extends HeldMark = Snapshot> {
  private marks: S[] = [];
  private readonly byHash = new Map<number, S[]>();
  /** Numbers the marks it holds keep, in all. */
  values = 0;

  get length(): number {
    return this.marks.length;
  }

  get oldest(): S {
    return this.marks[0]!;
  }

  /** The marks held whose state has this hash, oldest first. */
  sameHash(hash: number): readonly S[] {
    return this.byHash.get(hash) ?? [];
  }

  add(s: S): void {
    this.marks.push(s);
    this.values += s.size;
    const list = this.byHash.get(s.hash);
    if (list) list.push(s);
    else this.byHash.set(s.hash, [s]);
  }

  dropOldest(): void {
    const old = this.marks.shift()!;
    this.values -= old.size;
    const l = this.byHash.get(old.hash)!;
    l.splice(l.indexOf(old), 1);
    if (l.length === 0) this.byHash.delete(old.hash);
  }

  clear(): void {
    this.marks = [];
    this.byHash.clear();
    this.values = 0;
  }
}

/**
 * Of the earlier marks whose state is the same as `b`'s, the ones worth a look: the oldest and the
 * latest, and three between (each is a period's comparison of the bytes ahead; a state that stands
 * still for a while equals every mark of the while).
 */
function candidates(list: readonly Snapshot[], b: Snapshot): Snapshot[] {
  const same = list.filter((a) => a.now < b.now && sameValues(a.vals, b.vals));
  if (same.length <= 5) return same;
  const picks = [0, 1, 2, 3, 4].map((k) => same[Math.round((k * (same.length - 1)) / 4)]!);
  return [...new Set(picks)];
}

/** Units of an input found alike with the unit one stride on: [from, upTo), and whether `upTo` is not. */
interface Verified {
  from: number;
  upTo: number;
  failed: boolean;
}

/** Units read alike: an input, its stride a period, and the units [lo, hi) a period reads. */
interface Stride {
  readonly input: SteadyInput;
  readonly d: number;
  lo: number;
  hi: number;
  /** What is known of the input at this stride. */
  known: Verified;
}

/** A period: the run from mark `a` to mark `b`, whose states are the same. */
class Period {
  readonly step: PeriodStep;
  /** Events a period runs (the kernel's count is the first counter: the semaphores before it say levels only). */
  readonly events: number;
  readonly maxStride: number;
  private readonly moving: readonly Stride[];

  private constructor(dt: number, pos: number[], counts: number[], levels: number[], moving: Stride[]) {
    this.step = { dt, pos, counts, levels };
    this.events = counts[0] ?? 0;
    this.moving = moving;
    this.maxStride = Math.max(...moving.map((x) => x.d));
  }

  /** The period from `a` to `b` (states already found the same), if positions and levels move as one. */
  static between(a: Snapshot, b: Snapshot, verified: Map<SteadyInput, Map<number, Verified>>): Period | undefined {
    const dt = b.now - a.now;
    const pos = Array.from(b.pos, (x, i) => x - a.pos[i]!);
    const levels = Array.from(b.levels, (x, i) => x - a.levels[i]!);
    const counts = Array.from(b.counts, (x, i) => x - a.counts[i]!);
    if (dt <= 0 || pos.some((d) => d < 0) || levels.some((d, i) => d !== 0 && !b.free[i])) return undefined;
    // Each input: one stride for all its positions, and the units a period reads.
    const inputs = new Map<SteadyInput, Stride>();
    for (let i = 0; i < pos.length; i++) {
      const input = b.inputs[i]!;
      // (No unit comes before the first.)
      const lo = Math.max(0, a.pos[i]! - a.lo[i]!);
      const hi = b.pos[i]! + b.hi[i]!;
      const seen = inputs.get(input);
      if (!seen) inputs.set(input, { input, d: pos[i]!, lo, hi, known: { from: lo, upTo: lo, failed: false } });
      else if (seen.d !== pos[i]) return undefined;
      else {
        seen.lo = Math.min(seen.lo, lo);
        seen.hi = Math.max(seen.hi, hi);
      }
    }
    const moving = [...inputs.values()].filter((x) => x.d > 0);
    // What earlier comparisons found at the same stride, where it covers this period's first unit.
    for (const x of moving) {
      let byStride = verified.get(x.input);
      if (!byStride) verified.set(x.input, (byStride = new Map()));
      const k = byStride.get(x.d);
      if (k && k.from <= x.lo && x.lo <= k.upTo) x.known = k;
      else {
        x.known = { from: x.lo, upTo: x.lo, failed: false };
        byStride.set(x.d, x.known);
      }
    }
    // A state that comes back without reading anything new repeats for ever: the full run says so (SIM1003).
    return moving.length === 0 ? undefined : new Period(dt, pos, counts, levels, moving);
  }

  /**
   * How many periods from now (up to `limit`) repeat the last exactly: each reads units one
   * stride on from the last's, alike with them. (Period j reads [lo + jd, hi + (j - 1)d) of an
   * input; the units from lo on are checked alike with the unit a stride on.)
   */
  verify(limit: number): number {
    let periods = limit;
    for (const x of this.moving) {
      const need = x.hi + (periods - 1) * x.d;
      const k = x.known;
      let y = k.upTo;
      if (!k.failed) {
        if (x.input.alikeUpTo) y = x.input.alikeUpTo(y, x.d, need);
        else while (y < need && y + x.d < x.input.count && x.input.alike(y, y + x.d)) y++;
        k.upTo = y;
        k.failed = y < need;
      }
      periods = Math.min(periods, y >= x.hi ? Math.floor((y - x.hi) / x.d) + 1 : 0);
    }
    return Math.max(0, periods);
  }

  /** The inputs the period reads that move. */
  get inputs(): SteadyInput[] {
    return this.moving.map((x) => x.input);
  }

  /** Each moving input keeps its units from where the next comparison starts (its frontier). */
  keepAhead(): void {
    for (const x of this.moving) x.input.keepFrom?.(x.known.upTo);
  }

  /** `n` periods were skipped: the last period now ends `n` strides on. */
  advance(n: number): void {
    for (const x of this.moving) x.hi += n * x.d;
  }
}

/** Units of streamed inputs that remembering marks from `oldest` to `latest` keeps (from each position). */
function pins(oldest: Snapshot, latest: Snapshot): number {
  if (oldest.pos.length !== latest.pos.length) return 0;
  let n = 0;
  for (let i = 0; i < latest.pos.length; i++) if (latest.inputs[i]!.keepFrom) n += Math.max(0, latest.pos[i]! - oldest.pos[i]! + oldest.lo[i]!);
  return n;
}

function sameList<T>(a: readonly T[], b: readonly T[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function sameValues(a: Float64Array, b: Float64Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** A 32-bit hash of integer values (each as its two 32-bit halves). */
function hashOf(vals: Float64Array): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < vals.length; i++) {
    const x = vals[i]!;
    h = Math.imul(h ^ (x | 0), 0x01000193);
    h = Math.imul(h ^ Math.floor(x / 4294967296), 0x01000193);
  }
  return h >>> 0;
}

