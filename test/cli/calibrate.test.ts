// The calibration report in the suite: the published points up to 64 MiB run as nccom-test runs
// them, and the summary may not get worse than the figures recorded in calibration/summary.json.
import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { calibrate, fitPreset, loadSeries, runPoint, seriesSpec, summarize } from "../../src/cli/calibrate.ts";
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
    expect(series.reduce((n, s) => n + s.points.length, 0)).toBe(34);
    for (const s of series) if (s.floor) expect(s.floor.source).toMatch(/hardware-facts\.md §6\.3/);
  });

  it("trn1's collectives.meshFolds and link.bytesPerSecond are what the documented fit gives, and topsp.launchPs the fixed cost it measures at the newest runtime's floor (npm run calibrate -- --fit --max-bytes 64M)", () => {
    const [fit] = fitPreset(series, 64 << 20);
    expect(fit!.instance).toBe("trn1");
    expect(fit!.points).toBe(13);
    expect(fit!.foldsTried).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    expect(fit!.linksTried).toEqual([48e9, 96e9]);
    const trn1 = loadDevice("trn1");
    expect(trn1.topsp.launchPs).toBe(fit!.launchPs);
    expect(fit!.launchPs / 1e6).toBe(fit!.seriesLaunchUs["trn1-r32-allg-fp32"]);
    expect(trn1.collectives.meshFolds).toBe(fit!.meshFolds);
    expect(trn1.link.bytesPerSecond).toBe(fit!.linkBytesPerSecond);
    for (const k of ["topsp.launchPs", "collectives.meshFolds", "link.bytesPerSecond"]) expect(trn1.sources[k]).toMatch(/npm run calibrate -- --fit --max-bytes 64M/);
    expect(fit!.after).toBeLessThan(fit!.before);
  });

  it("a series' fixed cost is measured at its floor: the floor point itself comes out at the published time (to 10 ns), and it is never negative", () => {
    for (const s of series.filter((x) => x.floor)) {
      const spec = seriesSpec(s, loadDevice(s.instance));
      expect(spec.topsp.launchPs).toBeGreaterThanOrEqual(0);
      const t = runPoint(s, s.floor!.bytes, spec).timeUs;
      expect(Math.abs(t - s.floor!.timeUs)).toBeLessThanOrEqual(0.006);
    }
  });

  it("a floor that cannot run fails every point of its series, saying so (the others still run)", () => {
    const s = series.find((x) => x.id === "trn1-r8-allg-fp32")!;
    const bad = { ...s, floor: { ...s.floor!, bytes: 6 } };
    const pts = calibrate([bad, series.find((x) => x.id === "trn1-r2-allr-uint8")!], 64 << 20);
    expect(pts.filter((p) => p.series === bad.id).map((p) => p.error)).toEqual(Array(3).fill(expect.stringMatching(/^the floor point: .*size 6: ops\[0\]\.bytes: must be a multiple .*\[SCN1006\]$/)));
    expect(pts.find((p) => p.series === "trn1-r2-allr-uint8")!.ratio).toBeDefined();
    expect(summarize(pts).failed).toBe(3);
  });
});
