// Scenario to verified result: compile each op, load inputs, simulate the emitted bytes, check, report.
import { freemem, totalmem } from "node:os";
import { getHeapStatistics } from "node:v8";
import type { Logger } from "pino";
import { dtypeSize, reduceHow } from "../ir/dtypes.ts";
import { EncAlgType } from "../ir/enums.ts";
import { opEntry } from "../ir/ops.ts";
import { isRingOp, opTypeOf, type DeviceSpec, type OpSpec, type Scenario } from "../ir/spec.ts";
import { InternalError, ScenarioError, SimError } from "../ir/errors.ts";
import { threadFeed } from "./feed-thread.ts";
import { fixedCost, opShape, opSpec, type FixedCost } from "./fixed-cost.ts";
import { bufferBytes, compileProgram, compileStreamed, algorithmLabel, type Folding, type OpLayout } from "../enc/compile.ts";
import type { Explanation } from "../enc/post.ts";
import { compare, generateValues, referenceAllToAll, referenceAllToAllV, referencePermute, referenceValues, toBytes, type Mismatch } from "../check/values.ts";
import { compareSymbolic, expectedRanges, type ExpectedRange, type SymbolicMismatch } from "../check/symbolic.ts";
import { busFactor, throughput, type ResultRow } from "../report/table.ts";
import type { ProgramImage } from "../encd/program.ts";
import { simulate, type HangReport, type ResourceStat, type RunProgress, type TraceSink, type Violation } from "../../sim/index.ts";

/**
 * Memory a values check of `payload` bytes (every rank's input + output) holds: the bytes in
 * simulated HBM, and each element as a number (8 bytes) in the inputs, the reference outputs and the
 * read-back.
 */
export function valuesCheckMemory(payload: number, esize: number): number {
  return payload * (2 + 24 / esize);
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
 * The JavaScript heap a values check of `op` takes for its numbers: every rank's input elements,
 * and the reference outputs' (one array a group shares for all-reduce, all-gather and
 * all-gather-v; one per rank otherwise), 8 bytes each, twice over for the arrays built on the way
 * (measured: an all-to-all of 4 MiB bf16 over 24 ranks, 100 M numbers, peaks at 1.3 GB).
 */
export function valuesCheckHeap(op: OpSpec, groups: readonly (readonly number[])[]): number {
  const esize = dtypeSize(op.dtype);
  const shared = op.op === "all-reduce" || op.op === "all-gather" || op.op === "all-gather-v";
  let numbers = 0;
  for (const g of groups) {
    let sharedOut = 0;
    for (let k = 0; k < g.length; k++) {
      const b = bufferBytes(op, opTypeOf(op.op), g.length, k);
      numbers += b.inBytes / esize;
      if (shared) sharedOut = Math.max(sharedOut, b.outBytes / esize);
      else numbers += b.outBytes / esize;
    }
    numbers += sharedOut;
  }
  return numbers * 16;
}

/** What a values check's numbers may take: three quarters of the JavaScript heap. */
export function valuesHeapBudget(): number {
  return Math.floor((getHeapStatistics().heap_size_limit * 3) / 4);
}

/**
 * Whether a values check of `op` over these groups fits: every rank's input + output and the
 * memory that takes, within `budget`; its numbers within the JavaScript heap. `why`: what does not
 * fit, for a warning.
 */
export function valuesCheckFit(op: OpSpec, groups: readonly (readonly number[])[], budget = valuesCheckBudget(), heapBudget = valuesHeapBudget()): { fits: boolean; why?: string } {
  const payload = payloadBytes(op, groups);
  const need = valuesCheckMemory(payload, dtypeSize(op.dtype));
  if (need > budget) return { fits: false, why: `checking values holds ${payload} bytes of payload, about ${gib(need)} of memory; a values check may use ${gib(budget)} (half of this machine's ${gib(totalmem())}; ${gib(freemem())} free)` };
  const heap = valuesCheckHeap(op, groups);
  if (heap > heapBudget) return { fits: false, why: `checking values holds its inputs and reference outputs as numbers, about ${gib(heap)} of the JavaScript heap; they may use ${gib(heapBudget)} (three quarters of its ${gib(getHeapStatistics().heap_size_limit)})` };
  return { fits: true };
}

/**
 * The race detector's shadow memory keeps a piece per range a packet read or wrote, about 90 bytes
 * each (measured: ring8 all-reduce 256 MiB, 1 M pieces, 90 MB; a 48-rank 836 MB one, 1.4 GB); a
 * piece covers at least a CCE packet (1,024 elements, at most 4 KiB).
 */
const RACE_PIECE_COST = 96;

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
export function heapFull(): string | undefined {
  const h = getHeapStatistics();
  if (h.used_heap_size <= 0.9 * h.heap_size_limit) return undefined;
  return `the JavaScript heap holds ${gib(h.used_heap_size)} of its ${gib(h.heap_size_limit)}`;
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
export function racesFit(ops: readonly OpSpec[], groups: readonly (readonly number[])[], agents: number, budget = racesBudget()): { need: number; fits: boolean } {
  let need = RACE_CLOCK_COST * agents * agents;
  for (const op of ops) need += Math.ceil(payloadBytes(op, groups) / Math.min(4096, 1024 * dtypeSize(op.dtype))) * RACE_PIECE_COST;
  return { need, fits: need <= budget };
}

/** The warning for race detection left out of `what` (it would need `need` bytes; `agents` memory agents). */
function racesLeftOut(what: string, need: number, agents: number, budget: number | undefined, checking: string): string {
  return `${what}: race detection would keep about ${gib(need)} of shadow memory and vector clocks (a piece per packet-sized range of every rank's buffers; a clock entry per memory agent, ${agents} of them, in each queue, core and semaphore); it may use ${gib(budget ?? racesBudget())} (half of the JavaScript heap): checking ${checking} without race detection`;
}

/** What one op did to the machine's resources (for --stats). */
export interface OpStats {
  readonly timePs: number;
  readonly links: readonly ResourceStat[];
  readonly engines: readonly ResourceStat[];
  readonly hbm: readonly ResourceStat[];
}

/** The first place an output differs from the reference: a value, or a symbolic range's contributions. */
export type CheckMismatch = ({ readonly kind: "values" } & Mismatch) | ({ readonly kind: "symbolic" } & SymbolicMismatch);

export function mismatchText(m: CheckMismatch): string {
  if (m.kind === "values") return `rank ${m.rank}, element ${m.index}: expected ${m.expected}, got ${m.got}`;
  const where = `rank ${m.rank}, output bytes [${m.start}, ${m.end})`;
  if (m.arithmetic) return `${where}: its ${m.expectedTerms} contributions were reduced by ${m.arithmetic.got}, not ${m.arithmetic.expected}`;
  return `${where} of ${m.expectedTerms} expected contribution(s): missing ${m.missing}; extra ${m.extra}`;
}

export interface OpOutcome {
  readonly row: ResultRow;
  readonly mismatch: CheckMismatch | undefined;
  /** How the outputs were checked (a values check that does not fit in memory runs symbolically). */
  readonly checked: "values" | "symbolic" | "none";
  /** What the verifier saw go wrong (stray writes, unbalanced semaphores, rings not consumed): a failed check even when values pass. */
  readonly violations: readonly Violation[];
  readonly events: number;
  readonly wallMs: number;
  /** Stats of the devices simulated: pod 0's alone when folded. */
  readonly stats: OpStats;
  /** A timing-only run of several pods: whether pod 0 stood for all, or why not. */
  readonly folding?: Folding;
  /** The op's fixed cost beyond the device's work (the launch and the preset's host costs), in its time. */
  readonly fixedCost: FixedCost;
}

/** The scenario's ops run together in one program ("concurrent": each stream on its own TopSP and queues). */
export interface ConcurrentOutcome {
  /** When the last op ends. */
  readonly timePs: number;
  /** When each op ends, in scenario order. */
  readonly opEndPs: readonly number[];
  readonly streams: readonly number[];
  readonly checked: "values" | "none";
  /** The first op whose outputs differ from the reference, and what the verifier saw. */
  readonly mismatch?: { readonly op: number; readonly mismatch: CheckMismatch };
  readonly violations: readonly Violation[];
  readonly events: number;
}

export type RunOutcome =
  | { readonly kind: "done"; readonly ops: readonly OpOutcome[]; readonly explain: readonly Explanation[]; readonly concurrent?: ConcurrentOutcome }
  | { readonly kind: "hang"; readonly op: number; readonly hang: HangReport; readonly done: readonly OpOutcome[] };

export interface PipelineHooks {
  /** Tests: alter the emitted image before it runs (to show that broken programs are caught). */
  readonly mutateImage?: (image: ProgramImage, op: number) => void;
  /** Tests: the memory a values check may use, instead of half of this machine's. */
  readonly valuesBudget?: number;
  /** Tests: the JavaScript heap a values check's numbers may take, instead of three quarters of it. */
  readonly valuesHeapBudget?: number;
  /** Tests: the memory race detection may use, instead of half of the JavaScript heap. */
  readonly racesBudget?: number;
  /** Tests: whether a symbolic run is out of room (a reason stops it), instead of `heapFull`. */
  readonly symbolicFull?: () => string | undefined;
  /** Simulate every pod even when a timing-only run's pods are alike (--no-fold). */
  readonly unfolded?: boolean;
  /**
   * Compose a big program's descriptor rings on a second thread while it runs (src/run/feed-thread.ts):
   * the same bytes, in the same order, so the same results. A program of fewer descriptors than
   * `minDescriptors` (default THREAD_MIN_DESCRIPTORS) composes in the run's thread.
   */
  readonly composeThread?: { readonly minDescriptors?: number };
  /** A trace sink for the run of op `op` (labelled for the trace). */
  readonly trace?: (label: string) => TraceSink;
  /** How far a long run is, about once a second (`label` names the op). */
  readonly progress?: (label: string, p: RunProgress) => void;
}

/** Run every op of a scenario, each as its own program on a fresh machine (independent timings). */
export function runScenario(scn: Scenario, spec: DeviceSpec, log: Logger, hooks: PipelineHooks = {}): RunOutcome {
  const done: OpOutcome[] = [];
  let explain: readonly Explanation[] = [];
  /**
   * Op `i`, checked as `mode` says (race detection as `races` says): its outcome goes to `done`; a
   * hang is returned. `again`: its second run (the compile's warnings were said by the first).
   */
  const runOp = (i: number, t0: number, mode: Scenario["check"], races: boolean, again = false): RunOutcome | undefined => {
    const op = scn.ops[i]!;
    // Descriptor rings stream into the run (it holds what is in flight), unless a test edits the image's rings.
    // A timing-only run of alike pods simulates pod 0 alone (src/encd/fold.ts says when and why it is the same).
    const fold = mode === "none" && !hooks.unfolded && !(scn.faults && scn.faults.length > 0);
    const { image, layout, explain: why, warnings, folding } = hooks.mutateImage ? compileProgram(scn, spec, [i]) : compileStreamed(scn, spec, [i], { fold, ...(hooks.composeThread ? { runner: threadFeed(hooks.composeThread.minDescriptors) } : {}) });
    if (folding) log.info({ op: i, ...folding }, folding.folded ? "folded: pod 0 stands for every pod" : "not folded");
    // Race detection whose shadow memory and clocks would not fit is left out (the run would die of it).
    if (races && mode !== "none") {
      const agents = memoryAgents(image);
      const { need, fits } = racesFit([op], scn.replicaGroups, agents, hooks.racesBudget);
      if (!fits) {
        log.warn(racesLeftOut(`op ${i} (${op.op} ${op.bytes} B)`, need, agents, hooks.racesBudget, mode === "values" ? "values" : "symbolically"));
        races = false;
      }
    }
    if (i === 0) {
      explain = why;
      if (!again) for (const w of warnings) log.warn(w);
    }
    const ol = layout.ops[0]!;
    if (ol.selections) explain = explain.map((e) => (e.op === i ? { ...e, hier: { stages: ol.stages, selections: ol.selections! } } : e));
    if (ol.selections) log.info({ op: i, stages: ol.stages.map((s) => `${s.level} ${s.op}`) }, ol.selections);
    const values = mode === "values";
    const symbolic = mode === "symbolic";
    if (i === 0 && !again) warnRouted(log, layout.rings.filter((r) => !r.followsLinks).map((r) => r.group));
    // Each rank's input values, then the reference outputs (ranks a permute leaves alone are not checked).
    const expected = values ? referenceOutputs(scn, i, ol) : new Map<number, number[]>();
    if (values) loadInputs(scn, i, ol, image);
    hooks.mutateImage?.(image, i);
    log.info({ op: i, devices: image.devices.length, queues: image.devices.reduce((n, d) => n + d.queues.length, 0) }, "compiled");
    const trace = hooks.trace?.(`${op.op} ${op.bytes} B`);
    // Every rank's input starts as its own contributions (seed = rank).
    const seeds = symbolic ? ol.ranks.map((rl) => ({ addr: rl.input.addr, bytes: rl.input.bytes, id: rl.rank, device: rl.device })) : undefined;
    const cost = fixedCost(spec, opShape(scn, i, ol.operation.groupAlgs));
    const res = runImage(opSpec(spec, cost), image, { storePayload: values, races: mode !== "none" && races, ...(seeds ? { symbolic: seeds, symbolicFull: hooks.symbolicFull ?? heapFull } : {}), ...(trace ? { trace } : {}), ...(scn.faults ? { faults: scn.faults } : {}), ...(hooks.progress ? { progress: (p: RunProgress) => hooks.progress!(`op ${i} (${op.op} ${op.bytes} B)`, p) } : {}) });
    log.info({ op: i, events: res.events, endPs: res.endPs, packets: res.packets }, "simulated");
    if (res.hang) return { kind: "hang", op: i, hang: res.hang, done };
    // The first rank whose output differs from the reference, by values or by contributions.
    let mismatch: CheckMismatch | undefined;
    const ranges = symbolic ? symbolicReference(scn, i, ol) : undefined;
    const how = reduceHow(op.reduce, op.dtype);
    const differs = (rank: number, device: number, addr: number, bytes: number): CheckMismatch | undefined => {
      if (values) {
        const want = expected.get(rank);
        const m = want && compare(op.dtype, rank, want, res.read(addr, bytes, device));
        return m && { kind: "values", ...m };
      }
      const want = ranges?.get(rank);
      const m = want && compareSymbolic(rank, want, (fn) => res.symbolic(addr, bytes, fn, device), how);
      return m && { kind: "symbolic", ...m };
    };
    if (values || symbolic) {
      for (const rl of ol.ranks) {
        mismatch = differs(rl.rank, rl.device, rl.output.addr, rl.output.bytes);
        if (mismatch) break;
      }
    }
    // The op ends when its slowest group does; its bus factor takes the largest group (what bounds
    // the time), whatever order the groups are listed in.
    const n = Math.max(...scn.replicaGroups.map((g) => g.length));
    const timePs = res.opEndPs[0] ?? res.endPs;
    // A hierarchical op's stages belong to its hierarchical groups.
    const labels = ol.operation.groupAlgs.map((a) => algorithmLabel(a, a === EncAlgType.HIER ? ol.stages : []));
    const distinct = [...new Set(labels)].sort();
    const row: ResultRow = {
      op: op.op,
      bytes: op.bytes,
      count: ol.count,
      dtype: op.dtype,
      ranks: n,
      algorithm: distinct.join("+"),
      ...(distinct.length > 1 ? { groups: labels.map((algorithm, group) => ({ group, ranks: scn.replicaGroups[group]!.length, algorithm })) } : {}),
      ...throughput(op.bytes, timePs, busFactor(op.op, n)),
      check: res.violations.length > 0 || mismatch ? "fail" : mode === "none" ? "skipped" : "pass",
    };
    done.push({ row, mismatch, checked: mode, violations: res.violations, events: res.events, wallMs: performance.now() - t0, stats: { timePs, links: res.links, engines: res.engines, hbm: res.hbm }, ...(folding ? { folding } : {}), fixedCost: cost });
    return undefined;
  };
  for (let i = 0; i < scn.ops.length; i++) {
    const t0 = performance.now();
    const op = scn.ops[i]!;
    // A values check that cannot fit in memory runs symbolically (memory for the schedule, not the payload).
    let mode = scn.check;
    let races = scn.races;
    if (mode === "values") {
      const { fits, why } = valuesCheckFit(op, scn.replicaGroups, hooks.valuesBudget, hooks.valuesHeapBudget);
      if (!fits) {
        log.warn(`op ${i} (${op.op} ${op.bytes} B): ${why}: checking symbolically instead, without race detection (its shadow memory grows with the op's packets; --check symbolic keeps it)`);
        mode = "symbolic";
        races = false;
      }
    }
    // Symbolic tracking that runs out of room stops while it can say so: the op is timed, unchecked.
    // (Run again outside the catch: the error's stack holds the first run's machine until it goes.)
    let full: string | undefined;
    try {
      const hung = runOp(i, t0, mode, races);
      if (hung) return hung;
    } catch (e) {
      if (!(mode === "symbolic" && e instanceof SimError && e.code === "SIM1518")) throw e;
      full = e.message;
    }
    if (full !== undefined) {
      log.warn(`op ${i} (${op.op} ${op.bytes} B): ${full}: timed only, not checked (fewer ranks, or a smaller size, check it)`);
      const hung = runOp(i, t0, "none", false, true);
      if (hung) return hung;
    }
  }
  if (scn.concurrent && scn.ops.length > 1) {
    const c = runConcurrent(scn, spec, log, hooks);
    if (c.kind === "hang") return { kind: "hang", op: c.op, hang: c.hang, done };
    return { kind: "done", ops: done, explain, concurrent: c.outcome };
  }
  return { kind: "done", ops: done, explain };
}

/**
 * Every op of the scenario in one program, as the runtime's multi-stream mode runs them: each
 * stream's ops chained on its TopSP and queues, the streams at once. Values are checked when the
 * scenario checks values and every op's payload fits; otherwise the run is timing only.
 */
function runConcurrent(scn: Scenario, spec: DeviceSpec, log: Logger, hooks: PipelineHooks): { kind: "done"; outcome: ConcurrentOutcome } | { kind: "hang"; op: number; hang: HangReport } {
  const all = scn.ops.map((_, i) => i);
  const values = scn.check === "values" && scn.ops.every((op) => valuesCheckFit(op, scn.replicaGroups, hooks.valuesBudget, hooks.valuesHeapBudget).fits);
  if (scn.check === "values" && !values) log.warn("the concurrent run: the ops' payload does not fit in memory for a values check (each op alone was checked as above): timing only");
  const composeThread = hooks.composeThread;
  const { image, layout } = compileStreamed(scn, spec, all, composeThread ? { runner: threadFeed(composeThread.minDescriptors) } : {});
  const expected = new Map<number, Map<number, number[]>>();
  if (values) {
    layout.ops.forEach((ol, k) => {
      expected.set(k, referenceOutputs(scn, k, ol));
      loadInputs(scn, k, ol, image);
    });
  }
  // (Race detection as each op alone has it: only where every op's shadow memory and the clocks fit, together.)
  let races = values && scn.races;
  if (races) {
    const agents = memoryAgents(image);
    const { need, fits } = racesFit(scn.ops, scn.replicaGroups, agents, hooks.racesBudget);
    if (!fits) log.warn(racesLeftOut("the concurrent run", need, agents, hooks.racesBudget, "values"));
    races = fits;
  }
  // The streams start together, after the largest of their ops' fixed costs.
  const costs = layout.ops.map((ol, k) => fixedCost(spec, opShape(scn, k, ol.operation.groupAlgs)));
  const cost = costs.reduce((a, c) => (c.totalPs > a.totalPs ? c : a));
  const res = runImage(opSpec(spec, cost), image, { storePayload: values, races, ...(scn.faults ? { faults: scn.faults } : {}) });
  log.info({ events: res.events, endPs: res.endPs, opEndPs: res.opEndPs }, "simulated the ops concurrently");
  if (res.hang) return { kind: "hang", op: -1, hang: res.hang };
  let mismatch: ConcurrentOutcome["mismatch"];
  if (values) {
    for (const [k, ol] of layout.ops.entries()) {
      for (const rl of ol.ranks) {
        const want = expected.get(k)!.get(rl.rank);
        const m = want && compare(scn.ops[k]!.dtype, rl.rank, want, res.read(rl.output.addr, rl.output.bytes, rl.device));
        if (m) {
          mismatch = { op: k, mismatch: { kind: "values", ...m } };
          break;
        }
      }
      if (mismatch) break;
    }
  }
  const opEndPs = all.map((k) => res.opEndPs[k] ?? res.endPs);
  return {
    kind: "done",
    outcome: { timePs: Math.max(...opEndPs), opEndPs, streams: [...new Set(scn.ops.map((o) => o.stream))].sort((a, b) => a - b), checked: values ? "values" : "none", ...(mismatch ? { mismatch } : {}), violations: res.violations, events: res.events },
  };
}

/** Each rank's input values of op `i` into the image's initial memory. */
function loadInputs(scn: Scenario, i: number, ol: OpLayout, image: ProgramImage): void {
  const op = scn.ops[i]!;
  for (const rl of ol.ranks) {
    const dev = image.devices.find((d) => d.device === rl.device)!;
    dev.memory.push({ addr: rl.input.addr, bytes: toBytes(op.dtype, inputValues(scn, i, rl.rank, rl.input.bytes)) });
  }
}

/** Simulate; a fault the machine cannot apply (no such link, engine or device) is the scenario's error. */
function runImage(spec: DeviceSpec, image: ProgramImage, opts: Parameters<typeof simulate>[2]) {
  try {
    return simulate(spec, image, opts);
  } catch (e) {
    if (e instanceof SimError && e.code === "SIM1601") throw new ScenarioError("SCN1010", e.message, { path: e.path, value: e.value });
    throw e;
  }
}

/** How many values one output element sums (keeps generated floats exact). */
function summands(scn: Scenario, i: number): number {
  const op = scn.ops[i]!;
  if (op.pairs) return 2;
  return Math.max(...scn.replicaGroups.map((g) => g.length));
}

function inputValues(scn: Scenario, i: number, rank: number, bytes: number): number[] {
  const op = scn.ops[i]!;
  return memoInputs(scn, i, rank, () => generateValues(scn.seed, i, rank, op.dtype, bytes / dtypeSize(op.dtype), op.reduce, summands(scn, i), scn.ranks));
}

const INPUTS = new WeakMap<Scenario, Map<string, number[]>>();
function memoInputs(scn: Scenario, i: number, rank: number, make: () => number[]): number[] {
  let m = INPUTS.get(scn);
  if (!m) INPUTS.set(scn, (m = new Map()));
  const key = `${i}/${rank}`;
  let v = m.get(key);
  if (!v) m.set(key, (v = make()));
  return v;
}

/** Which input ranges every defined output range must combine (the symbolic reference). */
function symbolicReference(scn: Scenario, i: number, ol: OpLayout): Map<number, ExpectedRange[]> {
  const op = scn.ops[i]!;
  const bytesOf = new Map(ol.ranks.map((rl) => [rl.rank, rl]));
  const out = new Map<number, ExpectedRange[]>();
  const groups = op.pairs ? [[...new Set(op.pairs.flat())]] : scn.replicaGroups;
  for (const g of groups) {
    const rl = bytesOf.get(g[0]!)!;
    for (const [r, ranges] of expectedRanges({ op: op.op, counts: op.counts, pairs: op.pairs }, g, rl.input.bytes, rl.output.bytes)) out.set(r, ranges);
  }
  return out;
}

/** The reference output of every rank whose output the op defines. */
function referenceOutputs(scn: Scenario, i: number, ol: OpLayout): Map<number, number[]> {
  const op = scn.ops[i]!;
  const inputs = new Map(ol.ranks.map((rl) => [rl.rank, inputValues(scn, i, rl.rank, rl.input.bytes)]));
  const out = new Map<number, number[]>();
  const entry = opEntry(op.op);
  if (entry.reference === "permute") return referencePermute(op.dtype, entry.reduces ? op.reduce : undefined, inputs, op.pairs!);
  const esize = dtypeSize(op.dtype);
  for (const g of scn.replicaGroups) {
    const ins = g.map((r) => inputs.get(r)!);
    const refs =
      entry.reference === "collective" && isRingOp(op.op)
        ? referenceValues(op.op, op.dtype, op.reduce, ins)
        : entry.reference === "alltoall"
          ? referenceAllToAll(ins)
          : entry.reference === "alltoall-v"
            ? referenceAllToAllV(ins, op.counts!.map((row) => row.map((b) => b / esize)))
            : entry.reference === "all-gather-v"
              ? sharedBy(ins.length, ins.flat())
              : undefined;
    if (!refs) throw new InternalError(`no reference collective for ${op.op}`);
    g.forEach((r, k) => out.set(r, refs[k]!));
  }
  return out;
}

/** One reference output that `n` ranks share (one array, not a copy each). */
function sharedBy(n: number, values: number[]): number[][] {
  return Array.from({ length: n }, () => values);
}

/** Ranks a warning lists in full; a longer group is shown by its first and last ones. */
const LISTED_RANKS = 16;

/** One warning for the groups whose ring is not over direct links (a long group abbreviated). */
function warnRouted(log: Logger, groups: readonly (readonly number[])[]): void {
  if (groups.length === 0) return;
  const g = groups[0]!;
  const group = g.length <= LISTED_RANKS ? g : `${g.slice(0, LISTED_RANKS - 2).join(", ")}, ..., ${g.slice(-2).join(", ")} (${g.length} ranks)`;
  if (groups.length === 1) log.warn({ group }, "no ring over direct links for this group: non-neighbour hops are routed");
  else log.warn({ groups: groups.length, group }, `no ring over direct links for ${groups.length} groups (the first shown): non-neighbour hops are routed`);
}
