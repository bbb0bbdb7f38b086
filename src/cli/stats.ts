// --stats: what each op did to the links, DMA engines and HBM.
import type { OpOutcome } from "../run/pipeline.ts";

const pct = (busy: number, t: number): string => (t > 0 ? `${((100 * busy) / t).toFixed(1)}%` : "-");

export function formatStats(ops: readonly OpOutcome[]): string {
  const lines: string[] = [];
  for (const o of ops) {
    const { timePs, links, engines, hbm } = o.stats;
    const r = o.row;
    lines.push(`stats: ${r.op} ${r.bytes} B ${r.dtype} (${(timePs / 1e6).toFixed(2)} us)`);
    const f = o.folding;
    if (f?.folded) lines.push(`  pod 0 of ${f.pods} alike pods ran (folded): its links, NIC, engines and HBM below; every other pod's are alike (--no-fold lists them all)`);
    const used = links.filter((l) => l.bytes > 0).sort((a, b) => b.busyPs - a.busyPs || a.name.localeCompare(b.name));
    const top = used[0];
    lines.push(top ? `  busiest link: ${top.name}, ${top.bytes} B, busy ${pct(top.busyPs, timePs)}` : "  no link traffic");
    lines.push(`  links used: ${used.length} of ${links.length} directions`);
    for (const l of used) lines.push(`    ${l.name.padEnd(14)} ${String(l.bytes).padStart(12)} B  busy ${pct(l.busyPs, timePs).padStart(6)}`);
    const busyEngines = engines.filter((e) => e.busyPs > 0 || e.bytes > 0);
    lines.push(`  DMA engines: ${busyEngines.length}, busiest ${pct(Math.max(0, ...busyEngines.map((e) => e.busyPs)), timePs)}, mean ${pct(busyEngines.reduce((n, e) => n + e.busyPs, 0) / (busyEngines.length || 1), timePs)}`);
    for (const e of busyEngines) lines.push(`    ${e.name.padEnd(14)} ${String(e.bytes).padStart(12)} B  busy ${pct(e.busyPs, timePs).padStart(6)}`);
    lines.push("  HBM per device:");
    for (const h of hbm) lines.push(`    ${h.name.padEnd(14)} ${String(h.bytes).padStart(12)} B  busy ${pct(h.busyPs, timePs).padStart(6)}`);
  }
  return lines.join("\n") + "\n";
}
