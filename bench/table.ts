// npm run bench:table: the speed table of the rows users run most (each command in a process of its
// own, wall time and peak RSS), beside the bare event loop's time for 10 M events (B) measured in
// the same run, and each row's ratio to B. Its output, with the machine named, is bench/README.md.
//
//   npm run bench:table [-- --skip-slow]   (--skip-slow leaves out the rows over a minute)
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";

interface Row {
  readonly label: string;
  readonly argv: readonly string[];
  readonly slow?: boolean;
}

const TSX = ["--max-semi-space-size=64", "--import", "tsx"];
/** What the npm scripts run: bin/run.mjs (the compiled copy where it is fresh, `npm run build`). */
const RUN = ["--max-semi-space-size=64", "bin/run.mjs"];
/** The older runtime's logs (what --from reads), and where the fit row writes its preset. */
const OLDER_LOGS = readdirSync("calibration/logs")
  .filter((f) => f.startsWith("older-") && f.endsWith(".log"))
  .sort()
  .map((f) => `calibration/logs/${f}`);
const FIT_OUT = join(tmpdir(), "ccsim-bench-fit.json");
const ROWS: readonly Row[] = [
  { label: "process start: npm run sim -- --help", argv: [...RUN, "src/cli/sim.ts", "--help"] },
  { label: "npm run sim -- scenarios/ring8.json -b 1G -e 1G --op all-reduce", argv: [...RUN, "src/cli/sim.ts", "scenarios/ring8.json", "-b", "1G", "-e", "1G", "--op", "all-reduce"] },
  { label: "npm run nccom -- allr -r 64 -N 2 -b 8 -e 1G -f 8 -d fp32", argv: [...RUN, "src/cli/nccom.ts", "allr", "-r", "64", "-N", "2", "-b", "8", "-e", "1G", "-f", "8", "-d", "fp32"] },
  { label: "npm run nccom -- allr -r 128 -N 4 -b 864847135 -d fp8 --check none", argv: [...RUN, "src/cli/nccom.ts", "allr", "-r", "128", "-N", "4", "-b", "864847135", "-d", "fp8", "--check", "none"], slow: true },
  { label: "npm run nccom -- allr -r 128 -N 4 -b 1G -d fp8 --check none", argv: [...RUN, "src/cli/nccom.ts", "allr", "-r", "128", "-N", "4", "-b", "1G", "-d", "fp8", "--check", "none"] },
  { label: "npm run nccom -- allr -r 4096 -N 128 -b 1G -e 1G -d fp32 --check none", argv: [...RUN, "src/cli/nccom.ts", "allr", "-r", "4096", "-N", "128", "-b", "1G", "-e", "1G", "-d", "fp32", "--check", "none"], slow: true },
  { label: "npm run conformance -- --cases 200", argv: [...RUN, "src/cli/conformance.ts", "--cases", "200"] },
  { label: "npm run calibrate (every published point, one parameter set)", argv: [...RUN, "src/cli/calibrate.ts"] },
  // A fit's trials (the first compiles; the six after it run the kept programs): 38 points each.
  { label: "npm run calibrate -- --from calibration/logs/older-*.log --instance trn1-legacy --params dma.engineBytesPerSecond,link.latencyPs --rounds 1 --max-bytes 64M (7 trials)", argv: [...RUN, "src/cli/calibrate.ts", "--from", ...OLDER_LOGS, "--instance", "trn1-legacy", "--params", "dma.engineBytesPerSecond,link.latencyPs", "--rounds", "1", "--max-bytes", "64M", "--out", FIT_OUT] },
  { label: "npm run replay -- test/fixtures/hlo/tp8-dp2-layer.hlo.txt --instance trn1,trn2", argv: [...RUN, "src/cli/replay.ts", "test/fixtures/hlo/tp8-dp2-layer.hlo.txt", "--instance", "trn1,trn2"] },
];

/** Wall seconds and peak RSS (MiB) of one process. */
function measure(argv: readonly string[]): { wall: number; rssMiB: number; status: number | null; stdout: string } {
  const t0 = performance.now();
  const r = spawnSync("/usr/bin/time", ["-f", "%M", process.execPath, ...argv], { encoding: "utf8", maxBuffer: 1 << 30 });
  const wall = (performance.now() - t0) / 1000;
  const kb = Number(r.stderr.trim().split("\n").pop());
  return { wall, rssMiB: Number.isFinite(kb) ? Math.round(kb / 1024) : Number.NaN, status: r.status, stdout: r.stdout ?? "" };
}

/** The bare kernel loop as a process of its own (bench/bare.ts, 10 M events). */
function bare(): number {
  return measure([...TSX, "bench/bare.ts"]).wall;
}

const skipSlow = process.argv.includes("--skip-slow");
const B = bare();
console.log(`machine: ${cpus().length} x ${cpus()[0]?.model ?? "?"}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}`);
console.log(`B (bare event loop, 10 M events, whole process): ${B.toFixed(2)} s\n`);
console.log("| command | wall (s) | peak RSS (MiB) | wall / B | exit |");
console.log("|---|---|---|---|---|");
/** What the rows' own output says beyond their wall time. */
const notes: string[] = [];
for (const row of ROWS) {
  if (skipSlow && row.slow) {
    console.log(`| \`${row.label}\` | skipped (--skip-slow) | | | |`);
    continue;
  }
  const m = measure(row.argv);
  console.log(`| \`${row.label}\` | ${m.wall.toFixed(2)} | ${m.rssMiB} | ${(m.wall / B).toFixed(1)} | ${m.status} |`);
  // A fit says its trials' times (the bar is on each trial after the first): said below the table.
  const trials = /: the first ([\d.]+) s, the (\d+) after it ([\d.]+)-([\d.]+) s each/.exec(m.stdout);
  if (trials) notes.push(`the fit row's trials: the first ${trials[1]} s, the ${trials[2]} after it ${trials[3]}-${trials[4]} s each`);
}
for (const n of notes) console.log(`\n${n}`);
