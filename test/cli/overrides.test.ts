// Flags that change a scenario go through the same validation as the file: exit 1, naming the
// file, the flags, the field path and the value — never a stack trace or exit 2.
import { describe, expect, it } from "vitest";
import { runSim } from "../run-sim.ts";
import { EXIT } from "../../src/cli/sim.ts";

const run = runSim;

describe("command-line overrides are validated like the file", () => {
  it.each([
    [["scenarios/ring8.json", "-r", "3"], "scenarios/ring8.json with -r 3: ops[1].bytes", "SCN1006"],
    [["scenarios/kangaring32.json", "-r", "6"], "with -r 6: ops[1].bytes", "SCN1006"],
    [["scenarios/permute8.json", "-r", "2"], "with -r 2: ops[0].pairs[2][0]", "SCN1005"],
    [["scenarios/sendrecv2.json", "-r", "1"], "with -r 1: ops[0].pairs[0][1]", "SCN1005"],
    [["scenarios/ring8.json", "-r", "5", "--check", "none"], "with -r 5 --check none: ops[1].bytes", "SCN1006"],
    [["scenarios/alltoallv8.json", "-r", "4"], "with -r 4: ops[0].counts", "SCN1015"],
  ])("%j", (args, where, code) => {
    const r = run(args);
    expect(r.code).toBe(EXIT.BAD_INPUT);
    expect(r.err).toContain(where);
    expect(r.err).toContain(`[${code}]`);
    expect(r.err).not.toMatch(/\n\s+at /);
    expect(r.out).toBe("");
  });

  it("a sweep runs the file's ops at its own sizes: -r 5 with -b/-e (and --op) runs on ring8, whose all-gather size 5 does not divide", () => {
    for (const extra of [[], ["--op", "all-gather"], ["--op", "all-reduce", "-d", "bf16"]]) {
      const r = run(["scenarios/ring8.json", "-r", "5", "-b", "1M", "-e", "1M", "--check", "values", ...extra]);
      expect(r.code, r.err).toBe(EXIT.OK);
      expect(r.out).toContain("5 ranks per group");
    }
    // Without a sweep the file's ops run as they are: still refused.
    expect(run(["scenarios/ring8.json", "-r", "5"]).code).toBe(EXIT.BAD_INPUT);
  });

  it("a sweep asked for by --op or -d alone runs nccom-test's default size, and says so above the table (not with -b or -e)", () => {
    const said = /# sizes: nccom-test's default, 33554432 B \(no -b \/ -e given; without --op, -d or a size flag the file's ops run at their own sizes\)/;
    const alone = run(["scenarios/ring8.json", "-d", "bf16", "--op", "all-gather", "--check", "none"]);
    expect(alone.code, alone.err).toBe(EXIT.OK);
    expect(alone.out).toMatch(said);
    expect(alone.out).toMatch(/^33554432 /m);
    for (const sized of [["-b", "1M"], ["-e", "64M"]]) expect(run(["scenarios/ring8.json", "-d", "bf16", "--op", "all-gather", "--check", "none", ...sized]).out).not.toMatch(/# sizes:/);
  });

  it("a sweep's counts follow its size and rank count: all-gather-v and all-to-all-v under -r", () => {
    // On ring8's ring-only run the runtime refuses the uniform all-to-all-v at every size (rows of errors, exit 1).
    const refused = run(["scenarios/ring8.json", "--op", "all-to-all-v", "-b", "1K", "-e", "4K"]);
    expect(refused.code).toBe(EXIT.BAD_INPUT);
    // The seed's message, then why the mesh gate said no (what the user can change), the value the op the user wrote.
    expect(refused.err).toMatch(/ops\[0\]\.op: alltoall cannot be supported without Mesh algorithm, rank_n\(8\); the mesh gate said no: comm init built no mesh family \(no mesh algorithm allowed; MESH: bit 2 of cc_allowed_alg_types is clear .*\) \(value: "all-to-all-v"\) \[CMP1201\]/);
    // Checking values sizes each point's payload from its own counts (the file has none for the op).
    const checked = run(["scenarios/ring8.json", "--op", "all-to-all-v", "-b", "1K", "-e", "4K", "--check", "values"]);
    expect(checked.code, checked.err).toBe(EXIT.BAD_INPUT);
    expect(checked.err).toContain("[CMP1201]");
    const gathered = run(["scenarios/ring32-2nc.json", "-r", "6", "--op", "all-gather-v", "-b", "1K", "-e", "4K", "--check", "values", "--json"]);
    expect(gathered.code, gathered.err).toBe(EXIT.BAD_INPUT);
    expect(gathered.err).toContain("[CMP1201]");
    for (const [file, op, ranks] of [["scenarios/allgatherv8.json", "all-gather-v", "5"], ["scenarios/alltoallv8.json", "all-to-all-v", "4"]] as const) {
      const r = run([file, "-r", ranks, "-b", "1K", "-e", "64K", "-f", "8", "--op", op, "--check", "values", "--json"]);
      expect(r.code, r.err).toBe(EXIT.OK);
      expect(JSON.parse(r.out).results.map((x: { bytes: number }) => x.bytes)).toEqual([1024, 8192, 65536]);
    }
    // Without a sweep the file's counts are for its own 8 ranks.
    expect(run(["scenarios/allgatherv8.json", "-r", "5"]).err).toMatch(/ops\[0\]\.counts: needs 5 entries/);
  });

  it("a size range is counted before it is built: -b 1 -e 1T -i 1 is refused at once", () => {
    const r = run(["scenarios/ring8.json", "-b", "1", "-e", "1T", "-i", "1"]);
    expect(r.code).toBe(EXIT.BAD_INPUT);
    expect(r.err).toMatch(/makes 1099511627776 sizes; at most 4096/);
  });

  it("-r that fits runs: ring8 at 4 ranks, one group of all of them", () => {
    const r = run(["scenarios/ring8.json", "-r", "4", "--json"]);
    expect(r.code).toBe(EXIT.OK);
    const res = JSON.parse(r.out).results as { ranks: number; check: string }[];
    expect(res.map((x) => x.ranks)).toEqual([4, 4, 4]);
    expect(res.every((x) => x.check === "pass")).toBe(true);
  });
});
