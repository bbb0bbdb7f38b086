// ccsim disassembler: npm run disasm -- <scenario.json> [--rank R] [--op K] [--json]
// Decodes a program image with the simulator's own decoders, so it doubles as a check of the emitter.
import { CcsimError } from "../ir/errors.ts";
import { EncPattern, SdmaCceType } from "../ir/enums.ts";
import { dtypeFromSdma } from "../ir/dtypes.ts";
import type { DeviceSpec } from "../ir/spec.ts";
import { compileProgram, type ProgramLayout } from "../enc/compile.ts";
import { decodeAddress, describeAddress } from "../encd/address.ts";
import { decodeSpadCtrlEntry, SPAD_CTRL_ENTRY_BYTES } from "../encd/ccop.ts";
import { decodeBarrierConfig } from "../encd/barrier.ts";
import { decodeChannelConfig, NeighType } from "../encd/channel.ts";
import { decodeSlotEntry, SLOT_ENTRY_BYTES, StepFlag } from "../encd/slot.ts";
import { DESC_BYTES, decodeRx, decodeTx, isCmeDesc } from "../encd/udma.ts";
import type { ProgramImage } from "../encd/program.ts";
import { DEFAULT_DEVICES_DIR, loadDeviceWith, loadScenario, type PresetSet } from "../run/load.ts";
import { flagValue, presetSetFlag, UsageError } from "../command/args.ts";
import { asCommand } from "./entry.ts";

const HELP = `ccsim disassembler: print a program image field by field

usage: npm run disasm -- <scenario.json> [--rank R] [--op K] [--json] [--devices DIR] [--set FIELD=VALUE]

  --op K       the op (index into the scenario's ops) to compile (default 0)
  --rank R     only the TopSPs and DMA queues of rank R (default: every device)
  --json       the same content as data; cc_op_entry keys follow the firmware reflector
               ("ring": {"channel_list"}, "mesh": {"sema_shift_offset", "sema_mask"})
  --devices DIR  directory of device presets
  --set FIELD=VALUE  a field of the scenario's preset changed (repeatable; npm run sim -- --help):
               the program the changed preset composes (--set ring.defaultChannels=4)

Addresses are resolved to rank buffers (input, output, chbuf<c>), the device's constant and pad
words, semaphores (dev:topsp:sem.window) and DMA doorbells.
`;

interface Region {
  readonly start: number;
  readonly end: number;
  readonly name: string;
}

function regions(layout: ProgramLayout, image: ProgramImage): Region[] {
  const out: Region[] = [];
  for (const d of image.devices) {
    const base = d.device * 2 ** 48;
    out.push({ start: base, end: base + 4, name: `dev${d.device}.const1` }, { start: base + 4, end: base + 8, name: `dev${d.device}.pad` });
  }
  for (const op of layout.ops) {
    for (const r of op.ranks) {
      out.push({ start: r.input.addr, end: r.input.addr + r.input.bytes, name: `rank${r.rank}.input` });
      out.push({ start: r.output.addr, end: r.output.addr + r.output.bytes, name: `rank${r.rank}.output` });
      r.chbuf.forEach((c, i) => out.push({ start: c.addr, end: c.addr + c.bytes, name: `rank${r.rank}.chbuf${i}` }));
    }
  }
  return out;
}

function namer(rs: readonly Region[]): (addr: number) => string {
  return (addr) => {
    if (decodeAddress(addr).kind !== "hbm") return describeAddress(addr);
    const r = rs.find((x) => addr >= x.start && addr < x.end);
    return r ? `${r.name}+0x${(addr - r.start).toString(16)}` : describeAddress(addr);
  };
}

const CCE = Object.fromEntries(Object.entries(SdmaCceType).map(([k, v]) => [v, k])) as Record<number, string>;
const NEIGH = Object.fromEntries(Object.entries(NeighType).map(([k, v]) => [v, k])) as Record<number, string>;
const flagNames = (f: number) => (Object.entries(StepFlag).filter(([, b]) => f & b).map(([k]) => k).join("|") || "-");

/**
 * A sequence decoded on demand (descriptor rings, slot steps): the disassembly of a large op never
 * holds every decoded record at once. JSON prints it as an array.
 */
export class Lazy<T> implements Iterable<T> {
  constructor(
    readonly length: number,
    private readonly at: (i: number) => T,
  ) {}
  *[Symbol.iterator](): Iterator<T> {
    for (let i = 0; i < this.length; i++) yield this.at(i);
  }
  some(f: (x: T) => boolean): boolean {
    for (const x of this) if (f(x)) return true;
    return false;
  }
}

export interface DisasmOptions {
  readonly op: number;
  readonly rank: number | undefined;
}

/** The disassembly as data (what --json prints). */
export function disassemble(spec: DeviceSpec, image: ProgramImage, layout: ProgramLayout, opts: DisasmOptions) {
  const name = namer(regions(layout, image));
  // A rank's TopSPs and engines: virtualCoreSize physical cores' worth.
  const vcore = spec.collectives.virtualCoreSize;
  const tsPerRank = (spec.topsp.perDevice / spec.coresPerDevice) * vcore;
  const enginesPerRank = spec.dma.enginesPerCore * vcore;
  const who = opts.rank === undefined ? undefined : layout.ops[0]!.ranks.find((r) => r.rank === opts.rank);
  // The rank's NeuronCore: its position among the ranks of its device.
  const core = who === undefined ? undefined : layout.ops[0]!.ranks.filter((r) => r.device === who.device).map((r) => r.rank).sort((a, b) => a - b).indexOf(who.rank);
  return image.devices
    .filter((d) => who === undefined || d.device === who.device)
    .map((d) => ({
      device: d.device,
      ranks: layout.ops[0]!.ranks.filter((r) => r.device === d.device).map((r) => r.rank),
      topsps: d.topsps
        .filter((t) => core === undefined || Math.floor(t.index / tsPerRank) === core)
        .map((t) => {
          const entries = Array.from({ length: t.opNum }, (_, i) => decodeSpadCtrlEntry(t.ctrlSpad, i * SPAD_CTRL_ENTRY_BYTES));
          const ids = [...new Set(entries.flatMap((e) => (e.algoType === EncPattern.RING ? [...Array(32).keys()].filter((c) => (e.channelList >>> c) & 1) : [])))];
          return {
            index: t.index,
            op_num: t.opNum,
            entries: entries.map((e) => ({
              header: { cc_op: Number(e.ccOp) },
              algo_type: e.algoType,
              algo_sub_type: e.algoSubType,
              trigger_next: Number(e.triggerNext),
              reporter: Number(e.reporter),
              ring_wait_complete: Number(e.ringWaitComplete),
              ring_send_complete: Number(e.ringSendComplete),
              safe_mode: Number(e.safeMode),
              unique_tensors: Number(e.uniqueTensors),
              ring: { channel_list: e.channelList },
              mesh: { sema_shift_offset: e.semaShiftOffset, sema_mask: e.semaMask },
            })),
            // The device barrier after each entry whose execute_device_barrier gate is set.
            barriers: entries.flatMap((_, i) => {
              const b = decodeBarrierConfig(t.barrierConfig, i);
              if (!b.execute) return [];
              return [
                {
                  entry: i,
                  steps: b.steps
                    .map((st, k) => ({ step: k, m2s_val: st.m2sVal, s2m_val: st.s2mVal, waits: st.waits.filter((w) => w.sema !== 0).map((w) => ({ barrier_sema: describeAddress(w.sema), target_sema_val: w.target })) }))
                    .filter((st) => st.m2s_val > 0 || st.s2m_val > 0 || st.waits.length > 0),
                  dma_apb_bcast: { m2s_tail_ptr: describeAddress(b.m2sTail), s2m_tail_ptr: describeAddress(b.s2mTail), mask: `0x${b.mask.toString(16).padStart(8, "0")}` },
                  queue_id: b.queueId,
                },
              ];
            }),
            channels: ids.map((c) => {
              const cfg = decodeChannelConfig(t.ringConfig, c);
              const spad = t.slotSpad[cfg.spadSlotIdx] ?? new Uint8Array(0);
              return {
                channel_id: cfg.channelId,
                next_neigh: { fold_n: cfg.next.foldN, type: NEIGH[cfg.next.type] ?? cfg.next.type },
                prev_neigh: { fold_n: cfg.prev.foldN, type: NEIGH[cfg.prev.type] ?? cfg.prev.type },
                recv_sema: describeAddress(cfg.recvSema),
                send_sema: describeAddress(cfg.sendSema),
                dma_compl_sema: describeAddress(cfg.dmaComplSema),
                dma_apb_bcast: { m2s_tail_ptr: describeAddress(cfg.bcastM2sTail), s2m_tail_ptr: describeAddress(cfg.bcastS2mTail), mask: `0x${cfg.bcastMask.toString(16).padStart(8, "0")}` },
                spad_slot_idx: cfg.spadSlotIdx,
                fold_n: cfg.foldN,
                steps: new Lazy(spad.length / SLOT_ENTRY_BYTES, (i) => {
                  const s = decodeSlotEntry(spad, i * SLOT_ENTRY_BYTES);
                  return { m2s: s.m2s, s2m: s.s2m, repeat: s.repeat, flags: flagNames(s.flags), ...(s.flags & StepFlag.DRAIN_CREDIT ? { drain_target: s.drainTarget } : {}) };
                }),
              };
            }),
          };
        }),
      queues: d.queues
        .filter((q) => core === undefined || Math.floor(q.engine / enginesPerRank) === core)
        .map((q) => ({
          engine: q.engine,
          queue: q.queue,
          tx: new Lazy(q.tx.length / DESC_BYTES, (i) => {
            const t = decodeTx(q.tx, i * DESC_BYTES);
            if (t.kind === "cce") return { kind: "cce", op: CCE[t.op] ?? t.op, dtype: dtypeFromSdma(t.dtype) ?? t.dtype, length: t.length, ring_id: t.ringId, meta_ctrl: `0x${t.metaCtrl.toString(16).padStart(8, "0")}` };
            const flags = [t.first && "FIRST", t.last && "LAST", t.concat && "CONCAT", t.dmb && "DMB"].filter(Boolean).join("|") || "-";
            return { kind: isCmeDesc(t.metaCtrl) ? "copy" : "source", length: t.length, flags, ring_id: t.ringId, meta_ctrl: `0x${t.metaCtrl.toString(16).padStart(8, "0")}`, src: name(t.src) };
          }),
          rx: new Lazy(q.rx.length / DESC_BYTES, (i) => {
            const r = decodeRx(q.rx, i * DESC_BYTES);
            return { length: r.length, ring_id: r.ringId, dst: name(r.dst) };
          }),
        })),
    }));
}

type Disasm = ReturnType<typeof disassemble>;

/** The disassembly as text, line by line (each line without its newline). */
export function* disasmLines(title: string, devices: Disasm): Generator<string> {
  yield title;
  for (const d of devices) {
    yield (`device ${d.device} (ranks ${d.ranks.join(", ")})`);
    for (const t of d.topsps) {
      yield (`  TopSP ${t.index}: op_num ${t.op_num}`);
      for (const [i, e] of t.entries.entries()) {
        const view = e.algo_type === EncPattern.RING ? `channel_list=0x${e.ring.channel_list.toString(16).padStart(8, "0")}` : `sema_shift_offset=${e.mesh.sema_shift_offset} sema_mask=0x${e.mesh.sema_mask.toString(16)}`;
        yield (`    spad_ctrl[${i}]: cc_op=${e.header.cc_op} algo_type=${e.algo_type}${e.algo_type === EncPattern.RING ? " (RING)" : e.algo_type === EncPattern.MESH ? " (MESH)" : ""} algo_sub_type=${e.algo_sub_type} trigger_next=${e.trigger_next} reporter=${e.reporter} ring_wait_complete=${e.ring_wait_complete} ring_send_complete=${e.ring_send_complete} safe_mode=${e.safe_mode} unique_tensors=${e.unique_tensors} ${view}`);
        const b = t.barriers.find((x) => x.entry === i);
        if (!b) continue;
        yield (`      device barrier: queue ${b.queue_id} via ${b.dma_apb_bcast.m2s_tail_ptr} mask=${b.dma_apb_bcast.mask}`);
        for (const st of b.steps) yield (`        step ${st.step}: arrive m2s=${st.m2s_val} s2m=${st.s2m_val}${st.waits.map((w) => `, wait ${w.barrier_sema} >= ${w.target_sema_val}`).join("")}`);
      }
      for (const c of t.channels) {
        yield (`    channel ${c.channel_id}: fold_n=${c.fold_n} spad_slot_idx=${c.spad_slot_idx} next{fold_n=${c.next_neigh.fold_n} type=${c.next_neigh.type}} prev{fold_n=${c.prev_neigh.fold_n} type=${c.prev_neigh.type}}`);
        yield (`      recv_sema=${c.recv_sema} send_sema=${c.send_sema} dma_compl_sema=${c.dma_compl_sema}`);
        yield (`      dma_apb_bcast: m2s_tail_ptr=${c.dma_apb_bcast.m2s_tail_ptr} s2m_tail_ptr=${c.dma_apb_bcast.s2m_tail_ptr} mask=${c.dma_apb_bcast.mask}`);
        let i = 0;
        for (const s of c.steps) yield `      step[${i++}] m2s=${s.m2s} s2m=${s.s2m} repeat=${s.repeat} ${s.flags}${"drain_target" in s ? ` drain_target=${s.drain_target}` : ""}`;
      }
    }
    for (const q of d.queues) {
      yield (`  DMA engine ${q.engine} queue ${q.queue}: ${q.tx.length} TX / ${q.rx.length} RX descriptors`);
      let i = 0;
      for (const t of q.tx) {
        yield t.kind === "cce"
          ? `    tx[${i}] META cce=${t.op} dtype=${t.dtype} len=${t.length} ring=${t.ring_id} meta_ctrl=${t.meta_ctrl}`
          : `    tx[${i}] ${t.kind === "copy" ? "DATA" : "SRC "} len=${t.length} ${t.flags} ring=${t.ring_id} meta_ctrl=${t.meta_ctrl} src=${t.src}`;
        i++;
      }
      i = 0;
      for (const r of q.rx) yield `    rx[${i++}] len=${r.length} ring=${r.ring_id} dst=${r.dst}`;
    }
  }
}

/**
 * JSON.stringify(value, null, 2)'s text, in pieces: arrays and objects member by member, a Lazy
 * sequence as an array, so a large disassembly is never one string.
 */
export function* jsonChunks(value: unknown, indent = ""): Generator<string> {
  if (!hasLazy(value)) {
    // Small and whole: JSON.stringify's own text, indented to its place.
    yield JSON.stringify(value, null, 2).replaceAll("\n", "\n" + indent);
    return;
  }
  const inner = indent + "  ";
  if (value instanceof Lazy || Array.isArray(value)) {
    let first = true;
    for (const x of value as Iterable<unknown>) {
      yield first ? `[\n${inner}` : `,\n${inner}`;
      first = false;
      yield* jsonChunks(x, inner);
    }
    yield first ? "[]" : `\n${indent}]`;
    return;
  }
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined);
    if (entries.length === 0) {
      yield "{}";
      return;
    }
    let first = true;
    for (const [k, v] of entries) {
      yield `${first ? "{" : ","}\n${inner}${JSON.stringify(k)}: `;
      first = false;
      yield* jsonChunks(v, inner);
    }
    yield `\n${indent}}`;
    return;
  }
  yield JSON.stringify(value);
}

function hasLazy(v: unknown): boolean {
  if (v instanceof Lazy) return true;
  if (v === null || typeof v !== "object") return false;
  return (Array.isArray(v) ? v : Object.values(v)).some(hasLazy);
}

function* withNewlines(lines: Iterable<string>): Generator<string> {
  for (const l of lines) yield l + "\n";
}

export function main(argv: readonly string[], out: (s: string) => void, err: (s: string) => void): number {
  let file: string | undefined;
  let op = 0;
  let rank: number | undefined;
  let json = false;
  let devices = DEFAULT_DEVICES_DIR;
  const sets: PresetSet[] = [];
  try {
    for (let i = 0; i < argv.length; i++) {
      const t = argv[i]!;
      const num = (): number => {
        const v = argv[++i];
        if (v === undefined || !/^\d+$/.test(v)) throw new UsageError(`${t} needs a non-negative integer`);
        return Number(v);
      };
      if (t === "-h" || t === "--help") {
        out(HELP);
        return 0;
      } else if (t === "--op") op = num();
      else if (t === "--rank") rank = num();
      else if (t === "--json") json = true;
      else if (t === "--devices") devices = argv[++i] ?? "";
      else if (t === "--set") sets.push(presetSetFlag(flagValue(argv, i++, t), t));
      else if (t.startsWith("-")) throw new UsageError(`unknown option ${t}`);
      else if (file !== undefined) throw new UsageError(`one scenario file at a time (got ${file} and ${t})`);
      else file = t;
    }
    if (file === undefined) throw new UsageError("no scenario file given");
    const scn = { ...loadScenario(file), check: "none" as const };
    if (op >= scn.ops.length) throw new UsageError(`--op ${op}: ${file} has ${scn.ops.length} ops`);
    if (rank !== undefined && rank >= scn.ranks) throw new UsageError(`--rank ${rank}: ${file} has ${scn.ranks} ranks`);
    const spec = loadDeviceWith(scn.instance, devices, sets, file);
    const { image, layout } = compileProgram(scn, spec, [op]);
    const data = disassemble(spec, image, layout, { op, rank });
    const o = scn.ops[op]!;
    const title = `${scn.name} op ${op}: ${o.op} ${o.bytes} B ${o.dtype} on ${spec.name}${rank === undefined ? "" : `, rank ${rank}`}`;
    // Written as it is decoded, in pieces of about 1 MB.
    const pieces = json ? jsonChunks({ scenario: scn.name, op, ...(rank === undefined ? {} : { rank }), devices: data }) : withNewlines(disasmLines(title, data));
    let buf = "";
    for (const p of pieces) {
      buf += p;
      if (buf.length >= 1 << 20) {
        out(buf);
        buf = "";
      }
    }
    out(buf + (json ? "\n" : ""));
    return 0;
  } catch (e) {
    if (e instanceof UsageError) {
      err(`ccsim disasm: ${e.message}\n(try --help)\n`);
      return 1;
    }
    if (e instanceof CcsimError) {
      err(`ccsim disasm: ${e.file === undefined ? `${file}: ` : ""}${e.render()}\n`);
      return 1;
    }
    err(`ccsim disasm: internal error: ${(e as Error).stack ?? String(e)}\n`);
    return 2;
  }
}

// (The listing is all it does: a reader that goes away ends it.)
asCommand(import.meta.url, main, { outputOnly: true });
