// The channel count: the preset's, unless the program's channel sets would need more DMA engines
// than a rank has at it — then as many channels as fit, said in a warning and in --explain. A
// count the scenario sets is kept (and refused when it does not fit).
import { describe, expect, it } from "vitest";
import { compileStreamed } from "../../src/enc/compile.ts";
import { CompileError } from "../../src/ir/errors.ts";
import { EncAlgType } from "../../src/ir/enums.ts";
import { loadDevice } from "../../src/run/load.ts";
import { parseScenario } from "../../src/scenario/index.ts";
import { expectRunChecks } from "../helpers.ts";

/** An auto all-reduce of `ranks` over `nodes` nodes of `instance`, as nccom builds it. */
const allReduce = (instance: string, ranks: number, nodes: number, ranksPerDevice: number, bytes: number, channels?: number) =>
  parseScenario("test.json", { name: "t", instance, ranks, ranksPerDevice, nodes, algorithm: "auto", check: "none", ...(channels === undefined ? {} : { channels }), ops: [{ op: "all-reduce", bytes, dtype: "bf16" }] });

describe("channels", () => {
  const lnc1 = loadDevice("trn2-lnc1");

  it("a hierarchical all-reduce on trn2 at logical core size 1 runs 1 channel: 3 sets x 2 channels x 4 folds would take 24 of a rank's 16 engines", () => {
    const c = compileStreamed(allReduce("trn2-lnc1", 256, 2, 8, 64 << 20), lnc1, [0], { fold: true });
    expect(c.layout.ops[0]!.algorithm).toBe(EncAlgType.HIER);
    expect(c.layout.channels).toBe(1);
    const says = "1, not trn2-lnc1's 2: at 2, a hierarchical op's 3 channel sets would need 24 DMA engines (4 a channel); a rank has 16";
    expect(c.warnings).toContain(`channels: ${says}`);
    expect(c.explain[0]!.channels).toBe(1);
    expect(c.explain[0]!.channelsNote).toBe(says);
  });

  it("the fitted program runs, and its values check", () => {
    const scn = { ...allReduce("trn2-lnc1", 32, 2, 8, 2 << 20), check: "values" as const };
    expect(compileStreamed(scn, lnc1, [0]).layout.channels).toBe(1);
    expectRunChecks(scn, lnc1, "hier(intra-rdh,single-cycle-ring,intra-rdh)");
  });

  it("a program whose sets fit keeps the preset's count and says nothing", () => {
    const c = compileStreamed(allReduce("trn2-lnc1", 64, 1, 8, 64 << 20), lnc1, [0], { fold: true });
    expect(c.layout.channels).toBe(2);
    expect(c.warnings.filter((w) => w.startsWith("channels:"))).toEqual([]);
    expect(c.explain[0]!.channelsNote).toBeUndefined();
  });

  it("a count the scenario sets is kept, and refused when the sets do not fit", () => {
    expect(() => compileStreamed(allReduce("trn2-lnc1", 256, 2, 8, 64 << 20, 2), lnc1, [0], { fold: true })).toThrow(CompileError);
    expect(() => compileStreamed(allReduce("trn2-lnc1", 256, 2, 8, 64 << 20, 2), lnc1, [0], { fold: true })).toThrow(/2 channels x 4 folds x 3 channel sets \(hierarchical\) need more DMA engines than the 16 per rank/);
    expect(compileStreamed(allReduce("trn2-lnc1", 256, 2, 8, 64 << 20, 1), lnc1, [0], { fold: true }).layout.channels).toBe(1);
  });

  it.each([
    ["trn1", 1],
    ["trn2", 4],
    ["trn2-lnc1", 8],
  ] as const)("an auto all-reduce over 2 or 3 full %s nodes composes at every size (no engine refusal)", (instance, rpd) => {
    const spec = loadDevice(instance);
    for (const nodes of [2, 3]) {
      for (const bytes of [1 << 10, 64 << 20]) {
        const ranks = spec.devices * rpd * nodes;
        // (The counting pass: it builds the channels as a whole compile does.)
        const c = compileStreamed(allReduce(instance, ranks, nodes, rpd, bytes), spec, [0], { fold: true });
        expect(c.layout.channels).toBeGreaterThanOrEqual(1);
      }
    }
  });
});
