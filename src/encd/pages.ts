// Descriptor storage: a growable list of 16-byte descriptors kept in fixed pages, so a ring grows
// without copying, and a streamed ring drops the pages its engine has run (the runtime re-arms a
// finite ring in place; the simulator keeps what is in flight, not the whole op).
import { DESC_BYTES, type DescSlot } from "./udma.ts";
import { LITTLE_ENDIAN, wordsOf } from "./bits.ts";

/** Descriptors per page: 8 KiB pages. */
export const PAGE_DESCS = 512;
const PAGE_SHIFT = 9;
const EMPTY = new Uint8Array(0);
/**
 * Pages a streamed ring has run and dropped, handed to the next ring that grows (every packer
 * writes all 16 bytes of a descriptor, so a page's old contents are never read): a run allocates
 * about what it holds in flight instead of a fresh page per 512 descriptors (first touch of fresh
 * memory is dear on a virtual machine). At most this many wait (64 MiB a thread): a steady-state
 * jump drops a round's skipped pages at once, and its next round composes as many (ring8 1 GiB:
 * 256 took 8,576 fresh pages of its 16,256; 2,048 take 1,262); a chunk group's composing takes
 * more than the engines dropped since the last (the older runtime's two-node 1 GiB flat ring:
 * 28,422 fresh pages at 2,048, 18,294 at 8,192, 10.8-11.3 -> 9.8-10.7 s, 406 -> 323 MB).
 */
const POOL_MAX = 8192;
const pool: Uint8Array[] = [];
/**
 * New pages are cut from slabs of 64 (512 KiB): one array buffer, not 64, for the garbage
 * collector to account and sweep (the time ring8 1 GiB spent making pages is first touches of
 * fresh memory either way: the pool above is what saves it).
 */
const SLAB_PAGES = 64;
let slab: Uint8Array = new Uint8Array(0);

/**
 * A program's rings are done with (its run, or its draining, has ended): the free pages go too.
 * A pooled page keeps its whole slab alive, and the pages a run still held at its end die with
 * its rings: a pool kept from run to run came to hold pages of ever more slabs, the rest of each
 * dead (a fit's trials, each running its biggest points streamed: about 60 MB more a trial, up
 * to the pool's bound of 8,192 slabs, 4 GiB). A run's own reuse, what the pool is for, is kept.
 */
export function forgetFreePages(): void {
  pool.length = 0;
  slab = new Uint8Array(0);
}

/** Free pages waiting to be handed out again (tests). */
export function freePages(): number {
  return pool.length;
}

/** A page from the pool, else a fresh one (zeros) from the slab. */
function takePage(): Uint8Array {
  const kept = pool.pop();
  if (kept) return kept;
  if (slab.length === 0) slab = new Uint8Array(DESC_BYTES * PAGE_DESCS * SLAB_PAGES);
  const page = slab.subarray(0, DESC_BYTES * PAGE_DESCS);
  slab = slab.subarray(DESC_BYTES * PAGE_DESCS);
  return page;
}

export class DescPages implements DescSlot {
  /** Descriptors appended so far. */
  count = 0;
  /** Pages held: pages[k] holds descriptors from (first + k) * PAGE_DESCS. */
  private pages: Uint8Array[] = [];
  private first = 0;
  /** Counting only: every descriptor is written to one scratch slot (it holds the last one). */
  private readonly scratch: Uint8Array | undefined;
  /** The slot `next` handed out last (the list is its own slot: no allocation per descriptor). */
  bytes: Uint8Array = EMPTY;
  offset = 0;
  /** Its page's words (`wordsOf`), where they are a view of its bytes. */
  words: Uint32Array | undefined = undefined;
  /** The page `words` views. */
  private wordsPage: Uint8Array = EMPTY;

  /**
   * Descriptors appended to this list and to the others that share the counter (a streamed
   * program's lists: what its stream has composed, without summing a thousand lists every step).
   */
  private readonly appended: { n: number };

  /** `keep` false: count and pack descriptors without keeping them (the last one stays readable); `appended`: a counter shared with other lists. */
  constructor(keep = true, appended: { n: number } = { n: 0 }) {
    this.scratch = keep ? undefined : new Uint8Array(DESC_BYTES);
    this.appended = appended;
  }

  /** Pages held now (what a streamed ring costs in memory). */
  get heldPages(): number {
    return this.pages.length;
  }

  get keeps(): boolean {
    return this.scratch === undefined;
  }

  /** Append one descriptor: where to pack it (valid until the next call). */
  next(): DescSlot {
    const i = this.count++;
    this.appended.n++;
    if (this.scratch) {
      this.slot(this.scratch, 0);
      return this;
    }
    const page = (i >>> PAGE_SHIFT) - this.first;
    if (page === this.pages.length) this.pages.push(takePage());
    this.slot(this.pages[page]!, DESC_BYTES * (i & (PAGE_DESCS - 1)));
    return this;
  }

  /**
   * Append `k` descriptors in one step where they fit in one page, for a packer that writes their
   * words itself: the index in `words` of the first one's first word; -1, with nothing appended,
   * where they do not fit, the list keeps none, or its pages have no word view (a big-endian host):
   * append them with `next`.
   */
  run(k: number): number {
    const at = this.count & (PAGE_DESCS - 1);
    if (this.scratch || !LITTLE_ENDIAN || k < 1 || at + k > PAGE_DESCS) return -1;
    this.next();
    this.count += k - 1;
    this.appended.n += k - 1;
    return this.offset >>> 2;
  }

  /** A counting list: the slot that holds its last descriptor, to pack it there (a tally's last RX). */
  lastSlot(): DescSlot {
    if (!this.scratch) throw new RangeError("lastSlot of a list that keeps its descriptors");
    this.slot(this.scratch, 0);
    return this;
  }

  /** Hand out `offset` of `bytes` (with its words, looked up when the page changes). */
  private slot(bytes: Uint8Array, offset: number): void {
    if (bytes !== this.wordsPage) {
      this.wordsPage = bytes;
      this.words = LITTLE_ENDIAN ? wordsOf(bytes) : undefined;
    }
    this.bytes = bytes;
    this.offset = offset;
  }

  /** The page holding descriptor `i` (read it at `offsetOf(i)`); `i` must be held. */
  page(i: number): Uint8Array {
    if (this.scratch) {
      if (i !== this.count - 1) throw new RangeError(`descriptor ${i} of a counting list (only the last, ${this.count - 1}, is kept)`);
      return this.scratch;
    }
    const p = this.pages[(i >>> PAGE_SHIFT) - this.first];
    if (!p || i >= this.count) throw new RangeError(`descriptor ${i} is not held (held: pages from ${this.first}, ${this.count} appended)`);
    return p;
  }

  offsetOf(i: number): number {
    return this.scratch ? 0 : DESC_BYTES * (i & (PAGE_DESCS - 1));
  }

  /** Copy descriptors [from, to) into `out` at byte `at` (they must be held). */
  copyOut(from: number, to: number, out: Uint8Array, at: number): void {
    for (let i = from; i < to; ) {
      const n = Math.min(to - i, PAGE_DESCS - (i & (PAGE_DESCS - 1)));
      const o = this.offsetOf(i);
      out.set(this.page(i).subarray(o, o + n * DESC_BYTES), at);
      at += n * DESC_BYTES;
      i += n;
    }
  }

  /** Append `n` descriptors from `src` at byte `at` (as `next` and a copy would, page by page). */
  append(src: Uint8Array, at: number, n: number): void {
    if (this.scratch) throw new RangeError("a counting descriptor list keeps no descriptors to append to");
    while (n > 0) {
      const room = PAGE_DESCS - (this.count & (PAGE_DESCS - 1));
      const k = Math.min(n, room);
      const slot = this.next();
      slot.bytes.set(src.subarray(at, at + k * DESC_BYTES), slot.offset);
      this.count += k - 1;
      this.appended.n += k - 1;
      at += k * DESC_BYTES;
      n -= k;
    }
  }

  /** Descriptor `i`'s page is still held (not dropped: a dropped page is handed out again). */
  holds(i: number): boolean {
    return !this.scratch && i >>> PAGE_SHIFT >= this.first && i < this.count;
  }

  /** Drop the pages wholly below descriptor `upTo` (they have been run). */
  release(upTo: number): void {
    const drop = (upTo >>> PAGE_SHIFT) - this.first;
    if (drop <= 0) return;
    const gone = this.pages.splice(0, Math.min(drop, this.pages.length));
    for (const p of gone) if (pool.length < POOL_MAX) pool.push(p);
    this.first += drop;
  }

  /** The descriptors as one array (a copy); `release` drops the pages as they are copied. */
  flat(release = false): Uint8Array {
    if (this.scratch) throw new RangeError("a counting descriptor list keeps no descriptors");
    if (this.first !== 0) throw new RangeError("a released descriptor list cannot be flattened");
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
