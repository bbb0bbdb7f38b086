// nccom-test's console output (and its --report-to-json-file report) read back as measured points:
// the command line, then one or more tables. Two output eras (hardware-facts.md §6.4): the older
// prints integer `time(us)` and bandwidth in GiB/s, the newer `time:avg(us)` to two decimals and
// GB/s (10^9). A log that does not read as one of them is refused with its file, line and value.
import { DTYPES, dtypeSize, type Dtype } from "../ir/dtypes.ts";
import { MAX_SWEEP_SIZES } from "../ir/sizes.ts";

export type Era = "older" | "newer";

export interface MeasuredRow {
  readonly bytes: number;
  readonly count: number;
  readonly dtype: Dtype;
  readonly timeUs: number;
  readonly algbw: number;
  readonly busbw: number;
  /** The --show-algorithm column, where printed. */
  readonly algorithm?: string;
  /** The row's line in the file (1-based); 0 for a JSON report. */
  readonly line: number;
}

export interface MeasuredLog {
  readonly file: string;
  /** The command line's arguments after `nccom-test`. */
  readonly argv: readonly string[];
  /** Variables the command line sets before `nccom-test` (`NEURON_RT_DBG_CC_DMA_PACKET_SIZE=4096 nccom-test ...`). */
  readonly env: Readonly<Record<string, string>>;
  readonly era: Era;
  /** Bytes of the bandwidth columns' GB: 1e9 (newer) or 2^30 (older). */
  readonly gb: number;
  /** The tables (several with --streams-json), each its rows. */
  readonly tables: readonly (readonly MeasuredRow[])[];
}

/** A log that does not read as nccom-test's output: file, line and the value at fault. */
export class LogError extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
    message: string,
    readonly value?: unknown,
  ) {
    super(`${file}${line > 0 ? `:${line}` : ""}: ${message}${value === undefined ? "" : ` (got ${JSON.stringify(value)})`}`);
  }
}

const DTYPE_ALIASES: Readonly<Record<string, Dtype>> = { fp8: "fp8e4" as Dtype };

/** nccom-test's type column or -d value as a dtype (undefined: not one). */
export function dtypeOf(s: string): Dtype | undefined {
  if ((DTYPES as readonly string[]).includes(s)) return s as Dtype;
  return DTYPE_ALIASES[s];
}

/** Split a command line on white space, keeping quoted words whole. */
export function splitCommand(line: string): string[] {
  return [...line.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]!);
}

/**
 * Rows a table (or a JSON report) may hold: what one sweep makes at most, as `npm run nccom` runs
 * it (a log of a hundred thousand rows took 30 s and 1.3 GB to fit before it was refused).
 */
const MAX_ROWS = MAX_SWEEP_SIZES;

/**
 * Read a console log: the first non-empty line is the command (`nccom-test ...`, a shell prompt
 * `$ ` allowed before it), then tables, each a header line, rows and `Avg bus bandwidth`.
 */
export function parseConsoleLog(file: string, text: string): MeasuredLog {
  const lines = text.split(/\r?\n/);
  let i = 0;
  while (i < lines.length && lines[i]!.trim() === "") i++;
  if (i === lines.length) throw new LogError(file, 0, "empty: expected the nccom-test command line, then its table");
  const cmd = splitCommand(lines[i]!.trim().replace(/^\$\s*/, ""));
  const at = cmd.findIndex((w) => /(^|\/)nccom-test$/.test(w));
  if (at < 0) throw new LogError(file, i + 1, "the first line must be the nccom-test command line (nccom-test <op> -r N ...)", lines[i]!.trim().slice(0, 80));
  const argv = cmd.slice(at + 1);
  const env = envOf(cmd.slice(0, at));
  i++;
  const tables: MeasuredRow[][] = [];
  let era: Era | undefined;
  for (; i < lines.length; i++) {
    const raw = lines[i]!.trim();
    // Blank lines and ccsim's own "#" notes are not part of a table.
    if (raw === "" || raw.startsWith("#")) continue;
    if (!raw.startsWith("size(B)")) throw new LogError(file, i + 1, "expected a table header starting size(B)", raw.slice(0, 80));
    const header = raw.split(/\s+/);
    const col = (name: string) => header.indexOf(name);
    const time = col("time(us)") >= 0 ? col("time(us)") : col("time:avg(us)");
    if (time < 0) throw new LogError(file, i + 1, "the header has no time(us) (older runtime) or time:avg(us) (newer runtime) column", raw.slice(0, 80));
    const thisEra: Era = header[time] === "time(us)" ? "older" : "newer";
    if (era && era !== thisEra) throw new LogError(file, i + 1, `a ${thisEra} runtime's table after a ${era} one`, header[time]);
    era = thisEra;
    for (const need of ["count(elems)", "type", "algbw(GB/s)", "busbw(GB/s)"]) if (col(need) < 0) throw new LogError(file, i + 1, `the header has no ${need} column`, raw.slice(0, 80));
    const rows: MeasuredRow[] = [];
    for (i++; i < lines.length; i++) {
      const r = lines[i]!.trim();
      if (r === "" || r.startsWith("#")) continue;
      if (/^Avg bus bandwidth:/.test(r)) break;
      const cells = r.split(/\s+/);
      if (cells.length !== header.length) throw new LogError(file, i + 1, `a row of ${cells.length} columns under a header of ${header.length}`, r.slice(0, 80));
      const num = (c: number, what: string, positive: boolean) => {
        const v = Number(cells[c]);
        if (!Number.isFinite(v) || v < 0 || (positive && v === 0)) throw new LogError(file, i + 1, `${what} must be a ${positive ? "positive" : "non-negative"} number`, cells[c]);
        return v;
      };
      const bytes = num(col("size(B)"), "size(B)", true);
      const count = num(col("count(elems)"), "count(elems)", true);
      if (!Number.isInteger(bytes)) throw new LogError(file, i + 1, "size(B) must be a whole number", cells[col("size(B)")]);
      if (!Number.isInteger(count)) throw new LogError(file, i + 1, "count(elems) must be a whole number", cells[col("count(elems)")]);
      const dtype = dtypeOf(cells[col("type")]!);
      if (!dtype) throw new LogError(file, i + 1, `type must be one of ${DTYPES.join(", ")}`, cells[col("type")]);
      const timeUs = num(time, header[time]!, true);
      const algbw = num(col("algbw(GB/s)"), "algbw(GB/s)", false);
      const busbw = num(col("busbw(GB/s)"), "busbw(GB/s)", false);
      if (count * dtypeSize(dtype) > bytes) throw new LogError(file, i + 1, `count(elems) ${count} of ${dtype} is more than size(B) ${bytes}`, count);
      const alg = col("algorithm") >= 0 ? cells[col("algorithm")] : undefined;
      rows.push({ bytes, count, dtype, timeUs, algbw, busbw, ...(alg ? { algorithm: alg } : {}), line: i + 1 });
      if (rows.length > MAX_ROWS) throw new LogError(file, i + 1, `more than ${MAX_ROWS} rows in one table: a sweep makes at most ${MAX_ROWS} sizes`);
    }
    if (rows.length === 0) throw new LogError(file, i + 1, "a table with no rows");
    tables.push(rows);
  }
  if (!era) throw new LogError(file, lines.length, "no table after the command line");
  const log: MeasuredLog = { file, argv, env, era, gb: era === "older" ? 2 ** 30 : 1e9, tables };
  checkBandwidths(log);
  return log;
}

/**
 * A --report-to-json-file report with the command that wrote it: `{"results": [{"size(B)",
 * "count(elems)", "type", "algbw(GB/s)", "busbw(GB/s)", "time:avg(us)"}]}` (newer era: GB/s).
 */
export function parseJsonReport(file: string, text: string, command: string): MeasuredLog {
  let json: unknown;
  try {
    // (A leading byte-order mark is read past, as by the scenario reader.)
    json = JSON.parse(text.replace(/^\uFEFF/, ""));
  } catch (e) {
    throw new LogError(file, 0, `not valid JSON: ${(e as Error).message}`);
  }
  const results = (json as { results?: unknown })?.results;
  if (!Array.isArray(results) || results.length === 0) throw new LogError(file, 0, 'expected {"results": [...]} with at least one row (nccom-test --report-to-json-file)');
  if (results.length > MAX_ROWS) throw new LogError(file, 0, `${results.length} results: a sweep makes at most ${MAX_ROWS} sizes`);
  const cmd = splitCommand(command.trim());
  const at = cmd.findIndex((w) => /(^|\/)nccom-test$/.test(w));
  const rows = results.map((r: Record<string, unknown>, k): MeasuredRow => {
    const num = (key: string, positive: boolean) => {
      const v = r?.[key];
      if (typeof v !== "number" || !Number.isFinite(v) || v < 0 || (positive && v === 0)) throw new LogError(file, 0, `results[${k}]["${key}"] must be a ${positive ? "positive" : "non-negative"} number`, v);
      return v;
    };
    const dtype = dtypeOf(String(r?.["type"]));
    if (!dtype) throw new LogError(file, 0, `results[${k}].type must be one of ${DTYPES.join(", ")}`, r?.["type"]);
    return { bytes: num("size(B)", true), count: num("count(elems)", true), dtype, timeUs: num("time:avg(us)", true), algbw: num("algbw(GB/s)", false), busbw: num("busbw(GB/s)", false), line: 0 };
  });
  const log: MeasuredLog = { file, argv: at >= 0 ? cmd.slice(at + 1) : cmd, env: envOf(at >= 0 ? cmd.slice(0, at) : []), era: "newer", gb: 1e9, tables: [rows] };
  checkBandwidths(log);
  return log;
}

/** The `NAME=value` words a command line sets before its command (a shell's prompt or a launcher's words are not). */
function envOf(words: readonly string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const w of words) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(w);
    if (m) env[m[1]!] = m[2]!;
  }
  return env;
}

/** algbw must be size / time in the era's unit (printed to two decimals): a table whose figures disagree is not this era's. */
function checkBandwidths(log: MeasuredLog): void {
  for (const rows of log.tables) {
    for (const r of rows) {
      const want = r.bytes / (r.timeUs * 1e-6) / log.gb;
      if (Math.abs(want - r.algbw) > 0.02 * want + 0.011) {
        throw new LogError(log.file, r.line, `algbw ${r.algbw} is not size / time (${want.toFixed(2)} in the ${log.era} runtime's ${log.gb === 1e9 ? "GB/s" : "GiB/s"}): the time or size column is wrong, or the table is of the other era`, r.algbw);
      }
    }
  }
}
