// The calibration report in the suite: the published points up to 64 MiB run as nccom-test runs
// them, and the summary may not get worse than the figures recorded in calibration/summary.json.
import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { calibrate, fitPreset, loadSeries, summarize } from "../../src/cli/calibrate.ts";
import { loadDevice } from "../../src/run/load.ts";

const recorded = JSON.parse(readFileSync("calibration/summary.json", "utf8"));

describe("calibration against the published nccom-test points", () => {
  const series = loadSeries();
  const points = calibrate(series, recorded.maxBytes);

  it("every point up to the recorded size runs", () => {
    expect(points.filter((p) => p.error)).toEqual([]);
    expect(points.length).toBe(recorded.all.points);
  });

  it.each(["fit", "validation", "all"] as const)("the %s summary is no worse than recorded", (role) => {
    const s = summarize(role === "all" ? points : points.filter((p) => p.role === role));
    const r = recorded[role];
    expect(s.within10).toBeGreaterThanOrEqual(r.within10);
    expect(s.within25).toBeGreaterThanOrEqual(r.within25);
    expect(s.geomeanErrorFactor).toBeLessThanOrEqual(r.geomeanErrorFactor + 0.001);
  });

  it("each series states its source and role; fit and validation series are both present", () => {
    for (const s of series) {
      expect(s.source).toMatch(/hardware-facts\.md §6\.3/);
      expect(["fit", "validation"]).toContain(s.role);
    }
    expect(new Set(series.map((s) => s.role))).toEqual(new Set(["fit", "validation"]));
    expect(series.reduce((n, s) => n + s.points.length, 0)).toBe(25);
  });

  it("trn1's topsp.launchPs and collectives.meshFolds are what the documented fit gives (npm run calibrate -- --fit --max-bytes 64M), and they lower the fit error", () => {
    const [fit] = fitPreset(series, 64 << 20);
    expect(fit!.instance).toBe("trn1");
    expect(fit!.points).toBe(14);
    expect(fit!.foldsTried).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    const trn1 = loadDevice("trn1");
    expect(trn1.topsp.launchPs).toBe(fit!.launchPs);
    expect(trn1.collectives.meshFolds).toBe(fit!.meshFolds);
    for (const k of ["topsp.launchPs", "collectives.meshFolds"]) expect(trn1.sources[k]).toMatch(/npm run calibrate -- --fit --max-bytes 64M/);
    expect(fit!.after).toBeLessThan(fit!.before);
  });
});
