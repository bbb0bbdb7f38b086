// What the algorithm families share when they declare themselves (src/enc/stage.ts's AlgorithmEntry):
// verdict helpers, the collectives they serve, the entry defaults, the mesh family's enable
// condition and common member, and the mesh block arithmetic several families size scratch by.
import { dtypeSize } from "../ir/dtypes.ts";
import { EncAlgType, EncOpType, EncPattern } from "../ir/enums.ts";
import type { OpSpec } from "../ir/spec.ts";
import type { CommContext, Level, Verdict } from "./stage.ts";

export const yes = (reason: string): Verdict => ({ ok: true, reason });
export const no = (reason: string): Verdict => ({ ok: false, reason });

/** The collectives every family composes. */
export const COLLECTIVES: readonly EncOpType[] = [EncOpType.ALLGATHER, EncOpType.ALLREDUCE, EncOpType.REDUCE_SCATTER];

export const isPow2 = (n: number): boolean => n > 0 && (n & (n - 1)) === 0;

/** ENC_MESH_MAX_NUM_DEVICES: the devices one mesh spans at most. */
const MESH_MAX_DEVICES = 128;

/** enable_mesh_alg: what every mesh-family member needs. */
export function enableMesh(c: CommContext, variant: EncAlgType): Verdict {
  if (!c.meshSupported) return no("the instance does not support mesh");
  if (c.deviceN > MESH_MAX_DEVICES) return no(`the group spans ${c.deviceN} devices; a mesh spans at most ${MESH_MAX_DEVICES} (ENC_MESH_MAX_NUM_DEVICES)`);
  if (c.multiStream) return no("mesh does not work with multiple streams");
  if (variant === EncAlgType.TWO_STEP_POD_MESH && !c.podEnabled) return no("needs an UltraServer pod");
  // The full-mesh build's invariant (node_n == 1) || (use_net XOR enable_pod): on a pod platform a
  // mesh's other nodes are all pod peers, or all network peers — never both.
  if (c.podEnabled && c.podN > 1) return no(`the group spans ${c.podN} pods: on a pod platform a mesh's peers on other nodes must all be pod peers (node_n == 1 || use_net XOR enable_pod)`);
  if ((variant === EncAlgType.LATENCY_OPT_MESH || variant === EncAlgType.BW_OPT_MESH) && !c.neuronSwitch) return no("needs a NeuronSwitch-v1 platform");
  return yes("enable_mesh_alg");
}

const reduces = (opType: EncOpType) => opType === EncOpType.ALLREDUCE || opType === EncOpType.REDUCE_SCATTER;

/** Byte range [off, off+len) of block k when `total` bytes split into n blocks of whole elements (the last may be short). */
export function meshBlock(totalElems: number, n: number, k: number, esize: number): { off: number; len: number } {
  const per = Math.ceil(totalElems / n);
  const start = Math.min(k * per, totalElems);
  const end = Math.min(start + per, totalElems);
  return { off: start * esize, len: (end - start) * esize };
}

/** A mesh slot: the block a peer lands in it (a reduce-scatter's output share, else the op's block). */
export function meshSlotBytes(op: OpSpec, opType: EncOpType, n: number): number {
  const esize = dtypeSize(op.dtype);
  return opType === EncOpType.REDUCE_SCATTER ? op.bytes / n : meshBlock(op.bytes / esize, n, 0, esize).len;
}

/** Scratch of a mesh-tape program: `slots` blocks per rank for a reducing op. */
export const slotScratch = (slots: (n: number) => number) => (op: OpSpec, opType: EncOpType, n: number) => (reduces(opType) ? slots(n) * meshSlotBytes(op, opType, n) : undefined);

/** A mesh program's semaphores: handshake, data, data2, completion. */
export const MESH_SEMAS = 4;

/** An entry's defaults: a ring-channel algorithm no hierarchical stage uses. */
export const BASE = { meshFamily: false, stageLevels: [] as readonly Level[], pipelinedStage: false, pattern: EncPattern.RING, program: "ring" } as const;

/** What every mesh-family member on the mesh tape shares. */
export const MESH_MEMBER = { ...BASE, exchange: "blocks", gate: "mesh", ops: COLLECTIVES, meshFamily: true, pattern: EncPattern.MESH, program: "mesh-tape", tapeSemas: () => MESH_SEMAS } as const;
