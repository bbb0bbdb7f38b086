// Range-checked bit-field packing shared by every wire format.
import { EncodeError } from "../ir/errors.ts";

/** Check that `value` is an integer that fits `width` bits; throw an EncodeError naming the field otherwise. */
export function field(value: number, width: number, name: string, format: string): number {
  const max = width >= 32 ? 0xffffffff : (1 << width) - 1;
  if (!Number.isInteger(value) || value < 0 || value > max) {
    throw new EncodeError("ENC1001", `field ${name}=${value} does not fit ${width} bits in ${format}`, {
      path: `${format}.${name}`,
      value,
    });
  }
  return value;
}

/** Whether a 64-bit address field held as a JS number is one (a safe non-negative integer). */
export function isAddr(value: number): boolean {
  return Number.isSafeInteger(value) && value >= 0;
}

/** Check a 64-bit address field held as a JS number (must be a safe non-negative integer). */
export function checkAddr(value: number, name: string, format: string): number {
  if (!isAddr(value)) {
    throw new EncodeError("ENC1002", `field ${name}=${value} is not a valid 64-bit address in ${format}`, {
      path: `${format}.${name}`,
      value,
    });
  }
  return value;
}

/** A checked 64-bit address field as a bigint (for DataView.setBigUint64). */
export function addr64(value: number, name: string, format: string): bigint {
  return BigInt(checkAddr(value, name, format));
}

/** Store a little-endian u32 at `o` (no view: the hot descriptor paths write bytes directly). */
export function put32(b: Uint8Array, o: number, v: number): void {
  b[o] = v;
  b[o + 1] = v >>> 8;
  b[o + 2] = v >>> 16;
  b[o + 3] = v >>> 24;
}

/** Store a little-endian u16 at `o`. */
export function put16(b: Uint8Array, o: number, v: number): void {
  b[o] = v;
  b[o + 1] = v >>> 8;
}

/** Load a little-endian u32 at `o`. */
export function get32(b: Uint8Array, o: number): number {
  return (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) >>> 0;
}

/** True on a little-endian host: a Uint32Array over little-endian words reads them as they are. */
export const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/**
 * The little-endian u32 words of `bytes` (a multiple of 4 bytes long): a view on them where the
 * host is little-endian and they are 4-byte aligned, else a copy (which does not see later writes).
 */
export function wordsOf(bytes: Uint8Array): Uint32Array {
  if (LITTLE_ENDIAN && bytes.byteOffset % 4 === 0) return new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.length >>> 2);
  const out = new Uint32Array(bytes.length >>> 2);
  for (let i = 0; i < out.length; i++) out[i] = get32(bytes, 4 * i);
  return out;
}

/** Read a u64 that must be a safe JS integer (every address ccsim emits is below 2^53). */
export function readAddr(view: DataView, offset: number): number {
  // As two words (a BigInt per read was most of what decoding a program allocated): a high word
  // above 21 bits puts the value at 2^53 or more.
  const hi = view.getUint32(offset + 4, true);
  if (hi > 0x1fffff) return Number.NaN;
  return hi * 0x100000000 + view.getUint32(offset, true);
}

export function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(" ");
}

/** Records appended to bytes grown in place (doubling): a step stream, a proxy work queue. */
export class GrownBytes {
  bytes: Uint8Array;
  /** Bytes used. */
  length = 0;
  constructor(initial: number) {
    this.bytes = new Uint8Array(initial);
  }
  /** Room for `n` more bytes, at `length - n` (after the call); the bytes they are in. */
  grow(n: number): Uint8Array {
    if (this.length + n > this.bytes.length) {
      const more = new Uint8Array(Math.max(2 * this.bytes.length, this.length + n));
      more.set(this.bytes);
      this.bytes = more;
    }
    this.length += n;
    return this.bytes;
  }
  /**
   * The bytes used, trimmed to them in place (the caller and this one share them, not two copies of
   * millions of records; a later `grow` copies first, so they never change).
   */
  view(): Uint8Array {
    if (this.bytes.length !== this.length) this.bytes = this.bytes.slice(0, this.length);
    return this.bytes;
  }
}
