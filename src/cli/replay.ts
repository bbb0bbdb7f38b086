// npm run replay -- MODULE.txt: an XLA HLO text module's collectives replayed on one or more presets.
import { MAX_RANKS } from "../scenario/scenario.ts";
import { resolve } from "node:path";
import { CcsimError } from "../ir/errors.ts";
import { DEFAULT_DEVICES_DIR, differsFromShipped, loadAccuracy, loadDeviceWith, resolveInstance, setsText, type PresetSet } from "../run/load.ts";
import type { DeviceSpec } from "../ir/spec.ts";
import { accuracyNote } from "../report/table.ts";
import { defaultJobs } from "../run/parallel.ts";
import { HloError, parseHlo } from "../replay/hlo.ts";
import { planReplay, ReplayRunError, runReplay, type ReplayCell, type ReplayPlan } from "../replay/replay.ts";
import { flagValue, intFlag, packetsFromEnv, packetSizes, presetSetFlag, UsageError } from "../command/args.ts";
import { EXIT } from "./sim.ts";
import { checkOnce } from "../command/nccom.ts";
import { asCommand } from "./entry.ts";
import { readTextFile } from "../scenario/text-file.ts";

const HELP = `ccsim replay: the collectives of an XLA HLO module, replayed on device presets

usage: npm run replay -- MODULE.txt [--instance NAME[,NAME...]] [--ranks N] [--nodes N] [--json] [--top K] [--cc-dma-packet N] [--set FIELD=VALUE]

MODULE.txt is an HLO text module as frameworks dump it (XLA_FLAGS="--xla_dump_to=DIR
--xla_dump_hlo_as_text"; torch-xla's SyncTensorsGraph.N, JAX's jit_...). Its all-reduce,
all-gather, reduce-scatter, all-to-all and collective-permute instructions (and their async -start
forms) run as npm run nccom runs the same op, size, type, ranks and groups; a send with its pairs
(_xla_send_recv_source_target_pairs) as nccom's sendrecv with them, its recv (the same channel_id)
not counted again; every other instruction is skipped (ragged-all-to-all, collective-broadcast,
host transfers and a send or recv whose ranks are unknown with a warning: the total leaves them
out). A collective in a while loop counts once per trip (known_trip_count in its backend config;
once, with a warning, when unknown).

  --instance NAME[,NAME...]  presets to replay on, side by side (names in --devices, or FILE.json; default trn1)
  --ranks N                  ranks (default: replica_count x num_partitions, or one more than the largest id)
  --nodes N, -N N            nodes the ranks span (default 1), as nccom's -N
  --top K                    list the K collectives that take longest (default 5; 0: none)
  --json                     the same as JSON
  -j, --jobs N               threads (default: the machine's cores; at most 4 a core)
  --devices DIR              the presets folder (default devices/)
  --set FIELD=VALUE          change a preset field on every instance (repeatable; npm run sim -- --help)
  --cc-dma-packet N          the runtime's CC DMA packet size in bytes, 64 to 65536 (default: the
                             variable NEURON_RT_DBG_CC_DMA_PACKET_SIZE, else 64 KiB; npm run sim -- --help)

The total is the collectives of one step in program order on one stream: each collective's time as
nccom-test would print it (fixed costs included), summed. Overlap with compute, with each other or
across streams is not modelled; it is an upper bound on communication a step cannot hide.
Sizes are nccom-test's: all-gather's the gathered output, reduce-scatter's its input.
exit codes: 0 ok, 1 bad input (file, line and text named), 2 internal error, 4 a program hung
`;

interface ReplayArgs {
  readonly file: string;
  readonly instances: readonly string[];
  readonly ranks?: number;
  readonly nodes: number;
  readonly json: boolean;
  readonly top: number;
  readonly jobs: number;
  readonly devices: string;
  /** The runtime's CC DMA packet sizes (--cc-dma-packet, else NEURON_RT_DBG_CC_DMA_PACKET_SIZE). */
  readonly packets?: readonly number[];
  /** Preset fields changed on every instance (--set FIELD=VALUE). */
  readonly sets?: readonly PresetSet[];
}

function parseArgs(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): ReplayArgs | "help" {
  checkOnce(argv);
  let file: string | undefined;
  let instances = ["trn1"];
  let ranks: number | undefined;
  let nodes = 1;
  let json = false;
  let top = 5;
  let jobs = defaultJobs();
  let devices = DEFAULT_DEVICES_DIR;
  let packets = packetsFromEnv(env);
  const sets: PresetSet[] = [];
  for (let i = 0; i < argv.length; i++) {
    const t = argv[i]!;
    const value = () => flagValue(argv, i++, t);
    switch (t) {
      case "-h":
      case "--help":
        return "help";
      case "--instance": {
        const v = value();
        instances = v.split(",");
        if (instances.some((s) => s === "")) throw new UsageError(`--instance "${v}": an empty preset name (presets are separated by single commas)`);
        const twice = instances.find((s, k) => instances.indexOf(s) !== k);
        if (twice !== undefined) throw new UsageError(`--instance "${v}": ${twice} given twice`);
        break;
      }
      case "--ranks":
      case "-r":
        ranks = intFlag(value(), t, 1);
        if (ranks > MAX_RANKS) throw new UsageError(`${t} ${ranks}: ccsim runs at most ${MAX_RANKS} ranks`);
        break;
      case "--nodes":
      case "-N":
        nodes = intFlag(value(), t, 1);
        break;
      case "--top":
        top = intFlag(value(), t, 0);
        break;
      case "--json":
        json = true;
        break;
      case "-j":
      case "--jobs":
        jobs = intFlag(value(), t, 1);
        break;
      case "--devices":
        devices = resolve(value());
        break;
      case "--cc-dma-packet":
        packets = packetSizes(value(), t);
        break;
      case "--set":
        sets.push(presetSetFlag(value(), t));
        break;
      default:
        if (t.startsWith("-")) throw new UsageError(`unknown option ${t}`);
        if (file !== undefined) throw new UsageError(`one module at a time (got ${file} and ${t})`);
        file = t;
    }
  }
  if (file === undefined) throw new UsageError("no HLO module given");
  return { file, instances, ...(ranks !== undefined ? { ranks } : {}), nodes, json, top, jobs, devices, ...(packets ? { packets } : {}), ...(sets.length > 0 ? { sets } : {}) };
}

/** Each instance's preset (a wrong one, or a field set wrong on it, refused before anything runs), and its label: its name (a preset file's name without .json). */
function presetsOf(instances: readonly string[], devices: string, sets: readonly PresetSet[] | undefined): { readonly name: string; readonly spec: DeviceSpec }[] {
  return instances.map((i) => {
    const w = resolveInstance(i, devices);
    return { name: w.instance, spec: loadDeviceWith(w.instance, w.dir, sets) };
  });
}

export function main(argv: readonly string[], out: (s: string) => void, err: (s: string) => void, env: Readonly<Record<string, string | undefined>> = process.env): number {
  let a: ReplayArgs | "help";
  let plan: ReplayPlan;
  let names: string[];
  let specs: DeviceSpec[];
  try {
    a = parseArgs(argv, env);
    if (a === "help") {
      out(HELP);
      return EXIT.OK;
    }
    let text: string;
    try {
      text = readTextFile(a.file);
    } catch (e) {
      throw new UsageError(`${a.file}: cannot read (${(e as Error).message})`);
    }
    const presets = presetsOf(a.instances, a.devices, a.sets);
    specs = presets.map((p) => p.spec);
    names = presets.map((p) => p.name);
    plan = planReplay(parseHlo(a.file, text), { ...(a.ranks !== undefined ? { ranks: a.ranks } : {}), nodes: a.nodes });
  } catch (e) {
    if (e instanceof UsageError) err(`replay: ${e.message}\n(try --help)\n`);
    else if (e instanceof HloError) err(`replay: ${e.render()}\n`);
    else if (e instanceof CcsimError) err(`replay: ${e.render()}\n`);
    else throw e;
    return EXIT.BAD_INPUT;
  }
  let cells: ReplayCell[][];
  try {
    cells = runReplay(plan, a.instances, a.devices, a.jobs, a.packets, a.sets);
  } catch (e) {
    if (!(e instanceof ReplayRunError)) throw e;
    err(`replay: ${e.message}\n`);
    return e.hang ? EXIT.HANG : EXIT.BAD_INPUT;
  }
  for (const w of plan.warnings) err(`replay: warning: ${w}\n`);
  out(a.json ? replayJson(plan, names, cells, a.sets) : replayTable(plan, names, specs, cells, a.top, a.sets));
  return EXIT.OK;
}

const us = (x: number) => x.toFixed(2);

function totals(plan: ReplayPlan, cells: readonly ReplayCell[][], j: number): number {
  return plan.rows.reduce((s, r, i) => s + r.count * cells[i]![j]!.timeUs, 0);
}

function groupsText(r: ReplayPlan["rows"][number]): string {
  if (r.pairs) return `${r.pairs.length} pairs`;
  const sizes = r.groups!.map((g) => g.length);
  return sizes.every((n) => n === sizes[0]) ? `${sizes.length}x${sizes[0]}` : sizes.join("+");
}

/** Columns padded to their widest cell; `left` columns left-aligned. */
function aligned(rows: readonly (readonly string[])[], left: ReadonlySet<number>): string {
  const w = rows[0]!.map((_, k) => Math.max(...rows.map((r) => r[k]!.length)));
  return rows.map((r) => r.map((c, k) => (left.has(k) ? c.padEnd(w[k]!) : c.padStart(w[k]!))).join("  ").trimEnd()).join("\n") + "\n";
}

function replayTable(plan: ReplayPlan, names: readonly string[], specs: readonly DeviceSpec[], cells: readonly ReplayCell[][], top: number, sets?: readonly PresetSet[]): string {
  const total = names.map((_, j) => totals(plan, cells, j));
  const instructions = plan.rows.reduce((s, r) => s + r.instructions.length, 0);
  const runs = plan.rows.reduce((s, r) => s + r.count, 0);
  let s = `replay: ${plan.module.file} (HloModule ${plan.module.name}), ${plan.ranks} ranks on ${plan.nodes} node(s)\n`;
  s += `collectives: ${instructions} instruction(s), ${plan.rows.length} distinct, ${runs} run(s) per step\n\n`;
  const head = ["#", "op", "hlo", "dtype", "bytes", "groups", "count"];
  for (const n of names) head.push(`${n} alg`, `${n} each(us)`, `${n} total(us)`, `${n} share`);
  const body = plan.rows.map((r, i) => {
    const row = [String(i + 1), r.hloOp, r.hloTypes, r.dtype, String(r.bytes), groupsText(r), String(r.count)];
    names.forEach((_, j) => {
      const c = cells[i]![j]!;
      const t = r.count * c.timeUs;
      row.push(c.algorithm, us(c.timeUs), us(t), total[j]! > 0 ? `${((100 * t) / total[j]!).toFixed(1)}%` : "-");
    });
    return row;
  });
  s += aligned([head, ...body], new Set([1, 2, 3, 5, ...names.map((_, j) => 7 + 4 * j)]));
  s += `\ncommunication per step: ${names.map((n, j) => `${n} ${us(total[j]!)} us`).join(", ")}\n`;
  if (top > 0 && plan.rows.length > 0) {
    const order = plan.rows.map((_, i) => i).sort((x, y) => plan.rows[y]!.count * cells[y]![0]!.timeUs - plan.rows[x]!.count * cells[x]![0]!.timeUs || x - y);
    s += `largest ${Math.min(top, order.length)} on ${names[0]}:\n`;
    for (const i of order.slice(0, top)) {
      const r = plan.rows[i]!;
      s += `  #${i + 1} ${r.hloOp} ${r.hloTypes} x${r.count}: ${us(r.count * cells[i]![0]!.timeUs)} us (${r.instructions.slice(0, 3).join(", ")}${r.instructions.length > 3 ? ", ..." : ""}, line ${r.line})\n`;
    }
  }
  const notes = [...new Set(plan.rows.flatMap((r) => r.notes))];
  for (const n of notes) s += `note: ${n}\n`;
  if (sets) s += `note: every preset here with ${setsText(sets)} (--set)\n`;
  s += "(one stream, program order, no overlap with compute: see npm run replay -- --help)\n";
  // Each preset's accuracy, as under nccom's table (an edited or --set preset: the shipped one's does not carry over).
  const acc = loadAccuracy();
  specs.forEach((spec, j) => {
    const changed = differsFromShipped(spec);
    const shapes = plan.rows.flatMap((r, i) => (r.empty ? [] : [{ op: r.op, bytes: r.bytes, ranks: r.groupSize, nodes: plan.nodes, algorithm: cells[i]![j]!.algorithm }]));
    s += accuracyNote(spec, acc, false, changed, shapes);
  });
  return s;
}

function replayJson(plan: ReplayPlan, names: readonly string[], cells: readonly ReplayCell[][], sets?: readonly PresetSet[]): string {
  const per = <T>(f: (j: number) => T) => Object.fromEntries(names.map((n, j) => [n, f(j)]));
  const doc = {
    module: plan.module.name,
    file: plan.module.file,
    ranks: plan.ranks,
    nodes: plan.nodes,
    instances: names,
    ...(sets ? { presetSets: Object.fromEntries(sets.map((x) => [x.path, x.value])) } : {}),
    collectives: plan.rows.map((r, i) => ({
      op: r.op,
      hloOp: r.hloOp,
      instructions: r.instructions,
      line: r.line,
      count: r.count,
      bytes: r.bytes,
      dtype: r.dtype,
      hloTypes: r.hloTypes,
      groupSize: r.groupSize,
      ...(r.groups ? { groups: r.groups } : {}),
      ...(r.pairs ? { pairs: r.pairs } : {}),
      ...(r.reduce ? { reduce: r.reduce } : {}),
      algorithm: per((j) => cells[i]![j]!.algorithm),
      timeUs: per((j) => cells[i]![j]!.timeUs),
      totalUs: per((j) => r.count * cells[i]![j]!.timeUs),
      notes: r.notes,
    })),
    totalUs: per((j) => totals(plan, cells, j)),
    warnings: plan.warnings,
  };
  return JSON.stringify(doc, null, 2) + "\n";
}

asCommand(import.meta.url, main);
