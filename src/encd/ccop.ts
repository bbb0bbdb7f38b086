// The 8-byte spad_ctrl_entry: a 1-byte op-enable header followed by the 7-byte cc_op_entry.
//
//  byte 0   header        bit0 cc_op (always 1 when packed), bits 7:1 reserved
//  byte 1   cc_op +0      bits 3:0 algo_type (enc_pattern_t), 6:4 algo_sub_type, 7 trigger_next
//  byte 2   cc_op +1      bit0 reporter, 1 ring_wait_complete, 2 ring_send_complete, 3 safe_mode,
//                         4 unique_tensors, 7:5 reserved (preserved from the previous slot content)
//  byte 3   cc_op +2      padding
//  4..7     cc_op +3..+6  union: RING u32 channel_list | MESH u16 sema_shift_offset, u16 sema_mask
import { EncPattern } from "../ir/enums.ts";
import { EncodeError } from "../ir/errors.ts";
import { field } from "./bits.ts";

export const SPAD_CTRL_ENTRY_BYTES = 8;

const OFF = { HEADER: 0, WORD0: 0, FLAGS: 2, PAD: 3, UNION: 4, SEMA_SHIFT: 4, SEMA_MASK: 6 } as const;

export interface CcOpEntry {
  /** Device pattern; only RING (0) and MESH (1) are meaningful, INVALID (2) is accepted by the packer. */
  readonly algoType: number;
  readonly algoSubType: number;
  readonly triggerNext: boolean;
  readonly reporter: boolean;
  readonly ringWaitComplete: boolean;
  readonly ringSendComplete: boolean;
  readonly safeMode: boolean;
  readonly uniqueTensors: boolean;
  /** RING view of the union. */
  readonly channelList: number;
  /** MESH view of the union. */
  readonly semaShiftOffset: number;
  readonly semaMask: number;
}

export interface DecodedSpadCtrlEntry extends CcOpEntry {
  readonly ccOp: boolean;
  readonly headerReserved: number;
  readonly flagsReserved: number;
}

const FORMAT = "cc_op_entry";

/**
 * Pack one entry. `previous` is the old slot content: header bits 7:1 and flag bits 7:5 are merged
 * from it, as the reference packer does. The union is taken from channelList for RING and from the
 * {semaShiftOffset, semaMask} pair otherwise.
 */
export function packSpadCtrlEntry(e: CcOpEntry, previous?: Uint8Array): Uint8Array {
  field(e.algoType, 4, "algo_type", FORMAT);
  if (e.algoType > EncPattern.INVALID) {
    // An enc_alg_type (up to 11) fits the nibble but is not a device pattern: the seed's classic overflow.
    throw new EncodeError("ENC1003", `algo_type=${e.algoType} is not an enc_pattern_t (RING=0, MESH=1, INVALID=2)`, {
      path: `${FORMAT}.algo_type`,
      value: e.algoType,
    });
  }
  field(e.algoSubType, 3, "algo_sub_type", FORMAT);
  const out = new Uint8Array(SPAD_CTRL_ENTRY_BYTES);
  const view = new DataView(out.buffer);
  const old = previous ?? new Uint8Array(SPAD_CTRL_ENTRY_BYTES);
  const oldWord0 = (old[0] ?? 0) | ((old[1] ?? 0) << 8);
  const word0 = 1 | (e.algoType << 8) | (e.algoSubType << 12) | (Number(e.triggerNext) << 15) | (oldWord0 & 0xfe);
  view.setUint16(OFF.WORD0, word0, true);
  const flags =
    ((Number(e.reporter) |
      (Number(e.ringWaitComplete) << 1) |
      (Number(e.ringSendComplete) << 2) |
      (Number(e.safeMode) << 3) |
      (Number(e.uniqueTensors) << 4)) &
      0x1f) |
    ((old[2] ?? 0) & 0xe0);
  view.setUint8(OFF.FLAGS, flags);
  if (e.algoType === EncPattern.RING) {
    view.setUint32(OFF.UNION, field(e.channelList, 32, "channel_list", FORMAT), true);
  } else {
    view.setUint16(OFF.SEMA_SHIFT, field(e.semaShiftOffset, 16, "sema_shift_offset", FORMAT), true);
    view.setUint16(OFF.SEMA_MASK, field(e.semaMask, 16, "sema_mask", FORMAT), true);
  }
  return out;
}

/** Decode an 8-byte entry at `offset`; both union views are returned, the caller picks by algoType. */
export function decodeSpadCtrlEntry(bytes: Uint8Array, offset = 0): DecodedSpadCtrlEntry {
  const view = new DataView(bytes.buffer, bytes.byteOffset + offset, SPAD_CTRL_ENTRY_BYTES);
  const b0 = view.getUint8(0);
  const b1 = view.getUint8(1);
  const b2 = view.getUint8(2);
  return {
    ccOp: (b0 & 1) === 1,
    headerReserved: b0 >> 1,
    algoType: b1 & 0xf,
    algoSubType: (b1 >> 4) & 7,
    triggerNext: (b1 >> 7) === 1,
    reporter: (b2 & 1) === 1,
    ringWaitComplete: ((b2 >> 1) & 1) === 1,
    ringSendComplete: ((b2 >> 2) & 1) === 1,
    safeMode: ((b2 >> 3) & 1) === 1,
    uniqueTensors: ((b2 >> 4) & 1) === 1,
    flagsReserved: b2 >> 5,
    channelList: view.getUint32(OFF.UNION, true),
    semaShiftOffset: view.getUint16(OFF.SEMA_SHIFT, true),
    semaMask: view.getUint16(OFF.SEMA_MASK, true),
  };
}

/** A ring entry with everything but the named fields cleared. */
export function ringEntry(channelList: number, opts: Partial<CcOpEntry> = {}): CcOpEntry {
  return {
    algoType: EncPattern.RING,
    algoSubType: 0,
    triggerNext: false,
    reporter: false,
    ringWaitComplete: false,
    ringSendComplete: false,
    safeMode: false,
    uniqueTensors: false,
    channelList,
    semaShiftOffset: channelList & 0xffff,
    semaMask: channelList >>> 16,
    ...opts,
  };
}
