// The counted device barrier: one 296-byte neff_barrier_config per cc_op entry of a TopSP
// (spec/neff-device-barrier.md; the device_barrier view, which the host view matches but for the
// word at 0x11C it names total_desc_n).
//
//  0x000  4 x 52  barrier_step_config[4]: u16 m2s_val, u16 s2m_val, u64 barrier_sema[4] @4,
//                 u32 target_sema_val[4] @0x24
//  0x0D0  4 x 8   dma_sync_sema[4]
//  0x0F0  20      dma_apb_bcast: u64 m2s_tail_ptr, u64 s2m_tail_ptr, u32 mask
//  0x104  8       start_network_proxy
//  0x10C  4       dma_sync_sema_value
//  0x110  4 + 4   tdrbp_low, tdrbp_high
//  0x118  4       desc_count
//  0x11C  4       total_desc_n (host view)
//  0x120  2       dma_engines_bitmap
//  0x122  1       queue_id
//  0x124  1       bit 0 execute_device_barrier
//
// Step k: ARRIVE advances the barrier queue's tails by m2s_val / s2m_val (the descriptors there
// are the increments of the peers' semaphores), then WAIT until every non-zero barrier_sema[i]
// (a READ-window address on this TopSP) is >= target_sema_val[i]. A step with all-zero fields is
// skipped. Then every non-zero dma_sync_sema[i] must reach dma_sync_sema_value.
import { addr64, field, readAddr } from "./bits.ts";

export const BARRIER_CONFIG_BYTES = 296;
export const BARRIER_STEPS = 4;
export const BARRIER_SEMAS = 4;
const STEP_BYTES = 52;
const OFF = { SYNC: 0xd0, BCAST: 0xf0, PROXY: 0x104, SYNC_VAL: 0x10c, TDRBP: 0x110, DESC: 0x118, TOTAL: 0x11c, BITMAP: 0x120, QUEUE: 0x122, GATE: 0x124 } as const;

export interface BarrierStep {
  readonly m2sVal: number;
  readonly s2mVal: number;
  /** Up to 4 (semaphore READ address, target) pairs; a 0 address is unused. */
  readonly waits: readonly { readonly sema: number; readonly target: number }[];
}

export interface BarrierConfig {
  readonly execute: boolean;
  readonly steps: readonly BarrierStep[];
  readonly dmaSyncSemas: readonly number[];
  readonly dmaSyncValue: number;
  readonly m2sTail: number;
  readonly s2mTail: number;
  readonly mask: number;
  readonly startNetworkProxy: number;
  readonly ringBase: number;
  readonly descCount: number;
  readonly totalDescN: number;
  readonly enginesBitmap: number;
  readonly queueId: number;
}

const FORMAT = "neff_barrier_config";

export const NO_BARRIER: BarrierConfig = {
  execute: false,
  steps: [],
  dmaSyncSemas: [],
  dmaSyncValue: 0,
  m2sTail: 0,
  s2mTail: 0,
  mask: 0,
  startNetworkProxy: 0,
  ringBase: 0,
  descCount: 0,
  totalDescN: 0,
  enginesBitmap: 0,
  queueId: 0,
};

/** Pack config `c` into `out` at record `index`. */
export function packBarrierConfig(c: BarrierConfig, out: Uint8Array, index: number): void {
  if (c.steps.length > BARRIER_STEPS) field(c.steps.length, 2, "steps", FORMAT);
  const base = index * BARRIER_CONFIG_BYTES;
  const v = new DataView(out.buffer, out.byteOffset + base, BARRIER_CONFIG_BYTES);
  c.steps.forEach((s, k) => {
    const o = k * STEP_BYTES;
    if (s.waits.length > BARRIER_SEMAS) field(s.waits.length, 2, `barrier_step_config[${k}].barrier_sema`, FORMAT);
    v.setUint16(o, field(s.m2sVal, 16, `barrier_step_config[${k}].m2s_val`, FORMAT), true);
    v.setUint16(o + 2, field(s.s2mVal, 16, `barrier_step_config[${k}].s2m_val`, FORMAT), true);
    s.waits.forEach((w, i) => {
      v.setBigUint64(o + 4 + 8 * i, addr64(w.sema, `barrier_step_config[${k}].barrier_sema[${i}]`, FORMAT), true);
      v.setUint32(o + 0x24 + 4 * i, field(w.target, 32, `barrier_step_config[${k}].target_sema_val[${i}]`, FORMAT), true);
    });
  });
  if (c.dmaSyncSemas.length > BARRIER_SEMAS) field(c.dmaSyncSemas.length, 2, "dma_sync_sema", FORMAT);
  c.dmaSyncSemas.forEach((a, i) => v.setBigUint64(OFF.SYNC + 8 * i, addr64(a, `dma_sync_sema[${i}]`, FORMAT), true));
  v.setBigUint64(OFF.BCAST, addr64(c.m2sTail, "dma_apb_bcast.m2s_tail_ptr", FORMAT), true);
  v.setBigUint64(OFF.BCAST + 8, addr64(c.s2mTail, "dma_apb_bcast.s2m_tail_ptr", FORMAT), true);
  v.setUint32(OFF.BCAST + 16, field(c.mask, 32, "dma_apb_bcast.mask", FORMAT), true);
  v.setBigUint64(OFF.PROXY, addr64(c.startNetworkProxy, "start_network_proxy", FORMAT), true);
  v.setUint32(OFF.SYNC_VAL, field(c.dmaSyncValue, 32, "dma_sync_sema_value", FORMAT), true);
  addr64(c.ringBase, "tdrbp", FORMAT);
  v.setUint32(OFF.TDRBP, c.ringBase % 2 ** 32, true);
  v.setUint32(OFF.TDRBP + 4, Math.floor(c.ringBase / 2 ** 32), true);
  v.setUint32(OFF.DESC, field(c.descCount, 32, "desc_count", FORMAT), true);
  v.setUint32(OFF.TOTAL, field(c.totalDescN, 32, "total_desc_n", FORMAT), true);
  v.setUint16(OFF.BITMAP, field(c.enginesBitmap, 16, "dma_engines_bitmap", FORMAT), true);
  v.setUint8(OFF.QUEUE, field(c.queueId, 8, "queue_id", FORMAT));
  v.setUint8(OFF.GATE, c.execute ? 1 : 0);
}

export function decodeBarrierConfig(buf: Uint8Array, index: number): BarrierConfig {
  const v = new DataView(buf.buffer, buf.byteOffset + index * BARRIER_CONFIG_BYTES, BARRIER_CONFIG_BYTES);
  const steps: BarrierStep[] = [];
  for (let k = 0; k < BARRIER_STEPS; k++) {
    const o = k * STEP_BYTES;
    const waits = [];
    for (let i = 0; i < BARRIER_SEMAS; i++) waits.push({ sema: readAddr(v, o + 4 + 8 * i), target: v.getUint32(o + 0x24 + 4 * i, true) });
    steps.push({ m2sVal: v.getUint16(o, true), s2mVal: v.getUint16(o + 2, true), waits });
  }
  const dmaSyncSemas = [0, 1, 2, 3].map((i) => readAddr(v, OFF.SYNC + 8 * i));
  return {
    execute: (v.getUint8(OFF.GATE) & 1) === 1,
    steps,
    dmaSyncSemas,
    dmaSyncValue: v.getUint32(OFF.SYNC_VAL, true),
    m2sTail: readAddr(v, OFF.BCAST),
    s2mTail: readAddr(v, OFF.BCAST + 8),
    mask: v.getUint32(OFF.BCAST + 16, true),
    startNetworkProxy: readAddr(v, OFF.PROXY),
    ringBase: v.getUint32(OFF.TDRBP, true) + v.getUint32(OFF.TDRBP + 4, true) * 2 ** 32,
    descCount: v.getUint32(OFF.DESC, true),
    totalDescN: v.getUint32(OFF.TOTAL, true),
    enginesBitmap: v.getUint16(OFF.BITMAP, true),
    queueId: v.getUint8(OFF.QUEUE),
  };
}
