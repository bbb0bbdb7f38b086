// Groups that resolve differently are resolved, composed and reported per (op, group): the order
// the groups are listed in changes nothing.
import { describe, expect, it } from "vitest";
import pino from "pino";
import { runScenario } from "../../src/run/pipeline.ts";
import { compileProgram } from "../../src/enc/compile.ts";
import { InternalError } from "../../src/ir/errors.ts";
import { EncAlgType } from "../../src/ir/enums.ts";
import { scenario, trn1 } from "../helpers.ts";
import { loadDevice } from "../../src/run/load.ts";

const silent = pino({ level: "silent" });

function rows(groups: number[][]) {
  const out = runScenario(
    scenario({
      ranks: 8,
      algorithm: "auto",
      allowedAlgorithms: [EncAlgType.RING, EncAlgType.MESH],
      replicaGroups: groups,
      ops: [{ op: "all-reduce", bytes: 1 << 20, dtype: "fp32", reduce: "sum" }],

    }),
    trn1,
    silent,
  );
  if (out.kind !== "done") throw new Error("hung");
  return out.ops.map((o) => o.row);
}

describe("per-(op, group) resolution", () => {
  it("two ranks on mesh and six on the ring, in either order: same time, same busbw, each group named", () => {
    const a = rows([[0, 1], [2, 3, 4, 5, 6, 7]]);
    const b = rows([[2, 3, 4, 5, 6, 7], [0, 1]]);
    expect(a[0]!.check).toBe("pass");
    expect(b[0]!.check).toBe("pass");
    expect(a[0]!.algorithm).toBe("mesh+ring");
    expect(b[0]!.algorithm).toBe("mesh+ring");
    expect(a[0]!.timeUs).toBe(b[0]!.timeUs);
    expect(a[0]!.busbwGBps).toBe(b[0]!.busbwGBps);
    expect(a[0]!.ranks).toBe(6);
    expect(a[0]!.groups).toEqual([
      { group: 0, ranks: 2, algorithm: "mesh" },
      { group: 1, ranks: 6, algorithm: "ring" },
    ]);
  });

  it("groups that resolve alike report one algorithm and no group list", () => {
    const r = rows([[0, 1, 2, 3], [4, 5, 6, 7]]);
    expect(r[0]!.groups).toBeUndefined();
  });

  it("a hierarchical group runs beside flat groups on two nodes, in either order", () => {
    const run = (groups: number[][]) =>
      runScenario(
        scenario({
          ranks: 16,
          nodes: 2,
          algorithm: "auto",
          allowedAlgorithms: [EncAlgType.RING, EncAlgType.HIER],
          replicaGroups: groups,
          ops: [
            { op: "all-reduce", bytes: 65536, dtype: "fp32", reduce: "sum" },
            { op: "all-gather", bytes: 65536, dtype: "bf16", reduce: "sum" },
          ],
        }),
        trn1,
        silent,
      );
    const a = run([[0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7], [12, 13, 14, 15]]);
    const b = run([[4, 5, 6, 7], [0, 1, 2, 3, 8, 9, 10, 11], [12, 13, 14, 15]]);
    if (a.kind !== "done" || b.kind !== "done") throw new Error("hung");
    for (const [x, y] of a.ops.map((o, i) => [o.row, b.ops[i]!.row] as const)) {
      expect(x.check).toBe("pass");
      expect(y.check).toBe("pass");
      expect(x.algorithm).toMatch(/^hier\(.*\)\+ring$/);
      expect(y.algorithm).toBe(x.algorithm);
      expect(y.timeUs).toBe(x.timeUs);
    }
  });
});

describe("groups whose ring is not over direct links", () => {
  it("are said in one warning, a long group by its first and last ranks", () => {
    const lines: string[] = [];
    const log = pino({ level: "warn" }, { write: (line: string) => void lines.push(line) });
    const out = runScenario(
      scenario({
        instance: "inf2-48xl",
        ranks: 24,
        ranksPerDevice: 2,
        algorithm: "ring",
        check: "none",
        replicaGroups: [Array.from({ length: 18 }, (_, r) => r), [18, 19, 20, 21, 22, 23]],
        ops: [{ op: "all-gather", bytes: 36864, dtype: "fp32", reduce: "sum" }],
      }),
      loadDevice("inf2-48xl"),
      log,
    );
    expect(out.kind).toBe("done");
    const warned = lines.map((l) => JSON.parse(l) as { msg: string; group?: unknown; groups?: number }).filter((w) => w.msg.includes("no ring over direct links"));
    expect(warned).toHaveLength(1);
    expect(warned[0]!.groups).toBe(2);
    expect(warned[0]!.group).toBe("0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, ..., 16, 17 (18 ranks)");
  });
});

describe("an op's own replica groups (a stream's, as --streams-json gives them)", () => {
  const own = (ops: Parameters<typeof scenario>[0]["ops"], over: Partial<Parameters<typeof scenario>[0]> = {}) => runScenario(scenario({ ranks: 8, algorithm: "ring", check: "values", ops, ...over }), trn1, silent);

  it("each op runs, is checked and is reported over its own groups, alone and concurrently", () => {
    const ops = [
      { op: "all-reduce" as const, bytes: 1 << 16, dtype: "fp32" as const, reduce: "sum" as const },
      { op: "all-gather" as const, bytes: 1 << 14, dtype: "fp32" as const, reduce: "sum" as const, stream: 1, replicaGroups: [[0, 2, 4, 6], [1, 3, 5, 7]] },
    ];
    for (const concurrent of [false, true]) {
      const out = own(ops, concurrent ? { concurrent: true } : {});
      if (out.kind !== "done") throw new Error("hung");
      expect(out.ops.map((o) => [o.row.ranks, o.row.check])).toEqual([[8, "pass"], [4, "pass"]]);
      if (concurrent) expect(out.concurrent!.checked).toBe("values");
      if (concurrent) expect(out.concurrent!.mismatch).toBeUndefined();
    }
    // The same all-gather over the scenario's own groups of four: the same time alone.
    const scnGroups = own([ops[1]!].map(({ replicaGroups: _g, ...o }) => o), { replicaGroups: [[0, 2, 4, 6], [1, 3, 5, 7]] });
    const opGroups = own([ops[1]!]);
    if (scnGroups.kind !== "done" || opGroups.kind !== "done") throw new Error("hung");
    expect(opGroups.ops[0]!.row.timeUs).toBe(scnGroups.ops[0]!.row.timeUs);
  });

  it("one program runs ops over different groups only when it runs them concurrently (each stream over its own)", () => {
    const op = { op: "all-reduce" as const, bytes: 64, dtype: "fp32" as const, reduce: "sum" as const };
    const ops = [op, { ...op, stream: 1, replicaGroups: [[0, 1, 2, 3], [4, 5, 6, 7]] }];
    expect(() => compileProgram(scenario({ ranks: 8, ops }), trn1, [0, 1])).toThrow(InternalError);
    expect(() => compileProgram(scenario({ ranks: 8, concurrent: true, ops }), trn1, [0, 1])).not.toThrow();
  });

  it("a repeated op on its stream reuses the earlier op's run alone: the same figures as running it", () => {
    const op = { op: "all-reduce" as const, bytes: 1 << 16, dtype: "fp32" as const, reduce: "sum" as const };
    const ops = [op, op, { ...op, op: "all-gather" as const, stream: 1 }];
    const reused = runScenario(scenario({ ranks: 8, check: "values", concurrent: true, ops }), trn1, silent);
    const ran = runScenario(scenario({ ranks: 8, check: "values", ops }), trn1, silent);
    if (reused.kind !== "done" || ran.kind !== "done") throw new Error("hung");
    expect(reused.ops[1]).toBe(reused.ops[0]);
    expect(ran.ops[1]).not.toBe(ran.ops[0]);
    expect(reused.ops.map((o) => [o.row.timeUs, o.row.algorithm, o.row.check])).toEqual(ran.ops.map((o) => [o.row.timeUs, o.row.algorithm, o.row.check]));
    expect(reused.concurrent!.checked).toBe("values");
  });

  it("an op's groups are checked as the scenario's, errors naming the op [CMP1001, CMP1003]", () => {
    const op = { op: "all-reduce" as const, bytes: 64, dtype: "fp32" as const, reduce: "sum" as const };
    expect(() => own([op, { ...op, replicaGroups: [[0, 1, 2, 3], [4, 5, 6, 9]] }])).toThrow(expect.objectContaining({ code: "CMP1001", path: "ops[1].replicaGroups[1][3]" }));
    expect(() => own([op, { ...op, replicaGroups: [[0, 1, 2, 3]] }])).toThrow(expect.objectContaining({ code: "CMP1003", path: "ops[1].replicaGroups" }));
  });
});
