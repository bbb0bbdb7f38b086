// A long run says how far it is: the machine reports the share of its rings' descriptors run, the
// events and the simulated time, and the command line draws it (a terminal's redrawn line, or a
// line a minute in a log).
import { describe, expect, it } from "vitest";
import { compileProgram } from "../../src/enc/compile.ts";
import { loadDevice, loadScenario } from "../../src/run/load.ts";
import { simulate, type RunProgress } from "../../sim/index.ts";
import { DESC_BYTES } from "../../src/encd/udma.ts";

describe("run progress", () => {
  it("reports descriptors run of the rings' total, never past it, with events and simulated time that only grow", () => {
    const scn = { ...loadScenario("scenarios/ring8.json"), check: "none" as const };
    const ops = [{ ...scn.ops[0]!, bytes: 256 << 20 }];
    const spec = loadDevice(scn.instance, "devices");
    const { image } = compileProgram({ ...scn, ops }, spec, [0]);
    const total = image.devices.reduce((s, d) => s + d.queues.reduce((t, q) => t + (q.tx.length + q.rx.length) / DESC_BYTES, 0), 0);
    const reports: RunProgress[] = [];
    const res = simulate(spec, image, { storePayload: false, progress: (p) => reports.push(p), progressMs: 0 });
    expect(reports.length).toBeGreaterThan(2);
    for (const [k, p] of reports.entries()) {
      expect(p.descriptors).toBe(total);
      expect(p.descriptorsRun).toBeLessThanOrEqual(total);
      expect(p.events % 65536).toBe(0);
      if (k > 0) {
        expect(p.descriptorsRun).toBeGreaterThanOrEqual(reports[k - 1]!.descriptorsRun);
        expect(p.simPs).toBeGreaterThanOrEqual(reports[k - 1]!.simPs);
        expect(p.events).toBeGreaterThan(reports[k - 1]!.events);
      }
    }
    expect(reports.at(-1)!.simPs).toBeLessThanOrEqual(res.endPs);
    // the same run without a reporter ends at the same picosecond
    expect(simulate(spec, image, { storePayload: false }).endPs).toBe(res.endPs);
  });
});
