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
  // Most hashed addresses name what recent ones did: HBM windows of a few devices, the same few
  // semaphores. Their codes are kept (`Seen`), by window for HBM and by address for the rest, for
  // the devices they were seen from (decoding each again was a fifth of composing a folded program).
  // (Device ids and unit sizes are below 2^16: one number says who looks.)
  const who = (from * 65536 + own) * 65536 + unitDevices;
  const window = Math.floor(addr / HBM_LIMIT);
  const w = slotOf(window, from);
  if (hbm.key[w] === window && hbm.who[w] === who) return hashSeen(sig, hbm, w);
  const e = slotOf((addr | 0) ^ Math.floor(addr / 4294967296), from);
  if (exact.key[e] === addr && exact.who[e] === who) return hashSeen(sig, exact, e);
  const c = unitAddressCode(addr, from, unitDevices, own);
  // (An HBM window holds HBM only: it is the first HBM_LIMIT of a device's space.)
  const seen = c.hbm ? hbm : exact;
  const i = c.hbm ? w : e;
  seen.key[i] = c.hbm ? window : addr;
  seen.who[i] = who;
  seen.code[i] = c.code;
  seen.device[i] = c.device;
  seen.other[i] = c.other ? 1 : 0;
  hashSeen(sig, seen, i);
}

/**
 * `addUnitAddress` for one device's own programs (`from` = `own`, units of `unitDevices` ids), with
 * the last few places it coded kept by itself: an HBM window as its range, anything else as its
 * address. A device's rings name the same few places again and again (its own HBM, the next
 * device's, a handful of semaphores): a look here is a few comparisons, where the shared slots
 * take a division and two hashes (a pod of 4,096 ranks hashes four million addresses; counting 16
 * pods, 3.09-3.33 -> 3.01-3.06 s). Hashes exactly what `addUnitAddress` does.
 */
export class UnitAddresses {
  private readonly from: number;
  private readonly unitDevices: number;
  /** Kept places: [lo, hi) each, its code, and the other unit's device it names (-1: its own unit). */
  private readonly lo = new Float64Array(KEPT_PLACES).fill(-1);
  private readonly hi = new Float64Array(KEPT_PLACES).fill(-1);
  private readonly code = new Float64Array(KEPT_PLACES);
  private readonly cross = new Int32Array(KEPT_PLACES);
  /** The place found last, the one found before it, and the next to be replaced. */
  private last = 0;
  private prev = 0;
  private next = 0;

  constructor(from: number, unitDevices: number) {
    this.from = from;
    this.unitDevices = unitDevices;
  }

  /** Hash `addr` into `sig` as `addUnitAddress(sig, addr, from, unitDevices)` does. */
  add(sig: Signature, addr: number): void {
    const lo = this.lo;
    const hi = this.hi;
    const last = this.last;
    let k = last;
    if (!(addr >= lo[k]! && addr < hi[k]!)) {
      // (A run's sources and destination lie in different places, named in turn: the place
      // before the last is the next likeliest, 58 % of the misses of a 4,096-rank count.)
      k = this.prev;
      if (!(addr >= lo[k]! && addr < hi[k]!)) {
        k = -1;
        for (let i = 0; i < KEPT_PLACES; i++) {
          if (addr >= lo[i]! && addr < hi[i]!) {
            k = i;
            break;
          }
        }
        if (k < 0) k = this.keep(addr);
      }
      this.prev = last;
      this.last = k;
    }
    const cross = this.cross[k]!;
    if (cross >= 0) sig.cross.push(cross);
    sig.add(this.code[k]!);
  }

  /** Code `addr` and keep it in the next place (an HBM address as its whole window). */
  private keep(addr: number): number {
    const c = unitAddressCode(addr, this.from, this.unitDevices);
    const k = this.next;
    this.next = (k + 1) % KEPT_PLACES;
    const window = Math.floor(addr / HBM_LIMIT);
    this.lo[k] = c.hbm ? window * HBM_LIMIT : addr;
    this.hi[k] = c.hbm ? (window + 1) * HBM_LIMIT : addr + 1;
    this.code[k] = c.code;
    this.cross[k] = c.other ? c.device : -1;
    return k;
  }
}

/** Places a `UnitAddresses` keeps. */
const KEPT_PLACES = 8;

/** What `addUnitAddress` hashes for an address, decoded: its code, the device it names, whether that is another unit's, and whether it is HBM. */
export interface UnitAddressCode {
  readonly code: number;
  readonly device: number;
  readonly other: boolean;
  readonly hbm: boolean;
}

/** `addr` as `addUnitAddress` codes it, decoded each time (`addUnitAddress` keeps the codes it made). */
export function unitAddressCode(addr: number, from: number, unitDevices: number, own = from): UnitAddressCode {
  const a = readAddress(addr, from, scratch);
  const device = a.device;
  // (Integer division by `| 0`.)
  const unit = (device / unitDevices) | 0;
  const other = unit !== ((own / unitDevices) | 0);
  const place = (device - unit * unitDevices) * 2 + (other ? 1 : 0);
  // (Kinds and windows by comparison: a lookup keyed by the string costs more than the rest.)
  let code: number;
  if (a.kind === "hbm") code = place * 8 + KIND.hbm;
  else if (a.kind === "sema") code = (((place * 16 + a.topsp) * 256 + a.sema) * 4 + windowCode(a.window)) * 8 + KIND.sema;
  else if (a.kind === "doorbell") code = ((((place * 1024 + (a.engine ?? 1023)) * 8 + a.seng) * 4096 + a.queue) * 2 + (a.dir === "m2s" ? 0 : 1)) * 8 + KIND.doorbell;
  else code = place * 8 + KIND.unmapped;
  return { code, device, other, hbm: a.kind === "hbm" };
}

/** Codes of addresses seen, in slots by key (an HBM window, or an address), for the looker `who`. */
interface Seen {
  readonly key: Float64Array;
  readonly who: Float64Array;
  readonly code: Float64Array;
  readonly device: Int32Array;
  readonly other: Uint8Array;
}
/** Slots of each (a power of two). */
const SEEN = 1024;
const seenSlots = (): Seen => ({ key: new Float64Array(SEEN).fill(-1), who: new Float64Array(SEEN).fill(-1), code: new Float64Array(SEEN), device: new Int32Array(SEEN), other: new Uint8Array(SEEN) });
const hbm = seenSlots();
const exact = seenSlots();

/**
 * The slot of a key (an HBM window, or an address's two halves folded) as device `from` looks it up:
 * both mixed, so that the windows of a block's devices, multiples of 128, and the devices looking
 * at the same addresses spread over the slots (by the window alone, every HBM window of a block
 * fell into one of four slots, and most lookups decoded the address again).
 */
function slotOf(key: number, from: number): number {
  return (Math.imul(key ^ Math.imul(from + 1, 0x9e3779b1), 0x85ebca6b) >>> 22) & (SEEN - 1);
}

/** Hash slot `i`'s code (naming its device as another unit's where it is one). */
function hashSeen(sig: Signature, s: Seen, i: number): void {
  if (s.other[i] === 1) sig.cross.push(s.device[i]!);
  sig.add(s.code[i]!);
}

function windowCode(w: AddressFields["window"]): number {
  return w === "read" ? WINDOWS.read : w === "set" ? WINDOWS.set : w === "inc" ? WINDOWS.inc : WINDOWS.dec;
}


/** The record addresses are decoded into (hashing keeps nothing of it). */
const scratch = addressFields();
const WINDOWS = { read: 0, set: 1, inc: 2, dec: 3 } as const;

/** A field that holds an address or 0 for none (a device's HBM offset 0 is never one of them). */
export function addUnitAddressOrNone(sig: Signature, addr: number, from: number, unitDevices: number, own = from): void {
  if (addr === 0) return sig.add(0);
  addUnitAddress(sig, addr, from, unitDevices, own);
}
