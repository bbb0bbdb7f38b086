// Folding a program of identical pods: when every pod's program is pod 0's up to the pod's place,
// a timing-only run needs pod 0 alone — traffic to another pod lands on pod 0's device in the same
// place, as the pod that sends to pod 0 at that moment would have it (docs/device-model.md §1,
// "Folded images").
//
// What "alike" means, checked here over the counting pass's image of every pod:
//  - each device of pod p has a device of pod 0 in the same place whose program is the same: its
//    TopSP entries, step streams, ring and mesh configs, barriers, semaphores, constants, and its
//    descriptor runs (kinds, sizes, and every address as a pod-relative place: which device of
//    which pod — own or another — and which semaphore or doorbell; HBM offsets are left out, as no
//    timing depends on them); its proxy entries alike in size, trigger and landing place;
//  - the k-th proxy entry of a place sends, over the pods, to every pod exactly once: so pod 0
//    receives, at each entry's moment, exactly one copy of what it sends itself.
import type { DeviceImage, ProgramImage } from "./image.ts";
import { ADDRESS_BLOCK, decodeAddress } from "./address.ts";
import { decodeBarrierConfig, BARRIER_CONFIG_BYTES } from "./barrier.ts";
import { decodeChannelConfig } from "./channel.ts";
import { decodeMeshEvent, MESH_EVENT_BYTES } from "./mesh.ts";
import { decodeProxyEntry, PROXY_ENTRY_BYTES } from "./proxy.ts";
import { addPodAddress, addPodAddressOrNone, Signature } from "./signature.ts";

/** Fields of the decoded device structures that hold addresses. */
const ADDRESS_FIELDS = new Set(["netIdxAddrs", "recvSema", "sendSema", "postSema", "dmaComplSema", "kringMine", "kringPeers", "bcastM2sTail", "bcastS2mTail", "m2sTail", "s2mTail", "directTrigger", "waitSema", "sema", "dmaSyncSemas", "ringBase"]);
const RING_CHANNELS = 32;

/** Hash a decoded structure: numbers as they are, address fields as pod-relative places. */
function addValue(sig: Signature, v: unknown, device: number, podDevices: number, address = false): void {
  if (typeof v === "number") return address ? addPodAddressOrNone(sig, v, device, podDevices) : sig.add(v);
  if (typeof v === "boolean") return sig.add(v ? 1 : 0);
  if (Array.isArray(v)) {
    sig.add(v.length);
    for (const x of v) addValue(sig, x, device, podDevices, address);
    return;
  }
  if (v && typeof v === "object") {
    for (const [k, x] of Object.entries(v)) addValue(sig, x, device, podDevices, ADDRESS_FIELDS.has(k));
  }
}

function addBytes(sig: Signature, b: Uint8Array): void {
  sig.add(b.length);
  for (let i = 0; i + 4 <= b.length; i += 4) sig.add(b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! * 2 ** 24));
  for (let i = b.length - (b.length % 4); i < b.length; i++) sig.add(b[i]!);
}

/** A device's program as a pod-relative hash, and where its proxy entries send (pod of each). */
function deviceSignature(d: DeviceImage, podDevices: number, queueSigs: ReadonlyMap<string, Signature>): { sig: string; targets: number[][] } {
  const sig = new Signature();
  const dev = d.device;
  for (const t of d.topsps) {
    sig.add(t.index);
    addBytes(sig, t.ctrlSpad);
    sig.add(t.slotSpad.length);
    for (const s of t.slotSpad) addBytes(sig, s);
    for (let c = 0; c < RING_CHANNELS; c++) addValue(sig, decodeChannelConfig(t.ringConfig, c), dev, podDevices);
    for (let i = 0; i < t.meshConfig.length / MESH_EVENT_BYTES; i++) addValue(sig, decodeMeshEvent(t.meshConfig, i), dev, podDevices);
    for (let i = 0; i < t.barrierConfig.length / BARRIER_CONFIG_BYTES; i++) addValue(sig, decodeBarrierConfig(t.barrierConfig, i), dev, podDevices);
    addValue(sig, t.reportOps ?? [], dev, podDevices);
  }
  for (const q of d.queues) {
    addValue(sig, [q.engine, q.queue, q.streamed?.txCount ?? q.tx.length, q.streamed?.rxCount ?? q.rx.length], dev, podDevices);
    const qs = queueSigs.get(`${dev}/${q.engine}/${q.queue}`)?.value ?? "";
    sig.add(Number.parseInt(qs.slice(0, 8) || "0", 16));
    sig.add(Number.parseInt(qs.slice(8) || "0", 16));
  }
  // (Semaphore numbers, not addresses: plain numbers.)
  for (const list of [d.semaphores, d.finalSemaphores ?? []]) addValue(sig, list.map((s) => [s.topsp, s.sema, s.value]), dev, podDevices);
  // Constants the program copies (semaphore values); payload bytes are not the program's.
  for (const m of d.memory) addBytes(sig, m.bytes);
  const targets: number[][] = [];
  for (const p of d.proxyQueues) {
    addValue(sig, [p.topsp, p.sema], dev, podDevices);
    const n = p.fifo.length / PROXY_ENTRY_BYTES;
    const to: number[] = [];
    for (let k = 0; k < n; k++) {
      const e = decodeProxyEntry(p.fifo, k);
      const remote = e.block * ADDRESS_BLOCK;
      sig.add(e.bytes);
      sig.add(e.trigger);
      sig.add(e.semaN);
      // A credit-only entry (no bytes) has no source or destination.
      const data = e.bytes > 0 ? addPodAddress : addPodAddressOrNone;
      data(sig, e.src, dev, podDevices);
      // The landing place in the remote pod; which pod it is goes to the permutation check.
      data(sig, e.dst, remote, podDevices, dev);
      addPodAddress(sig, e.sema, remote, podDevices, dev);
      to.push(Math.floor(decodeAddress(e.sema, remote).device / podDevices));
    }
    targets.push(to);
  }
  return { sig: sig.value, targets };
}

/**
 * Whether the counting image's pods are alike (see the head of this file): undefined when they
 * are, else the first difference, for the user.
 */
export function whyNotFold(image: ProgramImage, podDevices: number, queueSigs: ReadonlyMap<string, Signature>): string | undefined {
  const pods = Math.ceil((Math.max(...image.devices.map((d) => d.device)) + 1) / podDevices);
  const home = new Map<number, { sig: string; targets: number[][] }>();
  const byPod: Map<number, { sig: string; targets: number[][] }>[] = Array.from({ length: pods }, () => new Map());
  for (const d of image.devices) {
    const s = deviceSignature(d, podDevices, queueSigs);
    byPod[Math.floor(d.device / podDevices)]!.set(d.device % podDevices, s);
    if (d.device < podDevices) home.set(d.device, s);
  }
  for (let p = 1; p < pods; p++) {
    const mine = byPod[p]!;
    if (mine.size !== home.size) return `pod ${p} runs ${mine.size} devices, pod 0 ${home.size}`;
    for (const [place, s] of mine) {
      const h = home.get(place);
      if (!h) return `device ${p * podDevices + place} of pod ${p} has no counterpart in pod 0`;
      if (h.sig !== s.sig) return `device ${p * podDevices + place}'s program differs from device ${place}'s (pod ${p} against pod 0)`;
    }
  }
  // Each proxy entry of a place sends to every pod exactly once over the pods.
  const seen = new Uint8Array(pods);
  for (const [place, h] of home) {
    for (let qi = 0; qi < h.targets.length; qi++) {
      for (let k = 0; k < h.targets[qi]!.length; k++) {
        seen.fill(0);
        for (let p = 0; p < pods; p++) seen[byPod[p]!.get(place)!.targets[qi]![k]!] = 1;
        if (seen.includes(0)) return `proxy entry ${k} of queue ${qi} on device ${place}: over the pods, some pod receives it twice and another never`;
      }
    }
  }
  return undefined;
}
