// A running 64-bit hash of what a program does, for comparing programs that should be alike.
import { addressFields, HBM_LIMIT, readAddress, type AddressFields } from "./address.ts";

/** Two 32-bit FNV-1a-style lanes over a stream of numbers (integers below 2^53). */
export class Signature {
  /**
   * The two lanes, as int32 (the same bits as numbers would hold: every use converts them). Fields
   * of a number above a small integer's range are boxed, and a box written at every hashed number
   * was a tenth of composing 4,096 ranks' signatures.
   */
  private readonly lanes = Int32Array.of(0x811c9dc5 | 0, 0x9e3779b9 | 0);
  /** Devices of other units (pods) the hashed addresses named, in order: where the program sends. */
  readonly cross: number[] = [];

  add(x: number): void {
    const lo = x >>> 0;
    const hi = x >= 0 && x < 4294967296 ? 0 : Math.floor(x / 4294967296) >>> 0;
    const h = this.lanes;
    let a = h[0]!;
    let b = h[1]!;
    a = Math.imul(a ^ lo, 0x01000193);
    a = Math.imul(a ^ hi, 0x01000193);
    b = Math.imul(b ^ hi, 0x5bd1e995) ^ (b >>> 13);
    b = Math.imul(b ^ lo, 0x5bd1e995) ^ (b >>> 15);
    h[0] = a;
    h[1] = b;
  }

  /** Hash in another signature's value (a part's hash into the whole's). */
  addSignature(other: Signature | undefined): void {
    this.add(other ? other.lanes[0]! >>> 0 : 0);
    this.add(other ? other.lanes[1]! >>> 0 : 0);
  }

  get value(): string {
    return (this.lanes[0]! >>> 0).toString(16).padStart(8, "0") + (this.lanes[1]! >>> 0).toString(16).padStart(8, "0");
  }
}

const KIND = { hbm: 1, sema: 2, doorbell: 3, unmapped: 4 } as const;

/**
 * An address as a unit-relative thing, for a program cut into units (pods) of
 * `unitDevices` device ids each: decoded as device `from` sees it (`own`, the device whose program
 * holds it, is `from` but for a proxy's remote addresses), its kind, the addressed device's place in
 * its unit, whether that unit is `own`'s (the device itself goes to `sig.cross` when it is not), and
 * what it names there (semaphore, doorbell) — not an HBM offset, which no timing depends on. The
 * fields go into the hash as one number (they fit: place < 2^16, then a few bits each).
 */
export function addUnitAddress(sig: Signature, addr: number, from: number, unitDevices: number, own = from): void {
  // An address in the HBM of the device the last HBM address was in (as `from` saw it, for `own`):
  // the same code, without decoding it again (most descriptors address the device the last did).
  const h = lastHbm;
  if (addr >= h.lo && addr < h.hi && from === h.from && own === h.own && unitDevices === h.unitDevices) {
    if (h.other) sig.cross.push(h.device);
    sig.add(h.code);
    return;
  }
  const a = readAddress(addr, from, scratch);
  const device = a.device;
  // (Device ids and unit sizes are below 2^16: integer division by `| 0`.)
  const unit = (device / unitDevices) | 0;
  const other = unit !== ((own / unitDevices) | 0);
  if (other) sig.cross.push(device);
  const place = (device - unit * unitDevices) * 2 + (other ? 1 : 0);
  // (Kinds and windows by comparison: a lookup keyed by the string costs more than the rest.)
  let code: number;
  if (a.kind === "hbm") {
    code = place * 8 + KIND.hbm;
    h.lo = addr - a.offset;
    h.hi = h.lo + HBM_LIMIT;
    h.from = from;
    h.own = own;
    h.unitDevices = unitDevices;
    h.device = device;
    h.other = other;
    h.code = code;
  } else if (a.kind === "sema") code = (((place * 16 + a.topsp) * 256 + a.sema) * 4 + windowCode(a.window)) * 8 + KIND.sema;
  else if (a.kind === "doorbell") code = ((((place * 1024 + (a.engine ?? 1023)) * 8 + a.seng) * 4096 + a.queue) * 2 + (a.dir === "m2s" ? 0 : 1)) * 8 + KIND.doorbell;
  else code = place * 8 + KIND.unmapped;
  sig.add(code);
}

function windowCode(w: AddressFields["window"]): number {
  return w === "read" ? WINDOWS.read : w === "set" ? WINDOWS.set : w === "inc" ? WINDOWS.inc : WINDOWS.dec;
}

/** The HBM the last HBM address hashed was in: its addresses [lo, hi), as `from` saw them for `own`, and their code. */
const lastHbm = { lo: 0, hi: 0, from: -1, own: -1, unitDevices: -1, device: -1, other: false, code: 0 };

/** The record addresses are decoded into (hashing keeps nothing of it). */
const scratch = addressFields();
const WINDOWS = { read: 0, set: 1, inc: 2, dec: 3 } as const;

/** A field that holds an address or 0 for none (a device's HBM offset 0 is never one of them). */
export function addUnitAddressOrNone(sig: Signature, addr: number, from: number, unitDevices: number, own = from): void {
  if (addr === 0) return sig.add(0);
  addUnitAddress(sig, addr, from, unitDevices, own);
}
