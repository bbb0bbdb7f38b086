// The device address space: every address names a device (routing bits) and an offset in it.
//
//  bits 52:48  destination device id bits 4:0, bit 46 its bit 5 (ccsim's routing bits; the real
//              layout is not public): the device's place in the sender's 64-device address block.
//              Device ids count node by node (a pod's nodes in a row); a block is 64 consecutive
//              ids, whole nodes (or one whole pod), so the block is implicit: the sender's own.
//              Traffic to another block leaves the device through the network proxy, whose
//              entries name the remote block.
//  bit  47     TopSP bank select (TopSP index > 7)
//  local map   [0, 0x80_0000_0000)                 HBM
//              0x0FFF_F000_0000 + e*0x40000        DMA engine e registers (M2S; S2M at +0x20000)
//              0x0FFF_E000_0000 + s*0x40000         DMA APB broadcast block of SENG s (same layout;
//                                                  engines s*32 + bit, by mask)
//              0x82_8000_0000 + (idx&7)<<30        TopSP idx: semaphores READ +0x1000, SET +0x1400,
//                                                  INC +0x1800, DEC +0x1C00, 4 bytes each
import { EncodeError } from "../ir/errors.ts";

export const DEVICE_SHIFT = 2 ** 48;
/** Device id bit 5 rides in address bit 46 (bits 52:48 hold bits 4:0), keeping addresses below 2^53. */
export const DEVICE_HIGH_BIT = 2 ** 46;
/** Device ids an address names directly: the sender's block. */
export const ADDRESS_BLOCK = 64;
/** Device ids of a whole program (node-major), across every block. */
export const MAX_DEVICES = 65536;
export const HBM_LIMIT = 0x80_0000_0000;
export const SP_BASE = 0x82_8000_0000;
export const SP_TILE = 2 ** 30;
export const SP_BANK = 2 ** 47;
export const SEMA_WINDOW = { READ: 0x1000, SET: 0x1400, INC: 0x1800, DEC: 0x1c00 } as const;
export type SemaWindow = "read" | "set" | "inc" | "dec";
const WINDOW_NAMES: readonly SemaWindow[] = ["read", "set", "inc", "dec"];
export const SEMAPHORES_PER_TOPSP = 256;

export const DMA_APB_BASE = 0x0fff_f000_0000;
export const DMA_BCAST_BASE = 0x0fff_e000_0000;
export const DMA_ENGINE_STRIDE = 0x40000;
/** DMA engines an APB broadcast mask addresses: one SENG's (V3: 2 NeuronCores x 16). */
export const ENGINES_PER_SENG = 32;
/** Broadcast blocks, one per SENG, this far apart. */
export const DMA_BCAST_SENG_STRIDE = 0x40000;
const MAX_SENGS = 8;
const MAX_ENGINES = 256;
export const DMA_S2M_OFFSET = 0x20000;
export const DMA_QUEUE_STRIDE = 0x1000;
export const DMA_TAIL_INC = 0x38;

function deviceBits(device: number): number {
  if (!Number.isInteger(device) || device < 0 || device >= MAX_DEVICES) {
    throw new EncodeError("ENC1301", `device ${device} is outside 0..${MAX_DEVICES - 1}`, { path: "address.device", value: device });
  }
  const local = device % ADDRESS_BLOCK;
  return (local & 31) * DEVICE_SHIFT + (local >= 32 ? DEVICE_HIGH_BIT : 0);
}

/** The address block a device id lies in. */
export function blockOf(device: number): number {
  return Math.floor(device / ADDRESS_BLOCK);
}

export function hbmAddr(device: number, offset: number): number {
  if (!Number.isSafeInteger(offset) || offset < 0 || offset >= HBM_LIMIT) {
    throw new EncodeError("ENC1302", `HBM offset ${offset} is outside the HBM window`, { path: "address.offset", value: offset });
  }
  return deviceBits(device) + offset;
}

export function semaAddr(device: number, topsp: number, sema: number, window: SemaWindow): number {
  if (!Number.isInteger(topsp) || topsp < 0 || topsp > 15) {
    throw new EncodeError("ENC1303", `TopSP index ${topsp} is outside 0..15`, { path: "address.topsp", value: topsp });
  }
  if (!Number.isInteger(sema) || sema < 0 || sema >= SEMAPHORES_PER_TOPSP) {
    throw new EncodeError("ENC1304", `semaphore ${sema} is outside 0..255`, { path: "address.sema", value: sema });
  }
  const win = SEMA_WINDOW[window.toUpperCase() as keyof typeof SEMA_WINDOW];
  return deviceBits(device) + (topsp > 7 ? SP_BANK : 0) + SP_BASE + (topsp & 7) * SP_TILE + win + 4 * sema;
}

/** Address of a queue's tail-pointer-increment doorbell; `engine` undefined = SENG `seng`'s APB broadcast block. */
export function tailDoorbellAddr(device: number, engine: number | undefined, queue: number, dir: "m2s" | "s2m", seng = 0): number {
  const base = engine === undefined ? DMA_BCAST_BASE + seng * DMA_BCAST_SENG_STRIDE : DMA_APB_BASE + engine * DMA_ENGINE_STRIDE;
  return deviceBits(device) + base + (dir === "s2m" ? DMA_S2M_OFFSET : 0) + (queue + 1) * DMA_QUEUE_STRIDE + DMA_TAIL_INC;
}

export type DecodedAddress =
  | { readonly kind: "hbm"; readonly device: number; readonly offset: number }
  | { readonly kind: "sema"; readonly device: number; readonly topsp: number; readonly sema: number; readonly window: SemaWindow }
  | { readonly kind: "doorbell"; readonly device: number; readonly engine: number | undefined; readonly seng: number; readonly queue: number; readonly dir: "m2s" | "s2m" }
  | { readonly kind: "unmapped"; readonly device: number; readonly offset: number };

/**
 * An address's fields in one record the caller owns and reuses: `kind` and `device` always, then
 * per kind what `DecodedAddress` carries (hbm / unmapped: offset; sema: topsp, sema, window;
 * doorbell: engine, seng, queue, dir). The hot paths decode into it without making an object.
 */
export interface AddressFields {
  kind: DecodedAddress["kind"];
  device: number;
  offset: number;
  topsp: number;
  sema: number;
  window: SemaWindow;
  engine: number | undefined;
  seng: number;
  queue: number;
  dir: "m2s" | "s2m";
}

export function addressFields(): AddressFields {
  return { kind: "unmapped", device: 0, offset: 0, topsp: 0, sema: 0, window: "read", engine: undefined, seng: 0, queue: 0, dir: "m2s" };
}

/** Decode an address as device `from` sees it into `out`: its device bits name a device of `from`'s block. */
export function readAddress(addr: number, from: number, out: AddressFields): AddressFields {
  const low = Math.floor(addr / DEVICE_SHIFT);
  const rest = addr - low * DEVICE_SHIFT;
  // Bit 46 (rest < 2^48, so the quotient is 0..3; integer bit operations, not a float modulo).
  const high = Math.floor(rest / DEVICE_HIGH_BIT) & 1;
  // (Device ids are below 2^16: `from & 63` is its place in its block.)
  out.device = from - (from & (ADDRESS_BLOCK - 1)) + low + 32 * high;
  const local = rest - high * DEVICE_HIGH_BIT;
  // HBM, the usual case, here; the rest in `readLocal` (small, so the engines' calls inline it).
  if (local < HBM_LIMIT) {
    out.kind = "hbm";
    out.offset = local;
    return out;
  }
  return readLocal(local, out);
}

/** The non-HBM part of `readAddress`: `local` is the offset in the device's space. */
function readLocal(local: number, out: AddressFields): AddressFields {
  const bank = local >= SP_BANK ? 1 : 0;
  const l47 = local - bank * SP_BANK;
  if (l47 >= SP_BASE && l47 < SP_BASE + 8 * SP_TILE) {
    const tile = Math.floor((l47 - SP_BASE) / SP_TILE);
    // (off < 2^30: integer bit operations, not float modulos.)
    const off = l47 - SP_BASE - tile * SP_TILE;
    if (off >= SEMA_WINDOW.READ && off < SEMA_WINDOW.READ + 0x1000 && (off & 3) === 0) {
      const window = WINDOW_NAMES[(off - SEMA_WINDOW.READ) >> 10];
      if (window !== undefined) {
        out.kind = "sema";
        out.topsp = tile + 8 * bank;
        out.sema = ((off - SEMA_WINDOW.READ) & 0x3ff) >> 2;
        out.window = window;
        return out;
      }
    }
  }
  if (bank === 0 && (doorbellIn(l47, DMA_APB_BASE, false, out) || doorbellIn(l47, DMA_BCAST_BASE, true, out))) return out;
  out.kind = "unmapped";
  out.offset = local;
  return out;
}

/** A tail-increment doorbell of an engine block (or a SENG's broadcast block) at local offset `l47`, into `out`. */
function doorbellIn(l47: number, base: number, isBcast: boolean, out: AddressFields): boolean {
  const stride = isBcast ? DMA_BCAST_SENG_STRIDE : DMA_ENGINE_STRIDE;
  const span = (isBcast ? MAX_SENGS : MAX_ENGINES) * stride;
  if (l47 < base || l47 >= base + span) return false;
  const block = Math.floor((l47 - base) / stride);
  let rel = l47 - base - block * stride;
  const dir = rel >= DMA_S2M_OFFSET ? "s2m" : "m2s";
  if (dir === "s2m") rel -= DMA_S2M_OFFSET;
  if (rel % DMA_QUEUE_STRIDE !== DMA_TAIL_INC || rel < DMA_QUEUE_STRIDE) return false;
  out.kind = "doorbell";
  out.queue = Math.floor(rel / DMA_QUEUE_STRIDE) - 1;
  out.dir = dir;
  out.engine = isBcast ? undefined : block;
  out.seng = isBcast ? block : Math.floor(block / ENGINES_PER_SENG);
  return true;
}

/** Decode an address as device `from` sees it: its device bits name a device of `from`'s block. */
export function decodeAddress(addr: number, from = 0): DecodedAddress {
  const f = readAddress(addr, from, addressFields());
  const device = f.device;
  switch (f.kind) {
    case "hbm":
      return { kind: "hbm", device, offset: f.offset };
    case "sema":
      return { kind: "sema", device, topsp: f.topsp, sema: f.sema, window: f.window };
    case "doorbell":
      return { kind: "doorbell", device, engine: f.engine, seng: f.seng, queue: f.queue, dir: f.dir };
    case "unmapped":
      return { kind: "unmapped", device, offset: f.offset };
  }
}

export function describeAddress(addr: number, from = 0): string {
  const d = decodeAddress(addr, from);
  switch (d.kind) {
    case "hbm":
      return `dev${d.device}:hbm+0x${d.offset.toString(16)}`;
    case "sema":
      return `dev${d.device}:topsp${d.topsp}:sem${d.sema}.${d.window}`;
    case "doorbell":
      return `dev${d.device}:${d.engine === undefined ? `bcast${d.seng ? d.seng : ""}` : "dma" + d.engine}:q${d.queue}.${d.dir}`;
    case "unmapped":
      return `dev${d.device}:unmapped+0x${d.offset.toString(16)}`;
  }
}
