// Virtual rings: descriptors appended per queue while composing, then dumped (padded) to the physical ring.
import { SdmaCceType } from "../ir/enums.ts";
import { EncodeError } from "../ir/errors.ts";
import { DESC_BYTES, encodeLength, lenCtrl, MAX_DESC_BYTES, packCceMeta, packRx, packTx, storeAddressed, writeAddressed, writeDesc, type DescFlags, type DescSlot } from "./udma.ts";
import { checkAddr, isAddr } from "./bits.ts";
import { DescPages } from "./pages.ts";
import { Signature, UnitAddresses } from "./signature.ts";

/** Hard cap per half, as the runtime's vring allocator has it. */
export const VRING_DESC_LIMIT = 0xfffff0;
/** Ring id the hardware expects on the first pass over a ring. */
export const INITIAL_RING_ID = 1;
/** SDMA dtype code of uint32, the type of the reduce-shaped pad packet. */
const SDMA_UINT32 = 9;
/**
 * Descriptor flags the packers take, made once (they are packed millions of times), every one of
 * one shape (the packer reads them without a lookup per shape).
 */
const flags = (f: DescFlags): Required<DescFlags> => ({ first: false, last: false, concat: false, dmb: false, intEn: false, meta: false, strongOrder: false, ...f });
const NO_FLAGS = flags({});
const CONCAT = flags({ concat: true });
const LAST = flags({ last: true });
const SINGLE = flags({ first: true, last: true });
const SINGLE_DMB = flags({ first: true, last: true, dmb: true });
/** A CCE packet's META descriptor, packed once per packet size (`packCcePackets`), as words. */
const CCE_WORDS = (() => {
  const bytes = new Uint8Array(DESC_BYTES);
  return { bytes, offset: 0, words: new Uint32Array(bytes.buffer) };
})();

/** Bytes of a semaphore poke or a pad no-op. */
export const WORD_BYTES = 4;
/** One TX and one RX descriptor (a count record its readers only read). */
const ONE_PAIR: DescCounts = Object.freeze({ tx: 1, rx: 1 });

export interface DescCounts {
  tx: number;
  rx: number;
}

/** Where a vring's descriptors go: its own pages (kept), nowhere (counted), or a streamed ring's pages. */
export interface VringStore {
  readonly tx: DescPages;
  readonly rx: DescPages;
}

/**
 * How a vring that keeps no descriptors composes: `tally` counts them without packing them (a
 * counting pass, or a device a folded run does not hold; the last RX descriptor of each call is
 * still packed, for the pin at an op's end); `sig`, when set, hashes every descriptor run it is
 * handed with unit-relative addresses (device `device` of units — pods — of `unitDevices` ids).
 */
export interface VringTally {
  readonly tally: boolean;
  readonly sig?: { readonly sig: Signature; readonly addresses: UnitAddresses };
}

export class Vring {
  readonly name: string;
  private readonly txList: DescPages;
  private readonly rxList: DescPages;
  private readonly limit: number;
  totalTxBytes = 0;
  totalRxBytes = 0;
  /** The last RX descriptor of each op (index -> bytes), pinned at its end for the validate pass. */
  readonly rxPins = new Map<number, Uint8Array>();
  /** How it composes when it keeps no descriptors (tallied, hashed), if it is so. */
  private readonly mode: VringTally | undefined;
  /** A tallied vring's last RX descriptor, packed when it is pinned (destination, bytes; bytes 0: none since). */
  private lastRxAddr = 0;
  private lastRxBytes = 0;
  /** `limit`: descriptors per half (the runtime's cap unless a test lowers it); `store`: where they go (default: kept here); `mode`: tallied / hashed. */
  constructor(name: string, limit = VRING_DESC_LIMIT, store: VringStore = { tx: new DescPages(), rx: new DescPages() }, mode?: VringTally) {
    this.name = name;
    this.limit = limit;
    this.txList = store.tx;
    this.rxList = store.rx;
    this.mode = mode;
  }

  /** Hash a copy run: its kind, size and unit-relative addresses. */
  private signCopy(bytes: number, src: number, dst: number, packet: number): void {
    const f = this.mode!.sig!;
    const sig = f.sig;
    // (Its kind, 1, and its size in one number: bytes < 2^50; a packet other than 64 KiB cuts it otherwise.)
    sig.add(bytes * 4 + 1);
    if (packet !== MAX_DESC_BYTES) sig.add(packet);
    f.addresses.add(sig, src);
    f.addresses.add(sig, dst);
  }

  /** Hash a CCE run: its kind, op, sizes and unit-relative addresses (no array made per run). */
  private signCce(op: number, sdmaDtype: number, bytes: number, packetBytes: number, srcs: readonly number[], dsts: readonly number[], off: number): void {
    const f = this.mode!.sig!;
    const sig = f.sig;
    // Its kind (2), op, type and source and destination counts in one number where they fit (op < 8,
    // type < 16, counts < 2^16: below 2^41), else each on its own after kind 3; then its sizes.
    if (srcs.length < 65536 && dsts.length < 65536) sig.add((((op * 16 + sdmaDtype) * 65536 + srcs.length) * 65536 + dsts.length) * 4 + 2);
    else for (const x of [3, op, sdmaDtype, srcs.length, dsts.length]) sig.add(x);
    sig.add(bytes);
    sig.add(packetBytes);
    for (let i = 0; i < srcs.length; i++) f.addresses.add(sig, srcs[i]! + off);
    for (let i = 0; i < dsts.length; i++) f.addresses.add(sig, dsts[i]! + off);
  }

  /** A tallied run's last RX descriptor: kept as its fields, packed only if it is pinned (checked as the packer would). */
  private tallyLastRx(dst: number, bytes: number): void {
    checkAddr(dst, "buf1_ptr", "udma_desc");
    encodeLength(bytes);
    this.lastRxAddr = dst;
    this.lastRxBytes = bytes;
  }

  /** Count `tx` / `rx` descriptors without packing them (a tallied vring). */
  private tally(tx: number, rx: number): void {
    this.tallyList(this.txList, tx);
    this.tallyList(this.rxList, rx);
  }

  private tallyList(list: DescPages, n: number): void {
    if (list.count + n > this.limit) {
      throw new EncodeError("ENC1501", `Descriptor limit reached. Descriptors in vring ${this.name}, Max allowed ${this.limit}`, { path: `vring.${this.name}`, value: list.count });
    }
    list.count += n;
  }
  get txCount(): number {
    return this.txList.count;
  }
  get rxCount(): number {
    return this.rxList.count;
  }
  txBytes(release = false): Uint8Array {
    return this.txList.flat(release);
  }
  rxBytes(release = false): Uint8Array {
    return this.rxList.flat(release);
  }

  /** Keep a copy of the last RX descriptor (the end of an op): what validate reads of a ring it does not hold. */
  pinLastRx(): void {
    const i = this.rxList.count - 1;
    // A ring that keeps its descriptors (whole, or streamed into the run) is read where it is.
    if (i < 0 || this.rxList.keeps) return;
    if (this.lastRxBytes > 0) packRx(this.lastRxAddr, this.lastRxBytes, INITIAL_RING_ID, NO_FLAGS, this.rxList.lastSlot());
    this.lastRxBytes = 0;
    const at = this.rxList.offsetOf(i);
    this.rxPins.set(i, this.rxList.page(i).slice(at, at + DESC_BYTES));
  }

  private nextTx(): DescSlot {
    return this.next(this.txList);
  }
  private nextRx(): DescSlot {
    return this.next(this.rxList);
  }
  private next(list: DescPages): DescSlot {
    if (list.count >= this.limit) {
      throw new EncodeError("ENC1501", `Descriptor limit reached. Descriptors in vring ${this.name}, Max allowed ${this.limit}`, {
        path: `vring.${this.name}`,
        value: list.count,
      });
    }
    return list.next();
  }

  /**
   * A copy of `bytes` from `src` to `dst`: one FIRST|LAST pair per chunk of at most `packet` bytes
   * (a descriptor's 64 KiB, or the op's CC DMA packet); DMB on the last chunk (no SOW on v2).
   */
  addCopy(src: number, dst: number, bytes: number, packet = MAX_DESC_BYTES): DescCounts {
    if (this.mode?.sig) this.signCopy(bytes, src, dst, packet);
    if (this.mode?.tally) return this.tallyCopy(dst, bytes, packet);
    let done = 0;
    let n = 0;
    while (done < bytes) {
      const chunk = Math.min(bytes - done, packet);
      const last = done + chunk === bytes;
      packTx(src + done, chunk, INITIAL_RING_ID, last ? SINGLE_DMB : SINGLE, undefined, this.nextTx());
      packRx(dst + done, chunk, INITIAL_RING_ID, NO_FLAGS, this.nextRx());
      this.totalTxBytes += chunk;
      this.totalRxBytes += chunk;
      done += chunk;
      n++;
    }
    return { tx: n, rx: n };
  }

  /**
   * An in-DMA reduce of `srcs` (each `bytes` long) into `dst`, tiled into CCE packets of at most
   * `packetBytes`: META descriptor + one descriptor per source (CONCAT, LAST on the final one) + one
   * RX — or, with several destinations (replication, arch v3+), one RX each from one read of the
   * sources. `off` is added to every address (a fold's share of the transfer: no array made for it).
   */
  addCce(op: SdmaCceType, sdmaDtype: number, srcs: readonly number[], dst: number | readonly number[], bytes: number, packetBytes: number, off = 0): DescCounts {
    const dsts = typeof dst === "number" ? [dst] : dst;
    if (srcs.length < (dsts.length > 1 ? 1 : 2)) throw new EncodeError("ENC1502", `a CCE reduce needs at least 2 sources, got ${srcs.length}`, { path: `vring.${this.name}`, value: srcs.length });
    if (this.mode?.sig) this.signCce(op, sdmaDtype, bytes, packetBytes, srcs, dsts, off);
    if (this.mode?.tally) return this.tallyCce(dsts, srcs.length, bytes, packetBytes, off);
    const end = off + bytes;
    const packets = Math.ceil(bytes / packetBytes);
    const c = { tx: packets * (1 + srcs.length), rx: packets * dsts.length };
    if (!this.packCcePackets(op, sdmaDtype, srcs, dsts, off, end, packetBytes)) {
      // (An address out of range, or a ring near its limit: packed one descriptor at a time, which
      // throws where and as the packers do.)
      for (let done = off; done < end; done += packetBytes) {
        const chunk = Math.min(end - done, packetBytes);
        packCceMeta(op, sdmaDtype, chunk, INITIAL_RING_ID, this.nextTx(), dsts.length);
        for (let i = 0; i < srcs.length; i++) packTx(srcs[i]! + done, chunk, INITIAL_RING_ID, i === srcs.length - 1 ? LAST : CONCAT, 0, this.nextTx());
        for (let i = 0; i < dsts.length; i++) packRx(dsts[i]! + done, chunk, INITIAL_RING_ID, NO_FLAGS, this.nextRx());
      }
    }
    this.totalTxBytes += bytes * srcs.length;
    this.totalRxBytes += bytes * dsts.length;
    return c;
  }

  /**
   * `addCce`'s packets, packed as the packers would pack them, their words made once per packet
   * size (every packet but the last is full) rather than once per descriptor: false, with nothing
   * packed, where an address or the ring's limit needs the packers' own checks.
   */
  private packCcePackets(op: SdmaCceType, sdmaDtype: number, srcs: readonly number[], dsts: readonly number[], off: number, end: number, packetBytes: number): boolean {
    const packets = Math.ceil((end - off) / packetBytes);
    if (this.txList.count + packets * (1 + srcs.length) > this.limit || this.rxList.count + packets * dsts.length > this.limit) return false;
    // (The packers check where each descriptor starts: every start lies in [a + off, a + end - 1].)
    for (const a of srcs) if (!isAddr(a + off) || !isAddr(a + end - 1)) return false;
    for (const a of dsts) if (!isAddr(a + off) || !isAddr(a + end - 1)) return false;
    const meta = CCE_WORDS;
    let size = -1;
    let txConcat = 0;
    let txLast = 0;
    let rxWord = 0;
    for (let done = off; done < end; done += packetBytes) {
      const chunk = Math.min(end - done, packetBytes);
      if (chunk !== size) {
        // The META descriptor's words and each data descriptor's len_ctrl for this size.
        size = chunk;
        packCceMeta(op, sdmaDtype, chunk, INITIAL_RING_ID, meta, dsts.length);
        txConcat = lenCtrl(chunk, INITIAL_RING_ID, CONCAT);
        txLast = lenCtrl(chunk, INITIAL_RING_ID, LAST);
        rxWord = lenCtrl(chunk, INITIAL_RING_ID, NO_FLAGS);
      }
      const mw = meta.words;
      // A packet's TX descriptors, and its RX ones, are stored word by word where each side's fit
      // in its page (all but one packet in a page's worth), else packed one slot at a time.
      const t = this.txList.run(1 + srcs.length);
      if (t >= 0) {
        const w = this.txList.words!;
        w[t] = mw[0]!;
        w[t + 1] = mw[1]!;
        w[t + 2] = mw[2]!;
        w[t + 3] = mw[3]!;
        for (let i = 0; i < srcs.length; i++) storeAddressed(w, t + 4 * (i + 1), i === srcs.length - 1 ? txLast : txConcat, 0, srcs[i]! + done);
      } else {
        writeDesc(this.txList.next(), mw[0]!, mw[1]!, mw[2]!, mw[3]!);
        for (let i = 0; i < srcs.length; i++) writeAddressed(this.txList.next(), i === srcs.length - 1 ? txLast : txConcat, 0, srcs[i]! + done);
      }
      const r = this.rxList.run(dsts.length);
      if (r >= 0) {
        const w = this.rxList.words!;
        for (let i = 0; i < dsts.length; i++) storeAddressed(w, r + 4 * i, rxWord, 0, dsts[i]! + done);
      } else for (let i = 0; i < dsts.length; i++) writeAddressed(this.rxList.next(), rxWord, 0, dsts[i]! + done);
    }
    return true;
  }

  /** `addCopy` counted, not packed. */
  private tallyCopy(dst: number, bytes: number, packet: number): DescCounts {
    const n = Math.ceil(bytes / packet);
    this.tally(n, n);
    if (n > 0) this.tallyLastRx(dst + (n - 1) * packet, bytes - (n - 1) * packet);
    this.totalTxBytes += bytes;
    this.totalRxBytes += bytes;
    return { tx: n, rx: n };
  }

  /** `addCce` counted, not packed (its own method: the packing loop inlines the packers). */
  private tallyCce(dsts: readonly number[], nSrc: number, bytes: number, packetBytes: number, off: number): DescCounts {
    const packets = Math.ceil(bytes / packetBytes);
    const c = { tx: packets * (1 + nSrc), rx: packets * dsts.length };
    this.tally(c.tx, c.rx);
    if (packets > 0) this.tallyLastRx(dsts[dsts.length - 1]! + off + (packets - 1) * packetBytes, bytes - (packets - 1) * packetBytes);
    this.totalTxBytes += bytes * nSrc;
    this.totalRxBytes += bytes * dsts.length;
    return c;
  }

  /** A semaphore poke: a 4-byte copy of the word at `valueAddr` into a semaphore window address. */
  addSemaphoreWrite(valueAddr: number, semaAddr: number): DescCounts {
    if (!this.mode?.tally) return this.addCopy(valueAddr, semaAddr, WORD_BYTES);
    // (Counted, as addCopy counts a one-descriptor copy: one pair, one count record for all.)
    if (this.mode.sig) this.signCopy(WORD_BYTES, valueAddr, semaAddr, MAX_DESC_BYTES);
    this.tally(1, 1);
    this.tallyLastRx(semaAddr, WORD_BYTES);
    this.totalTxBytes += WORD_BYTES;
    this.totalRxBytes += WORD_BYTES;
    return ONE_PAIR;
  }

  /** A reduce-shaped no-op: a 4-byte CCE ADD of the pad word onto itself (1 + `sources` TX, 1 RX descriptors). */
  addCceNoop(padAddr: number, sources = 2): DescCounts {
    return this.addCce(SdmaCceType.ADD, SDMA_UINT32, Array(sources).fill(padAddr), padAddr, WORD_BYTES, WORD_BYTES);
  }

  /** A replicated no-op: a 4-byte one-source CCE ADD of the pad word onto itself, `dests` times (2 TX, `dests` RX). */
  addReplicateNoop(padAddr: number, dests: number): DescCounts {
    return this.addCce(SdmaCceType.ADD, SDMA_UINT32, [padAddr], Array(dests).fill(padAddr), WORD_BYTES, WORD_BYTES);
  }

  /** A no-op: a 4-byte self-copy; costs engine time, moves nothing useful. */
  addNoop(padAddr: number): DescCounts {
    return this.addCopy(padAddr, padAddr, WORD_BYTES);
  }
}

/**
 * Flush a vring into its physical rings, padding each side to its padded size with no-op pairs.
 * `noopAddr` is the word the pad descriptors copy onto itself.
 */
export function dumpToPringPadded(v: Vring, paddedTx: number, paddedRx: number, noopAddr: number): { tx: Uint8Array; rx: Uint8Array } {
  const n = { tx: v.txCount, rx: v.rxCount };
  if (n.tx > paddedTx || n.rx > paddedRx) {
    throw new EncodeError("ENC1503", `Failed to pad vring ${v.name} from ${Math.max(n.tx, n.rx)} descriptors to ${Math.min(paddedTx, paddedRx)} descriptors`, {
      path: `vring.${v.name}`,
      value: n,
    });
  }
  if (paddedTx - n.tx !== paddedRx - n.rx) {
    throw new EncodeError("ENC1504", `vring ${v.name}: tx and rx padding differ (${paddedTx - n.tx} vs ${paddedRx - n.rx})`, { path: `vring.${v.name}`, value: n });
  }
  // The vring is flushed once: its pages go as they are copied.
  if (paddedTx === n.tx) return { tx: v.txBytes(true), rx: v.rxBytes(true) };
  const pad = new Vring(v.name);
  for (let i = n.tx; i < paddedTx; i++) pad.addNoop(noopAddr);
  const join = (a: Uint8Array, b: Uint8Array): Uint8Array => {
    const out = new Uint8Array(a.length + b.length);
    out.set(a);
    out.set(b, a.length);
    return out;
  };
  return { tx: join(v.txBytes(true), pad.txBytes()), rx: join(v.rxBytes(true), pad.rxBytes()) };
}
