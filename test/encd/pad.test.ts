// Step padding: every fold of a channel hands over equal TX and RX counts per step; the padder
// adds no-op copy pairs, reduce-shaped no-ops and replicated no-ops to the short folds.
import { describe, expect, it } from "vitest";
import { hbmAddr } from "../../src/encd/address.ts";
import { NeighType } from "../../src/encd/channel.ts";
import { decodeSlotEntry, SLOT_ENTRY_BYTES } from "../../src/encd/slot.ts";
import { ProgramBuilder } from "../../src/encd/program.ts";
import { simulate } from "../../sim/index.ts";
import { trn1 } from "../helpers.ts";
import { splitWhole, type ChannelPlacement } from "../../src/encd/channel-writer.ts";
import { decodeRx } from "../../src/encd/udma.ts";

const n1 = { netIdxAddrs: [], foldN: 2, type: NeighType.P2P };
const place: ChannelPlacement = { device: 0, topsp: 0, channelId: 0, slot: 0, engines: [0, 1], queue: 15, recvSema: 0, sendSema: 2, complSema: 4, reporter: true, next: n1, prev: n1, initialCredits: 4 };

describe("step padding", () => {
  it("a fold short of TX only (the other reduced many sources) is padded after raising both folds by a no-op pair", () => {
    const b = new ProgramBuilder({ arch: 2, maxDescriptorBytes: 65536, cceMaxElements: 1024 });
    const ch = b.addChannel(place);
    b.beginOp();
    // A 200-source reduce of one element on fold 0 only: fold 1 is 201 TX and 1 RX short, which
    // needs two reduce-shaped pads (one RX each); one extra no-op pair on each fold makes room.
    ch.reduceOn(0, Array(200).fill(hbmAddr(0, 64)), hbmAddr(0, 256), 4, 0, 10, 4096);
    ch.markStep(0);
    ch.markEnd();
    b.endOp();
    const img = b.build();
    const slot = img.devices[0]!.topsps[0]!.slotSpad[0]!;
    const step = decodeSlotEntry(slot, 0);
    // The reduce's TX and RX, and one no-op pair more (two RX: the reduce's and the pair's).
    expect(step.s2m).toBe(2);
    const q = (engine: number) => img.devices[0]!.queues.find((x) => x.engine === engine)!;
    expect(q(0).tx.length).toBe(q(1).tx.length);
    expect(q(0).rx.length).toBe(q(1).rx.length);
    expect(slot.length).toBeGreaterThanOrEqual(2 * SLOT_ENTRY_BYTES);
  });
});

describe("no-op packets in a timing-only run", () => {
  it("add the pad word, which no image byte initializes, so their landings change nothing and are no events", () => {
    const b = new ProgramBuilder({ arch: 2, maxDescriptorBytes: 65536, cceMaxElements: 1024 });
    const ch = b.addChannel(place);
    b.beginOp();
    // Fold 1 gets reduce-shaped no-ops and a no-op pair for fold 0's reduces.
    for (let i = 0; i < 8; i++) {
      ch.reduceOn(0, Array(200).fill(hbmAddr(0, 64)), hbmAddr(0, 256), 4, 0, 10, 4096);
      ch.markStep(0);
    }
    ch.markEnd();
    b.endOp();
    const img = b.build();
    const dev = img.devices[0]!;
    // The image initializes the constant word 1 alone; the pad word after it is declared scratch.
    expect(dev.memory.map((m) => ({ addr: m.addr, bytes: [...m.bytes] }))).toEqual([{ addr: hbmAddr(0, 0), bytes: [1, 0, 0, 0] }]);
    expect(dev.scratch).toEqual([{ addr: hbmAddr(0, 4), bytes: 4 }]);
    const timed = simulate(trn1, img, { storePayload: false });
    const kept = simulate(trn1, img, { storePayload: true });
    expect(timed.hang).toBeUndefined();
    expect(timed.endPs).toBe(kept.endPs);
    // Each no-op packet's landing is an event only where payload is kept (at least two per step).
    expect(kept.events - timed.events).toBeGreaterThanOrEqual(16);
  });
});

describe("a channel's shares of a transfer", () => {
  it("split each transfer over the folds as splitWhole does, whatever the size and element before it", () => {
    const b = new ProgramBuilder({ arch: 2, maxDescriptorBytes: 65536, cceMaxElements: 1024 });
    const ch = b.addChannel(place);
    b.beginOp();
    // (Sizes and element sizes alternating and repeating: a split kept from the last transfer must not stand for another.)
    const moves: [number, number][] = [[4096, 4], [4096, 4], [6, 2], [4096, 2], [4096, 4], [12, 4], [12, 2], [4096, 4]];
    for (const [bytes, esize] of moves) ch.copy(hbmAddr(0, 0), hbmAddr(0, 1 << 20), bytes, esize);
    ch.markStep(0);
    ch.markEnd();
    b.endOp();
    const img = b.build();
    const rx = (engine: number) => img.devices[0]!.queues.find((x) => x.engine === engine)!.rx;
    // Each copy is one RX descriptor a fold that has a share (a 4-byte semaphore write ends the op on each).
    const lengths = (f: number) => moves.map(([bytes, esize]) => splitWhole(bytes, esize, 2)[f]!.len).filter((n) => n > 0);
    const got = (engine: number) => Array.from({ length: rx(engine).length / 16 - 1 }, (_, i) => decodeRx(rx(engine), 16 * i).length);
    expect(got(0)).toEqual(lengths(0));
    expect(got(1)).toEqual(lengths(1));
    expect(lengths(0)).toEqual([2048, 2048, 4, 2048, 2048, 8, 6, 2048]);
  });
});
