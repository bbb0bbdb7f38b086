// The verifier: writes outside every declared region, semaphores that do not end where the image
// says they do, and rings not fully consumed fail the check (exit 3) even when the values pass.
import { describe, expect, it } from "vitest";
import { runSim } from "../run-sim.ts";
import { EXIT } from "../../src/cli/sim.ts";
import { misdirectCompletion, strayFirstWrite } from "../helpers-image.ts";

const run = runSim;

describe("the verifier", () => {
  it("a write outside every declared buffer is a stray write (exit 3)", () => {
    let where = "";
    const r = run(["scenarios/ring8.json", "--check", "none"], { mutateImage: (img, op) => void (op === 0 && (where = strayFirstWrite(img, 0))) });
    expect(where).not.toBe("");
    expect(r.code).toBe(EXIT.CHECK_FAILED);
    expect(r.err).toMatch(/check failed for all-reduce 4194304 B fp32: stray write: a \d+-byte write to dev\d+:hbm\+0x[0-9a-f]+ at \d+ ps lands outside every buffer/);
    expect(r.out).toMatch(/ring\s+fail/);
  });

  it("a semaphore that ends away from what the image declares is unbalanced (exit 3), though nothing hangs", () => {
    // The image stops declaring that device 0's completion semaphores count the op: they end at 1, not 0.
    const r = run(["scenarios/ring8.json", "--check", "none"], {
      mutateImage: (img, op) => {
        if (op !== 0) return;
        const d = img.devices.find((x) => x.device === 0)!;
        Object.assign(d, { finalSemaphores: [] });
      },
    });
    expect(r.code).toBe(EXIT.CHECK_FAILED);
    expect(r.err).toMatch(/unbalanced semaphore: dev0:topsp\d:sem4 ends at 1, not at 0/);
  });

  it("a completion increment sent to the wrong semaphore hangs the waiting core instead (exit 4)", () => {
    const r = run(["scenarios/ring8.json", "--check", "none"], { mutateImage: (img, op) => op === 0 && misdirectCompletion(img, 4, 0) });
    expect(r.code).toBe(EXIT.HANG);
    expect(r.err).toMatch(/waits on dev0:topsp0:sem4 \(dma completion\)/);
  });

  it("descriptors no step ever hands to the engine leave the ring not consumed (exit 3)", () => {
    const r = run(["scenarios/ring8.json", "--check", "none"], {
      mutateImage: (img, op) => {
        if (op !== 0) return;
        const d = img.devices.find((x) => x.device === 0)!;
        const q = d.queues[0]!;
        const grow = (b: Uint8Array) => {
          const out = new Uint8Array(b.length + 16);
          out.set(b);
          out.set(b.subarray(b.length - 16), b.length);
          return out;
        };
        Object.assign(q, { tx: grow(q.tx), rx: grow(q.rx) });
      },
    });
    expect(r.code).toBe(EXIT.CHECK_FAILED);
    expect(r.err).toMatch(/ring not consumed: dev0 dma\d+ q15: 1 tx \/ 1 rx descriptors never run/);
  });

});
