// The cc-op stream validate pass run before scheduling (the enc_validate_and_merge_ccops analogue):
// it reads the emitted bytes back and rejects programs the device could not run to completion.
import { CompileError } from "../ir/errors.ts";
import { EncPattern } from "../ir/enums.ts";
import { decodeAddress, ENGINES_PER_SENG, semaAddr } from "./address.ts";
import { decodeSpadCtrlEntry, SPAD_CTRL_ENTRY_BYTES } from "./ccop.ts";
import { decodeChannelConfig } from "./channel.ts";
import { decodeSlotEntry, SLOT_ENTRY_BYTES, StepFlag } from "./slot.ts";
import { DESC_BYTES, decodeRx } from "./udma.ts";
import type { ProgramImage, QueueImage } from "./program.ts";

/** The device validator's message for an op that does not signal its completion. */
export const MUST_INCREMENT = "Collective instruction must increment semaphore when done";

const TP_INC_MAX = 0xfffe;

function fail(code: string, message: string, path: string, value: unknown): never {
  throw new CompileError(code, message, { path, value });
}

/** RX descriptor `i` of a queue: from its ring, or (streamed rings) the copy pinned where an op ends. */
function lastRx(q: QueueImage, i: number): { bytes: Uint8Array; offset: number } | undefined {
  if (i < 0) return undefined;
  if (q.streamed) {
    const pin = q.streamed.rxPins.get(i);
    return pin && { bytes: pin, offset: 0 };
  }
  return i < q.rx.length / DESC_BYTES ? { bytes: q.rx, offset: i * DESC_BYTES } : undefined;
}

/**
 * For every TopSP: every ring entry's channels have slot streams whose steps, summed, consume each
 * fold's rings exactly; every step's counts fit the 16-bit tp_inc fields; and every op of every
 * channel ends, on every fold, with a write to that fold's completion semaphore.
 */
export function validateCcops(image: ProgramImage): void {
  for (const d of image.devices) {
    const queues = new Map<string, QueueImage>(d.queues.map((q) => [`${q.engine}/${q.queue}`, q]));
    for (const t of d.topsps) {
      const where = `dev${d.device}.topsp${t.index}`;
      const entries = Array.from({ length: t.opNum }, (_, i) => decodeSpadCtrlEntry(t.ctrlSpad, i * SPAD_CTRL_ENTRY_BYTES));
      const channels = new Set<number>();
      entries.forEach((e, i) => {
        if (!e.ccOp) fail("CMP1601", `${where} op ${i}: header.cc_op is not set`, `${where}.ctrl[${i}]`, i);
        if (e.algoType !== EncPattern.RING) return;
        for (let c = 0; c < 32; c++) if ((e.channelList >>> c) & 1) channels.add(c);
      });
      for (const c of channels) {
        const cfg = decodeChannelConfig(t.ringConfig, c);
        const spad = t.slotSpad[cfg.spadSlotIdx] ?? new Uint8Array(0);
        const bc = decodeAddress(cfg.bcastM2sTail);
        const seng = bc.kind === "doorbell" ? bc.seng : 0;
        const queue = bc.kind === "doorbell" ? bc.queue : -1;
        const folds = [...Array(ENGINES_PER_SENG).keys()].filter((e) => (cfg.bcastMask >>> e) & 1).map((e) => seng * ENGINES_PER_SENG + e);
        const rings = folds.map((e) => queues.get(`${e}/${queue}`));
        if (rings.some((q) => !q) || folds.length !== cfg.foldN) fail("CMP1602", `${where} channel ${c}: fold_n ${cfg.foldN} but ${rings.filter(Boolean).length} DMA rings`, `${where}.channel${c}`, folds);
        const fq = rings as QueueImage[];
        const lens = fq.map((q) => [q.streamed?.txCount ?? q.tx.length / DESC_BYTES, q.streamed?.rxCount ?? q.rx.length / DESC_BYTES] as const);
        if (lens.some(([tx, rx]) => tx !== lens[0]![0] || rx !== lens[0]![1])) {
          fail("CMP1603", `${where} channel ${c}: its folds have unequal descriptor counts (${lens.map(([tx, rx]) => `${tx}/${rx}`).join(", ")})`, `${where}.channel${c}`, lens);
        }
        const compl = decodeAddress(cfg.dmaComplSema);
        if (compl.kind !== "sema") fail("CMP1605", `${MUST_INCREMENT} (${where} channel ${c} has no completion semaphore)`, `${where}.channel${c}`, cfg.dmaComplSema);
        let tx = 0;
        let rx = 0;
        let ops = 0;
        for (let o = 0; o < spad.length; o += SLOT_ENTRY_BYTES) {
          const s = decodeSlotEntry(spad, o);
          if (s.m2s > TP_INC_MAX || s.s2m > TP_INC_MAX) fail("CMP1604", `${where} channel ${c}: a step of ${s.m2s}/${s.s2m} descriptors overflows the 16-bit tp_inc counter`, `${where}.channel${c}.step${o / 8}`, s);
          tx += s.m2s * s.repeat;
          rx += s.s2m * s.repeat;
          if (s.flags & StepFlag.LAST_SYNC) {
            // The last packet of the op on each fold must increment that fold's completion semaphore.
            fq.forEach((q, f) => {
              const last = rx - 1;
              const desc = lastRx(q, last);
              const ok = desc !== undefined && decodeRx(desc.bytes, desc.offset).dst === semaAddr(d.device, t.index, compl.sema + f, "inc");
              if (!ok) fail("CMP1605", `${MUST_INCREMENT} (${where} channel ${c} fold ${f}, op ${ops})`, `${where}.channel${c}.op${ops}`, f);
            });
            ops++;
          }
        }
        if (lens[0] && (tx !== lens[0][0] || rx !== lens[0][1])) {
          fail("CMP1606", `${where} channel ${c}: the steps hand ${tx}/${rx} descriptors to rings of ${lens[0][0]}/${lens[0][1]}`, `${where}.channel${c}`, { tx, rx });
        }
        if (ops !== entries.filter((e) => (e.channelList >>> c) & 1).length) fail("CMP1607", `${where} channel ${c}: ${ops} LAST_SYNC steps for ${entries.length} ops`, `${where}.channel${c}`, ops);
      }
    }
  }
}
