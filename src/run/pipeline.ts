// Scenario to verified result: compile each op, load inputs, simulate the emitted bytes, check, report.
import type { Logger } from "pino";
import { dtypeSize, reduceHow, type Dtype } from "../ir/dtypes.ts";
import { EncAlgType } from "../ir/enums.ts";
import { opGroups, type DeviceSpec, type OpSpec, type Scenario } from "../ir/spec.ts";
import { ScenarioError, SimError } from "../ir/errors.ts";
import { threadFeed } from "./feed-thread.ts";
import { heapFull, memoryAgents, racePieceBytes, racesFit, racesLeftOut, valuesCheckFit } from "./budgets.ts";
import { forgetInputs, loadInputs, referenceOutputs, symbolicReference } from "./reference.ts";
import { fixedCost, opShape, opSpec, type FixedCost } from "./fixed-cost.ts";
import { compileProgram, compileStreamed, algorithmLabel, type CompiledProgram, type Folding } from "../enc/compile.ts";
import { materialize, ringBytes } from "./program-cache.ts";
import type { Explanation } from "../enc/post.ts";
import { opPacketBytes, opReduceSlice } from "../enc/gates.ts";
import { compare, matches, type Mismatch, type ValueList } from "../check/values.ts";
import { compareSymbolic, type SymbolicMismatch } from "../check/symbolic.ts";
import { busFactor, throughput, type ResultRow } from "../report/table.ts";
import type { ProgramImage } from "../encd/program.ts";
import { simulate, type HangReport, type ResourceStat, type RunProgress, type SimResult, type SteadyReport, type TraceSink, type Violation } from "../../sim/index.ts";

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
  /** Periods of the run skipped once its state repeated (timing-only runs). */
  readonly steady?: SteadyReport;
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
  /** Tests: alter the emitted image before it runs (to show that broken programs are caught); op -1 is a concurrent scenario's program of all its ops. */
  readonly mutateImage?: (image: ProgramImage, op: number) => void;
  /** Tests: the memory a values check may use, instead of half of this machine's. */
  readonly valuesBudget?: number;
  /** Tests: the memory race detection may use, instead of half of the JavaScript heap. */
  readonly racesBudget?: number;
  /** Tests: whether a symbolic run is out of room (a reason stops it), instead of `heapFull`. */
  readonly symbolicFull?: (outsideBytes: number) => string | undefined;
  /** Simulate every pod even when a timing-only run's pods are alike (--no-fold). */
  readonly unfolded?: boolean;
  /** Run every event of a timing-only run: no period skipped once its state repeats (--no-fastforward; sim/steady-state.ts). */
  readonly noFastForward?: boolean;
  /** Tests: skip every repeat found of at least this many events. */
  readonly fastForwardMinSkip?: number;
  /**
   * Compose a big program's descriptor rings on a second thread while it runs (src/run/feed-thread.ts):
   * the same bytes, in the same order, so the same results. A program of fewer descriptors than
   * `minDescriptors` (default THREAD_MIN_DESCRIPTORS) composes in the run's thread.
   */
  readonly composeThread?: { readonly minDescriptors?: number };
  /**
   * Trials without recompiling (a timing-only run of one op): run this program, compiled before
   * under a preset that differs at most in its timing fields (src/run/program-cache.ts), instead
   * of compiling; or, without one, hand the program compiled here, drained whole, to `keepProgram`.
   */
  readonly program?: CompiledProgram;
  readonly keepProgram?: (p: CompiledProgram) => void;
  /**
   * The most descriptor-ring bytes `keepProgram` can keep: a bigger program runs streamed, as
   * without one, and is not handed over (drained whole, it would be let go unused).
   */
  readonly keepBytes?: number;
  /** A trace sink for the run of op `op` (labelled for the trace). */
  readonly trace?: (label: string) => TraceSink;
  /** How far a long run is, about once a second (`label` names the op). */
  readonly progress?: (label: string, p: RunProgress) => void;
}

/** The least a race-detection shadow piece covers for each op of `scn` on `spec` (its smallest packets). */
function racePieces(spec: DeviceSpec, scn: Scenario): (op: OpSpec) => number {
  return (op) => {
    const packet = opPacketBytes(spec, scn, op);
    return racePieceBytes(dtypeSize(op.dtype), packet, opReduceSlice(spec, op.dtype, op.priorityClass, packet));
  };
}

/** Run every op of a scenario, each as its own program on a fresh machine (independent timings). */
export function runScenario(scn: Scenario, spec: DeviceSpec, log: Logger, hooks: PipelineHooks = {}): RunOutcome {
  const done: OpOutcome[] = [];
  let explain: readonly Explanation[] = [];
  /** What each op's compile said of every op (an op run as an earlier one is said from that one's). */
  const posted = new Map<number, readonly Explanation[]>();
  /**
   * Op `i`, checked as `mode` says (race detection as `races` says): its outcome goes to `done`; a
   * hang is returned. `again`: its second run (the compile's warnings were said by the first).
   */
  const runOp = (i: number, t0: number, mode: Scenario["check"], races: boolean, again = false): RunOutcome | undefined => {
    const op = scn.ops[i]!;
    // Descriptor rings stream into the run (it holds what is in flight), unless a test edits the image's rings.
    // A timing-only run of alike pods simulates pod 0 alone (src/encd/fold.ts says when and why it is the same).
    const fold = mode === "none" && !hooks.unfolded && !(scn.faults && scn.faults.length > 0);
    const reuse = mode === "none" && !hooks.mutateImage && scn.ops.length === 1 && (hooks.program !== undefined || hooks.keepProgram !== undefined);
    const compile = (): CompiledProgram => (hooks.mutateImage ? compileProgram(scn, spec, [i]) : compileStreamed(scn, spec, [i], { fold, ...(hooks.composeThread && !reuse ? { runner: threadFeed(hooks.composeThread.minDescriptors) } : {}) }));
    let compiled: CompiledProgram;
    if (reuse && hooks.program) compiled = hooks.program;
    else if (reuse) {
      compiled = compile();
      if (ringBytes(compiled) <= (hooks.keepBytes ?? Number.POSITIVE_INFINITY)) {
        compiled = materialize(compiled);
        hooks.keepProgram!(compiled);
      }
    } else compiled = compile();
    const { image, layout, explain: why, warnings, folding } = compiled;
    if (folding) log.info({ op: i, ...folding }, folding.folded ? "folded: pod 0 stands for every pod" : "not folded");
    // Race detection whose shadow memory and clocks would not fit is left out (the run would die of it).
    if (races && mode !== "none") {
      const agents = memoryAgents(image);
      const { need, fits } = racesFit([op], opGroups(scn, i), agents, hooks.racesBudget, racePieces(spec, scn));
      if (!fits) {
        log.warn(racesLeftOut(`op ${i} (${op.op} ${op.bytes} B)`, need, agents, hooks.racesBudget, mode === "values" ? "values" : "symbolically"));
        races = false;
      }
    }
    // Each op as its own program posted it (a program's channel count is its op's: a permute's
    // next to an all-reduce's may differ), in op order.
    if (!again) {
      explain = [...explain, ...why.filter((e) => e.op === i)];
      posted.set(i, why);
    }
    if (i === 0 && !again) for (const w of warnings) log.warn(w);
    const ol = layout.ops[0]!;
    if (ol.selections) explain = explain.map((e) => (e.op === i ? { ...e, hier: { stages: ol.stages, selections: ol.selections!, ...(ol.padBytes ? { padBytes: ol.padBytes } : {}) } } : e));
    if (ol.selections) log.info({ op: i, stages: ol.stages.map((s) => `${s.level} ${s.op}`) }, ol.selections);
    const values = mode === "values";
    const symbolic = mode === "symbolic";
    if (i === 0 && !again) warnRouted(log, layout.rings.filter((r) => !r.followsLinks).map((r) => r.group));
    // Each rank's input values, then the reference outputs (ranks a permute leaves alone are not checked).
    const expected = values ? referenceOutputs(scn, i, ol) : new Map<number, ValueList>();
    if (values) {
      loadInputs(scn, i, ol, image);
      // (Kept for the run of all ops at once, when one follows: it loads them again.)
      if (!(scn.concurrent && scn.ops.length > 1)) forgetInputs(scn, i);
    }
    hooks.mutateImage?.(image, i);
    log.info({ op: i, devices: image.devices.length, queues: image.devices.reduce((n, d) => n + d.queues.length, 0) }, "compiled");
    const trace = hooks.trace?.(`${op.op} ${op.bytes} B`);
    // Every rank's input starts as its own contributions (seed = rank).
    const seeds = symbolic ? ol.ranks.map((rl) => ({ addr: rl.input.addr, bytes: rl.input.bytes, id: rl.rank, device: rl.device })) : undefined;
    const cost = fixedCost(spec, opShape(scn, i, ol.operation.groupAlgs));
    const res = runImage(opSpec(spec, cost), image, { storePayload: values, fastForward: !hooks.noFastForward, ...(hooks.fastForwardMinSkip !== undefined ? { fastForwardMinSkip: hooks.fastForwardMinSkip } : {}), races: mode !== "none" && races, ...(seeds ? { symbolic: seeds, symbolicFull: hooks.symbolicFull ?? heapFull } : {}), ...(trace ? { trace } : {}), ...(scn.faults ? { faults: scn.faults } : {}), ...(hooks.progress ? { progress: (p: RunProgress) => hooks.progress!(`op ${i} (${op.op} ${op.bytes} B)`, p) } : {}) });
    log.info({ op: i, events: res.events, endPs: res.endPs, packets: res.packets }, "simulated");
    if (res.hang) return { kind: "hang", op: i, hang: res.hang, done };
    // The first rank whose output differs from the reference, by values or by contributions.
    let mismatch: CheckMismatch | undefined;
    const ranges = symbolic ? symbolicReference(scn, i, ol) : undefined;
    const how = reduceHow(op.reduce, op.dtype);
    const differs = (rank: number, device: number, addr: number, bytes: number): CheckMismatch | undefined => {
      if (values) {
        const want = expected.get(rank);
        const m = want && checkOutput(res, op.dtype, rank, want, addr, bytes, device);
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
    const groups = opGroups(scn, i);
    const n = Math.max(...groups.map((g) => g.length));
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
      ...(distinct.length > 1 ? { groups: labels.map((algorithm, group) => ({ group, ranks: groups[group]!.length, algorithm })) } : {}),
      ...throughput(op.bytes, timePs, busFactor(op.op, n)),
      check: res.violations.length > 0 || mismatch ? "fail" : mode === "none" ? "skipped" : "pass",
    };
    done.push({ row, mismatch, checked: mode, violations: res.violations, events: res.events, wallMs: performance.now() - t0, stats: { timePs, links: res.links, engines: res.engines, hbm: res.hbm }, ...(folding ? { folding } : {}), ...(res.steady ? { steady: res.steady } : {}), fixedCost: cost });
    return undefined;
  };
  // An op of a concurrent scenario that repeats an earlier one on its stream (nccom-test's
  // ops_per_iter) is the same program alone, but for its place in the stream's slots: its run alone
  // is the earlier op's (the concurrent run below runs every op).
  const first = new Map<string, number>();
  for (let i = 0; i < scn.ops.length; i++) {
    const t0 = performance.now();
    const op = scn.ops[i]!;
    const key = scn.concurrent && !scn.rankOverrides.some((o) => o.op === i) ? JSON.stringify(op) : undefined;
    const same = key === undefined ? undefined : first.get(key);
    if (same !== undefined && done[same]) {
      log.info({ op: i, as: same }, "alone: the same op as an earlier one on its stream, its run");
      done.push(done[same]!);
      // (Its explanation is the earlier one's posting of it, with the stages that one's run chose.)
      const hier = explain.find((e) => e.op === same && e.hier)?.hier;
      explain = [...explain, ...(posted.get(same) ?? []).filter((e) => e.op === i).map((e) => (hier ? { ...e, hier } : e))];
      continue;
    }
    if (key !== undefined) first.set(key, i);
    // A values check that cannot fit in memory runs symbolically (memory for the schedule, not the payload).
    let mode = scn.check;
    let races = scn.races;
    if (mode === "values") {
      const { fits, why } = valuesCheckFit(op, opGroups(scn, i), hooks.valuesBudget);
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
  const values = scn.check === "values" && scn.ops.every((op, i) => valuesCheckFit(op, opGroups(scn, i), hooks.valuesBudget).fits);
  if (scn.check === "values" && !values) log.warn("the concurrent run: the ops' payload does not fit in memory for a values check (each op alone was checked as above): timing only");
  const composeThread = hooks.composeThread;
  const { image, layout } = hooks.mutateImage ? compileProgram(scn, spec, all) : compileStreamed(scn, spec, all, composeThread ? { runner: threadFeed(composeThread.minDescriptors) } : {});
  hooks.mutateImage?.(image, -1);
  const expected = new Map<number, Map<number, ValueList>>();
  if (values) {
    layout.ops.forEach((ol, k) => {
      expected.set(k, referenceOutputs(scn, k, ol));
      loadInputs(scn, k, ol, image);
      forgetInputs(scn, k);
    });
  }
  // (Race detection as each op alone has it: only where every op's shadow memory and the clocks fit, together.)
  let races = values && scn.races;
  if (races) {
    const agents = memoryAgents(image);
    const { need, fits } = racesFit(scn.ops, scn.replicaGroups, agents, hooks.racesBudget, racePieces(spec, scn));
    if (!fits) log.warn(racesLeftOut("the concurrent run", need, agents, hooks.racesBudget, "values"));
    races = fits;
  }
  // The streams start together, after the largest of their ops' fixed costs.
  const costs = layout.ops.map((ol, k) => fixedCost(spec, opShape(scn, k, ol.operation.groupAlgs)));
  const cost = costs.reduce((a, c) => (c.totalPs > a.totalPs ? c : a));
  const res = runImage(opSpec(spec, cost), image, { storePayload: values, fastForward: !hooks.noFastForward, ...(hooks.fastForwardMinSkip !== undefined ? { fastForwardMinSkip: hooks.fastForwardMinSkip } : {}), races, ...(scn.faults ? { faults: scn.faults } : {}) });
  log.info({ events: res.events, endPs: res.endPs, opEndPs: res.opEndPs }, "simulated the ops concurrently");
  if (res.hang) return { kind: "hang", op: -1, hang: res.hang };
  let mismatch: ConcurrentOutcome["mismatch"];
  if (values) {
    for (const [k, ol] of layout.ops.entries()) {
      for (const rl of ol.ranks) {
        const want = expected.get(k)!.get(rl.rank);
        const m = want && checkOutput(res, scn.ops[k]!.dtype, rl.rank, want, rl.output.addr, rl.output.bytes, rl.device);
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

/** Simulate; a fault the machine cannot apply (no such link, engine or device) is the scenario's error. */
function runImage(spec: DeviceSpec, image: ProgramImage, opts: Parameters<typeof simulate>[2]) {
  try {
    return simulate(spec, image, opts);
  } catch (e) {
    if (e instanceof SimError && e.code === "SIM1601") throw new ScenarioError("SCN1010", e.message, { path: e.path, value: e.value });
    throw e;
  }
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

/** A rank's output against its reference: compared where it lies (no copy) and read back only to say where it differs. */
function checkOutput(res: SimResult, d: Dtype, rank: number, want: ValueList, addr: number, bytes: number, device: number): Mismatch | undefined {
  if (matches(d, want, bytes, (fn) => res.each(addr, bytes, fn, device))) return undefined;
  return compare(d, rank, want, res.read(addr, bytes, device));
}
