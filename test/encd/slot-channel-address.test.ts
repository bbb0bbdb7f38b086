import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { decodeSlotEntry, packSlotEntry, StepFlag } from "../../src/encd/slot.ts";
import { ALGO_CONFIG_RING_BYTES, CHANNEL_CONFIG_BYTES, decodeChannelConfig, packChannelConfig, type ChannelConfig } from "../../src/encd/channel.ts";
import { blockOf, decodeAddress, describeAddress, hbmAddr, semaAddr, tailDoorbellAddr } from "../../src/encd/address.ts";
import { decodeProxyEntry, packProxyEntries, PROXY_ENTRY_BYTES, ProxyFifo } from "../../src/encd/proxy-fifo.ts";
import { GrownBytes, hex } from "../../src/encd/bits.ts";

const cfg = (over: Partial<ChannelConfig> = {}): ChannelConfig => ({
  next: { netIdxAddrs: [], foldN: 2, type: 1 },
  prev: { netIdxAddrs: [0x11], foldN: 2, type: 0 },
  recvSema: 0x1000,
  sendSema: 0x2000,
  postSema: 0,
  dmaComplSema: 0x3000,
  kringMine: 0,
  kringPeers: [],
  bcastM2sTail: 0x4000,
  bcastS2mTail: 0x5000,
  bcastMask: 0x3,
  channelId: 1,
  spadSlotIdx: 2,
  foldN: 2,
  kangaringIsPrimary: 0,
  kangaringNumPeers: 0,
  ...over,
});

describe("spad_slot_entry", () => {
  it("golden: m2s, s2m, repeat, flags | drain target << 8", () => {
    expect(hex(packSlotEntry({ m2s: 3, s2m: 2, repeat: 14, flags: StepFlag.WAIT_RECV | StepFlag.WAIT_CREDIT, drainTarget: 0 }))).toBe("03 00 02 00 0e 00 06 00");
    expect(hex(packSlotEntry({ m2s: 0, s2m: 0, repeat: 1, flags: StepFlag.DRAIN_CREDIT, drainTarget: 4 }))).toBe("00 00 00 00 01 00 08 04");
  });
  it("round-trips and refuses out-of-range counters", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: 1, max: 0xffff }), fc.integer({ min: 0, max: 15 }), fc.integer({ min: 0, max: 255 }), (m2s, s2m, repeat, flags, drainTarget) => {
        const e = { m2s, s2m, repeat, flags, drainTarget };
        expect(decodeSlotEntry(packSlotEntry(e), 0)).toEqual(e);
      }),
    );
    expect(() => packSlotEntry({ m2s: 65536, s2m: 0, repeat: 1, flags: 0, drainTarget: 0 })).toThrow(/m2s_val=65536 does not fit 16 bits/);
    expect(() => packSlotEntry({ m2s: 0, s2m: 0, repeat: 0, flags: 0, drainTarget: 0 })).toThrow(/repeat=0/);
  });
});

describe("148-byte ring channel descriptor", () => {
  it("places every field at its offset", () => {
    const region = new Uint8Array(ALGO_CONFIG_RING_BYTES);
    packChannelConfig(cfg(), region);
    const rec = region.subarray(CHANNEL_CONFIG_BYTES, 2 * CHANNEL_CONFIG_BYTES);
    const v = new DataView(rec.buffer, rec.byteOffset);
    expect(rec[24]).toBe(2); // next_neigh.fold_n
    expect(rec[25]).toBe(1); // next_neigh.type
    expect(v.getBigUint64(28, true)).toBe(0x11n); // prev_neigh.net_idx_addrs[0]
    expect(v.getBigUint64(56, true)).toBe(0x1000n);
    expect(v.getBigUint64(64, true)).toBe(0x2000n);
    expect(v.getBigUint64(80, true)).toBe(0x3000n);
    expect(v.getBigUint64(120, true)).toBe(0x4000n);
    expect(v.getBigUint64(128, true)).toBe(0x5000n);
    expect(v.getUint32(136, true)).toBe(3);
    expect([rec[140], rec[141], rec[142], rec[143], rec[144]]).toEqual([1, 2, 2, 0, 0]);
    expect(region.subarray(0, CHANNEL_CONFIG_BYTES).every((b) => b === 0)).toBe(true);
  });
  it("round-trips and enforces the descriptor's invariants", () => {
    const region = new Uint8Array(ALGO_CONFIG_RING_BYTES);
    packChannelConfig(cfg(), region);
    const d = decodeChannelConfig(region, 1);
    expect(d).toMatchObject({ recvSema: 0x1000, channelId: 1, spadSlotIdx: 2, foldN: 2, bcastMask: 3 });
    expect(d.prev.netIdxAddrs).toEqual([0x11, 0, 0]);
    expect(() => packChannelConfig(cfg({ kangaringNumPeers: 2 }), region)).toThrow(/must be 0, 1 or 3/);
    expect(() => packChannelConfig(cfg({ next: { netIdxAddrs: [], foldN: 2, type: 2 } }), region)).toThrow(/P2P_POD/);
    expect(() => packChannelConfig(cfg({ channelId: 32 }), region)).toThrow(/channel_id=32/);
  });
});

describe("address map", () => {
  it("encodes TopSP semaphore windows as SP base + tile + window + 4*id and decodes them back", () => {
    const a = semaAddr(0, 1, 5, "inc");
    expect(a).toBe(0x82_8000_0000 + (1 << 30) + 0x1800 + 20);
    expect(decodeAddress(semaAddr(3, 9, 255, "dec"))).toEqual({ kind: "sema", device: 3, topsp: 9, sema: 255, window: "dec" });
    expect(decodeAddress(hbmAddr(7, 0x1234))).toEqual({ kind: "hbm", device: 7, offset: 0x1234 });
    expect(decodeAddress(tailDoorbellAddr(2, undefined, 15, "s2m"))).toEqual({ kind: "doorbell", device: 2, engine: undefined, seng: 0, queue: 15, dir: "s2m" });
    expect(decodeAddress(tailDoorbellAddr(2, undefined, 15, "m2s", 3))).toEqual({ kind: "doorbell", device: 2, engine: undefined, seng: 3, queue: 15, dir: "m2s" });
    expect(decodeAddress(tailDoorbellAddr(2, 17, 3, "m2s"))).toEqual({ kind: "doorbell", device: 2, engine: 17, seng: 0, queue: 3, dir: "m2s" });
    expect(decodeAddress(tailDoorbellAddr(2, 100, 15, "s2m"))).toEqual({ kind: "doorbell", device: 2, engine: 100, seng: 3, queue: 15, dir: "s2m" });
    expect(() => semaAddr(0, 0, 256, "read")).toThrow(/semaphore 256/);
    expect(() => hbmAddr(65536, 0)).toThrow(/device 65536/);
  });

  it("names 64 devices: bits 52:48 carry device bits 4:0, bit 46 bit 5, every address below 2^53", () => {
    expect(hbmAddr(33, 0x10)).toBe(2 ** 48 + 2 ** 46 + 0x10);
    for (const d of [0, 31, 32, 47, 63]) {
      const s = semaAddr(d, 15, 255, "dec");
      expect(Number.isSafeInteger(s)).toBe(true);
      expect(decodeAddress(s)).toEqual({ kind: "sema", device: d, topsp: 15, sema: 255, window: "dec" });
      expect(decodeAddress(hbmAddr(d, 0x7f_ffff_fff0))).toEqual({ kind: "hbm", device: d, offset: 0x7f_ffff_fff0 });
      expect(decodeAddress(tailDoorbellAddr(d, 255, 15, "s2m"))).toEqual({ kind: "doorbell", device: d, engine: 255, seng: 7, queue: 15, dir: "s2m" });
    }
  });

  it("names a device of the sender's 64-device block: the same bits resolve in each block", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 65535 }), fc.integer({ min: 0, max: 63 }), fc.integer({ min: 0, max: 0x7f_ffff_ffff }), (from, local, off) => {
        const block = from - (from % 64);
        const a = hbmAddr(block + local, off);
        expect(a).toBe(hbmAddr(local, off));
        expect(decodeAddress(a, from)).toEqual({ kind: "hbm", device: block + local, offset: off });
        expect(decodeAddress(semaAddr(block + local, 3, 7, "inc"), from)).toEqual({ kind: "sema", device: block + local, topsp: 3, sema: 7, window: "inc" });
        expect(blockOf(block + local)).toBe(block / 64);
      }),
    );
    expect(describeAddress(hbmAddr(70, 0x40), 100)).toBe("dev70:hbm+0x40");
  });
});

describe("proxy entry", () => {
  it("packs 40 bytes: src, dst, bytes, trigger, sema_n, sema, the remote block", () => {
    const e = { src: hbmAddr(1, 0x100), dst: hbmAddr(2, 0x200), bytes: 4096, trigger: 2, semaN: 2, sema: semaAddr(2, 1, 9, "inc"), block: 3 };
    const b = packProxyEntries([e]);
    expect(b.length).toBe(PROXY_ENTRY_BYTES);
    expect(PROXY_ENTRY_BYTES).toBe(40);
    expect([...b.subarray(0, 8)]).toEqual([0x00, 0x01, 0, 0, 0, 0, 0x01, 0x00]);
    expect([...b.subarray(16, 24)]).toEqual([0x00, 0x10, 0, 0, 2, 0, 2, 0]);
    expect([...b.subarray(32, 40)]).toEqual([3, 0, 0, 0, 0, 0, 0, 0]);
    expect(decodeProxyEntry(b, 0)).toEqual(e);
    expect(() => packProxyEntries([{ ...e, block: -1 }])).toThrow(/block=-1/);
  });

  it("a proxy fifo packs each entry as it comes: the bytes of the whole list, trimmed, and the trigger sum", () => {
    // 37 entries: the fifo grows past its first 16 slots twice.
    const entries = Array.from({ length: 37 }, (_, i) => ({ src: hbmAddr(1, 0x100 * i), dst: hbmAddr(2, 0x40 * i), bytes: 1024 + i, trigger: i % 3, semaN: 1, sema: semaAddr(2, 1, i % 8, "inc"), block: i % 4 }));
    const fifo = new ProxyFifo();
    fifo.push(...entries.slice(0, 5));
    for (const e of entries.slice(5)) fifo.push(e);
    expect(fifo.count).toBe(37);
    expect(fifo.triggers).toBe(entries.reduce((n, e) => n + e.trigger, 0));
    expect(fifo.packed()).toEqual(packProxyEntries(entries));
    expect(fifo.packed().length).toBe(37 * PROXY_ENTRY_BYTES);
  });

  it("a proxy fifo that keeps nothing (the streaming pass) counts its entries and their triggers", () => {
    const e = { src: hbmAddr(1, 0x100), dst: hbmAddr(2, 0x200), bytes: 4096, trigger: 2, semaN: 2, sema: semaAddr(2, 1, 9, "inc"), block: 3 };
    const fifo = new ProxyFifo(false);
    fifo.push(e, e, e);
    expect(fifo.count).toBe(3);
    expect(fifo.triggers).toBe(6);
    expect(() => fifo.packed()).toThrow(/keeps no entries/);
    // One that keeps them checks each as it packs it.
    expect(() => new ProxyFifo().push({ ...e, trigger: 1 << 16 })).toThrow(/trigger/);
  });
});

describe("grown bytes", () => {
  it("grow in place by doubling; a view is trimmed and never changes after", () => {
    const g = new GrownBytes(4);
    for (let i = 0; i < 5; i++) g.grow(3)[g.length - 3] = i + 1;
    expect(g.length).toBe(15);
    const v = g.view();
    expect([...v]).toEqual([1, 0, 0, 2, 0, 0, 3, 0, 0, 4, 0, 0, 5, 0, 0]);
    g.grow(3)[g.length - 3] = 9;
    expect(v.length).toBe(15);
    expect([...g.view()].slice(12)).toEqual([5, 0, 0, 9, 0, 0]);
  });
});
