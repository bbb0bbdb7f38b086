// npm run calibrate -- [--json] [--max-bytes SIZE] [--series ID]: the published nccom-test points
// (calibration/points.json) against the simulator, run as nccom-test runs them (its placement,
// auto algorithm selection, timing only), with a summary.
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import pino from "pino";
import { CcsimError } from "../ir/errors.ts";
import { withLaunch, type DeviceSpec } from "../ir/spec.ts";
import { loadDevice } from "../run/load.ts";
import { meshEngines } from "../enc/post.ts";
import { sweepPoint } from "../run/overrides.ts";
import { runScenario } from "../run/pipeline.ts";
import { parseNccomArgs } from "./nccom.ts";
import { parseSize } from "./sizes.ts";

export const POINTS_FILE = resolve(dirname(fileURLToPath(import.meta.url)), "../../calibration/points.json");

export interface Series {
  readonly id: string;
  readonly command: string;
  readonly instance: string;
  readonly args: readonly string[];
  readonly role: "fit" | "validation";
  readonly source: string;
  readonly pairs?: readonly (readonly [number, number])[];
  readonly algorithms?: Readonly<Record<string, string>>;
  readonly points: readonly { readonly bytes: number; readonly timeUs: number }[];
  /**
   * The same published table's time at its smallest size, where no data movement explains the
   * time: the run's fixed cost per collective is measured there (see `seriesSpec`).
   */
  readonly floor?: { readonly bytes: number; readonly timeUs: number; readonly source: string };
}

export interface PointResult {
  readonly series: string;
  readonly role: Series["role"];
  readonly bytes: number;
  readonly publishedUs: number;
  /** Simulated time, or undefined when the point failed (`error` says why). */
  readonly simulatedUs: number | undefined;
  readonly ratio: number | undefined;
  readonly algorithm: string | undefined;
  readonly publishedAlgorithm: string | undefined;
  /** The runtime's fixed cost per collective the point ran with (topsp.launchPs), in us. */
  readonly launchUs: number | undefined;
  readonly error?: string;
}

export interface Summary {
  readonly points: number;
  readonly failed: number;
  readonly within10: number;
  readonly within25: number;
  /** exp(mean |ln(simulated / published)|) over the points that ran. */
  readonly geomeanErrorFactor: number;
}

export function loadSeries(file = POINTS_FILE): Series[] {
  return (JSON.parse(readFileSync(file, "utf8")) as { series: Series[] }).series;
}

const silent = pino({ level: "silent" });

/** Run one published point as nccom-test would: its command line at that size, timing only (on `spec`, or the instance's preset). */
export function runPoint(s: Series, bytes: number, spec?: DeviceSpec): { timeUs: number; algorithm: string } {
  const a = parseNccomArgs([...s.args, "-b", String(bytes), "-e", String(bytes)], {});
  if (a === "help") throw new Error("help");
  const json = { ...a.scenario, ops: (a.scenario["ops"] as Record<string, unknown>[]).map((o) => (s.pairs ? { ...o, pairs: s.pairs } : o)) };
  const scn = sweepPoint({ file: s.id, json, flags: "" }, a.op, a.run.dtype, bytes, "none");
  const out = runScenario(scn, spec ?? loadDevice(scn.instance), silent);
  if (out.kind === "hang") throw new Error(`hung at ${bytes} B`);
  return { timeUs: out.ops[0]!.row.timeUs, algorithm: out.ops[0]!.row.algorithm };
}

const LAUNCH_STEP_PS = 10_000;

/**
 * The spec a series runs on: with a published floor, the runtime's fixed cost per collective of
 * that run is measured there — the floor's time minus the simulated time at the floor's size with
 * no fixed cost (10 ns steps, never below 0) — and becomes topsp.launchPs (an exact shift of the
 * whole run); without one, the preset's launch cost.
 */
export function seriesSpec(s: Series, base: DeviceSpec): DeviceSpec {
  if (!s.floor) return base;
  const devicePs = runPoint(s, s.floor.bytes, withLaunch(base, 0)).timeUs * 1e6;
  const launchPs = Math.max(0, Math.round((s.floor.timeUs * 1e6 - devicePs) / LAUNCH_STEP_PS) * LAUNCH_STEP_PS);
  return withLaunch(base, launchPs);
}

/** Run the published points up to `maxBytes`; `specOf` gives a series' device (default: its instance's preset). */
export function calibrate(series: readonly Series[], maxBytes = Number.MAX_SAFE_INTEGER, specOf: (s: Series) => DeviceSpec = (s) => loadDevice(s.instance)): PointResult[] {
  const out: PointResult[] = [];
  for (const s of series) {
    const wanted = s.points.filter((p) => p.bytes <= maxBytes);
    if (wanted.length === 0) continue;
    let spec: DeviceSpec | undefined;
    let failure: string | undefined;
    try {
      spec = seriesSpec(s, specOf(s));
    } catch (e) {
      if (!(e instanceof CcsimError)) throw e;
      failure = `the floor point: ${e.render()}`;
    }
    for (const p of wanted) {
      const base = { series: s.id, role: s.role, bytes: p.bytes, publishedUs: p.timeUs, publishedAlgorithm: s.algorithms?.[String(p.bytes)], launchUs: spec && spec.topsp.launchPs / 1e6 };
      const failed = (error: string) => out.push({ ...base, simulatedUs: undefined, ratio: undefined, algorithm: undefined, error });
      if (!spec) {
        failed(failure!);
        continue;
      }
      try {
        const r = runPoint(s, p.bytes, spec);
        out.push({ ...base, simulatedUs: r.timeUs, ratio: r.timeUs / p.timeUs, algorithm: r.algorithm });
      } catch (e) {
        if (!(e instanceof CcsimError)) throw e;
        failed(e.render());
      }
    }
  }
  return out;
}

export function summarize(points: readonly PointResult[]): Summary {
  const ran = points.filter((p) => p.ratio !== undefined);
  const within = (f: number) => ran.filter((p) => Math.abs(p.ratio! - 1) <= f).length;
  const logs = ran.map((p) => Math.abs(Math.log(p.ratio!)));
  return {
    points: points.length,
    failed: points.length - ran.length,
    within10: within(0.1),
    within25: within(0.25),
    geomeanErrorFactor: ran.length ? Math.exp(logs.reduce((a, b) => a + b, 0) / ran.length) : Number.NaN,
  };
}

/** Per instance family: the fit's choices the published facts leave open. */
export interface FamilyFit {
  /** The series whose measured fixed cost the preset records as topsp.launchPs (the newest runtime published). */
  readonly launchSeries: string;
  readonly launchWhy: string;
  /** The link rates per direction the facts allow (their per-link figure is direction-unknown). */
  readonly linkBytesPerSecond: readonly number[];
  readonly linkWhy: string;
}

export function loadFamilies(file = POINTS_FILE): Readonly<Record<string, FamilyFit>> {
  return (JSON.parse(readFileSync(file, "utf8")) as { families?: Record<string, FamilyFit> }).families ?? {};
}

/** The fitted parameters of one instance family. */
export interface PresetFit {
  readonly instance: string;
  readonly series: readonly string[];
  readonly points: number;
  /** topsp.launchPs: the fixed cost measured at the launch series' floor (10 ns steps). */
  readonly launchPs: number;
  /** The fitted collectives.meshFolds (a whole number of DMA engines). */
  readonly meshFolds: number;
  /** The mesh-fold values tried. */
  readonly foldsTried: readonly number[];
  /** The fitted link.bytesPerSecond, and the readings tried. */
  readonly linkBytesPerSecond: number;
  readonly linksTried: readonly number[];
  /** The fixed cost each series with a floor ran with (us), at the fitted values. */
  readonly seriesLaunchUs: Readonly<Record<string, number>>;
  /** Geometric-mean error factor of the fit points with the first reading and one fold, and fitted. */
  readonly before: number;
  readonly after: number;
}

/**
 * Fit an instance family's open parameters on its fit series (validation series never take part):
 * least squares on log time over collectives.meshFolds (a whole number of engines, 1 up to what the
 * ring channels leave a rank) and link.bytesPerSecond (the readings the facts allow). The fixed
 * cost per collective is not fitted: each series with a floor measures its own (`seriesSpec`), and
 * the preset records the launch series' (used by series without a floor).
 */
export function fitPreset(series: readonly Series[], maxBytes = Number.MAX_SAFE_INTEGER, families = loadFamilies()): PresetFit[] {
  const fits: PresetFit[] = [];
  for (const instance of [...new Set(series.filter((s) => s.role === "fit").map((s) => s.instance))].sort()) {
    const mine = series.filter((s) => s.role === "fit" && s.instance === instance);
    const preset = loadDevice(instance);
    const family = families[instance];
    const launchSeries = family && series.find((s) => s.id === family.launchSeries);
    const links = family?.linkBytesPerSecond.length ? family.linkBytesPerSecond : [preset.link.bytesPerSecond];
    const tried = Array.from({ length: Math.max(1, meshEngines(preset, preset.ring.defaultChannels, 1)) }, (_, k) => k + 1);
    const evaluate = (spec: DeviceSpec) => {
      const base = launchSeries ? seriesSpec(launchSeries, spec) : spec;
      const launches: Record<string, number> = {};
      const logs = mine.flatMap((s) => {
        // The launch series measured its fixed cost already.
        const sp = s === launchSeries ? base : seriesSpec(s, base);
        if (s.floor) launches[s.id] = sp.topsp.launchPs / 1e6;
        return s.points.filter((p) => p.bytes <= maxBytes).map((p) => Math.log(runPoint(s, p.bytes, sp).timeUs / p.timeUs));
      });
      return {
        cost: logs.reduce((a, l) => a + l * l, 0),
        factor: Math.exp(logs.reduce((a, l) => a + Math.abs(l), 0) / logs.length),
        launchPs: base.topsp.launchPs,
        launches,
      };
    };
    let before = Number.NaN;
    let best: (ReturnType<typeof evaluate> & { meshFolds: number; link: number }) | undefined;
    for (const link of links) {
      for (const meshFolds of tried) {
        const r = evaluate({ ...preset, link: { ...preset.link, bytesPerSecond: link }, collectives: { ...preset.collectives, meshFolds } });
        if (Number.isNaN(before)) before = r.factor;
        if (!best || r.cost < best.cost) best = { ...r, meshFolds, link };
      }
    }
    const points = mine.reduce((n, s) => n + s.points.filter((p) => p.bytes <= maxBytes).length, 0);
    fits.push({ instance, series: mine.map((s) => s.id), points, launchPs: best!.launchPs, meshFolds: best!.meshFolds, foldsTried: tried, linkBytesPerSecond: best!.link, linksTried: links, seriesLaunchUs: best!.launches, before, after: best!.factor });
  }
  return fits;
}

function formatReport(series: readonly Series[], points: readonly PointResult[]): string {
  const lines: string[] = [];
  for (const s of series) {
    const ps = points.filter((p) => p.series === s.id);
    if (ps.length === 0) continue;
    lines.push(`${s.id} (${s.role}): ${s.command}`);
    const launch = ps[0]!.launchUs;
    if (launch !== undefined) lines.push(s.floor ? `  fixed cost per collective ${launch.toFixed(2)} us: measured at the published floor (${s.floor.bytes} B in ${s.floor.timeUs} us)` : `  fixed cost per collective ${launch.toFixed(2)} us: the preset's topsp.launchPs (no published floor)`);
    lines.push(`  ${"size(B)".padStart(10)}  ${"published(us)".padStart(13)}  ${"simulated(us)".padStart(13)}  ${"sim/pub".padStart(7)}  algorithm`);
    for (const p of ps) {
      const alg = p.algorithm === undefined ? "" : `${p.algorithm}${p.publishedAlgorithm ? ` (published: ${p.publishedAlgorithm})` : ""}`;
      lines.push(`  ${String(p.bytes).padStart(10)}  ${p.publishedUs.toFixed(2).padStart(13)}  ${(p.simulatedUs === undefined ? "-" : p.simulatedUs.toFixed(2)).padStart(13)}  ${(p.ratio === undefined ? "-" : p.ratio.toFixed(2)).padStart(7)}  ${p.error ? `error: ${p.error}` : alg}`);
    }
  }
  for (const role of ["fit", "validation"] as const) {
    const sm = summarize(points.filter((p) => p.role === role));
    lines.push(`${role}: ${sm.points} points, ${sm.within10} within ±10 %, ${sm.within25} within ±25 %, ${sm.failed} failed, geometric-mean error factor ${sm.geomeanErrorFactor.toFixed(2)}`);
  }
  const all = summarize(points);
  lines.push(`all: ${all.points} points, ${all.within10} within ±10 %, ${all.within25} within ±25 %, ${all.failed} failed, geometric-mean error factor ${all.geomeanErrorFactor.toFixed(2)}`);
  return lines.join("\n") + "\n";
}

const HELP = `ccsim calibrate: the published nccom-test points (calibration/points.json) against the simulator

usage: npm run calibrate -- [--json] [--max-bytes SIZE] [--series ID]... [--fit]

Each point runs as nccom-test runs it: its command line (placement: -r fills NeuronCores in
order), auto algorithm selection, timing only. Per series: published and simulated time, their
ratio, the algorithm chosen (and the published one where --show-algorithm printed it); then, for
the fit series, the validation series and all: points within ±10 % and ±25 %, and the
geometric-mean error factor exp(mean |ln(simulated / published)|).
  --max-bytes SIZE  skip larger points (the 2-node 1 GiB point takes minutes)
  --fit             fit collectives.meshFolds (the engines a mesh-tape program spreads over)
                    and link.bytesPerSecond (among the readings calibration/points.json allows)
                    per instance family on the fit series (least squares on log time; validation
                    series are never fitted) and print them with the error before and after, and
                    the fixed cost per collective each series measures at its floor; record them
                    in the preset with a source note naming the series

A series with a published floor (its table's smallest size) runs with the runtime's fixed cost
per collective measured there: the floor's time minus the simulated device time at that size.
`;

export function main(argv: readonly string[], out: (s: string) => void, err: (s: string) => void): number {
  let json = false;
  let fit = false;
  let maxBytes = Number.MAX_SAFE_INTEGER;
  const only: string[] = [];
  try {
    for (let i = 0; i < argv.length; i++) {
      const t = argv[i]!;
      if (t === "-h" || t === "--help") {
        out(HELP);
        return 0;
      } else if (t === "--json") json = true;
      else if (t === "--fit") fit = true;
      else if (t === "--max-bytes") maxBytes = parseSize(argv[++i] ?? "", t);
      else if (t === "--series") only.push(argv[++i] ?? "");
      else throw new Error(`unknown option ${t}`);
    }
  } catch (e) {
    err(`calibrate: ${(e as Error).message}\n(try --help)\n`);
    return 1;
  }
  const all = loadSeries();
  const unknown = only.filter((id) => !all.some((s) => s.id === id));
  if (unknown.length > 0) {
    err(`calibrate: no series ${unknown.join(", ")} (series: ${all.map((s) => s.id).join(", ")})\n`);
    return 1;
  }
  const series = only.length > 0 ? all.filter((s) => only.includes(s.id)) : all;
  if (fit) {
    const fits = fitPreset(series, maxBytes);
    if (json) out(JSON.stringify({ fits }, null, 2) + "\n");
    else {
      for (const f of fits) {
        out(`${f.instance}: collectives.meshFolds = ${f.meshFolds} (of ${f.foldsTried.join(", ")}), link.bytesPerSecond = ${f.linkBytesPerSecond} (of ${f.linksTried.join(", ")}), least squares on log time over ${f.points} points of ${f.series.join(", ")}; geometric-mean error factor ${f.before.toFixed(3)} with one fold and ${f.linksTried[0]} B/s, ${f.after.toFixed(3)} fitted\n`);
        out(`  fixed cost per collective measured at each floor: ${Object.entries(f.seriesLaunchUs).map(([id, us]) => `${id} ${us.toFixed(2)} us`).join(", ")}; topsp.launchPs = ${f.launchPs} (${(f.launchPs / 1e6).toFixed(2)} us, the launch series')\n`);
      }
    }
    return 0;
  }
  const points = calibrate(series, maxBytes);
  if (json) {
    out(JSON.stringify({ points, summary: { fit: summarize(points.filter((p) => p.role === "fit")), validation: summarize(points.filter((p) => p.role === "validation")), all: summarize(points) } }, null, 2) + "\n");
  } else out(formatReport(series, points));
  return 0;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2), (s) => process.stdout.write(s), (s) => process.stderr.write(s));
}
