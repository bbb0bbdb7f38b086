// Tampering with emitted program images, to show the simulator catches broken programs.
import { decodeAddress, semaAddr } from "../src/encd/address.ts";
import type { ProgramImage } from "../src/encd/program.ts";
import { DESC_BYTES, decodeRx } from "../src/encd/udma.ts";

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
