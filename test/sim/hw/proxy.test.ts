// The network proxy moves an entry's bytes when the run keeps them, and lands a payload-less write
// when it does not (a timing-only run): no copy per message, and the same landing times.
import { describe, expect, it } from "vitest";
import { Kernel } from "../../../sim/kernel/kernel.ts";
import { Fabric } from "../../../sim/hw/fabric.ts";
import { SemaphoreBlock } from "../../../sim/hw/semaphore.ts";
import { ProxyQueue, type ProxyHost } from "../../../sim/hw/proxy.ts";
import { hbmAddr, semaAddr } from "../../../src/encd/address.ts";
import { packProxyEntries } from "../../../src/encd/proxy-fifo.ts";
import { trn1 } from "../../helpers.ts";

type Landed = { addr: number; bytes: Uint8Array | undefined; len: number; at: number };

/** One proxy of device 0 (two trn1 nodes) sending `len` bytes to device 16 and incrementing its semaphore 5; what landed, when. */
function send(len: number, payload: (device: number, offset: number, len: number) => Uint8Array | undefined): Landed[] {
  const kernel = new Kernel();
  const landed: Landed[] = [];
  const host: ProxyHost = {
    kernel,
    fabric: new Fabric(trn1, 16, 2),
    network: trn1.network!,
    payload,
    home: (d) => d,
    land: (addr, _from, bytes, n) => void landed.push({ addr, bytes, len: n, at: kernel.now }),
    trace: undefined,
    races: undefined,
    symbolic: undefined,
    quiet: () => true,
    dropped: (d, off, n) => payload(d, off, n) === undefined,
  };
  const fifo = packProxyEntries([{ src: hbmAddr(0, 0x1000), dst: hbmAddr(16, 0x2000), bytes: len, trigger: 0, semaN: 1, sema: semaAddr(16, 0, 5, "inc"), block: 0 }]);
  new ProxyQueue(host, 0, new SemaphoreBlock(kernel, 256, 0), 0, 0, fifo).start();
  kernel.run();
  return landed;
}

describe("network proxy payload", () => {
  it("lands the bytes the run keeps, and none (the same times) where it keeps none", () => {
    const bytes = Uint8Array.from({ length: 64 }, (_, i) => i);
    const asked: [number, number, number][] = [];
    const kept = send(64, (d, off, n) => (asked.push([d, off, n]), bytes));
    expect(asked).toEqual([[0, 0x1000, 64]]);
    expect(kept.map((l) => [l.addr, l.bytes, l.len])).toEqual([
      [hbmAddr(16, 0x2000), bytes, 64],
      [semaAddr(16, 0, 5, "inc"), Uint8Array.from([1, 0, 0, 0]), 4],
    ]);
    const timingOnly = send(64, () => undefined);
    expect(timingOnly.map((l) => [l.addr, l.bytes, l.len, l.at])).toEqual([
      [hbmAddr(16, 0x2000), undefined, 64, kept[0]!.at],
      [semaAddr(16, 0, 5, "inc"), Uint8Array.from([1, 0, 0, 0]), 4, kept[1]!.at],
    ]);
    expect(kept[0]!.at).toBeGreaterThan(0);
  });
});
