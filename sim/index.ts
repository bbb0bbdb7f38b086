// The simulator's public face: build a machine from a device spec, load a program image, run it.
export { simulate, type SimOptions, type RunProgress } from "./machine.ts";
export { formatHang, type SimResult, type HangReport, type ResourceStat, type Violation } from "./outcome.ts";
export type { TraceSink } from "./trace.ts";
export { GIVE_UP_EVENTS, type SteadyReport } from "./steady-state.ts";
export type { Term } from "./verify/symbolic-memory.ts";
export { UNKNOWN } from "./verify/symbolic-memory.ts";
