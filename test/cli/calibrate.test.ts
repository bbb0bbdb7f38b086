// The calibration report in the suite: the published points up to 64 MiB run as nccom-test runs
// them, and the summary may not get worse than the figures recorded in calibration/summary.json.
import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { calibrate, fitLaunch, loadSeries, summarize } from "../../src/cli/calibrate.ts";
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

  it("trn1's topsp.launchPs is what the documented fit gives (npm run calibrate -- --fit --max-bytes 64M), and it lowers the fit error", () => {
    const [fit] = fitLaunch(series, 64 << 20);
    expect(fit!.instance).toBe("trn1");
    expect(fit!.points).toBe(14);
    expect(loadDevice("trn1").topsp.launchPs).toBe(fit!.launchPs);
    expect(loadDevice("trn1").sources["topsp.launchPs"]).toMatch(/npm run calibrate -- --fit --max-bytes 64M/);
    expect(fit!.after).toBeLessThan(fit!.before);
  });
});
