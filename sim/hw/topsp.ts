// The TopSP sync core as an explicit state machine: walk the spad_ctrl entries, and for a RING
// entry run each channel named in channel_list through its slot-scratchpad steps (wait on
// semaphores, then advance the DMA queues through the APB broadcast doorbells).
import { EncPattern } from "../../src/ir/enums.ts";
import { SimError } from "../../src/ir/errors.ts";
import type { Tick } from "../../src/ir/time.ts";
import { decodeAddress, describeAddress } from "../../src/encd/address.ts";
import { decodeSpadCtrlEntry, SPAD_CTRL_ENTRY_BYTES, type DecodedSpadCtrlEntry } from "../../src/encd/ccop.ts";
import { decodeChannelConfig, type ChannelConfig } from "../../src/encd/channel.ts";
import { decodeSlotEntry, SLOT_ENTRY_BYTES, StepFlag, type SlotEntry } from "../../src/encd/slot.ts";
import { MESH_SLOT, type TopspImage } from "../../src/encd/image.ts";
import { decodeMeshEvent, MESH_EVENT_BYTES, MeshEventType } from "../../src/encd/mesh-event.ts";
import { BARRIER_CONFIG_BYTES, decodeBarrierConfig, type BarrierConfig } from "../../src/encd/barrier.ts";
import { Kernel, Prio, Resource } from "../kernel/kernel.ts";
import { SemaphoreBlock } from "./semaphore.ts";
import type { TraceSink } from "../trace.ts";
import { ThreadClock, type Clock } from "../verify/races.ts";
import { Mode, steadyStable, type SteadyInput, type SteadyVisitor } from "../kernel/steady.ts";

export interface TopspHost {
  readonly kernel: Kernel;
  readonly trace: TraceSink | undefined;
  /** An MMIO write by this core (tail-pointer doorbells, broadcast by `mask`). */
  mmio(device: number, addr: number, value: number, mask: number, clock: Clock | undefined): void;
  /** A reporter TopSP finished op `op`. */
  opDone(op: number, device: number, topsp: number, t: Tick): void;
  /** A core's signal store to a semaphore window, local or on another device. */
  signal(device: number, addr: number, value: number, clock: Clock | undefined): void;
  /** Race detection is on: the core keeps a clock. */
  readonly races: boolean;
}

export interface TopspTiming {
  readonly entryDecodePs: number;
  readonly stepIssuePs: number;
}

/** What a waiting channel is waiting for (hang reports). */
export interface WaitState {
  readonly sema: number;
  readonly role: string;
  readonly target: number;
}

/** The runtime scoreboard of one channel (the 16-byte firmware record, plus the slot cursor). */
class ChannelRun {
  readonly cfg: ChannelConfig;
  readonly recv: number;
  readonly send: number;
  readonly compl: number;
  cursor = 0;
  repeatLeft = 0;
  entry: SlotEntry | undefined;
  complTarget = 0;
  steps = 0;
  waiting: WaitState | undefined;
  /**
   * The wait in progress (a channel waits for one thing at a time): semaphores [base, base + n)
   * each to reach `target`, decremented by `dec`, the `f`-th now, since `since`; then `next`.
   * Kept here, with the callbacks made once, so a step allocates nothing.
   */
  readonly wait = { sema: 0, role: "", target: 0 };
  base = 0;
  n = 0;
  dec = 0;
  f = 0;
  since: Tick = 0;
  next: Next = Next.RECV;
  resume: () => void = () => {};
  issued: () => void = () => {};
  constructor(cfg: ChannelConfig, recv: number, send: number, compl: number) {
    this.cfg = cfg;
    this.recv = recv;
    this.send = send;
    this.compl = compl;
  }
}

/**
 * Steady state: a slot stream as the steps it runs, each entry's repeats written out (step x is
 * entry `entryOf(x)`'s); steps act alike when their entries are the same but for the repeat count
 * and both are, or both are not, their entry's last.
 */
class SlotSteps implements SteadyInput {
  private readonly spad: Uint8Array;
  /** starts[i]: the first step of entry i; starts[n] = count. */
  private readonly starts: number[] = [0];
  readonly count: number;
  private last = 0;
  constructor(spad: Uint8Array) {
    this.spad = spad;
    const n = Math.floor(spad.length / SLOT_ENTRY_BYTES);
    for (let i = 0; i < n; i++) {
      const repeat = spad[i * SLOT_ENTRY_BYTES + 4]! | (spad[i * SLOT_ENTRY_BYTES + 5]! << 8);
      // (A step with repeat 0 is an error where it is read: no step of it or after it is alike.)
      if (repeat === 0) break;
      this.starts.push(this.starts[i]! + repeat);
    }
    this.count = this.starts[this.starts.length - 1]!;
  }

  /** The entry step `x` belongs to. */
  entryOf(x: number): number {
    const s = this.starts;
    if (!(x >= s[this.last]! && x < s[this.last + 1]!)) {
      let lo = 0;
      let hi = s.length - 2;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (s[mid]! <= x) lo = mid;
        else hi = mid - 1;
      }
      this.last = lo;
    }
    return this.last;
  }

  /** The step after entry i's last. */
  end(i: number): number {
    return this.starts[i + 1]!;
  }

  /** Steps rung by a channel whose cursor is past entry `cursor / 8 - 1` with `repeatLeft` of its steps to go. */
  rung(cursor: number, repeatLeft: number): number {
    const held = cursor / SLOT_ENTRY_BYTES - 1;
    if (held < 0) return 0;
    if (held + 1 >= this.starts.length) return -1;
    return this.starts[held + 1]! - repeatLeft;
  }

  alike(x: number, y: number): boolean {
    const i = this.entryOf(x);
    const xLast = x === this.starts[i + 1]! - 1;
    const j = this.entryOf(y);
    if (xLast !== (y === this.starts[j + 1]! - 1)) return false;
    const a = i * SLOT_ENTRY_BYTES;
    const b = j * SLOT_ENTRY_BYTES;
    for (let k = 0; k < SLOT_ENTRY_BYTES; k++) if (k !== 4 && k !== 5 && this.spad[a + k] !== this.spad[b + k]) return false;
    return true;
  }
}

/** What a channel does once its wait is over. */
const Next = { RECV: 0, CREDIT: 1, ISSUE: 2, DONE: 3 } as const;
type Next = (typeof Next)[keyof typeof Next];

export class Topsp {
  readonly device: number;
  readonly index: number;
  readonly semas: SemaphoreBlock;
  readonly core: Resource;
  readonly entries: DecodedSpadCtrlEntry[];
  /** The device barrier after each entry (decoded once, like the entries). */
  private readonly barriers: BarrierConfig[];
  readonly channels = new Map<number, ChannelRun>();
  /** Index of the op entry being run; entries.length when done. */
  current = -1;
  private activeChannels = 0;
  /** Mesh runtime context: event_index, and the cursor into the mesh step stream. */
  private eventIndex = 0;
  private meshCursor = 0;
  private meshRepeatLeft = 0;
  private meshEntry: SlotEntry | undefined;
  private meshWaiting: WaitState | undefined;
  private barrierWaiting: WaitState | undefined;
  /** Reporter entries finished so far: the n-th one completes the program's n-th op. */
  private reported = 0;
  private entryStart: Tick = 0;
  private entryChannels: readonly number[] = [];
  private readonly image: TopspImage;
  private readonly host: TopspHost;
  private readonly timing: TopspTiming;
  /** Race detection: what this core's waits have acquired, handed to its doorbells and signals. */
  private readonly clock: ThreadClock | undefined;

  constructor(host: TopspHost, device: number, image: TopspImage, semas: SemaphoreBlock, timing: TopspTiming) {
    this.host = host;
    this.device = device;
    this.index = image.index;
    this.image = image;
    this.semas = semas;
    this.timing = timing;
    this.clock = host.races ? new ThreadClock() : undefined;
    this.core = new Resource(`dev${device}.topsp${image.index}`, 0);
    if (image.ctrlSpad.length !== image.opNum * SPAD_CTRL_ENTRY_BYTES) {
      throw new SimError("SIM1401", `dev${device} topsp${image.index}: ctrl spad holds ${image.ctrlSpad.length} bytes for op_num ${image.opNum}`, { value: image.ctrlSpad.length });
    }
    this.entries = Array.from({ length: image.opNum }, (_, i) => decodeSpadCtrlEntry(image.ctrlSpad, i * SPAD_CTRL_ENTRY_BYTES));
    if (image.barrierConfig.length !== image.opNum * BARRIER_CONFIG_BYTES) {
      throw new SimError("SIM1415", `dev${device} topsp${image.index}: barrier configs hold ${image.barrierConfig.length} bytes for op_num ${image.opNum} (${BARRIER_CONFIG_BYTES} each)`, { value: image.barrierConfig.length });
    }
    this.barriers = Array.from({ length: image.opNum }, (_, i) => decodeBarrierConfig(image.barrierConfig, i));
  }

  get name(): string {
    return `dev${this.device} topsp${this.index}`;
  }

  get done(): boolean {
    return this.current >= this.entries.length;
  }

  /** Host trigger: start at entry 0. */
  start(): void {
    if (this.entries.length === 0) {
      this.current = 0;
      return;
    }
    this.fetch(0);
  }

  /** Serialise `cost` of core time; `then` runs when it is spent. */
  private busy(cost: number, then: () => void): void {
    const k = this.host.kernel;
    const t = Math.max(k.now, this.core.freeAt) + cost;
    this.core.busyPs += cost;
    this.core.freeAt = t;
    k.at(t, Prio.ISSUE, then);
  }

  private fetch(i: number): void {
    this.current = i;
    this.busy(this.timing.entryDecodePs, () => this.runEntry(i));
  }

  private localSema(addr: number, what: string): number {
    const a = decodeAddress(addr, this.device);
    if (a.kind !== "sema" || a.device !== this.device || a.topsp !== this.index || a.window !== "read") {
      throw new SimError("SIM1402", `${this.name}: ${what} address ${describeAddress(addr, this.device)} is not a read window of this TopSP`, { value: addr });
    }
    return a.sema;
  }

  private runEntry(i: number): void {
    const e = this.entries[i]!;
    if (!e.ccOp) throw new SimError("SIM1403", `${this.name} op ${i}: header.cc_op is 0`, { value: i });
    if (e.algoType === EncPattern.MESH) {
      this.entryStart = this.host.kernel.now;
      this.entryChannels = [];
      this.meshStep(e);
      return;
    }
    if (e.algoType !== EncPattern.RING) throw new SimError("SIM1404", `${this.name} op ${i}: algo_type ${e.algoType} is not a device pattern this model runs (RING 0, MESH 1)`, { value: e.algoType });
    const ids: number[] = [];
    for (let c = 0; c < 32; c++) if ((e.channelList >>> c) & 1) ids.push(c);
    this.activeChannels = ids.length;
    this.entryStart = this.host.kernel.now;
    this.entryChannels = ids;
    // An empty channel_list: this TopSP has nothing to run in this op.
    if (ids.length === 0) return this.entryDone();
    for (const c of ids) {
      let run = this.channels.get(c);
      if (!run) {
        const cfg = decodeChannelConfig(this.image.ringConfig, c);
        if (cfg.channelId !== c) throw new SimError("SIM1406", `${this.name}: ring_channels[${c}] has channel_id ${cfg.channelId}`, { value: cfg.channelId });
        if (cfg.foldN === 0 || cfg.prev.foldN === 0 || cfg.next.foldN === 0) throw new SimError("SIM1407", `${this.name} channel ${c}: fold_n is 0`, { value: c });
        if (!this.image.slotSpad[cfg.spadSlotIdx]) throw new SimError("SIM1408", `${this.name} channel ${c}: no slot scratchpad ${cfg.spadSlotIdx}`, { value: cfg.spadSlotIdx });
        run = new ChannelRun(cfg, this.localSema(cfg.recvSema, "recv_sema"), this.localSema(cfg.sendSema, "send_sema"), this.localSema(cfg.dmaComplSema, "dma_compl_sema"));
        const r = run;
        r.resume = steadyStable(() => this.waited(r));
        r.issued = steadyStable(() => this.rang(r));
        this.firstRun ??= r;
        for (let f = 0; f < cfg.prev.foldN; f++) this.semas.coreWaited.add(r.recv + f);
        for (let f = 0; f < cfg.next.foldN; f++) this.semas.coreWaited.add(r.send + f);
        for (let f = 0; f < cfg.foldN; f++) this.semas.countWaited.add(r.compl + f);
        this.channels.set(c, run);
      }
      this.step(run);
    }
  }

  /**
   * Wait until each of `n` consecutive semaphores from `base` reaches `target`, decrementing each by
   * `dec`, then go on to `next`. The wait's state lives on the channel (see ChannelRun.wait).
   */
  private waitAll(run: ChannelRun, base: number, n: number, role: string, target: number, dec: number, next: Next): void {
    run.base = base;
    run.n = n;
    run.wait.role = role;
    run.wait.target = target;
    run.dec = dec;
    run.next = next;
    run.f = 0;
    this.waitNext(run);
  }

  /** The channel's wait, from semaphore `run.f` on. */
  private waitNext(run: ChannelRun): void {
    if (run.f === run.n) {
      run.waiting = undefined;
      this.proceed(run);
      return;
    }
    run.wait.sema = run.base + run.f;
    run.waiting = run.wait;
    run.since = this.host.kernel.now;
    this.semas.waitGe(run.wait.sema, run.wait.target, run.resume);
  }

  /** One semaphore of the channel's wait has reached its target. */
  private waited(run: ChannelRun): void {
    const sema = run.wait.sema;
    this.clock?.acquire(this.semas.published(sema));
    const now = this.host.kernel.now;
    if (now > run.since) this.host.trace?.wait(this.device, this.index, run.cfg.channelId, sema, run.wait.role, run.wait.target, run.since, now);
    if (run.dec > 0) this.semas.write(sema, "dec", run.dec);
    run.f++;
    this.waitNext(run);
  }

  private proceed(run: ChannelRun): void {
    switch (run.next) {
      case Next.RECV:
        return this.waitRecv(run);
      case Next.CREDIT:
        return this.waitCredit(run);
      case Next.ISSUE:
        return this.issue(run);
      case Next.DONE:
        return this.channelDone();
    }
  }

  /** Run the channel's next step: its waits first (credit drain, receive count, send credit), then the doorbells. */
  private step(run: ChannelRun): void {
    if (run.repeatLeft === 0) {
      const spad = this.image.slotSpad[run.cfg.spadSlotIdx]!;
      if (run.cursor + SLOT_ENTRY_BYTES > spad.length) throw new SimError("SIM1409", `${this.name} channel ${run.cfg.channelId}: slot stream ends without LAST_SYNC`, { value: run.cursor });
      run.entry = decodeSlotEntry(spad, run.cursor);
      run.cursor += SLOT_ENTRY_BYTES;
      run.repeatLeft = run.entry.repeat;
      if (run.repeatLeft === 0) throw new SimError("SIM1410", `${this.name} channel ${run.cfg.channelId}: step with repeat 0`, { value: run.cursor });
    }
    const e = run.entry!;
    if (e.flags & StepFlag.DRAIN_CREDIT) this.waitAll(run, run.send, run.cfg.next.foldN, "credit drain", e.drainTarget, 0, Next.RECV);
    else this.waitRecv(run);
  }

  private waitRecv(run: ChannelRun): void {
    if (run.entry!.flags & StepFlag.WAIT_RECV) this.waitAll(run, run.recv, run.cfg.prev.foldN, "recv count", 1, 1, Next.CREDIT);
    else this.waitCredit(run);
  }

  private waitCredit(run: ChannelRun): void {
    if (run.entry!.flags & StepFlag.WAIT_CREDIT) this.waitAll(run, run.send, run.cfg.next.foldN, "send credit", 1, 1, Next.ISSUE);
    else this.issue(run);
  }

  private issue(run: ChannelRun): void {
    this.busy(this.timing.stepIssuePs, run.issued);
  }

  /** The step's doorbells, once the core has issued it; then the next step, or the completion wait. */
  private rang(run: ChannelRun): void {
    const e = run.entry!;
    if (e.s2m > 0) this.host.mmio(this.device, run.cfg.bcastS2mTail, e.s2m, run.cfg.bcastMask, this.clock?.snapshot());
    if (e.m2s > 0) this.host.mmio(this.device, run.cfg.bcastM2sTail, e.m2s, run.cfg.bcastMask, this.clock?.snapshot());
    run.repeatLeft--;
    run.steps++;
    if (run === this.firstRun && this.marks) this.host.kernel.marked = true;
    if (e.flags & StepFlag.LAST_SYNC) {
      if (run.repeatLeft !== 0) throw new SimError("SIM1411", `${this.name} channel ${run.cfg.channelId}: LAST_SYNC step with repeat ${e.repeat}`, { value: e.repeat });
      run.complTarget += 1;
      this.waitAll(run, run.compl, run.cfg.foldN, "dma completion", run.complTarget, 0, Next.DONE);
    } else {
      this.step(run);
    }
  }

  /** The next step of the mesh step stream: the counts one DMA leg hands to its queues. */
  private meshCounts(): SlotEntry {
    if (this.meshRepeatLeft === 0) {
      const spad = this.image.slotSpad[MESH_SLOT];
      if (!spad || this.meshCursor + SLOT_ENTRY_BYTES > spad.length) throw new SimError("SIM1412", `${this.name}: a mesh DMA leg has no step left in slot ${MESH_SLOT}`, { value: this.meshCursor });
      this.meshEntry = decodeSlotEntry(spad, this.meshCursor);
      this.meshCursor += SLOT_ENTRY_BYTES;
      this.meshRepeatLeft = this.meshEntry.repeat;
    }
    this.meshRepeatLeft--;
    return this.meshEntry!;
  }

  /**
   * Step the mesh tape from event_index: wait (event_wait_sema >= wait_val << sema_shift_offset,
   * consumed), fire the DMA legs, signal the direct triggers with 1 << sema_shift_offset, advance;
   * the op ends at its FUNCTION_BARRIER_LAST_COLL event.
   */
  private meshStep(entry: DecodedSpadCtrlEntry): void {
    const cap = this.image.meshConfig.length / MESH_EVENT_BYTES;
    if (this.eventIndex >= cap) throw new SimError("SIM1413", `${this.name}: the mesh tape ends (${cap} events) before FUNCTION_BARRIER_LAST_COLL`, { value: this.eventIndex });
    const ev = decodeMeshEvent(this.image.meshConfig, this.eventIndex);
    const shift = entry.semaShiftOffset & 31;
    const fire = this.meshFire(entry, ev, shift);
    if (!ev.waitEvent) return fire();
    const sema = this.localSema(ev.waitSema, `mesh event ${this.eventIndex} wait`);
    const target = ev.waitVal * 2 ** shift;
    const since = this.host.kernel.now;
    this.meshWaiting = { sema, role: `mesh event ${this.eventIndex}`, target };
    this.semas.waitGe(sema, target, () => {
      this.clock?.acquire(this.semas.published(sema));
      this.meshWaiting = undefined;
      const now = this.host.kernel.now;
      if (now > since) this.host.trace?.wait(this.device, this.index, -1, sema, `mesh event ${this.eventIndex}`, target, since, now);
      this.semas.write(sema, "dec", target);
      fire();
    });
  }

  /**
   * A mesh event's firing, once its wait is met: its DMA legs and direct triggers, then the next
   * event. (Made here: a closure held in a named const is named at each making where the loader
   * keeps names, tsx.)
   */
  private meshFire(entry: DecodedSpadCtrlEntry, ev: ReturnType<typeof decodeMeshEvent>, shift: number): () => void {
    return () =>
      this.busy(this.timing.stepIssuePs, () => {
        if (ev.dmaTrigger) {
          for (const leg of ev.legs) {
            if (leg.mask === 0) continue;
            const c = this.meshCounts();
            if (c.s2m > 0) this.host.mmio(this.device, leg.s2mTail, c.s2m, leg.mask, this.clock?.snapshot());
            if (c.m2s > 0) this.host.mmio(this.device, leg.m2sTail, c.m2s, leg.mask, this.clock?.snapshot());
          }
        }
        if (ev.directTriggerOn) for (const a of ev.directTrigger) if (a !== 0) this.host.signal(this.device, a, 2 ** shift, this.clock?.snapshot());
        this.eventIndex++;
        if (ev.eventType === MeshEventType.FUNCTION_BARRIER_LAST_COLL) this.entryDone();
        else this.meshStep(entry);
      });
  }

  private channelDone(): void {
    if (--this.activeChannels > 0) return;
    this.entryDone();
  }

  private entryDone(): void {
    const i = this.current;
    const e = this.entries[i]!;
    this.host.trace?.entry(this.device, this.index, i, this.entryChannels, this.entryStart, this.host.kernel.now);
    if (e.reporter) {
      const k = this.reported++;
      this.host.opDone(this.image.reportOps?.[k] ?? k, this.device, this.index, this.host.kernel.now);
    }
    const next = (): void => {
      if (e.triggerNext && i + 1 < this.entries.length) this.fetch(i + 1);
      else this.current = this.entries.length;
    };
    const barrier = this.barriers[i]!;
    if (barrier.execute) this.barrierStep(barrier, 0, next);
    else next();
  }

  /**
   * Device barrier step k: ARRIVE (advance the barrier queue by m2s_val / s2m_val: its descriptors
   * increment the peers' semaphores), then WAIT on each non-zero barrier_sema; after the last step
   * the DMA drain on dma_sync_sema.
   */
  private barrierStep(b: BarrierConfig, k: number, then: () => void): void {
    if (k === b.steps.length) {
      const syncs = b.dmaSyncSemas.filter((a) => a !== 0).map((a) => ({ sema: a, target: b.dmaSyncValue }));
      return this.barrierWait(syncs, 0, "barrier dma drain", then);
    }
    const s = b.steps[k]!;
    const waits = (): void => this.barrierWait(s.waits.filter((w) => w.sema !== 0), 0, `barrier step ${k}`, () => this.barrierStep(b, k + 1, then));
    if (s.m2sVal === 0 && s.s2mVal === 0) return waits();
    this.busy(this.timing.stepIssuePs, () => {
      if (s.s2mVal > 0) this.host.mmio(this.device, b.s2mTail, s.s2mVal, b.mask, this.clock?.snapshot());
      if (s.m2sVal > 0) this.host.mmio(this.device, b.m2sTail, s.m2sVal, b.mask, this.clock?.snapshot());
      waits();
    });
  }

  private barrierWait(waits: readonly { sema: number; target: number }[], i: number, role: string, then: () => void): void {
    if (i === waits.length) {
      this.barrierWaiting = undefined;
      return then();
    }
    const w = waits[i]!;
    const sema = this.localSema(w.sema, role);
    const since = this.host.kernel.now;
    this.barrierWaiting = { sema, role, target: w.target };
    this.semas.waitGe(sema, w.target, () => {
      this.clock?.acquire(this.semas.published(sema));
      const now = this.host.kernel.now;
      if (now > since) this.host.trace?.wait(this.device, this.index, -2, sema, role, w.target, since, now);
      this.barrierWait(waits, i + 1, role, then);
    });
  }

  /** Steady state: the first channel's steps mark the moments the machine's state is compared (sim/steady-state.ts). */
  marks = false;
  private firstRun: ChannelRun | undefined;
  /** Steady state: each slot stream as an input of steps, its repeated entries written out. */
  private readonly slotInputs = new Map<number, SlotSteps>();

  private slotInput(slot: number): SlotSteps {
    let input = this.slotInputs.get(slot);
    if (!input) {
      input = new SlotSteps(this.image.slotSpad[slot]!);
      this.slotInputs.set(slot, input);
    }
    return input;
  }

  /**
   * Steady state: the entry being run, the core's bookings, and each channel (its place in its slot
   * stream, the step it holds, its wait). A mesh tape's or barrier's progress is said as is: their
   * callbacks are not stated, so a run in one of them is never found periodic.
   */
  steady(v: SteadyVisitor): void {
    v.same(this.current);
    v.same(this.activeChannels);
    v.same(this.eventIndex);
    v.same(this.meshCursor);
    v.same(this.meshRepeatLeft);
    v.same(this.meshWaiting ? 1 : 0);
    v.same(this.barrierWaiting ? 1 : 0);
    v.same(this.reported);
    this.entryStart = v.time(this.entryStart);
    this.core.steady(v);
    v.same(this.channels.size);
    for (const [c, run] of this.channels) {
      v.same(c);
      // Where the channel is in its steps, repeats written out: the steps rung so far (the entry
      // held and its repeats left follow from it), and whether the entry held is used up.
      const input = this.slotInput(run.cfg.spadSlotIdx);
      if (v.mode === Mode.SAVE && run.steps !== input.rung(run.cursor, run.repeatLeft)) v.opaque = true;
      v.same(run.repeatLeft === 0 ? 1 : 0);
      run.steps = v.position(run.steps, input, 1, 1);
      if (v.mode === Mode.JUMP) {
        const i = input.entryOf(run.steps);
        run.cursor = (run.repeatLeft === 0 ? i : i + 1) * SLOT_ENTRY_BYTES;
        if (run.repeatLeft !== 0) run.repeatLeft = input.end(i) - run.steps;
      }
      // The completion count grows op after op and chunk after chunk: said from its semaphores, it drifts with them.
      for (let f = 0; f < run.cfg.foldN; f++) v.same(run.complTarget - this.semas.values[run.compl + f]!);
      run.complTarget = this.semas.drift(v, run.compl, run.complTarget);
      v.same(run.waiting ? 1 : 0);
      v.same(run.wait.sema);
      v.same(run.wait.target);
      v.same(run.base);
      v.same(run.n);
      v.same(run.dec);
      v.same(run.f);
      v.same(run.next);
      run.since = v.time(run.since);
      if (v.mode === Mode.JUMP && run.entry && run.cursor >= SLOT_ENTRY_BYTES) run.entry = decodeSlotEntry(this.image.slotSpad[run.cfg.spadSlotIdx]!, run.cursor - SLOT_ENTRY_BYTES);
    }
  }

  /** Channels still waiting, for the hang report. */
  waits(): { channel: number; wait: WaitState; value: number }[] {
    const ring = [...this.channels.values()].filter((r) => r.waiting).map((r) => ({ channel: r.cfg.channelId, wait: r.waiting!, value: this.semas.values[r.waiting!.sema]! }));
    const mesh = this.meshWaiting ? [{ channel: -1, wait: this.meshWaiting, value: this.semas.values[this.meshWaiting.sema]! }] : [];
    const barrier = this.barrierWaiting ? [{ channel: -2, wait: this.barrierWaiting, value: this.semas.values[this.barrierWaiting.sema]! }] : [];
    return [...ring, ...mesh, ...barrier];
  }
}
