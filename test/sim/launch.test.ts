// The runtime's fixed cost of a collective (topsp.launchPs): every TopSP starts that much later, so
// the whole run shifts by exactly that much.
import { describe, expect, it } from "vitest";
import { compileProgram } from "../../src/enc/compile.ts";
import { loadDevice, loadScenario } from "../../src/run/load.ts";
import { simulate } from "../../sim/index.ts";

describe("launch cost", () => {
  it.each(["scenarios/ring8.json", "scenarios/mesh16.json", "scenarios/hier-2x16.json"])("%s: the op ends exactly launchPs later, the same packets run", (f) => {
    const scn = loadScenario(f);
    const base = loadDevice(scn.instance);
    const run = (launchPs: number) => {
      const spec = { ...base, topsp: { ...base.topsp, launchPs } };
      return simulate(spec, compileProgram(scn, spec, [0]).image, { storePayload: false });
    };
    const a = run(0);
    const b = run(7_250_000);
    expect(b.opEndPs[0]! - a.opEndPs[0]!).toBe(7_250_000);
    expect(b.packets).toBe(a.packets);
  });
});
