// The 8-byte spad_slot_entry: one step of a channel's program in its slot scratchpad.
//
//  +0 u16 m2s     TX descriptors the step hands to every fold's queue (tail-pointer increment)
//  +2 u16 s2m     RX descriptors likewise
//  +4 u16 repeat  how many times the step runs back to back (>= 1)
//  +6 u16 flags   bit0 LAST_SYNC: after issuing, wait for every fold's DMA completion semaphore
//                 bit1 WAIT_RECV: before issuing, wait each of prev's fold_n recv semaphores >= 1, decrement
//                 bit2 WAIT_CREDIT: before issuing, wait each of next's fold_n credit semaphores >= 1, decrement
//                 bit3 DRAIN_CREDIT: before issuing, wait each credit semaphore >= bits 15:8 (all credits home)
//                 bits 7:4 reserved, 15:8 drain target
// Fold f of a channel uses the semaphore id + f of each family (recv_sema, send_sema, dma_compl_sema).
// m2s/s2m/repeat/last_sync are the runtime's tp_inc record; the wait bits and drain target are
// ccsim's reading of the rest of the word (see docs/device-model.md).
import { EncodeError } from "../ir/errors.ts";
import { field, put16 } from "./bits.ts";

export const SLOT_ENTRY_BYTES = 8;
export const StepFlag = { LAST_SYNC: 1, WAIT_RECV: 2, WAIT_CREDIT: 4, DRAIN_CREDIT: 8 } as const;

export interface SlotEntry {
  readonly m2s: number;
  readonly s2m: number;
  readonly repeat: number;
  readonly flags: number;
  readonly drainTarget: number;
}

const FORMAT = "spad_slot_entry";

export function packSlotEntry(e: SlotEntry, out: Uint8Array = new Uint8Array(SLOT_ENTRY_BYTES), offset = 0): Uint8Array {
  if (offset < 0 || offset + SLOT_ENTRY_BYTES > out.length) throw new RangeError(`slot entry at byte ${offset} is outside a ${out.length}-byte array`);
  const m2s = field(e.m2s, 16, "m2s_val", FORMAT);
  const s2m = field(e.s2m, 16, "s2m_val", FORMAT);
  if (e.repeat < 1) throw new EncodeError("ENC1201", `repeat=${e.repeat} must be at least 1 in ${FORMAT}`, { path: `${FORMAT}.repeat`, value: e.repeat });
  const repeat = field(e.repeat, 16, "repeat", FORMAT);
  const w3 = field(e.flags, 4, "flags", FORMAT) | (field(e.drainTarget, 8, "drain_target", FORMAT) << 8);
  put16(out, offset, m2s);
  put16(out, offset + 2, s2m);
  put16(out, offset + 4, repeat);
  put16(out, offset + 6, w3);
  return out;
}

export function decodeSlotEntry(bytes: Uint8Array, offset: number): SlotEntry {
  const v = new DataView(bytes.buffer, bytes.byteOffset + offset, SLOT_ENTRY_BYTES);
  const w = v.getUint16(6, true);
  return { m2s: v.getUint16(0, true), s2m: v.getUint16(2, true), repeat: v.getUint16(4, true), flags: w & 0xff, drainTarget: w >>> 8 };
}
