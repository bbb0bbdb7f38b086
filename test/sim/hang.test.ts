import { describe, expect, it } from "vitest";
import { compileProgram } from "../../src/enc/compile.ts";
import { simulate, formatHang } from "../../sim/index.ts";
import { dropFirstRemoteSemaInc } from "../helpers-image.ts";
import { scenario, trn1 } from "../helpers.ts";

describe("hang detector", () => {
  it("a program with one semaphore increment removed ends in a hang report naming the waiting core", () => {
    const scn = scenario({ ranks: 4, channels: 1, check: "none", ops: [{ op: "all-gather", bytes: 65536, dtype: "fp32", reduce: "sum" }] });
    const { image } = compileProgram(scn, trn1, [0]);
    dropFirstRemoteSemaInc(image, 0);
    const r = simulate(trn1, image, { storePayload: false });
    expect(r.hang).toBeDefined();
    const h = r.hang!;
    // Device 0's next on the ring is device 1: its channel waits for a recv count that never comes.
    const w = h.waits.find((x) => x.device === 1)!;
    expect(w).toMatchObject({ topsp: 0, channel: 0, role: "recv count", value: 0, awaited: 1 });
    expect(h.unfinished).toContain("dev1 topsp0");
    const text = formatHang(h).join("\n");
    expect(text).toMatch(/dev1 topsp0 channel 0 waits on dev1:topsp0:sem0 \(recv count\): value 0, awaiting >= 1/);
  });

  it("an intact program finishes with no hang and every TopSP done", () => {
    const scn = scenario({ ranks: 4, channels: 1, check: "none", ops: [{ op: "all-gather", bytes: 65536, dtype: "fp32", reduce: "sum" }] });
    const r = simulate(trn1, compileProgram(scn, trn1, [0]).image, { storePayload: false });
    expect(r.hang).toBeUndefined();
    expect(r.opEndPs[0]).toBeGreaterThan(0);
  });

  it("a proxy entry whose trigger never comes shows in the report with its semaphore", () => {
    const scn = scenario({ ranks: 4, nodes: 2, channels: 1, check: "none", ops: [{ op: "all-gather", bytes: 4096, dtype: "fp32", reduce: "sum" }] });
    const { image } = compileProgram(scn, trn1, [0]);
    const d = image.devices.find((x) => x.proxyQueues.length > 0)!;
    const q = d.proxyQueues[0]!;
    // Entry 0 now wants 100 trigger increments; the device only ever gives it its folds.
    new DataView(q.fifo.buffer, q.fifo.byteOffset, q.fifo.length).setUint16(20, 100, true);
    const r = simulate(trn1, image, { storePayload: false });
    expect(r.hang).toBeDefined();
    // One trigger semaphore per fold, each named with its value.
    expect(q.folds).toBe(2);
    expect(r.hang!.pendingDma.join("\n")).toMatch(new RegExp(`proxy of dev${d.device} topsp${q.topsp}: entry 0 of \\d+ waits for sem${q.sema} \\(value \\d+\\), sem${q.sema + 1} \\(value \\d+\\) >= 100`));
  });
});
