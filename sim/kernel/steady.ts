// Steady state: the machine's state, read and shifted by one visitor (sim/steady-state.ts drives it).
//
// A big collective repeats one step pattern many times. When the whole machine's state at one
// moment equals its state some steps earlier — every pending event, booking, queue, core and
// semaphore alike, with times taken from `now` and ring positions from where they were — and the
// program's bytes ahead repeat with the same stride, then the run from here repeats the run since
// then, period after period, to the picosecond. The run skips whole periods by shifting the state:
// times by the period's length, positions by its stride, counters by what a period adds.
//
// Every component says its state through the same visitor in two modes: `save` reads it into
// vectors, `jump` writes it shifted. One traversal for both keeps them in step. What a component
// cannot say (a callback the visitor does not know) makes the state opaque: no period is found.

/** An input a position indexes: a ring side's descriptors, a slot stream's steps, a proxy's entries. */
export interface SteadyInput {
  /** Units in the input (positions beyond are never read). */
  readonly count: number;
  /** Units `x` and `y` act alike when read (a descriptor of the same shape, a step of the same bytes). */
  alike(x: number, y: number): boolean;
  /**
   * The first unit from `y` on (below `upTo`, and with unit + `d` below `count`) that is not alike
   * the unit `d` on: what calling `alike` unit by unit finds, a page at a time.
   */
  alikeUpTo?(y: number, d: number, upTo: number): number;
  /** Units from `x` on may be compared (a streamed ring keeps its pages from there): Infinity = none. */
  keepFrom?(x: number): void;
}

/** A pending callback whose effect is stated by what it holds (a wake-up, a proxy's landing). */
export interface SteadyTag {
  steady(v: SteadyVisitor): void;
}

/**
 * Callbacks whose effect depends only on state the visitor reads (an engine's `freed`, a channel's
 * `resume`) carry an id; those whose effect what they hold states (a wake-up) carry a tag. (Kept
 * on the callback itself: a weak map of every wake-up's callback costs the garbage collector more
 * than the run.)
 */
const ID = Symbol("steady id");
const TAG = Symbol("steady tag");
interface Marked {
  [ID]?: number;
  [TAG]?: SteadyTag;
}
let stableIds = 0;

/** Declare `fn` a callback whose effect is stated by its owner's state. */
export function steadyStable<F extends object>(fn: F): F {
  (fn as Marked)[ID] = ++stableIds;
  return fn;
}

/** Declare `fn` a callback whose effect `tag` states. */
export function steadyTag<F extends object>(fn: F, tag: SteadyTag): F {
  (fn as Marked)[TAG] = tag;
  return fn;
}

export const Mode = { SAVE: 0, JUMP: 1 } as const;
type Mode = (typeof Mode)[keyof typeof Mode];

/** What one period moves: time by `dt` picoseconds, and positions, counters and levels by these. */
export interface PeriodStep {
  readonly dt: number;
  readonly pos: readonly number[];
  readonly counts: readonly number[];
  readonly levels: readonly number[];
}

/** The shift a jump applies: `periods` periods of `step`. */
export interface Shift {
  readonly periods: number;
  readonly step: PeriodStep;
}

export class SteadyVisitor {
  readonly mode: Mode;
  /** The time the state is read at (save) or the time before the jump (jump). */
  readonly now: number;
  // Save: what must be equal (in `buf`, from 0 to `nv`); positions with their inputs and read
  // extents; counters; levels.
  private buf: Float64Array;
  private nv = 0;
  readonly pos: number[] = [];
  readonly inputs: SteadyInput[] = [];
  /** Units below (lo) and from (hi) each position that a period may read. */
  readonly lo: number[] = [];
  readonly hi: number[] = [];
  readonly counts: number[] = [];
  readonly levels: number[] = [];
  /** Levels that may drift from period to period (counts that only grow: proxy triggers, DMA completions). */
  readonly free: boolean[] = [];
  /** Something was met that the visitor cannot state. */
  opaque = false;
  private readonly shift: Shift | undefined;
  private ip = 0;
  private ic = 0;
  private il = 0;

  private constructor(mode: Mode, now: number, shift?: Shift, buf?: Float64Array) {
    this.mode = mode;
    this.now = now;
    this.shift = shift;
    this.buf = buf ?? new Float64Array(mode === Mode.SAVE ? 1024 : 0);
  }

  /**
   * A visitor that reads the state at `now`, its values into `scratch` where given (a buffer an
   * earlier one grew, `buffer`: a mark reads thousands of values, and pushing them into a fresh
   * array at every mark was most of what the search allocated).
   */
  static save(now: number, scratch?: Float64Array): SteadyVisitor {
    return new SteadyVisitor(Mode.SAVE, now, undefined, scratch);
  }

  static jump(now: number, shift: Shift): SteadyVisitor {
    return new SteadyVisitor(Mode.JUMP, now, shift);
  }

  /** The values that must be the same, as read (a view of the buffer: copy what is kept). */
  get vals(): Float64Array {
    return this.buf.subarray(0, this.nv);
  }

  /** Values read so far. */
  get valCount(): number {
    return this.nv;
  }

  /** The buffer the values were read into (for the next save visitor). */
  get buffer(): Float64Array {
    return this.buf;
  }

  /** Value `i`, read already, is `x` after all (a count written ahead of what it counts). */
  setVal(i: number, x: number): void {
    this.buf[i] = x;
  }

  /** A value that must be the same. */
  same(x: number): void {
    if (this.mode !== Mode.SAVE) return;
    if (this.nv === this.buf.length) this.growVals();
    this.buf[this.nv++] = x;
  }

  private growVals(): void {
    const b = new Float64Array(this.buf.length * 2);
    b.set(this.buf);
    this.buf = b;
  }

  /** A time: the same from `now` (a time already past counts as now), shifted by the jump. */
  time(t: number): number {
    if (this.mode === Mode.SAVE) {
      this.same(t > this.now ? t - this.now : 0);
      return t;
    }
    return t + this.shift!.periods * this.shift!.step.dt;
  }

  /** A position in `input`; a period may read its units from `x - lo` to `x + hi`. */
  position(x: number, input: SteadyInput, lo = 0, hi = 0): number {
    if (this.mode === Mode.SAVE) {
      this.pos.push(x);
      this.inputs.push(input);
      this.lo.push(lo);
      this.hi.push(hi);
      return x;
    }
    return moved(x, this.shift!.periods, this.shift!.step.pos[this.ip++]!);
  }

  /** A counter (events, packets, busy time): grows by what a period adds. */
  count(c: number): number {
    if (this.mode === Mode.SAVE) {
      this.counts.push(c);
      return c;
    }
    return moved(c, this.shift!.periods, this.shift!.step.counts[this.ic++]!);
  }

  /** A level that must come back each period, or, `free`, may drift by a fixed step (its index is returned). */
  level(x: number, free: boolean): number {
    if (this.mode === Mode.SAVE) {
      this.levels.push(x);
      this.free.push(free);
      return x;
    }
    return moved(x, this.shift!.periods, this.shift!.step.levels[this.il++]!);
  }

  /** The index the next `level` call takes. */
  get levelIndex(): number {
    return this.mode === Mode.SAVE ? this.levels.length : this.il;
  }

  /** `x`, a threshold on level `i`, shifted with it (jump); nothing to save (the caller saves it relative). */
  drift(i: number, x: number): number {
    return this.mode === Mode.SAVE ? x : moved(x, this.shift!.periods, this.shift!.step.levels[i]!);
  }

  /** A callback: a declared one by its id, a tagged one by what its tag says, any other makes the state opaque. */
  fn(f: object): void {
    const id = (f as Marked)[ID];
    if (id !== undefined) return this.same(id);
    const tag = (f as Marked)[TAG];
    if (tag) {
      this.same(-1);
      tag.steady(this);
      return;
    }
    this.opaque = true;
  }

  /** A byte string that must be the same. */
  bytes(b: Uint8Array | undefined): void {
    if (this.mode !== Mode.SAVE) return;
    if (!b) return this.same(-1);
    this.same(b.length);
    for (let i = 0; i < b.length; i++) this.same(b[i]!);
  }
}

/** `x` moved by `n` steps of `d`; unchanged when a step is nothing (a counter at -0, a time's wide zero, stays -0: the same value, printed alike). */
function moved(x: number, n: number, d: number): number {
  return d === 0 ? x : x + n * d;
}
