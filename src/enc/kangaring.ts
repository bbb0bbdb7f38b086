// The kangaring composer (metaring KANGARING, device pattern RING): only each chip's primary rank
// is on the ring of chips; it reduces its chip's ranks' inputs with the incoming partial in one
// N-read-1-write CCE (KANGARING_NR1W), and duplicates every finished piece into its secondaries'
// outputs: on v3+ with CCE replication (one read, a write per destination: the next chip and
// every secondary), on v2 — which has no multi-destination CCE — with a copy per secondary. The
// step program is
// the ring's (R-1 reduce-scatter and R-1 all-gather steps over the R chips, H0 then H1).
import { REDUCE_TO_CCE, SDMA_DTYPE, dtypeSize } from "../ir/dtypes.ts";
import { CommType, EncAlgType, EncOpType } from "../ir/enums.ts";
import { CompileError, assert } from "../ir/errors.ts";
import type { OpSpec } from "../ir/spec.ts";
import { StepFlag } from "../encd/slot.ts";
import { channelRange, halves, planChunks, type ChunkPlan } from "./chunks.ts";
import { semaAddr } from "../encd/address.ts";
import type { AlgorithmEntry, ChannelGens, Comm, ComposeContext, RankBuffers, Stage, StageComposer } from "./stage.ts";
import { BASE, COLLECTIVES, no, yes } from "./kit.ts";
import type { EncdChannel } from "../encd/channel-writer.ts";

export interface KangaringContext {
  readonly op: OpSpec;
  readonly opType: EncOpType;
  /** Chunk plan over chip blocks (m rank blocks each). */
  readonly plan: ChunkPlan;
  readonly count: number;
  /** Elements of one rank's block. */
  readonly rankBlock: number;
  /** Ranks per chip. */
  readonly m: number;
  readonly chips: number;
  readonly bufferSlots: number;
  readonly reduceSliceBytes: number;
  /** The DMA engines can write one read to several destinations (CCE replication, arch v3+). */
  readonly replication: boolean;
}

export interface KangaringView {
  /** Chips in ring order, rotated so that index 0 is this primary's chip. */
  readonly na: readonly number[];
  /** This chip's ranks in group-rank order. */
  readonly chip: readonly RankBuffers[];
  /** Which of them is the primary on this channel (the roles alternate between the cycles). */
  readonly primary: number;
  /** Group rank of the chip's first rank. */
  readonly chipBase: number;
  /** The secondaries' receive-semaphore INC addresses on this channel (chip order, primary left out). */
  readonly secondaryInc: readonly number[];
  readonly next: RankBuffers;
  readonly nextRecvInc: number;
  readonly prevSendInc: number;
}

type Piece = { lo: number; hi: number };

/** Compose channel `ch` of a chip's primary; returns how many signals each secondary must wait for. */
export function* composeChannelKangaring(ctx: KangaringContext, ch: number, chan: EncdChannel, v: KangaringView): Generator<void, number> {
  const { op, plan, opType, m, rankBlock: B } = ctx;
  const R = ctx.chips;
  const esize = dtypeSize(op.dtype);
  const cce = REDUCE_TO_CCE[op.reduce];
  const sdma = SDMA_DTYPE[op.dtype];
  const P = v.chip[v.primary]!;
  const secondaries = v.chip.filter((_, j) => j !== v.primary);
  let sent = 0;
  let received = 0;
  let signals = 0;
  const slotOf = (base: number, n: number): number => base + (n % ctx.bufferSlots) * plan.halfBytes;
  const len = (p: Piece) => (p.hi - p.lo) * esize;
  const chipStart = (c: number) => c * m * B;
  const chipLen = (c: number) => Math.max(0, Math.min(m * B, ctx.count - chipStart(c)));
  // Global element ranges of chip c's piece in chunk group g, halves H0 / H1.
  const pieces = (c: number, g: number): [Piece, Piece] => {
    const [a, b] = halves(channelRange(plan, g, ch, chipLen(c)));
    const s = chipStart(c);
    return [
      { lo: s + a.lo, hi: s + a.hi },
      { lo: s + b.lo, hi: s + b.hi },
    ];
  };
  // Byte offsets of global element e in an input / output buffer of group rank r.
  const inOff = (r: number, e: number) => (opType === EncOpType.ALLGATHER ? e - r * B : e) * esize;
  const outOff = (r: number, e: number) => (opType === EncOpType.REDUCE_SCATTER ? e - r * B : e) * esize;
  /** The piece cut at rank-block boundaries: which rank of the chip owns each part. */
  const owners = (p: Piece): { j: number; lo: number; hi: number }[] => {
    const out: { j: number; lo: number; hi: number }[] = [];
    for (let j = 0; j < m; j++) {
      const r = v.chipBase + j;
      const lo = Math.max(p.lo, r * B);
      const hi = Math.min(p.hi, (r + 1) * B);
      if (hi > lo) out.push({ j, lo, hi });
    }
    return out;
  };
  /** A reduce's sources: `first` (a receive slot), if given, then every chip rank's input at global element `lo` (one array made, no copies spread). */
  const sources = (first: number | undefined, lo: number): number[] => {
    const out: number[] = first === undefined ? [] : [first];
    for (let j = 0; j < v.chip.length; j++) out.push(v.chip[j]!.input + inOff(v.chipBase + j, lo));
    return out;
  };
  const reduceOrCopy = (srcs: number[], dst: number, bytes: number) => {
    if (srcs.length === 1) chan.copy(srcs[0]!, dst, bytes, esize);
    else chan.reduce(srcs, dst, bytes, cce, sdma, esize, ctx.reduceSliceBytes);
  };
  const signalSecondaries = () => {
    for (const inc of v.secondaryInc) chan.semaInc(inc);
    signals++;
  };
  const duplicate = (p: Piece) => {
    for (const s of secondaries) chan.copy(P.output + outOff(v.chipBase, p.lo), s.output + outOff(v.chipBase, p.lo), len(p), esize);
  };
  /** `src` (global element `lo` on) to the same place in every output of `outs`: one read with replication. */
  const fanOut = (src: number, outs: readonly number[], lo: number, bytes: number) => {
    if (outs.length === 0) return;
    if (ctx.replication) chan.replicate(src, outs.map((o) => o + outOff(0, lo)), bytes, sdma, esize, ctx.reduceSliceBytes);
    else for (const o of outs) chan.copy(src, o + outOff(0, lo), bytes, esize);
  };
  const secondaryOuts = secondaries.map((s) => s.output);
  // (The output lists a step fans out to are the same every step: made once.)
  const nextAndSecondaryOuts = [v.next.output, ...secondaryOuts];
  const chipAndNextOuts = [...v.chip.map((b) => b.output), v.next.output];

  const send = (p: Piece) => {
    reduceOrCopy(sources(undefined, p.lo), slotOf(v.next.chbuf[ch]!, sent++), len(p));
    chan.semaInc(v.nextRecvInc);
    chan.markStep(StepFlag.WAIT_CREDIT);
  };
  const recvReduceSend = (p: Piece) => {
    chan.reduce(sources(slotOf(P.chbuf[ch]!, received++), p.lo), slotOf(v.next.chbuf[ch]!, sent++), len(p), cce, sdma, esize, ctx.reduceSliceBytes);
    chan.semaInc(v.nextRecvInc);
    chan.semaInc(v.prevSendInc);
    chan.markStep(StepFlag.WAIT_RECV | StepFlag.WAIT_CREDIT);
  };
  const recvReduceCopy = (p: Piece) => {
    const slot = slotOf(P.chbuf[ch]!, received++);
    if (opType === EncOpType.REDUCE_SCATTER) {
      // Each rank of the chip gets its own block's part.
      for (const o of owners(p)) {
        const srcs = sources(slot + (o.lo - p.lo) * esize, o.lo);
        chan.reduce(srcs, v.chip[o.j]!.output + outOff(v.chipBase + o.j, o.lo), (o.hi - o.lo) * esize, cce, sdma, esize, ctx.reduceSliceBytes);
      }
    } else if (ctx.replication) {
      // The reduced piece written to every output of the chip at once.
      chan.reduce(sources(slot, p.lo), v.chip.map((b) => b.output + outOff(0, p.lo)), len(p), cce, sdma, esize, ctx.reduceSliceBytes);
    } else {
      chan.reduce(sources(slot, p.lo), P.output + outOff(v.chipBase, p.lo), len(p), cce, sdma, esize, ctx.reduceSliceBytes);
      duplicate(p);
    }
    signalSecondaries();
    chan.semaInc(v.prevSendInc);
    chan.markStep(StepFlag.WAIT_RECV);
  };
  const directCopySend = (p: Piece, fromInput: boolean) => {
    if (fromInput) {
      // All-gather: every rank's own part into every output of the chip and on to the next chip.
      for (const o of owners(p)) {
        const src = v.chip[o.j]!.input + inOff(v.chipBase + o.j, o.lo);
        fanOut(src, chipAndNextOuts, o.lo, (o.hi - o.lo) * esize);
      }
      signalSecondaries();
    } else {
      chan.copy(P.output + outOff(v.chipBase, p.lo), v.next.output + outOff(v.chipBase, p.lo), len(p), esize);
    }
    chan.semaInc(v.nextRecvInc);
    chan.markStep(0);
  };
  const directRecvSend = (p: Piece) => {
    fanOut(P.output + outOff(0, p.lo), nextAndSecondaryOuts, p.lo, len(p));
    signalSecondaries();
    chan.semaInc(v.nextRecvInc);
    chan.markStep(StepFlag.WAIT_RECV);
  };
  const directRecv = (p: Piece) => {
    fanOut(P.output + outOff(0, p.lo), secondaryOuts, p.lo, len(p));
    signalSecondaries();
    chan.markStep(StepFlag.WAIT_RECV);
  };

  const me = v.na[0]!;
  const rs = opType !== EncOpType.ALLGATHER;
  const ag = opType !== EncOpType.REDUCE_SCATTER;
  for (let g = 0; g < plan.groups; g++) {
    if (R === 1) {
      // One chip: reduce (or gather) among its ranks only.
      for (const p of pieces(me, g)) {
        if (rs) {
          for (const o of opType === EncOpType.REDUCE_SCATTER ? owners(p) : [{ j: 0, lo: p.lo, hi: p.hi }]) {
            reduceOrCopy(sources(undefined, o.lo), v.chip[o.j]!.output + outOff(v.chipBase + o.j, o.lo), (o.hi - o.lo) * esize);
          }
          if (ag) duplicate(p);
          signalSecondaries();
          chan.markStep(0);
        } else {
          for (const o of owners(p)) for (const b of v.chip) chan.copy(v.chip[o.j]!.input + inOff(v.chipBase + o.j, o.lo), b.output + outOff(0, o.lo), (o.hi - o.lo) * esize, esize);
          signalSecondaries();
          chan.markStep(0);
        }
      }
      yield;
      continue;
    }
    if (rs) {
      for (const p of pieces(v.na[R - 1]!, g)) send(p);
      for (let j = R - 2; j >= 1; j--) for (const p of pieces(v.na[j]!, g)) recvReduceSend(p);
      for (const p of pieces(me, g)) {
        recvReduceCopy(p);
        if (ag) directCopySend(p, false);
      }
    } else {
      for (const p of pieces(me, g)) directCopySend(p, true);
    }
    if (ag) {
      for (let j = R - 1; j >= 2; j--) for (const p of pieces(v.na[j]!, g)) directRecvSend(p);
      for (const p of pieces(v.na[1]!, g)) directRecv(p);
    }
    chan.markStep(StepFlag.DRAIN_CREDIT, ctx.bufferSlots);
    // One chunk group emitted: a streamed program hands it over here.
    yield;
  }
  assert(sent === received, `kangaring channel ${ch}: ${sent} slot sends but ${received} slot receives`);
  chan.markEnd();
  return signals;
}

/** Kangaring's view of a group: its chips in ring order, each chip's ranks (adjacent group ranks), and the chunk plan over chip blocks. */
export function kangaringGroup(ctx: ComposeContext, comm: Comm, gi: number, opType: EncOpType, count: number, esize: number) {
  const { info } = ctx;
  const g = comm.groups[gi]!;
  const gr = (r: number) => comm.pos.get(r)!.groupRank;
  const firstOrder = comm.rings[gi]!.channels[0]!;
  const devices = [...new Set(firstOrder.map((r) => info[r]!.device))];
  const chips = devices.map((d, index) => ({ index, ranks: g.filter((r) => info[r]!.device === d).sort((a, b) => gr(a) - gr(b)) }));
  const m = chips[0]!.ranks.length;
  for (const chip of chips) {
    const base = gr(chip.ranks[0]!);
    const ok = chip.ranks.length === m && chip.ranks.every((r, j) => gr(r) === base + j) && base % m === 0;
    if (!ok) throw new CompileError("CMP1307", `kangaring needs each device's ranks to be ${m} adjacent ranks of replica group ${gi}`, { path: `replicaGroups[${gi}]`, value: chip.ranks });
  }
  // Chip c holds group ranks [c*m, c*m + m): chip blocks follow ring order by their first rank.
  const ordered = chips.map((chip) => ({ ...chip, index: gr(chip.ranks[0]!) / m }));
  const rankBlock = opType === EncOpType.ALLREDUCE ? Math.ceil(count / g.length) : count / g.length;
  return { chips: ordered, m, rankBlock, plan: planChunks(Math.max(1, m * rankBlock), ctx.chunkBytes, esize, ctx.channels) };
}

/** A kangaring stage's chunk plans: over chip blocks, per group. */
export function kangaringPlans(ctx: ComposeContext, st: Stage): ChunkPlan[] {
  const esize = dtypeSize(st.op.dtype);
  return st.comm.groups.map((_, gi) => kangaringGroup(ctx, st.comm, gi, st.opType, st.count, esize).plan);
}

/** Kangaring's stage composer: each chip's primary on the ring of chips; each secondary waits for its primary's writes. */
export const composeKangaringStage: StageComposer = (ctx, st, buffers) => {
  const { comm, op, opType, count, reduceSliceBytes } = st;
  const { channels, info, spec } = ctx;
  const esize = dtypeSize(op.dtype);
  const gr = (r: number) => comm.pos.get(r)!.groupRank;
  const gens: ChannelGens = [];
  comm.groups.forEach((_, gi) => {
    const k = kangaringGroup(ctx, comm, gi, opType, count, esize);
    for (let c = 0; c < channels; c++) {
      // The chips in this channel's device order (its cycle, forward or reversed).
      const devOrder = [...new Set(comm.rings[gi]!.channels[c]!.map((r) => info[r]!.device))];
      const order = devOrder.map((d) => k.chips.find((chip) => info[chip.ranks[0]!]!.device === d)!);
      // Primary and secondary roles alternate between the device cycles.
      const pi = comm.rings[gi]!.cycle[c]! % k.m;
      order.forEach((chip, idx) => {
        const primary = chip.ranks[pi]!;
        // (A device this composition does not emit gets no program: runStage would drop it.)
        if (!ctx.emits(info[primary]!.device)) return;
        const secondaries = chip.ranks.filter((_, j) => j !== pi);
        const nextP = order[(idx + 1) % order.length]!.ranks[pi]!;
        const prevP = order[(idx + order.length - 1) % order.length]!.ranks[pi]!;
        const pn = ctx.place(nextP, comm.set, c);
        const pp = ctx.place(prevP, comm.set, c);
        const primaryGen = composeChannelKangaring(
          { op, opType, plan: k.plan, count, rankBlock: k.rankBlock, m: k.m, chips: order.length, bufferSlots: spec.ring.bufferSlots, reduceSliceBytes, replication: spec.arch >= 3 },
          c,
          ctx.chan(comm, primary, c),
          {
            na: Array.from({ length: order.length }, (_, j) => order[(idx + j) % order.length]!.index),
            chip: chip.ranks.map((r) => buffers.get(r)!),
            primary: pi,
            chipBase: gr(chip.ranks[0]!),
            secondaryInc: secondaries.map((r) => semaAddr(info[r]!.device, ctx.place(r, comm.set, c).topsp, ctx.place(r, comm.set, c).recv, "inc")),
            next: buffers.get(nextP)!,
            nextRecvInc: semaAddr(info[nextP]!.device, pn.topsp, pn.recv, "inc"),
            prevSendInc: semaAddr(info[prevP]!.device, pp.topsp, pp.send, "inc"),
          },
        );
        // A secondary only waits for its primary's writes into its output.
        gens.push({
          device: info[primary]!.device,
          gen: (function* () {
            const signals = yield* primaryGen;
            for (const r of secondaries) {
              const ch = ctx.chan(comm, r, c);
              for (let i = 0; i < signals; i++) ch.markStep(StepFlag.WAIT_RECV);
              ch.markEnd();
            }
          })(),
        });
      });
    }
  });
  return gens;
};

/** The ranks one KangaRing holds at most. */
const KANGARING_MAX_RANKS = 256;

/** The kangaring family. */
export const KANGARING_FAMILY: readonly AlgorithmEntry[] = [
  {
    ...BASE,
    alg: EncAlgType.KANGARING,
    label: "kangaring",
    gate: "kangaring",
    precedence: 3,
    ops: COLLECTIVES,
    stageLevels: ["intra"],
    pipelinedStage: true,
    admit: (c) => {
      if (c.multiStream) return no("multi-stream");
      if (c.commType === CommType.INTER) return no("intra comm only");
      if (c.dbg === 2) return no("dbg == 2");
      if (c.rankN > KANGARING_MAX_RANKS) return no(`rank_n ${c.rankN} is above the ${KANGARING_MAX_RANKS} ranks a KangaRing holds`);
      if (!((c.vcoreSize === 2 && c.rankN > 4) || (c.vcoreSize === 1 && c.rankN > 8))) return no(`needs (vcore_size 2 and rank_n > 4) or (vcore_size 1 and rank_n > 8); vcore_size ${c.vcoreSize}, rank_n ${c.rankN}`);
      return yes(`vcore_size ${c.vcoreSize}, rank_n ${c.rankN}`);
    },
    compose: composeKangaringStage,
    stagePlans: kangaringPlans,
  },
];
