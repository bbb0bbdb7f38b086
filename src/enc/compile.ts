// The composer entry: post each op (gates, precedence, dispatch), then compose every op over one
// compile context (context.ts: resources, communicators, stages; registry.ts: the families) and
// emit the image.
import { dtypeSize } from "../ir/dtypes.ts";
import { EncAlgType, type EncOpType } from "../ir/enums.ts";
import { CompileError, InternalError } from "../ir/errors.ts";
import { opEntry } from "../ir/ops.ts";
import type { DeviceSpec, OpSpec, Scenario } from "../ir/spec.ts";
import { ALG_NAMES } from "../ir/spec.ts";
import { HBM_LIMIT } from "../encd/address.ts";
import type { ProgramImage, RingFold, RingMode } from "../encd/program.ts";
import type { DescriptorFeed } from "../encd/image.ts";
import type { VringStore } from "../encd/vring.ts";
import { validateCcops } from "../encd/validate.ts";
import { forgetFreePages } from "../encd/pages.ts";
import type { ChunkPlan } from "./chunks.ts";
import type { Explanation } from "./post.ts";
import { programGroups } from "./groups.ts";
import { CompileContext } from "./context.ts";
import { idsPerNodeOf, postProgram } from "./program-plan.ts";
import { podNodesOf } from "../ir/topology.ts";
import type { Signature } from "../encd/signature.ts";
import { deviceSigs, inUnits, whyNotFold, whyNotFoldSigs, type DeviceSig } from "../encd/fold.ts";
import { composeHier, hierPadding } from "./hier.ts";
import type { RingSet, StageRecord } from "./stage.ts";
import { opPacketBytes, type EncOperation } from "./gates.ts";

export interface BufferRef {
  readonly addr: number;
  readonly bytes: number;
}

export interface RankLayout {
  readonly rank: number;
  readonly group: number;
  readonly groupRank: number;
  readonly device: number;
  readonly input: BufferRef;
  readonly output: BufferRef;
  /** Receive buffer of each channel. */
  readonly chbuf: readonly BufferRef[];
}

export interface OpLayout {
  readonly index: number;
  readonly spec: OpSpec;
  readonly opType: EncOpType;
  readonly algorithm: EncAlgType;
  /** Elements as nccom-test counts them (size / element size). */
  readonly count: number;
  readonly plan: readonly ChunkPlan[];
  readonly operation: EncOperation;
  readonly ranks: readonly RankLayout[];
  /** A hierarchical op's stages (empty for a flat op), and the runtime's selection line for them. */
  readonly stages: readonly StageRecord[];
  readonly selections?: string;
  /** Bytes a hierarchical all-reduce runs padded by (to whole blocks per rank and per node; `hierBytes`). */
  readonly padBytes?: number;
}

export interface ProgramLayout {
  readonly channels: number;
  readonly foldN: number;
  /** Per replica group: the ring (global ranks) each channel follows, and whether it follows links. */
  readonly rings: readonly RingSet[];
  readonly ops: readonly OpLayout[];
}

export interface CompiledProgram {
  readonly image: ProgramImage;
  readonly layout: ProgramLayout;
  /** postOperation's reasoning for every op of the scenario (per replica group). */
  readonly explain: readonly Explanation[];
  /** Things comm init logs (e.g. RDH skipped for want of mesh). */
  readonly warnings: readonly string[];
  /** A streamed compile asked to fold: the pods the image stands for, or why it holds them all. */
  readonly folding?: Folding;
}

/** The outcome of folding a program of several pods (see encd/fold.ts). */
export type Folding = { readonly folded: true; readonly pods: number; readonly podDevices: number } | { readonly folded: false; readonly pods: number; readonly reason: string };

/** A folding outcome in words (--explain, the bench). */
export function describeFolding(f: Folding): string {
  if (!f.folded) return `simulated all ${f.pods} pods: their programs are not alike (${f.reason})`;
  return `simulated pod 0 of ${f.pods} alike pods of ${f.podDevices} device id${f.podDevices === 1 ? "" : "s"} (traffic to another pod lands on pod 0's device in its place): the times of the run of every pod (--no-fold runs them all)`;
}

function check(cond: boolean, code: string, message: string, path: string, value: unknown): void {
  if (!cond) throw new CompileError(code, message, { path, value });
}

/**
 * postOperation's reasoning for every op, without composing anything (for --explain when an op is
 * refused): each op as the program the run composes for it posts it (every op in one program when
 * they run concurrently, else each in its own, with its own channel count and replica groups).
 */
export function explainScenario(scn: Scenario, spec: DeviceSpec): readonly Explanation[] {
  const all = scn.ops.map((_, i) => i);
  const programs = scn.concurrent ? [all] : all.map((i) => [i]);
  return programs.flatMap((ops) => {
    programGroups(scn, ops);
    return postProgram(scn, spec, ops, scn.chunkBytes ?? spec.ring.chunkBytes).posted.explain.filter((e) => ops.includes(e.op));
  });
}

/** Compile the ops `opIndices` of a scenario into one program image (ops chained in order). */
export function compileProgram(scn: Scenario, spec: DeviceSpec, opIndices: readonly number[]): CompiledProgram {
  return drain(composeProgram(scn, spec, opIndices, { kind: "keep" }))!;
}

/**
 * The same program with streamed rings: the image holds every byte stream but the descriptor
 * rings, whose counts it knows (a first pass counts them); its feed composes the program again,
 * chunk group by chunk group, as the simulator's engines reach descriptors not yet emitted — so a
 * run holds the descriptors in flight, not the whole op's. With `fold` (a timing-only run), a
 * program of several pods whose pods are alike (encd/fold.ts) holds pod 0 alone.
 */
export function compileStreamed(scn: Scenario, spec: DeviceSpec, opIndices: readonly number[], opts: { readonly fold?: boolean; readonly runner?: FeedRunner } = {}): CompiledProgram {
  opts.runner?.warm?.(scn, spec, opIndices);
  try {
    return compileStreamedWith(scn, spec, opIndices, opts);
  } catch (e) {
    // A program refused while counting: a thread started for it goes.
    opts.runner?.cancel?.();
    throw e;
  }
}

function compileStreamedWith(scn: Scenario, spec: DeviceSpec, opIndices: readonly number[], opts: { readonly fold?: boolean; readonly runner?: FeedRunner }): CompiledProgram {
  const podNodes = podNodesOf(spec.topology, scn.nodes);
  const pods = scn.nodes / podNodes;
  if (!opts.fold || pods < 2) return streamed(scn, spec, opIndices, opts.runner);
  // Compose pod 0's rings only (the others counted and hashed), if every pod's program is pod 0's.
  const unitDevices = podNodes * idsPerNodeOf(scn, spec);
  // The second half of the pods may be counted elsewhere (a thread) while this thread counts the
  // first, and a pod more for every 64: the thread starts its count later (4,096 ranks: this thread
  // waited 0.35-1.07 s for it with halves, 5 ms with 66 pods of 128).
  const half = Math.ceil(pods / 2) + Math.floor(pods / 64);
  const elsewhere = opts.runner?.count?.({ scn, spec, opIndices, unitDevices, units: { from: half, to: pods } });
  const mine = elsewhere ? { from: 0, to: half } : undefined;
  let fold: RingFold = { unitDevices, signatures: new Map<string, Signature>(), ...(mine ? { units: mine } : {}) };
  let stores = new Map<string, VringStore>();
  let counted = drain(composeProgram(scn, spec, opIndices, { kind: "count", stores, fold }))!;
  // (This thread's signatures before the other count's: that one may not have ended yet.)
  const ours = mine && deviceSigs(counted.image, unitDevices, fold.signatures, mine);
  const theirs = elsewhere?.wait();
  let reason: string | undefined;
  if (!ours) reason = whyNotFold(counted.image, unitDevices, fold.signatures);
  else if (theirs) reason = whyNotFoldSigs([...ours, ...theirs], unitDevices);
  if (mine && (!theirs || reason !== undefined)) {
    // Not alike (or the other count failed): the whole program counted here, as it is streamed then.
    fold = { unitDevices, signatures: new Map<string, Signature>() };
    stores = new Map<string, VringStore>();
    counted = drain(composeProgram(scn, spec, opIndices, { kind: "count", stores, fold }))!;
    reason = whyNotFold(counted.image, unitDevices, fold.signatures);
  }
  if (reason !== undefined) {
    // Not alike: the count stands for the whole program, streamed as usual.
    validateCcops(counted.image);
    const feed = feedOf(source(jobOf(scn, spec, opIndices, stores, counted.image), stores, opts.runner), counted.image);
    return { ...counted, image: { ...counted.image, feed }, folding: { folded: false, pods, reason } };
  }
  const image = { ...counted.image, devices: counted.image.devices.filter((d) => d.device < unitDevices), fold: { units: pods, unitDevices } };
  validateCcops(image);
  // The streaming pass composes pod 0's ring-type channels only; its rings must hash as counted.
  const feed = feedOf(source(jobOf(scn, spec, opIndices, stores, image, unitDevices), stores, opts.runner), image, (hashed) => {
    for (const [key, value] of hashed) {
      if (value !== fold.signatures.get(key)?.value) throw new InternalError(`ring ${key}: the streamed composition emitted other descriptors than the counting one`);
    }
  });
  return { ...counted, image: { ...image, feed }, folding: { folded: true, pods, podDevices: unitDevices } };
}

/** The program with streamed rings (every device's). */
function streamed(scn: Scenario, spec: DeviceSpec, opIndices: readonly number[], runner: FeedRunner | undefined): CompiledProgram {
  const stores = new Map<string, VringStore>();
  const counted = drain(composeProgram(scn, spec, opIndices, { kind: "count", stores }))!;
  const feed = feedOf(source(jobOf(scn, spec, opIndices, stores, counted.image), stores, runner), counted.image);
  return { ...counted, image: { ...counted.image, feed } };
}

/**
 * What the streaming pass needs to run anywhere: the scenario, the ops, the streamed rings' keys
 * (in the counting pass's order), the unit a folded program holds, and (to choose where to run it)
 * how many descriptors it will emit.
 */
export interface StreamJob {
  readonly scn: Scenario;
  readonly spec: DeviceSpec;
  readonly opIndices: readonly number[];
  readonly keys: readonly string[];
  readonly unitDevices?: number;
  readonly descriptors: number;
  /** Its rings are not known yet (a stream started before the run's count ended): each gets its store as the pass binds it, and the run learns its key from the batch that first holds it. */
  readonly open?: boolean;
}

/** The streaming pass as the feed drives it: each step emits the next descriptors into the stores. */
export interface FeedSource {
  /** Emit the next batch; false once the composition has ended (its last batch emitted). */
  step(): boolean;
  /** A folded pass's ring hashes (key -> value), once it has ended. */
  hashes(): ReadonlyMap<string, string>;
  /** Stop it early (a run that ends before its feed does). */
  close?(): void;
}

/** A folded program's counting pass of some of its units (pods), to run on another thread. */
export interface CountJob {
  readonly scn: Scenario;
  readonly spec: DeviceSpec;
  readonly opIndices: readonly number[];
  readonly unitDevices: number;
  readonly units: { readonly from: number; readonly to: number };
}

/** A counting pass running elsewhere: its devices' signatures, waited for; undefined if it failed (the caller counts them itself). */
export interface CountHandle {
  wait(): readonly DeviceSig[] | undefined;
}

/**
 * The counting pass of `job`'s units in this thread: the signatures of their devices
 * (`whyNotFoldSigs`), and the streaming pass of unit 0 that the program runs if it folds: open (this
 * pass made none of unit 0's rings), its descriptors those of the first unit counted here (the same
 * as unit 0's when the units are alike).
 */
export function countUnits(job: CountJob, beat?: () => void): { readonly sigs: DeviceSig[]; readonly stream: StreamJob } {
  const signatures = new Map<string, Signature>();
  const counted = drain(composeProgram(job.scn, job.spec, job.opIndices, { kind: "count", stores: new Map(), fold: { unitDevices: job.unitDevices, signatures, units: job.units } }), beat)!;
  const first = { ...counted.image, devices: counted.image.devices.filter((d) => inUnits(d.device, job.unitDevices, { from: job.units.from, to: job.units.from + 1 })) };
  return { sigs: deviceSigs(counted.image, job.unitDevices, signatures, job.units), stream: { ...jobOf(job.scn, job.spec, job.opIndices, new Map(), first, job.unitDevices), open: true } };
}

/** Where a streamed compile's streaming pass may run instead of the run's own thread. */
export interface FeedRunner {
  /** A folded program's counting pass of units `job.units`, started elsewhere while this thread counts the rest; undefined: not here (this thread counts them all). */
  count?(job: CountJob): CountHandle | undefined;
  /** Before the counting pass: a chance to get ready (start a thread) for this program. */
  warm?(scn: Scenario, spec: DeviceSpec, opIndices: readonly number[]): void;
  /** The compile failed: let go of what `warm` started. */
  cancel?(): void;
  /** Run the streaming pass elsewhere into `stores`, or decline (undefined: it runs here). */
  run(job: StreamJob, stores: Map<string, VringStore>): FeedSource | undefined;
}

/** The streaming pass of `job` in this thread, into `stores` (a map from the job's keys to their rings; an open job's rings are added by `open`). */
export function streamPass(job: StreamJob, stores: Map<string, VringStore>, open?: () => VringStore): FeedSource {
  const hashed = new Map<string, Signature>();
  const fold = job.unitDevices === undefined ? undefined : { unitDevices: job.unitDevices, signatures: hashed };
  if (job.open && !open) throw new InternalError("an open streaming pass without a maker of rings");
  const again = composeProgram(job.scn, job.spec, job.opIndices, { kind: "stream", stores, ...(fold ? { fold } : {}), ...(job.open && open ? { open } : {}) });
  return {
    step: () => again.next().done !== true,
    hashes: () => new Map([...hashed].map(([key, sig]) => [key, sig.value])),
  };
}

function source(job: StreamJob, stores: Map<string, VringStore>, runner: FeedRunner | undefined): FeedSource {
  return runner?.run(job, stores) ?? streamPass(job, stores);
}

/** The streaming pass of a counted program: its rings (`stores`' keys) and the descriptors the devices `image` holds will get. */
function jobOf(scn: Scenario, spec: DeviceSpec, opIndices: readonly number[], stores: Map<string, VringStore>, image: ProgramImage, unitDevices?: number): StreamJob {
  let descriptors = 0;
  for (const d of image.devices) for (const q of d.queues) if (q.streamed) descriptors += q.streamed.txCount + q.streamed.rxCount;
  return { scn, spec, opIndices, keys: [...stores.keys()], ...(unitDevices === undefined ? {} : { unitDevices }), descriptors };
}

/** The feed of a streamed image: the second composition, run on demand; it must emit exactly what the first counted. */
function feedOf(src: FeedSource, counted: ProgramImage, atEnd?: (hashed: ReadonlyMap<string, string>) => void): DescriptorFeed {
  let done = false;
  return {
    pull(): boolean {
      if (done) return false;
      done = !src.step();
      if (done) {
        for (const d of counted.devices) {
          for (const q of d.queues) {
            const st = q.streamed!;
            if (st.tx.count !== st.txCount || st.rx.count !== st.rxCount) throw new InternalError(`dev${d.device} dma${q.engine} q${q.queue}: the streamed composition emitted ${st.tx.count}/${st.rx.count} descriptors, the counting one ${st.txCount}/${st.rxCount}`);
          }
        }
        atEnd?.(src.hashes());
      }
      return true;
    },
    close(): void {
      // Stopped, not ended: nothing more to pull, and nothing to check.
      done = true;
      src.close?.();
      forgetFreePages();
    },
  };
}

/** Run a composition to its end (`beat` between its rounds: a thread's sign of life). */
function drain<T>(g: Generator<void, T>, beat?: () => void): T {
  for (;;) {
    const r = g.next();
    if (r.done) return r.value;
    beat?.();
  }
}

/**
 * Compose the program: a generator that pauses between chunk groups of ring-type stages and
 * returns the compiled program (nothing in `stream` mode, whose only product is the descriptors).
 */
function* composeProgram(scn: Scenario, spec: DeviceSpec, opIndices: readonly number[], rings: RingMode): Generator<void, CompiledProgram | undefined> {
  const ctx = new CompileContext(scn, spec, opIndices, rings);
  const ops: OpLayout[] = [];
  for (const index of opIndices) {
    const layout = yield* composeOp(ctx, index);
    // The end of a multi-op program: every rank of a node meets.
    if (opIndices.length > 1 && index === opIndices[opIndices.length - 1]) ctx.barrier(layout.took);
    ops.push(layout.op);
  }
  if (rings.kind === "stream") return undefined;
  // A pass that counts some units (one thread's half) images their devices and unit 0's alone: its
  // caller reads their signatures, and runs unit 0 once every unit is found alike (or counts the
  // whole program again). Imaging every device of 4,096 ranks took a fifth of a second of each pass.
  const units = rings.kind === "count" ? rings.fold?.units : undefined;
  const unitDevices = rings.kind === "count" ? (rings.fold?.unitDevices ?? 0) : 0;
  const image = ctx.builder.build(units ? (d) => d < unitDevices || inUnits(d, unitDevices, units) : undefined);
  // A folded count's image is validated once it holds pod 0 alone (the others' rings are tallies).
  if (!(rings.kind === "count" && rings.fold)) validateCcops(image);
  return { image, layout: { channels: ctx.channels, foldN: ctx.foldN, rings: ctx.main.rings, ops }, explain: ctx.posted.explain, warnings: ctx.warnings };
}

/**
 * One op: place every rank's input and output, compose its groups (each distinct flat algorithm
 * over its own groups; hierarchical groups through their stages), and lay out what it used.
 */
function* composeOp(ctx: CompileContext, index: number): Generator<void, { op: OpLayout; took: { device: number; topsp: number }[] }> {
  const { scn, builder } = ctx;
  const { groups, info } = ctx.opGroupsOf(index);
  const op = scn.ops[index]!;
  const path = `ops[${index}]`;
  const operation = ctx.posted.operations[index]!;
  const { opType, plans, groupAlgs } = operation;
  const entry = opEntry(op.op);
  // Groups of different shapes may resolve differently: the op's algorithm is group 0's, and
  // each distinct flat algorithm composes its own groups.
  const algorithm = groupAlgs[0]!;
  const mixed = new Set(groupAlgs).size > 1;
  const logStart = ctx.stageLog.length;
  const esize = dtypeSize(op.dtype);
  const count = op.bytes / esize;
  const share = (rank: number) => entry.buffers(op, groups[info[rank]!.group]!.length, info[rank]!.groupRank);
  // The op's buffers must fit a device's address window (checked before anything is placed).
  const perDevice = new Map<number, number>();
  for (let rank = 0; rank < scn.ranks; rank++) {
    const { inBytes, outBytes } = share(rank);
    perDevice.set(info[rank]!.device, (perDevice.get(info[rank]!.device) ?? 0) + inBytes + outBytes);
  }
  const most = Math.max(...perDevice.values());
  if (scn.buffers === "sbuf") {
    // --sb2sb: each rank's input and output in its NeuronCores' SBUF.
    const sbuf = ctx.spec.sbuf;
    const perRank = sbuf && sbuf.bytesPerCore * ctx.spec.collectives.virtualCoreSize;
    let need = 0;
    for (let rank = 0; rank < scn.ranks; rank++) {
      const { inBytes, outBytes } = share(rank);
      need = Math.max(need, inBytes + outBytes);
    }
    check(perRank !== undefined, "CMP1314", `the op's buffers are in SBUF ("buffers": "sbuf"), but the ${ctx.spec.name} preset gives no SBUF size (sbuf.bytesPerCore)`, "buffers", "sbuf");
    check(need <= perRank!, "CMP1314", `the op's input and output buffers need ${need} bytes of SBUF on one rank; a ${ctx.spec.name} rank has ${perRank} (${+(perRank! / 2 ** 20).toFixed(2)} MiB${ctx.spec.collectives.virtualCoreSize > 1 ? `, ${ctx.spec.collectives.virtualCoreSize} NeuronCores` : ""}): the runtime could not allocate them`, `${path}.${op.counts ? "counts" : "bytes"}`, op.counts ? need : op.bytes);
  }
  const capacity = ctx.spec.hbm.capacityBytes;
  if (capacity !== undefined) check(most <= capacity, "CMP1312", `the op's input and output buffers need ${most} bytes of HBM on one device; a ${ctx.spec.name} device has ${capacity} (${+(capacity / 2 ** 30).toFixed(2)} GiB): the runtime could not allocate them`, `${path}.${op.counts ? "counts" : "bytes"}`, op.counts ? most : op.bytes);
  check(most < HBM_LIMIT / 2, "CMP1311", `the op's input and output buffers need ${most} bytes on one device; a device's HBM window holds ${HBM_LIMIT} (half of it for buffers)`, `${path}.${op.counts ? "counts" : "bytes"}`, op.counts ? most : op.bytes);
  const algOf = (g: readonly number[]) => groupAlgs[info[g[0]!]!.group]!;
  const hierGroups = groups.filter((g) => algOf(g) === EncAlgType.HIER);
  // Every rank's input and output as the scenario op sees them (with room for a hierarchical op's padding).
  const pad = hierGroups.length > 0 ? hierPadding(ctx, op, opType, hierGroups) : 0;
  const io = new Map<number, { input: number; output: number }>();
  for (let rank = 0; rank < scn.ranks; rank++) {
    const { inBytes, outBytes } = share(rank);
    const input = builder.allocHbm(info[rank]!.device, inBytes + pad);
    const output = builder.allocHbm(info[rank]!.device, outBytes + pad);
    io.set(rank, { input, output });
  }
  let stages: readonly StageRecord[] = [];
  let selections: string | undefined;
  let took: { device: number; topsp: number }[];
  const flatAlgs = [...new Set(groupAlgs.filter((a) => a !== EncAlgType.HIER))];
  const flat = function* () {
    for (const alg of flatAlgs) {
      const main = ctx.commOf(op.stream);
      const comm = mixed ? ctx.subComm(main, (g) => algOf(g) === alg) : main;
      yield* ctx.runStage({ comm, op, opType, alg, count, reduceSliceBytes: operation.reduceSliceBytes }, (rank) => io.get(rank)!, path, mixed ? undefined : plans);
    }
  };
  if (groupAlgs.includes(EncAlgType.HIER)) {
    ({ stages, selections, took } = yield* composeHier(ctx, op, opType, operation, io, path, hierGroups, flat));
  } else {
    builder.beginOp(opPacketBytes(ctx.spec, scn, op));
    yield* flat();
    took = builder.endOp();
  }
  /** A rank's receive buffers in the last stage it took part in. */
  const chbufOf = (rank: number) => {
    const last = ctx.stageLog.slice(logStart).reverse().find((x) => x.buffers.has(rank))!;
    const b = last.buffers.get(rank)!;
    return b.chbuf.map((addr, c) => ({ addr, bytes: b.chbufBytes[c]! }));
  };
  const ranks: RankLayout[] = [];
  for (let rank = 0; rank < scn.ranks; rank++) {
    const ci = info[rank]!;
    const { inBytes, outBytes } = share(rank);
    ranks.push({ rank, group: ci.group, groupRank: ci.groupRank, device: ci.device, input: { addr: io.get(rank)!.input, bytes: inBytes }, output: { addr: io.get(rank)!.output, bytes: outBytes }, chbuf: chbufOf(rank) });
  }
  return { op: { index, spec: op, opType, algorithm, count, plan: plans, operation, ranks, stages, ...(selections ? { selections } : {}), ...(pad > 0 ? { padBytes: pad } : {}) }, took };
}

/** The algorithm as the scenario names it (the runtime's printed names are ambiguous: two "RDH", and "Invalid" for the single-cycle ring). */
export function algorithmLabel(alg: EncAlgType, stages: readonly StageRecord[] = []): string {
  const name = (ALG_NAMES as readonly string[])[alg] ?? `alg${alg}`;
  return stages.length > 0 ? `${name}(${stages.map((s) => algorithmLabel(s.alg)).join(",")})` : name;
}

/** Input and output bytes of one rank for an op (group of n ranks), from the op registry (by the scenario's op name). */
export function bufferBytes(op: OpSpec, _opType: EncOpType, n: number, groupRank: number): { inBytes: number; outBytes: number } {
  return opEntry(op.op).buffers(op, n, groupRank);
}
