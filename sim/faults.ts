// Injected faults (a scenario's "faults"): links slowed or cut before the run, waits dropped from a
// device's step entries, engines stalled, and the devices they name checked against the program.
import type { DeviceSpec, Fault } from "../src/ir/spec.ts";
import { Resource } from "./kernel/kernel.ts";
import type { DeviceImage } from "../src/encd/image.ts";
import { decodeSlotEntry, packSlotEntry, SLOT_ENTRY_BYTES, StepFlag } from "../src/encd/slot.ts";
import type { Fabric } from "./hw/fabric.ts";
import type { DeviceModel } from "./image-loader.ts";

/** Reports a fault the machine or the program does not have (SIM1601). */
export type FaultError = (i: number, message: string) => never;

/** Slow or cut the links the faults name (before anything runs). */
export function linkFaults(fabric: Fabric, spec: DeviceSpec, faults: readonly Fault[], notes: string[], faultError: FaultError): void {
  faults.forEach((f, i) => {
    if (f.kind !== "link-down" && f.kind !== "link-slow") return;
    const key = `${f.from}>${f.to}`;
    const link = fabric.links.get(key) ?? faultError(i, `there is no link from device ${f.from} to device ${f.to} on ${spec.name}`);
    if (f.kind === "link-down") {
      link.downAt = Math.round(f.atUs * 1e6);
      fabric.linksDown = true;
    } else {
      fabric.links.set(key, new Resource(link.name, link.rate / f.factor));
      notes.push(`${link.name} slowed by ${f.factor} (fault)`);
    }
  });
}

/** Faults on loaded devices: the device a lost increment or dropped wait names must run something; an engine stall takes effect. */
export function deviceFaults(devices: ReadonlyMap<number, DeviceModel>, faults: readonly Fault[], notes: string[], faultError: FaultError): void {
  faults.forEach((f, i) => {
    if (f.kind === "lost-increment" || f.kind === "drop-wait") {
      if (!devices.has(f.device)) faultError(i, `device ${f.device} runs nothing in this program`);
    }
    if (f.kind !== "engine-stall") return;
    const e = devices.get(f.device)?.engines.get(f.engine) ?? faultError(i, `dev${f.device} has no DMA engine ${f.engine} in this program`);
    const at = Math.round(f.atUs * 1e6);
    e.stalls.push([at, at + Math.round(f.forUs * 1e6)]);
    notes.push(`dev${f.device} dma${f.engine} stalled from ${f.atUs} us for ${f.forUs} us (fault)`);
  });
}

/**
 * The drop-wait faults of one device: clear the wait flags of its K-th waiting step entry (TopSPs
 * in index order, slot scratchpads in order) — a composer that forgot a wait.
 */
export function dropWaits(di: DeviceImage, faults: readonly Fault[], notes: string[]): DeviceImage {
  const mine = faults.filter((f): f is Extract<Fault, { kind: "drop-wait" }> => f.kind === "drop-wait" && f.device === di.device);
  if (mine.length === 0) return di;
  const topsps = di.topsps.map((t) => ({ ...t, slotSpad: t.slotSpad.map((s) => s.slice()) }));
  for (const f of mine) {
    let n = 0;
    found: for (const t of topsps) {
      for (const [k, spad] of t.slotSpad.entries()) {
        for (let o = 0; o + SLOT_ENTRY_BYTES <= spad.length; o += SLOT_ENTRY_BYTES) {
          const e = decodeSlotEntry(spad, o);
          if (!(e.flags & (StepFlag.WAIT_RECV | StepFlag.WAIT_CREDIT))) continue;
          if (++n === f.nth) {
            packSlotEntry({ ...e, flags: e.flags & ~(StepFlag.WAIT_RECV | StepFlag.WAIT_CREDIT) }, spad, o);
            notes.push(`dev${di.device} topsp${t.index} slot ${k} step entry ${o / SLOT_ENTRY_BYTES}: its wait dropped (fault)`);
            break found;
          }
        }
      }
    }
  }
  return { ...di, topsps };
}
