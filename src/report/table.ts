// nccom-test-style result rows: the table and the JSON contract.
import type { CalibrationAccuracy, MeasuredRange } from "../ir/spec.ts";
import { opEntry } from "../ir/ops.ts";
import type { OpName } from "../ir/spec.ts";

/** nccom-test's bus-bandwidth factor (busbw / algbw) for an op over n ranks, from the op registry. */
export function busFactor(op: OpName, n: number): number {
  return opEntry(op).busFactor(n);
}
export interface ResultRow {
  readonly op: string;
  readonly bytes: number;
  readonly count: number;
  readonly dtype: string;
  readonly ranks: number;
  readonly algorithm: string;
  readonly timeUs: number;
  readonly algbwGBps: number;
  readonly busbwGBps: number;
  readonly check: "pass" | "fail" | "skipped";
  /** Replica groups that resolved different algorithms: each group's rank count and algorithm. */
  readonly groups?: readonly { readonly group: number; readonly ranks: number; readonly algorithm: string }[];
  /** A sweep size that failed: the error, in place of the figures. */
  readonly error?: string;
  /** A multistream run's row: the CC stream it belongs to (its ops' time in the concurrent run). */
  readonly stream?: number;
}

/** Throughput as nccom-test computes it: algbw = size / time (GB = 1e9 B), busbw = algbw x factor. */
export function throughput(bytes: number, timePs: number, factor: number): { timeUs: number; algbwGBps: number; busbwGBps: number } {
  const timeUs = timePs / 1e6;
  // Bytes moved in no time (a preset with no rates and no costs) is infinite bandwidth, not none.
  const algbwGBps = timePs > 0 ? (bytes * 1000) / timePs : bytes > 0 ? Number.POSITIVE_INFINITY : 0;
  return { timeUs, algbwGBps, busbwGBps: algbwGBps * factor };
}

/** A bandwidth as printed: two decimals, or "inf" (bytes moved in no simulated time). */
export function bw(x: number): string {
  return Number.isFinite(x) ? x.toFixed(2) : "inf";
}

const HEADER = ["size(B)", "count(elems)", "type", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "algorithm", "check"];

export function formatTable(rows: readonly ResultRow[]): string {
  const cells = rows.map((r) => [String(r.bytes), String(r.count), r.dtype, r.timeUs.toFixed(2), bw(r.algbwGBps), bw(r.busbwGBps), r.algorithm, r.check]);
  const widths = HEADER.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: readonly string[]) => c.map((s, i) => (i === 2 || i >= 6 ? s.padEnd(widths[i]!) : s.padStart(widths[i]!))).join("  ").trimEnd();
  const avg = rows.length ? rows.reduce((n, r) => n + r.busbwGBps, 0) / rows.length : 0;
  return [line(HEADER), ...cells.map(line), `Avg bus bandwidth:\t${Number.isFinite(avg) ? avg.toFixed(4) : "inf"}GB/s`].join("\n") + "\n";
}

export function formatJson(scenario: string, rows: readonly ResultRow[], explain?: unknown, concurrent?: unknown): string {
  const results = rows.map((r) => ({
    op: r.op,
    bytes: r.bytes,
    count: r.count,
    dtype: r.dtype,
    ranks: r.ranks,
    algorithm: r.algorithm,
    timeUs: r.timeUs,
    algbwGBps: r.algbwGBps,
    busbwGBps: r.busbwGBps,
    check: r.check,
    ...(r.stream !== undefined ? { stream: r.stream } : {}),
    ...(r.groups ? { groups: r.groups } : {}),
    ...(r.error ? { error: r.error } : {}),
  }));
  return JSON.stringify({ scenario, results, ...(concurrent === undefined ? {} : { concurrent }), ...(explain === undefined ? {} : { explain }) }, null, 2) + "\n";
}

const SWEEP_HEADER = ["size(B)", "count(elems)", "type", "time(us)", "algbw(GB/s)", "busbw(GB/s)"];

/** nccom-test's sweep table: its columns (plus `algorithm` when asked), `#` notes first, the average last. */
export function formatSweepTable(rows: readonly ResultRow[], showAlgorithm: boolean, timeHeader = "time(us)", notes: readonly string[] = [], percentiles: readonly string[] = [], ioSizes = false): string {
  // nccom-test's -t / --stats columns after the average: a simulated op takes the same time every
  // iteration, so each percentile is the average, printed as nccom-test prints them (whole us).
  const io = ioSizes ? ["total_input_size(B)", "total_output_size(B)"] : [];
  const base = SWEEP_HEADER.flatMap((h) => (h === "time(us)" ? [timeHeader, ...percentiles.map((p) => `time:${p}(us)`)] : h === "count(elems)" ? [h, ...io] : [h]));
  const header = showAlgorithm ? [...base, "algorithm"] : base;
  const algorithmAt = showAlgorithm ? header.length - 1 : -1;
  const typeAt = 2 + io.length;
  const ok = rows.filter((r) => !r.error);
  const sizes = (r: ResultRow) => (ioSizes ? rankBuffers(r).map(String) : []);
  const cells = ok.map((r) => {
    const c = [String(r.bytes), String(r.count), ...sizes(r), r.dtype, r.timeUs.toFixed(2), ...percentiles.map(() => String(Math.round(r.timeUs))), bw(r.algbwGBps), bw(r.busbwGBps)];
    return showAlgorithm ? [...c, r.algorithm] : c;
  });
  const failed = rows.filter((r) => r.error).map((r) => [String(r.bytes), String(r.count), ...sizes(r), r.dtype]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length), ...failed.map((c) => (c[i] ?? "").length)));
  const line = (c: readonly string[]) => c.map((x, i) => (i === typeAt || i === algorithmAt ? x.padEnd(widths[i]!) : x.padStart(widths[i]!))).join("  ").trimEnd();
  // A failed size keeps its place, its error in place of the figures.
  const lines = rows.map((r) => (r.error ? `${line([String(r.bytes), String(r.count), ...sizes(r), r.dtype.padEnd(widths[typeAt]!)])}  error: ${r.error}` : line(cells[ok.indexOf(r)]!)));
  const avg = ok.length ? ok.reduce((n, r) => n + r.busbwGBps, 0) / ok.length : 0;
  return [...notes.map((n) => `# ${n}`), line(header), ...lines, `Avg bus bandwidth:\t${Number.isFinite(avg) ? avg.toFixed(4) : "inf"}GB/s`].join("\n") + "\n";
}

/**
 * A rank's input and output bytes at a row's size (nccom-test's total_input_size(B) /
 * total_output_size(B)): a blocked op's share is size / ranks on the side that is split; the
 * v-ops at a sweep size split evenly.
 */
function rankBuffers(r: ResultRow): [number, number] {
  const n = Math.max(1, r.ranks);
  if (r.op === "all-gather" || r.op === "all-gather-v") return [Math.floor(r.bytes / n), r.bytes];
  if (r.op === "reduce-scatter") return [r.bytes, Math.floor(r.bytes / n)];
  return [r.bytes, r.bytes];
}

/** nccom-test's --report-to-json-file shape. */
export function nccomJson(rows: readonly ResultRow[]): string {
  const results = rows.map((r) =>
    r.error
      ? { ...(r.stream !== undefined ? { stream: r.stream } : {}), "size(B)": r.bytes, "count(elems)": r.count, type: r.dtype, error: r.error }
      : {
          ...(r.stream !== undefined ? { stream: r.stream } : {}),
          "size(B)": r.bytes,
          "count(elems)": r.count,
          type: r.dtype,
          "algbw(GB/s)": r.algbwGBps,
          "busbw(GB/s)": r.busbwGBps,
          "time:avg(us)": r.timeUs,
        },
  );
  return JSON.stringify({ results }, null, 2) + "\n";
}

/** The ops of a scenario run together (its "concurrent" run), in µs, next to their times alone. */
export interface ConcurrentReport {
  readonly streams: readonly number[];
  readonly timeUs: number;
  /** The longest op alone and the sum of the ops alone (each on a fresh machine). */
  readonly longestAloneUs: number;
  readonly sumAloneUs: number;
  readonly ops: readonly { readonly op: string; readonly stream: number; readonly endUs: number }[];
  readonly check: "pass" | "fail" | "skipped";
}

export function formatConcurrent(c: ConcurrentReport): string {
  const us = (x: number) => x.toFixed(2);
  const lines = [`concurrent: ${c.ops.length} ops on ${c.streams.length} stream(s) in one program: ${us(c.timeUs)} us (alone: longest ${us(c.longestAloneUs)} us, sum ${us(c.sumAloneUs)} us)  check ${c.check}`];
  c.ops.forEach((o, k) => lines.push(`  op ${k} ${o.op} on stream ${o.stream}: ends at ${us(o.endUs)} us`));
  return lines.join("\n") + "\n";
}

/** One run a coverage note looks at: its op, size, ranks (its largest group), nodes and the algorithm it resolved to. */
export interface RunShape {
  readonly op: OpName;
  readonly bytes: number;
  readonly ranks: number;
  readonly nodes: number;
  readonly algorithm?: string;
}

/** Bytes as a size flag would take them: 512 B, 1 KiB, 32 MiB, 1.5 GiB. */
function sizeText(b: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let k = 0;
  while (k + 1 < units.length && b >= 1024 ** (k + 1)) k++;
  const v = b / 1024 ** k;
  return `${Number.isInteger(v) ? v : Number(v.toFixed(1))} ${units[k]}`;
}

/**
 * A line under the accuracy note where some of `runs` lie outside what the preset's measured series
 * time — an op none times; a size, rank count or node count above every series of that op; or an
 * algorithm none of its points resolved to (whose fixed cost no table fitted): its error figures
 * were not measured on such a run. Empty where every run is inside them, and for a
 * preset with no calibration or no record of what it covers.
 */
export function coverageNote(name: string, acc: Readonly<Record<string, CalibrationAccuracy>>, runs: readonly RunShape[]): string {
  const covers = acc[name]?.covers;
  if (!Array.isArray(covers) || covers.length === 0) return "";
  const outside: string[] = [];
  const most = <T>(xs: readonly T[], f: (x: T) => number) => Math.max(...xs.map(f));
  for (const op of [...new Set(runs.map((r) => r.op))]) {
    const mine = runs.filter((r) => r.op === op);
    const measured = covers.filter((c) => c.op === op);
    if (measured.length === 0) {
      outside.push(`${op}, never measured`);
      continue;
    }
    const run = { bytes: most(mine, (r) => r.bytes), ranks: most(mine, (r) => r.ranks), nodes: most(mine, (r) => r.nodes) };
    const top = { bytes: most(measured, (c) => c.maxBytes), ranks: most(measured, (c) => c.ranks), nodes: most(measured, (c) => c.nodes) };
    // (Algorithms are known where accuracy.json records them; a run of several groups may resolve to several.)
    const algs = new Set(measured.flatMap((c) => c.algorithms ?? []));
    const unmeasured = algs.size === 0 ? [] : [...new Set(mine.flatMap((r) => (r.algorithm ? r.algorithm.split("+") : [])))].filter((a) => !algs.has(a));
    const why = [
      ...(unmeasured.length > 0 ? [`by ${unmeasured.join(" and ")} (measured: ${[...algs].join(", ")})`] : []),
      ...(run.bytes > top.bytes ? [`at ${sizeText(run.bytes)} (the largest measured: ${sizeText(top.bytes)})`] : []),
      ...(run.ranks > top.ranks ? [`on ${run.ranks} ranks (the most measured: ${top.ranks})`] : []),
      ...(run.nodes > top.nodes ? [`over ${run.nodes} nodes (the most measured: ${top.nodes})`] : []),
    ];
    if (why.length > 0) outside.push(`${op} ${why.join(" ")}`);
  }
  if (outside.length === 0) return "";
  const byOp = new Map<OpName, MeasuredRange[]>();
  for (const c of covers) byOp.set(c.op, [...(byOp.get(c.op) ?? []), c]);
  const span = (lo: number, hi: number, f: (x: number) => string) => (lo === hi ? f(lo) : `${f(lo)}-${f(hi)}`);
  const measuredText = [...byOp]
    .map(([op, cs]) => {
      const r = span(-most(cs, (c) => -c.ranks), most(cs, (c) => c.ranks), String);
      const n = most(cs, (c) => c.nodes);
      return `${op} on ${r} ranks${n > 1 ? ` over up to ${n} nodes` : ""}, ${span(-most(cs, (c) => -c.minBytes), most(cs, (c) => c.maxBytes), sizeText)}`;
    })
    .join("; ");
  return `# outside ${name}'s measured tables (${measuredText}): ${outside.join("; ")}: the error figures above were not measured on such runs\n`;
}

/**
 * The line under every table: how far the preset's estimates are from measured nccom-test tables
 * (in-sample, and with each series held out), or that it was never calibrated; then, for the
 * table's `runs`, where they lie outside what those tables measured (`coverageNote`). `changed`:
 * the fields where the run's preset differs from the shipped one of its name
 * (`differsFromShipped`), if any: the shipped preset's calibration is not the run's, said instead.
 */
export function accuracyNote(spec: { readonly name: string; readonly sources: Readonly<Record<string, string>> }, acc: Readonly<Record<string, CalibrationAccuracy>>, launchGiven: boolean, changed?: readonly string[], runs: readonly RunShape[] = []): string {
  const a = acc[spec.name];
  const launch = launchGiven ? "; --launch-us replaced its fixed costs" : "";
  if (!a) return `# accuracy: ${spec.name} is not calibrated against measured tables (its numbers are its preset's sources)${launch}\n`;
  const held = a.heldOut.points > 0 ? `, ${a.heldOut.geomeanErrorFactor.toFixed(2)}x on series left out of the fit` : ", no series left to hold out";
  const figures = `error ${a.inSample.geomeanErrorFactor.toFixed(2)}x in-sample${held}`;
  if (changed && changed.length > 0) {
    const fields = changed.length > 3 ? `${changed.slice(0, 3).join(", ")} and ${changed.length - 3} more` : changed.join(", ");
    return `# accuracy: this ${spec.name} is not the shipped preset (${fields} differ${changed.length === 1 ? "s" : ""}): the shipped one's calibration (${figures}) does not carry over to it${launch}\n`;
  }
  return `# accuracy: ${spec.name} fitted on ${a.series.length} measured series (${a.inSample.points} points): ${figures} (README: How accurate are the estimates)${launch}\n` + coverageNote(spec.name, acc, runs);
}
