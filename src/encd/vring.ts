// Virtual rings: descriptors appended per queue while composing, then dumped (padded) to the physical ring.
import { SdmaCceType } from "../ir/enums.ts";
import { EncodeError } from "../ir/errors.ts";
import { DESC_BYTES, MAX_DESC_BYTES, packCceMeta, packRx, packTx, type DescSlot } from "./udma.ts";

/** Hard cap per half, as the runtime's vring allocator has it. */
export const VRING_DESC_LIMIT = 0xfffff0;
/** Ring id the hardware expects on the first pass over a ring. */
export const INITIAL_RING_ID = 1;
/** SDMA dtype code of uint32, the type of the reduce-shaped pad packet. */
const SDMA_UINT32 = 9;
/** Bytes of a semaphore poke or a pad no-op. */
export const WORD_BYTES = 4;

export interface DescCounts {
  tx: number;
  rx: number;
}

/** Descriptors per page of a DescList: 64 KiB pages, so a ring grows without copying or slack. */
const PAGE_DESCS = 4096;

/** A growable array of 16-byte descriptors, kept in fixed pages until it is flushed. */
class DescList {
  private pages: Uint8Array[] = [];
  count = 0;
  private readonly limit: number;
  constructor(limit: number) {
    this.limit = limit;
  }
  next(owner: string): DescSlot {
    if (this.count >= this.limit) {
      throw new EncodeError("ENC1501", `Descriptor limit reached. Descriptors in vring ${owner}, Max allowed ${this.limit}`, {
        path: `vring.${owner}`,
        value: this.count,
      });
    }
    const page = Math.floor(this.count / PAGE_DESCS);
    if (page === this.pages.length) this.pages.push(new Uint8Array(DESC_BYTES * PAGE_DESCS));
    const offset = DESC_BYTES * (this.count++ - page * PAGE_DESCS);
    return { bytes: this.pages[page]!, offset };
  }
  /** The descriptors as one array (a copy); `release` drops the pages as they are copied. */
  view(release = false): Uint8Array {
    const out = new Uint8Array(this.count * DESC_BYTES);
    for (let p = 0; p < this.pages.length; p++) {
      const n = Math.min(PAGE_DESCS, this.count - p * PAGE_DESCS);
      out.set(this.pages[p]!.subarray(0, n * DESC_BYTES), p * PAGE_DESCS * DESC_BYTES);
      if (release) this.pages[p] = EMPTY;
    }
    if (release) this.pages = [];
    return out;
  }
}
const EMPTY = new Uint8Array(0);

export class Vring {
  readonly name: string;
  private readonly txList: DescList;
  private readonly rxList: DescList;
  totalTxBytes = 0;
  totalRxBytes = 0;
  /** `limit`: descriptors per half (the runtime's cap unless a test lowers it). */
  constructor(name: string, limit = VRING_DESC_LIMIT) {
    this.name = name;
    this.txList = new DescList(limit);
    this.rxList = new DescList(limit);
  }
  get txCount(): number {
    return this.txList.count;
  }
  get rxCount(): number {
    return this.rxList.count;
  }
  txBytes(release = false): Uint8Array {
    return this.txList.view(release);
  }
  rxBytes(release = false): Uint8Array {
    return this.rxList.view(release);
  }

  /** A copy of `bytes` from `src` to `dst`: one FIRST|LAST pair per <= 64 KiB chunk; DMB on the last chunk (no SOW on v2). */
  addCopy(src: number, dst: number, bytes: number): DescCounts {
    let done = 0;
    let n = 0;
    while (done < bytes) {
      const chunk = Math.min(bytes - done, MAX_DESC_BYTES);
      const last = done + chunk === bytes;
      packTx(src + done, chunk, INITIAL_RING_ID, { first: true, last: true, dmb: last }, undefined, this.txList.next(this.name));
      packRx(dst + done, chunk, INITIAL_RING_ID, {}, this.rxList.next(this.name));
      this.totalTxBytes += chunk;
      this.totalRxBytes += chunk;
      done += chunk;
      n++;
    }
    return { tx: n, rx: n };
  }

  /**
   * An in-DMA reduce of `srcs` (each `bytes` long) into `dst`, tiled into CCE packets of at most
   * `packetBytes`: META descriptor + one descriptor per source (CONCAT, LAST on the final one) + one RX.
   */
  /**
   * CCE packets of at most `packetBytes`: op over `srcs`, the result written to `dst` — or, with
   * several destinations (replication, arch v3+), to each of them from one read of the sources.
   */
  addCce(op: SdmaCceType, sdmaDtype: number, srcs: readonly number[], dst: number | readonly number[], bytes: number, packetBytes: number): DescCounts {
    const dsts = typeof dst === "number" ? [dst] : dst;
    if (srcs.length < (dsts.length > 1 ? 1 : 2)) throw new EncodeError("ENC1502", `a CCE reduce needs at least 2 sources, got ${srcs.length}`, { path: `vring.${this.name}`, value: srcs.length });
    let done = 0;
    const c = { tx: 0, rx: 0 };
    while (done < bytes) {
      const chunk = Math.min(bytes - done, packetBytes);
      packCceMeta(op, sdmaDtype, chunk, INITIAL_RING_ID, this.txList.next(this.name), dsts.length);
      srcs.forEach((s, i) => {
        const last = i === srcs.length - 1;
        packTx(s + done, chunk, INITIAL_RING_ID, { concat: !last, last }, 0, this.txList.next(this.name));
      });
      for (const d of dsts) packRx(d + done, chunk, INITIAL_RING_ID, {}, this.rxList.next(this.name));
      this.totalTxBytes += chunk * srcs.length;
      this.totalRxBytes += chunk * dsts.length;
      c.tx += 1 + srcs.length;
      c.rx += dsts.length;
      done += chunk;
    }
    return c;
  }

  /** A semaphore poke: a 4-byte copy of the word at `valueAddr` into a semaphore window address. */
  addSemaphoreWrite(valueAddr: number, semaAddr: number): DescCounts {
    return this.addCopy(valueAddr, semaAddr, WORD_BYTES);
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
