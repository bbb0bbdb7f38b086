import { describe, expect, it } from "vitest";
import { EXIT } from "../../src/cli/sim.ts";
import { runSim } from "../run-sim.ts";
import { corruptFirstReduce, dropFirstRemoteSemaInc } from "../helpers-image.ts";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseJson } from "../../src/scenario/index.ts";
import { readJsonFile } from "../../src/command/nccom-files.ts";
import { parseJsonReport } from "../../src/fit/log.ts";

const run = runSim;

const BAD = "test/fixtures/bad";

describe("bad input exits 1 with the file, the field path and the value", () => {
  it.each([
    ["unknown-key.json", "colour", /unknown key "colour"/, "SCN1002"],
    ["duplicate-rank.json", "replicaGroups[1][0]", /rank 1 appears twice \(first at replicaGroups\[0\]\[1\]\)/, "CMP1002"],
    ["missing-rank.json", "replicaGroups", /replica groups \(2\/2\) does not have myself 3/, "CMP1003"],
    ["non-integer-bytes.json", "ops[0].bytes", /expected an integer \(value: 1024.5\)/, "SCN1003"],
    ["unknown-dtype.json", "ops[0].dtype", /unknown value "fp64"/, "SCN1007"],
    ["not-multiple.json", "ops[0].bytes", /element size x group ranks \(4 x 8 = 32 bytes\)/, "SCN1006"],
    ["wrong-type.json", "ranks", /expected a number/, "SCN1003"],
    ["unknown-instance.json", "instance", /no device preset "trn9"/, "SCN1201"],
    ["too-many-ranks.json", "ranks", /need 40 devices; trn1 has 16/, "CMP1303"],
    ["rank-out-of-range.json", "replicaGroups[0][2]", /rank id 2 is out of range 0..1/, "CMP1001"],
    ["unknown-op.json", "ops[0].op", /unknown value "all-to-everyone"/, "SCN1007"],
    ["reduce-on-gather.json", "ops[0].reduce", /all-gather takes no reduce op/, "SCN1014"],
    ["broken-json.json", "", /not valid JSON/, "SCN1001"],
    ["too-many-channels.json", "channels", /9 channels x 2 folds need more DMA engines/, "CMP1304"],
    ["multi-node.json", "nodes", /ideal has no network: a multi-node scenario needs a preset with a "network" section/, "CMP1301"],
  ])("%s", (file, path, message, code) => {
    const r = run([`${BAD}/${file}`]);
    expect(r.code).toBe(EXIT.BAD_INPUT);
    expect(r.out).toBe("");
    expect(r.err).toContain(`${BAD}/${file}`);
    if (path) expect(r.err).toContain(`: ${path}: `);
    expect(r.err).toMatch(message);
    expect(r.err).toContain(`[${code}]`);
    expect(r.err).not.toMatch(/\n\s+at /);
  });

  it("a missing file, an unknown flag and no argument are usage errors", () => {
    expect(run(["nope.json"])).toMatchObject({ code: 1, err: expect.stringMatching(/nope.json: cannot read file: ENOENT/) });
    expect(run(["scenarios/ring8.json", "--frobnicate"])).toMatchObject({ code: 1, err: expect.stringMatching(/unknown option --frobnicate/) });
    expect(run([])).toMatchObject({ code: 1, err: expect.stringMatching(/no scenario file given/) });
    expect(run(["scenarios/ring8.json", "--check", "maybe"])).toMatchObject({ code: 1, err: expect.stringMatching(/--check must be one of values, symbolic, none/) });
  });
});

describe("sim CLI", () => {
  it("--help explains every flag", () => {
    const r = run(["--help"]);
    expect(r.code).toBe(0);
    for (const flag of ["--json", "--check", "--seed", "--devices", "--log-level", "--help"]) expect(r.out).toContain(flag);
  });

  it("prints the nccom-test columns for every op and passes", () => {
    const r = run(["scenarios/ring8.json"]);
    expect(r.code).toBe(EXIT.OK);
    const lines = r.out.trim().split("\n");
    expect(lines[0]!.split(/\s+/)).toEqual(["size(B)", "count(elems)", "type", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "algorithm", "check"]);
    expect(lines.slice(1, 4).map((l) => l.split(/\s+/).slice(0, 3))).toEqual([
      ["4194304", "1048576", "fp32"],
      ["1048576", "524288", "bf16"],
      ["1048576", "262144", "int32"],
    ]);
    for (const l of lines.slice(1, 4)) expect(l).toMatch(/ring\s+pass$/);
    expect(lines[4]).toMatch(/^Avg bus bandwidth:\s+\d+\.\d{4}GB\/s$/);
  });

  it("--json prints the contract keys, and output is byte-identical run to run", () => {
    const a = run(["scenarios/ring8.json", "--json"]);
    const b = run(["scenarios/ring8.json", "--json"]);
    expect(a.code).toBe(0);
    expect(a.out).toBe(b.out);
    const j = JSON.parse(a.out);
    expect(j.scenario).toBe("ring8");
    expect(j.results).toHaveLength(3);
    for (const r of j.results) expect(Object.keys(r)).toEqual(["op", "bytes", "count", "dtype", "ranks", "algorithm", "timeUs", "algbwGBps", "busbwGBps", "check"]);
    expect(j.results[0]).toMatchObject({ op: "all-reduce", bytes: 4194304, ranks: 8, algorithm: "ring", check: "pass" });
    const r0 = j.results[0];
    expect(r0.algbwGBps).toBeCloseTo(r0.bytes / (r0.timeUs * 1e3), 9);
    expect(r0.busbwGBps).toBeCloseTo(r0.algbwGBps * (14 / 8), 9);
  });

  it("--check none skips the values and keeps the timing", () => {
    const a = JSON.parse(run(["scenarios/ring8.json", "--json"]).out);
    const b = JSON.parse(run(["scenarios/ring8.json", "--json", "--check", "none"]).out);
    expect(b.results.map((r: { check: string }) => r.check)).toEqual(["skipped", "skipped", "skipped"]);
    expect(b.results.map((r: { timeUs: number }) => r.timeUs)).toEqual(a.results.map((r: { timeUs: number }) => r.timeUs));
  });

  it("exits 3 with the first mismatching rank, element, expected and got when a result is wrong", () => {
    const r = run(["scenarios/ring8.json"], { mutateImage: (img, op) => op === 0 && corruptFirstReduce(img, 0) });
    expect(r.code).toBe(EXIT.CHECK_FAILED);
    expect(r.out).toMatch(/ring\s+fail/);
    expect(r.err).toMatch(/check failed for all-reduce 4194304 B fp32: rank \d+, element \d+: expected -?\d+, got -?\d+/);
  });

  it("exits 4 with the hang report when the program hangs", () => {
    const r = run(["scenarios/ring8.json"], { mutateImage: (img, op) => op === 1 && void dropFirstRemoteSemaInc(img, 0) });
    expect(r.code).toBe(EXIT.HANG);
    expect(r.out).toBe("");
    expect(r.err).toMatch(/op 1 \(all-gather\) of scenarios\/ring8.json hung/);
    expect(r.err).toMatch(/waits on dev\d+:topsp\d+:sem\d+ \(recv count\): value 0, awaiting >= 1/);
  });

  it("a concurrent program that hangs after each op ran alone is named as such, not as an op (it was an internal error)", () => {
    const r = run(["scenarios/streams4.json", "--check", "none"], { mutateImage: (img, op) => op === -1 && void dropFirstRemoteSemaInc(img, 0) });
    expect(r.code).toBe(EXIT.HANG);
    expect(r.out).toBe("");
    expect(r.err).toMatch(/^ccsim: the concurrent run of its 4 ops \(streams 0, 1, 2, 3; each op alone ran\) of scenarios\/streams4.json hung\n/);
    expect(r.err).toMatch(/waits on dev\d+:topsp\d+:sem\d+/);
    expect(r.err).not.toMatch(/\n\s+at /);
  });
});

describe("--explain of a scenario of several ops, each its own program", () => {
  const dir = mkdtempSync(join(tmpdir(), "ccsim-explain-"));
  const file = (name: string, scn: object): string => {
    const f = join(dir, `${name}.json`);
    writeFileSync(f, JSON.stringify(scn));
    return f;
  };
  const pairs = [[0, 1], [1, 0], [2, 3], [3, 2], [4, 5], [5, 4], [6, 7], [7, 6]];
  const allReduce = { op: "all-reduce", bytes: 1048576, dtype: "fp32" };
  const permute = { op: "permute", bytes: 1048576, dtype: "fp32", pairs };
  const channels = (out: string): string[] => [...out.matchAll(/^op (\d+): (\S+) [^]*?\n  operation: (\d+) channel/gm)].map((m) => `${m[1]} ${m[2]} ${m[3]}`);

  it("says each op's own channel count, whatever op comes first (trn1: a permute takes 1, an all-reduce 2)", () => {
    // (Each op was explained at the first op's program's channel count.)
    const base = { instance: "trn1", ranks: 8, ranksPerDevice: 1, check: "none" };
    const a = runSim([file("ar-first", { name: "ar-first", ...base, ops: [allReduce, permute] }), "--explain"]);
    const b = runSim([file("permute-first", { name: "permute-first", ...base, ops: [permute, allReduce] }), "--explain"]);
    expect(a.code, a.err).toBe(EXIT.OK);
    expect(channels(a.out)).toEqual(["0 all-reduce 2", "1 permute 1"]);
    expect(channels(b.out)).toEqual(["0 permute 1", "1 all-reduce 2"]);
  });

  it("every op of a concurrent scenario, one that runs alone as an earlier one did among them", () => {
    // (streams-groups16's op 2 is op 1 again: its run alone is op 1's, its explanation its own slot's.)
    const r = runSim(["scenarios/streams-groups16.json", "--check", "none", "--explain"]);
    expect(r.code, r.err).toBe(EXIT.OK);
    expect([...r.out.matchAll(/^op (\d+): \S+ \d+ B \S+, replica group (\d+) \(\d+ ranks\), stream (\d+), op_slot_idx (\d+)$/gm)].map((m) => m.slice(1).join(" "))).toEqual(["0 0 0 0", "0 1 0 0", "1 0 1 0", "2 0 1 1"]);
  });

  it("a refused op of a scenario whose ops are over different replica groups, not concurrent: the explanation of every op, then the error", () => {
    // (The explanation put every op in one program, which ops over different groups cannot share:
    // an internal error, swallowed, and the explanation was empty.)
    const scn = { name: "groups", instance: "trn2", ranks: 16, ranksPerDevice: 4, algorithm: "ring", ops: [{ ...allReduce, replicaGroups: [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15]] }, { op: "all-to-all", bytes: 16384, dtype: "fp32" }] };
    const r = runSim([file("groups", scn), "--explain"]);
    expect(r.code).toBe(EXIT.BAD_INPUT);
    expect(r.err).toMatch(/^op 0: all-reduce 1048576 B fp32, replica group 0 \(8 ranks\)[^]*^op 0: all-reduce 1048576 B fp32, replica group 1 \(8 ranks\)[^]*^op 1: all-to-all 16384 B fp32, replica group 0 \(16 ranks\)[^]*ops\[1\]\.op: alltoall cannot be supported without Mesh algorithm/m);
  });
});

describe("the sim entry point as a process", () => {
  // What `npm run sim` runs: the package's script, its `node` this process's.
  const script = async (): Promise<string[]> => {
    const { readFileSync } = await import("node:fs");
    const words = (JSON.parse(readFileSync("package.json", "utf8")) as { scripts: { sim: string } }).scripts.sim.split(" ");
    expect(words[0]).toBe("node");
    return words.slice(1);
  };
  it("npm run sim's script prints help and exits 0, and exits 1 without a stack trace on bad input", async () => {
    const { spawnSync } = await import("node:child_process");
    const sim = await script();
    const help = spawnSync(process.execPath, [...sim, "--help"], { encoding: "utf8" });
    expect(help.status).toBe(0);
    expect(help.stdout).toContain("usage: npm run sim");
    const bad = spawnSync(process.execPath, [...sim, "test/fixtures/bad/unknown-dtype.json"], { encoding: "utf8" });
    expect(bad.status).toBe(1);
    expect(bad.stdout).toBe("");
    expect(bad.stderr).toMatch(/unknown-dtype.json: ops\[0\].dtype: unknown value "fp64"/);
    expect(bad.stderr).not.toMatch(/\n\s+at /);
  });

  it("a relative path is the user's: npm runs the script in the project's folder and names the user's in INIT_CWD", async () => {
    const { spawnSync } = await import("node:child_process");
    const { resolve } = await import("node:path");
    const sim = await script();
    const r = spawnSync(process.execPath, [...sim, "ring8.json", "--json"], { encoding: "utf8", env: { ...process.env, INIT_CWD: resolve("scenarios") } });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout).scenario).toBe("ring8");
    // Without it, the path is the project folder's, where there is no ring8.json.
    const env = { ...process.env };
    delete env["INIT_CWD"];
    const root = spawnSync(process.execPath, [...sim, "ring8.json"], { encoding: "utf8", env });
    expect(root.status).toBe(1);
    expect(root.stderr).toMatch(/ring8.json: cannot read file: ENOENT \[SCN1000\]/);
  });

  it("RDH allowed without mesh: the seed's line is logged on stderr and the run exits 0 on the ring", async () => {
    const { spawnSync } = await import("node:child_process");
    const r = spawnSync(process.execPath, [...(await script()), "test/fixtures/ops/rdh-without-mesh.json"], { encoding: "utf8" });
    expect(r.status).toBe(0);
    const logs = r.stderr.trim().split("\n").map((l) => JSON.parse(l));
    expect(logs).toContainEqual({ level: 40, msg: "Detected usage of RDH while mesh is not allowed. RDH construction will be skipped because it depends on Mesh." });
    expect(r.stdout).toMatch(/ring\s+skipped/);
  });
});

describe("a byte-order mark before JSON (as some Windows editors write) is read past", () => {
  it("a scenario file runs; a --streams-json file and a JSON report read as without it", () => {
    const dir = mkdtempSync(join(tmpdir(), "ccsim-bom-"));
    const scn = join(dir, "ring8.json");
    writeFileSync(scn, "\uFEFF" + readFileSync("scenarios/ring8.json", "utf8"));
    const r = runSim([scn, "--check", "none", "--json"]);
    expect(r.err).toBe("");
    expect(r.code).toBe(EXIT.OK);
    expect(parseJson("x.json", '\uFEFF{"a": 1}')).toEqual({ a: 1 });
    const streams = join(dir, "streams.json");
    writeFileSync(streams, '\uFEFF{"streams": []}');
    expect(readJsonFile(streams, "--streams-json")).toEqual({ streams: [] });
    const row = { "size(B)": 1024, "count(elems)": 256, type: "fp32", "algbw(GB/s)": 1, "busbw(GB/s)": 1.75, "time:avg(us)": 1.024 };
    expect(parseJsonReport("r.json", "\uFEFF" + JSON.stringify({ results: [row] }), "nccom-test allr -r 8 -d fp32").tables[0]).toHaveLength(1);
    // (Only at the start: one elsewhere is not JSON.)
    expect(() => parseJson("x.json", '{"a": \uFEFF1}')).toThrow(/not valid JSON/);
  });
});
