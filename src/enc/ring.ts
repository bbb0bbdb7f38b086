// The ring composer (enc_alg_metaring + __compose_channel_ring): per-rank, per-channel step programs.
//
// Every step below is one leaf per half chunk (H0 then H1), each closed by a step mark:
//   send               copy own input piece into next's receive slot; signal next      [wait credit]
//   recv_reduce_send   CCE(slot, own input) into next's slot; signal next; credit prev [wait recv+credit]
//   recv_reduce_copy   CCE(slot, own input) into own output; credit prev               [wait recv]
//   direct_copy_send   copy own output (or input) piece into next's output; signal next
//   direct_recv_send   copy the piece prev wrote into own output on to next's output     [wait recv]
//   direct_recv        the piece prev wrote is in place                                 [wait recv]
//   reset_send_credit  wait until every credit of the receive buffer is home            [drain]
import { REDUCE_TO_CCE, SDMA_DTYPE, dtypeSize } from "../ir/dtypes.ts";
import { CommType, EncAlgType, EncOpType } from "../ir/enums.ts";
import { assert } from "../ir/errors.ts";
import type { OpSpec } from "../ir/spec.ts";
import { StepFlag } from "../encd/slot.ts";
import { channelRange, halves, type ChunkPlan } from "./chunks.ts";
import type { ProxyFifo } from "../encd/proxy-fifo.ts";
import { blockOf, semaAddr } from "../encd/address.ts";
import { opEntry } from "../ir/ops.ts";
import type { AlgorithmEntry, ChannelGens, NetHop, RankBuffers, StageComposer } from "./stage.ts";
import { BASE, COLLECTIVES, no, yes } from "./kit.ts";
import type { EncdChannel } from "../encd/channel-writer.ts";


/** The ring neighbourhood of one rank on one channel. */
export interface RingView {
  /** Group ranks in ring order, rotated so that index 0 is this rank (user_ranks). */
  readonly na: readonly number[];
  readonly me: RankBuffers;
  readonly next: RankBuffers;
  /** Semaphore INC addresses of fold 0: next's recv-count semaphore and prev's send-credit semaphore. */
  readonly nextRecvInc: number;
  readonly prevSendInc: number;
  /** Slots of next's receive buffer on this channel (the send credits) and of our own. */
  readonly sendSlots: number;
  readonly recvSlots: number;
  /** Network hops: what crosses to another node goes through this channel's proxy queue. */
  readonly net?: NetHop;
}


/** Hand `n` bytes at local `src` to the channel's proxy for `dst` in address block `block`, then signal `sema` there (one per remote fold). */
function proxySend(chan: EncdChannel, net: { readonly proxyInc: number; readonly entries: ProxyFifo; readonly foldN: number }, src: number, dst: number, n: number, sema: number, block: number): void {
  // Each fold counts on its own trigger semaphore: a fold that runs a step ahead cannot stand in
  // for a slower fold whose share of this entry has not landed yet.
  chan.semaInc(net.proxyInc);
  net.entries.push({ src, dst, bytes: n, trigger: 1, semaN: net.foldN, sema, block });
}

export interface RingOpContext {
  readonly op: OpSpec;
  readonly opType: EncOpType;
  readonly plan: ChunkPlan;
  /** Total elements of the op (nccom-test count). */
  readonly count: number;
  readonly rankN: number;
  /** Bytes per CCE packet (the operation's reduce slice). */
  readonly reduceSliceBytes: number;
}

type Piece = { lo: number; hi: number };

/** Ring steps of one chunk group a channel composes between handovers of a streamed program. */
const STEPS_PER_HANDOVER = 64;

/** Compose one channel of one rank for one op; `ch` is the channel index, `chan` its emitter. */
export function* composeChannelRing(ctx: RingOpContext, ch: number, chan: EncdChannel, v: RingView): Generator<void, void> {
  const { op, plan, rankN: R } = ctx;
  const esize = dtypeSize(op.dtype);
  const cce = REDUCE_TO_CCE[op.reduce];
  const sdmaDtype = SDMA_DTYPE[op.dtype];
  const me = v.na[0]!;
  let sent = 0;
  let received = 0;
  const sendSlot = (base: number, n: number): number => base + (n % v.sendSlots) * plan.halfBytes;
  const recvSlot = (base: number, n: number): number => base + (n % v.recvSlots) * plan.halfBytes;
  const bytes = (p: Piece): number => (p.hi - p.lo) * esize;
  const blockLen = (k: number): number => Math.max(0, Math.min(plan.blockElems, ctx.count - k * plan.blockElems));
  // Element offsets of block k's piece inside the input / output buffers.
  const inOff = (k: number, p: Piece): number => (ctx.opType === EncOpType.ALLGATHER ? p.lo : k * plan.blockElems + p.lo) * esize;
  const outOff = (k: number, p: Piece): number => (ctx.opType === EncOpType.REDUCE_SCATTER ? p.lo : k * plan.blockElems + p.lo) * esize;
  const pieces = (k: number, g: number): [Piece, Piece] => halves(channelRange(plan, g, ch, blockLen(k)));

  if (R === 1) {
    // enc_1rank_primitive: the collective of one rank is a local copy.
    chan.copy(v.me.input, v.me.output, ch === 0 ? op.bytes : 0, esize);
    chan.markStep(0);
    chan.markEnd();
    return;
  }

  const net = v.net;
  const viaProxy = (src: number, dst: number, n: number, sema: number, block: number): void => proxySend(chan, net!, src, dst, n, sema, block);
  /** Deliver a piece into next's receive slot: directly, or staged for the proxy across nodes. */
  const toNextSlot = (write: (dst: number) => void, n: number): void => {
    const slotIndex = sent++;
    if (net?.toNext) {
      const stage = sendSlot(net.staging, slotIndex);
      write(stage);
      viaProxy(stage, sendSlot(v.next.chbuf[ch]!, slotIndex), n, v.nextRecvInc, net.nextBlock);
    } else {
      write(sendSlot(v.next.chbuf[ch]!, slotIndex));
      chan.semaInc(v.nextRecvInc);
    }
  };
  const creditPrev = (): void => {
    if (net?.fromPrev) viaProxy(0, 0, 0, v.prevSendInc, net.prevBlock);
    else chan.semaInc(v.prevSendInc);
  };
  /** Copy a piece of own memory into next's output and signal it. */
  const toNextOutput = (src: number, off: number, n: number): void => {
    if (net?.toNext) viaProxy(src, v.next.output + off, n, v.nextRecvInc, net.nextBlock);
    else {
      chan.copy(src, v.next.output + off, n, esize);
      chan.semaInc(v.nextRecvInc);
    }
  };

  const send = (k: number, p: Piece): void => {
    toNextSlot((dst) => chan.copy(v.me.input + inOff(k, p), dst, bytes(p), esize), bytes(p));
    chan.markStep(StepFlag.WAIT_CREDIT);
  };
  const recvReduceSend = (k: number, p: Piece): void => {
    const slot = recvSlot(v.me.chbuf[ch]!, received++);
    toNextSlot((dst) => chan.reduce([slot, v.me.input + inOff(k, p)], dst, bytes(p), cce, sdmaDtype, esize, ctx.reduceSliceBytes), bytes(p));
    creditPrev();
    chan.markStep(StepFlag.WAIT_RECV | StepFlag.WAIT_CREDIT);
  };
  const recvReduceCopy = (k: number, p: Piece): void => {
    chan.reduce([recvSlot(v.me.chbuf[ch]!, received++), v.me.input + inOff(k, p)], v.me.output + outOff(k, p), bytes(p), cce, sdmaDtype, esize, ctx.reduceSliceBytes);
    creditPrev();
    chan.markStep(StepFlag.WAIT_RECV);
  };
  const directCopySend = (k: number, p: Piece, fromInput: boolean): void => {
    if (fromInput) chan.copy(v.me.input + inOff(k, p), v.me.output + outOff(k, p), bytes(p), esize);
    toNextOutput(v.me.output + outOff(k, p), outOff(k, p), bytes(p));
    chan.markStep(0);
  };
  const directRecvSend = (k: number, p: Piece): void => {
    toNextOutput(v.me.output + outOff(k, p), outOff(k, p), bytes(p));
    chan.markStep(StepFlag.WAIT_RECV);
  };
  const directRecv = (): void => chan.markStep(StepFlag.WAIT_RECV);

  const reduceScatterPhase = ctx.opType !== EncOpType.ALLGATHER;
  const allGatherPhase = ctx.opType !== EncOpType.REDUCE_SCATTER;
  // A streamed program hands over what it has emitted after each chunk group, and within a group
  // of a long ring every STEPS_PER_HANDOVER ring steps (a 512-rank ring's one group is 1,022
  // steps: composed whole, a small op's descriptors would all be in memory at once).
  for (let g = 0; g < plan.groups; g++) {
    let steps = 0;
    if (reduceScatterPhase) {
      for (const p of pieces(v.na[R - 1]!, g)) send(v.na[R - 1]!, p);
      for (let j = R - 2; j >= 1; j--) {
        for (const p of pieces(v.na[j]!, g)) recvReduceSend(v.na[j]!, p);
        if (++steps % STEPS_PER_HANDOVER === 0) yield;
      }
      for (const p of pieces(me, g)) {
        recvReduceCopy(me, p);
        if (allGatherPhase) directCopySend(me, p, false);
      }
    } else {
      for (const p of pieces(me, g)) directCopySend(me, p, true);
    }
    if (allGatherPhase) {
      for (let j = R - 1; j >= 2; j--) {
        for (const p of pieces(v.na[j]!, g)) directRecvSend(v.na[j]!, p);
        if (++steps % STEPS_PER_HANDOVER === 0) yield;
      }
      for (const _ of pieces(v.na[1]!, g)) directRecv();
    }
    chan.markStep(StepFlag.DRAIN_CREDIT, v.sendSlots);
    // One chunk group emitted.
    yield;
  }
  assert(sent === received, `channel ${ch}: ${sent} slot sends but ${received} slot receives`);
  chan.markEnd();
}


/** The source/target neighbourhood of one rank on one channel for a pairs op (permute, send/recv). */
export interface PairView {
  readonly me: RankBuffers;
  /** Where this rank sends (undefined: it sends nothing); `self` when it is its own target. */
  readonly target: { readonly buffers: RankBuffers; readonly recvInc: number; readonly self: boolean } | undefined;
  /** Who sends to this rank (undefined: nobody). */
  readonly source: { readonly sendInc: number; readonly self: boolean } | undefined;
  /** The channel's send credits (slots of the target's buffer it cycles through), and the source's. */
  readonly sendSlots: number;
  readonly recvSlots: number;
  /** The target and / or the source is on another node: those transfers and signals go through this proxy queue. */
  readonly net?: PairNet;
}

/** A pair channel's network side: which directions cross nodes, and the channel's proxy queue. */
export interface PairNet {
  readonly toTarget: boolean;
  readonly fromSource: boolean;
  readonly proxyInc: number;
  readonly entries: ProxyFifo;
  readonly foldN: number;
  readonly targetBlock: number;
  readonly sourceBlock: number;
}

export interface PairOpContext {
  readonly op: OpSpec;
  readonly channels: number;
  /** Bytes of one receive-buffer slot (pieces of a permute-reduce). */
  readonly pieceBytes: number;
  readonly reduceSliceBytes: number;
  /** Permute-reduce: the receiver reduces the incoming buffer with its own input. */
  readonly reduce: boolean;
}

/**
 * permute_channel / p2p_channel: channel `ch` moves its share of the buffer from each source to
 * its target. A plain permute (or send / recv) writes straight into the target's output and signals
 * it; a permute-reduce streams pieces through the target's receive slots (with credits), the target
 * reducing each with its own input. Sends and receives alternate piece by piece, so a cycle of
 * pairs cannot deadlock on credits.
 */
export function* composeChannelPermute(ctx: PairOpContext, ch: number, chan: EncdChannel, v: PairView): Generator<void, void> {
  const { op } = ctx;
  const esize = dtypeSize(op.dtype);
  const elems = op.bytes / esize;
  const per = Math.ceil(elems / ctx.channels);
  const lo = Math.min(ch * per, elems) * esize;
  const hi = Math.min(ch * per + per, elems) * esize;
  const t = v.target;
  const s = v.source;
  const net = v.net;
  const viaProxy = (src: number, dst: number, n: number, sema: number, block: number): void => proxySend(chan, net!, src, dst, n, sema, block);
  /** Write `n` bytes of own memory to the target and signal it: by DMA, or through the proxy across nodes. */
  const toTarget = (src: number, dst: number, n: number, recvInc: number): void => {
    if (net?.toTarget) viaProxy(src, dst, n, recvInc, net.targetBlock);
    else {
      chan.copy(src, dst, n, esize);
      chan.semaInc(recvInc);
    }
  };
  const creditSource = (sendInc: number): void => {
    if (net?.fromSource) viaProxy(0, 0, 0, sendInc, net.sourceBlock);
    else chan.semaInc(sendInc);
  };
  if (!ctx.reduce) {
    if (t) {
      if (t.self) chan.copy(v.me.input + lo, v.me.output + lo, hi - lo, esize);
      else toTarget(v.me.input + lo, t.buffers.output + lo, hi - lo, t.recvInc);
      chan.markStep(0);
    }
    if (s && !s.self) chan.markStep(StepFlag.WAIT_RECV);
    chan.markEnd();
    return;
  }
  const cce = REDUCE_TO_CCE[op.reduce];
  const sdma = SDMA_DTYPE[op.dtype];
  const piece = Math.max(esize, Math.floor(ctx.pieceBytes / esize) * esize);
  let sent = 0;
  let received = 0;
  for (let off = lo; off < hi || (off === lo && lo === hi); off += piece) {
    const len = Math.min(piece, hi - off);
    if (t && t.self) {
      chan.reduce([v.me.input + off, v.me.input + off], v.me.output + off, len, cce, sdma, esize, ctx.reduceSliceBytes);
      chan.markStep(0);
    } else {
      if (t) {
        toTarget(v.me.input + off, t.buffers.chbuf[ch]! + (sent++ % v.sendSlots) * ctx.pieceBytes, len, t.recvInc);
        chan.markStep(StepFlag.WAIT_CREDIT);
      }
      if (s) {
        chan.reduce([v.me.chbuf[ch]! + (received++ % v.recvSlots) * ctx.pieceBytes, v.me.input + off], v.me.output + off, len, cce, sdma, esize, ctx.reduceSliceBytes);
        creditSource(s.sendInc);
        chan.markStep(StepFlag.WAIT_RECV);
      }
    }
    if (lo === hi) break;
    yield;
  }
  chan.markStep(StepFlag.DRAIN_CREDIT, v.sendSlots);
  chan.markEnd();
}

/**
 * The ring family's stage composer (RING, and the single-cycle ring, whose one cycle is the ring's):
 * every channel of every rank, side by side; an op of source/target pairs goes to the permute /
 * point-to-point channel instead.
 */
export const composeRingStage: StageComposer = (ctx, st, buffers, plans) => {
  const { comm, op, opType, count, reduceSliceBytes } = st;
  const { channels, info } = ctx;
  const gr = (r: number) => comm.pos.get(r)!.groupRank;
  const gens: ChannelGens = [];
  if (op.pairs) {
    const targetOf = new Map(op.pairs.map(([a, b]) => [a, b]));
    const sourceOf = new Map(op.pairs.map(([a, b]) => [b, a]));
    const reduce = opEntry(opType).handler === "permute-reduce";
    for (let rank = 0; rank < ctx.scn.ranks; rank++) {
      // (A device this composition does not emit gets no program: runStage would drop it.)
      if (!ctx.emits(info[rank]!.device)) continue;
      const t = targetOf.get(rank);
      const src = sourceOf.get(rank);
      for (let c = 0; c < channels; c++) {
        const pt = t === undefined ? undefined : ctx.place(t, comm.set, c);
        const ps = src === undefined ? undefined : ctx.place(src, comm.set, c);
        const toTarget = t !== undefined && ctx.viaNetwork(rank, t);
        const fromSource = src !== undefined && ctx.viaNetwork(src, rank);
        const net = toTarget || fromSource ? { toTarget, fromSource, ...ctx.proxyQueue(comm, rank, c), foldN: ctx.foldN, targetBlock: blockOf(t === undefined ? 0 : info[t]!.device), sourceBlock: blockOf(src === undefined ? 0 : info[src]!.device) } : undefined;
        gens.push({
          device: info[rank]!.device,
          gen: composeChannelPermute({ op, channels, pieceBytes: plans[comm.pos.get(rank)!.group]!.halfBytes, reduceSliceBytes, reduce }, c, ctx.chan(comm, rank, c), {
            me: buffers.get(rank)!,
            target: t === undefined ? undefined : { buffers: buffers.get(t)!, recvInc: semaAddr(info[t]!.device, pt!.topsp, pt!.recv, "inc"), self: t === rank },
            source: src === undefined ? undefined : { sendInc: semaAddr(info[src]!.device, ps!.topsp, ps!.send, "inc"), self: src === rank },
            sendSlots: ctx.sendSlots(comm, rank, c),
            recvSlots: src === undefined ? 0 : ctx.sendSlots(comm, src, c),
            ...(net ? { net } : {}),
          }),
        });
      }
    }
    return gens;
  }
  for (const rank of ctx.members(comm)) {
    const gi = comm.pos.get(rank)!.group;
    for (let c = 0; c < channels; c++) {
      const { ring, i, next, prev } = ctx.ringPos(comm, c, rank);
      const toNext = ctx.viaNetwork(rank, next);
      const fromPrev = ctx.viaNetwork(rank, prev);
      // (Every rank's network hop, its staging allocated, as the program's addresses have it; a
      // device this composition does not emit gets no program: runStage would drop it.)
      const net = toNext || fromPrev ? ctx.netHop(comm, rank, c, { next, prev, toNext, fromPrev }, plans[gi]!.halfBytes) : undefined;
      if (!ctx.emits(info[rank]!.device)) continue;
      const na = ring.map((_, j) => gr(ring[(i + j) % ring.length]!));
      const pn = ctx.place(next, comm.set, c);
      const pp = ctx.place(prev, comm.set, c);
      gens.push({
        device: info[rank]!.device,
        gen: composeChannelRing({ op, opType, plan: plans[gi]!, count, rankN: comm.groups[gi]!.length, reduceSliceBytes }, c, ctx.chan(comm, rank, c), {
          na,
          me: buffers.get(rank)!,
          next: buffers.get(next)!,
          nextRecvInc: semaAddr(info[next]!.device, pn.topsp, pn.recv, "inc"),
          prevSendInc: semaAddr(info[prev]!.device, pp.topsp, pp.send, "inc"),
          sendSlots: ctx.sendSlots(comm, rank, c),
          recvSlots: ctx.recvSlots(comm, rank, c),
          ...(net ? { net } : {}),
        }),
      });
    }
  }
  return gens;
};

/** The ring family: RING (the cascade's last rule) and SINGLE_CYCLE_RING (one rank per node). */
export const RING_FAMILY: readonly AlgorithmEntry[] = [
  {
    ...BASE,
    alg: EncAlgType.RING,
    label: "ring",
    precedence: 6,
    ops: COLLECTIVES,
    stageLevels: ["intra", "inter"],
    pipelinedStage: true,
    admit: () => yes("always allowed"),
    compose: composeRingStage,
  },
  {
    ...BASE,
    alg: EncAlgType.SINGLE_CYCLE_RING,
    label: "single-cycle-ring",
    gate: "single_cycle_ring",
    precedence: 4,
    ops: [EncOpType.ALLREDUCE],
    stageLevels: ["inter"],
    pipelinedStage: true,
    admit: (c) => {
      if (c.commType !== CommType.INTER) return no("INTER comm only");
      if (c.dbg === 2) return no("dbg == 2");
      if (c.nodeN <= 1) return no("node_n <= 1");
      if (c.rankN !== c.nodeN) return no("rank_n != node_n");
      return yes("one rank per node");
    },
    compose: composeRingStage,
  },
];
