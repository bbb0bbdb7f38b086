// The seed's enumerations, with the exact numeric values it gives (see ../shared/spec/collective-enums.md).

/** Host op type (`enc_op_type`), the 13-case dispatch key; ENC_OP_INVALID = ENC_OP_N = 13. */
export const EncOpType = {
  ALLGATHER: 0,
  ALLREDUCE: 1,
  BROADCAST: 2,
  REDUCE: 3,
  REDUCE_SCATTER: 4,
  SEND: 5,
  RECV: 6,
  ALLTOALL: 7,
  PERMUTE: 8,
  PERMUTE_REDUCE: 9,
  PERMUTE_IMPLICIT: 10,
  PERMUTE_REDUCE_IMPLICIT: 11,
  ALLTOALL_V: 12,
  INVALID: 13,
} as const;
export type EncOpType = (typeof EncOpType)[keyof typeof EncOpType];
/** @public (the seed's enum, kept whole) */
export const ENC_OP_N = 13;

/** Host composer selector (`enc_alg_type`): 0..10 valid, 11 the INVALID sentinel. Never a wire field. */
export const EncAlgType = {
  RING: 0,
  HIER: 1,
  MESH: 2,
  KANGARING: 3,
  SINGLE_CYCLE_RING: 4,
  INTRA_RDH: 5,
  SINGLE_STEP_MESH: 6,
  INTER_RDH: 7,
  TWO_STEP_POD_MESH: 8,
  LATENCY_OPT_MESH: 9,
  BW_OPT_MESH: 10,
  INVALID: 11,
} as const;
export type EncAlgType = (typeof EncAlgType)[keyof typeof EncAlgType];

/**
 * `enc_get_algorithm_name`: an 11-case switch with "Invalid" as default. Its redundancies are
 * deliberate: SINGLE_CYCLE_RING shares the "Invalid" slot, LATENCY_OPT_MESH prints plain "Mesh",
 * INTRA_RDH and INTER_RDH both print "RDH".
 */
export const ENC_ALG_NAME: { readonly [K in EncAlgType]: string } = {
  0: "Ring",
  1: "Hier",
  2: "Mesh",
  3: "Kangaring",
  4: "Invalid",
  5: "RDH",
  6: "Single Step Mesh",
  7: "RDH",
  8: "UltraServer Mesh",
  9: "Mesh",
  10: "Bw Optimal Mesh",
  11: "Invalid",
};

/** The printed name of any integer, as the runtime's switch would give it (out of range -> "Invalid"). */
export function encAlgorithmName(alg: number): string {
  return Number.isInteger(alg) && alg >= 0 && alg <= 10 ? ENC_ALG_NAME[alg as EncAlgType] : "Invalid";
}

/** Device pattern (`enc_pattern_t`): the 4-bit `cc_op_entry.algo_type`. */
export const EncPattern = { RING: 0, MESH: 1, INVALID: 2 } as const;
export type EncPattern = (typeof EncPattern)[keyof typeof EncPattern];

/** Ring-family topology label (`metaring_type`). */
export const MetaringType = { RING: 0, KANGARING: 1, SINGLE_CYCLE_RING: 2, RDH: 3, INVALID: 4 } as const;
export type MetaringType = (typeof MetaringType)[keyof typeof MetaringType];

/** `enc_get_metaring_type`: alg 0..2 -> RING, 3 -> KANGARING, 4 -> SINGLE_CYCLE_RING, 7 -> RDH, else INVALID. */
export function metaringTypeOf(alg: EncAlgType): MetaringType {
  switch (alg) {
    case EncAlgType.RING:
    case EncAlgType.HIER:
    case EncAlgType.MESH:
      return MetaringType.RING;
    case EncAlgType.KANGARING:
      return MetaringType.KANGARING;
    case EncAlgType.SINGLE_CYCLE_RING:
      return MetaringType.SINGLE_CYCLE_RING;
    case EncAlgType.INTER_RDH:
      return MetaringType.RDH;
    default:
      return MetaringType.INVALID;
  }
}

/** Mesh sub-type (`enc_alg_mesh_type`), the 3-bit `algo_sub_type` of mesh ops. */
export const EncAlgMeshType = { FULL_MESH: 0, GROUPED_MESH: 1, MESH_TRN2: 2, MESH_SWITCH: 3, INVALID: 4 } as const;
export type EncAlgMeshType = (typeof EncAlgMeshType)[keyof typeof EncAlgMeshType];

/** In-DMA reduce opcode carried by CCE descriptors (`SDMA_CCETYPE`). */
export const SdmaCceType = { ADD: 0, FMA: 1, MAX: 2, MIN: 3, EXT: 4, GCE: 5 } as const;
export type SdmaCceType = (typeof SdmaCceType)[keyof typeof SdmaCceType];

/** Fold access pattern of a reduce step (`reduction_type_t`). */
export const ReductionType = { RING_2R1W: 0, RING_2R2W: 1, KANGARING_NR1W: 2 } as const;
export type ReductionType = (typeof ReductionType)[keyof typeof ReductionType];

/** `enc_half_chunk_index`. @public (the seed's enum, kept whole) */
export const HalfChunk = { H0: 0, H1: 1, SPLIT_N: 2 } as const;
export type HalfChunk = 0 | 1;

/** `encd_neigh` ordinals. */
export const EncdNeigh = {
  LOCAL: 0,
  NEXT: 1,
  PREV: 2,
  GATEWAY: 3,
  PEER_RMTV: 4,
  PEER_RMTV2: 5,
  PEER_LOCAL: 6,
  NEXT_PEER_RMTV: 7,
  INVALID: 8,
} as const;
export type EncdNeigh = (typeof EncdNeigh)[keyof typeof EncdNeigh];

/** Comm type index used by the allowed-algorithm bit `(alg + 11 * comm_type)`. */
export const CommType = { INTRA: 0, INTER: 1 } as const;
export type CommType = (typeof CommType)[keyof typeof CommType];
