// The two-step pod mesh (TWO_STEP_POD_MESH, "UltraServer Mesh"): a group spread over the nodes of
// a NeuronLink pod is a grid — P pod nodes (rows) of L ranks, group rank p·L + l on node p — and
// every exchange takes two one-axis steps instead of one all-to-all step:
//
//   reduce-scatter  1. row: each rank writes, to each rank l' of its node, the P blocks that rank's
//                      column owns (blocks q·L + l'); each reduces them with its own into P partials
//                   2. column: each rank writes partial q to its column peer on node q, which
//                      reduces the P partials of its own block
//   all-gather      1. column: each rank writes its block to its column peers (same position on
//                      every other node: the Z links)
//                   2. row: each rank writes the P blocks of its column to every rank of its node
//   all-reduce      reduce-scatter, then all-gather
//
// Each step is one event on the rank's mesh tape: it waits for the arrivals of the step before and
// its DMA leg carries the writes, each followed by an increment of the receiver's step semaphore.
// What a leg writes and what the next reads stay on one engine (the queue keeps their order).
import { REDUCE_TO_CCE, SDMA_DTYPE, dtypeSize } from "../ir/dtypes.ts";
import { CommType, EncAlgMeshType, EncAlgType, EncOpType } from "../ir/enums.ts";
import { InternalError } from "../ir/errors.ts";
import { semaAddr } from "../encd/address.ts";
import { MeshEventType } from "../encd/mesh-event.ts";
import { PeerWrites } from "./peer.ts";
import type { AlgorithmEntry, StageComposer, Verdict } from "./stage.ts";
import { MESH_MEMBER, MESH_SEMAS, enableMesh, meshBlock, meshSlotBytes, no, yes } from "./kit.ts";

/** Semaphores a pod-mesh tape needs from the mesh base: handshake, four step counters, completion. */
export const POD_MESH_SEMAS = 6;

/**
 * The grid of a group: its nodes in group order, each holding L adjacent group ranks (node-major).
 * A group that is not such a grid cannot run the pod mesh (a gate reason).
 */
export function podGrid(group: readonly number[], nodeOf: (rank: number) => number): { P: number; L: number } | Verdict {
  const nodes = [...new Set(group.map(nodeOf))];
  const P = nodes.length;
  if (P < 2) return { ok: false, reason: "the group is on one node: no pod axis" };
  const L = group.length / P;
  const grid = Number.isInteger(L) && group.every((r, k) => nodeOf(r) === nodes[Math.floor(k / L)]);
  if (!grid) return { ok: false, reason: `needs each node's ranks adjacent in the group, the same number on every node (node by node, ${P} nodes)` };
  return { P, L };
}

export const composePodMeshStage: StageComposer = (ctx, st, buffers) => {
  const { comm, op, opType, count, reduceSliceBytes } = st;
  const esize = dtypeSize(op.dtype);
  const cce = REDUCE_TO_CCE[op.reduce];
  const sdma = SDMA_DTYPE[op.dtype];
  for (const g of comm.groups) {
    const grid = podGrid(g, (r) => ctx.info[r]!.node);
    if ("ok" in grid) throw new InternalError(`pod mesh composed on a group its gate refuses: ${grid.reason}`);
    const { P, L } = grid;
    const n = g.length;
    // Block k of the op: the reduce-scatter's exact share, the all-reduce's rounded-up one, the all-gather's input.
    const blk = (k: number): { off: number; len: number } =>
      opType === EncOpType.ALLREDUCE ? meshBlock(count, n, k, esize) : { off: (k * op.bytes) / n, len: op.bytes / n };
    const slot = opType === EncOpType.ALLREDUCE ? meshBlock(count, n, 0, esize).len : op.bytes / n;
    g.forEach((rank, k) => {
      // (A folded pass composes the programs of the devices it emits only.)
      if (!ctx.emits(ctx.info[rank]!.device)) return;
      const p = Math.floor(k / L);
      const l = k % L;
      const place = ctx.meshPlace(rank);
      const prog = ctx.meshProgram(comm, rank, st.alg);
      const dma = prog.dma;
      const E = dma.foldN;
      const me = buffers.get(rank)!;
      const peer = new PeerWrites(dma, ctx.meshNet(rank, g).net);
      // Every rank's tape uses the same semaphore ids (on its own mesh TopSP).
      const semas = { h: place.semas.handshake, rs1: place.semas.data, rs2: place.semas.data2, ag1: place.semas.compl + 1, ag2: place.semas.compl + 2, compl: place.semas.compl };
      const at = (q: number, l2: number) => g[q * L + l2]!;
      const dev = (r: number) => ctx.info[r]!.device;
      const inc = (r: number, sema: number) => semaAddr(dev(r), ctx.meshPlace(r).topsp, sema, "inc");
      const read = (sema: number) => semaAddr(dev(rank), place.topsp, sema, "read");
      const rowPeers = Array.from({ length: L }, (_, l2) => l2).filter((l2) => l2 !== l);
      const colPeers = Array.from({ length: P }, (_, q) => q).filter((q) => q !== p);
      // Scratch: [row landing l2][q] blocks, then P partials, then [column landing q] blocks.
      const rowSlot = (base: number, l2: number, q: number) => base + (l2 * P + q) * slot;
      const partial = (base: number, q: number) => base + (L * P + q) * slot;
      const colSlot = (base: number, q: number) => base + (L * P + P + q) * slot;
      // What this rank writes and reads again goes on one engine: its own column's.
      const mine = p % E;

      prog.event(MeshEventType.FUNCTION_BARRIER_FIRST_COLL);
      // Handshake: every row and column peer may write into this rank.
      [...rowPeers.map((l2) => at(p, l2)), ...colPeers.map((q) => at(q, l))].forEach((r, j) => peer.signal(j % E, dev(r), inc(r, semas.h)));
      peer.flush();
      prog.event(MeshEventType.LOCAL_HNDSHK, { dma: true });
      const handshakes = { sema: read(semas.h), value: rowPeers.length + colPeers.length };

      if (opType !== EncOpType.ALLGATHER) {
        // Reduce-scatter step 1 (row): the blocks column l2 owns, to rank l2 of this node.
        rowPeers.forEach((l2, j) => {
          const r = at(p, l2);
          for (let q = 0; q < P; q++) peer.copy(j % E, dev(r), me.input + blk(q * L + l2).off, rowSlot(buffers.get(r)!.scratch, l, q), blk(q * L + l2).len, inc(r, semas.rs1));
        });
        peer.flush();
        prog.event(MeshEventType.INTER_GRP_BRDCST, { wait: handshakes, dma: true });
        // Step 2 (column): reduce the P partials of this column (own input and the row's landings),
        // each on the engine that then writes it to its column peer.
        for (let q = 0; q < P; q++) {
          const b = blk(q * L + l);
          const f = q % E;
          const srcs = [me.input + b.off, ...rowPeers.map((l2) => rowSlot(me.scratch, l2, q))];
          if (b.len > 0) {
            if (srcs.length === 1) dma.copyOn(f, srcs[0]!, partial(me.scratch, q), b.len);
            else dma.reduceOn(f, srcs, partial(me.scratch, q), b.len, cce, sdma, reduceSliceBytes);
          }
          if (q !== p) {
            const r = at(q, l);
            peer.copy(f, dev(r), partial(me.scratch, q), colSlot(buffers.get(r)!.scratch, p), b.len, inc(r, semas.rs2));
          }
        }
        peer.flush();
        // (One rank a node: nothing arrives in the row step, whose event took the handshakes.)
        prog.event(MeshEventType.REDUCE_COPY, { ...(rowPeers.length > 0 ? { wait: { sema: read(semas.rs1), value: rowPeers.length * P } } : {}), dma: true });
        // This rank's block: its partial and the column's.
        const own = blk(k);
        const out = opType === EncOpType.REDUCE_SCATTER ? me.output : me.output + own.off;
        const srcs = [partial(me.scratch, p), ...colPeers.map((q) => colSlot(me.scratch, q))];
        if (own.len > 0) dma.reduceOn(mine, srcs, out, own.len, cce, sdma, reduceSliceBytes);
        if (opType === EncOpType.REDUCE_SCATTER) {
          prog.event(MeshEventType.REDUCE_WRITE, { wait: { sema: read(semas.rs2), value: colPeers.length }, dma: true });
          finish(0, semas.ag2);
          return;
        }
        // All-gather step 1 (column): the reduced block to every column peer's output; then the
        // reducing engine counts itself among the arrivals the row step waits for, so any engine
        // may read the block there.
        colPeers.forEach((q) => {
          const r = at(q, l);
          peer.copy(mine, dev(r), out, buffers.get(r)!.output + own.off, own.len, inc(r, semas.ag1));
        });
        dma.semaIncOn(mine, semaAddr(dev(rank), place.topsp, semas.ag1, "inc"));
        peer.flush();
        prog.event(MeshEventType.REDUCE_WRITE, { wait: { sema: read(semas.rs2), value: colPeers.length }, dma: true });
      } else {
        // All-gather step 1 (column): own input into own output block, then to every column peer.
        const own = blk(k);
        dma.copyOn(mine, me.input, me.output + own.off, own.len);
        colPeers.forEach((q) => {
          const r = at(q, l);
          peer.copy(mine, dev(r), me.input, buffers.get(r)!.output + own.off, own.len, inc(r, semas.ag1));
        });
        peer.flush();
        prog.event(MeshEventType.LOCAL_AND_POD_GRP_BRDCST, { wait: handshakes, dma: true });
      }
      // All-gather step 2 (row): the P blocks of this column to every rank of the node, one engine
      // per rank (an all-gather's own block straight from its input).
      rowPeers.forEach((l2, j) => {
        const r = at(p, l2);
        for (let q = 0; q < P; q++) {
          const b = blk(q * L + l);
          const src = q === p && opType === EncOpType.ALLGATHER ? me.input : me.output + b.off;
          peer.copy(j % E, dev(r), src, buffers.get(r)!.output + b.off, b.len, inc(r, semas.ag2));
        }
      });
      peer.flush();
      const selfArrival = opType === EncOpType.ALLGATHER ? 0 : 1;
      prog.event(MeshEventType.LOCAL_AND_POD_GRP_BRDCST_2, { wait: { sema: read(semas.ag1), value: colPeers.length + selfArrival }, dma: true });
      finish(rowPeers.length * P, semas.ag2);

      /** SYNC: wait for `expect` arrivals on `sema`, then every engine signals completion; the last event waits for all of them. */
      function finish(expect: number, sema: number): void {
        for (let f = 0; f < E; f++) dma.semaIncOn(f, semaAddr(dev(rank), place.topsp, semas.compl, "inc"));
        prog.event(MeshEventType.SYNC, { ...(expect > 0 ? { wait: { sema: read(sema), value: expect } } : {}), dma: true });
        prog.event(MeshEventType.FUNCTION_BARRIER_LAST_COLL, { wait: { sema: read(semas.compl), value: E } });
      }
    });
  }
  return [];
};

/** The UltraServer pod's two-step mesh. */
export const POD_MESH_FAMILY: readonly AlgorithmEntry[] = [
  {
    ...MESH_MEMBER,
    alg: EncAlgType.TWO_STEP_POD_MESH,
    label: "two-step-pod-mesh",
    meshOrder: 0,
    // An inter-node stage (one rank per node) is a grid of one column.
    stageLevels: ["inter"],
    // The trn2 / trn3 per-device initializer's mesh type (spec/mesh-composer-topology-switch.md §4).
    meshType: EncAlgMeshType.MESH_TRN2,
    // At most n row landings, P partials and P column landings (P <= n).
    scratch: (op, opType, n) => 3 * n * meshSlotBytes(op, opType === EncOpType.ALLGATHER ? EncOpType.REDUCE_SCATTER : opType, n),
    tapeSemas: (n) => (n >= 2 ? POD_MESH_SEMAS : MESH_SEMAS),
    admit: (c) => {
      const v = enableMesh(c, EncAlgType.TWO_STEP_POD_MESH);
      if (!v.ok) return v;
      if (c.commType !== CommType.INTER || c.nodeN < 2) return no("spans the pod's nodes: INTER comm only");
      return yes(`pod of ${c.nodeN} nodes`);
    },
    groupLayout: (g, { nodeOf }) => {
      const grid = podGrid(g, nodeOf);
      return "ok" in grid ? grid : yes(`${grid.P} nodes x ${grid.L} ranks`);
    },
    compose: composePodMeshStage,
  },
];
