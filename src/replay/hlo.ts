// XLA HLO text (what `--xla_dump_hlo_as_text` writes), read as far as replaying its collectives
// needs: computations and their instructions, each instruction's result shape and operands, the
// collectives' attributes (groups, pairs, reduction, channel), and the calls between computations
// (while bodies with their known trip counts, calls, conditionals, async wrappers). Every other
// instruction is kept only for its name and shape (an operand's shape, when the operand is printed
// by name alone) and never causes an error.
import { MAX_RANKS } from "../scenario/scenario.ts";

/** A malformed module: file, line and the text at fault. */
export class HloError extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
    message: string,
    readonly text?: string,
  ) {
    super(message);
    this.name = "HloError";
  }
  render(): string {
    const t = this.text === undefined ? "" : `: ${this.text.length > 160 ? this.text.slice(0, 157) + "..." : this.text}`;
    return `${this.file}:${this.line}: ${this.message}${t}`;
  }
}

/** One array of a shape: its element type and element count. */
export interface ArrayShape {
  readonly type: string;
  readonly elements: number;
  /** As printed, without its layout: bf16[4096,1024]. */
  readonly text: string;
}

/** The collectives replay knows, by their HLO opcode (async -start forms map to the same op). */
export const HLO_COLLECTIVES = {
  "all-reduce": "all-reduce",
  "all-reduce-start": "all-reduce",
  "all-gather": "all-gather",
  "all-gather-start": "all-gather",
  "reduce-scatter": "reduce-scatter",
  "all-to-all": "all-to-all",
  "collective-permute": "collective-permute",
  "collective-permute-start": "collective-permute",
  send: "send",
} as const;
export type HloCollectiveOp = (typeof HLO_COLLECTIVES)[keyof typeof HLO_COLLECTIVES];

/**
 * Communication replay does not run, and why: each one a step reaches is named in a warning, so a
 * total without it is not taken for the step's. (A `send` runs, with its `recv` as its other end;
 * `pointToPoint` says when one cannot.)
 */
const NOT_REPLAYED: ReadonlyMap<string, string> = new Map([
  ["ragged-all-to-all", "moves data between ranks in sizes its operands give when it runs (no size on record)"],
  ["collective-broadcast", "moves data between ranks, and the runtime has no broadcast (a posted one fails: not supported operation (op_type 2))"],
]);

/** The frontend attribute a point-to-point send / recv states its pairs in (XLA's pipelining writes it). */
const SEND_RECV_PAIRS = "_xla_send_recv_source_target_pairs";

/** How a collective's ids read (XLA's collective-op group modes). */
export type GroupMode = "cross-replica" | "cross-partition" | "flattened";

export type HloReduce = "sum" | "max" | "min" | "product" | "and" | "or" | "xor";

export interface HloCollective {
  readonly name: string;
  readonly line: number;
  readonly opcode: string;
  readonly op: HloCollectiveOp;
  readonly computation: string;
  /** The arrays it moves: its operands (for collective-permute and send, the first; an in-place permute's, its slice_sizes slice of it). */
  readonly operands: readonly ArrayShape[];
  /** Its replica groups as printed (ids in `mode`), or undefined for `{}` / none: every id. */
  readonly groups?: readonly (readonly number[])[];
  readonly pairs?: readonly (readonly [number, number])[];
  readonly reduce?: HloReduce;
  readonly mode: GroupMode;
}

export interface HloModule {
  readonly file: string;
  readonly name: string;
  readonly replicaCount?: number;
  readonly numPartitions?: number;
  /** Every collective reached from the entry computation, with how many times one step runs it. */
  readonly collectives: readonly { readonly c: HloCollective; readonly count: number; readonly unknownTrip: boolean }[];
  readonly warnings: readonly string[];
}

interface Instr {
  readonly name: string;
  readonly line: number;
  readonly text: string;
  readonly opcode: string;
  readonly shape: readonly ArrayShape[];
  readonly operands: readonly string[];
  readonly attrs: ReadonlyMap<string, string>;
}

interface Computation {
  readonly name: string;
  readonly line: number;
  readonly entry: boolean;
  readonly instrs: Instr[];
  readonly byName: Map<string, Instr>;
  closed: boolean;
}

/** Parse an HLO text module and count its collectives per step. */
export function parseHlo(file: string, text: string): HloModule {
  if (text.includes("\u0000")) throw new HloError(file, 1, "not HLO text (binary data; a serialized HloProto is not read, dump with --xla_dump_hlo_as_text)");
  const lines = text.split(/\r?\n/);
  const header = lines.findIndex((l) => /^\s*HloModule\s/.test(l));
  if (header < 0) throw new HloError(file, 1, "not HLO text: no 'HloModule' line (dump with XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text)", lines[0]);
  const headerLine = lines[header]!;
  const moduleName = /^\s*HloModule\s+([^\s,]+)/.exec(headerLine)?.[1] ?? "";
  const replicaCount = numberAttr(headerLine, "replica_count");
  const numPartitions = numberAttr(headerLine, "num_partitions");
  const comps = new Map<string, Computation>();
  let cur: Computation | undefined;
  for (let k = header + 1; k < lines.length; k++) {
    const raw = lines[k]!;
    const line = raw.trim();
    const at = k + 1;
    if (isBlank(line)) continue;
    if (cur === undefined) {
      if (line.endsWith("{")) {
        const m = /^(ENTRY\s+)?%?([^\s(]+)/.exec(line);
        if (!m) throw new HloError(file, at, "a computation's header without a name", line);
        cur = { name: m[2]!, line: at, entry: m[1] !== undefined, instrs: [], byName: new Map(), closed: false };
        if (comps.has(cur.name)) throw new HloError(file, at, `computation ${cur.name} is defined twice`, line);
        comps.set(cur.name, cur);
      }
      continue; // anything else between computations (attributes, comments) is not ours to judge
    }
    if (line === "}") {
      cur.closed = true;
      cur = undefined;
      continue;
    }
    // An instruction may go on over the lines below it (hand-written and test modules break long
    // ones: an open operand list, a trailing comma before the attributes, the opcode under the
    // result shape); XLA's printer writes one a line. The line that starts another instruction,
    // or closes the computation, is never taken in.
    let whole = line;
    const open = new Nesting();
    open.scan(line);
    for (;;) {
      let n = k + 1;
      while (n < lines.length && isBlank(lines[n]!.trim())) n++;
      if (n >= lines.length) break;
      const next = lines[n]!.trim();
      // (A "}" alone closes the computation, unless a brace of the instruction is open: an attribute
      // written over several lines, `frontend_attributes={` ... `}`, as XLA's own tests write them.)
      if ((next === "}" && !open.braceOpen) || startsInstr(next) || !continues(whole, open, next)) break;
      whole = `${whole} ${next}`;
      open.scan(next);
      k = n;
    }
    const instr = parseInstr(file, at, withoutComments(whole));
    if (instr) {
      cur.instrs.push(instr);
      cur.byName.set(instr.name, instr);
    }
  }
  if (cur !== undefined) throw new HloError(file, lines.length, `truncated: computation ${cur.name} (line ${cur.line}) has no closing '}'`);
  const entries = [...comps.values()].filter((c) => c.entry);
  if (entries.length === 0) throw new HloError(file, header + 1, "no ENTRY computation");
  if (entries.length > 1) throw new HloError(file, entries[1]!.line, "more than one ENTRY computation");

  const warnings: string[] = [];
  const { count, unknown } = callCounts(file, comps, entries[0]!, warnings);
  const collectives: { c: HloCollective; count: number; unknownTrip: boolean }[] = [];
  const sendChannels = new Set<string>();
  for (const comp of comps.values()) for (const ins of comp.instrs) if (ins.opcode === "send" && !hostTransfer(ins)) sendChannels.add(ins.attrs.get("channel_id") ?? "");
  for (const comp of comps.values()) {
    const n = count.get(comp.name) ?? 0;
    for (const ins of comp.instrs) {
      const times = n > 1 ? ` (${n} a step)` : "";
      const why = NOT_REPLAYED.get(ins.opcode);
      if (n > 0 && why !== undefined) warnings.push(`${file}:${ins.line}: ${ins.opcode} ${ins.name}${times}: ${why}: replay does not run it (the total leaves it out)`);
      if (ins.opcode === "send" || ins.opcode === "recv") {
        const p2p = pointToPoint(ins, sendChannels);
        if (n > 0 && p2p.leftOut !== undefined) warnings.push(`${file}:${ins.line}: ${ins.opcode} ${ins.name}${times}: ${p2p.leftOut} (the total leaves it out)`);
        if (!p2p.runs) continue;
      }
      if (!(ins.opcode in HLO_COLLECTIVES)) continue;
      // Every collective is read (a malformed one is an error wherever it is); one no step reaches is not counted.
      const c = collectiveOf(file, comp, ins, comps);
      if (n > 0) collectives.push({ c, count: n, unknownTrip: unknown.has(comp.name) });
    }
  }
  collectives.sort((a, b) => a.c.line - b.c.line);
  return { file, name: moduleName, ...(replicaCount !== undefined ? { replicaCount } : {}), ...(numPartitions !== undefined ? { numPartitions } : {}), collectives, warnings };
}

/** A send or recv to or from the host (`is_host_transfer=true`): not between ranks. */
function hostTransfer(ins: Instr): boolean {
  return ins.attrs.get("is_host_transfer") === "true";
}

/**
 * Whether a send or recv runs, and why not where a step's total would miss it. A send with its
 * pairs runs; its recv (the same channel_id) is the other end of the same transfer, not counted
 * again. A host transfer moves nothing between ranks; a send without its pairs names no rank; a
 * recv whose send is not in the module has no transfer to be counted with.
 */
function pointToPoint(ins: Instr, sendChannels: ReadonlySet<string>): { runs: boolean; leftOut?: string } {
  if (hostTransfer(ins)) return { runs: false, leftOut: `a transfer ${ins.opcode === "send" ? "to" : "from"} the host (is_host_transfer=true), not between ranks: replay does not run it` };
  const channel = ins.attrs.get("channel_id");
  if (ins.opcode === "recv") return sendChannels.has(channel ?? "") ? { runs: false } : { runs: false, leftOut: `no send of its channel_id (${channel ?? "none"}) in the module, whose transfer it is: replay does not run it` };
  if (frontendAttribute(ins, SEND_RECV_PAIRS) === undefined) return { runs: false, leftOut: `no ${SEND_RECV_PAIRS} in its frontend_attributes, so the ranks it joins are not known: replay does not run it` };
  return { runs: true };
}

/** A frontend attribute's value (`frontend_attributes={k="v",k2={{0,1}}}`), unquoted. */
function frontendAttribute(ins: Instr, key: string): string | undefined {
  const all = ins.attrs.get("frontend_attributes");
  if (all === undefined || !all.startsWith("{") || !all.endsWith("}")) return undefined;
  for (const a of splitTop(all.slice(1, -1))) {
    const eq = a.indexOf("=");
    if (eq <= 0 || a.slice(0, eq).trim() !== key) continue;
    const v = a.slice(eq + 1).trim();
    return v.length >= 2 && v.startsWith('"') && v.endsWith('"') ? v.slice(1, -1) : v;
  }
  return undefined;
}

function isBlank(line: string): boolean {
  return line === "" || line.startsWith("//");
}

/** `[ROOT] [%]name = ` then a shape: the first line of an instruction. */
const INSTR_HEAD = /^(?:ROOT\s+)?%?[^\s=(){}[\],"]+\s*=\s*/;

function startsInstr(line: string): boolean {
  const m = INSTR_HEAD.exec(line);
  return m !== null && readShape(line, m[0].length) !== undefined;
}

/** Brackets and a string left open by the lines scanned so far (an instruction's, line by line: a line is read once). */
class Nesting {
  /** The brackets open, innermost last. */
  private readonly stack: string[] = [];
  private inString = false;
  scan(line: string): void {
    for (let k = 0; k < line.length; k++) {
      const ch = line[k]!;
      if (this.inString) {
        if (ch === "\\") k++;
        else if (ch === '"') this.inString = false;
      } else if (ch === '"') this.inString = true;
      else if (ch in OPEN) this.stack.push(ch);
      else if (ch === ")" || ch === "]" || ch === "}") this.stack.pop();
    }
  }
  /** The innermost bracket open is a "{" (outside a string). */
  get braceOpen(): boolean {
    return !this.inString && this.stack[this.stack.length - 1] === "{";
  }
  /** Something opened is not closed yet. */
  get open(): boolean {
    return this.inString || this.stack.length > 0;
  }
}

/** Whether `next` goes on with the instruction so far: a bracket or string left open, a comma between them, or the opcode the result shape waits for. */
function continues(so: string, nesting: Nesting, next: string): boolean {
  if (nesting.open || so.endsWith(",") || next.startsWith(",")) return true;
  const m = INSTR_HEAD.exec(so);
  const shape = m && readShape(so, m[0].length);
  return shape !== undefined && shape !== null && skipSpace(so, shape.end) === so.length && /^[a-z][a-z0-9-]*\(/.test(next);
}

/** The text without its `/* ... *\/` comments (XLA numbers long tuples and operand lists with them: `/*index=5*\/`), strings kept whole. */
function withoutComments(s: string): string {
  if (!s.includes("/*")) return s;
  let out = "";
  for (let k = 0; k < s.length; k++) {
    const ch = s[k]!;
    if (ch === '"') {
      const e = endOfString(s, k);
      if (e < 0) return out + s.slice(k);
      out += s.slice(k, e + 1);
      k = e;
    } else if (ch === "/" && s[k + 1] === "*") {
      const e = s.indexOf("*/", k + 2);
      if (e < 0) return out + s.slice(k);
      k = e + 1;
    } else out += ch;
  }
  return out;
}

function numberAttr(text: string, key: string): number | undefined {
  const m = new RegExp(`\\b${key}=(\\d+)`).exec(text);
  return m ? Number(m[1]) : undefined;
}

const COLLECTIVE_CALL = new RegExp(`(^|[\\s)}\\]])(${Object.keys(HLO_COLLECTIVES).join("|")})\\(`);

/** An instruction line, `[ROOT] name = shape opcode(operands), attr=value, ...`; undefined for a line that is not one. */
function parseInstr(file: string, line: number, text: string): Instr | undefined {
  const m = /^(?:ROOT\s+)?%?([^\s=]+)\s*=\s*/.exec(text);
  if (!m) return undefined;
  let i = m[0].length;
  const shape = readShape(text, i);
  if (!shape) {
    // Not an instruction we can read: fine, unless it is a collective.
    const op = COLLECTIVE_CALL.exec(text.slice(i));
    if (op) throw new HloError(file, line, `${op[2]} ${m[1]}: unknown shape syntax in its result`, text);
    return undefined;
  }
  i = skipSpace(text, shape.end);
  const op = /^[a-z][a-z0-9-]*/.exec(text.slice(i));
  if (!op) return undefined;
  const opcode = op[0];
  i += opcode.length;
  const isCollective = opcode in HLO_COLLECTIVES;
  if (text[i] !== "(") {
    if (isCollective) throw new HloError(file, line, `${opcode} without its operand list`, text);
    return undefined;
  }
  const close = matching(text, i);
  if (close < 0) {
    if (isCollective) throw new HloError(file, line, `truncated instruction: ${opcode}'s operand list is not closed`, text);
    return undefined;
  }
  const operands = splitTop(text.slice(i + 1, close)).filter((s) => s !== "");
  const attrs = new Map<string, string>();
  const rest = text.slice(close + 1).trim();
  if (rest !== "") {
    if (!rest.startsWith(",")) {
      if (isCollective) throw new HloError(file, line, `unexpected text after ${opcode}'s operands`, text);
      return undefined;
    }
    if (!balanced(rest)) {
      if (isCollective) throw new HloError(file, line, `truncated instruction: an attribute of ${opcode} is not closed`, text);
      return undefined;
    }
    for (const a of splitTop(rest.slice(1))) {
      const eq = a.indexOf("=");
      if (eq > 0) attrs.set(a.slice(0, eq).trim(), a.slice(eq + 1).trim());
    }
  }
  return { name: m[1]!, line, text, opcode, shape: shape.arrays, operands, attrs };
}

function skipSpace(s: string, i: number): number {
  while (i < s.length && (s[i] === " " || s[i] === "\t")) i++;
  return i;
}

/** Tuples in tuples, at most (XLA's nest two or three deep). */
const MAX_TUPLE_DEPTH = 64;

/** A shape at `i`: an array `type[dims]{layout}` or a tuple `(shape, ...)`; undefined when there is none. */
function readShape(s: string, i: number, depth = 0): { arrays: ArrayShape[]; end: number } | undefined {
  i = skipSpace(s, i);
  if (s[i] === "(") {
    // (Tuples nest a few deep; one nested deeper than any module holds is not a shape read here.)
    if (depth >= MAX_TUPLE_DEPTH) return undefined;
    const arrays: ArrayShape[] = [];
    i++;
    for (;;) {
      i = skipSpace(s, i);
      if (s[i] === ")") return { arrays, end: i + 1 };
      const part = readShape(s, i, depth + 1);
      if (!part) return undefined;
      for (const a of part.arrays) arrays.push(a);
      i = skipSpace(s, part.end);
      if (s[i] === ",") i++;
      else if (s[i] !== ")") return undefined;
    }
  }
  const m = /^([a-z][a-z0-9]*)\[([^\]]*)\]/.exec(s.slice(i));
  if (!m) return undefined;
  let elements = 1;
  for (const d of m[2]!.split(",").map((x) => x.trim()).filter((x) => x !== "")) {
    const v = /^(?:<=)?(\d+)$/.exec(d);
    if (!v) return undefined;
    elements *= Number(v[1]);
  }
  let end = i + m[0].length;
  if (s[end] === "{") {
    const close = matching(s, end);
    if (close < 0) return undefined;
    end = close + 1;
  }
  return { arrays: [{ type: m[1]!, elements, text: m[0].replace(/\s+/g, "") }], end };
}

const OPEN: Readonly<Record<string, string>> = { "(": ")", "[": "]", "{": "}" };

/** The index of the bracket closing the one at `i` (quotes respected), or -1. */
function matching(s: string, i: number): number {
  const stack: string[] = [];
  for (let k = i; k < s.length; k++) {
    const ch = s[k]!;
    if (ch === '"') {
      k = endOfString(s, k);
      if (k < 0) return -1;
    } else if (ch in OPEN) stack.push(OPEN[ch]!);
    else if (ch === ")" || ch === "]" || ch === "}") {
      if (stack.pop() !== ch) return -1;
      if (stack.length === 0) return k;
    }
  }
  return -1;
}

function endOfString(s: string, i: number): number {
  for (let k = i + 1; k < s.length; k++) {
    if (s[k] === "\\") k++;
    else if (s[k] === '"') return k;
  }
  return -1;
}

function balanced(s: string): boolean {
  let depth = 0;
  for (let k = 0; k < s.length; k++) {
    const ch = s[k]!;
    if (ch === '"') {
      k = endOfString(s, k);
      if (k < 0) return false;
    } else if (ch in OPEN) depth++;
    else if (ch === ")" || ch === "]" || ch === "}") depth--;
    if (depth < 0) return false;
  }
  return depth === 0;
}

/** Split at commas outside brackets and strings. */
function splitTop(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let from = 0;
  for (let k = 0; k < s.length; k++) {
    const ch = s[k]!;
    if (ch === '"') k = Math.max(k, endOfString(s, k));
    else if (ch in OPEN) depth++;
    else if (ch === ")" || ch === "]" || ch === "}") depth--;
    else if (ch === "," && depth === 0) {
      out.push(s.slice(from, k).trim());
      from = k + 1;
    }
  }
  out.push(s.slice(from).trim());
  return out;
}

/** A collective instruction read in full: its operands' shapes, groups, pairs, reduction, mode. */
function collectiveOf(file: string, comp: Computation, ins: Instr, comps: ReadonlyMap<string, Computation>): HloCollective {
  const op = HLO_COLLECTIVES[ins.opcode as keyof typeof HLO_COLLECTIVES];
  const fail = (msg: string): never => {
    throw new HloError(file, ins.line, `${ins.opcode} ${ins.name}: ${msg}`, ins.text);
  };
  // (A permute's other operands are its output and offsets, in place; a send's, its token.)
  const moved = op === "collective-permute" || op === "send" ? ins.operands.slice(0, 1) : ins.operands;
  if (moved.length === 0) fail("no operand");
  const operands: ArrayShape[] = [];
  for (const o of moved) {
    const shape = readShape(o, 0);
    if (shape) {
      for (const a of shape.arrays) operands.push(a);
      continue;
    }
    if (/\s/.test(o) || /^[a-z][a-z0-9]*\[/.test(o) || o.startsWith("(")) fail(`unknown shape syntax in operand '${o}'`);
    const ref = comp.byName.get(o.replace(/^%/, ""));
    if (!ref) fail(`operand '${o}' is not an instruction of computation ${comp.name}`);
    for (const a of ref!.shape) operands.push(a);
  }
  // XLA's in-place form, collective-permute(input, output, input_offsets, output_offsets) with
  // slice_sizes: each pair moves a slice of the input, not the whole of it (the largest slice, where
  // they differ: a permute's pairs move at once).
  const slices = op === "collective-permute" && ins.operands.length === 4 ? ins.attrs.get("slice_sizes") : undefined;
  if (slices !== undefined) {
    const lists = parseIdLists(slices, fail);
    const a = operands[0];
    if (lists.length === 0 || operands.length !== 1 || a === undefined) fail(`slice_sizes ${slices}: one slice of one array was expected`);
    const sizes = lists.map((l) => l.reduce((x, y) => x * y, 1));
    const k = sizes.indexOf(Math.max(...sizes));
    if (sizes[k]! > a!.elements) fail(`slice_sizes ${slices}: a slice of ${sizes[k]} elements is larger than its input ${a!.text}`);
    operands[0] = { type: a!.type, elements: sizes[k]!, text: `${a!.type}[${lists[k]!.join(",")}]` };
  }
  const groupsText = ins.attrs.get("replica_groups");
  const groups = groupsText === undefined ? undefined : parseGroups(groupsText, fail);
  const pairsText = op === "send" ? frontendAttribute(ins, SEND_RECV_PAIRS) : ins.attrs.get("source_target_pairs");
  let pairs: [number, number][] | undefined;
  if (op === "collective-permute" || op === "send") {
    if (pairsText === undefined) fail("no source_target_pairs");
    const lists = parseIdLists(pairsText!, fail);
    if (lists.some((p) => p.length !== 2)) fail(`a source_target_pair is not two ids: ${pairsText}`);
    pairs = lists.map((p) => [p[0]!, p[1]!]);
  }
  let reduce: HloReduce | undefined;
  if (op === "all-reduce" || op === "reduce-scatter") {
    const apply = ins.attrs.get("to_apply");
    if (apply === undefined) fail("no to_apply reduction");
    reduce = reductionOf(apply!.replace(/^%/, ""), comps, fail);
  }
  const channel = ins.attrs.has("channel_id");
  const global = ins.attrs.get("use_global_device_ids") === "true";
  const mode: GroupMode = global ? "flattened" : channel ? "cross-partition" : "cross-replica";
  return {
    name: ins.name,
    line: ins.line,
    opcode: ins.opcode,
    op,
    computation: comp.name,
    operands,
    ...(groups && groups.length > 0 ? { groups } : {}),
    ...(pairs ? { pairs } : {}),
    ...(reduce ? { reduce } : {}),
    mode,
  };
}

/** `{{0,1},{2,3}}`, `{}`, or the iota form `[G,S]<=[d0,d1,...]` with an optional `T(perm)`. */
export function parseGroups(text: string, fail: (msg: string) => never): number[][] {
  const t = text.trim();
  if (t.startsWith("{")) return parseIdLists(t, fail);
  const m = /^\[(\d+),(\d+)\]<=\[([\d,\s]+)\](?:T\(([\d,\s]+)\))?$/.exec(t.replace(/\s+/g, ""));
  if (!m) fail(`unknown replica_groups syntax '${text}'`);
  const g = Number(m![1]);
  const size = Number(m![2]);
  const dims = m![3]!.split(",").map(Number);
  const total = dims.reduce((a, b) => a * b, 1);
  // (Before any id is made: the dimensions may be anything.)
  if (!(total <= MAX_RANKS)) fail(`replica_groups ${text}: ${total} ids; ccsim runs at most ${MAX_RANKS} ranks`);
  if (g * size !== total) fail(`replica_groups ${text}: [${g},${size}] does not hold the ${total} ids of [${dims.join(",")}]`);
  const perm = m![4] !== undefined ? m![4].split(",").map(Number) : dims.map((_, k) => k);
  if (perm.length !== dims.length || [...perm].sort((a, b) => a - b).some((p, k) => p !== k)) fail(`replica_groups ${text}: T(${perm.join(",")}) is not a permutation of ${dims.length} dimensions`);
  // iota over `dims`, transposed by `perm`, read in row-major order, then cut into groups.
  const strides = dims.map((_, k) => dims.slice(k + 1).reduce((a, b) => a * b, 1));
  const tdims = perm.map((p) => dims[p]!);
  const ids: number[] = [];
  const idx = new Array<number>(tdims.length).fill(0);
  for (let n = 0; n < total; n++) {
    ids.push(idx.reduce((acc, v, k) => acc + v * strides[perm[k]!]!, 0));
    for (let k = tdims.length - 1; k >= 0; k--) {
      if (++idx[k]! < tdims[k]!) break;
      idx[k] = 0;
    }
  }
  return Array.from({ length: g }, (_, k) => ids.slice(k * size, (k + 1) * size));
}

/** `{{a,b,...},{...}}` or `{}`: lists of non-negative ids. */
function parseIdLists(text: string, fail: (msg: string) => never): number[][] {
  const t = text.replace(/\s+/g, "");
  if (t === "{}") return [];
  if (!/^\{\{[\d,]*\}(,\{[\d,]*\})*\}$/.test(t)) fail(`unknown id list syntax '${text}'`);
  return [...t.slice(1, -1).matchAll(/\{([\d,]*)\}/g)].map((g) => (g[1] === "" ? [] : g[1]!.split(",").map(Number)));
}

const REDUCTIONS: Readonly<Record<string, HloReduce>> = { add: "sum", maximum: "max", minimum: "min", multiply: "product", and: "and", or: "or", xor: "xor" };

/** The reduction a to_apply computation performs: its root's opcode. */
function reductionOf(name: string, comps: ReadonlyMap<string, Computation>, fail: (msg: string) => never): HloReduce {
  const c = comps.get(name);
  if (!c) return fail(`to_apply=${name}: no such computation`);
  const root = c.instrs.find((i) => /^ROOT\s/.test(i.text)) ?? c.instrs[c.instrs.length - 1];
  const r = root ? REDUCTIONS[root.opcode] : undefined;
  if (!r) return fail(`to_apply=${name} computes ${root ? `'${root.opcode}'` : "nothing"}: a collective's reduction must be add, maximum, minimum, multiply, and, or or xor`);
  return r;
}

/** Attributes naming computations an instruction runs, and how many times per run of it. */
function calledBy(ins: Instr): { name: string; times: number | undefined }[] {
  const out: { name: string; times: number | undefined }[] = [];
  const one = (v: string | undefined, times: number | undefined) => {
    if (v !== undefined) out.push({ name: v.replace(/^%/, ""), times });
  };
  if (ins.opcode === "while") {
    const trip = tripCount(ins.attrs.get("backend_config"));
    one(ins.attrs.get("body"), trip);
    one(ins.attrs.get("condition"), trip === undefined ? undefined : trip + 1);
    return out;
  }
  // async-update / async-done name the same wrapped computation as their async-start: counted once.
  if (ins.opcode !== "async-update" && ins.opcode !== "async-done") one(ins.attrs.get("calls"), 1);
  if (ins.opcode === "call") one(ins.attrs.get("to_apply"), 1);
  one(ins.attrs.get("true_computation"), 1);
  one(ins.attrs.get("false_computation"), 1);
  const branches = ins.attrs.get("branch_computations");
  if (branches !== undefined) for (const b of branches.replace(/[{}\s]/g, "").split(",").filter((x) => x)) one(b, 1);
  return out;
}

/** A while loop's trip count from its backend config (`"known_trip_count":{"n":"5"}`), if known. */
function tripCount(config: string | undefined): number | undefined {
  if (config === undefined) return undefined;
  const m = /known_trip_count\\?"?\s*:\s*\{\s*\\?"?n\\?"?\s*:\s*\\?"?(\d+)/.exec(config);
  return m ? Number(m[1]) : undefined;
}

/**
 * How many times one run of the entry computation runs each computation (a while body once per
 * trip, or once with a warning when the trip count is unknown), and which are under such a loop.
 */
function callCounts(file: string, comps: ReadonlyMap<string, Computation>, entry: Computation, warnings: string[]): { count: Map<string, number>; unknown: Set<string> } {
  const callers = new Map<string, { from: string; times: number | undefined; line: number; opcode: string }[]>();
  for (const c of comps.values()) {
    for (const ins of c.instrs) {
      for (const e of calledBy(ins)) {
        if (!comps.has(e.name)) continue;
        const list = callers.get(e.name) ?? [];
        list.push({ from: c.name, times: e.times, line: ins.line, opcode: ins.opcode });
        callers.set(e.name, list);
      }
    }
  }
  const count = new Map<string, number>([[entry.name, 1]]);
  const unknown = new Set<string>();
  /** Computations a conditional's branch runs (itself or a caller of it): one branch runs, every branch is counted. */
  const branched = new Set<string>();
  const visiting = new Set<string>();
  // A computation's count is the sum over its callers of theirs times the calls: callers first, on
  // a stack of our own (a chain of calls thousands deep is no reason to run out of the process's).
  const countOf = (start: string): void => {
    if (count.has(start)) return;
    const stack = [{ name: start, next: 0, n: 0 }];
    visiting.add(start);
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      const list = callers.get(top.name) ?? [];
      if (top.next === list.length) {
        visiting.delete(top.name);
        count.set(top.name, top.n);
        stack.pop();
        continue;
      }
      const e = list[top.next]!;
      const m = count.get(e.from);
      if (m === undefined) {
        if (visiting.has(e.from)) throw new HloError(file, comps.get(e.from)!.line, `computation ${e.from} calls itself`);
        visiting.add(e.from);
        stack.push({ name: e.from, next: 0, n: 0 });
        continue;
      }
      top.next++;
      if (m === 0) continue;
      if (e.times === undefined) unknown.add(top.name);
      if (unknown.has(e.from)) unknown.add(top.name);
      if (e.opcode === "conditional" || branched.has(e.from)) branched.add(top.name);
      top.n += m * (e.times ?? 1);
    }
  };
  for (const c of comps.values()) countOf(c.name);
  for (const c of comps.values()) {
    if (!unknown.has(c.name) || !c.instrs.some((i) => i.opcode in HLO_COLLECTIVES)) continue;
    const loop = (callers.get(c.name) ?? []).find((e) => e.opcode === "while" && e.times === undefined);
    warnings.push(`${file}:${loop?.line ?? c.line}: ${c.name} runs in a while loop of unknown trip count: its collectives are counted once per step`);
  }
  for (const c of comps.values()) {
    if (!branched.has(c.name) || (count.get(c.name) ?? 0) === 0 || !c.instrs.some((i) => i.opcode in HLO_COLLECTIVES)) continue;
    const cond = (callers.get(c.name) ?? []).find((e) => e.opcode === "conditional");
    warnings.push(`${file}:${cond?.line ?? c.line}: ${c.name} runs in a branch of a conditional: its collectives are counted as if every branch ran (one does)`);
  }
  return { count, unknown };
}
