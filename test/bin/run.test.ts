// The npm scripts start a command through bin/run.mjs: the compiled copy in .build/ while no source
// is newer, else the sources through tsx. The copy computes what the sources compute.
import { afterAll, describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { runnable } from "../../bin/fresh.mjs";
import { main as nccom } from "../../src/cli/nccom.ts";
import { main as conformance } from "../../src/cli/conformance.ts";

const made: string[] = [];
afterAll(() => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
});

/** A file at `path` (folders made) last modified at `s` seconds after the epoch. */
function file(path: string, s: number): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, "");
  utimesSync(path, s, s);
}

describe("bin/run.mjs", () => {
  it("runs the compiled copy while it is newer than every source and the compile's settings, else the source", () => {
    const root = mkdtempSync(join(tmpdir(), "ccsim-run-"));
    made.push(root);
    const src = join(root, "src/cli/a.ts");
    for (const f of ["src/cli/a.ts", "src/run/b.ts", "sim/hw/c.ts", "tsconfig.json", "tsconfig.build.json"]) file(join(root, f), 1000);
    file(join(root, ".build/src/cli/a.js"), 1010);
    const copy = join(root, ".build/src/cli/a.js");
    // No stamp: the compile has not finished.
    expect(runnable(root, src)).toBe(src);
    file(join(root, ".build/.stamp"), 1005);
    expect(runnable(root, src)).toBe(copy);
    // A source edited since, anywhere under src/ or sim/, or the settings: the sources run.
    for (const f of ["sim/hw/c.ts", "src/run/b.ts", "tsconfig.build.json"]) {
      file(join(root, f), 1006);
      expect(runnable(root, src), f).toBe(src);
      utimesSync(join(root, f), 1000, 1000);
    }
    expect(runnable(root, src)).toBe(copy);
    // A module the copy does not have.
    expect(runnable(root, join(root, "src/cli/new.ts"))).toBe(join(root, "src/cli/new.ts"));
  });

  it("CCSIM_FROM_SOURCES=1 runs the sources through tsx: the same output as the script's run", () => {
    const args = ["bin/run.mjs", "src/cli/sim.ts", "scenarios/ring8.json", "--json"];
    const sources = spawnSync(process.execPath, args, { encoding: "utf8", env: { ...process.env, CCSIM_FROM_SOURCES: "1" } });
    const script = spawnSync(process.execPath, args, { encoding: "utf8" });
    expect(sources.status, sources.stderr).toBe(0);
    expect(script.status, script.stderr).toBe(0);
    expect(sources.stdout).toBe(script.stdout);
    expect(JSON.parse(sources.stdout).results.length).toBeGreaterThan(0);
  });

  it("the compiled copy prints what the sources print (a sweep, conformance cases), and its worker threads run compiled modules", () => {
    // (Compiled into a folder of its own, inside the project so that its packages resolve: .build/
    // is left alone, which other tests' commands may be running.)
    const out = mkdtempSync(join(resolve("."), ".build-test-"));
    made.push(out);
    const tsc = spawnSync(join("node_modules", ".bin", "tsc"), ["-p", "tsconfig.build.json", "--outDir", out], { encoding: "utf8" });
    expect(tsc.status, tsc.stdout + tsc.stderr).toBe(0);
    const run = (cli: string, args: string[]) => spawnSync(process.execPath, [join(out, "src/cli", cli), ...args], { encoding: "utf8" });

    // 16 ranks at 128 MiB move 2 GiB: the sweep's worker threads start at once (two points, one for
    // each thread). (A worker that could not load its task module would leave every point to this
    // thread, the same output: the probe below loads the module the compiled sweep names, in a
    // worker, as they do.)
    const sweep = ["allr", "-r", "16", "-b", "64M", "-e", "128M", "-d", "fp32", "--check", "none", "-j", "2"];
    const compiled = run("nccom.js", sweep);
    expect(compiled.status, compiled.stderr).toBe(0);
    let here = "";
    expect(nccom(sweep, (s) => (here += s), () => {}, {})).toBe(0);
    expect(compiled.stdout).toBe(here);

    // A worker thread started by the compiled copy loads compiled modules: a probe module there
    // sizes a sweep with the compiled size parser, loads the task module the compiled sweep names
    // for its workers, and posts both back.
    const probe = join(out, "probe.js");
    writeFileSync(
      probe,
      `import { sweepSizes } from "./src/ir/sizes.js";
       import { siblingUrl } from "./src/run/paths.js";
       export async function probe(d) {
         const task = await import(siblingUrl(new URL("./src/run/sweep.js", import.meta.url).href, "./sweep-task.ts"));
         d.port.postMessage([sweepSizes({ min: 8, max: 64, factor: 2 }), typeof task.task]);
       }\n`,
    );
    const url = (m: string) => JSON.stringify(pathToFileURL(m).href);
    const driver = join(out, "driver.mjs");
    writeFileSync(
      driver,
      `import { MessageChannel } from "node:worker_threads";
       const { moduleWorker } = await import(${url(join(out, "src/run/parallel.js"))});
       const ch = new MessageChannel();
       moduleWorker(${url(probe)}, "probe", { port: ch.port2 }, [ch.port2]).ref();
       ch.port1.once("message", (m) => { console.log(JSON.stringify(m)); process.exit(0); });\n`,
    );
    const onWorker = spawnSync(process.execPath, [driver], { encoding: "utf8", timeout: 60_000 });
    expect(onWorker.stderr).toBe("");
    expect(onWorker.stdout.trim()).toBe('[[8,16,32,64],"function"]');

    const cases = ["--cases", "8", "--seed", "3", "-j", "2"];
    const c = run("conformance.js", cases);
    expect(c.status, c.stderr).toBe(0);
    let hereC = "";
    expect(conformance(cases, (s) => (hereC += s), () => {})).toBe(0);
    // (Its first line says the wall-clock time.)
    const body = (s: string) => s.split("\n").slice(1).join("\n");
    expect(body(c.stdout)).toBe(body(hereC));
    expect(body(hereC)).toMatch(/pass/);
  });
});
