// RDH: recursive doubling for all-gather, recursive halving for reduce-scatter, both for
// all-reduce, over log2(n) pairwise exchange steps. It runs on the mesh event tape (device pattern
// MESH): each step is one event that waits for the previous step's data and sends this step's to
// the partner rank XOR 2^k, every engine carrying a share and signalling it. Intra-node (INTRA_RDH)
// the engines write the partner directly; inter-node (INTER_RDH, one rank per node) every transfer
// and signal to the partner is a network proxy entry, which the step's DMA leg triggers.
import { REDUCE_TO_CCE, SDMA_DTYPE, dtypeSize } from "../ir/dtypes.ts";
import { CommType, EncAlgMeshType, EncAlgType, EncOpType, EncPattern } from "../ir/enums.ts";
import { CompileError } from "../ir/errors.ts";
import type { OpSpec } from "../ir/spec.ts";
import { semaAddr } from "../encd/address.ts";
import { MeshEventType } from "../encd/mesh-event.ts";
import { PeerWrites, type NetQueue } from "./peer.ts";
import type { AlgorithmEntry, StageComposer } from "./stage.ts";
import { BASE, COLLECTIVES, MESH_SEMAS, isPow2, no, slotScratch, yes } from "./kit.ts";
import { splitWhole } from "../encd/channel-writer.ts";
import type { MeshProgram } from "../encd/mesh-writer.ts";

export interface RdhRank {
  readonly groupRank: number;
  readonly device: number;
  readonly topsp: number;
  readonly handshake: number;
  /** Counts this rank's own reduce packets done (every engine signals it). */
  readonly local: number;
  /** First of the per-step data semaphores (reduce-scatter steps, then all-gather steps). */
  readonly stepSema: number;
  readonly compl: number;
  readonly input: number;
  readonly output: number;
  /** 2n blocks: the working copy, then the landing slots of the halving steps. */
  readonly scratch: number;
}

export interface RdhOpContext {
  readonly op: OpSpec;
  readonly opType: EncOpType;
  readonly ranks: readonly RdhRank[];
  readonly count: number;
  readonly reduceSliceBytes: number;
  /** Inter-node: this rank's network proxy queue. */
  readonly net?: NetQueue;
  /** The algorithm's name for messages. */
  readonly name?: string;
}

export function log2Exact(n: number): number | undefined {
  const l = Math.log2(n);
  return Number.isInteger(l) ? l : undefined;
}

/** `x` with its low `bits` bits in reverse order. */
export function bitReverse(x: number, bits: number): number {
  let r = 0;
  for (let b = 0; b < bits; b++) if ((x >> b) & 1) r |= 1 << (bits - 1 - b);
  return r;
}

/** Semaphores an RDH program of n ranks needs after its first step semaphore. */
export function rdhStepSemas(n: number): number {
  return 2 * (log2Exact(n) ?? 0);
}

/** Byte offset of block k's start (blocks of ceil(count/n) elements, the last ones short). */
function blockOffset(count: number, n: number, k: number, esize: number): number {
  return Math.min(k * Math.ceil(count / n), count) * esize;
}


export function composeRdh(ctx: RdhOpContext, me: RdhRank, prog: MeshProgram, path: string): void {
  const { op, opType, ranks } = ctx;
  const n = ranks.length;
  const L = log2Exact(n);
  if (L === undefined) throw new CompileError("CMP1203", `algorithm ${ctx.name ?? '5 INTRA_RDH ("RDH")'} with ${n} ranks (not a power of two) is not supported yet`, { path, value: n });
  const lg = L;
  // All-reduce runs in bit-reversed rank order: its halving starts with partner i XOR 1 (the
  // largest exchange between the nearest ranks, e.g. cores of one chip) and its doubling ends
  // there — intra-chip reduction first, chip axes, intra-chip broadcast last (hardware-facts
  // §7.1). Which rank holds which block in between does not matter to an all-reduce, so it keeps
  // contiguous spans; a reduce-scatter's or all-gather's blocks are fixed, so they take the same
  // partner order over strided block sets (nearFirstHalving, farFirstDoubling).
  const reversed = opType === EncOpType.ALLREDUCE;
  const rev = (x: number): number => (reversed ? bitReverse(x, L) : x);
  const at = (v: number): RdhRank => ranks[rev(v)]!;
  const i = rev(me.groupRank);
  const esize = dtypeSize(op.dtype);
  const E = prog.dma.foldN;
  const dma = prog.dma;
  const inc = (r: RdhRank, sema: number) => semaAddr(r.device, r.topsp, sema, "inc");
  const read = (sema: number) => semaAddr(me.device, me.topsp, sema, "read");
  // Reduce-scatter input blocks are op.bytes / n each; otherwise blocks of ceil(count / n).
  const rsIn = opType === EncOpType.REDUCE_SCATTER;
  const off = (k: number) => (rsIn ? k * (op.bytes / n) : blockOffset(ctx.count, n, k, esize));
  const blockBytes = rsIn ? op.bytes / n : blockOffset(ctx.count, n, 1, esize);
  const W = me.scratch;
  const slot = (r: RdhRank, k: number) => r.scratch + n * blockBytes + (n - n / 2 ** k) * blockBytes;
  // Writes and signals to a partner: DMA, or (inter-node) proxy entries the next event triggers.
  const peer = new PeerWrites(dma, ctx.net);

  prog.event(MeshEventType.FUNCTION_BARRIER_FIRST_COLL);
  [...Array(L).keys()].forEach((k) => {
    const p = at(i ^ (1 << k));
    peer.signal(k % E, p.device, inc(p, p.handshake));
  });
  peer.flush();
  prog.event(MeshEventType.RDH_LOCAL_HANDSHAKE, { dma: true });
  // Each event waits for what the one before produced: handshakes, a partner's data, or this rank's reduce.
  let wait: { sema: number; value: number } = { sema: read(me.handshake), value: L };
  const event = (type: number): void => {
    prog.event(type, { wait, dma: true });
  };
  const cce = REDUCE_TO_CCE[op.reduce];
  const sdma = SDMA_DTYPE[op.dtype];

  if (rsIn) {
    nearFirstHalving();
    finish();
    return;
  }
  if (opType !== EncOpType.ALLGATHER) {
    // Recursive halving: keep the half holding block i, send the other half to the partner, then
    // reduce the partner's copy of the kept half into the working copy (the output at the last step).
    let lo = 0;
    let hi = n;
    for (let k = 0; k < L; k++) {
      const bit = 1 << (L - 1 - k);
      const partner = at(i ^ bit);
      const mid = (lo + hi) / 2;
      const [keepLo, keepHi, sendLo, sendHi] = i & bit ? [mid, hi, lo, mid] : [lo, mid, mid, hi];
      const src = k === 0 ? me.input : W;
      splitWhole(off(sendHi) - off(sendLo), esize, E).forEach((x, f) => peer.copy(f, partner.device, src + off(sendLo) + x.off, slot(partner, k) + x.off, x.len, inc(partner, me.stepSema + k)));
      peer.flush();
      event(MeshEventType.RH_STEP_0 + k);
      wait = { sema: read(me.stepSema + k), value: E };
      const last = k === L - 1;
      const dst = last ? (rsIn ? me.output : me.output + off(keepLo)) : W + off(keepLo);
      splitWhole(off(keepHi) - off(keepLo), esize, E).forEach((x, f) => {
        dma.reduceOn(f, [src + off(keepLo) + x.off, slot(me, k) + x.off], dst + x.off, x.len, cce, sdma, ctx.reduceSliceBytes);
        dma.semaIncOn(f, semaAddr(me.device, me.topsp, me.local, "inc"));
      });
      event(MeshEventType.REDUCE_WRITE);
      wait = { sema: read(me.local), value: E };
      lo = keepLo;
      hi = keepHi;
    }
  } else {
    // All-gather: the own block into place (engine 0); sends read it from the input.
    dma.copyOn(0, me.input, me.output + off(i), blockBytes);
    farFirstDoubling();
    finish();
    return;
  }
  // Recursive doubling: send the span held so far to the partner, doubling it each step.
  for (let k = 0; k < L; k++) {
    const partner = at(i ^ (1 << k));
    const lo = (i >> k) << k;
    const hi = Math.min(lo + (1 << k), n);
    const sema = me.stepSema + L + k;
    splitWhole(off(hi) - off(lo), esize, E).forEach((x, f) => peer.copy(f, partner.device, me.output + off(lo) + x.off, partner.output + off(lo) + x.off, x.len));
    for (let f = 0; f < E; f++) peer.signal(f, partner.device, inc(partner, sema));
    peer.flush();
    event(MeshEventType.RD_STEP_0 + k);
    wait = { sema: read(sema), value: E };
  }
  finish();

  /**
   * Reduce-scatter, nearest partner first (intra-chip reduction before the chip axes): step k
   * exchanges with i XOR 2^k the held blocks whose bit k differs from i's — a strided set, sent
   * block by block into the partner's landing slot k in block order — and reduces the others
   * with what the partner sent; after lg n steps the rank holds block i.
   */
  function nearFirstHalving(): void {
    let held = [...Array(n).keys()];
    for (let k = 0; k < lg; k++) {
      const bit = 1 << k;
      const partner = ranks[i ^ bit]!;
      const send = held.filter((b) => (b & bit) !== (i & bit));
      const keep = held.filter((b) => (b & bit) === (i & bit));
      const src = k === 0 ? me.input : W;
      send.forEach((b, j) => splitWhole(blockBytes, esize, E).forEach((x, f) => peer.copy(f, partner.device, src + off(b) + x.off, slot(partner, k) + j * blockBytes + x.off, x.len)));
      for (let f = 0; f < E; f++) peer.signal(f, partner.device, inc(partner, me.stepSema + k));
      peer.flush();
      event(MeshEventType.RH_STEP_0 + k);
      wait = { sema: read(me.stepSema + k), value: E };
      const last = k === lg - 1;
      keep.forEach((b, j) =>
        splitWhole(blockBytes, esize, E).forEach((x, f) => dma.reduceOn(f, [src + off(b) + x.off, slot(me, k) + j * blockBytes + x.off], (last ? me.output : W + off(b)) + x.off, x.len, cce, sdma, ctx.reduceSliceBytes)),
      );
      for (let f = 0; f < E; f++) dma.semaIncOn(f, semaAddr(me.device, me.topsp, me.local, "inc"));
      event(MeshEventType.REDUCE_WRITE);
      wait = { sema: read(me.local), value: E };
      held = keep;
    }
  }

  /**
   * All-gather, farthest partner first (chip axes, then the intra-chip broadcast): step k sends
   * every held block to i XOR 2^(L-1-k), straight into its output (the own block from the input).
   */
  function farFirstDoubling(): void {
    let held = [i];
    for (let k = 0; k < lg; k++) {
      const bit = 1 << (lg - 1 - k);
      const partner = ranks[i ^ bit]!;
      const sema = me.stepSema + lg + k;
      held.forEach((b, j) => {
        const base = b === i ? me.input - off(i) : me.output;
        splitWhole(off(b + 1) - off(b), esize, E).forEach((x, f) => peer.copy((f + j) % E, partner.device, base + off(b) + x.off, partner.output + off(b) + x.off, x.len));
      });
      for (let f = 0; f < E; f++) peer.signal(f, partner.device, inc(partner, sema));
      peer.flush();
      event(MeshEventType.RD_STEP_0 + k);
      wait = { sema: read(sema), value: E };
      held = [...held, ...held.map((b) => b ^ bit)].sort((a, b) => a - b);
    }
  }

  function finish(): void {
    for (let f = 0; f < E; f++) dma.semaIncOn(f, semaAddr(me.device, me.topsp, me.compl, "inc"));
    prog.event(MeshEventType.SYNC, { wait, dma: true });
    prog.event(MeshEventType.FUNCTION_BARRIER_LAST_COLL, { wait: { sema: read(me.compl), value: E } });
  }
}

/** The RDH stage composer (intra and inter): every rank's exchange steps, on its mesh program. */
export const composeRdhStage: StageComposer = (ctx, st, buffers, _plans, path) => {
  const { comm, op, opType, alg, count, reduceSliceBytes } = st;
  comm.groups.forEach((g) => {
    const ranks = g.map((rank): RdhRank => {
      const b = buffers.get(rank)!;
      const m = ctx.meshPlace(rank);
      return { groupRank: comm.pos.get(rank)!.groupRank, device: ctx.info[rank]!.device, topsp: m.topsp, handshake: m.semas.handshake, local: m.semas.data, stepSema: m.semas.compl + 1, compl: m.semas.compl, input: b.input, output: b.output, scratch: b.scratch };
    });
    const name = alg === EncAlgType.INTER_RDH ? '7 INTER_RDH ("RDH")' : '5 INTRA_RDH ("RDH")';
    // Across nodes every partner is remote: the program's transfers go through the rank's proxy queue.
    // (A folded pass composes the programs of the devices it emits only.)
    g.forEach((rank, k) => {
      if (ctx.emits(ctx.info[rank]!.device)) composeRdh({ op, opType, ranks, count, reduceSliceBytes, name, ...ctx.meshNet(rank, g) }, ranks[k]!, ctx.meshProgram(comm, rank, st.alg), `${path}.op`);
    });
  });
  return [];
};

/** Rank counts the intra-node RDH scheduler has schedules for (spec/hierarchical-rdh-and-proxy.md §3). */
export const INTRA_RDH_RANKS: readonly number[] = [4, 8, 16, 64];

const rdhSemas = (n: number) => MESH_SEMAS + rdhStepSemas(2 ** Math.floor(Math.log2(n)));

/** What the two RDH schedulers share: the mesh tape, a working copy and landing slots per rank, a semaphore per step. */
const RDH_MEMBER = { ...BASE, exchange: "halving", ops: COLLECTIVES, pattern: EncPattern.MESH, meshType: EncAlgMeshType.FULL_MESH, program: "mesh-tape", scratch: slotScratch((n) => 2 * n), tapeSemas: rdhSemas, compose: composeRdhStage } as const;

/** The RDH family: the intra-node and inter-node recursive halving / doubling schedulers. */
export const RDH_FAMILY: readonly AlgorithmEntry[] = [
  {
    ...RDH_MEMBER,
    alg: EncAlgType.INTRA_RDH,
    label: "intra-rdh",
    gate: "intra_rdh",
    precedence: 1,
    stageLevels: ["intra"],
    admit: (c) => {
      if (c.commType === CommType.INTER) return no("INTRA comm only");
      if (c.multiStream) return no("multi-stream");
      if (c.rdhCcMode === 0) return no("rdh_cc_mode == 0");
      if (!INTRA_RDH_RANKS.includes(c.rankN)) return no(`the intra-node RDH scheduler takes rank_n in {${INTRA_RDH_RANKS.join(", ")}}, not ${c.rankN}`);
      return yes(`rdh_cc_mode set, rank_n ${c.rankN}`);
    },
  },
  {
    ...RDH_MEMBER,
    alg: EncAlgType.INTER_RDH,
    label: "inter-rdh",
    gate: "inter_rdh",
    precedence: 5,
    stageLevels: ["inter"],
    admit: (c) => {
      if (c.commType !== CommType.INTER) return no("INTER comm only");
      if (c.localRankN !== 1) return no("local_rank_n != 1");
      if (c.rankN !== c.nodeN) return no("rank_n != node_n");
      if (!isPow2(c.rankN) || c.rankN <= 7) return no(`rank_n ${c.rankN} is not a power of two above 7`);
      if (c.podEnabled) return no("pod enabled");
      return yes("power-of-two nodes, one rank each");
    },
  },
];
