// Every error code has a failing input here, asserted by its stable code.
import { describe, expect, it } from "vitest";
import { CcsimError, CompileError } from "../src/ir/errors.ts";
import { ERROR_CODES } from "../src/ir/codes.ts";
import { EncOpType } from "../src/ir/enums.ts";
import type { DeviceSpec, Scenario } from "../src/ir/spec.ts";
import { compileProgram, compileStreamed, explainScenario } from "../src/enc/compile.ts";
import { EncAlgType } from "../src/ir/enums.ts";
import { planChunks } from "../src/enc/chunks.ts";
import { field, addr64 } from "../src/encd/bits.ts";
import { packSpadCtrlEntry, ringEntry } from "../src/encd/ccop.ts";
import { cceMetaWord, encodeLength, DESC_BYTES, decodeRx, decodeTx } from "../src/encd/udma.ts";
import { packSlotEntry } from "../src/encd/slot.ts";
import { hbmAddr, semaAddr, decodeAddress } from "../src/encd/address.ts";
import { ALGO_CONFIG_RING_BYTES, packChannelConfig, NeighType, type ChannelConfig } from "../src/encd/channel.ts";
import { Vring, dumpToPringPadded } from "../src/encd/vring.ts";
import { validateCcops } from "../src/encd/validate.ts";
import { packMeshEvent } from "../src/encd/mesh-event.ts";
import { ProgramBuilder, type ProgramImage } from "../src/encd/program.ts";
import { parseDeviceSpec, parseScenario, parseJson } from "../src/scenario/index.ts";
import { loadScenario } from "../src/run/load.ts";
import { Kernel, Prio } from "../sim/kernel/kernel.ts";
import { cceReduce } from "../sim/hw/cce.ts";
import { Fabric } from "../sim/hw/fabric.ts";
import { simulate } from "../sim/index.ts";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { ideal, scenario, trn1 } from "./helpers.ts";
import { dispatch } from "../src/enc/gates.ts";
import type { ChannelPlacement } from "../src/encd/channel-writer.ts";

/** The code in a gate's refusal (the composer's limit it knows), thrown as the error it stands for. */
function refusal(gate: string, scn: Scenario, spec: DeviceSpec = trn1): () => never {
  return () => {
    const v = explainScenario(scn, spec)[0]!.gates.find((g) => g.gate === gate)!.verdict;
    const m = /\[((?:CMP)\d{4})\]$/.exec(v.reason);
    if (!v.ok && m) throw new CompileError(m[1]!, v.reason);
    throw new Error(`the ${gate} gate admits: ${v.reason}`);
  };
}

function code(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof CcsimError) return e.code;
    throw e;
  }
  throw new Error("no error thrown");
}

const trn1Json = JSON.parse(readFileSync("devices/trn1.json", "utf8"));
const minimal = { name: "x", instance: "trn1", ranks: 2, ops: [{ op: "all-reduce", bytes: 8, dtype: "fp32" }] };
const n1 = { netIdxAddrs: [], foldN: 1, type: NeighType.LOCAL };
const place = (over: Partial<ChannelPlacement> = {}): ChannelPlacement => ({ device: 0, topsp: 0, channelId: 0, slot: 0, engines: [0], queue: 15, recvSema: 0, sendSema: 1, complSema: 2, reporter: true, next: n1, prev: n1, initialCredits: 4, ...over });
const cfg = (over: Partial<ChannelConfig> = {}): ChannelConfig => ({ next: n1, prev: n1, recvSema: 0, sendSema: 0, postSema: 0, dmaComplSema: 0, kringMine: 0, kringPeers: [], bcastM2sTail: 0, bcastS2mTail: 0, bcastMask: 0, channelId: 0, spadSlotIdx: 0, foldN: 1, kangaringIsPrimary: 0, kangaringNumPeers: 0, ...over });

/** A fresh 2-rank all-reduce image (device 0: TopSP 0, channel 0, DMA engines 0 and 1 on queue 15). */
function image(): ProgramImage {
  const scn = scenario({ ranks: 2, channels: 1, check: "none", ops: [{ op: "all-reduce", bytes: 4096, dtype: "fp32", reduce: "sum" }] });
  return compileProgram(scn, trn1, [0]).image;
}
const sim = (img: ProgramImage, spec: DeviceSpec = trn1) => () => simulate(spec, img, { storePayload: false });
const dv = (b: Uint8Array) => new DataView(b.buffer, b.byteOffset, b.length);
const q0 = (img: ProgramImage) => img.devices[0]!.queues[0]!;
const cfg0 = (img: ProgramImage) => dv(img.devices[0]!.topsps[0]!.ringConfig);
/** Index of the first descriptor on queue 0 of device 0 matching `pred`. */
function tx(img: ProgramImage, pred: (d: ReturnType<typeof decodeTx>) => boolean): number {
  const q = q0(img);
  for (let i = 0; i < q.tx.length / DESC_BYTES; i++) if (pred(decodeTx(q.tx, i * DESC_BYTES))) return i;
  throw new Error("no such tx descriptor");
}
function rx(img: ProgramImage, pred: (d: ReturnType<typeof decodeRx>) => boolean): number {
  const q = q0(img);
  for (let i = 0; i < q.rx.length / DESC_BYTES; i++) if (pred(decodeRx(q.rx, i * DESC_BYTES))) return i;
  throw new Error("no such rx descriptor");
}
const isSemaInc = (d: ReturnType<typeof decodeRx>) => {
  const a = decodeAddress(d.dst);
  return a.kind === "sema" && a.window === "inc";
};

describe("scenario and device file errors", () => {
  it.each([
    ["SCN1000", () => loadScenario("no/such/file.json")],
    ["SCN1001", () => parseJson("x.json", "{")],
    ["SCN1002", () => parseScenario("x.json", { ...minimal, extra: 1 })],
    ["SCN1003", () => parseScenario("x.json", { ...minimal, ranks: "2" })],
    ["SCN1004", () => parseScenario("x.json", { name: "x", instance: "trn1", ranks: 2 })],
    ["SCN1005", () => parseScenario("x.json", { ...minimal, ranks: 0 })],
    ["SCN1011", () => parseScenario("x.json", { ...minimal, instance: "../trn1" })],
    ["SCN1012", () => parseScenario("x.json", { ...minimal, ops: [] })],
    ["SCN1013", () => parseScenario("x.json", { ...minimal, allowedAlgorithms: ["ring", "ring"] })],
    ["SCN1014", () => parseScenario("x.json", { ...minimal, ops: [{ op: "all-gather", bytes: 8, dtype: "fp32", reduce: "max" }] })],
    ["SCN1015", () => parseScenario("x.json", { ...minimal, ops: [{ op: "send", bytes: 8, dtype: "fp32", pairs: [[0]] }] })],
    ["SCN1016", () => parseScenario("x.json", { ...minimal, ranks: 4, concurrent: true, ops: [{ op: "all-reduce", bytes: 16, dtype: "fp32" }, { op: "all-reduce", bytes: 16, dtype: "fp32", replicaGroups: [[0, 1], [2, 3]] }] })],
    ["SCN1006", () => parseScenario("x.json", { ...minimal, ops: [{ op: "all-reduce", bytes: 6, dtype: "fp32" }] })],
    ["SCN1007", () => parseScenario("x.json", { ...minimal, algorithm: "tree" })],
    ["SCN1008", () => parseScenario("x.json", { ...minimal, algorithm: "ring", allowedAlgorithms: ["mesh"] })],
    ["SCN1009", () => parseScenario("x.json", { ...minimal, replicaGroups: [Array.from({ length: 25_000_000 }, (_, i) => i)] })],
    ["SCN1101", () => parseDeviceSpec("d.json", { ...trn1Json, topsp: { ...trn1Json.topsp, perDevice: 5 } })],
    ["SCN1102", () => parseDeviceSpec("d.json", { ...trn1Json, sources: {} })],
    ["SCN1103", () => parseDeviceSpec("d.json", { ...trn1Json, topology: { kind: "table", neighbours: trn1Json.topology.neighbours.slice(1) } })],
  ])("%s", (c, fn) => expect(code(fn)).toBe(c));
});

describe("composer errors", () => {
  const compile = (over: Parameters<typeof scenario>[0], spec: DeviceSpec = trn1) => () => compileProgram(scenario(over), spec, [0]);
  const op = [{ op: "all-reduce" as const, bytes: 4096, dtype: "fp32" as const, reduce: "sum" as const }];
  it.each([
    ["CMP1001", compile({ ranks: 2, replicaGroups: [[0, 1, 2]], ops: op })],
    ["CMP1002", compile({ ranks: 2, replicaGroups: [[0, 0]], ops: op })],
    ["CMP1003", compile({ ranks: 2, replicaGroups: [[0]], ops: op })],
    ["CMP1101", () => planChunks(100, 4, 4, 1)],
    ["CMP1201", () => dispatch(EncOpType.ALLTOALL_V, EncAlgType.RING, 8, "ops[0].op")],
    ["CMP1202", () => dispatch(EncOpType.BROADCAST, EncAlgType.RING, 8, "ops[0].op")],
    ["CMP1203", () => dispatch(EncOpType.PERMUTE_REDUCE, EncAlgType.BW_OPT_MESH, 8, "ops[0].op")],
    ["CMP1307", refusal("kangaring", scenario({ ranks: 16, ranksPerDevice: 2, algorithm: "auto", allowedAlgorithms: [EncAlgType.RING, EncAlgType.KANGARING], replicaGroups: [[0, 2, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]], ops: [{ op: "all-reduce", bytes: 4096, dtype: "fp32", reduce: "sum" }] }))],
    ["CMP1301", compile({ instance: "ideal", ranks: 4, nodes: 2, ops: op }, ideal)],
    // Hierarchical (an all-reduce of any size runs, padded): all-gather needs position-major order, pipelining all-reduce.
    // Neither node by node nor position by position.
    ["CMP1309", refusal("hierarchical", scenario({ ranks: 8, nodes: 2, algorithm: "hier", allowedAlgorithms: [EncAlgType.HIER], hierarchical: { intra: "ring", inter: "ring" }, replicaGroups: [[0, 1, 4, 5, 2, 3, 6, 7]], ops: [{ op: "all-gather", bytes: 4096, dtype: "fp32", reduce: "sum" }] }))],
    ["CMP1309", refusal("hierarchical", scenario({ ranks: 4, nodes: 2, algorithm: "hier", allowedAlgorithms: [EncAlgType.HIER], hierarchical: { intra: "ring", inter: "ring", slices: 2 }, replicaGroups: [[0, 2, 1, 3]], ops: [{ op: "all-gather", bytes: 4096, dtype: "fp32", reduce: "sum" }] }))],
    ["CMP1310", refusal("hierarchical", scenario({ ranks: 8, nodes: 2, algorithm: "hier", allowedAlgorithms: [EncAlgType.HIER], hierarchical: { intra: "intra-rdh", inter: "ring", slices: 2 }, ops: [{ op: "all-reduce", bytes: 1 << 16, dtype: "fp32", reduce: "sum" }] }))],
    // The inter all-gather list (mesh, inter RDH) has nothing for 2 nodes of 2 ranks at 1 MiB.
    ["CMP1310", refusal("hierarchical", scenario({ ranks: 4, nodes: 2, algorithm: "hier", allowedAlgorithms: [EncAlgType.HIER], replicaGroups: [[0, 2, 1, 3]], ops: [{ op: "all-gather", bytes: 1 << 20, dtype: "fp32", reduce: "sum" }] }))],
    ["CMP1310", refusal("hierarchical", scenario({ ranks: 4, nodes: 2, algorithm: "hier", allowedAlgorithms: [EncAlgType.HIER], replicaGroups: [[0, 2, 1, 3]], hierarchical: { intra: "ring", inter: "single-cycle-ring" }, ops: [{ op: "reduce-scatter", bytes: 4096, dtype: "fp32", reduce: "sum" }] }))],
    ["CMP1302", compile({ ranks: 6, ranksPerDevice: 3, ops: op })],
    ["CMP1303", compile({ ranks: 17, ops: op })],
    ["CMP1304", compile({ ranks: 2, channels: 9, ops: op })],
    ["CMP1305", compile({ ranks: 2, channels: 4, ops: op }, { ...trn1, topsp: { ...trn1.topsp, semaphores: 6 } })],
    ["CMP1311", compile({ ranks: 2, check: "none", ops: [{ op: "all-reduce", bytes: 2 ** 38, dtype: "fp32", reduce: "sum" }] }, { ...trn1, hbm: { bytesPerSecond: trn1.hbm.bytesPerSecond } })],
    ["CMP1312", compile({ ranks: 2, check: "none", ops: [{ op: "all-reduce", bytes: 2 ** 34 + 4096, dtype: "fp32", reduce: "sum" }] })],
    // trn1: three TopSPs a rank.
    ["CMP1313", () => compileProgram(scenario({ ranks: 2, concurrent: true, ops: [0, 1, 2, 3].map((stream) => ({ ...op[0]!, stream })) }), trn1, [0, 1, 2, 3])],
    // --sb2sb: 2 x 16 MiB of all-reduce buffers on a rank of 24 MiB of SBUF; and a preset without an SBUF size.
    ["CMP1314", compile({ ranks: 2, check: "none", buffers: "sbuf", ops: [{ op: "all-reduce", bytes: 2 ** 24, dtype: "fp32", reduce: "sum" }] })],
    ["CMP1314", compile({ ranks: 2, check: "none", buffers: "sbuf", ops: op }, (({ sbuf: _, ...rest }) => rest)(trn1))],
  ])("%s", (c, fn) => expect(code(fn)).toBe(c));

  it("CMP1201 carries the seed's all-to-all message and the rank count", () => {
    expect(() => dispatch(EncOpType.ALLTOALL, EncAlgType.RING, 8, "ops[0].op")).toThrow("alltoall cannot be supported without Mesh algorithm, rank_n(8)");
  });
});

describe("signature and cc-op validate errors", () => {
  const two = () => compileProgram(scenario({ ranks: 2, channels: 1, check: "none", ops: [{ op: "all-reduce", bytes: 4096, dtype: "fp32", reduce: "sum" }] }), trn1, [0]).image;
  const withDevice0 = (img: ProgramImage, f: (d: ProgramImage["devices"][number]) => ProgramImage["devices"][number]) => ({ ...img, devices: [f(img.devices[0]!), ...img.devices.slice(1)] });
  const grow = (b: Uint8Array) => {
    const out = new Uint8Array(b.length + 16);
    out.set(b);
    return out;
  };
  it.each([
    ["CMP1501", () => compileProgram(scenario({ ranks: 2, rankOverrides: [{ rank: 1, op: 0, dtype: "int32" }], ops: [{ op: "all-reduce", bytes: 4096, dtype: "fp32", reduce: "sum" }] }), trn1, [0])],
    ["CMP1601", () => {
      const img = two();
      img.devices[0]!.topsps[0]!.ctrlSpad[0] = 0;
      validateCcops(img);
    }],
    ["CMP1602", () => {
      const img = two();
      img.devices[0]!.topsps[0]!.ringConfig[142] = 3;
      validateCcops(img);
    }],
    ["CMP1603", () => validateCcops(withDevice0(two(), (d) => ({ ...d, queues: [d.queues[0]!, { ...d.queues[1]!, tx: d.queues[1]!.tx.subarray(16) }] })))],
    ["CMP1604", () => {
      const img = two();
      dv(img.devices[0]!.topsps[0]!.slotSpad[0]!).setUint16(0, 0xffff, true);
      validateCcops(img);
    }],
    ["CMP1605", () => {
      const img = two();
      const q = img.devices[0]!.queues[0]!;
      dv(q.rx).setBigUint64(q.rx.length - 8, 4n, true);
      validateCcops(img);
    }],
    ["CMP1606", () => validateCcops(withDevice0(two(), (d) => ({ ...d, queues: d.queues.map((q) => ({ ...q, tx: grow(q.tx), rx: grow(q.rx) })) }))),
    ],
    ["CMP1607", () =>
      validateCcops(withDevice0(two(), (d) => ({ ...d, topsps: d.topsps.map((t) => ({ ...t, opNum: 2, ctrlSpad: new Uint8Array([...t.ctrlSpad, ...t.ctrlSpad]) })) }))),
    ],
  ])("%s", (c, fn) => expect(code(fn)).toBe(c));
});

describe("mesh errors", () => {
  const meshImage = () => compileProgram(scenario({ ranks: 2, algorithm: "auto", allowedAlgorithms: [EncAlgType.RING, EncAlgType.MESH], channels: 1, check: "none", ops: [{ op: "all-gather", bytes: 4096, dtype: "fp32", reduce: "sum" }] }), trn1, [0]).image;
  const noLeg = { m2sTail: 0, s2mTail: 0, mask: 0 };
  const ev = { legs: [noLeg, noLeg] as const, directTrigger: [0, 0, 0] as const, waitSema: 0, waitVal: 0, eventType: 0, dmaTrigger: false, directTriggerOn: false, waitEvent: false };
  it.each([
    ["ENC1701", () => packMeshEvent(ev, new Uint8Array(80), 1)],
    [
      "ENC1702",
      () => {
        const b = new ProgramBuilder({ arch: 2, maxDescriptorBytes: 65536, cceMaxElements: 1024 });
        const m = b.addMesh({ device: 0, topsp: 0, engines: [0], queue: 15, complSema: 3 });
        for (let i = 0; i < 51; i++) m.event(0);
      },
    ],
    ["CMP1306", refusal("mesh", scenario({ ranks: 4, algorithm: "auto", allowedAlgorithms: [EncAlgType.RING, EncAlgType.MESH], channels: 8, ops: [{ op: "all-gather", bytes: 4096, dtype: "fp32", reduce: "sum" }] }))],
    [
      "SIM1412",
      () => {
        const img = meshImage();
        const d = img.devices[0]!;
        const t = d.topsps[0]!;
        const slots = [...t.slotSpad];
        slots[16] = new Uint8Array(0);
        sim({ ...img, devices: [{ ...d, topsps: [{ ...t, slotSpad: slots }, ...d.topsps.slice(1)] }, ...img.devices.slice(1)] })();
      },
    ],
    [
      "SIM1513",
      () => {
        const img = meshImage();
        const m = dv(img.devices[0]!.topsps[0]!.meshConfig);
        m.setBigUint64(0x28, BigInt(hbmAddr(0, 64)), true);
        m.setUint8(0x4e, 1);
        sim(img)();
      },
    ],
  ])("%s", (c, fn) => expect(code(fn)).toBe(c));
});

describe("encode errors", () => {
  const region = new Uint8Array(ALGO_CONFIG_RING_BYTES);
  it.each([
    ["ENC1001", () => field(16, 4, "x", "fmt")],
    ["ENC1002", () => addr64(-1, "x", "fmt")],
    ["ENC1003", () => packSpadCtrlEntry({ ...ringEntry(1), algoType: 11 })],
    ["ENC1101", () => encodeLength(0)],
    ["ENC1102", () => cceMetaWord(1, 10)],
    ["ENC1201", () => packSlotEntry({ m2s: 0, s2m: 0, repeat: 0, flags: 0, drainTarget: 0 })],
    ["ENC1301", () => hbmAddr(65536, 0)],
    ["ENC1302", () => hbmAddr(0, 2 ** 40)],
    ["ENC1303", () => semaAddr(0, 16, 0, "inc")],
    ["ENC1304", () => semaAddr(0, 0, 256, "inc")],
    ["ENC1401", () => packChannelConfig(cfg({ next: { ...n1, netIdxAddrs: [1, 2, 3, 4] } }), region)],
    ["ENC1402", () => packChannelConfig(cfg({ prev: { ...n1, foldN: 2, type: NeighType.P2P_POD } }), region)],
    ["ENC1403", () => packChannelConfig(cfg(), new Uint8Array(148))],
    ["ENC1404", () => packChannelConfig(cfg({ kangaringNumPeers: 2 }), region)],
    [
      "ENC1501",
      () => {
        const v = new Vring("small", 2);
        v.addCopy(0, 64, 4);
        v.addCopy(0, 64, 4);
        v.addCopy(0, 64, 4);
      },
    ],
    ["ENC1502", () => new Vring("v").addCce(0, 10, [0], 64, 4, 4)],
    [
      "ENC1503",
      () => {
        const v = new Vring("v");
        v.addCopy(0, 64, 4);
        dumpToPringPadded(v, 0, 0, 0);
      },
    ],
    ["ENC1504", () => dumpToPringPadded(new Vring("v"), 2, 1, 0)],
    ["ENC1601", () => new ProgramBuilder({ arch: 2, maxDescriptorBytes: 65536, cceMaxElements: 1024 }).addChannel(place({ channelId: 32, reporter: false }))],
    [
      "ENC1602",
      () => {
        const b = new ProgramBuilder({ arch: 2, maxDescriptorBytes: 65536, cceMaxElements: 1024 });
        b.addChannel(place());
        b.addChannel(place({ slot: 1, engines: [1] }));
      },
    ],
    [
      "ENC1603",
      () => {
        const b = new ProgramBuilder({ arch: 2, maxDescriptorBytes: 65536, cceMaxElements: 1024 });
        b.addChannel(place());
        b.addChannel(place({ channelId: 1, reporter: false, engines: [1] }));
      },
    ],
    [
      "ENC1604",
      () => {
        const b = new ProgramBuilder({ arch: 2, maxDescriptorBytes: 65536, cceMaxElements: 1024 });
        b.addChannel(place());
        b.addChannel(place({ channelId: 1, slot: 1, reporter: false }));
      },
    ],
    ["ENC1605", () => new ProgramBuilder({ arch: 2, maxDescriptorBytes: 65536, cceMaxElements: 1024 }).addChannel(place({ engines: [31, 32] }))],
    [
      "ENC1606",
      () => {
        const b = new ProgramBuilder({ arch: 2, maxDescriptorBytes: 65536, cceMaxElements: 1024 });
        const ch = b.addChannel(place({ engines: [0, 1] }));
        // A 1200-source reduce of one element lands on fold 0 only: fold 1's deficit of 1200 tx
        // over its rx needs ten reduce-shaped pads (one rx each); raising every fold by up to four
        // no-op pairs leaves room for five.
        ch.reduce(Array(1200).fill(hbmAddr(0, 64)), hbmAddr(0, 256), 4, 0, 10, 4, 4096);
        ch.markStep(0);
      },
    ],
    [
      "ENC1607",
      () => {
        const b = new ProgramBuilder({ arch: 2, maxDescriptorBytes: 65536, cceMaxElements: 1024 });
        const ch = b.addChannel(place());
        for (let i = 0; i < 65535; i++) ch.semaInc(hbmAddr(0, 64));
        ch.markStep(0);
      },
    ],
    ["ENC1609", () => new ProgramBuilder({ arch: 2, maxDescriptorBytes: 65536, cceMaxElements: 1024 }).addChannel(place()).reduce([hbmAddr(0, 64), hbmAddr(0, 128)], hbmAddr(0, 256), 8, 0, 10, 4, 6)],
    ["ENC1610", () => new ProgramBuilder({ arch: 2, maxDescriptorBytes: 65536, cceMaxElements: 1024 }).addChannel(place()).replicate(hbmAddr(0, 64), [hbmAddr(0, 128), hbmAddr(0, 256)], 8, 10, 4, 8)],
    ["ENC1608", () => new ProgramBuilder({ arch: 2, maxDescriptorBytes: 65536, cceMaxElements: 1024 }).addChannel(place({ reporter: false }))],
  ])("%s", (c, fn) => expect(code(fn)).toBe(c));
});

describe("simulator errors", () => {
  const setTx = (img: ProgramImage, i: number, off: number, v: number) => dv(q0(img).tx).setUint32(i * DESC_BYTES + off, v >>> 0, true);
  const setRxDst = (img: ProgramImage, i: number, addr: number) => dv(q0(img).rx).setBigUint64(i * DESC_BYTES + 8, BigInt(addr), true);
  const dataTx = (d: ReturnType<typeof decodeTx>) => d.kind === "data" && d.length > 4;
  it.each([
    ["SIM1001", () => {
      const k = new Kernel();
      k.at(5, Prio.WAKE, () => k.at(1, Prio.WAKE, () => {}));
      k.run();
    }],
    ["SIM1002", () => new Kernel().after(-1, Prio.WAKE, () => {})],
    ["SIM1003", () => {
      const k = new Kernel();
      const again = (): void => k.after(0, Prio.WAKE, again);
      again();
      k.run(10);
    }],
    ["SIM1101", () => cceReduce(1, 10, [new Uint8Array(4), new Uint8Array(4)])],
    ["SIM1102", () => cceReduce(0, 0, [new Uint8Array(4), new Uint8Array(4)])],
    ["SIM1103", () => cceReduce(0, 10, [new Uint8Array(3), new Uint8Array(3)])],
    ["SIM1201", () => new Fabric({ ...trn1, topology: { kind: "table", neighbours: [[], []] } }, 2).route(0, 1)],
    ["SIM1301", () => {
      const img = image();
      cfg0(img).setBigUint64(120, BigInt(0x0fff_e000_0000 + 15 * 0x1000 + 0x38), true); // queue 14's doorbell
      sim(img)();
    }],
    ["SIM1302", () => {
      const img = image();
      dv(img.devices[0]!.topsps[0]!.slotSpad[0]!).setUint16(0, 60000, true);
      sim(img)();
    }],
    ["SIM1303", () => {
      const img = image();
      setTx(img, 0, 0, decodeTx(q0(img).tx, 0).kind === "data" ? (dv(q0(img).tx).getUint32(0, true) & ~0x03000000) | 0x02000000 : 0);
      sim(img)();
    }],
    ["SIM1304", () => {
      const img = image();
      const m = tx(img, (d) => d.kind === "cce");
      setTx(img, m + 1, 0, dv(q0(img).tx).getUint32((m + 1) * DESC_BYTES, true) | 0x00800000);
      sim(img)();
    }],
    ["SIM1305", () => {
      const img = image();
      setTx(img, tx(img, dataTx), 12, 0xffff0000);
      sim(img)();
    }],
    ["SIM1306", () => {
      const img = image();
      const i = tx(img, dataTx);
      setTx(img, i, 0, dv(q0(img).tx).getUint32(i * DESC_BYTES, true) & ~0x08000000);
      sim(img)();
    }],
    ["SIM1307", () => {
      const img = image();
      const m = tx(img, (d) => d.kind === "cce");
      setTx(img, m + 1, 0, (dv(q0(img).tx).getUint32((m + 1) * DESC_BYTES, true) & ~0xffff) | 8);
      sim(img)();
    }],
    ["SIM1308", () => {
      const img = image();
      const i = rx(img, (d) => d.length > 4);
      dv(q0(img).rx).setUint32(i * DESC_BYTES, (dv(q0(img).rx).getUint32(i * DESC_BYTES, true) & ~0xffff) | 2, true);
      sim(img)();
    }],
    ["SIM1309", () => {
      const img = image();
      setTx(img, tx(img, dataTx), 12, 0x10000);
      sim(img)();
    }],
    ["SIM1310", () => {
      const img = image();
      setRxDst(img, 0, 0x90_0000_0000);
      sim(img)();
    }],
    ["SIM1311", () => {
      // A CCE packet that claims two destinations: the RX descriptor after its own is not one of its length.
      const img = image();
      const m = tx(img, (d) => d.kind === "cce");
      dv(q0(img).tx).setUint32(m * DESC_BYTES + 12, 1, true);
      sim(img)();
    }],
    ["SIM1312", () => {
      // A streamed image whose feed runs dry before the rings it promised are full.
      const scn = scenario({ ranks: 2, channels: 1, check: "none", ops: [{ op: "all-reduce", bytes: 4096, dtype: "fp32", reduce: "sum" }] });
      const img = compileStreamed(scn, trn1, [0]).image;
      sim({ ...img, feed: { pull: () => false } })();
    }],
    ["SIM1401", () => sim({ ...image(), devices: image().devices.map((d) => ({ ...d, topsps: d.topsps.map((t) => ({ ...t, opNum: 2 })) })) })()],
    ["SIM1402", () => {
      const img = image();
      cfg0(img).setBigUint64(56, BigInt(semaAddr(0, 1, 0, "read")), true);
      sim(img)();
    }],
    ["SIM1403", () => {
      const img = image();
      img.devices[0]!.topsps[0]!.ctrlSpad[0] = 0;
      sim(img)();
    }],
    ["SIM1404", () => {
      const img = image();
      img.devices[0]!.topsps[0]!.ctrlSpad[1] = 2;
      sim(img)();
    }],
    ["SIM1413", () => {
      // A MESH entry on a program with no mesh tape walks empty events to the end of the tape.
      const img = image();
      img.devices[0]!.topsps[0]!.ctrlSpad[1] = 1;
      sim(img)();
    }],
    ["SIM1406", () => {
      const img = image();
      img.devices[0]!.topsps[0]!.ringConfig[140] = 5;
      sim(img)();
    }],
    ["SIM1407", () => {
      const img = image();
      img.devices[0]!.topsps[0]!.ringConfig[142] = 0;
      sim(img)();
    }],
    ["SIM1408", () => {
      const img = image();
      img.devices[0]!.topsps[0]!.ringConfig[141] = 9;
      sim(img)();
    }],
    ["SIM1409", () => {
      const img = image();
      const d = img.devices[0]!;
      const t = d.topsps[0]!;
      sim({ ...img, devices: [{ ...d, topsps: [{ ...t, slotSpad: [t.slotSpad[0]!.subarray(0, 8)] }] }, ...img.devices.slice(1)] })();
    }],
    ["SIM1410", () => {
      const img = image();
      dv(img.devices[0]!.topsps[0]!.slotSpad[0]!).setUint16(4, 0, true);
      sim(img)();
    }],
    ["SIM1411", () => {
      const img = image();
      const s = img.devices[0]!.topsps[0]!.slotSpad[0]!;
      dv(s).setUint16(s.length - 4, 2, true);
      sim(img)();
    }],
    ["SIM1415", () => sim({ ...image(), devices: image().devices.map((d) => ({ ...d, topsps: d.topsps.map((t) => ({ ...t, barrierConfig: t.barrierConfig.subarray(8) })) })) })()],
    ["SIM1501", () => sim({ ...image(), version: 2 as 1 })()],
    ["SIM1502", () => sim({ ...image(), devices: [{ ...image().devices[0]!, device: 20 }] })()],
    ["SIM1503", () => {
      const img = image();
      setRxDst(img, rx(img, (d) => d.length > 4), hbmAddr(5, 4096));
      sim(img)();
    }],
    ["SIM1504", () => sim({ ...image(), devices: image().devices.map((d) => ({ ...d, topsps: d.topsps.map((t) => ({ ...t, index: 7 })) })) })()],
    ["SIM1505", () => {
      const img = image();
      const inc = decodeRx(q0(img).rx, rx(img, isSemaInc) * DESC_BYTES).dst;
      setRxDst(img, rx(img, (d) => d.length > 4), inc);
      sim(img)();
    }],
    ["SIM1506", () => {
      const img = image();
      const i = rx(img, isSemaInc);
      setRxDst(img, i, decodeRx(q0(img).rx, i * DESC_BYTES).dst - 0x800);
      sim(img)();
    }],
    ["SIM1508", () => {
      const img = image();
      cfg0(img).setBigUint64(120, BigInt(hbmAddr(0, 64)), true);
      sim(img)();
    }],
    ["SIM1509", () => {
      const img = image();
      cfg0(img).setUint32(136, 1 << 20, true);
      sim(img)();
    }],
    ["SIM1510", () => {
      const img = image();
      img.devices[0]!.memory.push({ addr: hbmAddr(1, 0), bytes: new Uint8Array(4) });
      sim(img)();
    }],
    ["SIM1511", () => sim({ ...image(), devices: image().devices.map((d) => ({ ...d, queues: d.queues.map((q) => ({ ...q, engine: 40 })) })) })()],
    ["SIM1512", () => simulate(trn1, image(), { storePayload: false }).read(semaAddr(0, 0, 0, "read"), 4)],
    ["SIM1516", () => simulate(trn1, image(), { storePayload: false, symbolic: [{ addr: hbmAddr(5, 0), bytes: 4, id: 0 }] })],
    ["SIM1518", () => simulate(trn1, image(), { storePayload: false, symbolic: [{ addr: hbmAddr(0, 0), bytes: 4, id: 0 }], symbolicFull: () => "no room" })],
    ["SIM1202", () => new Fabric(trn1, 16, 2).route(0, 16)],
    ["SIM1514", () => simulate(ideal, { ...image(), nodes: 2, devicesPerNode: 2 }, { storePayload: false })],
    ["SIM1601", () => simulate(trn1, compileProgram(scenario({ ranks: 2, check: "none", ops: [{ op: "all-reduce", bytes: 4096, dtype: "fp32", reduce: "sum" }] }), trn1, [0]).image, { storePayload: false, faults: [{ kind: "link-down", from: 0, to: 9, atUs: 1 }] })],
    ["SIM1515", () => {
      const img = compileProgram(scenario({ ranks: 4, nodes: 2, channels: 1, check: "none", ops: [{ op: "all-gather", bytes: 4096, dtype: "fp32", reduce: "sum" }] }), trn1, [0]).image;
      const q = img.devices.find((d) => d.proxyQueues.length > 0)!.proxyQueues[0]!;
      expect(q.fifo.length).toBeGreaterThan(0);
      dv(q.fifo).setBigUint64(0, BigInt(hbmAddr(5, 0)), true);
      sim(img)();
    }],
  ])("%s", (c, fn) => expect(code(fn)).toBe(c));

  it("an untouched image runs clean (the mutations above are what break it)", () => {
    expect(simulate(trn1, image(), { storePayload: false }).hang).toBeUndefined();
  });
});

describe("the catalogue", () => {
  it("every error code raised in src/ and sim/ has a test asserting it", () => {
    const walk = (d: string): string[] => readdirSync(d).flatMap((f) => (statSync(`${d}/${f}`).isDirectory() ? walk(`${d}/${f}`) : [`${d}/${f}`]));
    const raised = new Set([...walk("src"), ...walk("sim")].flatMap((f) => [...readFileSync(f, "utf8").matchAll(/"((?:SCN|CMP|ENC|SIM)\d{4})"/g)].map((m) => m[1]!)));
    const tests = walk("test").filter((f) => f.endsWith(".test.ts") && f !== "test/errors.test.ts").map((f) => readFileSync(f, "utf8"));
    tests.push(readFileSync("test/errors.test.ts", "utf8").split('describe("the catalogue"')[0]!);
    expect([...raised].filter((c) => !tests.some((t) => t.includes(`"${c}"`)))).toEqual([]);
    expect(raised.size).toBeGreaterThan(80);
    // One catalogue: every raised code is in it, and every code in it is raised.
    expect([...raised].filter((c) => !(c in ERROR_CODES)).sort()).toEqual([]);
    expect(Object.keys(ERROR_CODES).filter((c) => !raised.has(c)).sort()).toEqual([]);
  });
});
