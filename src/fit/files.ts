// What calibration reads and writes besides the logs: the manifest of published series (which
// preset each runs on), a fitted preset as a file, and the accuracy table (calibration/accuracy.json
// and the README section written from it).
import { readFileSync } from "node:fs";
import { basename, dirname, resolve } from "node:path";
import { seriesOf, type ErrorSummary, type Evaluated, type FitResult, type Series } from "./fit.ts";
import { parseConsoleLog } from "./log.ts";
import { PROJECT_ROOT } from "../run/paths.ts";
import type { MeasuredRange } from "../ir/spec.ts";

export const MANIFEST = resolve(PROJECT_ROOT, "calibration/published.json");
export const ACCURACY = resolve(PROJECT_ROOT, "calibration/accuracy.json");

/** The published series of the manifest, each on the preset it names. */
export function publishedSeries(manifest = MANIFEST): Series[] {
  const m = JSON.parse(readFileSync(manifest, "utf8")) as { logs: { file: string; instance: string }[] };
  return m.logs.map((l) => {
    const file = resolve(dirname(manifest), l.file);
    return seriesOf(parseConsoleLog(file, readFileSync(file, "utf8")), l.instance, basename(l.file, ".log"));
  });
}

/**
 * The fitted preset as a file: the start preset's JSON with the moved fields set and a source note
 * on each naming the series it was fitted on.
 */
export function presetJson(startFile: string, r: FitResult, name: string, note: string): string {
  const j = JSON.parse(readFileSync(startFile, "utf8")) as Record<string, Record<string, unknown>> & { sources: Record<string, string>; name: string; description: string };
  j.name = name;
  for (const m of r.moved) {
    const [a, b, c] = m.field.split(".") as [string, string, string?];
    j[a] ??= {};
    if (c !== undefined) {
      const sub = ((j[a] as Record<string, unknown>)[b] ??= {}) as Record<string, number>;
      if (m.to === 0) delete sub[c];
      else sub[c] = m.to;
    } else if (a === "host" && m.to === 0) delete (j[a] as Record<string, unknown>)[b];
    else (j[a] as Record<string, unknown>)[b] = m.to;
    if (m.to === 0 && a === "host") delete j.sources[m.field];
    else j.sources[m.field] = `fitted (was ${Number.isNaN(m.from) ? "absent" : m.from}): ${note}`;
  }
  const host = j["host"] as Record<string, unknown> | undefined;
  if (host && host["algorithmPs"] && Object.keys(host["algorithmPs"] as object).length === 0) delete host["algorithmPs"];
  if (host && Object.keys(host).length === 0) delete j["host"];
  return formatPreset(j);
}

/** A preset as the shipped files are written: two-space JSON, lists of numbers or names on one line. */
export function formatPreset(j: unknown): string {
  return JSON.stringify(j, null, 2).replace(/\[\s*([^[\]{}]*?)\s*\]/g, (_m, inner: string) => `[${inner.split(/,\s*/).map((x) => x.trim()).join(", ")}]`) + "\n";
}

/** The held-out and in-sample figures per preset, as calibration/accuracy.json keeps them. */
export interface Accuracy {
  readonly [instance: string]: {
    readonly series: readonly string[];
    readonly inSample: ErrorSummary;
    readonly heldOut: ErrorSummary;
    readonly perSeries: readonly { readonly series: string; readonly inSample: ErrorSummary; readonly heldOut: ErrorSummary }[];
    readonly covers: readonly MeasuredRange[];
  };
}

/**
 * What each series times (op, ranks, nodes, sizes, and with `runs`, the algorithms its points
 * resolve to on the preset): a run outside all of them was never measured.
 */
export function measuredRanges(series: readonly Series[], runs?: readonly Evaluated[]): MeasuredRange[] {
  return series.map((s) => {
    const algorithms = runs && [...new Set(runs.filter((e) => e.series === s.id && e.run).map((e) => e.run!.algorithm))].sort();
    return { op: s.op, ranks: s.ranks, nodes: s.nodes, minBytes: Math.min(...s.points.map((p) => p.bytes)), maxBytes: Math.max(...s.points.map((p) => p.bytes)), ...(algorithms ? { algorithms } : {}) };
  });
}

export function accuracyMarkdown(acc: Accuracy): string {
  const lines = [
    "Written by `npm run calibrate -- --cross-validate --write-accuracy` (do not edit by hand; points up to",
    "--max-bytes where given). Each published series runs exactly as typed on the preset it belongs to.",
    "*In-sample*: the preset as shipped, fitted on every series. *Held out*: the preset's fixed costs refitted",
    "without that series (those no other series exercises at 0; device parameters as shipped), scored on it:",
    "what to expect of a command line unlike any published one. Error factor = exp(mean |ln(simulated / published)|);",
    "within ±25 %: 0.8 to 1.25 of the published time.",
    "",
    "| preset | series | points | in-sample: within ±25 % | error factor | held out: within ±25 % | error factor |",
    "|---|---|---|---|---|---|---|",
  ];
  for (const [inst, a] of Object.entries(acc)) {
    const held = (h: ErrorSummary) => (h.points === 0 ? "- | - (one series: none to hold out)" : `${h.within25} | ${h.geomeanErrorFactor.toFixed(2)}`);
    for (const p of a.perSeries) lines.push(`| ${inst} | ${p.series} | ${p.inSample.points} | ${p.inSample.within25} | ${p.inSample.geomeanErrorFactor.toFixed(2)} | ${held(p.heldOut)} |`);
    lines.push(`| **${inst}** | all | ${a.inSample.points} | ${a.inSample.within25} | ${a.inSample.geomeanErrorFactor.toFixed(2)} | ${held(a.heldOut)} |`);
  }
  return lines.join("\n");
}
