// The simulator's public face: build a machine from a device spec, load a program image, run it.
export { simulate, formatHang, type SimResult, type HangReport, type SimOptions, type ResourceStat, type RunProgress, type Violation } from "./machine.ts";
export type { TraceSink } from "./trace.ts";
export type { Term } from "./verify/symbolic.ts";
export { UNKNOWN } from "./verify/symbolic.ts";
