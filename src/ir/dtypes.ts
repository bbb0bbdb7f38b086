// Element types and reduce operations as scenarios name them (nccom-test's names), with their SDMA codes.
import { SdmaCceType } from "./enums.ts";

/** fp8e4 is nccom-test's fp8 (E4M3); fp8e5 (E5M2) the SDMA engine's other 8-bit float (spec/dma-descriptor-format.md §10). */
export const DTYPES = ["uint8", "int8", "uint16", "int16", "fp16", "bf16", "uint32", "int32", "fp32", "fp8e4", "fp8e5"] as const;
export type Dtype = (typeof DTYPES)[number];

/** SDMA dtype codes (`kbin_dtype_to_sdma_dtype` column of ../shared/spec/dma-descriptor-format.md §10). */
export const SDMA_DTYPE: { readonly [K in Dtype]: number } = {
  uint8: 3,
  int8: 2,
  uint16: 5,
  int16: 4,
  fp16: 7,
  bf16: 6,
  uint32: 9,
  int32: 8,
  fp32: 10,
  fp8e4: 14,
  fp8e5: 15,
};

/** `sdma_data_type_size[]`, indexed by SDMA dtype code (16 entries; fp32r has size 0 as in the runtime). */
export const SDMA_DTYPE_SIZE: readonly number[] = [0, 8, 1, 1, 2, 2, 2, 2, 4, 4, 4, 0, 8, 1, 1, 1];

export function dtypeSize(d: Dtype): number {
  return SDMA_DTYPE_SIZE[SDMA_DTYPE[d]] ?? 0;
}

/**
 * The 8-bit float formats: sign, exponent, mantissa bits and bias. E4M3 is the OCP "FN" variant
 * (no infinities; S.1111.111 is NaN, 448 the largest finite); E5M2 is IEEE-like (infinities, NaNs).
 * **Assumption:** the hardware's E4M3 variant and its overflow behaviour are not in the facts;
 * conversions here saturate E4M3 to ±448 and send E5M2 overflow to infinity.
 */
export interface MiniFloat {
  readonly expBits: number;
  readonly mantBits: number;
  readonly bias: number;
  /** The top exponent encodes infinities and NaNs (IEEE); otherwise only the all-ones pattern is NaN. */
  readonly ieee: boolean;
}
export const FP8: { readonly [K in "fp8e4" | "fp8e5"]: MiniFloat } = {
  fp8e4: { expBits: 4, mantBits: 3, bias: 7, ieee: false },
  fp8e5: { expBits: 5, mantBits: 2, bias: 15, ieee: true },
};

export function dtypeFromSdma(code: number): Dtype | undefined {
  return DTYPES.find((d) => SDMA_DTYPE[d] === code);
}

export const REDUCE_OPS = ["sum", "max", "min"] as const;
export type ReduceOp = (typeof REDUCE_OPS)[number];

export const REDUCE_TO_CCE: { readonly [K in ReduceOp]: SdmaCceType } = {
  sum: SdmaCceType.ADD,
  max: SdmaCceType.MAX,
  min: SdmaCceType.MIN,
};

/** How a symbolic value's terms were combined: not at all (one copied term), or by several arithmetics. */
export const HOW_NONE = -1;
export const HOW_MIXED = -2;

/** A CCE reduce's arithmetic as one number: its op (SDMA_CCETYPE) × 16 + its SDMA dtype. */
export function howOf(op: number, sdmaDtype: number): number {
  return op * 16 + sdmaDtype;
}

/** The arithmetic a scenario's reduce op over its dtype runs on the CCE. */
export function reduceHow(op: ReduceOp, d: Dtype): number {
  return howOf(REDUCE_TO_CCE[op], SDMA_DTYPE[d]);
}

/** A how, for messages: "sum over fp32". */
export function describeHow(how: number): string {
  if (how === HOW_NONE) return "no reduction";
  if (how === HOW_MIXED) return "a mix of reduce ops or types";
  const op = REDUCE_OPS.find((r) => REDUCE_TO_CCE[r] === how >> 4);
  const d = dtypeFromSdma(how & 15);
  return `${op ?? `CCE op ${how >> 4}`} over ${d ?? `SDMA dtype ${how & 15}`}`;
}
