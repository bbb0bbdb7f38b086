// The 148-byte ring channel descriptor (algorithm_ring_channel_configs_t); 32 of them per TopSP.
//
//   0 next_neigh (28)  { u64 net_idx_addrs[3]; u8 fold_n @24; u8 type @25; u8 reserved[2] }
//  28 prev_neigh (28)  same layout
//  56 u64 recv_sema    64 u64 send_sema    72 u64 post_sema    80 u64 dma_compl_sema
//  88 kring_peer_semas { u64 mine; u64 peers[3] }
// 120 dma_apb_bcast    { u64 m2s_tail_ptr; u64 s2m_tail_ptr @128; u32 mask @136 }
// 140 u8 channel_id  141 u8 spad_slot_idx  142 u8 fold_n  143 u8 kangaring_is_primary
// 144 u8 kangaring_num_peers  145 u8 reserved[3]
import { EncodeError } from "../ir/errors.ts";
import { addr64, field, readAddr } from "./bits.ts";

export const CHANNEL_CONFIG_BYTES = 148;
export const MAX_CHANNELS = 32;
export const ALGO_CONFIG_RING_BYTES = CHANNEL_CONFIG_BYTES * MAX_CHANNELS;
/** Neighbour `type`: 0 local/none, 1 P2P direct, 2 P2P_POD. */
export const NeighType = { LOCAL: 0, P2P: 1, P2P_POD: 2 } as const;

const O = {
  NEXT: 0,
  PREV: 28,
  N_ADDRS: 0,
  N_FOLD: 24,
  N_TYPE: 25,
  RECV: 56,
  SEND: 64,
  POST: 72,
  COMPL: 80,
  KRING_MINE: 88,
  KRING_PEERS: 96,
  BCAST_M2S: 120,
  BCAST_S2M: 128,
  BCAST_MASK: 136,
  CHANNEL_ID: 140,
  SLOT: 141,
  FOLD: 142,
  K_PRIMARY: 143,
  K_PEERS: 144,
} as const;

export interface RingNeighbor {
  readonly netIdxAddrs: readonly number[];
  readonly foldN: number;
  readonly type: number;
}

export interface ChannelConfig {
  readonly next: RingNeighbor;
  readonly prev: RingNeighbor;
  readonly recvSema: number;
  readonly sendSema: number;
  readonly postSema: number;
  readonly dmaComplSema: number;
  readonly kringMine: number;
  readonly kringPeers: readonly number[];
  readonly bcastM2sTail: number;
  readonly bcastS2mTail: number;
  readonly bcastMask: number;
  readonly channelId: number;
  readonly spadSlotIdx: number;
  readonly foldN: number;
  readonly kangaringIsPrimary: number;
  readonly kangaringNumPeers: number;
}

const FORMAT = "ring_channel_config";

function packNeighbor(v: DataView, base: number, n: RingNeighbor, name: string): void {
  if (n.netIdxAddrs.length > 3) {
    throw new EncodeError("ENC1401", `${name}.net_idx_addrs has ${n.netIdxAddrs.length} entries, at most 3`, { path: `${FORMAT}.${name}`, value: n.netIdxAddrs.length });
  }
  for (let i = 0; i < 3; i++) v.setBigUint64(base + O.N_ADDRS + 8 * i, addr64(n.netIdxAddrs[i] ?? 0, `${name}.net_idx_addrs`, FORMAT), true);
  v.setUint8(base + O.N_FOLD, field(n.foldN, 8, `${name}.fold_n`, FORMAT));
  v.setUint8(base + O.N_TYPE, field(n.type, 8, `${name}.type`, FORMAT));
  if (n.type === NeighType.P2P_POD && n.foldN !== 1) {
    throw new EncodeError("ENC1402", `${name}: a P2P_POD neighbour must have fold_n 1`, { path: `${FORMAT}.${name}.fold_n`, value: n.foldN });
  }
}

function decodeNeighbor(v: DataView, base: number): RingNeighbor {
  return {
    netIdxAddrs: [0, 1, 2].map((i) => readAddr(v, base + O.N_ADDRS + 8 * i)),
    foldN: v.getUint8(base + O.N_FOLD),
    type: v.getUint8(base + O.N_TYPE),
  };
}

/** Write channel `c.channelId`'s record into a 32-record ring config region. */
export function packChannelConfig(c: ChannelConfig, region: Uint8Array): void {
  field(c.channelId, 5, "channel_id", FORMAT);
  if (region.length < ALGO_CONFIG_RING_BYTES) throw new EncodeError("ENC1403", `ring config region is ${region.length} bytes, needs ${ALGO_CONFIG_RING_BYTES}`, { path: FORMAT, value: region.length });
  if (![0, 1, 3].includes(c.kangaringNumPeers)) {
    throw new EncodeError("ENC1404", `kangaring_num_peers=${c.kangaringNumPeers} must be 0, 1 or 3`, { path: `${FORMAT}.kangaring_num_peers`, value: c.kangaringNumPeers });
  }
  const v = new DataView(region.buffer, region.byteOffset + c.channelId * CHANNEL_CONFIG_BYTES, CHANNEL_CONFIG_BYTES);
  packNeighbor(v, O.NEXT, c.next, "next_neigh");
  packNeighbor(v, O.PREV, c.prev, "prev_neigh");
  v.setBigUint64(O.RECV, addr64(c.recvSema, "recv_sema", FORMAT), true);
  v.setBigUint64(O.SEND, addr64(c.sendSema, "send_sema", FORMAT), true);
  v.setBigUint64(O.POST, addr64(c.postSema, "post_sema", FORMAT), true);
  v.setBigUint64(O.COMPL, addr64(c.dmaComplSema, "dma_compl_sema", FORMAT), true);
  v.setBigUint64(O.KRING_MINE, addr64(c.kringMine, "kring_peer_semas.mine", FORMAT), true);
  for (let i = 0; i < 3; i++) v.setBigUint64(O.KRING_PEERS + 8 * i, addr64(c.kringPeers[i] ?? 0, "kring_peer_semas.peers", FORMAT), true);
  v.setBigUint64(O.BCAST_M2S, addr64(c.bcastM2sTail, "dma_apb_bcast.m2s_tail_ptr", FORMAT), true);
  v.setBigUint64(O.BCAST_S2M, addr64(c.bcastS2mTail, "dma_apb_bcast.s2m_tail_ptr", FORMAT), true);
  v.setUint32(O.BCAST_MASK, field(c.bcastMask, 32, "dma_apb_bcast.mask", FORMAT), true);
  v.setUint8(O.CHANNEL_ID, c.channelId);
  v.setUint8(O.SLOT, field(c.spadSlotIdx, 8, "spad_slot_idx", FORMAT));
  v.setUint8(O.FOLD, field(c.foldN, 8, "fold_n", FORMAT));
  v.setUint8(O.K_PRIMARY, field(c.kangaringIsPrimary, 8, "kangaring_is_primary", FORMAT));
  v.setUint8(O.K_PEERS, c.kangaringNumPeers);
}

export function decodeChannelConfig(region: Uint8Array, channel: number): ChannelConfig {
  const v = new DataView(region.buffer, region.byteOffset + channel * CHANNEL_CONFIG_BYTES, CHANNEL_CONFIG_BYTES);
  return {
    next: decodeNeighbor(v, O.NEXT),
    prev: decodeNeighbor(v, O.PREV),
    recvSema: readAddr(v, O.RECV),
    sendSema: readAddr(v, O.SEND),
    postSema: readAddr(v, O.POST),
    dmaComplSema: readAddr(v, O.COMPL),
    kringMine: readAddr(v, O.KRING_MINE),
    kringPeers: [0, 1, 2].map((i) => readAddr(v, O.KRING_PEERS + 8 * i)),
    bcastM2sTail: readAddr(v, O.BCAST_M2S),
    bcastS2mTail: readAddr(v, O.BCAST_S2M),
    bcastMask: v.getUint32(O.BCAST_MASK, true),
    channelId: v.getUint8(O.CHANNEL_ID),
    spadSlotIdx: v.getUint8(O.SLOT),
    foldN: v.getUint8(O.FOLD),
    kangaringIsPrimary: v.getUint8(O.K_PRIMARY),
    kangaringNumPeers: v.getUint8(O.K_PEERS),
  };
}
