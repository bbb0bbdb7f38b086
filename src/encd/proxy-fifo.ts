// The host network proxy's work queue for one ring channel: 40-byte records the emitter writes at
// compile time (the net_src_addr / net_dest_addr FIFO analogue), consumed in order as the device
// signals them through a semaphore.
//
//  +0  u64 src        device address the proxy reads (staging or output)
//  +8  u64 dst        device address on the remote node it writes
//  +16 u32 bytes      0 = a signal only (a credit return)
//  +20 u16 trigger    increments of the queue's semaphore that make this entry ready (the folds)
//  +22 u16 sema_n     remote semaphores to increment: sema, sema+1, ... (one per remote fold)
//  +24 u64 sema       first remote semaphore INC address
//  +32 u32 block      the remote device's 64-device address block (dst and sema name a device of it)
//  +36 u32 reserved   0
import { addr64, field, GrownBytes, readAddr } from "./bits.ts";

export const PROXY_ENTRY_BYTES = 40;

export interface ProxyEntry {
  readonly src: number;
  readonly dst: number;
  readonly bytes: number;
  readonly trigger: number;
  readonly semaN: number;
  readonly sema: number;
  readonly block: number;
}

const FORMAT = "proxy_entry";

export function packProxyEntries(entries: readonly ProxyEntry[]): Uint8Array {
  const out = new Uint8Array(entries.length * PROXY_ENTRY_BYTES);
  const v = new DataView(out.buffer);
  entries.forEach((e, i) => packProxyEntry(v, i * PROXY_ENTRY_BYTES, e));
  return out;
}

/** One entry into `v` at byte `o`. */
function packProxyEntry(v: DataView, o: number, e: ProxyEntry): void {
  v.setBigUint64(o, addr64(e.src, "src", FORMAT), true);
  v.setBigUint64(o + 8, addr64(e.dst, "dst", FORMAT), true);
  v.setUint32(o + 16, field(e.bytes, 32, "bytes", FORMAT), true);
  v.setUint16(o + 20, field(e.trigger, 16, "trigger", FORMAT), true);
  v.setUint16(o + 22, field(e.semaN, 16, "sema_n", FORMAT), true);
  v.setBigUint64(o + 24, addr64(e.sema, "sema", FORMAT), true);
  v.setUint32(o + 32, field(e.block, 32, "block", FORMAT), true);
}

/**
 * A proxy work queue as it is composed: each entry packed as it is appended (40 bytes, not an
 * object: a program across many nodes appends millions), or only counted where the composition
 * keeps no image (the streaming pass, which makes descriptors only: the counting pass before it
 * packed the same entries).
 */
export class ProxyFifo {
  /** Entries appended, and the sum of their triggers (what the queue's semaphore ends at). */
  count = 0;
  triggers = 0;
  /** The packed entries (kept ones), and a view of the bytes they are in now. */
  private readonly kept: GrownBytes | undefined;
  private view: DataView | undefined;

  constructor(keep = true) {
    this.kept = keep ? new GrownBytes(16 * PROXY_ENTRY_BYTES) : undefined;
  }

  push(...entries: ProxyEntry[]): void {
    for (const e of entries) {
      const k = this.kept;
      if (k) {
        const b = k.grow(PROXY_ENTRY_BYTES);
        if (this.view?.buffer !== b.buffer) this.view = new DataView(b.buffer);
        packProxyEntry(this.view, k.length - PROXY_ENTRY_BYTES, e);
      }
      this.count++;
      this.triggers += e.trigger;
    }
  }

  /** The packed entries, in order. */
  packed(): Uint8Array {
    if (!this.kept) throw new RangeError("a proxy fifo that keeps no entries has none to pack");
    return this.kept.view();
  }
}

export function decodeProxyEntry(fifo: Uint8Array, i: number): ProxyEntry {
  const v = new DataView(fifo.buffer, fifo.byteOffset + i * PROXY_ENTRY_BYTES, PROXY_ENTRY_BYTES);
  return { src: readAddr(v, 0), dst: readAddr(v, 8), bytes: v.getUint32(16, true), trigger: v.getUint16(20, true), semaN: v.getUint16(22, true), sema: readAddr(v, 24), block: v.getUint32(32, true) };
}
