// npm run conformance -- [--cases N] [--seed S] [--max-bytes SIZE] [--preset NAME ...] [--verbose]
import { CONFORMANCE_PRESETS, generateCases, loadPresets, runCase, task, type CaseOutcome, type ConformanceCase } from "../run/conformance.ts";
import { defaultJobs, runParallel } from "../run/parallel.ts";
import { parseSize } from "../ir/sizes.ts";
import { checkShardFlags, presetSetFlag, setFlagWords, withoutShardFlags } from "../command/args.ts";
import { assignShards, ccsimVersion, pieceCost, PARTIAL_FORMAT, parseShardFlag, partialText, presetHash, resolveShard, statusReporter, type ShardSpec } from "../run/shard.ts";
import { refuseOverwrite, writeWhole } from "./write.ts";
import { presetFile, setsText, type PresetSet } from "../run/load.ts";
import { asCommand } from "./entry.ts";
import { CcsimError } from "../ir/errors.ts";
import { siblingUrl } from "../run/paths.ts";

/** The largest op a conformance case may draw. */
const MAX_CASE_BYTES = 16 * 2 ** 30;

const HELP = `ccsim conformance: run seeded random legal configurations and count the outcomes

usage: npm run conformance -- [--cases N] [--seed S] [--max-bytes SIZE] [--max-checked SIZE] [--preset NAME]... [--set FIELD=VALUE]... [--verbose]

  --cases N          how many configurations (default 200, at most 100000: more are more seeds)
  --seed S           generator seed (default 1); the same seed gives the same cases
  --max-bytes SIZE   largest op size (default 4M, at most 16G; units as in sweeps: 64K, 1G)
  --min-bytes SIZE   smallest op size (default one element)
  --max-checked SIZE values are compared where all ranks' input + output fit (default 64M); symbolically above
  --preset NAME      draw from this preset only (repeatable; default: ${CONFORMANCE_PRESETS.join(", ")})
  --jobs N           threads (default: this machine's cores: this one and N - 1 workers; at most 4 a
                     core); counts do not depend on it
  --knobs            also vary channels, priority classes and a second op on another stream
  --vary-presets     also vary each case's preset: ring channels, receive slots, chunk and folds, and
                     (half the cases) dma.maxDescriptorBytes, where copies and CCE packets are cut
                     (within the validator's bounds; --dump then names the changes on stderr)
  --set FIELD=VALUE  change a field of every preset drawn (repeatable; npm run sim -- --help): the
                     op space on a preset of your own making (--preset trn1 --set dma.enginesPerCore=8)
  --verbose          one line per case (on one thread, as each case ends)
  --dump ID          print case ID's scenario (JSON, runnable with npm run sim) instead of running
  --shard I/N|auto   run shard I of N of the cases (auto: from a Slurm job array or a Kubernetes
                     Indexed Job, with --shards N) and write them to --out F; npm run merge -- F...
                     prints the whole run's summary

Each case either passes (runs, and its values check where checked) or is refused by the runtime
before composing (exit-1 errors: groups, unsupported ops, placements). Anything else is a failure.
exit codes: 0 no failure, 1 bad flags, 3 some case failed
`;

export function main(argv: readonly string[], out: (s: string) => void, err: (s: string) => void, merged?: { readonly results: readonly CaseOutcome[]; readonly preset: string }, env: Readonly<Record<string, string | undefined>> = process.env): number {
  let cases = 200;
  let seed = 1;
  let maxBytes = 4 << 20;
  let minBytes = 1;
  let maxChecked = 64 << 20;
  let verbose = false;
  let knobs = false;
  let varyPresets = false;
  let jobs = defaultJobs();
  let dump: number | undefined;
  const presets: string[] = [];
  const sets: PresetSet[] = [];
  let shardFlag: ShardSpec | "auto" | undefined;
  let shards: number | undefined;
  let outFile: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const next = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    try {
      if (flag === "-h" || flag === "--help") {
        out(HELP);
        return 0;
      }
      else if (flag === "--cases") cases = positive(next(), flag);
      else if (flag === "--seed") seed = positive(next(), flag, 0);
      else if (flag === "--max-bytes") maxBytes = parseSize(next(), flag);
      else if (flag === "--min-bytes") minBytes = parseSize(next(), flag);
      else if (flag === "--max-checked") maxChecked = parseSize(next(), flag);
      else if (flag === "--preset") presets.push(next());
      else if (flag === "--set") sets.push(presetSetFlag(next(), flag));
      else if (flag === "--verbose") verbose = true;
      else if (flag === "--knobs") knobs = true;
      else if (flag === "--vary-presets") varyPresets = true;
      else if (flag === "--jobs") jobs = positive(next(), flag);
      else if (flag === "-j") jobs = positive(next(), flag);
      else if (flag === "--dump") dump = positive(next(), flag, 0);
      else if (flag === "--shard") shardFlag = parseShardFlag(next(), flag);
      else if (flag === "--shards") shards = positive(next(), flag);
      else if (flag === "--out") outFile = next();
      else throw new Error(`unknown flag ${flag}`);
    } catch (e) {
      err(`conformance: ${(e as Error).message}\n(try --help)\n`);
      return 1;
    }
  }
  // (A run draws all of its cases first, each shard too: 100,000 take 2 s and 250 MB; --dump draws up to its case.)
  if (dump === undefined && cases > MAX_CASES) {
    err(`conformance: --cases ${cases}: at most ${MAX_CASES} a run (every run, and every shard of one, draws them all first); more cases are more seeds\n(try --help)\n`);
    return 1;
  }
  let shard: ShardSpec | undefined;
  try {
    checkShardFlags({ shard: shardFlag, shards, out: outFile });
    if (shardFlag !== undefined) shard = resolveShard(shardFlag, shards, env);
  } catch (e) {
    err(`conformance: ${(e as Error).message}\n(try --help)\n`);
    return 1;
  }
  // A band that holds no size, or sizes no preset can hold (the largest HBM here is 96 GiB a device), are refused before any work.
  if (minBytes > maxBytes) {
    err(`conformance: --min-bytes ${minBytes} is above --max-bytes ${maxBytes}: no size lies between them\n`);
    return 1;
  }
  if (maxBytes > MAX_CASE_BYTES) {
    err(`conformance: --max-bytes ${maxBytes}: at most ${MAX_CASE_BYTES} B (16 GiB) a case (a case of that much runs for minutes; scale has the bench of its own)\n`);
    return 1;
  }
  let specs;
  try {
    specs = loadPresets(presets.length > 0 ? presets : CONFORMANCE_PRESETS, undefined, sets);
    // (A shard's partial goes over none of the presets it reads.)
    refuseOverwrite([["--out", outFile]], [...specs.keys()].map((p) => ["a preset the cases run on", presetFile(p)] as const), (m) => new Error(m));
  } catch (e) {
    // (A preset's error names its file, the --set flags and the field.)
    err(`conformance: ${e instanceof CcsimError ? e.render() : (e as Error).message}\n`);
    return 1;
  }
  // Cases are drawn one after another from one seeded stream: case ID is the same whether ID + 1
  // cases are drawn or all of them, so --dump draws no more than it prints.
  const drawn = generateCases(seed, dump !== undefined ? Math.min(cases, dump + 1) : cases, { maxBytes, minBytes, maxCheckedPayload: maxChecked, knobs, varyPresets, ...(presets.length > 0 ? { presets } : {}) }, specs);
  // (A run's --set goes with each case: a worker thread makes the preset again.)
  const list = sets.length > 0 ? drawn.map((c) => ({ ...c, sets })) : drawn;
  if (dump !== undefined) {
    const c = list[dump];
    if (!c) {
      err(`conformance: no case ${dump} (${cases} cases)\n`);
      return 1;
    }
    out(JSON.stringify(c.scenario, null, 2) + "\n");
    // (The preset's changes, the run's then the case's, as the flags npm run sim takes.)
    const changes = [...sets, ...Object.entries(c.preset ?? {}).flatMap(([section, kv]) => Object.entries(kv).map(([k, v]) => ({ path: `${section}.${k}`, value: v })))];
    if (changes.length > 0) err(`conformance: case ${dump} runs ${c.scenario["instance"]} with ${setsText(changes)}: npm run sim -- FILE${setFlagWords(changes)} runs it\n`);
    return 0;
  }
  const counts = new Map<string, Map<string, number>>();
  const failures: string[] = [];
  const t0 = performance.now();
  const line = (c: ConformanceCase, o: CaseOutcome): string => `${String(c.id).padStart(5)} ${o.kind.padEnd(7)} ${o.kind === "pass" ? o.algorithms.join(",") : o.code}  ${c.label}\n`;
  const hash = presetHash([...specs.entries()]);
  if (merged && merged.preset !== hash) {
    err(`conformance: the presets are not those the shards ran on (content hash ${hash}, the partials' ${merged.preset}): run the shards again\n`);
    return 1;
  }
  if (merged && merged.results.length !== list.length) {
    err(`conformance: the partials hold ${merged.results.length} cases, the command draws ${list.length}\n`);
    return 1;
  }
  // A shard runs its cases (assigned by their estimated cost) and writes them to --out.
  const mine = shard ? ((owner) => list.filter((_, k) => owner[k] === shard.index))(assignShards(list.map(caseCost), shard.count)) : list;
  const status = merged || verbose ? undefined : statusReporter(err, shard ? `conformance shard ${shard.index}/${shard.count}` : "conformance", mine.length, process.stderr.isTTY === true);
  const parallel = !merged && jobs > 1 && mine.length >= 2;
  // On one thread, each case's line goes out as it ends (a run that stops says where it was);
  // on several, all at the end, in case order.
  const ran = merged
    ? merged.results
    : parallel
      ? runParallel<ConformanceCase, CaseOutcome>(siblingUrl(import.meta.url, "../run/conformance.ts"), mine, jobs, { local: task, label: (k) => `case ${mine[k]!.id}`, onResult: (_k, o) => status?.piece(o.kind === "fail") })
      : mine.map((c) => {
          const o = runCase(c);
          status?.piece(o.kind === "fail");
          if (verbose && !shard) out(line(c, o));
          return o;
        });
  status?.done();
  if (shard) {
    const pieces = mine.map((c, i) => ({ index: list.indexOf(c), result: ran[i]! }));
    try {
      writeWhole(outFile!, partialText({ format: PARTIAL_FORMAT, tool: "conformance", argv: withoutShardFlags(argv), version: ccsimVersion(), preset: hash, shard, total: list.length, pieces }), (m) => new Error(m));
    } catch (e) {
      err(`conformance: --out ${outFile}: ${(e as Error).message}\n`);
      return 1;
    }
    const failed = ran.filter((o) => o.kind === "fail").length;
    err(`conformance: shard ${shard.index}/${shard.count}: ${mine.length} of ${list.length} cases run (${failed} failed), ${((performance.now() - t0) / 1000).toFixed(1)} s, written to ${outFile} (npm run merge -- every shard's file)\n`);
    return 0;
  }
  const outcomes = ran;
  for (const [k, c] of list.entries()) {
    const o: CaseOutcome = outcomes[k]!;
    const preset = String(c.scenario["instance"]);
    const key = o.kind === "pass" ? "pass" : `${o.kind} ${o.code}`;
    const row = counts.get(preset) ?? new Map<string, number>();
    counts.set(preset, row.set(key, (row.get(key) ?? 0) + 1));
    if (o.kind === "fail") failures.push(`case ${c.id}: ${c.label}\n  ${o.message.split("\n").slice(0, 4).join("\n  ")}`);
    if (verbose && (parallel || merged)) out(line(c, o));
  }
  out(`conformance: ${list.length} cases, seed ${seed}, sizes up to ${maxBytes} B, ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  const totals = new Map<string, number>();
  for (const [preset, row] of [...counts].sort()) {
    out(`  ${preset.padEnd(18)} ${[...row].sort().map(([k, n]) => `${k}: ${n}`).join(", ")}\n`);
    for (const [k, n] of row) totals.set(k.split(" ")[0]!, (totals.get(k.split(" ")[0]!) ?? 0) + n);
  }
  out(`  ${"all".padEnd(18)} ${["pass", "refused", "fail"].map((k) => `${k}: ${totals.get(k) ?? 0}`).join(", ")}\n`);
  for (const f of failures) err(`${f}\n`);
  return failures.length > 0 ? 3 : 0;
}

/** A case's estimated cost, for the shard assignment: its ops' bytes over its ranks. */
function caseCost(c: ConformanceCase): number {
  const bytes = ((c.scenario["ops"] as { bytes?: number }[] | undefined) ?? []).reduce((a, o) => a + (Number(o.bytes) || 0), 0);
  return pieceCost(bytes, Number(c.scenario["ranks"]) || 1);
}

/** The most cases a run draws. */
const MAX_CASES = 100_000;

function positive(v: string, flag: string, lo = 1): number {
  if (!/^\d+$/.test(v) || Number(v) < lo || !Number.isSafeInteger(Number(v))) throw new Error(`${flag} must be an integer >= ${lo}, not "${v}"`);
  return Number(v);
}

asCommand(import.meta.url, main);
