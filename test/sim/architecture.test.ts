// The architecture rules (.dependency-cruiser.cjs) hold on the project, and they catch what they
// forbid: a fixture tree with one import of each kind the rules refuse.
import { spawnSync } from "node:child_process";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");
const BIN = resolve(ROOT, "node_modules/.bin/depcruise");
const CONFIG = resolve(ROOT, ".dependency-cruiser.cjs");

function cruise(cwd: string): { status: number | null; out: string } {
  const r = spawnSync(BIN, ["src", "sim", "--config", CONFIG, "--output-type", "err"], { cwd, encoding: "utf8" });
  return { status: r.status, out: r.stdout + r.stderr };
}

describe("architecture rules", () => {
  it("the project keeps them: no import circle, no layer reaching up, sim/ reading only bytes and the preset", () => {
    const r = cruise(ROOT);
    expect(r.out).toMatch(/no dependency violations found/);
    expect(r.status).toBe(0);
  });

  it("they refuse what they forbid (a fixture tree breaking each rule once)", () => {
    const r = cruise(resolve(ROOT, "test/fixtures/arch"));
    expect(r.status).not.toBe(0);
    for (const rule of ["sim-reads-images: sim/machine.ts → src/encd/program.ts", "sim-reads-bytes: sim/machine.ts → src/enc/post.ts", "runner-below-commands: src/run/load.ts → src/cli/sim.ts", "cli-is-a-shell: src/run/load.ts → src/cli/sim.ts", "formats-below-composer: src/encd/bits.ts → src/enc/post.ts", "no-circular: src/enc/post.ts"]) {
      expect(r.out).toContain(rule);
    }
  });
});
