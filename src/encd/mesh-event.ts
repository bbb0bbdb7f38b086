// The 80-byte mesh event record of the TopSP's event tape (algorithm config, after the ring region).
//
//  0x00 dma_apb_bcast[0] {u64 m2s_tail_ptr, u64 s2m_tail_ptr, u32 mask}   first DMA leg
//  0x14 dma_apb_bcast[1]                                                  second DMA leg
//  0x28 u64 direct_trigger_sema[3]      semaphores to increment (0 = unused slot)
//  0x40 u64 event_wait_sema             inbound guard
//  0x48 u32 wait_val                    counted-wait target
//  0x4C u8 event_type   0x4D u8 dma_trigger   0x4E u8 direct_trigger   0x4F u8 wait_event
import { EncodeError } from "../ir/errors.ts";
import { addr64, field, readAddr } from "./bits.ts";

export const MESH_EVENT_BYTES = 80;
/** Events the firmware config holds per TopSP: 50 on v2 (SUNDA), 108 on v3 and later. */
export function maxMeshEvents(arch: number): number {
  return arch <= 2 ? 50 : 108;
}

/** enc_mesh_event_type values ccsim emits. */
export const MeshEventType = {
  SYNC: 0,
  GLOBAL_HNDSHK: 1,
  LOCAL_HNDSHK: 2,
  INTER_GRP_BRDCST: 3,
  FUNCTION_BARRIER_FIRST_COLL: 4,
  FUNCTION_BARRIER_LAST_COLL: 5,
  REDUCE_LOCAL_HNDSHK: 6,
  INTRA_GRP_BRDCST: 7,
  REDUCE_COPY: 8,
  REDUCE_WRITE: 10,
  INTER_GRP_BRDCST_2: 11,
  LOCAL_AND_POD_GRP_BRDCST: 12,
  LOCAL_AND_POD_GRP_BRDCST_2: 13,
  /** RDH band: EVT_RH_STEP_0..9 = 23..32 (RH_STEP_9 doubles as RDH_LOCAL_HANDSHAKE), RD_STEP_0..6 = 34..40. */
  RH_STEP_0: 23,
  RDH_LOCAL_HANDSHAKE: 32,
  RD_STEP_0: 34,
} as const;

export interface DmaLeg {
  readonly m2sTail: number;
  readonly s2mTail: number;
  readonly mask: number;
}

export interface MeshEvent {
  readonly legs: readonly [DmaLeg, DmaLeg];
  readonly directTrigger: readonly [number, number, number];
  readonly waitSema: number;
  readonly waitVal: number;
  readonly eventType: number;
  readonly dmaTrigger: boolean;
  readonly directTriggerOn: boolean;
  readonly waitEvent: boolean;
}

const FORMAT = "mesh_event";
export const NO_LEG: DmaLeg = { m2sTail: 0, s2mTail: 0, mask: 0 };

export function packMeshEvent(e: MeshEvent, region: Uint8Array, index: number): void {
  if ((index + 1) * MESH_EVENT_BYTES > region.length) {
    throw new EncodeError("ENC1701", `mesh event ${index} does not fit the ${region.length / MESH_EVENT_BYTES}-event tape`, { path: `${FORMAT}[${index}]`, value: index });
  }
  const v = new DataView(region.buffer, region.byteOffset + index * MESH_EVENT_BYTES, MESH_EVENT_BYTES);
  e.legs.forEach((l, j) => {
    v.setBigUint64(20 * j, addr64(l.m2sTail, `dma_apb_bcast[${j}].m2s_tail_ptr`, FORMAT), true);
    v.setBigUint64(20 * j + 8, addr64(l.s2mTail, `dma_apb_bcast[${j}].s2m_tail_ptr`, FORMAT), true);
    v.setUint32(20 * j + 16, field(l.mask, 32, `dma_apb_bcast[${j}].mask`, FORMAT), true);
  });
  e.directTrigger.forEach((a, k) => v.setBigUint64(0x28 + 8 * k, addr64(a, `direct_trigger_sema[${k}]`, FORMAT), true));
  v.setBigUint64(0x40, addr64(e.waitSema, "event_wait_sema", FORMAT), true);
  v.setUint32(0x48, field(e.waitVal, 32, "wait_val", FORMAT), true);
  v.setUint8(0x4c, field(e.eventType, 8, "event_type", FORMAT));
  v.setUint8(0x4d, Number(e.dmaTrigger));
  v.setUint8(0x4e, Number(e.directTriggerOn));
  v.setUint8(0x4f, Number(e.waitEvent));
}

export function decodeMeshEvent(region: Uint8Array, index: number): MeshEvent {
  const v = new DataView(region.buffer, region.byteOffset + index * MESH_EVENT_BYTES, MESH_EVENT_BYTES);
  const leg = (j: number): DmaLeg => ({ m2sTail: readAddr(v, 20 * j), s2mTail: readAddr(v, 20 * j + 8), mask: v.getUint32(20 * j + 16, true) });
  return {
    legs: [leg(0), leg(1)],
    directTrigger: [readAddr(v, 0x28), readAddr(v, 0x30), readAddr(v, 0x38)],
    waitSema: readAddr(v, 0x40),
    waitVal: v.getUint32(0x48, true),
    eventType: v.getUint8(0x4c),
    dmaTrigger: v.getUint8(0x4d) !== 0,
    directTriggerOn: v.getUint8(0x4e) !== 0,
    waitEvent: v.getUint8(0x4f) !== 0,
  };
}
