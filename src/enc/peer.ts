// Writes and signals from a mesh-tape program (mesh, RDH) to a peer rank: DMA on one of the
// program's engines when the peer is reachable over NeuronLink, otherwise proxy entries in the
// rank's network proxy queue, batched until the next event's DMA leg triggers them (one trigger
// increment per engine, after that engine's earlier descriptors; the batch's first entry waits
// for all of them, the rest go with it, and landings keep their order).
import type { ProxyEntry, ProxyFifo } from "../encd/proxy-fifo.ts";
import { blockOf } from "../encd/address.ts";
import type { EncdChannel } from "../encd/channel-writer.ts";

/** A rank's network proxy queue and the INC address of its trigger semaphore. */
export interface NetQueue {
  readonly entries: ProxyFifo;
  readonly trigger: number;
  /** Whether a peer on `device` is reached through the network. */
  readonly remote: (device: number) => boolean;
}

export class PeerWrites {
  private readonly batch: ProxyEntry[] = [];
  constructor(
    private readonly dma: EncdChannel,
    private readonly net: NetQueue | undefined,
  ) {}

  private viaNet(device: number): boolean {
    return this.net !== undefined && this.net.remote(device);
  }

  /** `bytes` from local `src` to the peer's `dst`, then (if `signal`) one increment of the peer semaphore `signal`. */
  copy(f: number, device: number, src: number, dst: number, bytes: number, signal?: number): void {
    if (!this.viaNet(device)) {
      this.dma.copyOn(f, src, dst, bytes);
      if (signal !== undefined) this.dma.semaIncOn(f, signal);
      return;
    }
    if (bytes === 0 && signal === undefined) return;
    // The proxy addresses the peer's NIC by the semaphore field, so a data-only entry carries it too.
    this.batch.push({ src, dst, bytes, trigger: 0, semaN: signal === undefined ? 0 : 1, sema: signal ?? dst, block: blockOf(device) });
  }

  /** One increment of the peer semaphore `signal`. */
  signal(f: number, device: number, signal: number): void {
    if (!this.viaNet(device)) this.dma.semaIncOn(f, signal);
    else this.batch.push({ src: 0, dst: 0, bytes: 0, trigger: 0, semaN: 1, sema: signal, block: blockOf(device) });
  }

  /** Hand the batch to the proxy: call before the event whose DMA leg carries it. */
  flush(): void {
    const net = this.net;
    if (!net || this.batch.length === 0) return;
    const engines = this.dma.foldN;
    this.batch[0] = { ...this.batch[0]!, trigger: engines };
    for (let f = 0; f < engines; f++) this.dma.semaIncOn(f, net.trigger);
    net.entries.push(...this.batch);
    this.batch.length = 0;
  }
}
