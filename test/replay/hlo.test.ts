// HLO text as frameworks dump it: the collectives, their shapes, groups, pairs and reductions, and
// how many times one step runs each (while loops with known trip counts, async wrappers).
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { readFileSync } from "node:fs";
import { HloError, parseGroups, parseHlo } from "../../src/replay/hlo.ts";

const FORMS = "test/fixtures/hlo/forms.hlo.txt";
const fail = (m: string): never => {
  throw new Error(m);
};

function mod(body: string, header = "HloModule m, num_partitions=8"): string {
  return `${header}\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY main {\n  p = f32[64]{0} parameter(0)\n${body}\n  ROOT r = f32[] constant(0)\n}\n`;
}

describe("HLO text", () => {
  const m = parseHlo(FORMS, readFileSync(FORMS, "utf8"));
  const by = (name: string) => m.collectives.find((c) => c.c.name === name)!;

  it("reads the module's header and every collective form, async -start forms as their op, -done forms not again", () => {
    expect(m.name).toBe("jit_forms");
    expect(m.numPartitions).toBe(8);
    expect(m.collectives.map((c) => c.c.name)).toEqual(["ar.loop", "cp.u", "rs.async", "ars", "ar.list", "ags", "ag.tuple", "ar.combined", "ar.product", "a2a", "a2a.tuple", "cps", "ar.single", "ar.types"]);
    expect(by("ars").c.op).toBe("all-reduce");
    expect(by("ags").c.op).toBe("all-gather");
    expect(by("cps").c.op).toBe("collective-permute");
  });

  it("operand shapes: printed inline, or looked up by name (defined before or after), tuples summed", () => {
    expect(by("ags").c.operands).toEqual([{ type: "bf16", elements: 512, text: "bf16[512]" }]);
    expect(by("a2a").c.operands).toEqual([{ type: "f32", elements: 1024, text: "f32[8,128]" }]);
    expect(by("ar.combined").c.operands.map((o) => o.text)).toEqual(["bf16[4096]", "f32[8,128]"]);
    expect(by("a2a.tuple").c.operands).toHaveLength(8);
    // collective-permute-start's result is a tuple with u32 contexts: the operand is what moves
    expect(by("cps").c.operands.map((o) => o.text)).toEqual(["f32[8,128]"]);
  });

  it("groups: lists, {} (none given), iota and transposed iota; pairs; reductions; group modes", () => {
    expect(by("ars").c.groups).toEqual([[0, 4], [1, 5], [2, 6], [3, 7]]);
    expect(by("ar.list").c.groups).toEqual(by("ars").c.groups);
    expect(by("ags").c.groups).toBeUndefined();
    expect(by("ar.loop").c.groups).toEqual([[0, 1, 2, 3, 4, 5, 6, 7]]);
    expect(by("cp.u").c.pairs).toHaveLength(8);
    expect(by("ars").c.reduce).toBe("max");
    expect(by("rs.async").c.reduce).toBe("min");
    expect(by("ar.product").c.reduce).toBe("product");
    expect(by("ar.loop").c.reduce).toBe("sum");
    expect(by("ar.loop").c.mode).toBe("flattened");
    expect(by("a2a").c.mode).toBe("cross-partition");
  });

  it("a while body counts once per known trip; an unknown trip count once, with a warning; async-start's wrapped computation once", () => {
    expect(by("ar.loop").count).toBe(6);
    expect(by("cp.u")).toMatchObject({ count: 1, unknownTrip: true });
    expect(by("rs.async").count).toBe(1);
    expect(m.warnings).toHaveLength(1);
    expect(m.warnings[0]).toMatch(/forms\.hlo\.txt:\d+: body\.unknown runs in a while loop of unknown trip count/);
  });

  it("nested loops multiply; a computation no step reaches counts nothing", () => {
    const text = `HloModule n, replica_count=2

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

inner {
  p = f32[8]{0} parameter(0)
  ROOT x = f32[8]{0} all-reduce(p), replica_groups={}, to_apply=add
}

outer {
  p = f32[8]{0} parameter(0)
  ROOT w = f32[8]{0} while(p), condition=c, body=inner, backend_config={"known_trip_count":{"n":"3"}}
}

c {
  p = f32[8]{0} parameter(0)
  ROOT t = pred[] constant(true)
}

unused {
  p = f32[8]{0} parameter(0)
  ROOT y = f32[8]{0} all-reduce(p), replica_groups={}, to_apply=add
}

ENTRY e {
  p = f32[8]{0} parameter(0)
  ROOT w = f32[8]{0} while(p), condition=c, body=outer, backend_config="{\\"known_trip_count\\":{\\"n\\":\\"5\\"}}"
}
`;
    const n = parseHlo("n.txt", text);
    expect(n.collectives.map((c) => [c.c.name, c.count])).toEqual([["x", 15]]);
  });

  it("the iota form is XLA's: iota over the reshape dims, transposed, cut into groups", () => {
    expect(parseGroups("[2,4]<=[8]", fail)).toEqual([[0, 1, 2, 3], [4, 5, 6, 7]]);
    expect(parseGroups("[4,2]<=[2,4]T(1,0)", fail)).toEqual([[0, 4], [1, 5], [2, 6], [3, 7]]);
    expect(parseGroups("[2,4]<=[2,2,2]T(2,1,0)", fail)).toEqual([[0, 4, 2, 6], [1, 5, 3, 7]]);
    expect(parseGroups("{{0,1},{2,3}}", fail)).toEqual([[0, 1], [2, 3]]);
    expect(parseGroups("{}", fail)).toEqual([]);
  });

  it("property: any iota form lists every id once, in groups of its size; no transpose is the identity order", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 4 }), fc.integer({ min: 0, max: 100 }), (dims, seed) => {
        const total = dims.reduce((a, b) => a * b, 1);
        const perm = dims.map((_, k) => k).sort((a, b) => ((a * 7 + seed) % 5) - ((b * 7 + seed) % 5) || a - b);
        const size = dims[dims.length - 1]!;
        const groups = parseGroups(`[${total / size},${size}]<=[${dims.join(",")}]T(${perm.join(",")})`, fail);
        expect(groups.every((g) => g.length === size)).toBe(true);
        expect(groups.flat().sort((a, b) => a - b)).toEqual(Array.from({ length: total }, (_, k) => k));
        expect(parseGroups(`[1,${total}]<=[${dims.join(",")}]`, fail)).toEqual([Array.from({ length: total }, (_, k) => k)]);
      }),
    );
  });

  it("old-style text: %names, operand shapes inline, metadata with braces and quotes", () => {
    const t = readFileSync("test/fixtures/hlo/tiny.hlo.txt", "utf8");
    const n = parseHlo("tiny", t);
    expect(n.replicaCount).toBe(8);
    expect(n.collectives).toHaveLength(1);
    expect(n.collectives[0]!.c).toMatchObject({ name: "all-reduce.8", op: "all-reduce", reduce: "sum", mode: "cross-replica", groups: [[0, 1, 2, 3, 4, 5, 6, 7]] });
  });

  it("an instruction broken over lines reads as one (an open operand list, a trailing comma, the opcode under its shape); the line of the next instruction is never taken in", () => {
    const n = parseHlo(
      "multi",
      mod(
        [
          "  ags = (f32[64]{0}, f32[128]{0}) all-gather-start(",
          "    f32[64]{0} p), replica_groups={{0,1},{2,3},{4,5},{6,7}},",
          "    dimensions={0},",
          "",
          "    backend_config={\"collective_backend_config\": {\"is_sync\":true}}",
          "  agd = f32[128]{0} all-gather-done(ags)",
          "  ar = (f32[64]{0})",
          "       all-reduce(p)",
          "       , replica_groups={{0,4},{1,5},{2,6},{3,7}}, to_apply=add",
          "  odd = f32[64]{0} custom-call(p), a={[}",
          "  cp = f32[64]{0} collective-permute(p), source_target_pairs={{0,1},{1,0}}",
        ].join("\n"),
      ),
    );
    const by = (name: string) => n.collectives.find((c) => c.c.name === name)!.c;
    expect(n.collectives.map((c) => c.c.name)).toEqual(["ags", "ar", "cp"]);
    // (Read on one line, the groups and the reduction were not seen: every rank in one group.)
    expect(by("ags")).toMatchObject({ line: 11, groups: [[0, 1], [2, 3], [4, 5], [6, 7]] });
    expect(by("ar")).toMatchObject({ line: 17, groups: [[0, 4], [1, 5], [2, 6], [3, 7]], reduce: "sum" });
    expect(by("cp").pairs).toEqual([[0, 1], [1, 0]]);
  });

  it("an in-place collective-permute (input, output, offsets; slice_sizes) moves its slice of the input, the largest where they differ", () => {
    const body = [
      "  q = f32[128,32]{1,0} parameter(1)",
      "  out = f32[128,128]{1,0} parameter(2)",
      "  z = s32[] constant(0)",
      "  o1 = (s32[], s32[]) tuple(z, z)",
      "  cp = f32[128,128]{1,0} collective-permute(q, out, o1, o1), channel_id=3, source_target_pairs={{0,1},{1,2},{2,3}}, slice_sizes={{64,32}}",
      "  cps = (f32[128,32]{1,0}, f32[128,128]{1,0}, u32[], u32[]) collective-permute-start(f32[128,32]{1,0} q, f32[128,128]{1,0} out, (s32[], s32[]) o1, (s32[], s32[]) o1), source_target_pairs={{0,1},{1,0}}, slice_sizes={{16,32},{128,8}}",
      "  whole = f32[128,32]{1,0} collective-permute(q), source_target_pairs={{0,1}}",
    ].join("\n");
    const n = parseHlo("inplace", mod(body));
    const by = (name: string) => n.collectives.find((c) => c.c.name === name)!.c;
    expect(by("cp").operands).toEqual([{ type: "f32", elements: 64 * 32, text: "f32[64,32]" }]);
    expect(by("cps").operands).toEqual([{ type: "f32", elements: 128 * 8, text: "f32[128,8]" }]);
    expect(by("whole").operands).toEqual([expect.objectContaining({ elements: 128 * 32 })]);
    for (const [slices, msg] of [["{{256,32}}", /a slice of 8192 elements is larger than its input f32\[128,32\]/], ["{}", /one slice of one array was expected/], ["{{64,x}}", /unknown id list syntax/]] as const) {
      expect(() => parseHlo("bad.txt", mod(body.split("\n").slice(0, 4).join("\n") + `\n  cp = f32[128,128]{1,0} collective-permute(q, out, o1, o1), source_target_pairs={{0,1}}, slice_sizes=${slices}`))).toThrow(msg);
    }
  });

  it("/*index=N*/ comments, which XLA writes into long tuples and operand lists, are read past (not inside strings)", () => {
    const six = Array.from({ length: 6 }, (_, i) => `${i === 5 ? "/*index=5*/" : ""}f32[64]{0}`).join(", ");
    const ops = Array.from({ length: 6 }, (_, i) => `${i === 5 ? "/*index=5*/" : ""}f32[64]{0} p`).join(", ");
    const n = parseHlo("idx", mod(`  ar = (${six}) all-reduce(${ops}), replica_groups={}, to_apply=add, metadata={op_name="a/*b*/c"}`));
    expect(n.collectives).toHaveLength(1);
    expect(n.collectives[0]!.c.operands).toHaveLength(6);
  });

  it("ragged all-to-all, broadcast, and a send or recv that cannot run, a step reaches are named in warnings; one no step reaches, not", () => {
    const body = [
      "  tok = token[] after-all()",
      // No pairs: the ranks it joins are unknown (its recv, the same transfer, is not named again).
      "  s = (f32[64]{0}, u32[], token[]) send(p, tok), channel_id=3",
      "  sd = token[] send-done(s), channel_id=3",
      "  r = (f32[64]{0}, u32[], token[]) recv(tok), channel_id=3",
      "  rd = (f32[64]{0}, token[]) recv-done(r), channel_id=3",
      "  cb = f32[64]{0} collective-broadcast(p), replica_groups={{0,1}}",
      // A recv whose send is not in the module, and a transfer to the host.
      '  r2 = (f32[64]{0}, u32[], token[]) recv(tok), channel_id=4, frontend_attributes={_xla_send_recv_source_target_pairs="{{0,1}}"}',
      "  h = (f32[64]{0}, u32[], token[]) send(p, tok), channel_id=5, is_host_transfer=true",
      "  rg = f32[64]{0} ragged-all-to-all(p, p, p, p, p, p), replica_groups={{0,1}}",
    ].join("\n");
    const n = parseHlo("p2p", mod(body).replace("ENTRY", "unused {\n  q = f32[8]{0} parameter(0)\n  ROOT g = f32[8]{0} ragged-all-to-all(q, q, q, q, q, q)\n}\n\nENTRY"));
    expect(n.collectives).toHaveLength(0);
    expect(n.warnings).toEqual([
      "p2p:17: send s: no _xla_send_recv_source_target_pairs in its frontend_attributes, so the ranks it joins are not known: replay does not run it (the total leaves it out)",
      "p2p:21: collective-broadcast cb: moves data between ranks, and the runtime has no broadcast (a posted one fails: not supported operation (op_type 2)): replay does not run it (the total leaves it out)",
      "p2p:22: recv r2: no send of its channel_id (4) in the module, whose transfer it is: replay does not run it (the total leaves it out)",
      "p2p:23: send h: a transfer to the host (is_host_transfer=true), not between ranks: replay does not run it (the total leaves it out)",
      "p2p:24: ragged-all-to-all rg: moves data between ranks in sizes its operands give when it runs (no size on record): replay does not run it (the total leaves it out)",
    ]);
  });

  it("a send with its pairs (_xla_send_recv_source_target_pairs) is a collective of its first operand; its recv is not counted again; attributes over several lines are read", () => {
    const file = "test/fixtures/hlo/pipeline.hlo.txt";
    const n = parseHlo(file, readFileSync(file, "utf8"));
    const fwd = Array.from({ length: 7 }, (_, k) => [k, k + 1]);
    expect(n.collectives.map(({ c, count }) => [c.name, c.op, count, c.pairs ?? null, c.operands.map((o) => o.text), c.mode])).toEqual([
      ["send.fwd", "send", 15, fwd, ["bf16[4,1024,1024]"], "cross-partition"],
      ["send.bwd", "send", 15, fwd.map(([a, b]) => [b, a]), ["bf16[4,1024,1024]"], "cross-partition"],
      ["gsum", "all-reduce", 1, null, ["bf16[4,1024,1024]"], "flattened"],
    ]);
    expect(n.warnings).toEqual([`${file}:57: send host: a transfer to the host (is_host_transfer=true), not between ranks: replay does not run it (the total leaves it out)`]);
    // Unquoted pairs read alike; pairs that are not id pairs are an error naming the line.
    const one = (attr: string) => parseHlo("s", mod(`  tok = token[] after-all()\n  s = (f32[64]{0}, u32[], token[]) send(p, tok), channel_id=1, frontend_attributes={${attr}}`));
    expect(one("_xla_send_recv_source_target_pairs={{0,1},{1,0}}").collectives[0]!.c.pairs).toEqual([[0, 1], [1, 0]]);
    expect(() => one('_xla_send_recv_source_target_pairs="{{0,1,2}}"')).toThrow(/^send s: a source_target_pair is not two ids/);
    expect(() => one('_xla_send_recv_source_target_pairs="{{0,x}}"')).toThrow(/unknown id list syntax/);
  });

  it("a conditional's branches are each counted once, with a warning naming each branch that holds a collective", () => {
    const branch = (name: string, body: string) => `${name} {\n  x = f32[64]{0} parameter(0)\n${body}\n}\n`;
    const text = mod(
      ["  c = pred[] constant(true)", "  k = f32[64]{0} conditional(c, p, p), true_computation=yes, false_computation=no", "  s = s32[] constant(0)", "  b = f32[64]{0} conditional(s, p), branch_computations={quiet}"].join("\n"),
    ).replace(
      "ENTRY",
      branch("yes", "  ROOT y = f32[64]{0} all-reduce(x), replica_groups={}, to_apply=add") +
        branch("no", "  ROOT n = f32[64]{0} all-gather(x), replica_groups={}, dimensions={0}") +
        branch("quiet", "  ROOT q = f32[64]{0} negate(x)") +
        "\nENTRY",
    );
    const n = parseHlo("cond", text);
    expect(n.collectives.map((c) => [c.c.name, c.count])).toEqual([["y", 1], ["n", 1]]);
    expect(n.warnings).toHaveLength(2);
    expect(n.warnings[0]).toMatch(/^cond:\d+: yes runs in a branch of a conditional: its collectives are counted as if every branch ran \(one does\)$/);
    expect(n.warnings[1]).toMatch(/^cond:\d+: no runs in a branch/);
  });

  it("shapes and calls of any depth or width: a chain of 20,000 calls printed callee first (as XLA prints), a tuple of 200,000 arrays, a tuple nested 20,000 deep", () => {
    const n = 20000;
    const chain = Array.from({ length: n }, (_, k) => n - 1 - k)
      .map((i) => `c${i} {\n  x = f32[64]{0} parameter(0)\n  ROOT r = f32[64]{0} ${i + 1 < n ? `call(x), to_apply=c${i + 1}` : "all-reduce(x), replica_groups={}, to_apply=add"}\n}\n`)
      .join("\n");
    const deep = parseHlo("deep", mod("  k = f32[64]{0} call(p), to_apply=c0").replace("ENTRY", `${chain}\nENTRY`));
    expect(deep.collectives.map((c) => [c.c.name, c.count])).toEqual([["r", 1]]);
    const wide = `(${Array(200000).fill("f32[2]").join(", ")})`;
    expect(parseHlo("wide", mod(`  q = ${wide} parameter(1)\n  w = ${wide} all-reduce(q), replica_groups={}, to_apply=add`)).collectives[0]!.c.operands).toHaveLength(200000);
    const nested = `${"(".repeat(20000)}f32[2]${")".repeat(20000)}`;
    expect(parseHlo("nested", mod(`  z = ${nested} custom-call(p)`)).collectives).toHaveLength(0);
    expect(() => parseHlo("nested", mod(`  w = ${nested} all-reduce(p), replica_groups={}, to_apply=add`))).toThrow(/all-reduce w: unknown shape syntax in its result/);
    const loop = mod("  k = f32[64]{0} call(p), to_apply=a").replace("ENTRY", "a {\n  x = f32[64]{0} parameter(0)\n  ROOT r = f32[64]{0} call(x), to_apply=b\n}\n\nb {\n  x = f32[64]{0} parameter(0)\n  ROOT r = f32[64]{0} call(x), to_apply=a\n}\n\nENTRY");
    expect(() => parseHlo("loop", loop)).toThrow(/computation [ab] calls itself/);
  });

  it("logical reductions (a flag or'ed across ranks): and, or, xor", () => {
    const comps = ["and", "or", "xor"].map((op) => `${op}.c {\n  a = pred[] parameter(0)\n  b = pred[] parameter(1)\n  ROOT r = pred[] ${op}(a, b)\n}\n`).join("\n");
    const body = ["and", "or", "xor"].map((op) => `  ${op}.ar = pred[64]{0} all-reduce(pred[64]{0} q), replica_groups={}, to_apply=${op}.c`).join("\n");
    const n = parseHlo("logic", mod(`  q = pred[64]{0} parameter(1)\n${body}`).replace("ENTRY", `${comps}\nENTRY`));
    expect(n.collectives.map((c) => c.c.reduce)).toEqual(["and", "or", "xor"]);
  });

  it("non-collective instructions of any kind never fail, however odd their text", () => {
    const n = parseHlo("odd", mod(`  x = f32[64]{0} custom-call(p), custom_call_target="foo(", backend_config="{{{"\n  y = weird stuff here\n  z = (f32[2], s32[]) mystery-op(p, p), a={[}\n  w = f32[64]{0} all-reduce(p), replica_groups={}, to_apply=add`));
    expect(n.collectives).toHaveLength(1);
  });
});

describe("bad HLO: file, line and text", () => {
  const cases: [string, string, RegExp, number][] = [
    ["not HLO", "hello world\n", /not HLO text: no 'HloModule' line/, 1],
    ["binary", "HloModule\u0000\u0001", /binary data/, 1],
    ["a truncated collective", mod("  w = f32[64]{0} all-reduce(p), replica_groups={{0,1},{2"), /truncated instruction: an attribute of all-reduce is not closed/, 11],
    ["a truncated operand list", mod("  w = f32[64]{0} all-gather(p"), /truncated instruction: all-gather's operand list is not closed/, 11],
    ["a file cut short", "HloModule m\n\nENTRY main {\n  p = f32[64]{0} parameter(0)\n", /truncated: computation main \(line 3\) has no closing '}'/, 5],
    ["an unknown shape in a collective's operand", mod("  w = f32[64]{0} all-reduce(f32<64> p), replica_groups={}, to_apply=add"), /unknown shape syntax in operand 'f32<64> p'/, 11],
    ["an unknown shape as a collective's result", mod("  w = f32<64> all-reduce(p), replica_groups={}, to_apply=add"), /all-reduce w: unknown shape syntax in its result/, 11],
    ["an operand that is not there", mod("  w = f32[64]{0} all-reduce(q), replica_groups={}, to_apply=add"), /operand 'q' is not an instruction of computation main/, 11],
    ["a reduction that is not one of XLA's reducers", mod("  w = f32[64]{0} all-reduce(p), replica_groups={}, to_apply=sub").replace("ENTRY", "sub {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT o = f32[] subtract(a, b)\n}\n\nENTRY"), /computes 'subtract': a collective's reduction must be add, maximum, minimum, multiply, and, or or xor/, 17],
    ["unknown group syntax", mod("  w = f32[64]{0} all-reduce(p), replica_groups=[2,4]<-[8], to_apply=add"), /unknown replica_groups syntax/, 11],
    ["an iota that does not hold its ids", mod("  w = f32[64]{0} all-reduce(p), replica_groups=[2,4]<=[6], to_apply=add"), /does not hold the 6 ids/, 11],
    ["an iota of more ids than ccsim runs ranks (none is made)", mod("  w = f32[64]{0} all-reduce(p), replica_groups=[100000000,100]<=[10000000000], to_apply=add"), /replica_groups \[100000000,100\]<=\[10000000000\]: 10000000000 ids; ccsim runs at most 8192 ranks/, 11],
    ["a pair of three", mod("  w = f32[64]{0} collective-permute(p), source_target_pairs={{0,1,2}}"), /not two ids/, 11],
    ["no ENTRY", "HloModule m\n\nf {\n  ROOT c = f32[] constant(0)\n}\n", /no ENTRY computation/, 1],
  ];
  it.each(cases)("%s", (_name, text, msg, line) => {
    let err: unknown;
    try {
      parseHlo("bad.txt", text);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(HloError);
    expect((err as HloError).message).toMatch(msg);
    expect((err as HloError).line).toBe(line);
    expect((err as HloError).render()).toMatch(/^bad\.txt:\d+: /);
  });
});

describe("hostile HLO text: any edit of a real module is read or refused by line", () => {
  const fixtures = ["forms", "pipeline", "tiny", "tp8-dp2-layer"].map((f) => readFileSync(`test/fixtures/hlo/${f}.hlo.txt`, "utf8"));
  /** Text a dump holds, and text it should not: names, shapes, groups, brackets, numbers out of range. */
  const pieces = ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute", "send", "recv", "while", "{", "}", "(", ")", ",", "=", "\n", "%x", "ENTRY", "f32[]", "f32[0]", "f32[99999999999]", "bf16[3,5]{1,0}", "f8e4m3fn[16]", "s4[7]", "token[]", "(f32[2], f32[2])", "replica_groups={}", "replica_groups={{0,1},{2}}", "replica_groups=[2,4]<=[8]", "replica_groups=[4,2]<=[2,4]T(1,0)", "source_target_pairs={{0,1},{1,0}}", "to_apply=%add", "channel_id=1", "-1", "2147483648", "1e309", "18446744073709551616", "backend_config={\"known_trip_count\":{\"n\":\"-3\"}}", "/*index=5*/", "\"", "\u00e9"];
  const edit = fc.oneof(
    fc.record({ kind: fc.constant("cut" as const), at: fc.nat(), len: fc.integer({ min: 1, max: 40 }) }),
    fc.record({ kind: fc.constant("put" as const), at: fc.nat(), piece: fc.constantFrom(...pieces) }),
    fc.record({ kind: fc.constant("end" as const), at: fc.nat() }),
    fc.record({ kind: fc.constant("line" as const), at: fc.nat(), from: fc.nat() }),
  );
  type Edit = { kind: string; at: number; len?: number; piece?: string; from?: number };
  const apply = (text: string, e: Edit): string => {
    const at = e.at % (text.length + 1);
    if (e.kind === "cut") return text.slice(0, at) + text.slice(at + e.len!);
    if (e.kind === "put") return text.slice(0, at) + e.piece! + text.slice(at);
    if (e.kind === "end") return text.slice(0, at);
    const lines = text.split("\n");
    lines.splice(e.at % lines.length, 0, lines[e.from! % lines.length]!);
    return lines.join("\n");
  };

  it("property: 1-4 edits (cuts, pieces put in, a cut end, a line twice) give a module or an HloError with the file and a line of it", () => {
    fc.assert(
      fc.property(fc.nat({ max: fixtures.length - 1 }), fc.array(edit, { minLength: 1, maxLength: 4 }), (k, edits) => {
        const text = edits.reduce(apply, fixtures[k]!);
        try {
          const m = parseHlo("edited.txt", text);
          for (const c of m.collectives) expect(Number.isInteger(c.count) && c.count >= 0).toBe(true);
        } catch (e) {
          if (!(e instanceof HloError)) throw e;
          expect(e.render()).toMatch(/^edited\.txt:\d+: /);
          expect(e.line).toBeGreaterThanOrEqual(1);
          expect(e.line).toBeLessThanOrEqual(text.split(/\r?\n/).length + 1);
        }
      }),
      { numRuns: 400, seed: 2026 },
    );
  });
});
