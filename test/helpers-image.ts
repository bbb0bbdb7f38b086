// Tampering with emitted program images, to show the simulator catches broken programs; and an
// image as text, to compare two compiles byte for byte.
import { decodeAddress, semaAddr } from "../src/encd/address.ts";
import type { ProgramImage } from "../src/encd/program.ts";
import { DESC_BYTES, decodeRx } from "../src/encd/udma.ts";
import { decodeMeshEvent, MESH_EVENT_BYTES } from "../src/encd/mesh-event.ts";

/** Turn the first remote semaphore increment of `device` into a write to plain HBM (its pad word). */
export function dropFirstRemoteSemaInc(image: ProgramImage, device = 0): string {
  const d = image.devices.find((x) => x.device === device)!;
  for (const q of d.queues) {
    for (let i = 0; i < q.rx.length / DESC_BYTES; i++) {
      const r = decodeRx(q.rx, i * DESC_BYTES);
      const a = decodeAddress(r.dst);
      if (a.kind === "sema" && a.device !== device && a.window === "inc") {
        new DataView(q.rx.buffer, q.rx.byteOffset + i * DESC_BYTES).setBigUint64(8, BigInt(device * 2 ** 48 + 4), true);
        return `dev${device} dma${q.engine} rx[${i}]`;
      }
    }
  }
  throw new Error("no remote semaphore increment found");
}

/** Flip the first CCE packet of `device` from its op to MAX (a wrong result, not a hang). */
export function corruptFirstReduce(image: ProgramImage, device = 0): void {
  const d = image.devices.find((x) => x.device === device)!;
  for (const q of d.queues) {
    const v = new DataView(q.tx.buffer, q.tx.byteOffset);
    for (let i = 0; i < q.tx.length / DESC_BYTES; i++) {
      const w0 = v.getUint32(i * DESC_BYTES, true);
      if (w0 & 0x00800000) {
        const w1 = v.getUint32(i * DESC_BYTES + 4, true);
        v.setUint32(i * DESC_BYTES + 4, ((w1 & ~7) | 2) >>> 0, true);
        return;
      }
    }
  }
  throw new Error("no CCE packet found");
}

/** Move the first HBM write of `device` that lands in a payload buffer past every allocation (a stray write). */
export function strayFirstWrite(image: ProgramImage, device = 0): string {
  const d = image.devices.find((x) => x.device === device)!;
  const end = Math.max(...d.payload.map((p) => {
    const a = decodeAddress(p.addr);
    return (a.kind === "hbm" ? a.offset : 0) + p.bytes;
  }));
  for (const q of d.queues) {
    for (let i = 0; i < q.rx.length / DESC_BYTES; i++) {
      const r = decodeRx(q.rx, i * DESC_BYTES);
      const a = decodeAddress(r.dst);
      if (a.kind === "hbm" && a.offset >= 4096) {
        new DataView(q.rx.buffer, q.rx.byteOffset + i * DESC_BYTES).setBigUint64(8, BigInt(r.dst - a.offset + end + (1 << 20)), true);
        return `dev${device} dma${q.engine} rx[${i}]`;
      }
    }
  }
  throw new Error("no HBM write found");
}

/** Point the first completion-semaphore increment of `device` at an unused semaphore (an unbalanced one; nothing waits on either). */
export function misdirectCompletion(image: ProgramImage, sema: number, device = 0): void {
  const d = image.devices.find((x) => x.device === device)!;
  for (const q of d.queues) {
    for (let i = 0; i < q.rx.length / DESC_BYTES; i++) {
      const r = decodeRx(q.rx, i * DESC_BYTES);
      const a = decodeAddress(r.dst);
      if (a.kind === "sema" && a.device === device && a.window === "inc" && a.sema === sema) {
        new DataView(q.rx.buffer, q.rx.byteOffset + i * DESC_BYTES).setBigUint64(8, BigInt(semaAddr(device, a.topsp, a.sema + 200, "inc")), true);
        return;
      }
    }
  }
  throw new Error(`no increment of semaphore ${sema} found`);
}

/** The first CCE packet of `device`: its queue's tx ring and the index of its META descriptor. */
function firstCce(image: ProgramImage, device: number): { tx: Uint8Array; at: number } {
  const d = image.devices.find((x) => x.device === device)!;
  for (const q of d.queues) {
    const v = new DataView(q.tx.buffer, q.tx.byteOffset);
    for (let i = 0; i < q.tx.length / DESC_BYTES; i++) if (v.getUint32(i * DESC_BYTES, true) & 0x00800000) return { tx: q.tx, at: i };
  }
  throw new Error("no CCE packet found");
}

/** Move source `k` of the first CCE packet of `device` by `delta` bytes (a reduce from the wrong place). */
export function moveCceSource(image: ProgramImage, device: number, k: number, delta: number): void {
  const { tx, at } = firstCce(image, device);
  const v = new DataView(tx.buffer, tx.byteOffset + (at + 1 + k) * DESC_BYTES);
  v.setBigUint64(8, v.getBigUint64(8, true) + BigInt(delta), true);
}

/** Make source 1 of the first CCE packet of `device` read what source 0 reads (one contribution twice, one missing). */
export function duplicateCceSource(image: ProgramImage, device: number): void {
  const { tx, at } = firstCce(image, device);
  const v = new DataView(tx.buffer, tx.byteOffset);
  v.setBigUint64((at + 2) * DESC_BYTES + 8, v.getBigUint64((at + 1) * DESC_BYTES + 8, true), true);
}

/** Move the `nth` (from 0) HBM write of `device` that lands on another device by `delta` bytes (a wrong offset). */
export function moveRemoteWrite(image: ProgramImage, device: number, delta: number, nth = 0): void {
  const d = image.devices.find((x) => x.device === device)!;
  let n = 0;
  for (const q of d.queues) {
    for (let i = 0; i < q.rx.length / DESC_BYTES; i++) {
      const r = decodeRx(q.rx, i * DESC_BYTES);
      const a = decodeAddress(r.dst);
      if (a.kind === "hbm" && a.device !== device && n++ === nth) {
        new DataView(q.rx.buffer, q.rx.byteOffset + i * DESC_BYTES).setBigUint64(8, BigInt(r.dst + delta), true);
        return;
      }
    }
  }
  throw new Error("no remote HBM write found");
}

/** Clear the wait of the `nth` (from 0) mesh-tape event of `device` that waits and then fires DMA (a composer that forgot a wait). */
export function dropMeshWait(image: ProgramImage, device: number, nth: number): string {
  const d = image.devices.find((x) => x.device === device)!;
  let n = 0;
  for (const t of d.topsps) {
    for (let i = 0; i < t.meshConfig.length / MESH_EVENT_BYTES; i++) {
      const e = decodeMeshEvent(t.meshConfig, i);
      if (e.waitEvent && e.dmaTrigger && n++ === nth) {
        t.meshConfig[i * MESH_EVENT_BYTES + 0x4f] = 0;
        return `dev${device} topsp${t.index} event ${i}`;
      }
    }
  }
  throw new Error("no waiting mesh event found");
}

/** Every byte of an image, and the rest of it as JSON (two compiles compared whole). */
export function imageText(p: { readonly image: ProgramImage }): string {
  return JSON.stringify(p.image, (_k, v: unknown) => (v instanceof Uint8Array ? Buffer.from(v).toString("base64") : v));
}
