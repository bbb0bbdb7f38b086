// Replay: an HLO module's distinct collectives, each simulated as npm run nccom runs the same op,
// size, type, ranks and groups; counted per step; bad modules and options refused.
import { describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main as replay } from "../../src/cli/replay.ts";
import { main as nccom } from "../../src/cli/nccom.ts";
import { EXIT } from "../../src/cli/sim.ts";
import { parseHlo } from "../../src/replay/hlo.ts";
import { planReplay } from "../../src/replay/replay.ts";

function run(args: string[], env: Record<string, string> = {}): { code: number; out: string; err: string } {
  let out = "";
  let err = "";
  const code = replay(args, (s) => (out += s), (s) => (err += s), env);
  return { code, out, err };
}

const LAYER = "test/fixtures/hlo/tp8-dp2-layer.hlo.txt";
const FORMS = "test/fixtures/hlo/forms.hlo.txt";
const TINY = "test/fixtures/hlo/tiny.hlo.txt";
const PIPELINE = "test/fixtures/hlo/pipeline.hlo.txt";
const NCCOM_OP: Record<string, string> = { "all-reduce": "allr", "all-gather": "allg", "reduce-scatter": "redsct", "all-to-all": "alltoall", permute: "permute" };

interface JsonRow {
  op: string;
  count: number;
  bytes: number;
  dtype: string;
  groupSize: number;
  groups?: number[][];
  pairs?: number[][];
  reduce?: string;
  algorithm: Record<string, string>;
  timeUs: Record<string, number>;
  totalUs: Record<string, number>;
}

describe("npm run replay", () => {
  it("--cc-dma-packet (else NEURON_RT_DBG_CC_DMA_PACKET_SIZE) runs every row at that packet, as npm run nccom does", () => {
    const rows = (r: { code: number; out: string }) => {
      expect(r.code).toBe(EXIT.OK);
      return (JSON.parse(r.out) as { collectives: JsonRow[] }).collectives;
    };
    const whole = rows(run([LAYER, "--json", "-j", "1"]));
    const small = rows(run([LAYER, "--json", "-j", "1", "--cc-dma-packet", "1024"]));
    // The variable, and the flag over it, on a one-collective module (the layer's at 1 KiB is a second each).
    const tiny = rows(run([TINY, "--json", "-j", "1", "--cc-dma-packet", "1024"]));
    expect(tiny[0]!.timeUs.trn1).toBeGreaterThan(1.2 * rows(run([TINY, "--json", "-j", "1"]))[0]!.timeUs.trn1!);
    expect(rows(run([TINY, "--json", "-j", "1"], { NEURON_RT_DBG_CC_DMA_PACKET_SIZE: "1024" }))).toEqual(tiny);
    expect(rows(run([TINY, "--json", "-j", "1", "--cc-dma-packet", "1024"], { NEURON_RT_DBG_CC_DMA_PACKET_SIZE: "65536" }))).toEqual(tiny);
    const big = small.findIndex((c, k) => c.timeUs.trn1! > 1.2 * whole[k]!.timeUs.trn1!);
    expect(big).toBeGreaterThanOrEqual(0);
    const c = small[big]!;
    const dir = mkdtempSync(join(tmpdir(), "ccsim-replay-packet-"));
    try {
      const groups = join(dir, "g.json");
      writeFileSync(groups, JSON.stringify(c.groups));
      let out = "";
      expect(nccom([NCCOM_OP[c.op]!, "-r", "16", "-b", String(c.bytes), "-e", String(c.bytes), "-d", c.dtype, "--custom-replica-groups", groups, "--json"], (x) => (out += x), () => {}, { NEURON_RT_DBG_CC_DMA_PACKET_SIZE: "1024" })).toBe(EXIT.OK);
      expect(JSON.parse(out).results[0].timeUs.toFixed(2)).toBe(c.timeUs.trn1!.toFixed(2));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(run([LAYER, "--cc-dma-packet", "65537"]).err).toMatch(/^replay: --cc-dma-packet "65537": "65537" is not a packet size in bytes from 64 to 65536/);
  });

  it("the realistic module (TP 8 x DP 2, 4 layers forward and backward): every row's time is npm run nccom's for the same collective", () => {
    const r = run([LAYER, "--instance", "trn1", "--json", "-j", "1"]);
    expect(r.code).toBe(EXIT.OK);
    const doc = JSON.parse(r.out) as { ranks: number; collectives: JsonRow[]; totalUs: Record<string, number> };
    expect(doc.ranks).toBe(16);
    // forward 4 x (2 all-gathers + 2 reduce-scatters), backward 4 x (the same + grad reduce-scatter + param all-gather), 3 all-reduces
    expect(doc.collectives.reduce((s, c) => s + c.count, 0)).toBe(4 * 4 + 4 * 6 + 3);
    const dir = mkdtempSync(join(tmpdir(), "ccsim-replay-"));
    try {
      for (const [k, c] of doc.collectives.entries()) {
        const groups = join(dir, `g${k}.json`);
        writeFileSync(groups, JSON.stringify(c.groups));
        let out = "";
        const code = nccom([NCCOM_OP[c.op]!, "-r", "16", "-b", String(c.bytes), "-e", String(c.bytes), "-d", c.dtype, "--custom-replica-groups", groups, "--instance", "trn1"], (s) => (out += s), () => {}, {});
        expect(code).toBe(EXIT.OK);
        const row = out.split("\n").find((l) => l.trim().startsWith(String(c.bytes)))!;
        expect(row.trim().split(/\s+/)[3]).toBe(c.timeUs.trn1!.toFixed(2));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const sum = doc.collectives.reduce((s, c) => s + c.totalUs.trn1!, 0);
    expect(doc.totalUs.trn1).toBeCloseTo(sum, 6);
  });

  it("a pipeline's sends (forward and back, 15 trips): each row's time is npm run nccom -- sendrecv's with its pairs; the host transfer is left out with a warning", () => {
    const r = run([PIPELINE, "--instance", "trn1,trn2", "--json", "-j", "1"]);
    expect(r.code).toBe(EXIT.OK);
    expect(r.err).toMatch(/send host: a transfer to the host \(is_host_transfer=true\), not between ranks/);
    const doc = JSON.parse(r.out) as { ranks: number; collectives: (JsonRow & { notes: string[] })[]; totalUs: Record<string, number> };
    expect(doc.ranks).toBe(8);
    expect(doc.collectives.map((c) => [c.op, c.count, c.bytes, c.dtype])).toEqual([
      ["send", 15, 8388608, "bf16"],
      ["send", 15, 8388608, "bf16"],
      ["all-reduce", 1, 8388608, "bf16"],
    ]);
    expect(doc.collectives[0]!.notes.join("\n")).toMatch(/a send and its recv \(the same channel_id\) are one transfer, timed once/);
    const dir = mkdtempSync(join(tmpdir(), "ccsim-replay-pp-"));
    try {
      for (const [k, c] of doc.collectives.slice(0, 2).entries()) {
        const pairs = join(dir, `p${k}.json`);
        writeFileSync(pairs, JSON.stringify(c.pairs));
        for (const inst of ["trn1", "trn2"]) {
          let out = "";
          expect(nccom(["sendrecv", "-r", "8", "-b", String(c.bytes), "-e", String(c.bytes), "-d", c.dtype, "--custom-src-target-pairs", pairs, "--instance", inst, "--json"], (x) => (out += x), () => {}, {})).toBe(EXIT.OK);
          expect(JSON.parse(out).results[0].timeUs.toFixed(2)).toBe(c.timeUs[inst]!.toFixed(2));
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    for (const inst of ["trn1", "trn2"]) expect(doc.totalUs[inst]).toBeCloseTo(doc.collectives.reduce((s, c) => s + c.totalUs[inst]!, 0), 6);
  });

  it("the table ends with each preset's accuracy, as nccom's does, and what its measured tables do not cover", () => {
    const r = run([TINY, "--instance", "trn1,trn3", "-j", "1", "--top", "0"]);
    expect(r.code, r.err).toBe(EXIT.OK);
    // (trn1's tables time no all-reduce: said under its line; trn3 has none.)
    expect(r.out).toMatch(/\n# accuracy: trn1 fitted on \d+ measured series \(\d+ points\): error [\d.]+x in-sample, [\d.]+x on series left out of the fit \(README: How accurate are the estimates\)\n# outside trn1's measured tables \([^)]*\): all-reduce, never measured: the error figures above were not measured on such runs\n# accuracy: trn3 is not calibrated against measured tables \(its numbers are its preset's sources\)\n$/);
  });

  it("iota [4,2]<=[2,4]T(1,0) and the list {{0,4},{1,5},{2,6},{3,7}} are one row, counted twice", () => {
    const plan = planReplay(parseHlo(FORMS, readFileSync(FORMS, "utf8")), { nodes: 1 });
    const rows = plan.rows.filter((r) => r.instructions.includes("ars") || r.instructions.includes("ar.list"));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ count: 2, groups: [[0, 4], [1, 5], [2, 6], [3, 7]], groupSize: 2, reduce: "max", bytes: 8192, dtype: "bf16" });
  });

  it("sizes are nccom-test's: all-gather's the gathered output, combined tuples summed, types mapped to the same bytes", () => {
    const plan = planReplay(parseHlo(FORMS, readFileSync(FORMS, "utf8")), { nodes: 1 });
    const row = (name: string) => plan.rows.find((r) => r.instructions.includes(name))!;
    expect(row("ags")).toMatchObject({ op: "all-gather", bytes: 512 * 2 * 8, dtype: "bf16" });
    expect(row("ag.tuple")).toMatchObject({ op: "all-gather", bytes: 2 * 2 * 4 * 8, dtype: "fp32" });
    expect(row("ar.combined")).toMatchObject({ bytes: 4096 * 2 + 1024 * 4, dtype: "bf16" });
    expect(row("rs.async")).toMatchObject({ op: "reduce-scatter", bytes: 1024 * 4, reduce: "min" });
    // pred 64 + c64 32x8 + s8 128 + u8 128 + f16 64x2 + s32 32x4 + u32 32x4 + two fp8 128
    expect(row("ar.types")).toMatchObject({ bytes: 64 + 256 + 128 + 128 + 128 + 128 + 128 + 128 + 128, dtype: "fp32" });
    expect(row("ar.types").notes.join("\n")).toMatch(/c64 moves as two fp32/);
    expect(row("ar.product").notes.join("\n")).toMatch(/product is timed as a sum/);
    // (Logical reductions: or as a max, and as a min, xor as a sum, each said.)
    const logic = parseHlo("logic", "HloModule logic, replica_count=8\n\nor.c {\n  a = pred[] parameter(0)\n  b = pred[] parameter(1)\n  ROOT r = pred[] or(a, b)\n}\n\nand.c {\n  a = pred[] parameter(0)\n  b = pred[] parameter(1)\n  ROOT r = pred[] and(a, b)\n}\n\nENTRY main {\n  q = pred[64]{0} parameter(0)\n  o = pred[64]{0} all-reduce(q), replica_groups={}, to_apply=or.c\n  ROOT n = pred[64]{0} all-reduce(q), replica_groups={}, to_apply=and.c\n}\n");
    const lp = planReplay(logic, { nodes: 1 });
    expect(lp.rows.map((r) => [r.reduce, r.notes.join("; ")])).toEqual([
      ["max", expect.stringMatching(/an or is timed as a max/)],
      ["min", expect.stringMatching(/an and is timed as a min/)],
    ]);
    expect(row("cps")).toMatchObject({ op: "permute", pairs: [[0, 1], [1, 0], [2, 3], [3, 2], [4, 5], [5, 4], [6, 7], [7, 6]] });
  });

  it("groups of one rank move nothing: listed, 0 us, not simulated", () => {
    const r = run([FORMS, "--json", "-j", "1"]);
    expect(r.code).toBe(EXIT.OK);
    const doc = JSON.parse(r.out) as { collectives: (JsonRow & { instructions: string[] })[] };
    const single = doc.collectives.find((c) => c.instructions.includes("ar.single"))!;
    expect(single).toMatchObject({ groupSize: 1, count: 1, timeUs: { trn1: 0 }, algorithm: { trn1: "none" } });
    expect(r.err).toMatch(/warning: .*unknown trip count/);
  });

  it("the table: one row per distinct collective, a column set per instance, the step's total, the largest K", () => {
    const r = run([LAYER, "--instance", "trn1,trn2", "--top", "2"]);
    expect(r.code).toBe(EXIT.OK);
    const lines = r.out.split("\n");
    expect(lines[0]).toBe(`replay: ${LAYER} (HloModule jit_train_step), 16 ranks on 1 node(s)`);
    expect(lines[1]).toBe("collectives: 13 instruction(s), 6 distinct, 43 run(s) per step");
    expect(lines[3]).toMatch(/^#\s+op\s+hlo\s+dtype\s+bytes\s+groups\s+count\s+trn1 alg\s+trn1 each\(us\)\s+trn1 total\(us\)\s+trn1 share\s+trn2 alg/);
    expect(r.out).toMatch(/communication per step: trn1 [\d.]+ us, trn2 [\d.]+ us/);
    expect(r.out).toMatch(/largest 2 on trn1:\n  #\d+ .*\n  #\d+ .*\n/);
    // deterministic
    expect(run([LAYER, "--instance", "trn1,trn2", "--top", "2"]).out).toBe(r.out);
  });

  it("uneven groups are shown by their sizes and run as nccom runs them", () => {
    const dir = mkdtempSync(join(tmpdir(), "ccsim-replay-uneven-"));
    const f = join(dir, "uneven.txt");
    writeFileSync(f, "HloModule m, replica_count=8\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY main {\n  p = f32[4096]{0} parameter(0)\n  ROOT w = f32[4096]{0} all-reduce(p), replica_groups={{0,1,2},{3,4,5,6,7}}, to_apply=add\n}\n");
    const r = run([f, "--top", "0"]);
    expect(r.code, r.err).toBe(EXIT.OK);
    expect(r.out).toMatch(/^1\s+all-reduce\s+f32\[4096\]\s+fp32\s+16384\s+3\+5\s+1\s/m);
    rmSync(dir, { recursive: true, force: true });
  });

  it("--ranks and --nodes: the module's groups on more nodes; a group naming a rank past --ranks is refused", () => {
    const two = run([LAYER, "--nodes", "2", "--json", "-j", "1"]);
    expect(two.code).toBe(EXIT.OK);
    expect(JSON.parse(two.out)).toMatchObject({ ranks: 16, nodes: 2 });
    const few = run([LAYER, "--ranks", "8"]);
    expect(few.code).toBe(EXIT.BAD_INPUT);
    expect(few.out).toBe("");
    expect(few.err).toMatch(/tp8-dp2-layer\.hlo\.txt:\d+: all-gather ag\.attn: replica_groups name rank 8, but there are 8 ranks \(--ranks\)/);
  });

  describe("refused with file, line and text, nothing on stdout", () => {
    const dir = mkdtempSync(join(tmpdir(), "ccsim-replay-bad-"));
    const file = (name: string, text: string) => {
      const f = join(dir, name);
      writeFileSync(f, text);
      return f;
    };
    const body = (ins: string) => `HloModule m, num_partitions=8\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY main {\n  p = f32[64]{0} parameter(0)\n${ins}\n}\n`;
    const cases: [string, string[], RegExp][] = [
      ["groups that overlap", [file("overlap.txt", body("  ROOT w = f32[64]{0} all-reduce(p), replica_groups={{0,1,2,3},{3,4,5,6,7}}, to_apply=add"))], /overlap\.txt:11: all-reduce w: rank 3 is in two replica groups/],
      ["groups that leave ranks out", [file("cover.txt", body("  ROOT w = f32[64]{0} all-reduce(p), replica_groups={{0,1},{2,3}}, to_apply=add"))], /cover\.txt:11: all-reduce w: its replica groups cover 4 of 8 ranks/],
      ["an unknown element type", [file("type.txt", body("  ROOT w = q7[64]{0} all-reduce(q7[64]{0} p), replica_groups={}, to_apply=add"))], /type\.txt:11: all-reduce w: element type 'q7' is not one replay knows/],
      ["a permute's pair past the ranks", [file("pairs.txt", body("  ROOT w = f32[64]{0} collective-permute(p), source_target_pairs={{0,9}}")), "--ranks", "8"], /pairs\.txt:11: collective-permute w: source_target_pairs name rank 9, but there are 8 ranks/],
      ["not HLO", [file("notes.txt", "my notes\n")], /notes\.txt:1: not HLO text/],
      ["a missing file", [join(dir, "absent.txt")], /absent\.txt: cannot read \(ENOENT\)/],
      ["no module", [], /no HLO module given/],
      ["an unknown flag", [LAYER, "--frobnicate"], /unknown option --frobnicate/],
      ["a flag twice", [LAYER, "--ranks", "16", "--ranks", "8"], /--ranks/],
      ["an unknown preset", [LAYER, "--instance", "trn1,trn9"], /trn9/],
      // (An empty name was dropped, and a preset named twice printed its columns twice.)
      ["an empty preset name", [LAYER, "--instance", "trn1,,trn2"], /--instance "trn1,,trn2": an empty preset name/],
      ["a preset named twice", [LAYER, "--instance", "trn1,trn2,trn1"], /--instance "trn1,trn2,trn1": trn1 given twice/],
      ["ranks that leave a rank out of every group", [LAYER, "--ranks", "17"], /:36: all-gather ag\.attn: its replica groups cover 16 of 17 ranks/],
      ["ranks that do not split over the nodes", [FORMS, "--nodes", "3"], /forms\.hlo\.txt:\d+: .*does not run on trn1: -r 8 does not split over -N 3 nodes/],
      // Counts past what ccsim runs are refused before any list of ranks is made (a mutated module's rank 99999999999 was a RangeError).
      ["a group naming a rank past what ccsim runs", [file("far.txt", body("  ROOT w = f32[64]{0} all-reduce(p), replica_groups={{0,99999999999}}, to_apply=add"))], /far\.txt:11: all-reduce w names rank 99999999999: ccsim runs at most 8192 ranks/],
      ["replicas x partitions past what ccsim runs", [file("many.txt", body("  ROOT w = f32[64]{0} all-reduce(p), replica_groups={}, to_apply=add").replace("num_partitions=8", "replica_count=100000, num_partitions=100000"))], /many\.txt:1: replica_count x num_partitions is 10000000000: ccsim runs at most 8192 ranks/],
      ["--ranks past what ccsim runs", [LAYER, "--ranks", "100000000000"], /--ranks 100000000000: ccsim runs at most 8192 ranks/],
      ["a shape of more than 2^53 bytes", [file("huge.txt", body("  ROOT w = f32[4294967296,4294967296]{1,0} all-reduce(f32[4294967296,4294967296]{1,0} p), replica_groups={}, to_apply=add"))], /huge\.txt:11: all-reduce w: moves f32\[4294967296,4294967296\]: more than 2\^53 bytes/],
    ];
    it.each(cases)("%s", (_n, args, msg) => {
      const r = run(args);
      expect(r.code).toBe(EXIT.BAD_INPUT);
      expect(r.out).toBe("");
      expect(r.err).toMatch(msg);
      expect(r.err).not.toMatch(/\n\s+at /);
    });
  });

  it("--help", () => {
    const r = run(["--help"]);
    expect(r.code).toBe(EXIT.OK);
    expect(r.out).toMatch(/usage: npm run replay -- MODULE\.txt/);
  });
});
