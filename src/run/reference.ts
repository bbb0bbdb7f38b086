// The run's side of the checks: each rank's seeded input values loaded into the image, and the
// reference outputs (values, or symbolic ranges) an op's outputs are compared with.
import { dtypeSize } from "../ir/dtypes.ts";
import { opEntry } from "../ir/ops.ts";
import { isRingOp, opGroups, type Scenario } from "../ir/spec.ts";
import { InternalError } from "../ir/errors.ts";
import type { OpLayout } from "../enc/compile.ts";
import { concatValues, generateValues, referenceAllToAll, referenceAllToAllV, referencePermute, referenceValues, toBytes, type ValueList, type Values } from "../check/values.ts";
import { expectedRanges, type ExpectedRange } from "../check/symbolic.ts";
import type { ProgramImage } from "../encd/program.ts";


/** Each rank's input values of op `i` into the image's initial memory. */
export function loadInputs(scn: Scenario, i: number, ol: OpLayout, image: ProgramImage): void {
  const op = scn.ops[i]!;
  for (const rl of ol.ranks) {
    const dev = image.devices.find((d) => d.device === rl.device)!;
    dev.memory.push({ addr: rl.input.addr, bytes: toBytes(op.dtype, inputValues(scn, i, rl.rank, rl.input.bytes)) });
  }
}


/** How many values one output element sums (keeps generated floats exact). */
function summands(scn: Scenario, i: number): number {
  const op = scn.ops[i]!;
  if (op.pairs) return 2;
  return Math.max(...opGroups(scn, i).map((g) => g.length));
}

function inputValues(scn: Scenario, i: number, rank: number, bytes: number): Values {
  const op = scn.ops[i]!;
  return memoInputs(scn, i, rank, () => generateValues(scn.seed, i, rank, op.dtype, bytes / dtypeSize(op.dtype), op.reduce, summands(scn, i), scn.ranks));
}

const INPUTS = new WeakMap<Scenario, Map<string, Values>>();

/**
 * Op `i`'s inputs are loaded and its reference made: let its values go (a run of 1,024 ranks held
 * a quarter of a gigabyte of them through the simulation, scanned at every collection). A later
 * pass that needs them again (the ops run at once) makes them again, the same.
 */
export function forgetInputs(scn: Scenario, i: number): void {
  const m = INPUTS.get(scn);
  if (!m) return;
  for (const key of [...m.keys()]) if (key.startsWith(`${i}/`)) m.delete(key);
}
function memoInputs(scn: Scenario, i: number, rank: number, make: () => Values): Values {
  let m = INPUTS.get(scn);
  if (!m) INPUTS.set(scn, (m = new Map()));
  const key = `${i}/${rank}`;
  let v = m.get(key);
  if (!v) m.set(key, (v = make()));
  return v;
}

/** Which input ranges every defined output range must combine (the symbolic reference). */
export function symbolicReference(scn: Scenario, i: number, ol: OpLayout): Map<number, ExpectedRange[]> {
  const op = scn.ops[i]!;
  const bytesOf = new Map(ol.ranks.map((rl) => [rl.rank, rl]));
  const out = new Map<number, ExpectedRange[]>();
  const groups = op.pairs ? [[...new Set(op.pairs.flat())]] : opGroups(scn, i);
  for (const g of groups) {
    const rl = bytesOf.get(g[0]!)!;
    for (const [r, ranges] of expectedRanges({ op: op.op, counts: op.counts, pairs: op.pairs }, g, rl.input.bytes, rl.output.bytes)) out.set(r, ranges);
  }
  return out;
}

/** The reference output of every rank whose output the op defines. */
export function referenceOutputs(scn: Scenario, i: number, ol: OpLayout): Map<number, ValueList> {
  const op = scn.ops[i]!;
  const inputs = new Map(ol.ranks.map((rl) => [rl.rank, inputValues(scn, i, rl.rank, rl.input.bytes)]));
  const out = new Map<number, ValueList>();
  const entry = opEntry(op.op);
  if (entry.reference === "permute") return referencePermute(op.dtype, entry.reduces ? op.reduce : undefined, inputs, op.pairs!);
  const esize = dtypeSize(op.dtype);
  for (const g of opGroups(scn, i)) {
    const ins = g.map((r) => inputs.get(r)!);
    const refs =
      entry.reference === "collective" && isRingOp(op.op)
        ? referenceValues(op.op, op.dtype, op.reduce, ins)
        : entry.reference === "alltoall"
          ? referenceAllToAll(op.dtype, ins)
          : entry.reference === "alltoall-v"
            ? referenceAllToAllV(op.dtype, ins, op.counts!.map((row) => row.map((b) => b / esize)))
            : entry.reference === "all-gather-v"
              ? sharedBy(ins.length, concatValues(op.dtype, ins))
              : undefined;
    if (!refs) throw new InternalError(`no reference collective for ${op.op}`);
    g.forEach((r, k) => out.set(r, refs[k]!));
  }
  return out;
}

/** One reference output that `n` ranks share (one array, not a copy each). */
function sharedBy(n: number, values: Values): Values[] {
  return Array.from({ length: n }, () => values);
}
