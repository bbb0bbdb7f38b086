// The channel writer: one ring channel's step program as the composer's leaves call it — copy /
// reduce / semaInc emit descriptors into every DMA fold's vring, markStep closes a step (folds
// padded to equal counts, 16-bit tp_inc fields, identical neighbours merged with a repeat count),
// markEnd writes the completion semaphores and the LAST_SYNC step.
import { SdmaCceType } from "../ir/enums.ts";
import { EncodeError, InternalError } from "../ir/errors.ts";
import type { RingNeighbor } from "./channel.ts";
import { semaAddr } from "./address.ts";
import { packSlotEntry, SLOT_ENTRY_BYTES, StepFlag, type SlotEntry } from "./slot.ts";
import { Vring } from "./vring.ts";
import { GrownBytes } from "./bits.ts";

export interface EmitterParams {
  readonly arch: number;
  readonly maxDescriptorBytes: number;
  readonly cceMaxElements: number;
  readonly nodes?: number;
  readonly devicesPerNode?: number;
}

/** Where a ring channel lives and what it is wired to; filled in by the composer. */
export interface ChannelPlacement {
  readonly device: number;
  readonly topsp: number;
  /** abs_id: the bit of channel_list and the record index in ring_channels[32]. */
  readonly channelId: number;
  readonly slot: number;
  /** One DMA engine per fold; all use `queue`. */
  readonly engines: readonly number[];
  readonly queue: number;
  readonly recvSema: number;
  readonly sendSema: number;
  readonly complSema: number;
  readonly reporter: boolean;
  readonly next: RingNeighbor;
  readonly prev: RingNeighbor;
  /** Initial value of each fold's send-credit semaphore: the receive-buffer slots of the next rank. */
  readonly initialCredits: number;
}

export const TP_INC_MAX = 0xffff;

/** What a channel asks of the program it is part of (the program builder). */
export interface ChannelHost {
  readonly params: EmitterParams;
  /** The op being emitted (its index). */
  readonly currentOp: number;
  /** The most bytes a copy descriptor of that op moves (its CC DMA packet). */
  readonly copyBytes: number;
  /** Count `n` more increments of TopSP semaphore `sema` (the validate pass's semaphore balance). */
  countUp(device: number, topsp: number, sema: number, n: number): void;
}


/** Split `bytes` of whole `esize`-byte elements into `parts` contiguous shares (the last ones may be short or empty). */
export function splitWhole(bytes: number, esize: number, parts: number): readonly Share[] {
  if (bytes % esize !== 0) throw new InternalError(`transfer of ${bytes} bytes is not whole ${esize}-byte elements`);
  // A composition asks for the same few splits again and again: they are kept (read-only).
  const key = esize < 16 && parts < 1024 ? (bytes * 16 + esize) * 1024 + parts : Number.NaN;
  const cached = Number.isSafeInteger(key);
  const known = cached ? SPLITS.get(key) : undefined;
  if (known) return known;
  const elems = bytes / esize;
  const per = Math.ceil(elems / parts);
  const out = Object.freeze(
    Array.from({ length: parts }, (_, f) => {
      const start = Math.min(f * per, elems);
      const end = Math.min(start + per, elems);
      return Object.freeze({ off: start * esize, len: (end - start) * esize });
    }),
  );
  if (!cached) return out;
  if (SPLITS.size >= SPLITS_KEPT) SPLITS.clear();
  SPLITS.set(key, out);
  return out;
}

/** One fold's (or one part's) share of a transfer: an offset into it and a length. */
export interface Share {
  readonly off: number;
  readonly len: number;
}

/** Kept splits by (bytes, esize, parts), one number while it is a safe integer (esize < 16, parts < 1024). */
const SPLITS = new Map<number, readonly Share[]>();
const SPLITS_KEPT = 4096;

/** One ring channel of one rank, as the emitter sees it (the encd_dma_channel analogue). */
export class EncdChannel {
  readonly placement: ChannelPlacement;
  /** Its completion semaphores count ops (a ring channel's), rather than being waited on (a mesh program's). */
  countsCompletions = false;
  private readonly builder: ChannelHost;
  private readonly folds: readonly Vring[];
  private readonly steps: GrownBytes;
  private readonly constAddr: number;
  private readonly padAddr: number;
  /** Live tp_inc record per fold: descriptors emitted since the last step mark. */
  private readonly tx: number[];
  private readonly rx: number[];
  private lastEntry: { -readonly [K in keyof SlotEntry]: SlotEntry[K] } | undefined;
  endedOps = 0;
  /** The op index this channel last ended (-1: none). */
  lastEndedOp = -1;

  constructor(builder: ChannelHost, p: ChannelPlacement, folds: readonly Vring[], steps: GrownBytes, constAddr: number, padAddr: number) {
    this.builder = builder;
    this.placement = p;
    this.folds = folds;
    this.steps = steps;
    this.constAddr = constAddr;
    this.padAddr = padAddr;
    this.tx = folds.map(() => 0);
    this.rx = folds.map(() => 0);
  }

  get foldN(): number {
    return this.folds.length;
  }

  /** Split `bytes` (whole elements of `esize`) into one contiguous share per fold. */
  private shares(bytes: number, esize: number): readonly Share[] {
    // (A channel moves the same size step after step: its last split is kept here.)
    if (bytes === this.lastSplitBytes && esize === this.lastSplitEsize) return this.lastSplit;
    this.lastSplit = splitWhole(bytes, esize, this.folds.length);
    this.lastSplitBytes = bytes;
    this.lastSplitEsize = esize;
    return this.lastSplit;
  }

  private lastSplit: readonly Share[] = [];
  private lastSplitBytes = -1;
  private lastSplitEsize = -1;

  private count(f: number, c: { tx: number; rx: number }): void {
    this.tx[f] = (this.tx[f] ?? 0) + c.tx;
    this.rx[f] = (this.rx[f] ?? 0) + c.rx;
  }

  /** encd_dma_copy: `bytes` from `src` to `dst`, shared across the folds. */
  copy(src: number, dst: number, bytes: number, esize: number): void {
    const shares = this.shares(bytes, esize);
    for (let f = 0; f < shares.length; f++) {
      const s = shares[f]!;
      if (s.len > 0) this.count(f, this.folds[f]!.addCopy(src + s.off, dst + s.off, s.len, this.builder.copyBytes));
    }
  }

  /**
   * One read of `src`, written to every address of `dsts` (CCE replication: a one-source ADD packet
   * per `packetBytes` with several destinations; ENC1610 before v3); shared across the folds.
   */
  replicate(src: number, dsts: readonly number[], bytes: number, sdmaDtype: number, esize: number, packetBytes: number): void {
    if (dsts.length === 1) return this.copy(src, dsts[0]!, bytes, esize);
    this.reduce([src], dsts, bytes, SdmaCceType.ADD, sdmaDtype, esize, packetBytes);
  }

  /** encd_dma_reduce_copy: dst = op(srcs...) element-wise over `bytes`, in CCE packets of at most `packetBytes`. */
  reduce(srcs: readonly number[], dst: number | readonly number[], bytes: number, op: SdmaCceType, sdmaDtype: number, esize: number, packetBytes: number): void {
    const dsts = typeof dst === "number" ? [dst] : dst;
    if (dsts.length > 1 && this.builder.params.arch < 3) throw new EncodeError("ENC1610", "CCE replication not supported for v1/v2 archs", { path: "reduce.num_dests", value: dsts.length });
    if (packetBytes % esize !== 0 || packetBytes > this.builder.params.maxDescriptorBytes || packetBytes < esize) {
      throw new EncodeError("ENC1609", `CCE packet of ${packetBytes} bytes is not whole ${esize}-byte elements within one descriptor`, { path: "reduce.packet", value: packetBytes });
    }
    const packet = packetBytes;
    const shares = this.shares(bytes, esize);
    for (let f = 0; f < shares.length; f++) {
      const s = shares[f]!;
      if (s.len > 0) this.count(f, this.folds[f]!.addCce(op, sdmaDtype, srcs, dsts, s.len, packet, s.off));
    }
  }

  /**
   * A semaphore increment by 1, issued on every fold: fold f increments the semaphore after the one
   * `incBase` names by f (the per-fold recv_sema_ids / credit ids are consecutive).
   */
  semaInc(incBase: number): void {
    for (let f = 0; f < this.folds.length; f++) this.count(f, this.folds[f]!.addSemaphoreWrite(this.constAddr, incBase + 4 * f));
  }

  /**
   * Close a step: pad short folds to equal counts, guard the 16-bit counters, record the slot entry.
   * A deficit is paid in no-op copy pairs (1 TX + 1 RX) and, where a fold is short of reduce
   * packets (3 TX + 1 RX), in reduce-shaped no-ops on the pad word.
   */
  markStep(flags: number, drainTarget = 0): void {
    // Folds already even, as they almost always are, need no padding.
    const tx = this.tx;
    const rx = this.rx;
    let maxTx = tx[0]!;
    let maxRx = rx[0]!;
    let even = true;
    for (let f = 1; f < tx.length; f++) {
      if (tx[f] !== maxTx || rx[f] !== maxRx) even = false;
      maxTx = Math.max(maxTx, tx[f]!);
      maxRx = Math.max(maxRx, rx[f]!);
    }
    if (!even) this.padFolds(maxTx, maxRx);
    const m2s = this.tx[0] ?? 0;
    const s2m = this.rx[0] ?? 0;
    if (m2s > TP_INC_MAX - 1 || s2m > TP_INC_MAX - 1) {
      throw new EncodeError("ENC1607", `UINT16_MAX - channel->tp_inc_record.m2s_val > tx_descs_n[0] fails: a step needs ${m2s} tx / ${s2m} rx descriptors`, {
        path: `channel${this.placement.channelId}.tp_inc`,
        value: { m2s, s2m },
      });
    }
    const prev = this.lastEntry;
    if (prev && prev.m2s === m2s && prev.s2m === s2m && prev.flags === flags && prev.drainTarget === drainTarget && !(flags & StepFlag.LAST_SYNC) && prev.repeat < TP_INC_MAX) {
      // The last entry is this channel's own record (not kept elsewhere): its repeat grows in place.
      prev.repeat++;
      packSlotEntry(prev, this.steps.bytes, this.steps.length - SLOT_ENTRY_BYTES);
    } else {
      const e = { m2s, s2m, repeat: 1, flags, drainTarget };
      packSlotEntry(e, this.steps.grow(SLOT_ENTRY_BYTES), this.steps.length - SLOT_ENTRY_BYTES);
      this.lastEntry = e;
    }
    // (A loop: `fill` is a runtime call, and a step is marked for every few descriptors.)
    for (let f = 0; f < tx.length; f++) {
      tx[f] = 0;
      rx[f] = 0;
    }
  }

  /**
   * Pad short folds to the longest. A fold short of TX but not of RX (the others reduce many
   * sources) cannot be padded to the longest as it is: raise every fold by t no-op pairs until all
   * can be (t = 0 almost always).
   */
  private padFolds(maxTx: number, maxRx: number): void {
    // The least raise (0 to 4) at which every fold has a plan; -1 for none.
    const raise = (odd: boolean): number => {
      for (let t = 0; t <= 4; t++) if (this.folds.every((_, f) => padPlan(maxTx + t - (this.tx[f] ?? 0), maxRx + t - (this.rx[f] ?? 0), odd))) return t;
      return -1;
    };
    // A fold one TX over its RX short of the longest (a mesh step's folds reduce blocks of different
    // packet counts) fits none of the mixes: only then, a reduce-shaped no-op and a replicated one
    // together (the programs the other mixes pad are padded as they were).
    let odd = false;
    let t = raise(false);
    if (t < 0) {
      odd = true;
      t = raise(true);
      // (None at all: at the raise of 4, the fold that cannot be padded is named below.)
      if (t < 0) t = 4;
    }
    this.folds.forEach((v, f) => {
      const dTx = maxTx + t - (this.tx[f] ?? 0);
      const dRx = maxRx + t - (this.rx[f] ?? 0);
      const plan = padPlan(dTx, dRx, odd);
      if (!plan) {
        throw new EncodeError("ENC1606", `fold ${f} cannot be padded: (m2s_val_prev - m2s_val_curr) == (s2m_val_prev - s2m_val_curr) fails (${dTx} vs ${dRx})`, {
          path: `channel${this.placement.channelId}.fold${f}`,
          value: { dTx, dRx },
        });
      }
      const { sources, fan } = plan;
      for (const k of sources) this.count(f, v.addCceNoop(this.padAddr, k));
      if (fan > 0) this.count(f, v.addReplicateNoop(this.padAddr, fan));
      for (let i = sources.length + fan; i < dRx; i++) this.count(f, v.addNoop(this.padAddr));
    });
  }

  /** mark_end: the per-fold completion-semaphore write, then the LAST_SYNC step. */
  markEnd(): void {
    this.semaInc(semaAddr(this.placement.device, this.placement.topsp, this.placement.complSema, "inc"));
    if (this.countsCompletions) this.folds.forEach((_, f) => this.builder.countUp(this.placement.device, this.placement.topsp, this.placement.complSema + f, 1));
    this.markStep(StepFlag.LAST_SYNC);
    for (const v of this.folds) v.pinLastRx();
    this.lastEntry = undefined;
    this.endedOps++;
    this.lastEndedOp = this.builder.currentOp;
  }

  /** A copy on fold `f` only (mesh programs give each destination its own engine). */
  copyOn(f: number, src: number, dst: number, bytes: number): void {
    if (bytes > 0) this.count(f, this.fold(f).addCopy(src, dst, bytes, this.builder.copyBytes));
  }

  /** A reduce on fold `f` only. */
  reduceOn(f: number, srcs: readonly number[], dst: number, bytes: number, op: SdmaCceType, sdmaDtype: number, packetBytes: number): void {
    if (bytes > 0) this.count(f, this.fold(f).addCce(op, sdmaDtype, srcs, dst, bytes, packetBytes));
  }

  /** A semaphore increment by the word at `valueAddr` (default: the constant 1) on fold `f` only. */
  semaIncOn(f: number, incAddr: number, valueAddr = this.constAddr): void {
    this.count(f, this.fold(f).addSemaphoreWrite(valueAddr, incAddr));
  }

  private fold(f: number): Vring {
    const v = this.folds[f];
    if (!v) throw new InternalError(`fold ${f} of a ${this.folds.length}-fold DMA set`);
    return v;
  }
}

/**
 * How a fold short of dTx TX and dRx RX descriptors is padded: reduce-shaped no-ops (each one RX
 * and s + 1 TX, s >= 2 extra sources) for a TX surplus, one replicated no-op (2 TX, extra + 2 RX)
 * for an RX surplus, no-op copy pairs for the rest; undefined when no mix of them fits. `odd`: a
 * surplus of one TX may also be a 2-source reduce-shaped no-op (two over) with a replicated one
 * of 3 RX (one under).
 */
function padPlan(dTx: number, dRx: number, odd = false): { sources: number[]; fan: number } | undefined {
  // Each pad is one RX; a reduce-shaped pad with s sources adds s extra TX (s >= 2).
  const sources: number[] = [];
  let extra = dTx - dRx;
  while (extra > 0) {
    let k = Math.min(extra, 128);
    if (extra - k === 1) k--;
    if (k < 2) break;
    sources.push(k);
    extra -= k;
  }
  if (odd && extra === 1 && sources.length === 0 && dRx >= 4) {
    // 3 + 2 TX and 1 + 3 RX: one TX over.
    sources.push(2);
    return { sources, fan: 3 };
  }
  // Short of RX instead (a replicated packet): one replicated no-op of 2 TX and extra + 2 RX.
  const fan = extra < 0 && dTx >= 2 && -extra + 2 <= 256 ? -extra + 2 : 0;
  if (fan > 0) extra = 0;
  if (extra !== 0 || sources.length > dRx) return undefined;
  return { sources, fan };
}
