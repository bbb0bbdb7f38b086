// Ring chunk sizing and the element ranges each (block, group, channel, half) step moves.
import { CompileError } from "../ir/errors.ts";

/**
 * `set_dynamic_chunk_size`: new = granule + (total >> 5) - 1, aligned down to the granule, where
 * total = chunk * nr_channel_chunks; returns the new chunk (elements) and channel-chunk count.
 */
export function setDynamicChunkSize(chunkElems: number, nrChannelChunks: number, granule = 1): { chunk: number; nrChannelChunks: number } {
  const total = chunkElems * nrChannelChunks;
  let chunk = granule + Math.floor(total / 32) - 1;
  chunk -= chunk % granule;
  return { chunk, nrChannelChunks: Math.floor(total / chunk) };
}

/** Round up to an even count (ring chunks must be even so the halves are equal). */
export function evenUp(n: number): number {
  return n + (n & 1);
}

export interface ChunkPlan {
  /** Elements per block (one block per group rank). */
  readonly blockElems: number;
  readonly chunkElems: number;
  readonly channels: number;
  /** Chunk groups: the whole ring schedule repeats this many times (`pgta`). */
  readonly groups: number;
  /** Bytes of one receive-buffer slot (the largest half chunk). */
  readonly halfBytes: number;
}

export const NR_CHANNEL_CHUNKS = 32;

export function planChunks(blockElems: number, chunkBytes: number, esize: number, channels: number): ChunkPlan {
  let chunk = Math.floor(chunkBytes / esize);
  chunk = setDynamicChunkSize(chunk, NR_CHANNEL_CHUNKS).chunk;
  chunk -= chunk & 1;
  if (chunk < 2) throw new CompileError("CMP1101", `chunk of ${chunkBytes} bytes holds fewer than 2 elements of ${esize} bytes`, { path: "chunkBytes", value: chunkBytes });
  const span = channels * chunk;
  const groups = Math.max(1, Math.ceil(blockElems / span));
  return { blockElems, chunkElems: chunk, channels, groups, halfBytes: (chunk / 2) * esize };
}

/** Element range [lo, hi) of channel `c` in chunk group `g` of a block of `blockLen` elements (<= blockElems). */
export function channelRange(p: ChunkPlan, g: number, c: number, blockLen: number): { lo: number; hi: number } {
  const span = p.channels * p.chunkElems;
  const base = g * span;
  let chunk = p.chunkElems;
  if (g === p.groups - 1) {
    // The short last group is re-clamped from what remains (even, never larger than the chunk).
    const remained = p.blockElems - base;
    if (remained <= 0) return { lo: 0, hi: 0 };
    chunk = Math.min(p.chunkElems, evenUp(Math.ceil(remained / p.channels)));
  }
  const lo = Math.min(base + c * chunk, blockLen);
  const hi = Math.min(lo + chunk, base + span, blockLen);
  return { lo, hi: Math.max(lo, hi) };
}

/** Split a range into its H0 and H1 halves. */
export function halves(r: { lo: number; hi: number }): [{ lo: number; hi: number }, { lo: number; hi: number }] {
  const mid = r.lo + Math.ceil((r.hi - r.lo) / 2);
  return [
    { lo: r.lo, hi: mid },
    { lo: mid, hi: r.hi },
  ];
}
