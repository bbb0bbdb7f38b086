// ccsim command line: npm run sim -- <scenario.json> [options]
import pino from "pino";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { CcsimError, CompileError, SimError } from "../ir/errors.ts";
import type { DeviceSpec, Scenario } from "../ir/spec.ts";
import { explainScenario } from "../enc/compile.ts";
import { formatJson, formatTable } from "../report/table.ts";
import { formatHang } from "../../sim/index.ts";
import { DEFAULT_DEVICES_DIR, loadDevice, loadScenario } from "./load.ts";
import { runScenario, type PipelineHooks } from "./pipeline.ts";
import { explainJson, explainText } from "./explain.ts";

export const EXIT = { OK: 0, BAD_INPUT: 1, INTERNAL: 2, CHECK_FAILED: 3, HANG: 4 } as const;

const HELP = `ccsim: compile Neuron collectives to device programs and run the bytes on a simulated machine

usage: npm run sim -- <scenario.json> [options]

Each op of the scenario is composed for the scenario's ranks, emitted as a program image
(spad_ctrl / cc_op_entry streams, UDMA descriptor rings, TopSP channel configs), executed on the
simulated devices of devices/<instance>.json, and checked against a reference collective.

options:
  --json               print {"scenario", "results": [...]} instead of the table
  --explain            show, per op, the comm-init family decision, all six enc_can_post_* gate
                       verdicts (with the reason for each no), the resolved algorithm and its
                       printed name, the metaring type, channels and slice sizes (JSON: "explain")
  --check values|none  override the scenario's check mode (none = timing only, no payload bytes)
  --seed N             override the scenario's seed (input values)
  --devices DIR        directory of device presets (default: the project's devices/)
  --log-level LEVEL    pino log level on stderr: fatal, error, warn (default), info, debug, trace, silent
  -h, --help           this text

output columns: size(B) count(elems) type time(us) algbw(GB/s) busbw(GB/s) algorithm check
  time is simulated time in microseconds; GB = 10^9 bytes; busbw = algbw x 2(n-1)/n (all-reduce)
  or (n-1)/n (all-gather, reduce-scatter); size(B) is the all-reduce buffer, the whole gathered
  output, or the whole reduce-scatter input.

exit codes: 0 all checks pass, 1 bad input, 2 internal error, 3 a check failed, 4 the program hung
`;

interface Args {
  scenario: string;
  json: boolean;
  explain: boolean;
  check: "values" | "none" | undefined;
  seed: number | undefined;
  devices: string;
  logLevel: string;
}

class UsageError extends Error {}

const LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

function parseArgs(argv: readonly string[]): Args | "help" {
  const a: Partial<Args> = { json: false, explain: false, devices: DEFAULT_DEVICES_DIR, logLevel: "warn" };
  const value = (i: number, flag: string): string => {
    const v = argv[i + 1];
    if (v === undefined || v.startsWith("--")) throw new UsageError(`${flag} needs a value`);
    return v;
  };
  for (let i = 0; i < argv.length; i++) {
    const t = argv[i]!;
    switch (t) {
      case "-h":
      case "--help":
        return "help";
      case "--json":
        a.json = true;
        break;
      case "--explain":
        a.explain = true;
        break;
      case "--check": {
        const v = value(i++, t);
        if (v !== "values" && v !== "none") throw new UsageError(`--check must be values or none, not "${v}"`);
        a.check = v;
        break;
      }
      case "--seed": {
        const v = value(i++, t);
        if (!/^\d+$/.test(v) || !Number.isSafeInteger(Number(v))) throw new UsageError(`--seed must be a non-negative integer, not "${v}"`);
        a.seed = Number(v);
        break;
      }
      case "--devices":
        a.devices = value(i++, t);
        break;
      case "--log-level": {
        const v = value(i++, t);
        if (!LEVELS.includes(v)) throw new UsageError(`--log-level must be one of ${LEVELS.join(", ")}, not "${v}"`);
        a.logLevel = v;
        break;
      }
      default:
        if (t.startsWith("-")) throw new UsageError(`unknown option ${t}`);
        if (a.scenario !== undefined) throw new UsageError(`one scenario file at a time (got ${a.scenario} and ${t})`);
        a.scenario = t;
    }
  }
  if (a.scenario === undefined) throw new UsageError("no scenario file given");
  return a as Args;
}

export function main(argv: readonly string[], out: (s: string) => void, err: (s: string) => void, hooks: PipelineHooks = {}): number {
  let args: Args | "help";
  try {
    args = parseArgs(argv);
  } catch (e) {
    if (e instanceof UsageError) {
      err(`ccsim: ${e.message}\n(try --help)\n`);
      return EXIT.BAD_INPUT;
    }
    throw e;
  }
  if (args === "help") {
    out(HELP);
    return EXIT.OK;
  }
  const log = pino({ level: args.logLevel, base: null, timestamp: false }, pino.destination({ dest: 2, sync: true }));
  let scn: Scenario | undefined;
  let spec: DeviceSpec | undefined;
  try {
    scn = loadScenario(args.scenario);
    if (args.check) scn = { ...scn, check: args.check };
    if (args.seed !== undefined) scn = { ...scn, seed: args.seed };
    spec = loadDevice(scn.instance, args.devices, args.scenario);
    log.info({ scenario: scn.name, instance: spec.name, seed: scn.seed }, "loaded");
    const outcome = runScenario(scn, spec, log, hooks);
    if (outcome.kind === "hang") {
      err(`ccsim: op ${outcome.op} (${scn.ops[outcome.op]!.op}) of ${args.scenario} hung\n${formatHang(outcome.hang).join("\n")}\n`);
      return EXIT.HANG;
    }
    const rows = outcome.ops.map((o) => o.row);
    if (args.json) out(formatJson(scn.name, rows, args.explain ? explainJson(outcome.explain) : undefined));
    else out((args.explain ? explainText(scn, outcome.explain) + "\n" : "") + formatTable(rows));
    const failed = outcome.ops.filter((o) => o.mismatch);
    for (const f of failed) {
      const m = f.mismatch!;
      err(`ccsim: check failed for ${f.row.op} ${f.row.bytes} B ${f.row.dtype}: rank ${m.rank}, element ${m.index}: expected ${m.expected}, got ${m.got}\n`);
    }
    return failed.length > 0 ? EXIT.CHECK_FAILED : EXIT.OK;
  } catch (e) {
    if (e instanceof SimError) {
      err(`ccsim: internal error: the simulator rejected the emitted program: ${e.render()}\n`);
      return EXIT.INTERNAL;
    }
    if (e instanceof CcsimError) {
      if (args.explain && scn && spec && e instanceof CompileError) {
        // Show why the op went where it did, then the refusal.
        try {
          err(explainText(scn, explainScenario(scn, spec)));
        } catch {
          // The explanation itself needs what the error reports; the error says enough.
        }
      }
      // Compile and encode errors come from the scenario's content: name its file.
      err(`ccsim: ${e.file === undefined ? `${args.scenario}: ` : ""}${e.render()}\n`);
      return EXIT.BAD_INPUT;
    }
    err(`ccsim: internal error: ${(e as Error).stack ?? String(e)}\n`);
    return EXIT.INTERNAL;
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2), (s) => process.stdout.write(s), (s) => process.stderr.write(s));
}
