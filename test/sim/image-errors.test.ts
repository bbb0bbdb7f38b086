// The simulator rejects malformed program images with a SimError instead of guessing.
import { describe, expect, it } from "vitest";
import { compileProgram } from "../../src/enc/compile.ts";
import { ProgramBuilder } from "../../src/encd/program.ts";
import type { ProgramImage } from "../../src/encd/program.ts";
import { NeighType } from "../../src/encd/channel.ts";
import { simulate } from "../../sim/index.ts";
import { scenario, trn1 } from "../helpers.ts";

function fresh(): ProgramImage {
  const scn = scenario({ ranks: 2, channels: 1, check: "none", ops: [{ op: "all-reduce", bytes: 4096, dtype: "fp32", reduce: "sum" }] });
  return compileProgram(scn, trn1, [0]).image;
}
const run = (img: ProgramImage) => () => simulate(trn1, img, { storePayload: false });

describe("malformed images", () => {
  it("an algo_type that is not a device pattern is refused", () => {
    const img = fresh();
    img.devices[0]!.topsps[0]!.ctrlSpad[1] = 0x02;
    expect(run(img)).toThrow(/algo_type 2 is not a device pattern/);
  });
  it("an entry without header.cc_op", () => {
    const img = fresh();
    img.devices[0]!.topsps[0]!.ctrlSpad[0] = 0;
    expect(run(img)).toThrow(/header.cc_op is 0/);
  });
  it("a descriptor with the wrong ring id", () => {
    const img = fresh();
    const tx = img.devices[0]!.queues[0]!.tx;
    tx[3] = (tx[3]! & ~0x03) | 0x02;
    expect(run(img)).toThrow(/ring id 2, expected 1/);
  });
  it("a step that advances past the end of the ring", () => {
    const img = fresh();
    const slot = img.devices[0]!.topsps[0]!.slotSpad[0]!;
    new DataView(slot.buffer, slot.byteOffset).setUint16(0, 60000, true);
    expect(run(img)).toThrow(/tail pointer passes the end of the ring/);
  });
  it("a slot stream without its LAST_SYNC step", () => {
    const img = fresh();
    const d = img.devices[0]!;
    const t = d.topsps[0]!;
    const cut = { ...img, devices: [{ ...d, topsps: [{ ...t, slotSpad: [t.slotSpad[0]!.subarray(0, 8)] }, ...d.topsps.slice(1)] }, ...img.devices.slice(1)] };
    expect(run(cut)).toThrow(/slot stream ends without LAST_SYNC/);
  });
});

describe("emitter guards", () => {
  it("a step needing more descriptors than the 16-bit tp_inc counters hold is rejected", () => {
    const b = new ProgramBuilder({ arch: 2, maxDescriptorBytes: 65536, cceMaxElements: 1024 });
    const n = { netIdxAddrs: [], foldN: 1, type: NeighType.LOCAL };
    const ch = b.addChannel({ device: 0, topsp: 0, channelId: 0, slot: 0, engines: [0], queue: 15, recvSema: 0, sendSema: 1, complSema: 2, reporter: true, next: n, prev: n, initialCredits: 4 });
    const buf = b.allocHbm(0, 4);
    for (let i = 0; i < 65535; i++) ch.semaInc(buf);
    expect(() => ch.markStep(0)).toThrow(/UINT16_MAX - channel->tp_inc_record.m2s_val > tx_descs_n\[0\]/);
  });
});
