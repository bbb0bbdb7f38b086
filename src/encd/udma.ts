// The 16-byte UDMA descriptor (little-endian words) and the CCE reduce meta-control words.
//
//  0x0  u32 len_ctrl   31 CONCAT | 30 DMB | 29 STRONG_ORDER_WR (rx) | 28 INT_EN | 27 LAST | 26 FIRST
//                      25:24 RING_ID | 23 META | 15:0 LENGTH (0 encodes 65536)
//  0x4  u32 meta_ctrl  (tx) op-class word; (rx) buf2_ptr_lo, always 0 for memory-to-memory
//  0x8  u64 buf_ptr    (tx) source address; (rx) destination address
//
// A CCE (in-DMA reduce) packet on the TX ring is a META descriptor followed by one descriptor per
// source; its META descriptor carries the op word in meta_ctrl and the packet length in word 2.
import { SdmaCceType } from "../ir/enums.ts";
import { EncodeError } from "../ir/errors.ts";
import { checkAddr, field, get32, put32 } from "./bits.ts";

export const DESC_BYTES = 16;
export const MAX_DESC_BYTES = 65536;

export const LEN_CTRL = {
  CONCAT: 0x80000000,
  DMB: 0x40000000,
  STRONG_ORDER_WR: 0x20000000,
  INT_EN: 0x10000000,
  LAST: 0x08000000,
  FIRST: 0x04000000,
  RING_ID_SHIFT: 24,
  RING_ID_MASK: 0x03000000,
  META: 0x00800000,
  LENGTH_MASK: 0x0000ffff,
} as const;

/** Default meta_ctrl of a plain copy: is_last_block | is_first_block | copy_source_data | ssmae_op=0b010. */
export const META_CTRL_COPY = 0x01080003;
/** Base of the CCE op words (bit 25: CCE meta valid); ADD/MAX/MIN share it, bits 2:0 carry SDMA_CCETYPE. */
export const META_CTRL_CCE_BASE = 0x02000000;
/** Word-2 marker of a MIN/MAX compute descriptor. */
export const CCE_W2_MINMAX = 0x02000000;

export interface DescFlags {
  readonly first?: boolean;
  readonly last?: boolean;
  readonly concat?: boolean;
  readonly dmb?: boolean;
  readonly intEn?: boolean;
  readonly meta?: boolean;
  readonly strongOrder?: boolean;
}

const FORMAT = "udma_desc";

/** Encode a byte length into the 16-bit LENGTH field: 1..65536, with 65536 stored as 0. */
export function encodeLength(bytes: number): number {
  if (!Number.isInteger(bytes) || bytes < 1 || bytes > MAX_DESC_BYTES) {
    throw new EncodeError("ENC1101", `descriptor length ${bytes} is outside 1..65536`, { path: `${FORMAT}.length`, value: bytes });
  }
  return bytes & 0xffff;
}
export function decodeLength(lenCtrl: number): number {
  const l = lenCtrl & LEN_CTRL.LENGTH_MASK;
  return l === 0 ? MAX_DESC_BYTES : l;
}

export function lenCtrl(bytes: number, ringId: number, f: DescFlags): number {
  field(ringId, 2, "ring_id", FORMAT);
  let w = encodeLength(bytes) | (ringId << LEN_CTRL.RING_ID_SHIFT);
  if (f.concat) w |= LEN_CTRL.CONCAT;
  if (f.dmb) w |= LEN_CTRL.DMB;
  if (f.strongOrder) w |= LEN_CTRL.STRONG_ORDER_WR;
  if (f.intEn) w |= LEN_CTRL.INT_EN;
  if (f.last) w |= LEN_CTRL.LAST;
  if (f.first) w |= LEN_CTRL.FIRST;
  if (f.meta) w |= LEN_CTRL.META;
  return w >>> 0;
}

/** Where a packer writes: a byte array and the offset of the descriptor in it (4-aligned where `words` is given). */
export interface DescSlot {
  readonly bytes: Uint8Array;
  readonly offset: number;
  /** The same bytes as little-endian words (`bits.wordsOf`: a view, on a little-endian host), when the slot has them. */
  readonly words?: Uint32Array | undefined;
}

/** A descriptor's four little-endian words into `at` (through its words, where it has them). */
export function writeDesc(at: DescSlot, w0: number, w1: number, w2: number, w3: number): Uint8Array {
  const b = at.bytes;
  const o = at.offset;
  const w = at.words;
  if (w) {
    // The slot's words (a little-endian host's view of its bytes): one store per word.
    const i = o >>> 2;
    w[i] = w0;
    w[i + 1] = w1;
    w[i + 2] = w2;
    w[i + 3] = w3;
    return b;
  }
  put32(b, o, w0);
  put32(b, o + 4, w1);
  put32(b, o + 8, w2);
  put32(b, o + 12, w3);
  return b;
}

const TWO_32 = 0x100000000;

function fresh(): DescSlot {
  return { bytes: new Uint8Array(DESC_BYTES), offset: 0 };
}

/**
 * A descriptor of words 0 and 1 made already and an address (a checked one: words 2 and 3) into
 * `at`: what every data descriptor's packing ends with.
 */
export function writeAddressed(at: DescSlot, w0: number, w1: number, addr: number): Uint8Array {
  const hi = Math.floor(addr / TWO_32);
  // (The low word by subtraction: exact below 2^53, where a float modulo is a library call.)
  return writeDesc(at, w0, w1, addr - hi * TWO_32, hi);
}

/** `writeAddressed` into a page's words (a little-endian host's view of its bytes) from word `i`. */
export function storeAddressed(w: Uint32Array, i: number, w0: number, w1: number, addr: number): void {
  const hi = Math.floor(addr / TWO_32);
  w[i] = w0;
  w[i + 1] = w1;
  w[i + 2] = addr - hi * TWO_32;
  w[i + 3] = hi;
}

/** TX (M2S) data descriptor: reads `bytes` at `src`. */
export function packTx(src: number, bytes: number, ringId: number, flags: DescFlags, metaCtrl = META_CTRL_COPY, at: DescSlot = fresh()): Uint8Array {
  checkAddr(src, "buf_ptr", FORMAT);
  return writeAddressed(at, lenCtrl(bytes, ringId, flags), field(metaCtrl, 32, "meta_ctrl", FORMAT), src);
}

/** RX (S2M) descriptor: writes `bytes` at `dst`; buf2_ptr_lo is 0. */
export function packRx(dst: number, bytes: number, ringId: number, flags: DescFlags = {}, at: DescSlot = fresh()): Uint8Array {
  checkAddr(dst, "buf1_ptr", FORMAT);
  return writeAddressed(at, lenCtrl(bytes, ringId, flags), 0, dst);
}

/** The CCE op word for ADD / MAX / MIN over one SDMA dtype (input = output = accumulation dtype). */
export function cceMetaWord(op: SdmaCceType, sdmaDtype: number): number {
  field(sdmaDtype, 4, "dtype", FORMAT);
  switch (op) {
    case SdmaCceType.ADD:
      // (sub&7) | out_dt<<12 | accum_dt<<16 | last<<7 | 0x2000000
      return (META_CTRL_CCE_BASE | (sdmaDtype << 12) | (sdmaDtype << 16) | (1 << 7) | op) >>> 0;
    case SdmaCceType.MAX:
    case SdmaCceType.MIN:
      // (sub&7) | in_dt<<8 | out_dt<<12 | accum_dt<<16 | last<<4 | 0x2000000 (no constant: bits 22:20 = 0)
      return (META_CTRL_CCE_BASE | (sdmaDtype << 8) | (sdmaDtype << 12) | (sdmaDtype << 16) | (1 << 4) | op) >>> 0;
    default:
      throw new EncodeError("ENC1102", `unsupported op! (${op})`, { path: `${FORMAT}.cce_op`, value: op });
  }
}

/** META descriptor opening a CCE packet of `bytes` output bytes. */
export function packCceMeta(op: SdmaCceType, sdmaDtype: number, bytes: number, ringId: number, at: DescSlot = fresh(), dests = 1): Uint8Array {
  // W0 carries no length (it lives in word 2, 24 bits); the ring id rides in bits 25:24 as usual.
  encodeLength(bytes);
  const w0 = (LEN_CTRL.FIRST | LEN_CTRL.META | (field(ringId, 2, "ring_id", FORMAT) << LEN_CTRL.RING_ID_SHIFT)) >>> 0;
  const w2 = (bytes & 0xffffff) | (op === SdmaCceType.ADD ? 0 : CCE_W2_MINMAX);
  // W3 bits 7:0: destinations - 1 (replication; 0 for every single-destination packet).
  return writeDesc(at, w0, cceMetaWord(op, sdmaDtype), w2, field(dests - 1, 8, "num_dests - 1", FORMAT));
}

export type DecodedTx =
  | {
      readonly kind: "data";
      readonly length: number;
      readonly ringId: number;
      readonly first: boolean;
      readonly last: boolean;
      readonly concat: boolean;
      readonly dmb: boolean;
      readonly metaCtrl: number;
      readonly src: number;
    }
  | {
      readonly kind: "cce";
      readonly length: number;
      readonly ringId: number;
      readonly op: number;
      readonly dtype: number;
      readonly metaCtrl: number;
      /** Destinations the result is written to (CCE replication; 1 on v2). */
      readonly dests: number;
    };

export interface DecodedRx {
  readonly length: number;
  readonly ringId: number;
  readonly last: boolean;
  readonly strongOrder: boolean;
  readonly dst: number;
}

function inRing(ring: Uint8Array, offset: number): void {
  if (!(offset >= 0 && offset + DESC_BYTES <= ring.length)) throw new RangeError(`descriptor at byte ${offset} is outside a ${ring.length}-byte ring`);
}

/**
 * A descriptor's fields in one record the caller owns and reuses (the simulator's engines decode
 * millions of them): what `decodeTx` / `decodeRx` return, without an object per descriptor. For a
 * TX descriptor `meta` tells a CCE META descriptor (length, op, dtype, dests) from a data one
 * (length, last, concat, first, dmb, src); an RX descriptor fills length, ringId, last, strongOrder, dst.
 */
export interface DescFields {
  meta: boolean;
  length: number;
  ringId: number;
  first: boolean;
  last: boolean;
  concat: boolean;
  dmb: boolean;
  strongOrder: boolean;
  metaCtrl: number;
  op: number;
  dtype: number;
  dests: number;
  src: number;
  dst: number;
}

export function descFields(): DescFields {
  return { meta: false, length: 0, ringId: 0, first: false, last: false, concat: false, dmb: false, strongOrder: false, metaCtrl: 0, op: 0, dtype: 0, dests: 1, src: 0, dst: 0 };
}

/** Decode the TX descriptor at `offset` into `out`. */
export function readTx(ring: Uint8Array, offset: number, out: DescFields): DescFields {
  inRing(ring, offset);
  return txOf(get32(ring, offset), get32(ring, offset + 4), get32(ring, offset + 8), get32(ring, offset + 12), out);
}

/** Decode the RX descriptor at `offset` into `out`. */
export function readRx(ring: Uint8Array, offset: number, out: DescFields): DescFields {
  inRing(ring, offset);
  return rxOf(get32(ring, offset), get32(ring, offset + 8), get32(ring, offset + 12), out);
}

/**
 * The same from a ring's little-endian words (`bits.wordsOf`), the descriptor at word `at` (the
 * engines' path: one load per word). The caller keeps `at` inside the ring.
 */
export function readTxWords(w: Uint32Array, at: number, out: DescFields): DescFields {
  return txOf(w[at]!, w[at + 1]!, w[at + 2]!, w[at + 3]!, out);
}
export function readRxWords(w: Uint32Array, at: number, out: DescFields): DescFields {
  return rxOf(w[at]!, w[at + 2]!, w[at + 3]!, out);
}

/** A TX descriptor's fields from its four words. */
function txOf(w0: number, w1: number, w2: number, w3: number, out: DescFields): DescFields {
  out.ringId = (w0 & LEN_CTRL.RING_ID_MASK) >>> LEN_CTRL.RING_ID_SHIFT;
  out.metaCtrl = w1;
  out.meta = (w0 & LEN_CTRL.META) !== 0;
  if (out.meta) {
    out.length = w2 & 0xffffff;
    out.op = w1 & 7;
    out.dtype = (w1 >>> 16) & 0xf;
    out.dests = (w3 & 0xff) + 1;
    return out;
  }
  out.length = decodeLength(w0);
  out.first = (w0 & LEN_CTRL.FIRST) !== 0;
  out.last = (w0 & LEN_CTRL.LAST) !== 0;
  out.concat = (w0 & LEN_CTRL.CONCAT) !== 0;
  out.dmb = (w0 & LEN_CTRL.DMB) !== 0;
  // The u64 address (NaN above 2^53 - 1, as readAddr), written out here: a call the engines'
  // decode does not inline boxes the address it returns.
  out.src = w3 > 0x1fffff ? Number.NaN : w3 * 0x100000000 + w2;
  return out;
}

/** An RX descriptor's fields from its words 0, 2 and 3 (word 1, buf2_ptr_lo, is unused). */
function rxOf(w0: number, w2: number, w3: number, out: DescFields): DescFields {
  out.length = decodeLength(w0);
  out.ringId = (w0 & LEN_CTRL.RING_ID_MASK) >>> LEN_CTRL.RING_ID_SHIFT;
  out.last = (w0 & LEN_CTRL.LAST) !== 0;
  out.strongOrder = (w0 & LEN_CTRL.STRONG_ORDER_WR) !== 0;
  out.dst = w3 > 0x1fffff ? Number.NaN : w3 * 0x100000000 + w2;
  return out;
}

export function decodeTx(ring: Uint8Array, offset: number): DecodedTx {
  const f = readTx(ring, offset, descFields());
  if (f.meta) return { kind: "cce", length: f.length, ringId: f.ringId, op: f.op, dtype: f.dtype, metaCtrl: f.metaCtrl, dests: f.dests };
  return { kind: "data", length: f.length, ringId: f.ringId, first: f.first, last: f.last, concat: f.concat, dmb: f.dmb, metaCtrl: f.metaCtrl, src: f.src };
}

export function decodeRx(ring: Uint8Array, offset: number): DecodedRx {
  const f = readRx(ring, offset, descFields());
  return { length: f.length, ringId: f.ringId, last: f.last, strongOrder: f.strongOrder, dst: f.dst };
}

/** True when meta_ctrl marks a plain copy (ssmae_op == 0b010), the runtime's is_cme_desc test. */
export function isCmeDesc(metaCtrl: number): boolean {
  return ((metaCtrl >>> 23) & 7) === 2;
}
