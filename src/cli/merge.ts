// npm run merge -- PARTIAL... [--json F] [--report-to-json-file F]: every shard's partial of one
// run (npm run nccom / sim / conformance with --shard I/N --out F) put back together. The merge
// replays the command with the shards' results in place of running them, so it prints what the
// unsharded run prints, and exits as it would.
import { ccsimVersion, mergePartials, PartialError } from "../run/shard.ts";
import type { SweepTaskResult } from "../run/sweep-task.ts";
import type { CaseOutcome } from "../run/conformance.ts";
import { refuseOverwrite, writeWhole } from "./write.ts";
import { main as nccomMain } from "./nccom.ts";
import { main as simMain } from "./sim.ts";
import { main as conformanceMain } from "./conformance.ts";
import { main as calibrateMain } from "./calibrate.ts";
import { asCommand } from "./entry.ts";
import { SHARD_FLAGS } from "../command/args.ts";

const HELP = `ccsim merge: put the partials of a sharded run back together

usage: npm run merge -- PARTIAL... [--json F] [--report-to-json-file F]

PARTIAL: the --out file of each shard of one command (npm run nccom, npm run sim with -b / -e,
npm run conformance, npm run calibrate [--cross-validate], each with --shard I/N or --shard auto). The merge prints what the command
run whole prints (its table, notes and summary lines) and exits with its exit code; the files the
command writes (--report-to-json-file, --plot), it writes. What differs from the unsharded run is
wall-clock time alone: conformance's first line ("..., N.N s") and calibrate's "cross-validated
(N.N s)" give the merge's own, and the
progress lines an op of more than two seconds writes to stderr as it runs are not replayed.
  --json F                 also write the run's --json output to F
  --report-to-json-file F  also write nccom-test's JSON report to F

Refused, with the file and the reason, nothing written (exit 1): a shard missing or given twice,
shards that overlap, partials of different commands, ccsim builds (the version and a hash of the
sources: shards and merge run one checkout), presets, shard counts or runtime variables (nccom's
NEURON_LOGICAL_NC_CONFIG and NEURON_RT_DBG_CC_DMA_PACKET_SIZE, which a partial records and the
merge reads the command line with), a partial that was truncated
or edited (each carries a checksum of its content; in a partial edited and checksummed again,
results the command cannot read, a shard or count of pieces out of range, and a command line that
holds a shard's own flags or --trace are refused too).
`;

type Tool = (argv: readonly string[], out: (s: string) => void, err: (s: string) => void, results: readonly unknown[], preset: string, env: Readonly<Record<string, string>>) => number;

const TOOLS: Readonly<Record<string, Tool>> = {
  // (nccom's command line is read with the runtime's variables its shards read.)
  nccom: (argv, out, err, results, preset, env) => nccomMain(argv, out, err, env, false, { results: results as SweepTaskResult[], preset }),
  sim: (argv, out, err, results, preset) => simMain(argv, out, err, {}, { merged: { results: results as SweepTaskResult[], preset } }),
  conformance: (argv, out, err, results, preset) => conformanceMain(argv, out, err, { results: results as CaseOutcome[], preset }),
  calibrate: (argv, out, err, results, preset) => calibrateMain(argv, out, err, { results, preset }),
};

export function main(argv: readonly string[], out: (s: string) => void, err: (s: string) => void): number {
  const files: string[] = [];
  let json: string | undefined;
  let report: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const t = argv[i]!;
    if (t === "-h" || t === "--help") {
      out(HELP);
      return 0;
    }
    if (t === "--json" || t === "--report-to-json-file") {
      const v = argv[++i];
      if (v === undefined || v.startsWith("-")) {
        err(`merge: ${t} needs a file\n(try --help)\n`);
        return 1;
      }
      if (t === "--json") json = v;
      else report = v;
      continue;
    }
    if (t.startsWith("-")) {
      err(`merge: unknown option ${t}\n(try --help)\n`);
      return 1;
    }
    files.push(t);
  }
  let merged: ReturnType<typeof mergePartials>;
  try {
    merged = mergePartials(files, ccsimVersion(), shapeProblem);
  } catch (e) {
    if (e instanceof PartialError) {
      err(`merge: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
  // A shard keeps its command line without its own flags (`withoutShardFlags`), and no shard traces
  // (`checkShardFlags`): such a flag was put there by hand, and the replay would run as a shard
  // again (write a partial, print no table) or write a trace of nothing it ran.
  const shardFlag = merged.argv.find((a) => (SHARD_FLAGS as readonly string[]).includes(a) || a === "--trace");
  if (shardFlag !== undefined) {
    err(`merge: ${files[0]}: its command line holds ${shardFlag}, which no shard keeps: the partial was edited and checksummed again; run the shards again\n`);
    return 1;
  }
  // The files the merge writes (its own, and those the partials' command line names) go over no partial.
  const named = (flag: string): string | undefined => {
    const at = merged.argv.lastIndexOf(flag);
    return at >= 0 ? merged.argv[at + 1] : undefined;
  };
  try {
    refuseOverwrite(
      [["--json", json], ["--report-to-json-file", report ?? named("--report-to-json-file")], ["--plot", named("--plot")]],
      files.map((f) => ["a partial", f] as const),
      (m) => new Error(m),
    );
  } catch (e) {
    err(`merge: ${(e as Error).message}\n`);
    return 1;
  }
  const tool = TOOLS[merged.tool];
  if (!tool) {
    err(`merge: ${files[0]}: a partial of "${merged.tool}", which merge does not know (nccom, sim, conformance, calibrate)\n`);
    return 1;
  }
  if ((merged.tool === "conformance" || merged.tool === "calibrate") && (json !== undefined || report !== undefined)) {
    err(`merge: --json and --report-to-json-file write a sweep's results; a ${merged.tool} run has none (give its own --json when you shard it)\n`);
    return 1;
  }
  // Partials of this build whose checksums hold carry results as its shards wrote them: results the
  // command fails to read (it throws) were edited and checksummed again, which is bad input, said
  // as such (exit 1), not as an internal error with its stack.
  const replay = (args: readonly string[], o: (s: string) => void, e: (s: string) => void): number | undefined => {
    try {
      return tool(args, o, e, merged.results, merged.preset, merged.env);
    } catch (x) {
      err(`merge: ${files.join(", ")}: their results do not read as ${merged.tool}'s (${String(x)}): a partial was edited and checksummed again; run the shards again\n`);
      return undefined;
    }
  };
  const code = replay(report === undefined ? merged.argv : [...withoutFlag(merged.argv, "--report-to-json-file"), "--report-to-json-file", report], out, err);
  if (code === undefined) return 1;
  if (json !== undefined && code !== 1) {
    // The same results again, printed as --json does (stderr said its part the first time).
    let text = "";
    if (replay([...withoutFlag(merged.argv, "--json", 0), "--json"], (s) => (text += s), () => {}) === undefined) return 1;
    try {
      writeWhole(json, text, (m) => new Error(m));
    } catch (e) {
      err(`merge: --json ${json}: ${(e as Error).message}\n`);
      return 1;
    }
  }
  return code;
}

const isRecord = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);

/**
 * What is wrong with `r` as a result of `tool` at its top (kind and the records it must hold), or
 * undefined; the replay itself refuses deeper edits it cannot read (`replay` in `main`).
 */
function shapeProblem(tool: string, r: unknown): string | undefined {
  if (!isRecord(r)) return `${JSON.stringify(r) ?? String(r)} is not a record`;
  const need = (fields: Record<string, (v: unknown) => boolean>): string | undefined => {
    for (const [k, ok] of Object.entries(fields)) if (!ok(r[k])) return `its ${k} is ${JSON.stringify(r[k]) ?? "missing"}`;
    return undefined;
  };
  const text = (v: unknown) => typeof v === "string";
  if (tool === "nccom" || tool === "sim") {
    if (r["kind"] === "done") return need({ outcome: (v) => isRecord(v) && isRecord(v["row"]), explain: Array.isArray });
    if (r["kind"] === "hang") return need({ hang: isRecord });
    if (r["kind"] === "error") return need({ error: (v) => isRecord(v) && text(v["message"]) && text(v["code"]) });
    return `its kind is ${JSON.stringify(r["kind"]) ?? "missing"}, not done, hang or error`;
  }
  if (tool === "conformance") {
    if (r["kind"] === "pass") return need({ algorithms: (v) => Array.isArray(v) && v.every(text) });
    if (r["kind"] === "refused" || r["kind"] === "fail") return need({ code: text, message: text });
    return `its kind is ${JSON.stringify(r["kind"]) ?? "missing"}, not pass, refused or fail`;
  }
  if (tool === "calibrate") return need({ key: text, result: isRecord });
  return undefined;
}

/** argv without `flag` (and its value, when it takes `values` of them). */
function withoutFlag(argv: readonly string[], flag: string, values = 1): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === flag) i += values;
    else out.push(argv[i]!);
  }
  return out;
}

asCommand(import.meta.url, main);
