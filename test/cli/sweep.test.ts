import { mkdtempSync, readFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { runSim } from "../run-sim.ts";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { jsonChunks, Lazy, main as disasm } from "../../src/cli/disasm.ts";
import fc from "fast-check";
import { parseSize, sweepSizes } from "../../src/ir/sizes.ts";
import { FABRIC_PID } from "../../src/cli/trace-writer.ts";
import { expectGolden } from "../golden.ts";

const run = runSim;
const tmp = () => mkdtempSync(join(tmpdir(), "ccsim-"));

describe("size-range parser", () => {
  it("takes bytes and nccom-test's units (binary multiples, any case, optional b / ib)", () => {
    expect(["64", "1K", "2kb", "1MB", "1G", "1.5K", "3 mib", "1gb"].map((s) => parseSize(s, "-b"))).toEqual([64, 1024, 2048, 1 << 20, 1 << 30, 1536, 3 << 20, 1 << 30]);
  });
  it("rejects what is not a whole positive size", () => {
    for (const bad of ["abc", "0", "1.3", "-5", "1X", ""]) expect(() => parseSize(bad, "-b"), bad).toThrow(/-b/);
    // (A whole number past 2^53 is said as such, not as "not a whole number".)
    expect(() => parseSize("2000000000000000000", "-e")).toThrow(/^-e: "2000000000000000000" is more than 2\^53 bytes, past any size ccsim runs$/);
    expect(() => parseSize("9000000T", "-e")).toThrow(/more than 2\^53 bytes/);
    expect(parseSize(String(Number.MAX_SAFE_INTEGER), "-e")).toBe(Number.MAX_SAFE_INTEGER);
  });
  it("builds geometric (-f) and arithmetic (-i) ranges, and rejects bad ones", () => {
    expect(sweepSizes({ min: 1024, max: 1 << 30, factor: 4 })).toHaveLength(11);
    expect(sweepSizes({ min: 1024, max: 4096, step: 1024 })).toEqual([1024, 2048, 3072, 4096]);
    expect(() => sweepSizes({ min: 2048, max: 1024 })).toThrow(/above the maximum/);
    expect(() => sweepSizes({ min: 1, max: 2, factor: 1 })).toThrow(/integer >= 2/);
    expect(() => sweepSizes({ min: 1, max: 2, factor: 2, step: 1 })).toThrow(/not both/);
  });
  it("bad ranges on the command line exit 1", () => {
    expect(run(["scenarios/ring8.json", "-b", "2K", "-e", "1K"])).toMatchObject({ code: 1, err: expect.stringMatching(/-b 2048 is above -e 1024/) });
    expect(run(["scenarios/ring8.json", "-b", "1K", "-f", "1"])).toMatchObject({ code: 1, err: expect.stringMatching(/-f must be an integer >= 2/) });
    expect(run(["scenarios/ring8.json", "-b", "lots"])).toMatchObject({ code: 1, err: expect.stringMatching(/"lots" is not a size/) });
    expect(run(["scenarios/ring8.json", "-b", "1K", "-f", "2", "-i", "1K"])).toMatchObject({ code: 1, err: expect.stringMatching(/not both/) });
    expect(run(["scenarios/ring8.json", "--plot", "x.svg"])).toMatchObject({ code: 1, err: expect.stringMatching(/--plot draws a sweep/) });
  });
});

describe("sweeps", () => {
  it("golden: nccom-test's columns, the algorithm column, the closing average, and the JSON report", () => {
    const dir = tmp();
    const report = join(dir, "r.json");
    const r = run(["scenarios/ring8.json", "-b", "64K", "-e", "1M", "-f", "4", "--op", "all-gather", "--show-algorithm", "--report-to-json-file", report]);
    expect(r.code).toBe(0);
    expect(r.err).toBe(""); // no progress when stderr is not a terminal
    expectGolden("sweep-ring8-all-gather.txt", r.out);
    expectGolden("sweep-ring8-all-gather.json", readFileSync(report, "utf8"));
    const j = JSON.parse(readFileSync(report, "utf8"));
    expect(Object.keys(j.results[0])).toEqual(["size(B)", "count(elems)", "type", "algbw(GB/s)", "busbw(GB/s)", "time:avg(us)"]);
    expect(r.out).toMatch(/# timing only/);
  });
  it("a check note counts only the sizes that ran: every size refused checks nothing", () => {
    const r = run(["scenarios/ring8.json", "-b", "1K", "-e", "4K", "--op", "all-to-all", "--check", "values"]);
    expect(r.code).toBe(1);
    expect(r.out).toContain("# no size ran: nothing checked");
    expect(r.out).not.toContain("values checked");
    // The refusal is said once, with how many points it held for.
    expect(r.err.trim().split("\n")).toEqual([expect.stringMatching(/^ccsim: scenarios\/ring8\.json: ops\[0\]\.op: alltoall cannot be supported without Mesh algorithm.*\[CMP1201\] \(3 sweep points\)$/)]);
  });
  it("--explain says for a refused size too how its op went where it did (as a single run's refusal does)", () => {
    const r = run(["scenarios/ring8.json", "-b", "1K", "-e", "2K", "--op", "all-to-all", "--explain"]);
    expect(r.code).toBe(1);
    for (const bytes of [1024, 2048]) {
      const at = r.out.indexOf(`size ${bytes} B:\n`);
      expect(at).toBeGreaterThanOrEqual(0);
      const block = r.out.slice(at, r.out.indexOf("\nsize", at + 1) >>> 0);
      expect(block).toContain(`op 0: all-to-all ${bytes} B`);
      expect(block).toMatch(/mesh +no: comm init built no mesh family/);
      expect(block).toContain('resolved: enc_alg_type 0 "Ring"');
    }
    expect(r.out).toMatch(/1024 .*error: ops\[0\]\.op: alltoall cannot be supported without Mesh algorithm/);
  });
  it("--op of a pairs op takes the pairs of the scenario's op of that kind, and says so where there is none", () => {
    for (const op of ["send", "permute"]) {
      const none = run(["scenarios/ring8.json", "-b", "1K", "-e", "4K", "--op", op]);
      expect(none.code).toBe(1);
      expect(none.err).toMatch(new RegExp(`^ccsim: --op ${op}: scenarios/ring8\\.json has no ${op} op to take its "pairs" \\(source and target ranks\\) from`));
      expect(none.out).toBe("");
    }
    expect(run(["scenarios/permute8.json", "-b", "1K", "-e", "1K", "--op", "permute"]).code).toBe(0);
  });
  it("a check note leaves out the sizes whose symbolic tracking outgrew memory, and names them", () => {
    // Out of room at 8 KiB only (the probe is asked once a size there: at its first write).
    let asked = 0;
    const r = run(["scenarios/ring8.json", "-b", "4K", "-e", "16K", "--op", "all-reduce", "--check", "symbolic", "--jobs", "1"], { symbolicFull: () => (++asked === 2 ? "no room" : undefined) });
    expect(r.code).toBe(0);
    expect(r.out).toContain("# checked symbolically at every other size (contributions by range, no payload kept)");
    expect(r.out).toContain("# not checked at 8192 B: symbolic tracking outgrew memory (timed only)");
    const none = run(["scenarios/ring8.json", "-b", "4K", "-e", "8K", "--op", "all-reduce", "--check", "symbolic", "--jobs", "1"], { symbolicFull: () => "no room" });
    expect(none.out).toContain("# no size was checked");
    expect(none.out).toContain("# not checked at 4096 B, 8192 B: symbolic tracking outgrew memory (timed only)");
  });
  it("checks values where asked and says so; -d and -r override the scenario", () => {
    const r = run(["scenarios/ring8.json", "-b", "4K", "-e", "16K", "--op", "reduce-scatter", "-d", "bf16", "-r", "4", "--check", "values"]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("# values checked at every size");
    expect(r.out).toContain("# ring8 on trn1: 4 ranks per group");
    const rows = r.out.split("\n").filter((l) => /^\s+\d/.test(l));
    expect(rows.map((l) => l.trim().split(/\s+/).slice(0, 3))).toEqual([
      ["4096", "2048", "bf16"],
      ["8192", "4096", "bf16"],
      ["16384", "8192", "bf16"],
    ]);
  });
});

describe("--trace", () => {
  it("writes Chrome trace events that parse, are well formed and ordered, with core, queue, link and semaphore tracks", () => {
    const file = join(tmp(), "t.json");
    expect(run(["scenarios/ring8.json", "--check", "none", "--trace", file]).code).toBe(0);
    const t = JSON.parse(readFileSync(file, "utf8"));
    const ev = t.traceEvents as { name: string; ph: string; ts: number; dur?: number; pid: number; tid?: number; args?: Record<string, unknown> }[];
    for (const e of ev) {
      expect(typeof e.name).toBe("string");
      expect(["X", "C", "M"]).toContain(e.ph);
      expect(Number.isFinite(e.ts) && e.ts >= 0).toBe(true);
      expect(Number.isInteger(e.pid)).toBe(true);
      if (e.ph === "X") expect(e.dur! >= 0 && Number.isInteger(e.tid)).toBe(true);
      if (e.ph === "C") expect(typeof e.args!.value).toBe("number");
    }
    const body = ev.filter((e) => e.ph !== "M");
    for (let i = 1; i < body.length; i++) expect(body[i]!.ts).toBeGreaterThanOrEqual(body[i - 1]!.ts);
    const threads = ev.filter((e) => e.name === "thread_name").map((e) => String(e.args!.name));
    expect(threads).toContain("TopSP 0");
    expect(threads.some((n) => /^DMA \d+ queue 15$/.test(n))).toBe(true);
    expect(ev.some((e) => e.pid === FABRIC_PID && e.ph === "X")).toBe(true);
    expect(body.some((e) => e.ph === "X" && e.name.includes("cc_op 0"))).toBe(true);
    expect(body.some((e) => e.ph === "X" && e.name.startsWith("wait sem"))).toBe(true);
    expect(body.some((e) => e.ph === "C")).toBe(true);
    expect(t.otherData).toBeUndefined();
  });

  it("keeps at most --trace-limit events, says so on stderr and in otherData, and the file still parses", () => {
    const file = join(tmp(), "t.json");
    const whole = join(tmp(), "whole.json");
    expect(run(["scenarios/ring8.json", "--check", "none", "--trace", whole]).code).toBe(0);
    const all = (JSON.parse(readFileSync(whole, "utf8")).traceEvents as { ph: string }[]).filter((e) => e.ph !== "M").length;
    const r = run(["scenarios/ring8.json", "--check", "none", "--trace", file, "--trace-limit", "1000"]);
    expect(r.code).toBe(0);
    const t = JSON.parse(readFileSync(file, "utf8"));
    expect((t.traceEvents as { ph: string }[]).filter((e) => e.ph !== "M").length).toBe(1000);
    const said = new RegExp(`kept the first 1000 trace events; recording stopped at \\d+\\.\\d{3} us of simulated time and ${all - 1000} more were left out`);
    expect(r.err).toMatch(said);
    expect(t.otherData.truncated).toMatch(said);
    expect(run(["scenarios/ring8.json", "--trace", file, "--trace-limit", "0"]).err).toMatch(/--trace-limit/);
  });
});

describe("--stats", () => {
  it("prints per-link bytes and busy fraction, the busiest link, engines and HBM per op", () => {
    const r = run(["scenarios/ring8.json", "--check", "none", "--stats"]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/stats: all-reduce 4194304 B fp32 \(\d+\.\d+ us\)/);
    expect(r.out).toMatch(/busiest link: link \d+->\d+, \d+ B, busy \d+\.\d%/);
    expect(r.out).toMatch(/links used: 16 of 66 directions/); // 64 NeuronLink directions and the NIC pair
    expect(r.out).toContain("HBM per device:");
    expect(r.out).toMatch(/dev0\.dma0\s+\d+ B\s+busy\s+\d+\.\d%/);
  });
});

describe("--plot", () => {
  it("writes a valid SVG with one labelled series per op and algorithm", () => {
    const file = join(tmp(), "p.svg");
    expect(run(["scenarios/ring8.json", "-b", "16K", "-e", "256K", "-f", "4", "--plot", file]).code).toBe(0);
    const svg = readFileSync(file, "utf8");
    expect(wellFormed(svg)).toBe(true);
    const series = [...svg.matchAll(/data-series="([^"]+)"/g)].map((m) => m[1]);
    // Two panels (busbw, time), one line per series in each.
    expect(series).toEqual(["all-reduce fp32 (ring)", "all-gather bf16 (ring)", "reduce-scatter int32 (ring)", "all-reduce fp32 (ring)", "all-gather bf16 (ring)", "reduce-scatter int32 (ring)"]);
    expect(svg).toContain(">all-gather bf16 (ring)</text>");
  });
  it("writes nothing when the run fails", () => {
    const file = join(tmp(), "p.svg");
    expect(run(["test/fixtures/bad/unknown-dtype.json", "-b", "16K", "--plot", file]).code).toBe(1);
    expect(existsSync(file)).toBe(false);
  });
});

describe("disassembler", () => {
  const dis = (args: string[]) => {
    let out = "";
    let err = "";
    const code = disasm(args, (s) => (out += s), (s) => (err += s));
    return { code, out, err };
  };
  it("golden: ring8 op 1, rank 0, decoded field by field", () => {
    const r = dis(["scenarios/ring8.json", "--rank", "0", "--op", "1"]);
    expect(r.code).toBe(0);
    expectGolden("disasm-ring8-op1-rank0.txt", r.out);
    expect(r.out).toContain("spad_ctrl[0]: cc_op=1 algo_type=0 (RING)");
    expect(r.out).toMatch(/rx\[\d+\] len=4 ring=1 dst=dev1:topsp0:sem0\.inc/);
  });
  it("--json uses the firmware reflector's keys for cc_op_entry", () => {
    const j = JSON.parse(dis(["scenarios/ring8.json", "--rank", "0", "--json"]).out);
    const e = j.devices[0].topsps[0].entries[0];
    expect(e.ring).toEqual({ channel_list: 1 });
    expect(Object.keys(e.mesh)).toEqual(["sema_shift_offset", "sema_mask"]);
    expect(j.devices[0].queues[0].tx.some((t: { kind: string; op?: string }) => t.kind === "cce" && t.op === "ADD")).toBe(true);
  });
  it("shows the device barrier that closes each earlier stage of a hierarchical op", () => {
    const r = dis(["scenarios/hier-2x16.json", "--rank", "0"]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("      device barrier: queue 14 via dev0:bcast:q14.m2s mask=0x00000001\n        step 0: arrive m2s=0 s2m=0, wait dev0:topsp0:sem38.read >= 1\n        step 1: arrive m2s=15 s2m=15, wait dev0:topsp0:sem39.read >= 15\n");
    const j = JSON.parse(dis(["scenarios/hier-2x16.json", "--rank", "0", "--json"]).out);
    expect(j.devices[0].topsps[0].barriers.map((b: { entry: number }) => b.entry)).toEqual([0, 1]);
  });
  it("streams: a large op's disassembly is written in pieces as it is decoded, never as one string", () => {
    const pieces: number[] = [];
    const code = disasm(["scenarios/trn2-ring64.json"], (s) => pieces.push(s.length), () => {});
    expect(code).toBe(0);
    expect(pieces.length).toBeGreaterThan(2);
    expect(Math.max(...pieces)).toBeLessThan(2 ** 20 + 4096);
  });
  it("property: the streamed JSON is JSON.stringify(value, null, 2)'s text, with lazy sequences as arrays", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.boolean(), (v, lazy) => {
        const wrap = (x: unknown): unknown => (Array.isArray(x) ? (lazy ? new Lazy(x.length, (i) => wrap(x[i])) : x.map(wrap)) : x !== null && typeof x === "object" ? Object.fromEntries(Object.entries(x).map(([k, y]) => [k, wrap(y)])) : x);
        expect([...jsonChunks(wrap(v))].join("")).toBe(JSON.stringify(v, null, 2));
      }),
    );
  });
  it("bad arguments exit 1", () => {
    expect(dis(["scenarios/ring8.json", "--op", "9"])).toMatchObject({ code: 1, err: expect.stringMatching(/has 3 ops/) });
    expect(dis([])).toMatchObject({ code: 1 });
    expect(dis(["--help"]).out).toContain("usage: npm run disasm");
  });
});

/** A small XML well-formedness check: balanced, properly nested tags with quoted attributes. */
function wellFormed(xml: string): boolean {
  const stack: string[] = [];
  const body = xml.replace(/^<\?xml[^?]*\?>\s*/, "");
  const re = /<(\/?)([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>|<|>/g;
  let m: RegExpExecArray | null;
  let last = 0;
  while ((m = re.exec(body))) {
    if (/[<>]/.test(body.slice(last, m.index))) return false;
    last = re.lastIndex;
    if (m[0] === "<" || m[0] === ">") return false;
    const [, close, name, , self] = m;
    if (close) {
      if (stack.pop() !== name) return false;
    } else if (!self) stack.push(name!);
  }
  return stack.length === 0 && !/[<>]/.test(body.slice(last));
}

describe("a sweep survives a size that fails", () => {
  it("prints every size, the failed one with its error in place of the figures, marks it in the JSON report, and exits non-zero", async () => {
    const { main, EXIT } = await import("../../src/cli/sim.ts");
    const { CompileError } = await import("../../src/ir/errors.ts");
    const { mkdtempSync, readFileSync, rmSync } = await import("node:fs");
    const { join } = await import("node:path");
    const { tmpdir } = await import("node:os");
    const dir = mkdtempSync(join(tmpdir(), "ccsim-sweep-"));
    const report = join(dir, "r.json");
    let calls = 0;
    let out = "";
    let err = "";
    const code = main(
      ["scenarios/ring8.json", "--op", "all-reduce", "-b", "1K", "-e", "16K", "-f", "2", "--report-to-json-file", report],
      (s) => (out += s),
      (s) => (err += s),
      {
        mutateImage: () => {
          if (++calls === 3) throw new CompileError("CMP1999", "a size that cannot be composed", { path: "ops[0].bytes", value: 4096 });
        },
      },
    );
    expect(code).toBe(EXIT.BAD_INPUT);
    const lines = out.split("\n").filter((l) => /^\s*\d/.test(l));
    expect(lines).toHaveLength(5);
    expect(lines[2]).toMatch(/^\s*4096\s+1024\s+fp32\s+error: ops\[0\]\.bytes: a size that cannot be composed/);
    expect(lines.filter((l) => /error:/.test(l))).toHaveLength(1);
    expect(err).toContain("a size that cannot be composed");
    const json = JSON.parse(readFileSync(report, "utf8")) as { results: Record<string, unknown>[] };
    expect(json.results).toHaveLength(5);
    expect(json.results[2]!["error"]).toMatch(/cannot be composed/);
    expect(json.results[3]!["time:avg(us)"]).toBeGreaterThan(0);
    rmSync(dir, { recursive: true, force: true });
  });
});

describe("sweeps on worker threads", () => {
  it("--jobs 2 prints exactly what --jobs 1 prints (table and JSON report)", async () => {
    const { main, EXIT } = await import("../../src/cli/sim.ts");
    const run = (jobs: string) => {
      let out = "";
      const code = main(["scenarios/ring8.json", "--op", "all-reduce", "-b", "64K", "-e", "8M", "-f", "2", "--show-algorithm", "--json", "--jobs", jobs], (s) => (out += s), () => {});
      return { code, out };
    };
    const one = run("1");
    const two = run("2");
    expect(one.code).toBe(EXIT.OK);
    expect(two.code).toBe(EXIT.OK);
    expect(JSON.parse(one.out).results).toHaveLength(8);
    expect(two.out).toBe(one.out);
  });
});
