import { describe, expect, it } from "vitest";
import { ENC_ALG_NAME, EncAlgType, EncOpType, EncPattern, MetaringType, encAlgorithmName, metaringTypeOf, SdmaCceType, ReductionType, EncdNeigh } from "../../src/ir/enums.ts";

describe("the seed's enums", () => {
  it("enc_op_type has 13 values, ALLGATHER 0 .. ALLTOALL_V 12, INVALID 13", () => {
    const { INVALID, ...ops } = EncOpType;
    expect(Object.values(ops)).toEqual([...Array(13).keys()]);
    expect(INVALID).toBe(13);
    expect([EncOpType.REDUCE_SCATTER, EncOpType.PERMUTE_IMPLICIT, EncOpType.ALLTOALL_V]).toEqual([4, 10, 12]);
  });

  it("enc_alg_type is 0..10 plus INVALID = 11, with the printed-name table and its redundancies", () => {
    expect(Object.values(EncAlgType)).toEqual([...Array(12).keys()]);
    expect(ENC_ALG_NAME[EncAlgType.SINGLE_CYCLE_RING]).toBe("Invalid");
    expect(ENC_ALG_NAME[EncAlgType.LATENCY_OPT_MESH]).toBe(ENC_ALG_NAME[EncAlgType.MESH]);
    expect(ENC_ALG_NAME[EncAlgType.INTRA_RDH]).toBe("RDH");
    expect(ENC_ALG_NAME[EncAlgType.INTER_RDH]).toBe("RDH");
    expect(new Set(Object.values(ENC_ALG_NAME)).size).toBeLessThan(12);
    expect([0, 8, 10, 11, 12, -1].map(encAlgorithmName)).toEqual(["Ring", "UltraServer Mesh", "Bw Optimal Mesh", "Invalid", "Invalid", "Invalid"]);
  });

  it("enc_pattern_t, metaring_type and enc_get_metaring_type", () => {
    expect(EncPattern).toEqual({ RING: 0, MESH: 1, INVALID: 2 });
    expect(MetaringType).toEqual({ RING: 0, KANGARING: 1, SINGLE_CYCLE_RING: 2, RDH: 3, INVALID: 4 });
    expect([0, 1, 2, 3, 4, 7, 5, 9].map((a) => metaringTypeOf(a as EncAlgType))).toEqual([0, 0, 0, 1, 2, 3, 4, 4]);
  });

  it("SDMA_CCETYPE, reduction_type_t and encd_neigh", () => {
    expect(SdmaCceType).toEqual({ ADD: 0, FMA: 1, MAX: 2, MIN: 3, EXT: 4, GCE: 5 });
    expect(ReductionType).toEqual({ RING_2R1W: 0, RING_2R2W: 1, KANGARING_NR1W: 2 });
    expect(EncdNeigh.NEXT_PEER_RMTV).toBe(7);
  });
});
