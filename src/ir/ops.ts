// The op registry: one entry per enc_op_type, everything the layers ask about an op in one place —
// how the dispatcher routes it, whether it reduces, what it needs besides a size, each rank's
// buffer sizes, nccom-test's bus factor and which reference collective checks it.
import { EncOpType } from "./enums.ts";
import { OP_NAMES, type OpName, type OpSpec } from "./spec.ts";

/**
 * The enc_op_type handler the 13-case dispatch routes an op to: the collectives' (any family a
 * gate admits), the ring family's point-to-point channel, the all-to-all handler (mesh only), the
 * two permute handlers (ring only), or the unsupported default.
 */
export type OpHandler = "collective" | "p2p" | "alltoall" | "permute" | "permute-reduce" | "unsupported";

/** Which reference collective the checker computes for an op. */
export type OpReference = "collective" | "alltoall" | "alltoall-v" | "all-gather-v" | "permute" | "none";

export interface OpEntry {
  readonly type: EncOpType;
  readonly name: OpName;
  readonly handler: OpHandler;
  /** Takes a reduce operation. */
  readonly reduces: boolean;
  /** Its size must split into one block per rank (a whole number of elements each). */
  readonly blocked: boolean;
  /** What the op needs besides a size: source/target pairs, or an n x n byte matrix. */
  readonly needs?: "pairs" | "counts";
  /** Input and output bytes of group rank k of n. */
  buffers(op: OpSpec, n: number, k: number): { inBytes: number; outBytes: number };
  /** nccom-test's busbw / algbw for n ranks. */
  busFactor(n: number): number;
  readonly reference: OpReference;
}

const same = (op: OpSpec) => ({ inBytes: op.bytes, outBytes: op.bytes });
const one = () => 1;
const ring2 = (n: number) => (n <= 1 ? 0 : (2 * (n - 1)) / n);
const ring1 = (n: number) => (n <= 1 ? 0 : (n - 1) / n);

function entry(type: EncOpType, e: Omit<OpEntry, "type" | "name" | "buffers" | "busFactor" | "blocked"> & Partial<Pick<OpEntry, "buffers" | "busFactor" | "blocked">>): OpEntry {
  return { type, name: OP_NAMES[type as number] as OpName, buffers: same, busFactor: one, blocked: false, ...e };
}

/** Indexed by enc_op_type. */
export const OPS: readonly OpEntry[] = [
  entry(EncOpType.ALLGATHER, { handler: "collective", reduces: false, blocked: true, reference: "collective", busFactor: ring1, buffers: (op, n) => ({ inBytes: op.bytes / n, outBytes: op.bytes }) }),
  entry(EncOpType.ALLREDUCE, { handler: "collective", reduces: true, reference: "collective", busFactor: ring2 }),
  entry(EncOpType.BROADCAST, { handler: "unsupported", reduces: false, reference: "none" }),
  entry(EncOpType.REDUCE, { handler: "unsupported", reduces: true, reference: "none" }),
  entry(EncOpType.REDUCE_SCATTER, { handler: "collective", reduces: true, blocked: true, reference: "collective", busFactor: ring1, buffers: (op, n) => ({ inBytes: op.bytes, outBytes: op.bytes / n }) }),
  entry(EncOpType.SEND, { handler: "p2p", reduces: false, needs: "pairs", reference: "permute" }),
  entry(EncOpType.RECV, { handler: "p2p", reduces: false, needs: "pairs", reference: "permute" }),
  entry(EncOpType.ALLTOALL, { handler: "alltoall", reduces: false, blocked: true, reference: "alltoall", busFactor: ring1 }),
  entry(EncOpType.PERMUTE, { handler: "permute", reduces: false, needs: "pairs", reference: "permute" }),
  entry(EncOpType.PERMUTE_REDUCE, { handler: "permute-reduce", reduces: true, needs: "pairs", reference: "permute" }),
  entry(EncOpType.PERMUTE_IMPLICIT, { handler: "permute", reduces: false, needs: "pairs", reference: "permute" }),
  entry(EncOpType.PERMUTE_REDUCE_IMPLICIT, { handler: "permute-reduce", reduces: true, needs: "pairs", reference: "permute" }),
  entry(EncOpType.ALLTOALL_V, {
    handler: "alltoall",
    reduces: false,
    needs: "counts",
    reference: "alltoall-v",
    busFactor: ring1,
    buffers: (op, _n, k) => {
      const c = op.counts!;
      return { inBytes: c[k]!.reduce((a, b) => a + b, 0), outBytes: c.reduce((a, row) => a + row[k]!, 0) };
    },
  }),
];

/**
 * all-gather-v (nccom-test's allgv) has no enc_op_type: the runtime reaches the device with
 * ALLTOALL_V, each rank sending its one input block (counts[i][j] = c_i for every j, every send
 * displacement 0) to every rank, which lands it at its all-gather-v displacement. Its size is the
 * gathered output.
 */
export const ALLGATHER_V: OpEntry = {
  type: EncOpType.ALLTOALL_V,
  name: "all-gather-v",
  handler: "alltoall",
  reduces: false,
  blocked: false,
  needs: "counts",
  buffers: (op, _n, k) => ({ inBytes: op.counts![k]![0]!, outBytes: op.counts!.reduce((a, row) => a + row[0]!, 0) }),
  busFactor: ring1,
  reference: "all-gather-v",
};

/** The entry of a scenario op name, or of an enc_op_type (the op of that type). */
export function opEntry(op: OpName | EncOpType): OpEntry {
  if (op === "all-gather-v") return ALLGATHER_V;
  return typeof op === "number" ? OPS[op]! : OPS[OP_NAMES.indexOf(op)]!;
}
