// The CC DMA packet size (the runtime's NEURON_RT_DBG_CC_DMA_PACKET_SIZE; the scenario's
// ccDmaPacketBytes): copies are cut at it, CCE packets are no larger, the preset's descriptor cap
// bounds it, and an engine's round-robin between queues at packet boundaries gives a stream of
// smaller packets less of a shared engine.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import pino from "pino";
import { compileProgram } from "../../src/enc/compile.ts";
import { opPacketBytes } from "../../src/enc/gates.ts";
import { decodeRx, decodeTx, DESC_BYTES } from "../../src/encd/udma.ts";
import type { ProgramImage } from "../../src/encd/image.ts";
import { parseScenario } from "../../src/scenario/index.ts";
import { parseDeviceSpec } from "../../src/scenario/device.ts";
import { runScenario } from "../../src/run/pipeline.ts";
import { loadDevice } from "../../src/run/load.ts";
import { refusal, trn1 } from "../helpers.ts";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main as simMain } from "../../src/cli/sim.ts";
import { main as nccomMain } from "../../src/cli/nccom.ts";

const silent = pino({ level: "silent" });
const base = { name: "p", instance: "trn1", ranks: 8, ranksPerDevice: 2, check: "values", ops: [{ op: "all-reduce", bytes: 1 << 20, dtype: "fp32" }] };

/** Lengths of every copy's TX descriptors (CCE packets' META and sources left out) and of every RX descriptor. */
function lengths(image: ProgramImage): { copies: number[]; rx: number[]; cce: number[] } {
  const copies: number[] = [];
  const rx: number[] = [];
  const cce: number[] = [];
  for (const d of image.devices) {
    for (const q of d.queues) {
      for (let i = 0; i < q.tx.length / DESC_BYTES; i++) {
        const t = decodeTx(q.tx, i * DESC_BYTES);
        if (t.kind === "cce") cce.push(t.length);
        else if (t.first && t.last) copies.push(t.length);
      }
      for (let i = 0; i < q.rx.length / DESC_BYTES; i++) rx.push(decodeRx(q.rx, i * DESC_BYTES).length);
    }
  }
  return { copies, rx, cce };
}

describe("ccDmaPacketBytes in a scenario", () => {
  it("takes one size or one per stream, 64 to 65536 B, and names the field of a wrong one", () => {
    expect(parseScenario("s.json", { ...base, ccDmaPacketBytes: 4096 }).ccDmaPacketBytes).toEqual([4096]);
    expect(parseScenario("s.json", { ...base, ccDmaPacketBytes: [65536, 4096] }).ccDmaPacketBytes).toEqual([65536, 4096]);
    expect(parseScenario("s.json", base).ccDmaPacketBytes).toBeUndefined();
    expect(refusal(() => parseScenario("s.json", { ...base, ccDmaPacketBytes: 63 })).render()).toMatch(/^s\.json: ccDmaPacketBytes: .*64.*65536.*\[SCN1005\]$/);
    expect(refusal(() => parseScenario("s.json", { ...base, ccDmaPacketBytes: [4096, 65537] })).render()).toMatch(/^s\.json: ccDmaPacketBytes\[1\]: .*\[SCN1005\]$/);
    expect(refusal(() => parseScenario("s.json", { ...base, ccDmaPacketBytes: [] })).render()).toMatch(/^s\.json: ccDmaPacketBytes: must give at least one size .*\[SCN1012\]$/);
    expect(refusal(() => parseScenario("s.json", { ...base, ccDmaPacketBytes: [4096, 4096, 4096, 4096, 4096] })).render()).toMatch(/^s\.json: ccDmaPacketBytes: /);
    expect(refusal(() => parseScenario("s.json", { ...base, ccDmaPacketBytes: "4K" })).render()).toMatch(/^s\.json: ccDmaPacketBytes: expected a size in bytes, or a list of them \(one per CC stream\) \(value: "4K"\) \[SCN1003\]$/);
  });

  it("an op's packet is its stream's (the last size for the streams past the list), within the preset's descriptor cap", () => {
    const scn = { ccDmaPacketBytes: [8192, 2048] };
    expect([0, 1, 2, 3].map((stream) => opPacketBytes(trn1, scn, { stream }))).toEqual([8192, 2048, 2048, 2048]);
    expect(opPacketBytes(trn1, {}, { stream: 2 })).toBe(65536);
    const capped = { ...trn1, dma: { ...trn1.dma, maxDescriptorBytes: 4096 } };
    expect(opPacketBytes(capped, scn, { stream: 0 })).toBe(4096);
    expect(opPacketBytes(capped, {}, { stream: 0 })).toBe(4096);
  });
});

describe("the descriptors of an op with a CC DMA packet", () => {
  it("cut copies at it and keep CCE packets within it; the preset's maxDescriptorBytes cuts copies too", () => {
    const at = (scn: object, spec = trn1) => lengths(compileProgram(parseScenario("s.json", { ...base, algorithm: "ring", ...scn, ops: [{ op: "all-gather", bytes: 8 << 20, dtype: "fp32" }, { op: "all-reduce", bytes: 8 << 20, dtype: "fp32" }] }), spec, [0, 1]).image);
    const whole = at({});
    expect(Math.max(...whole.copies)).toBe(65536);
    const small = at({ ccDmaPacketBytes: 16384 });
    expect(Math.max(...small.copies)).toBe(16384);
    expect(Math.max(...small.rx)).toBe(16384);
    expect(Math.max(...small.cce)).toBeLessThanOrEqual(16384);
    // (The same bytes, in more descriptors.)
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    expect(sum(small.rx)).toBe(sum(whole.rx));
    expect(small.rx.length).toBeGreaterThan(whole.rx.length);
    // A preset whose descriptors hold at most 16 KiB: its copies are cut there (they were cut at 64 KiB whatever it said).
    const j = structuredClone(JSON.parse(readFileSync("devices/trn1.json", "utf8")));
    j.dma.maxDescriptorBytes = 16384;
    const capped = at({}, parseDeviceSpec("p.json", j));
    expect(Math.max(...capped.copies)).toBe(16384);
    expect(capped.rx.length).toBe(small.rx.length);
  });

  it("two streams on shared engines: the one of smaller packets gets less of them and ends later, either way round", () => {
    const spec = loadDevice("trn1");
    const ends = (packets: number[] | undefined) => {
      const scn = parseScenario("s.json", { ...base, check: "none", concurrent: true, ...(packets ? { ccDmaPacketBytes: packets } : {}), ops: [0, 1].map((stream) => ({ op: "all-reduce", bytes: 4 << 20, dtype: "fp32", stream })) });
      const out = runScenario(scn, spec, silent);
      if (out.kind !== "done" || !out.concurrent) throw new Error("did not run concurrently");
      return out.concurrent.opEndPs;
    };
    const [a0, a1] = ends(undefined);
    expect(Math.abs(a0! - a1!) / a1!).toBeLessThan(0.05);
    const [b0, b1] = ends([65536, 4096]);
    expect(b0!).toBeLessThan(0.9 * b1!);
    const [c0, c1] = ends([4096, 65536]);
    expect(c1!).toBeLessThan(0.9 * c0!);
  });

  it("any packet size, every family the presets run: the values come out right", () => {
    const cases: [string, object][] = [
      ["ring", { algorithm: "ring" }],
      ["mesh", { algorithm: "mesh", ops: [{ op: "all-reduce", bytes: 16384, dtype: "fp32" }] }],
      ["kangaring", { ranks: 32, algorithm: "kangaring" }],
      ["intra-rdh", { ranks: 16, ranksPerDevice: 1, allowedAlgorithms: ["ring", "mesh", "intra-rdh"] }],
      ["hier", { ranks: 32, nodes: 2, algorithm: "hier", ops: [{ op: "all-reduce", bytes: 256 << 10, dtype: "bf16" }] }],
      ["mesh", { algorithm: "mesh", ops: [{ op: "all-to-all", bytes: 8192, dtype: "fp32" }] }],
    ];
    fc.assert(
      fc.property(fc.constantFrom(...cases), fc.integer({ min: 64, max: 65536 }), ([alg, over], packet) => {
        const out = runScenario(parseScenario("s.json", { ...base, ops: [{ op: "all-reduce", bytes: 96 << 10, dtype: "fp32" }], ...over, ccDmaPacketBytes: packet }), trn1, silent);
        expect(out.kind).toBe("done");
        if (out.kind !== "done") return;
        const o = out.ops[0]!;
        expect(o.row.algorithm.split("(")[0]).toBe(alg);
        expect(o.row.check).toBe("pass");
        expect(o.violations).toEqual([]);
      }),
      { numRuns: 12, seed: 4242 },
    );
  });
});

describe("--cc-dma-packet", () => {
  it("sets the scenario's packets on npm run sim and npm run nccom (over NEURON_RT_DBG_CC_DMA_PACKET_SIZE), and names a wrong one", () => {
    const sim = (argv: string[]) => {
      let out = "";
      let err = "";
      const code = simMain(argv, (x) => (out += x), (x) => (err += x));
      return { code, out, err };
    };
    // The flag runs the scenario as the file with the field would: the same results, and not the file's own.
    const dir = mkdtempSync(join(tmpdir(), "ccsim-packet-"));
    const file = join(dir, "s.json");
    writeFileSync(file, JSON.stringify({ ...JSON.parse(readFileSync("scenarios/streams4.json", "utf8")), ccDmaPacketBytes: [65536, 4096] }));
    const results = (argv: string[]) => JSON.parse(sim([...argv, "--check", "none", "--json"]).out) as { results: unknown[]; concurrent: unknown };
    const flagged = results(["scenarios/streams4.json", "--cc-dma-packet", "65536,4096"]);
    const { scenario: _a, ...fromFlag } = flagged as unknown as Record<string, unknown>;
    const { scenario: _b, ...fromFile } = results([file]) as unknown as Record<string, unknown>;
    expect(fromFlag).toEqual(fromFile);
    expect(flagged.concurrent).not.toEqual(results(["scenarios/streams4.json"]).concurrent);
    rmSync(dir, { recursive: true, force: true });
    const bad = sim(["scenarios/streams4.json", "--cc-dma-packet", "65536,1"]);
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/^ccsim: --cc-dma-packet "65536,1": "1" is not a packet size in bytes from 64 to 65536/);
    // npm run sim reads the scenario, not the runtime's variable: it says so when the variable is set.
    let said = "";
    simMain(["scenarios/ring8.json", "-b", "1K", "-e", "1K", "--check", "none"], () => {}, (x) => (said += x), {}, { env: { NEURON_RT_DBG_CC_DMA_PACKET_SIZE: "4096" } });
    expect(said).toContain("ccsim: NEURON_RT_DBG_CC_DMA_PACKET_SIZE is not read by npm run sim: the scenario's ccDmaPacketBytes sets the packet, or --cc-dma-packet 4096");
    let dumped = "";
    expect(nccomMain(["allr", "-r", "8", "-b", "1M", "--cc-dma-packet", "8192", "--dump-scenario"], (x) => (dumped += x), () => {}, { NEURON_RT_DBG_CC_DMA_PACKET_SIZE: "4096" })).toBe(0);
    expect(JSON.parse(dumped).ccDmaPacketBytes).toEqual([8192]);
    let twice = "";
    expect(nccomMain(["allr", "-r", "8", "--cc-dma-packet", "4096", "--cc-dma-packet", "8192"], () => {}, (x) => (twice += x), {})).toBe(1);
    expect(twice).toContain("nccom: --cc-dma-packet given twice (--cc-dma-packet): give it once");
  });
});
