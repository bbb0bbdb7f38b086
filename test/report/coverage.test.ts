// The line under the accuracy note that says where a run lies outside what the preset's measured
// tables time; and calibration/accuracy.json's record of them kept in step with the published logs.
import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { coverageNote } from "../../src/report/table.ts";
import { measuredRanges, publishedSeries } from "../../src/fit/files.ts";
import type { CalibrationAccuracy } from "../../src/ir/spec.ts";
import { main as nccom } from "../../src/cli/nccom.ts";

const figures = { points: 1, within25: 1, geomeanErrorFactor: 1 };
const acc: Record<string, CalibrationAccuracy> = {
  p: {
    series: ["a", "b"],
    inSample: figures,
    heldOut: figures,
    covers: [
      { op: "all-gather", ranks: 8, nodes: 1, minBytes: 1024, maxBytes: 524288, algorithms: ["intra-rdh"] },
      { op: "all-gather", ranks: 32, nodes: 1, minBytes: 1024, maxBytes: 1 << 20, algorithms: ["mesh"] },
      { op: "all-reduce", ranks: 64, nodes: 2, minBytes: 8, maxBytes: 1 << 30 },
    ],
  },
  none: { series: [], inSample: figures, heldOut: figures },
};

describe("coverage note", () => {
  it("says nothing for runs inside what was measured (any op a series times, at or below its sizes, ranks and nodes)", () => {
    expect(coverageNote("p", acc, [{ op: "all-gather", bytes: 1 << 20, ranks: 32, nodes: 1, algorithm: "mesh" }, { op: "all-gather", bytes: 1024, ranks: 8, nodes: 1, algorithm: "intra-rdh" }, { op: "all-reduce", bytes: 4, ranks: 2, nodes: 2, algorithm: "anything" }])).toBe("");
    expect(coverageNote("none", acc, [{ op: "send", bytes: 1, ranks: 2, nodes: 1 }])).toBe("");
    expect(coverageNote("unknown", acc, [{ op: "send", bytes: 1, ranks: 2, nodes: 1 }])).toBe("");
  });

  it("names an op never measured, an algorithm none of its series resolved to (where recorded), and a size, rank count or node count above every series of the op, with what was measured", () => {
    const note = coverageNote("p", acc, [
      { op: "reduce-scatter", bytes: 1024, ranks: 8, nodes: 1 },
      { op: "all-gather", bytes: 4 << 20, ranks: 64, nodes: 1, algorithm: "mesh+ring" },
      { op: "all-reduce", bytes: 1 << 20, ranks: 64, nodes: 4 },
    ]);
    expect(note).toBe(
      "# outside p's measured tables (all-gather on 8-32 ranks, 1 KiB-1 MiB; all-reduce on 64 ranks over up to 2 nodes, 8 B-1 GiB): reduce-scatter, never measured; all-gather by ring (measured: intra-rdh, mesh) at 4 MiB (the largest measured: 1 MiB) on 64 ranks (the most measured: 32); all-reduce over 4 nodes (the most measured: 2): the error figures above were not measured on such runs\n",
    );
  });

  it("calibration/accuracy.json records what the published series time, as the logs say", () => {
    const written = JSON.parse(readFileSync("calibration/accuracy.json", "utf8")) as Record<string, CalibrationAccuracy>;
    const series = publishedSeries();
    // (Each table's algorithms are the simulated ones, written with the figures: left out here.)
    const bare = (cs: readonly object[]) => cs.map((c) => ({ ...c, algorithms: undefined }));
    for (const inst of new Set(series.map((s) => s.instance))) expect(bare(written[inst]!.covers!), inst).toEqual(bare(measuredRanges(series.filter((s) => s.instance === inst))));
    expect(written["trn1"]!.covers!.find((c) => c.op === "permute")!.algorithms).toEqual(["ring"]);
  });

  it("npm run nccom says it on stderr under its accuracy note: trn1's tables time all-gathers up to 512 KiB, no all-reduce", () => {
    const err = (args: string[]) => {
      let e = "";
      nccom(args, () => {}, (s) => (e += s), {});
      return e;
    };
    const inside = err(["allg", "-r", "32", "-b", "1K", "-e", "512K", "-f", "8"]);
    expect(inside).toMatch(/# accuracy: trn1 fitted on/);
    expect(inside).not.toMatch(/# outside/);
    expect(err(["allg", "-r", "32", "-b", "1K", "-e", "4M", "-f", "8"])).toMatch(/# outside trn1's measured tables \(.*\): all-gather by kangaring \(measured: mesh, intra-rdh\) at 4 MiB \(the largest measured: 512 KiB\)/);
    expect(err(["allr", "-r", "8", "-b", "1K", "-e", "1K"])).toMatch(/# outside trn1's measured tables \(.*\): all-reduce, never measured/);
    // An edited preset's note already says the figures are not its own: nothing more.
    const edited = err(["allr", "-r", "8", "-b", "1K", "-e", "1K", "--set", "link.latencyPs=1"]);
    expect(edited).toMatch(/# accuracy: this trn1 is not the shipped preset/);
    expect(edited).not.toMatch(/# outside/);
  });
});
