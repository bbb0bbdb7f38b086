// `npm run sim` in-process: its exit code and what it printed.
import { main } from "../src/cli/sim.ts";
import type { PipelineHooks } from "../src/run/pipeline.ts";

export function runSim(args: readonly string[], hooks: PipelineHooks = {}): { code: number; out: string; err: string } {
  let out = "";
  let err = "";
  const code = main([...args], (s) => (out += s), (s) => (err += s), hooks);
  return { code, out, err };
}
