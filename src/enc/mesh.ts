// The mesh composer (enc_alg_mesh, full-mesh subtype): every rank exchanges directly with every
// other; the schedule is an event tape per rank (handshake -> broadcast -> reduce -> sync), each
// event's DMA leg a set of descriptors spread over the rank's mesh engines, one destination per engine.
import { REDUCE_TO_CCE, SDMA_DTYPE, dtypeSize } from "../ir/dtypes.ts";
import { EncAlgMeshType, EncAlgType, EncOpType } from "../ir/enums.ts";
import type { OpSpec } from "../ir/spec.ts";
import { semaAddr } from "../encd/address.ts";
import { MeshEventType } from "../encd/mesh-event.ts";
import { PeerWrites, type NetQueue } from "./peer.ts";
import type { AlgorithmEntry, GroupPlaces, StageComposer, Verdict } from "./stage.ts";
import { COLLECTIVES, MESH_MEMBER, enableMesh, meshBlock, meshSlotBytes, no, slotScratch, yes } from "./kit.ts";
import { splitWhole } from "../encd/channel-writer.ts";
import type { MeshProgram } from "../encd/mesh-writer.ts";

/** Semaphore ids of a rank's mesh program on its TopSP. */
export interface MeshSemas {
  readonly handshake: number;
  readonly data: number;
  readonly data2: number;
  readonly compl: number;
}

export interface MeshRank {
  readonly groupRank: number;
  readonly device: number;
  readonly topsp: number;
  readonly semas: MeshSemas;
  readonly input: number;
  readonly output: number;
  /** One block per group rank (reduce-scatter and all-reduce land peers' blocks here). */
  readonly scratch: number;
}

export interface MeshOpContext {
  readonly op: OpSpec;
  readonly opType: EncOpType;
  /** Ranks in the group, by group rank. */
  readonly ranks: readonly MeshRank[];
  readonly count: number;
  readonly reduceSliceBytes: number;
  /** Across nodes: this rank's network proxy queue (peers it names remote get proxy entries). */
  readonly net?: NetQueue;
  /** SINGLE_STEP_MESH: an all-reduce in one exchange (every rank sends its whole buffer, each reduces all n). */
  readonly singleStep?: boolean;
  /** Through a switch: peers in rotation order, every block over all the engines. */
  readonly rotate?: boolean;
}


/** all-to-all-v displacements: where rank i's data for rank j starts in i's input and in j's output. */
export function a2avOffsets(counts: readonly (readonly number[])[], i: number, j: number): { send: number; recv: number } {
  let send = 0;
  for (let k = 0; k < j; k++) send += counts[i]![k]!;
  let recv = 0;
  for (let k = 0; k < i; k++) recv += counts[k]![j]!;
  return { send, recv };
}

export function composeMesh(ctx: MeshOpContext, me: MeshRank, prog: MeshProgram): void {
  const { op, opType, ranks } = ctx;
  const n = ranks.length;
  const i = me.groupRank;
  const esize = dtypeSize(op.dtype);
  const engines = prog.dma.foldN;
  // Through a switch every rank writes its peers in rotation (i + 1, i + 2, ...), all engines on
  // one peer at a time: in step with the others, each port carries one flow at a time.
  const peers = ctx.rotate ? Array.from({ length: n - 1 }, (_, r) => ranks[(i + 1 + r) % n]!) : ranks.filter((r) => r.groupRank !== i);
  const foldOf = (k: number) => k % engines;
  // With more engines than peers (the preset's mesh folds), each peer's block is split over S
  // engines; in rotation over all of them.
  const S = ctx.rotate ? engines : peers.length > 0 && engines > peers.length ? Math.floor(engines / peers.length) : 1;
  /** Peer k's block, split over its engines: each share signals the peer once. */
  const spread = (k: number, device: number, src: number, dst: number, len: number, signal: number): void => {
    if (S === 1) return peer.copy(foldOf(k), device, src, dst, len, signal);
    splitWhole(len, esize, S).forEach((x, j) => peer.copy(ctx.rotate ? j : k * S + j, device, src + x.off, dst + x.off, x.len, signal));
  };
  const inc = (r: MeshRank, sema: number) => semaAddr(r.device, r.topsp, sema, "inc");
  const read = (sema: number) => semaAddr(me.device, me.topsp, sema, "read");
  const dma = prog.dma;
  const cce = REDUCE_TO_CCE[op.reduce];
  const sdma = SDMA_DTYPE[op.dtype];
  // Writes into peers: DMA, or proxy entries for peers across the network (the event triggers them).
  const peer = new PeerWrites(dma, ctx.net);

  prog.event(MeshEventType.FUNCTION_BARRIER_FIRST_COLL);
  // Handshake: tell every peer its writes into this rank may start.
  peers.forEach((p, k) => peer.signal(foldOf(k), p.device, inc(p, p.semas.handshake)));
  peer.flush();
  prog.event(MeshEventType.LOCAL_HNDSHK, { dma: true });

  const block = (k: number) => meshBlock(ctx.count, n, k, esize);
  const handshakes = { sema: read(me.semas.handshake), value: n - 1 };
  if (opType === EncOpType.ALLREDUCE && ctx.singleStep) {
    // Single step: the whole input to slot i of every peer's scratch, then each engine reduces
    // its share of the buffer from the n copies straight into the output.
    peers.forEach((p, k) => spread(k, p.device, me.input, p.scratch + i * op.bytes, op.bytes, inc(p, p.semas.data)));
    peer.flush();
    prog.event(MeshEventType.INTER_GRP_BRDCST, { wait: handshakes, dma: true });
    const srcs = [me.input, ...peers.map((p) => me.scratch + p.groupRank * op.bytes)];
    splitWhole(op.bytes, esize, engines).forEach((s, f) => {
      if (srcs.length === 1) dma.copyOn(f, srcs[0]! + s.off, me.output + s.off, s.len);
      else dma.reduceOn(f, srcs.map((a) => a + s.off), me.output + s.off, s.len, cce, sdma, ctx.reduceSliceBytes);
    });
    prog.event(MeshEventType.REDUCE_WRITE, { wait: { sema: read(me.semas.data), value: (n - 1) * S }, dma: true });
    finish(0, me.semas.data2);
    return;
  }
  switch (opType) {
    case EncOpType.ALLGATHER:
    case EncOpType.ALLTOALL:
    case EncOpType.ALLTOALL_V: {
      // One exchange: own part into own output, then each peer's part into that peer's output.
      // All-gather sends the whole input to output block i of everyone.
      const blk = op.bytes / n;
      const part = (to: number) =>
        opType === EncOpType.ALLGATHER
          ? { send: 0, recv: i * blk, len: blk }
          : opType === EncOpType.ALLTOALL
            ? { send: to * blk, recv: i * blk, len: blk }
            : op.op === "all-gather-v"
              ? // Every destination reads the one input block (send displacement 0).
                { send: 0, recv: a2avOffsets(op.counts!, i, to).recv, len: op.counts![i]![to]! }
              : { ...a2avOffsets(op.counts!, i, to), len: op.counts![i]![to]! };
      const self = part(i);
      dma.copyOn(0, me.input + self.send, me.output + self.recv, self.len);
      peers.forEach((p, k) => {
        const x = part(p.groupRank);
        spread(k, p.device, me.input + x.send, p.output + x.recv, x.len, inc(p, p.semas.data));
      });
      peer.flush();
      prog.event(MeshEventType.INTER_GRP_BRDCST, { wait: handshakes, dma: true });
      finish((n - 1) * S, me.semas.data);
      return;
    }
    case EncOpType.REDUCE_SCATTER:
    case EncOpType.ALLREDUCE: {
      // Step 1: block k of the input goes to rank k's scratch slot i.
      const blockBytes = (k: number) => (opType === EncOpType.REDUCE_SCATTER ? { off: k * (op.bytes / n), len: op.bytes / n } : block(k));
      peers.forEach((p, k) => {
        const b = blockBytes(p.groupRank);
        spread(k, p.device, me.input + b.off, p.scratch + i * slotBytes(ctx), b.len, inc(p, p.semas.data));
      });
      peer.flush();
      prog.event(MeshEventType.INTER_GRP_BRDCST, { wait: handshakes, dma: true });
      // Step 2: reduce own block with the n-1 received ones (one N-read, 1-write CCE per share).
      const mineB = blockBytes(i);
      const out = opType === EncOpType.REDUCE_SCATTER ? me.output : me.output + mineB.off;
      const srcs = [me.input + mineB.off, ...peers.map((p) => me.scratch + p.groupRank * slotBytes(ctx))];
      const shares = splitWhole(mineB.len, esize, engines);
      shares.forEach((s, f) => {
        if (srcs.length === 1) dma.copyOn(f, srcs[0]! + s.off, out + s.off, s.len);
        else dma.reduceOn(f, srcs.map((a) => a + s.off), out + s.off, s.len, cce, sdma, ctx.reduceSliceBytes);
      });
      if (opType === EncOpType.REDUCE_SCATTER) {
        prog.event(MeshEventType.REDUCE_WRITE, { wait: { sema: read(me.semas.data), value: (n - 1) * S }, dma: true });
        finish(0, me.semas.data2);
        return;
      }
      // All-reduce step 3: each engine sends its share of the reduced block to every peer.
      shares.forEach((s, f) =>
        peers.forEach((p) => peer.copy(f, p.device, out + s.off, p.output + mineB.off + s.off, s.len, inc(p, p.semas.data2))),
      );
      peer.flush();
      prog.event(MeshEventType.REDUCE_WRITE, { wait: { sema: read(me.semas.data), value: (n - 1) * S }, dma: true });
      finish((n - 1) * engines, me.semas.data2);
      return;
    }
    default:
      throw new Error(`mesh composer has no schedule for op_type ${opType}`);
  }

  /** SYNC: wait for `expect` arrivals on `sema`, then every engine signals completion; the last event waits for all of them. */
  function finish(expect: number, sema: number): void {
    for (let f = 0; f < engines; f++) dma.semaIncOn(f, semaAddr(me.device, me.topsp, me.semas.compl, "inc"));
    prog.event(MeshEventType.SYNC, { ...(expect > 0 ? { wait: { sema: read(sema), value: expect } } : {}), dma: true });
    prog.event(MeshEventType.FUNCTION_BARRIER_LAST_COLL, { wait: { sema: read(me.semas.compl), value: engines } });
  }
}


function slotBytes(ctx: MeshOpContext): number {
  return meshSlotBytes(ctx.op, ctx.opType, ctx.ranks.length);
}


/**
 * The mesh family's stage composer: every rank's event tape, on its mesh program. `exchange` is the
 * member's (peers' blocks, or whole buffers in one exchange), `rotate` whether each rank starts its
 * peer order after itself (the switch variants).
 */
export function meshStage(exchange: "blocks" | "whole-buffer", rotate: boolean): StageComposer {
  const singleStep = exchange === "whole-buffer";
  return (ctx, st, buffers) => {
    const { comm, op, opType, count, reduceSliceBytes } = st;
    comm.groups.forEach((g) => {
      const ranks = g.map((rank): MeshRank => {
        const b = buffers.get(rank)!;
        const place = ctx.meshPlace(rank);
        return { groupRank: comm.pos.get(rank)!.groupRank, device: ctx.info[rank]!.device, topsp: place.topsp, semas: place.semas, input: b.input, output: b.output, scratch: b.scratch };
      });
      // (A folded pass composes the programs of the devices it emits only, as runStage does the ring channels.)
      g.forEach((rank, k) => {
        if (ctx.emits(ctx.info[rank]!.device)) composeMesh({ op, opType, ranks, count, reduceSliceBytes, singleStep, rotate, ...ctx.meshNet(rank, g) }, ranks[k]!, ctx.meshProgram(comm, rank, st.alg));
      });
    });
    return [];
  };
}

/**
 * A member whose all-reduce is one exchange of whole buffers: every rank's buffer lands in a slot
 * per peer (all-gather and reduce-scatter are the mesh's one exchange), and its window is on the
 * whole buffer a peer sends.
 */
const WHOLE_BUFFER_ALLREDUCE = {
  exchange: "whole-buffer" as const,
  scratch: (op: OpSpec, opType: EncOpType, n: number) => (opType === EncOpType.ALLREDUCE ? n * op.bytes : slotScratch((k) => k)(op, opType, n)),
  peerBlock: (opType: EncOpType, bytes: number) => (opType === EncOpType.ALLREDUCE ? { bytes, what: "per peer (each rank sends its whole buffer)" } : undefined),
};

/**
 * The switch mesh (MESH_SWITCH) is built when the group's ranks are on more than one device
 * (spec/mesh-composer-topology-switch.md §4: local_rack_rank_n > 1, peers on other chips).
 */
function switchLayout(g: readonly number[], { deviceOf }: GroupPlaces): Verdict {
  const devices = new Set(g.map(deviceOf)).size;
  return devices > 1 ? yes(`switch mesh over ${devices} devices`) : no("the group is on one device: no switch mesh");
}

/** The mesh family on the mesh tape: full mesh, single-step mesh and the two switch variants. */
export const MESH_FAMILY: readonly AlgorithmEntry[] = [
  {
    ...MESH_MEMBER,
    alg: EncAlgType.MESH,
    label: "mesh",
    precedence: 2,
    meshOrder: 3,
    ops: [...COLLECTIVES, EncOpType.ALLTOALL, EncOpType.ALLTOALL_V],
    stageLevels: ["intra", "inter"],
    meshType: EncAlgMeshType.FULL_MESH,
    scratch: slotScratch((n) => n),
    admit: (c) => enableMesh(c, EncAlgType.MESH),
    compose: meshStage("blocks", false),
  },
  {
    ...MESH_MEMBER,
    ...WHOLE_BUFFER_ALLREDUCE,
    alg: EncAlgType.SINGLE_STEP_MESH,
    label: "single-step-mesh",
    meshOrder: 4,
    stageLevels: ["intra", "inter"],
    meshType: EncAlgMeshType.FULL_MESH,
    admit: (c) => enableMesh(c, EncAlgType.SINGLE_STEP_MESH),
    compose: meshStage("whole-buffer", false),
  },
  {
    // The switch's single-hop latency variant: one exchange, every rank's whole buffer to every rank.
    ...MESH_MEMBER,
    ...WHOLE_BUFFER_ALLREDUCE,
    alg: EncAlgType.LATENCY_OPT_MESH,
    label: "latency-opt-mesh",
    meshOrder: 1,
    meshType: EncAlgMeshType.MESH_SWITCH,
    rotate: true,
    admit: (c) => enableMesh(c, EncAlgType.LATENCY_OPT_MESH),
    groupLayout: switchLayout,
    compose: meshStage("whole-buffer", true),
  },
  {
    // The bandwidth variant: reduce-scatter then all-gather, each peer's block once per step.
    ...MESH_MEMBER,
    alg: EncAlgType.BW_OPT_MESH,
    label: "bw-opt-mesh",
    meshOrder: 2,
    meshType: EncAlgMeshType.MESH_SWITCH,
    rotate: true,
    scratch: slotScratch((n) => n),
    admit: (c) => enableMesh(c, EncAlgType.BW_OPT_MESH),
    groupLayout: switchLayout,
    compose: meshStage("blocks", true),
  },
];
