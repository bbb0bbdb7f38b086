// Device HBM as sparse 16 KiB pages. A timing-only run keeps the bytes of the ranges the image
// loads (the constants semaphore writes copy) and nothing else: the data its DMA moves is never
// read back, so neither kept nor computed.
import type { SteadyVisitor } from "../kernel/steady.ts";
import { copyBytes, takeBytes } from "./arena.ts";

/**
 * Bytes a page holds. A values check of 1,024 ranks at 64 KiB a rank writes a few bytes here and
 * there in 156 pages of 64 KiB a device (2.6 GB of pages for 256 devices, and a collection each
 * 64 MB of them): 16 KiB pages were 2-5 % quicker there and 77 MB smaller, and the same at 64 MiB
 * a rank (4 KiB pages: 6 % quicker, 4.5 % slower).
 */
export const PAGE_BYTES = 16384;
const PAGE = PAGE_BYTES;
/** A page of zeros, never written (`each` where nothing was). */
const ZEROS = new Uint8Array(PAGE);
/** The most pages one allocation holds (4 MiB). */
const SLAB_PAGES = 256;

export class DeviceMemory {
  private readonly pages = new Map<number, Uint8Array>();
  /** Timing-only runs: the loaded ranges, the only ones whose bytes are kept. */
  private readonly loaded: { start: number; end: number }[] = [];
  /** Writes that have kept bytes so far. */
  keptWrites = 0;
  /** False: only loaded ranges hold bytes (other reads give zeros, other writes are dropped). */
  readonly storePayload: boolean;

  constructor(storePayload: boolean) {
    this.storePayload = storePayload;
  }

  /** Steady state: a period must keep no bytes (a timing-only run's kept bytes are its constants). */
  steady(v: SteadyVisitor): void {
    this.keptWrites = v.level(this.keptWrites, false);
  }

  /**
   * The image's initial bytes at `off`. Whole pages of them not yet written are taken as they are
   * (no copy: a rank's input at 64 MiB was a tenth of a values-checked run), and copied at their
   * first write, so the image's bytes are never changed.
   */
  load(off: number, bytes: Uint8Array): void {
    if (!this.storePayload) this.loaded.push({ start: off, end: off + bytes.length });
    eachPage(off, bytes.length, (p, po, n, done) => {
      if (n === PAGE && !this.pages.has(p)) {
        this.pages.set(p, bytes.subarray(done, done + PAGE));
        this.shared.add(p);
        this.keptWrites++;
      } else this.write(p * PAGE + po, bytes.subarray(done, done + n));
    });
  }

  /** Pages that are the image's bytes (`load`), copied before they are written. */
  private readonly shared = new Set<number>();

  /**
   * The kept bytes of [off, off + len) in order, a page at a time: `fn` gets views (valid until
   * the next write; zeros where nothing was written) and where each starts; it stops the walk by
   * returning false.
   */
  each(off: number, len: number, fn: (bytes: Uint8Array, at: number) => boolean): void {
    eachPage(off, len, (p, po, n, done) => {
      const page = this.dropped(p * PAGE + po, n) ? undefined : this.pages.get(p);
      return fn(page ? page.subarray(po, po + n) : ZEROS.subarray(0, n), done);
    });
  }

  /** True when the bytes of [off, off+len) are not kept (a timing-only run, outside the loaded ranges). */
  dropped(off: number, len: number): boolean {
    if (this.storePayload) return false;
    for (const r of this.loaded) if (off >= r.start && off + len <= r.end) return false;
    return true;
  }

  /**
   * The widest range around `off` whose bytes are all dropped (it meets no loaded range): undefined
   * where `off` itself is kept. (Steady state: descriptors reading there read alike.)
   */
  droppedAround(off: number): Region | undefined {
    if (this.storePayload) return undefined;
    let start = 0;
    let end = Number.MAX_SAFE_INTEGER;
    for (const r of this.loaded) {
      if (off >= r.start && off < r.end) return undefined;
      if (r.end <= off) start = Math.max(start, r.end);
      else end = Math.min(end, r.start);
    }
    return { start, end };
  }

  read(off: number, len: number): Uint8Array {
    if (this.dropped(off, len)) return takeBytes(len);
    // Within one page (a semaphore constant, most reads): a copy of its bytes.
    const p0 = Math.floor(off / PAGE);
    if (len > 0 && Math.floor((off + len - 1) / PAGE) === p0) {
      const page = this.pages.get(p0);
      const po = off - p0 * PAGE;
      return page ? copyBytes(page.subarray(po, po + len)) : takeBytes(len);
    }
    const out = takeBytes(len);
    eachPage(off, len, (p, po, n, done) => {
      const page = this.pages.get(p);
      if (page) out.set(page.subarray(po, po + n), done);
    });
    return out;
  }

  /** The bytes at `off`, to read at once: a view of its page where they lie in one (valid until the next write), else a copy. */
  peek(off: number, len: number): Uint8Array {
    const p0 = Math.floor(off / PAGE);
    const po = off - p0 * PAGE;
    if (len > 0 && po + len <= PAGE && !this.dropped(off, len)) {
      const page = this.pages.get(p0);
      if (page) return page.subarray(po, po + len);
    }
    return this.read(off, len);
  }

  write(off: number, bytes: Uint8Array): void {
    if (this.dropped(off, bytes.length)) return;
    this.keptWrites++;
    // Within one page (most writes): no view made.
    const p0 = Math.floor(off / PAGE);
    const po0 = off - p0 * PAGE;
    if (po0 + bytes.length <= PAGE) {
      this.page(p0).set(bytes, po0);
      return;
    }
    eachPage(off, bytes.length, (p, po, n, done) => void this.page(p).set(bytes.subarray(done, done + n), po));
  }

  /** Zeroed pages not yet used: the rest of the last slab taken. */
  private slab: Uint8Array = new Uint8Array(0);
  private slabPages = 0;

  /**
   * A zeroed page, cut from a slab: slabs of one page, then twice as many each time up to
   * SLAB_PAGES (one allocation a page made each a garbage collector's concern: a tenth of a run
   * of thousands of devices; a device that writes a few pages takes a few).
   */
  private fresh(): Uint8Array {
    if (this.slab.length === 0) {
      this.slabPages = Math.min(SLAB_PAGES, Math.max(1, 2 * this.slabPages));
      this.slab = new Uint8Array(this.slabPages * PAGE);
    }
    const page = this.slab.subarray(0, PAGE);
    this.slab = this.slab.subarray(PAGE);
    return page;
  }

  /** The page written last, and its number (writes come in runs to one page). */
  private lastPage: Uint8Array | undefined;
  private lastP = -1;

  /** Page `p` to write, made (zeros) at its first write (an image's page copied then). */
  private page(p: number): Uint8Array {
    if (p === this.lastP) return this.lastPage!;
    let page = this.pages.get(p);
    if (!page || this.shared.delete(p)) {
      const own = this.fresh();
      if (page) own.set(page);
      this.pages.set(p, (page = own));
    }
    this.lastP = p;
    this.lastPage = page;
    return page;
  }
}

/**
 * [off, off + len) page by page: page `p`, the offset in it, the bytes there and how many came
 * before; `fn` returning false stops.
 */
function eachPage(off: number, len: number, fn: (p: number, po: number, n: number, done: number) => boolean | void): void {
  let done = 0;
  while (done < len) {
    const a = off + done;
    const p = Math.floor(a / PAGE);
    const po = a - p * PAGE;
    const n = Math.min(len - done, PAGE - po);
    if (fn(p, po, n, done) === false) return;
    done += n;
  }
}

/** A range of HBM offsets, [start, end). */
export interface Region {
  readonly start: number;
  readonly end: number;
}

/** The region of the sorted, disjoint `regions` that holds all of [off, off + len), if one does. */
export function regionAt(regions: readonly Region[], off: number, len: number): Region | undefined {
  let lo = 0;
  let hi = regions.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const r = regions[mid]!;
    if (off < r.start) hi = mid - 1;
    else if (off >= r.end) lo = mid + 1;
    else return off + len <= r.end ? r : undefined;
  }
  return undefined;
}
