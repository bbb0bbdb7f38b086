// A map from disjoint byte ranges [start, end) to values, for the verifier's shadow memory (who
// wrote a range, who read it; which contributions it holds). Pieces are kept sorted in blocks of
// bounded length (so an insert moves at most a block, not the whole map); a write splits the
// pieces it partly covers, and adjacent pieces with equal values merge again.

export interface Piece<V> {
  start: number;
  end: number;
  value: V;
}


export class RangeMap<V> {
  private blocks: Piece<V>[][] = [[]];
  private readonly same: (a: V, b: V) => boolean;
  /** Pieces per block; a block of more than twice that is split. */
  private readonly block: number;

  /** `same`: values that may merge when their pieces touch (never, by default). */
  constructor(same: (a: V, b: V) => boolean = () => false, block = 128) {
    this.same = same;
    this.block = block;
  }

  get size(): number {
    return this.blocks.reduce((n, b) => n + b.length, 0);
  }

  /** The block holding the first piece that ends after `at` (the last block if none does), and its index there. */
  private find(at: number): [number, number] {
    const bs = this.blocks;
    let lo = 0;
    let hi = bs.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const b = bs[mid]!;
      if (b.length === 0 || b[b.length - 1]!.end <= at) lo = mid + 1;
      else hi = mid;
    }
    const p = bs[lo]!;
    let l = 0;
    let h = p.length;
    while (l < h) {
      const mid = (l + h) >> 1;
      if (p[mid]!.end <= at) l = mid + 1;
      else h = mid;
    }
    return [lo, l];
  }

  /** Visit [start, end) in address order: each stored piece clipped to it, and each gap (value undefined). */
  visit(start: number, end: number, fn: (a: number, b: number, value: V | undefined) => void): void {
    let [b, i] = this.find(start);
    let at = start;
    const bs = this.blocks;
    while (b < bs.length && at < end) {
      const p = bs[b]!;
      if (i >= p.length) {
        b++;
        i = 0;
        continue;
      }
      const x = p[i]!;
      if (x.start >= end) break;
      if (x.start > at) fn(at, x.start, undefined);
      const e = Math.min(x.end, end);
      fn(Math.max(x.start, at), e, x.value);
      at = e;
      i++;
    }
    if (at < end) fn(at, end, undefined);
  }

  /**
   * Rewrite [start, end): `fn` maps each piece of it (gaps as undefined) to its new value
   * (undefined leaves a gap). Pieces partly outside keep their value there.
   */
  update(start: number, end: number, fn: (value: V | undefined, a: number, b: number) => V | undefined): void {
    if (end <= start) return;
    const bs = this.blocks;
    const [b0, i0] = this.find(start);
    const first = bs[b0]!;
    // The common case: exactly one stored piece, rewritten in place.
    const only = first[i0];
    if (only && only.start === start && only.end === end) {
      const v = fn(only.value, start, end);
      if (v === undefined) this.replace(b0, i0, b0, i0 + 1, []);
      else {
        only.value = v;
        this.mergeAround(b0, i0);
      }
      return;
    }
    const out: Piece<V>[] = [];
    let b = b0;
    let i = i0;
    let at = start;
    for (;;) {
      const p = bs[b]!;
      if (i >= p.length) {
        if (b + 1 >= bs.length) break;
        b++;
        i = 0;
        continue;
      }
      const x = p[i]!;
      if (x.start >= end) break;
      if (x.start < start) this.emit(out, x.start, start, x.value);
      if (x.start > at) this.emit(out, at, x.start, fn(undefined, at, x.start));
      const a = Math.max(x.start, start);
      const e = Math.min(x.end, end);
      this.emit(out, a, e, fn(x.value, a, e));
      if (x.end > end) this.emit(out, end, x.end, x.value);
      at = e;
      i++;
    }
    if (at < end) this.emit(out, at, end, fn(undefined, at, end));
    this.replace(b0, i0, b, i, out);
  }

  /** Set [start, end) to one value. */
  set(start: number, end: number, value: V): void {
    this.update(start, end, () => value);
  }

  private emit(out: Piece<V>[], a: number, b: number, v: V | undefined): void {
    if (v === undefined || b <= a) return;
    const last = out[out.length - 1];
    if (last && last.end === a && this.same(last.value, v)) last.end = b;
    else out.push({ start: a, end: b, value: v });
  }

  /** Replace pieces from (b0, i0) up to, not including, (b1, i1) with `out`; then merge and rebalance. */
  private replace(b0: number, i0: number, b1: number, i1: number, out: Piece<V>[]): void {
    const bs = this.blocks;
    let block: Piece<V>[];
    if (b0 === b1) {
      block = bs[b0]!;
      if (out.length === 1 && i1 === i0) block.splice(i0, 0, out[0]!);
      else block.splice(i0, i1 - i0, ...out);
    } else {
      block = bs[b0]!.slice(0, i0).concat(out, bs[b1]!.slice(i1));
      bs.splice(b0, b1 - b0 + 1, block);
    }
    // Merge at both edges of what changed (the pieces inside were merged as they were emitted).
    const last = i0 + out.length;
    if (last < block.length || out.length > 0) this.mergeAround(b0, Math.min(last, block.length - 1));
    this.mergeAround(b0, i0);
    this.rebalance(b0);
  }

  /** Merge piece (b, i) with its neighbours (possibly in the adjacent blocks) when they touch and are the same. */
  private mergeAround(b: number, i: number): void {
    const bs = this.blocks;
    // The merge at the other edge may have emptied and dropped this block (its one piece joined
    // the previous one): then there is nothing left here to merge.
    const p = bs[b];
    if (!p || i < 0 || i >= p.length) return;
    const x = p[i]!;
    const nextBlock = i + 1 < p.length ? p : bs[b + 1];
    const ni = i + 1 < p.length ? i + 1 : 0;
    const y = nextBlock?.[ni];
    if (y && x.end === y.start && this.same(x.value, y.value)) {
      x.end = y.end;
      nextBlock!.splice(ni, 1);
      if (nextBlock !== p && nextBlock!.length === 0) bs.splice(b + 1, 1);
    }
    const prevBlock = i > 0 ? p : bs[b - 1];
    const pi = i > 0 ? i - 1 : (prevBlock?.length ?? 0) - 1;
    const w = prevBlock?.[pi];
    if (w && w.end === x.start && this.same(w.value, x.value)) {
      w.end = x.end;
      p.splice(i, 1);
      if (p.length === 0 && bs.length > 1) bs.splice(b, 1);
    }
  }

  /** Keep blocks between 1 and twice `block` pieces. */
  private rebalance(b: number): void {
    const bs = this.blocks;
    const p = bs[b];
    if (!p) return;
    if (p.length > 2 * this.block) {
      const parts: Piece<V>[][] = [];
      for (let k = 0; k < p.length; k += this.block) parts.push(p.slice(k, k + this.block));
      bs.splice(b, 1, ...parts);
    } else if (p.length === 0 && bs.length > 1) bs.splice(b, 1);
  }
}
