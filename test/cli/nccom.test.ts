// npm run nccom: nccom-test's command line on the simulator. The published invocations run as
// printed (apart from the program name); the flags build a scenario that npm run sim runs alike.
import { describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main } from "../../src/cli/nccom.ts";
import { main as sim, EXIT, runSource } from "../../src/cli/sim.ts";
import { dropFirstRemoteSemaInc } from "../helpers-image.ts";
import { coalescedOps, parseNccomArgs } from "../../src/command/nccom.ts";
import { main as mergeMain } from "../../src/cli/merge.ts";

function run(args: string[], env: Record<string, string> = {}): { code: number; out: string; err: string } {
  let out = "";
  let err = "";
  const code = main(args, (s) => (out += s), (s) => (err += s), env);
  return { code, out, err };
}

const HEADER = /^\s*size\(B\)\s+count\(elems\)\s+type\s+time:avg\(us\)\s+algbw\(GB\/s\)\s+busbw\(GB\/s\)/;

describe("nccom-test's command line", () => {
  it("-r 32 allg -b 1K -e 512K -f 8 -d fp32: the table, golden", () => {
    const r = run(["-r", "32", "allg", "-b", "1K", "-e", "512K", "-f", "8", "-d", "fp32"]);
    expect(r.code).toBe(EXIT.OK);
    expect(r.out).toBe(readFileSync("test/golden/nccom-allg-r32.txt", "utf8"));
  });

  it.each([
    [["-r", "2", "allr"], 1],
    [["-r", "2", "allr", "-b", "1kb", "-e", "1mb", "-f", "4", "-d", "fp32"], 6],
    [["-r", "8", "allg", "-b", "1K", "-e", "512K", "-f", "8", "-d", "fp32"], 4],
    [["-r", "8", "permute"], 1],
    [["-r", "16", "allr", "-b", "8", "-e", "128K", "-f", "16", "-d", "fp32", "--show-algorithm", "--instance", "trn2"], 4],
    [["-r", "64", "-N", "2", "allr", "-b", "8", "-e", "64", "-f", "2", "-d", "fp32"], 4],
  ])("%j prints nccom-test's columns, one row per size, and the average line", (args, rows) => {
    const r = run(args as string[]);
    expect(r.code, r.err).toBe(EXIT.OK);
    const lines = r.out.trimEnd().split("\n");
    expect(lines[0]).toMatch(HEADER);
    expect(lines.slice(1, -1)).toHaveLength(rows);
    expect(lines[lines.length - 1]).toMatch(/^Avg bus bandwidth:\t\d+\.\d{4}GB\/s$/);
  });

  it("fills NeuronCores in order: -r 8 on trn1 is 4 devices of 2 ranks; -r 16 on trn2 is 4 chips of 4 (LNC 2), 2 chips of 8 with LNC 1", () => {
    const a = parseNccomArgs(["allr", "-r", "8"], {});
    const b = parseNccomArgs(["allr", "-r", "16", "--instance", "trn2"], {});
    const c = parseNccomArgs(["allr", "-r", "16", "--instance", "trn2"], { NEURON_LOGICAL_NC_CONFIG: "1" });
    if (a === "help" || b === "help" || c === "help") throw new Error("help");
    expect([a.scenario["instance"], a.scenario["ranksPerDevice"]]).toEqual(["trn1", 2]);
    expect([b.scenario["instance"], b.scenario["ranksPerDevice"]]).toEqual(["trn2", 4]);
    expect([c.scenario["instance"], c.scenario["ranksPerDevice"]]).toEqual(["trn2-lnc1", 8]);
    // Set to nothing (`export NEURON_LOGICAL_NC_CONFIG=`) it is unset, as a shard's partial records it; a value that is not a size is refused.
    for (const blank of ["", " "]) {
      const d = parseNccomArgs(["allr", "-r", "16", "--instance", "trn2"], { NEURON_LOGICAL_NC_CONFIG: blank });
      expect(d !== "help" && [d.scenario["instance"], d.scenario["ranksPerDevice"]]).toEqual(["trn2", 4]);
    }
    expect(() => parseNccomArgs(["allr", "-r", "16", "--instance", "trn2"], { NEURON_LOGICAL_NC_CONFIG: "x" })).toThrow(/NEURON_LOGICAL_NC_CONFIG must be an integer >= 1, not "x"/);
  });

  it("nccom-test's defaults: 32 MiB, uint8", () => {
    const r = run(["allr", "-r", "2"]);
    expect(r.out).toMatch(/\n\s*33554432\s+33554432\s+uint8\s/);
  });

  it("-n, -w and --hosts are accepted and said to be ignored", () => {
    const r = run(["redsct", "-r", "8", "-b", "1K", "-e", "1K", "-n", "20", "-w", "5"]);
    expect(r.code).toBe(EXIT.OK);
    expect(r.err).toContain("-n 20 ignored");
    expect(r.err).toContain("-w 5 ignored");
  });

  it("--dump-scenario prints the scenario the flags build; npm run sim runs it to the same figures", () => {
    const dir = mkdtempSync(join(tmpdir(), "ccsim-nccom-"));
    const d = run(["permute", "-r", "8", "--custom-src-target-pairs", "test/fixtures/nccom/pairs.json", "-b", "64K", "-e", "256K", "--dump-scenario"]);
    expect(d.code).toBe(EXIT.OK);
    const file = join(dir, "s.json");
    writeFileSync(file, d.out);
    // The file is the first point; stderr names the sim flags that run the whole sweep from it.
    expect(JSON.parse(d.out).ops).toEqual([expect.objectContaining({ op: "permute", bytes: 65536 })]);
    const flags = /npm run sim -- FILE (.*) runs the command's whole sweep/.exec(d.err)![1]!.split(" ");
    expect(flags).toEqual(["-b", "65536", "-e", "262144", "--op", "permute", "-d", "uint8"]);
    let out = "";
    expect(sim([file, ...flags, "--json"], (s) => (out += s), () => {})).toBe(EXIT.OK);
    const r = run(["permute", "-r", "8", "--custom-src-target-pairs", "test/fixtures/nccom/pairs.json", "-b", "64K", "-e", "256K", "--json"]);
    const rows = JSON.parse(r.out).results;
    expect(rows).toEqual(JSON.parse(out).results);
    let first = "";
    expect(sim([file, "--json"], (s) => (first += s), () => {})).toBe(EXIT.OK);
    expect(JSON.parse(first).results).toEqual([{ ...rows[0], check: "skipped" }]);
    // An allgv's counts and a coalesced size's shares are the first point's; the other sizes stay with the command line.
    const g = run(["allgv", "-r", "4", "-d", "fp16", "-b", "2048", "-e", "8192", "--dump-scenario"]);
    expect(JSON.parse(g.out).ops).toEqual([expect.objectContaining({ op: "all-gather-v", bytes: 2048, counts: [512, 512, 512, 512] })]);
    expect(g.err).toContain("(the sweep's other sizes and their per-rank counts come from the command line only)");
    const c = run(["allr", "-r", "8", "-b", "1M", "-e", "4M", "--coalesced-cc-size-ratio", "1,3", "--dump-scenario"]);
    expect(JSON.parse(c.out)).toMatchObject({ concurrent: true, ops: [{ bytes: 262144, stream: 0 }, { bytes: 786432, stream: 1 }] });
    // The first size as the sweep runs it: whole elements (x ranks, for a gather), those below one skipped.
    expect(JSON.parse(run(["allr", "-r", "8", "-b", "1", "-e", "64", "-d", "fp32", "--dump-scenario"]).out).ops[0].bytes).toBe(4);
    expect(JSON.parse(run(["allg", "-r", "8", "-b", "100", "-e", "1K", "-d", "fp32", "--dump-scenario"]).out).ops[0].bytes).toBe(96);
    const none = run(["allr", "-r", "8", "-b", "1", "-e", "2", "-d", "fp32", "--dump-scenario"]);
    expect(none.code).toBe(EXIT.BAD_INPUT);
    expect(none.out).toBe("");
    expect(none.err).toContain("nccom: --dump-scenario: no size of the sweep runs (each is below one all-reduce fp32 element)");
    rmSync(dir, { recursive: true, force: true });
  });

  it("NEURON_RT_DBG_CC_DMA_PACKET_SIZE is the scenario's ccDmaPacketBytes (one size, or one per stream); a wrong one is named; the runtime's unmodelled knobs are said to be unread", () => {
    const env = { NEURON_RT_DBG_CC_DMA_PACKET_SIZE: "4096" };
    expect(JSON.parse(run(["allr", "-r", "8", "-b", "1M", "--dump-scenario"], env).out).ccDmaPacketBytes).toEqual([4096]);
    expect(JSON.parse(run(["allr", "-r", "8", "-b", "1M", "--dump-scenario"], { NEURON_RT_DBG_CC_DMA_PACKET_SIZE: "65536, 8192" }).out).ccDmaPacketBytes).toEqual([65536, 8192]);
    expect(JSON.parse(run(["allr", "-r", "8", "-b", "1M", "--dump-scenario"]).out).ccDmaPacketBytes).toBeUndefined();
    const time = (e: Record<string, string>) => JSON.parse(run(["allr", "-r", "8", "-b", "4M", "-e", "4M", "--json"], e).out).results[0].timeUs as number;
    // (More descriptors, each with its cost: a little slower on its own.)
    expect(time(env)).toBeGreaterThan(time({}));
    const x = run(["allr", "-r", "8", "-b", "4M", "-e", "4M", "--explain"], env);
    expect(x.out + x.err).toContain("CC DMA packet 4096 B (copies cut at it; stream 0's of ccDmaPacketBytes / NEURON_RT_DBG_CC_DMA_PACKET_SIZE)");
    for (const [v, why] of [["100000", /"100000" is not a packet size in bytes from 64 to 65536/], ["4K", /"4K" is not a packet size/], ["4096,,4096", /"" is not a packet size/], ["1,2,3,4,5", /5 sizes, one per CC stream, and a rank has 4/]] as const) {
      const r = run(["allr", "-r", "8", "-b", "1M"], { NEURON_RT_DBG_CC_DMA_PACKET_SIZE: v });
      expect(r.code).toBe(EXIT.BAD_INPUT);
      expect(r.err).toMatch(new RegExp(`^nccom: NEURON_RT_DBG_CC_DMA_PACKET_SIZE "${v}": ${why.source}`));
    }
    const r = run(["allr", "-r", "8", "-b", "1K", "-e", "1K"], { NEURON_RT_DBG_DMA_PACKETIZATION_SIZE: "4096", NEURON_RT_RANKS_PER_NETWORK_PROXY: "4" });
    expect(r.code).toBe(EXIT.OK);
    expect(r.err).toContain("nccom: NEURON_RT_DBG_DMA_PACKETIZATION_SIZE=4096 ignored (it packetizes compute DMA, and a simulated run has no compute traffic)");
    expect(r.err).toContain("nccom: NEURON_RT_RANKS_PER_NETWORK_PROXY=4 ignored");
  });

  it("allgv runs as the all-to-all-v it lowers to, on the mesh, its size the gathered bytes", () => {
    const r = run(["allgv", "-r", "4", "-d", "fp16", "-b", "2048", "-e", "8192", "-f", "2", "--show-algorithm", "--json"]);
    expect(r.code).toBe(EXIT.OK);
    const rows = JSON.parse(r.out).results;
    expect(rows.map((x: { bytes: number; algorithm: string }) => [x.bytes, x.algorithm])).toEqual([[2048, "mesh"], [4096, "mesh"], [8192, "mesh"]]);
  });

  it.each([
    [["allr"], /-r N is required/],
    [["-r", "8"], /no op given/],
    [["gossip", "-r", "8"], /unknown op "gossip"/],
    [["allr", "-r", "3"], /-r 3 on 1 node\(s\) does not fill whole trn1 devices/],
    [["allr", "-r", "8", "--lnc", "2"], /not available on trn1/],
    [["allr", "-r", "8", "--instance", "trn9"], /no device preset "trn9" \(looked for .*trn9.json; presets there: ideal, ideal-mesh, .*inf2-24xl, .*trn1, trn1-legacy, trn2, /],
    [["permute", "-r", "2", "--custom-src-target-pairs", "test/fixtures/nccom/pairs.json"], /pairs\[2\]\[0\]: must be between 0 and 1/],
    [["allr", "-r", "8", "--custom-src-target-pairs", "test/fixtures/nccom/pairs.json"], /applies to sendrecv and permute/],
    [["allr", "-r", "8", "--custom-replica-groups", "no/such.json"], /cannot read no\/such.json/],
    [["sendrecv", "-r", "1"], /sendrecv -r 1: ranks are paired \(0 with 1, 2 with 3, \.\.\.\), so it needs -r 2 or more/],
    // A word after --check that is not one of its values is the op to nccom-test (`--check allg`): a second op, or no op, says what --check takes.
    [["allr", "-r", "8", "--check", "maybe"], /one op at a time \(got allr and maybe\); --check takes random or all_ones .* or values, symbolic or none/],
    [["-c", "maybe", "allr", "-r", "8"], /one op at a time \(got maybe and allr\); -c takes random or all_ones/],
    [["-r", "8", "--check", "maybe"], /unknown op "maybe" .*; after --check it is read as the op, as nccom-test reads it/],
    [["allr", "-r", "8", "gossip"], /one op at a time \(got allr and gossip\)$/m],
  ])("%j exits 1: %s", (args, says) => {
    const r = run(args as string[]);
    expect(r.code).toBe(EXIT.BAD_INPUT);
    expect(r.err).toMatch(says);
    expect(r.err).not.toMatch(/\n\s+at /);
  });

  it("-t / --stats time each iteration on its own: the preset's host.iterationPs is added, each percentile column repeats the average", () => {
    const args = ["allg", "-r", "8", "-b", "1kb", "-e", "1kb", "-d", "fp32"];
    const loop = run([...args, "--json"]);
    const each = run([...args, "--stats", "avg", "p50", "p99", "--json"]);
    const dt = JSON.parse(each.out).results[0].timeUs - JSON.parse(loop.out).results[0].timeUs;
    expect(dt).toBeCloseTo(JSON.parse(readFileSync("devices/trn1.json", "utf8")).host.iterationPs / 1e6, 6);
    const table = run([...args, "-t", "avg", "p50", "p99"]);
    expect(table.out).toMatch(/time:avg\(us\)\s+time:p50\(us\)\s+time:p99\(us\)\s+algbw/);
    expect(run([...args, "--stats", "p100"]).err).toMatch(/a percentile is p1 \.\.\. p99/);
    expect(run([...args, "--link-stats"]).out).toMatch(/busiest link/);
  });

  it("groups of uneven sizes (3 and 5 ranks) take sizes in whole blocks of both: 15 ranks' elements, checked by values", () => {
    const dir = mkdtempSync(join(tmpdir(), "ccsim-nccom-uneven-"));
    const groups = join(dir, "groups.json");
    writeFileSync(groups, JSON.stringify([[0, 3, 5], [1, 2, 4, 6, 7]]));
    // 100,000 B of int16: rounded down to whole 30 B (2 bytes x 15 ranks), which both groups split.
    const r = run(["redsct", "-r", "8", "-b", "100000", "-e", "100000", "-d", "int16", "--custom-replica-groups", groups, "--check", "values", "--json"]);
    expect(r.code, r.err).toBe(EXIT.OK);
    const rows = JSON.parse(r.out).results as { bytes: number; check: string }[];
    expect(rows.map((x) => [x.bytes, x.check])).toEqual([[99990, "pass"]]);
    rmSync(dir, { recursive: true, force: true });
  });

  it("runs the documented files as written: pairs and groups wrapped in one more list, allgv's metadata", () => {
    const dir = mkdtempSync(join(tmpdir(), "ccsim-nccom-doc-"));
    const groups = join(dir, "groups.json");
    writeFileSync(groups, JSON.stringify({ replica_groups: [[[0, 1, 2, 3], [4, 5, 6, 7]]] }));
    expect(run(["allr", "-r", "8", "-b", "1K", "-e", "1K", "--custom-replica-groups", groups]).code).toBe(EXIT.OK);
    const permute = run(["-r", "8", "--custom-src-target-pairs", "calibration/logs/pairs.json", "permute", "--json"]);
    expect(permute.code, permute.err).toBe(EXIT.OK);
    const allgv = run(["allgv", "-r", "4", "-N", "1", "-b", "2048", "-e", "2048", "-d", "fp16", "--variable-size-op-metadata", "calibration/logs/allgv_metadata.json", "-c"]);
    expect(allgv.code, allgv.err).toBe(EXIT.OK);
    const bad = join(dir, "meta.json");
    writeFileSync(bad, JSON.stringify({ metadata: [{ send_counts: [256], recv_counts: [256, 128, 256, 256] }] }));
    expect(run(["allgv", "-r", "4", "-b", "2048", "-d", "fp16", "--variable-size-op-metadata", bad]).err).toMatch(/recv_counts must be empty or list every rank's send count/);
    // allgv and alltoallv count one per rank of a group: groups of different sizes are refused by the file's name.
    const uneven = join(dir, "uneven.json");
    writeFileSync(uneven, JSON.stringify([[0, 1], [2, 3, 4], [5, 6, 7]]));
    for (const op of ["allgv", "alltoallv"]) {
      const u = run([op, "-r", "8", "--custom-replica-groups", uneven, "--dump-scenario"]);
      expect(u.code).toBe(EXIT.BAD_INPUT);
      expect(u.err).toContain(`--custom-replica-groups ${uneven}: ${op} needs replica groups of one size (its counts are one per rank of a group); these have 2, 3 ranks`);
    }
    // A bad group or pair names its file (the entry's indices are its list's).
    const outside = join(dir, "outside.json");
    writeFileSync(outside, JSON.stringify([[0, 1, 2, 3], [4, 5, 6, 9]]));
    const g = run(["allr", "-r", "8", "-b", "1K", "-e", "1K", "--custom-replica-groups", outside]);
    expect(g.code).toBe(EXIT.BAD_INPUT);
    expect(g.err).toContain(`nccom-test allr -r 8 --custom-replica-groups ${outside}: replicaGroups[1][3]: rank id 9 is out of range 0..7`);
    const twice = join(dir, "twice.json");
    writeFileSync(twice, JSON.stringify({ src_target_pairs: [[0, 1], [4, 1]] }));
    const p = run(["permute", "-r", "8", "-b", "1K", "-e", "1K", "--custom-src-target-pairs", twice]);
    expect(p.code).toBe(EXIT.BAD_INPUT);
    expect(p.err).toContain(`nccom-test permute -r 8 --custom-src-target-pairs ${twice}: ops[0].pairs[1][1]: rank 1 receives twice`);
    rmSync(dir, { recursive: true });
  });

  it("alltoallv's metadata: the documented file, per-rank entries with a receive side, and what is refused", () => {
    const doc = ["alltoallv", "-r", "2", "-N", "2", "-d", "fp32", "--variable-size-op-metadata", "calibration/logs/alltoallv_metadata.json"];
    // Its counts (512 and 1024 elements to ranks 0 and 1, every rank) run at their total, 6144 B, values checked.
    const at = run([...doc, "-b", "6144", "-e", "6144", "-c", "--json"]);
    expect(at.code, at.err).toBe(EXIT.OK);
    expect(JSON.parse(at.out).results[0]).toMatchObject({ op: "all-to-all-v", bytes: 6144, check: "pass" });
    const scn = parseNccomArgs([...doc, "-b", "6144"], {});
    expect(scn !== "help" && scn.matrix).toEqual([[2048, 4096], [2048, 4096]]);
    // Another size sends size / N to every peer, and says so.
    const other = run([...doc, "-b", "1MB", "-e", "1MB"]);
    expect(other.code).toBe(EXIT.OK);
    expect(other.err).toMatch(/its counts run at 6144 B \(the largest rank's send total\); the sizes asked send size \/ N to every peer/);
    const dir = mkdtempSync(join(tmpdir(), "ccsim-a2av-"));
    const file = (name: string, json: unknown) => {
      const f = join(dir, name);
      writeFileSync(f, JSON.stringify(json));
      return f;
    };
    const per = file("per.json", {
      metadata: [
        { send_counts: [4, 8, 0, 1], recv_counts: [4, 1, 2, 0] },
        { send_counts: [1, 2, 3, 0], recv_counts: [8, 2, 5, 1] },
        { send_counts: [2, 5, 6, 1], recv_counts: [0, 3, 6, 1] },
        { send_counts: [0, 1, 1, 1], recv_counts: [1, 0, 1, 1] },
      ],
    });
    const ok = run(["alltoallv", "-r", "4", "-d", "uint8", "-b", "14", "-e", "14", "--variable-size-op-metadata", per, "-c"]);
    expect(ok.code, ok.err).toBe(EXIT.OK);
    const cases: [unknown, RegExp][] = [
      [{ metadata: [{ send_counts: [1, 2] }] }, /send_counts must list 4 whole, non-negative counts/],
      [{ metadata: [{ send_counts: [1, 2, 3, 4], recv_counts: [2, 2, 2, 2] }] }, /recv_counts must be what the ranks send rank 0 \(1, 1, 1, 1\)/],
      [{ metadata: [{ send_counts: [1, 2, 3, 4], send_displs: [0, -1, 3, 6] }] }, /send_displs must list 4 whole, non-negative counts/],
      [{ metadata: [{ send_counts: [0, 0, 0, 0] }] }, /every send count is 0/],
      [{ metadata: [{ send_counts: [1, 2, 3, 4] }, { send_counts: [1, 2, 3, 4] }] }, /one entry or one per rank \(4\)/],
    ];
    for (const [json, msg] of cases) {
      const r = run(["alltoallv", "-r", "4", "-d", "uint8", "--variable-size-op-metadata", file("bad.json", json)]);
      expect(r.code).toBe(EXIT.BAD_INPUT);
      expect(r.err).toMatch(msg);
    }
    rmSync(dir, { recursive: true });
  });

  it("--data-parallel-dimension D runs the op at once in sub-groups of D ranks, one every -r / D (the documented 128 ranks on 2 nodes, D = 2)", () => {
    const a = parseNccomArgs(["allr", "-r", "128", "-N", "2", "--data-parallel-dimension", "2", "--instance", "trn2"], {});
    expect(a).not.toBe("help");
    const groups = (a as unknown as { scenario: { replicaGroups: number[][] } }).scenario.replicaGroups;
    expect(groups).toHaveLength(64);
    expect(groups[0]).toEqual([0, 64]);
    expect(groups[63]).toEqual([63, 127]);
    const r = run(["allr", "-r", "128", "-N", "2", "--data-parallel-dimension", "2", "-b", "1M", "-e", "1M", "-d", "fp32", "--instance", "trn2", "--show-algorithm"]);
    expect(r.code, r.err).toBe(EXIT.OK);
    expect(r.out).toMatch(/^1048576\s+262144\s+fp32\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+single-cycle-ring$/m);
    expect(run(["allr", "-r", "8", "--data-parallel-dimension", "3"]).err).toMatch(/--data-parallel-dimension 3 does not divide -r 8/);
    const dir = mkdtempSync(join(tmpdir(), "ccsim-dp-"));
    const g = join(dir, "g.json");
    writeFileSync(g, "[[0,1],[2,3]]");
    expect(run(["allr", "-r", "4", "--data-parallel-dimension", "2", "--custom-replica-groups", g]).err).toMatch(/not both/);
    rmSync(dir, { recursive: true });
    const buffs = run(["allr", "-r", "8", "-b", "1K", "-e", "1K", "--unique-buff", "--shared-output-buff"]);
    expect(buffs.code).toBe(EXIT.OK);
    expect(buffs.err).toMatch(/--unique-buff: each op already has its own input and output buffers/);
    expect(buffs.err).toMatch(/--shared-output-buff: two cores sharing one output buffer is not modelled/);
  });

  it("--coalesced-cc-size-ratio [1,2,1] runs each size as 1/4, 2/4, 1/4 of it at once, each on a stream of its own, checked", () => {
    const a = parseNccomArgs(["allg", "-r", "8", "--coalesced-cc-size-ratio", "[1,2,1]"], {});
    expect((a as { coalesced?: number[] }).coalesced).toEqual([1, 2, 1]);
    // The shares in whole units (an element times 8 ranks for all-gather), the last takes the rest.
    expect(coalescedOps({ op: "all-gather" }, 8 * 4 * 10, [1, 2, 1], 32).map((o) => [o["bytes"], o["stream"]])).toEqual([[64, 0], [160, 1], [96, 2]]);
    const r = run(["allg", "-r", "8", "-b", "64K", "-e", "1M", "-f", "16", "-d", "fp32", "--coalesced-cc-size-ratio", "[1,2,1]", "-c", "--show-algorithm"]);
    expect(r.code, r.err).toBe(EXIT.OK);
    expect(r.err).toMatch(/each size runs as 3 ops of 1:2:1 of it at once/);
    const rows = r.out.trim().split("\n").slice(1, -1).map((l) => l.trim().split(/\s+/));
    expect(rows.map((x) => x[0])).toEqual(["65536", "1048576"]);
    // The time is the concurrent run's: more than the biggest share alone, and no row claims more bytes than asked.
    const half = run(["allg", "-r", "8", "-b", "512K", "-e", "512K", "-d", "fp32"]);
    const halfUs = Number(half.out.trim().split("\n")[1]!.trim().split(/\s+/)[3]);
    expect(Number(rows[1]![3])).toBeGreaterThan(halfUs);
    for (const [args, msg] of [
      [["allr", "-r", "8", "--coalesced-cc-size-ratio", "[1,0]"], /whole positive shares/],
      [["allr", "-r", "8", "--coalesced-cc-size-ratio", "1,1,1,1,1"], /at most 4 coalesced ops/],
      [["permute", "-r", "8", "--coalesced-cc-size-ratio", "1,1"], /not permute/],
      [["allr", "-r", "8", "--coalesced-cc-size-ratio", "1,1", "--coalesced-cc-size-ratio", "1,2"], /given twice/],
    ] as const) {
      const x = run([...args]);
      expect(x.code).toBe(EXIT.BAD_INPUT);
      expect(x.err).toMatch(msg);
    }
  });

  it("--coalesced-cc-size-ratio leaves out, with a note, the sizes where a share rounds down to no bytes (the rest of the sweep runs)", () => {
    // 1:1:2 in whole fp8 elements: 1, 2 and 3 B leave a share at 0 B; 4 B is 1 + 1 + 2.
    const r = run(["allr", "-r", "8", "-b", "1", "-e", "8", "-i", "1", "-d", "fp8e4", "--coalesced-cc-size-ratio", "1,1,2", "-c"]);
    expect(r.code, r.err).toBe(EXIT.OK);
    expect(r.err).toMatch(/3 size\(s\) skipped, too small to split into the coalesced ops \(a share rounds down to 0 B\): 1, 2, 3 B/);
    const rows = r.out.trim().split("\n").slice(1, -1).map((l) => l.trim().split(/\s+/)[0]);
    expect(rows).toEqual(["4", "5", "6", "7", "8"]);
    const dump = run(["allr", "-r", "8", "-b", "1", "-e", "8", "-d", "fp8e4", "--coalesced-cc-size-ratio", "1,1,2", "--dump-scenario"]);
    expect(dump.code, dump.err).toBe(EXIT.OK);
    expect((JSON.parse(dump.out) as { ops: { bytes: number }[] }).ops.map((o) => o.bytes)).toEqual([1, 1, 2]);
    // Uneven groups of 3 and 5 ranks: sizes and shares in blocks of 15 ranks' elements (of the first group's 3, a share was no all-gather of 5).
    const dir = mkdtempSync(join(tmpdir(), "ccsim-coalesced-"));
    const groups = join(dir, "g.json");
    writeFileSync(groups, JSON.stringify([[0, 1, 2], [3, 4, 5, 6, 7]]));
    const uneven = run(["allg", "-r", "8", "-b", "1000", "-e", "64K", "-f", "4", "-d", "fp32", "--custom-replica-groups", groups, "--coalesced-cc-size-ratio", "1,2", "-c"]);
    expect(uneven.code, uneven.err).toBe(EXIT.OK);
    expect(uneven.out.trim().split("\n").slice(1, -1).map((l) => l.trim().split(/\s+/)[0])).toEqual(["960", "3960", "15960", "63960"]);
    const first = run(["allg", "-r", "8", "-b", "1000", "-d", "fp32", "--custom-replica-groups", groups, "--dump-scenario"]);
    expect((JSON.parse(first.out) as { ops: { bytes: number }[] }).ops[0]!.bytes).toBe(960);
    rmSync(dir, { recursive: true });
    const none = run(["allr", "-r", "8", "-b", "1", "-e", "3", "-d", "fp8e4", "--coalesced-cc-size-ratio", "1,1,2"]);
    expect(none.code).toBe(EXIT.BAD_INPUT);
    expect(none.err).toMatch(/no size to run: every size from 1 B to 3 B is below one unit of the op or too small to split/);
  });

  it("--sb2sb keeps every rank's buffers in SBUF: a size that fits runs, one that does not is refused with the figure [CMP1314]", () => {
    const r = run(["allr", "-r", "8", "-b", "8M", "-e", "16M", "-d", "fp32", "--sb2sb", "--input-shape", "[1,1][128,4096]", "--output-shape", "[1,1][128,4096]", "--cc-dim", "0"]);
    expect(r.code).toBe(EXIT.BAD_INPUT);
    const rows = r.out.trim().split("\n").slice(1, -1);
    expect(rows[0]).toMatch(/^\s*8388608\s+2097152\s+fp32\s+[\d.]+/);
    expect(rows[1]).toMatch(/need 33554432 bytes of SBUF on one rank; a trn1 rank has 25165824 \(24 MiB\).*\[CMP1314\]/);
    expect(r.err).toMatch(/--sb2sb: every rank's input and output in SBUF/);
    expect(r.err).toMatch(/--input-shape \[1,1\]\[128,4096\], --output-shape \[1,1\]\[128,4096\], --cc-dim 0: the tensor's layout/);
    // trn2's rank is two NeuronCores of 28 MiB each (LNC 2).
    expect(run(["allr", "-r", "8", "-b", "16M", "-e", "16M", "-d", "fp32", "--sb2sb", "--instance", "trn2"]).code).toBe(EXIT.OK);
    expect(run(["allr", "-r", "8", "-b", "8M", "-e", "8M", "--sb2sb", "--instance", "trn3"]).out).toMatch(/trn3 preset gives no SBUF size/);
    expect(run(["allr", "-r", "8", "--cc-dim", "0"]).err).toMatch(/--cc-dim lays out SBUF buffers: give --sb2sb/);
    expect(run(["allr", "-r", "8", "--sb2sb", "--input-shape", "128x4096"]).err).toMatch(/must be \[step0,step1\]\[n0,n1\]/);
  });

  it("--show-input-output-size prints a rank's input and output bytes after the count, as the published allg table shows them", () => {
    const r = run(["-r", "32", "--minbytes", "1kb", "--maxbytes", "1mb", "--stepfactor", "8", "--datatype", "fp32", "--check", "allg", "--show-input-output-size"]);
    expect(r.code, r.err).toBe(EXIT.OK);
    const lines = r.out.trim().split("\n");
    expect(lines[0]!.split(/\s+/)).toEqual(["size(B)", "count(elems)", "total_input_size(B)", "total_output_size(B)", "type", "time:avg(us)", "algbw(GB/s)", "busbw(GB/s)"]);
    // the published log's columns: 1024 256 32 1024 fp32 ... / 524288 131072 16384 524288 fp32 ...
    expect(lines[1]!.trim().split(/\s+/).slice(0, 5)).toEqual(["1024", "256", "32", "1024", "fp32"]);
    expect(lines[4]!.trim().split(/\s+/).slice(0, 5)).toEqual(["524288", "131072", "16384", "524288", "fp32"]);
    const rs = run(["redsct", "-r", "8", "-b", "8K", "-e", "8K", "--show-input-output-size"]);
    expect(rs.out.split("\n")[1]!.trim().split(/\s+/).slice(0, 4)).toEqual(["8192", "8192", "8192", "1024"]);
  });

  it("-I / -W are accepted, each said on stderr", () => {
    const r = run(["allr", "-r", "8", "-b", "1K", "-e", "1K", "-I", "10", "-W", "2"]);
    expect(r.code).toBe(EXIT.OK);
    expect(r.err).toMatch(/-I 10: timed as a NEFF's loop/);
  });

  it("a size below one unit of the op is skipped and said; a sweep with none left is exit 1; a rounded size is said", () => {
    const none = run(["allr", "-r", "8", "-b", "1", "-e", "1", "-d", "bf16"]);
    expect(none.code).toBe(EXIT.BAD_INPUT);
    expect(none.err).toMatch(/no size to run: .*all-reduce bf16: 1 size\(s\) below 2 B \(one element\) skipped/);
    const ag = run(["allg", "-r", "8", "-b", "12", "-e", "12", "-d", "uint8"]);
    expect(ag.code).toBe(EXIT.OK);
    expect(ag.err).toMatch(/all-gather uint8: 1 size\(s\) rounded down to whole 8 B \(element size x 8 ranks\): 12 -> 8/);
    expect(run(["allr", "-r", "8", "-b", "6", "-e", "6", "-d", "fp32"]).err).toMatch(/rounded down to whole 4 B \(one element\): 6 -> 4/);
  });

  it("a flag given twice, or with its alias, is refused; host and placement flags are accepted and said", () => {
    expect(run(["allr", "-r", "8", "-r", "16"]).err).toMatch(/-r given twice \(-r\): give it once/);
    expect(run(["allr", "--nworkers", "8", "-r", "16"]).code).toBe(EXIT.BAD_INPUT);
    expect(run(["allr", "-r", "8", "-b", "1K", "--minbytes", "2K"]).err).toMatch(/--minbytes given twice \(-b and --minbytes\)/);
    const r = run(["allr", "-r", "8", "-b", "1K", "-e", "1K", "--debug", "-S", "--slurm-job-id", "7", "--vcpu-pin-mode", "x"]);
    expect(r.code).toBe(EXIT.OK);
    expect(r.err).toMatch(/--slurm-job-id 7 ignored/);
    expect(r.err).toMatch(/--debug ignored/);
  });
});

describe("--jobs past what the machine runs", () => {
  it("is said on stderr, and the table is the one --jobs 1 prints", () => {
    const many = run(["allr", "-r", "8", "-b", "8", "-e", "64", "-f", "8", "-j", "1000"]);
    expect(many.code).toBe(EXIT.OK);
    expect(many.err).toMatch(/^nccom: --jobs 1000: \d+ threads at most on this machine \(four a core: more would only share the cores\)$/m);
    const one = run(["allr", "-r", "8", "-b", "8", "-e", "64", "-f", "8", "-j", "1"]);
    expect(many.out).toBe(one.out);
    expect(one.err).not.toMatch(/threads at most/);
  });
});

describe("--streams-json: nccom-test's multistream runs", () => {
  const example = "test/fixtures/nccom/streams_example.json";

  it("reads the documented example as written: stream 0 all-reduce bf16 1 KiB..1 MiB over four groups of 16, stream 1 all-gather fp32 1 KiB twice an iteration over all 64", () => {
    const a = parseNccomArgs(["allg", "-r", "64", "-c", "--instance", "trn2", "--streams-json", example], {});
    if (a === "help") throw new Error("help");
    const [s0, s1] = a.streams!;
    expect(a.streams).toHaveLength(2);
    expect(s0!.op).toMatchObject({ op: "all-reduce", dtype: "bf16", reduce: "sum" });
    expect(s0!.sizes).toEqual(Array.from({ length: 11 }, (_, k) => 1024 << k));
    expect(s0!.replicaGroups.map((g) => [g[0], g.length])).toEqual([[0, 16], [16, 16], [32, 16], [48, 16]]);
    expect(s0!.opsPerIter).toBe(1);
    expect(s1!.op).toMatchObject({ op: "all-gather", dtype: "fp32" });
    expect(s1!.op["reduce"]).toBeUndefined();
    expect(s1!.sizes).toEqual([1024]);
    expect(s1!.opsPerIter).toBe(2);
    expect(s1!.replicaGroups).toEqual([Array.from({ length: 64 }, (_, i) => i)]);
    // --dump-scenario shows the first point: each stream's ops on their streams over their groups, at once.
    const d = run(["allg", "-r", "64", "--instance", "trn2", "--streams-json", example, "--dump-scenario"]);
    const scn = JSON.parse(d.out) as { concurrent: boolean; ops: { op: string; bytes: number; stream: number; replicaGroups: number[][] }[] };
    expect(scn.concurrent).toBe(true);
    expect(scn.ops.map((o) => [o.op, o.bytes, o.stream, o.replicaGroups.length])).toEqual([["all-reduce", 1024, 0, 4], ["all-gather", 1024, 1, 1], ["all-gather", 1024, 1, 1]]);
    expect(d.err).toContain("the scenario of the command's first point (every stream's first size): npm run sim runs it (the sweep's other sizes come from the command line only)");
  });

  it("runs one block a stream, values checked, each stream's time taken in the run of all of them; a sharded run merges to the same", () => {
    const dir = mkdtempSync(join(tmpdir(), "streams-"));
    try {
      writeFileSync(join(dir, "groups.json"), JSON.stringify({ replica_groups: [[[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15]]] }));
      writeFileSync(join(dir, "streams.json"), JSON.stringify({ streams: [{ operation: "all_reduce", datatype: "bf16", minbytes: "1KB", maxbytes: "4KB", custom_replica_groups: "groups.json" }, { maxbytes: "1KB", ops_per_iter: 2 }] }));
      const args = ["allg", "-r", "16", "-b", "1KB", "-d", "fp32", "--instance", "trn2", "--streams-json", join(dir, "streams.json")];
      const r = run([...args, "-c", "--show-algorithm"]);
      expect(r.code, r.err).toBe(EXIT.OK);
      const blocks = r.out.trimEnd().split(/\n(?=\s*size\(B\))/);
      expect(blocks).toHaveLength(2);
      const rows = blocks.map((b) => b.split("\n").slice(1, -1).map((l) => l.trim().split(/\s+/)));
      expect(rows[0]!.map((x) => [x[0], x[2]])).toEqual([["1024", "bf16"], ["2048", "bf16"], ["4096", "bf16"]]);
      // Stream 1 (the command line's allg fp32, 1 KiB at most) stays at its one size while stream 0 runs its three.
      expect(rows[1]!.map((x) => [x[0], x[2]])).toEqual([["1024", "fp32"], ["1024", "fp32"], ["1024", "fp32"]]);
      expect(r.err).toMatch(/values checked at every point, each op alone and all streams at once/);
      expect(r.err).toMatch(/stream 0: all-reduce bf16, 3 size\(s\), 1 op\(s\) an iteration, 2 group\(s\) of 8; stream 1: all-gather fp32, 1 size\(s\), 2 op\(s\) an iteration, 1 group\(s\) of 16/);
      // Stream 1's two all-gathers an iteration take longer than one would beside the same stream 0.
      writeFileSync(join(dir, "once.json"), JSON.stringify({ streams: [{ operation: "all_reduce", datatype: "bf16", minbytes: "1KB", maxbytes: "4KB", custom_replica_groups: "groups.json" }, { maxbytes: "1KB" }] }));
      const once = run([...args.slice(0, -1), join(dir, "once.json")]);
      const onceUs = once.out.trimEnd().split(/\n(?=\s*size\(B\))/)[1]!.split("\n")[1]!.trim().split(/\s+/)[3];
      expect(Number(rows[1]![0]![3])).toBeGreaterThan(Number(onceUs));
      // --json: every row names its stream.
      const j = JSON.parse(run([...args, "--json"]).out) as { results: { stream: number; bytes: number }[] };
      expect(j.results.map((x) => [x.stream, x.bytes])).toEqual([[0, 1024], [0, 2048], [0, 4096], [1, 1024], [1, 1024], [1, 1024]]);
      // Two shards merged print the whole run.
      const whole = run(args);
      const parts = [0, 1].map((i) => {
        const out = join(dir, `p${i}.json`);
        expect(run([...args, "--shard", `${i}/2`, "--out", out]).code).toBe(EXIT.OK);
        return out;
      });
      let merged = "";
      expect(mergeMain(parts, (s) => (merged += s), () => {})).toBe(EXIT.OK);
      expect(merged).toBe(whole.out);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a point whose streams hang together is named by its streams' ops, not stream 0's alone", () => {
    const dir = mkdtempSync(join(tmpdir(), "streams-"));
    try {
      writeFileSync(join(dir, "streams.json"), JSON.stringify({ streams: [{ operation: "all_reduce", datatype: "bf16", minbytes: "1KB", maxbytes: "1KB" }, { maxbytes: "2KB", minbytes: "2KB" }] }));
      const a = parseNccomArgs(["allg", "-r", "8", "-d", "fp32", "--instance", "trn2", "--streams-json", join(dir, "streams.json")], {});
      if (a === "help") throw new Error("help");
      let err = "";
      // (The test seam nccom's own line has not: the program of both streams loses a semaphore write.)
      const code = runSource(a.run, () => ({ file: a.run.scenario, json: a.scenario, flags: "", streams: a.streams! }), () => {}, (s) => (err += s), { mutateImage: (img, op) => op === -1 && void dropFirstRemoteSemaInc(img, 0) });
      expect(code).toBe(EXIT.HANG);
      expect(err).toMatch(/ccsim: the streams' ops at once \(stream 0: all-reduce 1024 B, stream 1: all-gather 2048 B\) of .* hung\n/);
      expect(err).not.toMatch(/\n\s+at /);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses what a streams file cannot mean, naming the file and the entry", () => {
    const dir = mkdtempSync(join(tmpdir(), "streams-"));
    try {
      const cases: [unknown, RegExp][] = [
        [{ streams: [] }, /needs \{"streams": \[/],
        [{ streams: [{}, {}, {}, {}, {}] }, /5 streams: a rank has 4 CC streams/],
        [{ streams: [{ operation: "tree" }] }, /streams\[0\]\.operation must be one of/],
        [{ streams: [{ ops_per_iter: 0 }] }, /streams\[0\]\.ops_per_iter must be a whole number/],
        [{ streams: [{ nworkers: 8 }] }, /streams\[0\]\.nworkers is the command's, the same for every stream/],
        [{ streams: [{ datatype: "fp64" }] }, /streams\[0\]: .*fp64/],
        [{ streams: [{ minbytes: [1] }] }, /streams\[0\]\.minbytes must be a string, a number or true/],
        [{ streams: [{ custom_replica_groups: "missing.json" }] }, /streams\[0\]: --custom-replica-groups: cannot read .*missing\.json/],
      ];
      for (const [json, msg] of cases) {
        writeFileSync(join(dir, "s.json"), JSON.stringify(json));
        const r = run(["allr", "-r", "8", "--streams-json", join(dir, "s.json")]);
        expect(r.code, JSON.stringify(json)).toBe(EXIT.BAD_INPUT);
        expect(r.err).toMatch(/--streams-json: .*s\.json/);
        expect(r.err).toMatch(msg);
      }
      const both = run(["allr", "-r", "8", "--streams-json", join(dir, "s.json"), "--coalesced-cc-size-ratio", "1,1"]);
      expect(both.err).toMatch(/give --streams-json or --coalesced-cc-size-ratio, not both/);
      // A point's error names the stream as well as the op: streams 0 and 1 run 3 and 2 ops an iteration, so op 5 is stream 2's.
      writeFileSync(join(dir, "overlap.json"), JSON.stringify([[0, 1, 2, 3], [3, 4, 5, 6, 7]]));
      writeFileSync(join(dir, "s.json"), JSON.stringify({ streams: [{ maxbytes: "1K", ops_per_iter: 3 }, { operation: "all_gather", maxbytes: "1K", ops_per_iter: 2 }, { maxbytes: "1K", custom_replica_groups: "overlap.json" }] }));
      const third = run(["allr", "-r", "8", "-b", "1K", "--streams-json", join(dir, "s.json")]);
      expect(third.code).toBe(EXIT.BAD_INPUT);
      expect(third.err).toMatch(/: streams\[2\] \(ops\[5\]\.replicaGroups\[1\]\[0\]\): rank 3 appears twice/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
