// What a run may hold: the memory a values check and race detection would take, against this
// machine's budgets (half its memory; half the JavaScript heap for race detection), and the words
// that say what was left out.
import { freemem, totalmem } from "node:os";
import { getHeapStatistics } from "node:v8";
import { dtypeSize } from "../ir/dtypes.ts";
import { opTypeOf, type OpSpec } from "../ir/spec.ts";
import { bufferBytes } from "../enc/compile.ts";
import type { ProgramImage } from "../encd/program.ts";


/**
 * Memory a values check of `payload` bytes (every rank's input + output) holds, at most: the bytes
 * in simulated HBM, the inputs' values (an integer type's or fp32's are the HBM bytes themselves; a
 * narrow float's, as many bytes again), and the references with their bytes (the outputs' size,
 * twice for a narrow float). Every one of them is a typed array of the type's size: none is on the
 * JavaScript heap.
 */
export function valuesCheckMemory(payload: number): number {
  return payload * 3;
}

/** What a values check may use: half of this machine's memory (so runs repeat on the machine). */
export function valuesCheckBudget(): number {
  return Math.floor(totalmem() / 2);
}

/** Every rank's input + output bytes of `op` over these groups. */
function payloadBytes(op: OpSpec, groups: readonly (readonly number[])[]): number {
  let payload = 0;
  for (const g of groups) {
    for (let k = 0; k < g.length; k++) {
      const b = bufferBytes(op, opTypeOf(op.op), g.length, k);
      payload += b.inBytes + b.outBytes;
    }
  }
  return payload;
}

/**
 * Whether a values check of `op` over these groups fits: every rank's input + output and the
 * memory that takes, within `budget`. `why`: what does not fit, for a warning.
 */
export function valuesCheckFit(op: OpSpec, groups: readonly (readonly number[])[], budget = valuesCheckBudget()): { fits: boolean; why?: string } {
  const payload = payloadBytes(op, groups);
  const need = valuesCheckMemory(payload);
  if (need > budget) return { fits: false, why: `checking values holds ${payload} bytes of payload, about ${gib(need)} of memory; a values check may use ${gib(budget)} (half of this machine's ${gib(totalmem())}; ${gib(freemem())} free)` };
  return { fits: true };
}

/**
 * The race detector's shadow memory keeps a piece per range a packet read or wrote, about 90 bytes
 * each (measured: ring8 all-reduce 256 MiB, 1 M pieces, 90 MB; a 48-rank 836 MB one, 1.4 GB); a
 * piece covers at least a packet (`racePieceBytes`).
 */
const RACE_PIECE_COST = 96;

/**
 * The least a shadow piece covers for an op: a CCE packet (1,024 elements, at most 4 KiB, on the
 * shipped presets at the runtime's default packet), or less where the preset or the run makes its
 * packets smaller — the op's CC DMA packet (`packet`, its copies' descriptors) and its CCE reduce
 * slice (`reduceSlice`: `dma.cceMaxElements` of 2 makes 32-byte packets, 33 M pieces for a 64 MiB
 * reduce-scatter over 16 ranks, where 1 KiB was assumed and the heap ran out).
 */
export function racePieceBytes(esize: number, packet: number, reduceSlice: number): number {
  return Math.max(1, Math.min(4096, 1024 * esize, packet, reduceSlice));
}

/** Bytes in GiB, for messages about memory. */
function gib(b: number): string {
  return `${(b / 2 ** 30).toFixed(1)} GiB`;
}

/**
 * Whether a symbolic run should stop while it can still say why: its ranges and sets of
 * contributions grow with the ranks (every partial result of a reduce is a set of its own; a trn2
 * all-reduce of 1 MiB over 512 ranks outgrows a 4 GiB heap), and no estimate made before the run
 * holds for every schedule. Past 90 % of the JavaScript heap in use, it says so.
 */
export function heapFull(outsideBytes = 0): string | undefined {
  const h = getHeapStatistics();
  if (h.used_heap_size + outsideBytes <= 0.9 * h.heap_size_limit) return undefined;
  if (outsideBytes === 0) return `the JavaScript heap holds ${gib(h.used_heap_size)} of its ${gib(h.heap_size_limit)}`;
  return `the JavaScript heap holds ${gib(h.used_heap_size)}, and the sets of contributions ${gib(outsideBytes)} outside it, together more than nine tenths of the heap's ${gib(h.heap_size_limit)}`;
}

/** What race detection may use: half of the JavaScript heap (where its shadow memory lives). */
export function racesBudget(): number {
  return Math.floor(getHeapStatistics().heap_size_limit / 2);
}

/**
 * Vector clocks: one entry per memory agent (a DMA queue with a ring, a network proxy), held by
 * every queue, core and semaphore that orders them, in chunks shared between clocks where they are
 * alike: at most about 16 bytes per agent squared at once. (Measured, peak memory with against
 * without, `nccom allr -b 4K -e 4K --check values` on trn1: 128 to 1,024 ranks, 2,176 to 19,456
 * agents, 9 to 34 bytes with whole clocks; with chunks, 5 bytes at 1,024 ranks and 1.5 at 2,048.
 * The bound is kept: the heap is where the run would die.)
 */
const RACE_CLOCK_COST = 16;

/** The memory agents of a program: its DMA queues and network proxies (the length of its vector clocks). */
export function memoryAgents(image: ProgramImage): number {
  return image.devices.reduce((n, d) => n + d.queues.length + d.proxyQueues.length, 0);
}

/**
 * Whether race detection of `ops` (one program) over these groups fits: a shadow piece per
 * packet-sized range of every rank's buffers, and the vector clocks of the program's `agents`.
 */
export function racesFit(ops: readonly OpSpec[], groups: readonly (readonly number[])[], agents: number, budget = racesBudget(), pieceBytes: (op: OpSpec) => number = (op) => racePieceBytes(dtypeSize(op.dtype), 4096, 4096)): { need: number; fits: boolean } {
  let need = RACE_CLOCK_COST * agents * agents;
  for (const op of ops) need += Math.ceil(payloadBytes(op, op.replicaGroups ?? groups) / pieceBytes(op)) * RACE_PIECE_COST;
  return { need, fits: need <= budget };
}

/** The warning for race detection left out of `what` (it would need `need` bytes; `agents` memory agents). */
export function racesLeftOut(what: string, need: number, agents: number, budget: number | undefined, checking: string): string {
  return `${what}: race detection would keep about ${gib(need)} of shadow memory and vector clocks (a piece per packet-sized range of every rank's buffers; a clock entry per memory agent, ${agents} of them, in each queue, core and semaphore); it may use ${gib(budget ?? racesBudget())} (half of the JavaScript heap): checking ${checking} without race detection`;
}
