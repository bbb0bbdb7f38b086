// The simulator's public face: build a machine from a device spec, load a program image, run it.
export { simulate, formatHang, type SimResult, type HangReport, type SimOptions, type ResourceStat } from "./machine.ts";
export type { TraceSink } from "./trace.ts";
