import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { assignShards, mergePartials, parseShardFlag, partialText, PARTIAL_FORMAT, PartialError, readPartial, resolveShard, statusReporter, type PartialFile } from "../../src/run/shard.ts";
import { fromWire, toWire, WireError } from "../../src/run/wire.ts";

describe("wire: results as JSON and back", () => {
  it("carries Maps, Sets, BigInts, typed arrays, undefined in arrays, NaN, infinities and -0 exactly", () => {
    const v = {
      m: new Map<unknown, unknown>([["a", 1], [2, new Set([1n, -3n])]]),
      t: new Uint8Array([1, 2, 255]),
      f: new Float64Array([0.5, -0, NaN]),
      b: new BigUint64Array([2n ** 64n - 1n]),
      list: [undefined, null, -0, NaN, Infinity, -Infinity, "x"],
      tagged: { $map: "a plain field that looks like a tag" },
    };
    const back = fromWire(JSON.parse(JSON.stringify(toWire(v)))) as typeof v;
    expect(back).toEqual(v);
    expect(Object.is(back.list[2], -0)).toBe(true);
    expect(back.t).toBeInstanceOf(Uint8Array);
    expect(back.b[0]).toBe(2n ** 64n - 1n);
    expect(back.tagged).toEqual({ $map: "a plain field that looks like a tag" });
    // A "__proto__" key is a key (JSON.parse makes it one), not the object's prototype.
    const proto = JSON.parse('{"__proto__": {"a": 1}, "b": 2}') as Record<string, unknown>;
    const protoBack = fromWire(JSON.parse(JSON.stringify(toWire(proto)))) as Record<string, unknown>;
    expect(Object.keys(protoBack)).toEqual(["__proto__", "b"]);
    expect(Object.getPrototypeOf(protoBack)).toBe(Object.prototype);
  });

  it("round-trips any JSON-like value with the extras mixed in (property)", () => {
    const leaf = fc.oneof(fc.integer(), fc.double(), fc.string(), fc.boolean(), fc.constant(null), fc.constant(undefined), fc.bigInt());
    const value = fc.letrec((tie) => ({
      v: fc.oneof({ depthSize: "small" }, leaf, fc.array(tie("v")), fc.dictionary(fc.string(), tie("v")), fc.array(fc.tuple(fc.string(), tie("v"))).map((e) => new Map(e)), fc.uint8Array()),
    })).v;
    fc.assert(
      fc.property(value, (v) => {
        expect(fromWire(JSON.parse(JSON.stringify(toWire(v))))).toEqual(v);
      }),
      { numRuns: 300 },
    );
  });

  it("refuses a malformed tag, naming where it is", () => {
    expect(() => fromWire({ a: [{ $number: "7" }] })).toThrow(WireError);
    expect(() => fromWire({ a: [{ $number: "7" }] })).toThrow(/a\[0\]/);
    expect(() => fromWire({ $nope: 1 })).toThrow(/unknown tag \$nope/);
  });
});

describe("shard flags and the scheduler's environment", () => {
  it("reads I/N and refuses what is not one", () => {
    expect(parseShardFlag("2/8", "--shard")).toEqual({ index: 2, count: 8 });
    expect(parseShardFlag("auto", "--shard")).toBe("auto");
    expect(() => parseShardFlag("8/8", "--shard")).toThrow(/I must be below N/);
    expect(() => parseShardFlag("0/0", "--shard")).toThrow(/N must be from 1/);
    expect(() => parseShardFlag("1-8", "--shard")).toThrow(/must be I\/N/);
  });

  it("takes a Slurm job array's task id less its minimum, of its count", () => {
    expect(resolveShard("auto", undefined, { SLURM_ARRAY_TASK_ID: "13", SLURM_ARRAY_TASK_MIN: "10", SLURM_ARRAY_TASK_COUNT: "4" })).toEqual({ index: 3, count: 4 });
    expect(resolveShard("auto", undefined, { SLURM_ARRAY_TASK_ID: "3", SLURM_ARRAY_TASK_COUNT: "4" })).toEqual({ index: 3, count: 4 });
    // An array with a step (0-14:2) numbers its tasks past its count: refused, not misassigned.
    expect(() => resolveShard("auto", undefined, { SLURM_ARRAY_TASK_ID: "14", SLURM_ARRAY_TASK_MIN: "0", SLURM_ARRAY_TASK_COUNT: "8" })).toThrow(/shard 14 of 8/);
    expect(() => resolveShard("auto", undefined, { SLURM_ARRAY_TASK_ID: "1" })).toThrow(/SLURM_ARRAY_TASK_COUNT is not/);
    // Each task runs one shard: --shards may repeat the array's count, not change it.
    expect(resolveShard("auto", 4, { SLURM_ARRAY_TASK_ID: "3", SLURM_ARRAY_TASK_COUNT: "4" })).toEqual({ index: 3, count: 4 });
    expect(() => resolveShard("auto", 8, { SLURM_ARRAY_TASK_ID: "3", SLURM_ARRAY_TASK_COUNT: "4" })).toThrow(/--shards 8 disagrees with the Slurm job array's 4 tasks \(SLURM_ARRAY_TASK_COUNT\)/);
    expect(() => resolveShard("auto", 4, { JOB_COMPLETION_INDEX: "9" })).toThrow(/the Kubernetes Indexed Job gives shard 9 of 4 \(an index past the Job's completions/);
    // A task below the array's first (an environment from another array): refused, not shard -2.
    expect(() => resolveShard("auto", undefined, { SLURM_ARRAY_TASK_ID: "1", SLURM_ARRAY_TASK_MIN: "3", SLURM_ARRAY_TASK_COUNT: "4" })).toThrow(/SLURM_ARRAY_TASK_ID 1 is below SLURM_ARRAY_TASK_MIN 3/);
    // A number past 2^53 is named as written, not as the double it rounds to.
    expect(() => resolveShard("auto", undefined, { SLURM_ARRAY_TASK_ID: "99999999999999999999", SLURM_ARRAY_TASK_COUNT: "4" })).toThrow(/SLURM_ARRAY_TASK_ID is "99999999999999999999", far past any shard/);
    expect(() => resolveShard("auto", undefined, { JOB_COMPLETION_INDEX: "0", CCSIM_SHARDS: "18446744073709551616" })).toThrow(/CCSIM_SHARDS is "18446744073709551616", far past any shard/);
  });

  it("takes a Kubernetes Indexed Job's index, of --shards or CCSIM_SHARDS", () => {
    expect(resolveShard("auto", 5, { JOB_COMPLETION_INDEX: "4" })).toEqual({ index: 4, count: 5 });
    expect(resolveShard("auto", undefined, { JOB_COMPLETION_INDEX: "0", CCSIM_SHARDS: "3" })).toEqual({ index: 0, count: 3 });
    expect(() => resolveShard("auto", undefined, { JOB_COMPLETION_INDEX: "0" })).toThrow(/give --shards N or set CCSIM_SHARDS/);
  });

  it("says which variables it looked for when no scheduler is there", () => {
    expect(() => resolveShard("auto", undefined, {})).toThrow(/SLURM_ARRAY_TASK_ID.*JOB_COMPLETION_INDEX/);
  });
});

describe("assignShards", () => {
  it("gives every piece one shard, the same for the same costs, and spreads the cost (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 2 ** 40 }), { minLength: 1, maxLength: 60 }), fc.integer({ min: 1, max: 12 }), (cost, n) => {
        const a = assignShards(cost, n);
        expect(assignShards(cost, n)).toEqual(a);
        expect(a.every((s) => Number.isInteger(s) && s >= 0 && s < n)).toBe(true);
        // Longest-processing-time first: no shard ends above the mean by more than the biggest piece.
        const load = new Array<number>(n).fill(0);
        a.forEach((s, k) => (load[s]! += cost[k]!));
        const total = cost.reduce((x, y) => x + y, 0);
        expect(Math.max(...load)).toBeLessThanOrEqual(total / n + Math.max(...cost));
      }),
      { numRuns: 200 },
    );
  });
});

describe("partial files", () => {
  const dir = mkdtempSync(join(tmpdir(), "ccsim-shard-"));
  const part = (index: number, pieces: number[], over: Partial<PartialFile> = {}): string => {
    const file = join(dir, `p${index}-${Math.random().toString(36).slice(2)}.json`);
    const p: PartialFile = { format: PARTIAL_FORMAT, tool: "nccom", argv: ["allr", "-r", "8"], version: "1.0.0", preset: "abc", shard: { index, count: 3 }, total: 5, pieces: pieces.map((k) => ({ index: k, result: { k, m: new Map([[k, k]]) } })), ...over };
    writeFileSync(file, partialText(p));
    return file;
  };

  it("merges every shard's pieces in order", () => {
    const m = mergePartials([part(2, [4]), part(0, [0, 3]), part(1, [1, 2])]);
    expect(m.results).toEqual([0, 1, 2, 3, 4].map((k) => ({ k, m: new Map([[k, k]]) })));
    expect(m.tool).toBe("nccom");
  });

  it("refuses a missing shard, a shard twice, overlapping pieces, another command, preset, version or count", () => {
    const a = part(0, [0, 3]);
    const b = part(1, [1, 2]);
    const c = part(2, [4]);
    expect(() => mergePartials([a, c])).toThrow(/shard 1 of 3 missing/);
    expect(() => mergePartials([a, b, b, c])).toThrow(/shard 1\/3 given twice/);
    expect(() => mergePartials([a, b, part(2, [3, 4])])).toThrow(/piece 3 is also in/);
    expect(() => mergePartials([a, b, part(2, [4], { argv: ["allg", "-r", "8"] })])).toThrow(/another command's partial/);
    expect(() => mergePartials([a, b, part(2, [4], { preset: "def" })])).toThrow(/ran on another preset/);
    expect(() => mergePartials([a, b, part(2, [4], { version: "2.0.0" })])).toThrow(/written by ccsim 2.0.0/);
    expect(() => mergePartials([a, b, part(2, [4], { shard: { index: 2, count: 4 } })])).toThrow(/is of 3 shards and 5 pieces/);
    expect(() => mergePartials([a, b, part(2, [])])).toThrow(/piece 4 of 5 in no partial/);
  });

  it("refuses a partial with one byte changed, or cut short, naming the file", () => {
    const f = part(0, [0, 3]);
    const text = readFileSync(f, "utf8");
    const edited = join(dir, "edited.json");
    writeFileSync(edited, text.replace('"k":3', '"k":4'));
    expect(() => readPartial(edited)).toThrow(PartialError);
    expect(() => readPartial(edited)).toThrow(/edited.json: its checksum does not match/);
    const cut = join(dir, "cut.json");
    writeFileSync(cut, text.slice(0, text.length / 2));
    expect(() => readPartial(cut)).toThrow(/cut.json: not a ccsim partial \(or truncated\)/);
    expect(() => readPartial(join(dir, "absent.json"))).toThrow(/absent.json: cannot read: ENOENT/);
  });
});

describe("statusReporter", () => {
  it("on a terminal redraws a line per piece; in a log, one line a minute", () => {
    let t = 0;
    const tty: string[] = [];
    const r = statusReporter((s) => tty.push(s), "run", 4, true, () => t);
    t = 1000;
    r.piece(false);
    r.piece(true);
    r.done();
    expect(tty[1]).toMatch(/^\rrun: 2\/4 done, 1 failed, 1 s, about 1 s left/);
    const log: string[] = [];
    t = 0;
    const l = statusReporter((s) => log.push(s), "run", 100, false, () => t);
    for (let k = 0; k < 100; k++) {
      t += 1500;
      l.piece(false);
    }
    expect(log.length).toBe(2);
    expect(log[0]).toMatch(/^run: 40\/100 done, 0 failed, 60 s, about 90 s left\n$/);
  });
});
