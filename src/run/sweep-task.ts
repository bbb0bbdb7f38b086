// One sweep point, as a worker thread runs it (see parallel.ts): load the preset, run the scenario,
// hand back what the sweep reports.
import pino from "pino";
import type { Logger } from "pino";
import type { DeviceSpec, Scenario } from "../ir/spec.ts";
import { CcsimError } from "../ir/errors.ts";
import type { Explanation } from "../enc/post.ts";
import type { HangReport } from "../../sim/index.ts";
import { runScenario, type OpOutcome, type PipelineHooks } from "./pipeline.ts";

export interface SweepTask {
  readonly scenario: Scenario;
  /** The device the sweep runs on (its preset, with --launch-us applied). */
  readonly spec: DeviceSpec;
  readonly logLevel: string;
  /** Simulate every pod (--no-fold). */
  readonly unfolded: boolean;
}

export type SweepTaskResult =
  | { readonly kind: "done"; readonly outcome: OpOutcome; readonly explain: readonly Explanation[] }
  | { readonly kind: "hang"; readonly hang: HangReport }
  | { readonly kind: "error"; readonly error: { readonly name: string; readonly code: string; readonly message: string; readonly path: string; readonly value: unknown; readonly file?: string } };

/** A worker thread's entry (parallel.ts): one sweep point. */
export function task(t: SweepTask): SweepTaskResult {
  const log = pino({ level: t.logLevel, base: null, timestamp: false }, pino.destination({ dest: 2, sync: true }));
  return runPoint(t.scenario, t.spec, log, t.unfolded ? { unfolded: true } : {});
}

/** Run one point's scenario; a CcsimError comes back as data (it crosses threads), the sweep goes on. */
export function runPoint(scenario: Scenario, spec: DeviceSpec, log: Logger, hooks: PipelineHooks = {}): SweepTaskResult {
  try {
    const out = runScenario(scenario, spec, log, hooks);
    if (out.kind === "hang") return { kind: "hang", hang: out.hang };
    return { kind: "done", outcome: out.ops[0]!, explain: out.explain };
  } catch (e) {
    if (!(e instanceof CcsimError)) throw e;
    return { kind: "error", error: { name: e.name, code: e.code, message: e.message, path: e.path, value: e.value, ...(e.file !== undefined ? { file: e.file } : {}) } };
  }
}
