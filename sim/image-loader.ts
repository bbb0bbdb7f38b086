// Loading a program image into the machine: each device's memory, writable regions, DMA queues,
// semaphores and TopSPs, checked against the preset.
import type { DeviceSpec } from "../src/ir/spec.ts";
import { SimError } from "../src/ir/errors.ts";
import { decodeAddress, describeAddress } from "../src/encd/address.ts";
import type { DeviceImage, ProgramImage } from "../src/encd/image.ts";
import { DmaEngine, DmaQueue, RingSide, type DmaHost } from "./hw/dma.ts";
import type { DeviceMemory, Region } from "./hw/memory.ts";
import type { SemaphoreBlock } from "./hw/semaphore.ts";
import { Topsp, type TopspHost } from "./hw/topsp.ts";
import { QueueClock, type RaceDetector } from "./verify/races.ts";

/** A device of the machine, as loaded from its image. */
export interface DeviceModel {
  readonly memory: DeviceMemory;
  /** HBM the image declares writable (payload and scratch), as sorted [start, end) offsets. */
  readonly writable: Region[];
  readonly engines: Map<number, DmaEngine>;
  readonly topsps: Map<number, Topsp>;
  readonly semas: Map<number, SemaphoreBlock>;
}

/** What loading a device image needs from the machine around it. */
export interface LoadContext {
  readonly spec: DeviceSpec;
  readonly races: RaceDetector | undefined;
  readonly dmaHost: DmaHost;
  readonly topspHost: TopspHost;
  readonly feed: ProgramImage["feed"];
  readonly semaBlock: (d: number, ts: number) => SemaphoreBlock;
}

/** One device's image into its model: memory, writable regions, DMA queues, semaphores, TopSPs. */
export function loadDeviceImage(model: DeviceModel, di: DeviceImage, c: LoadContext): void {
  const { spec, races } = c;
  const memory = model.memory;
  for (const p of di.payload) {
    const a = decodeAddress(p.addr, di.device);
    if (a.kind !== "hbm" || a.device !== di.device) throw new SimError("SIM1510", `payload range at ${describeAddress(p.addr, di.device)} is not HBM of device ${di.device}`, { value: p.addr });
  }
  for (const r of [...di.payload, ...(di.scratch ?? [])]) {
    const a = decodeAddress(r.addr, di.device);
    if (a.kind === "hbm" && a.device === di.device) model.writable.push({ start: a.offset, end: a.offset + Math.max(r.bytes, 1) });
  }
  // The no-op descriptors' pad word is copied onto itself by every queue at once: not data.
  for (const r of di.scratch ?? []) {
    const a = decodeAddress(r.addr, di.device);
    if (races && a.kind === "hbm" && a.device === di.device) races.exemptRange(di.device, a.offset, a.offset + r.bytes);
  }
  model.writable.sort((x, y) => x.start - y.start);
  for (const seg of di.memory) {
    const a = decodeAddress(seg.addr, di.device);
    if (a.kind !== "hbm" || a.device !== di.device) throw new SimError("SIM1510", `initial memory at ${describeAddress(seg.addr, di.device)} is not HBM of device ${di.device}`, { value: seg.addr });
    memory.load(a.offset, seg.bytes);
  }
  for (const q of di.queues) {
    if (q.engine >= spec.dma.enginesPerCore * spec.coresPerDevice) throw new SimError("SIM1511", `DMA engine ${q.engine} does not exist on ${spec.name}`, { value: q.engine });
    let e = model.engines.get(q.engine);
    if (!e) {
      e = new DmaEngine(c.dmaHost, di.device, q.engine, { bytesPerSecond: spec.dma.engineBytesPerSecond, descriptorCostPs: spec.dma.descriptorCostPs });
      model.engines.set(q.engine, e);
    }
    const st = q.streamed;
    const tx = st ? RingSide.streamed(st.tx, st.txCount, c.feed) : RingSide.whole(q.tx);
    const rx = st ? RingSide.streamed(st.rx, st.rxCount, c.feed) : RingSide.whole(q.rx);
    e.addQueue(new DmaQueue(q.queue, tx, rx, races && new QueueClock(races.agent(`dev${di.device} dma${q.engine} q${q.queue}`, "tx"))));
  }
  for (const s of di.semaphores) c.semaBlock(di.device, s.topsp).write(s.sema, "set", s.value);
  for (const t of di.topsps) {
    if (t.index >= spec.topsp.perDevice) throw new SimError("SIM1504", `TopSP ${t.index} does not exist on ${spec.name}`, { value: t.index });
    model.topsps.set(t.index, new Topsp(c.topspHost, di.device, t, c.semaBlock(di.device, t.index), spec.topsp));
  }
}
