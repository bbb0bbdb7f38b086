// Folding a program of alike pods (nodes joined by the network) for a timing-only run: when every
// pod's program is pod 0's up to the pod's place, pod 0 alone is simulated, and traffic to another
// pod lands on pod 0's device in the same place, as the pod that sends to pod 0 at that moment
// would have it (docs/device-model.md §1, "Folded images"). The code speaks of units (a unit: a
// pod here), as nothing in the check is particular to pods.
//
// What "alike" means, checked here over the counting pass's image of every unit:
//  - each device of unit u has a device of unit 0 in the same place whose program is the same: its
//    TopSP entries, step streams, ring and mesh configs, barriers, semaphores, constants, and its
//    descriptor runs (kinds, sizes, and every address as a unit-relative place: which device of
//    which unit — own or another — and which semaphore or doorbell; HBM offsets are left out, as no
//    timing depends on them); its proxy entries alike in size, trigger and landing place;
//  - the k-th address of a place's program that names another unit names, over the units, every
//    unit exactly once: so unit 0 receives, at each such moment, exactly one copy of what it sends.
import type { DeviceImage, ProgramImage } from "./image.ts";
import { ADDRESS_BLOCK } from "./address.ts";
import { decodeBarrierConfig, BARRIER_CONFIG_BYTES } from "./barrier.ts";
import { CHANNEL_CONFIG_BYTES, decodeChannelConfig, MAX_CHANNELS } from "./channel.ts";
import { decodeMeshEvent, MESH_EVENT_BYTES } from "./mesh-event.ts";
import { decodeProxyEntry, PROXY_ENTRY_BYTES } from "./proxy-fifo.ts";
import { addUnitAddress, addUnitAddressOrNone, Signature } from "./signature.ts";

/** Fields of the decoded device structures that hold addresses. */
const ADDRESS_FIELDS = new Set(["netIdxAddrs", "recvSema", "sendSema", "postSema", "dmaComplSema", "kringMine", "kringPeers", "bcastM2sTail", "bcastS2mTail", "m2sTail", "s2mTail", "directTrigger", "waitSema", "sema", "dmaSyncSemas", "ringBase"]);

/** Hash a decoded structure: numbers as they are, address fields as unit-relative places. */
function addValue(sig: Signature, v: unknown, device: number, unitDevices: number, address = false): void {
  if (typeof v === "number") return address ? addUnitAddressOrNone(sig, v, device, unitDevices) : sig.add(v);
  if (typeof v === "boolean") return sig.add(v ? 1 : 0);
  if (Array.isArray(v)) {
    sig.add(v.length);
    for (const x of v) addValue(sig, x, device, unitDevices, address);
    return;
  }
  if (v && typeof v === "object") {
    // (A decoded record's own keys, in Object.entries' order, without an array of pairs per record.)
    const rec = v as Record<string, unknown>;
    for (const k in rec) addValue(sig, rec[k], device, unitDevices, ADDRESS_FIELDS.has(k));
  }
}

/** What an unwritten record hashes as (a decoded one's first number is a field's or a list's length, far below it). */
const UNWRITTEN = Number.MAX_SAFE_INTEGER;

/** `bytes` bytes of `b` from `at` are all zero. */
function unwritten(b: Uint8Array, at: number, bytes: number): boolean {
  for (let i = at; i < at + bytes; i++) if (b[i] !== 0) return false;
  return true;
}

function addBytes(sig: Signature, b: Uint8Array): void {
  sig.add(b.length);
  for (let i = 0; i + 4 <= b.length; i += 4) sig.add(b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! * 2 ** 24));
  for (let i = b.length - (b.length % 4); i < b.length; i++) sig.add(b[i]!);
}

/** Whether `device` is one of units [from, to) of `unitDevices` ids each (every device, without `units`). */
export function inUnits(device: number, unitDevices: number, units?: { readonly from: number; readonly to: number }): boolean {
  return !units || (device >= units.from * unitDevices && device < units.to * unitDevices);
}

/** A device's program as a unit-relative hash, and the devices of other units it names, per stream of addresses. */
export interface DeviceSig {
  readonly device: number;
  readonly sig: string;
  /** Per address stream (the TopSP structures, each proxy queue, each DMA queue): the other units' devices named, in order. */
  readonly cross: readonly (readonly number[])[];
}

function deviceSignature(d: DeviceImage, unitDevices: number, queueSigs: ReadonlyMap<string, Signature>): DeviceSig {
  const sig = new Signature();
  const dev = d.device;
  for (const t of d.topsps) {
    sig.add(t.index);
    addBytes(sig, t.ctrlSpad);
    sig.add(t.slotSpad.length);
    for (const s of t.slotSpad) addBytes(sig, s);
    for (let c = 0; c < MAX_CHANNELS; c++) {
      // (A record never written, as most of the 32 are, says so in one number: decoded, it was a
      // third of signing a device.)
      if (unwritten(t.ringConfig, c * CHANNEL_CONFIG_BYTES, CHANNEL_CONFIG_BYTES)) sig.add(UNWRITTEN);
      else addValue(sig, decodeChannelConfig(t.ringConfig, c), dev, unitDevices);
    }
    for (let i = 0; i < t.meshConfig.length / MESH_EVENT_BYTES; i++) addValue(sig, decodeMeshEvent(t.meshConfig, i), dev, unitDevices);
    for (let i = 0; i < t.barrierConfig.length / BARRIER_CONFIG_BYTES; i++) addValue(sig, decodeBarrierConfig(t.barrierConfig, i), dev, unitDevices);
    addValue(sig, t.reportOps ?? [], dev, unitDevices);
  }
  const cross: (readonly number[])[] = [sig.cross];
  for (const q of d.queues) {
    addValue(sig, [q.engine, q.queue, q.streamed?.txCount ?? q.tx.length, q.streamed?.rxCount ?? q.rx.length], dev, unitDevices);
    const qs = queueSigs.get(`${dev}/${q.engine}/${q.queue}`);
    sig.addSignature(qs);
    cross.push(qs?.cross ?? []);
  }
  // (Semaphore numbers, not addresses: plain numbers; hashed as the list of [topsp, sema, value] triples would be, none made.)
  for (const list of [d.semaphores, d.finalSemaphores ?? []]) {
    sig.add(list.length);
    for (const s of list) {
      sig.add(3);
      sig.add(s.topsp);
      sig.add(s.sema);
      sig.add(s.value);
    }
  }
  // Constants the program copies (semaphore values); payload bytes are not the program's.
  for (const m of d.memory) addBytes(sig, m.bytes);
  for (const p of d.proxyQueues) {
    addValue(sig, [p.topsp, p.sema, p.folds ?? 1], dev, unitDevices);
    const ps = new Signature();
    for (let k = 0; k < p.fifo.length / PROXY_ENTRY_BYTES; k++) {
      const e = decodeProxyEntry(p.fifo, k);
      const remote = e.block * ADDRESS_BLOCK;
      ps.add(e.bytes);
      ps.add(e.trigger);
      ps.add(e.semaN);
      // A credit-only entry (no bytes) has no source or destination.
      if (e.bytes > 0) {
        addUnitAddress(ps, e.src, dev, unitDevices);
        addUnitAddress(ps, e.dst, remote, unitDevices, dev);
      } else {
        addUnitAddressOrNone(ps, e.src, dev, unitDevices);
        addUnitAddressOrNone(ps, e.dst, remote, unitDevices, dev);
      }
      addUnitAddress(ps, e.sema, remote, unitDevices, dev);
    }
    sig.addSignature(ps);
    cross.push(ps.cross);
  }
  return { device: dev, sig: sig.value, cross };
}

/**
 * Whether the counting image's units (`unitDevices` device ids each, the units that run something)
 * are alike (see the head of this file): undefined when they are, else the first difference, for
 * the user. Each device is signed when the comparison first needs it: units that are not alike are
 * told so at their first differing device, not after every device is signed (a two-node mesh, which
 * never folds, composes 6 % quicker).
 */
export function whyNotFold(image: ProgramImage, unitDevices: number, queueSigs: ReadonlyMap<string, Signature>, unit = "pod"): string | undefined {
  const byDevice = new Map(image.devices.map((d) => [d.device, d]));
  const signed = new Map<number, DeviceSig>();
  const sigOf = (device: number): DeviceSig => {
    let s = signed.get(device);
    if (!s) signed.set(device, (s = deviceSignature(byDevice.get(device)!, unitDevices, queueSigs)));
    return s;
  };
  return firstDifference([...byDevice.keys()], sigOf, unitDevices, unit);
}

/** The signatures of the image's devices in units [from, to) (all by default): what `whyNotFoldSigs` compares. */
export function deviceSigs(image: ProgramImage, unitDevices: number, queueSigs: ReadonlyMap<string, Signature>, units?: { readonly from: number; readonly to: number }): DeviceSig[] {
  return image.devices.filter((d) => inUnits(d.device, unitDevices, units)).map((d) => deviceSignature(d, unitDevices, queueSigs));
}

/** `whyNotFold` over device signatures (of every device that runs something, gathered from one counting pass or from several). */
export function whyNotFoldSigs(sigs: readonly DeviceSig[], unitDevices: number, unit = "pod"): string | undefined {
  const byDevice = new Map(sigs.map((s) => [s.device, s]));
  return firstDifference([...byDevice.keys()], (device) => byDevice.get(device)!, unitDevices, unit);
}

/** The first way the units of `devices` are not alike, their signatures from `sigOf` (asked in the order the checks go). */
function firstDifference(devices: readonly number[], sigOf: (device: number) => DeviceSig, unitDevices: number, unit: string): string | undefined {
  const byUnit = new Map<number, Map<number, number>>();
  for (const device of [...devices].sort((a, b) => a - b)) {
    const u = Math.floor(device / unitDevices);
    let m = byUnit.get(u);
    if (!m) byUnit.set(u, (m = new Map()));
    m.set(device % unitDevices, device);
  }
  const home = byUnit.get(0);
  if (!home || byUnit.size < 2) return `fewer than two ${unit}s run the program`;
  const units = [...byUnit.keys()].sort((a, b) => a - b);
  for (const u of units) {
    const mine = byUnit.get(u)!;
    if (mine.size !== home.size) return `${unit} ${u} runs ${mine.size} devices, ${unit} 0 ${home.size}`;
    for (const [place, device] of mine) {
      const h = home.get(place);
      const dev = u * unitDevices + place;
      if (h === undefined) return `device ${dev} of ${unit} ${u} has no counterpart in ${unit} 0`;
      if (sigOf(h).sig !== sigOf(device).sig) return `device ${dev}'s program differs from device ${place}'s (${unit} ${u} against ${unit} 0)`;
    }
  }
  // Over the units, the k-th address of each stream that names another unit names every unit once.
  const index = new Map(units.map((u, i) => [u, i]));
  const seen = new Uint8Array(units.length);
  for (const [place, device] of home) {
    const h = sigOf(device);
    for (let si = 0; si < h.cross.length; si++) {
      for (let k = 0; k < h.cross[si]!.length; k++) {
        seen.fill(0);
        for (const u of units) {
          const i = index.get(Math.floor(sigOf(byUnit.get(u)!.get(place)!).cross[si]![k]! / unitDevices));
          if (i === undefined) return `device ${u * unitDevices + place} addresses a ${unit} that runs nothing`;
          seen[i] = 1;
        }
        if (seen.includes(0)) return `the ${unit}s' devices in place ${place} send their message ${k} of stream ${si} so that some ${unit} receives it twice and another never`;
      }
    }
  }
  return undefined;
}
