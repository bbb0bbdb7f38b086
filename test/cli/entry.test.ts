// A command's process: its exit code is main's; what main throws is the tool's fault, said as an
// internal error with exit 2 (not Node's own report, whose exit 1 would read as bad input).
import { afterEach, describe, expect, it, vi } from "vitest";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, openSync, closeSync, readFileSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";
import { asCommand, visible } from "../../src/cli/entry.ts";

describe("asCommand", () => {
  const argv1 = process.argv[1];
  const exitCode = process.exitCode;
  const initCwd = process.env["INIT_CWD"];
  afterEach(() => {
    process.argv[1] = argv1!;
    process.exitCode = exitCode;
    if (initCwd === undefined) delete process.env["INIT_CWD"];
    else process.env["INIT_CWD"] = initCwd;
    vi.restoreAllMocks();
  });
  const as = (name: string) => {
    const file = resolve("src/cli", name);
    process.argv[1] = file;
    // (npm's INIT_CWD would move this process to the folder npm was called from.)
    delete process.env["INIT_CWD"];
    return pathToFileURL(file).href;
  };

  it("an exception out of main is an internal error, exit 2, named by the command", () => {
    const written: string[] = [];
    vi.spyOn(process.stderr, "write").mockImplementation((s: string | Uint8Array) => (written.push(String(s)), true));
    asCommand(as("replay.ts"), () => {
      throw new RangeError("Maximum call stack size exceeded");
    });
    expect(process.exitCode).toBe(2);
    expect(written.join("")).toMatch(/^replay: internal error: RangeError: Maximum call stack size exceeded/);
  });

  it("an INIT_CWD that is no folder (gone since npm was called there) is said, exit 1, before main runs", () => {
    const written: string[] = [];
    vi.spyOn(process.stderr, "write").mockImplementation((s: string | Uint8Array) => (written.push(String(s)), true));
    const url = as("sim.ts");
    process.env["INIT_CWD"] = resolve("no-such-folder-here");
    const cwd = process.cwd();
    let ran = false;
    asCommand(url, () => ((ran = true), 0));
    expect(ran).toBe(false);
    expect(process.cwd()).toBe(cwd);
    expect(process.exitCode).toBe(1);
    expect(written.join("")).toMatch(/^ccsim: cannot work from INIT_CWD ".*no-such-folder-here", the folder npm was run from \(relative paths are read from there\): ENOENT\n$/);
  });

  it("main's own exit code otherwise; a module that is not the process's entry runs nothing", () => {
    asCommand(as("merge.ts"), () => 3);
    expect(process.exitCode).toBe(3);
    process.exitCode = 0;
    let ran = false;
    asCommand(pathToFileURL(resolve("src/cli/sim.ts")).href, () => ((ran = true), 1));
    expect(ran).toBe(false);
    expect(process.exitCode).toBe(0);
  });
});

describe("control characters a file or flag puts in a message", () => {
  it("are shown as escapes; line breaks, tabs and the progress line's return and clear-to-end stay", () => {
    expect(visible("evil\x1b[2Jname\x07\x00\x9b1m")).toBe("evil\\u001b[2Jname\\u0007\\u0000\\u009b1m");
    expect(visible("\rring8: 12.0 % run\x1b[K")).toBe("\rring8: 12.0 % run\x1b[K");
    expect(visible("a\tb\nc, ünïcode ✓")).toBe("a\tb\nc, ünïcode ✓");
  });

  it("on standard error, as a process: a path that would clear the terminal is named in escapes", () => {
    const r = spawnSync(process.execPath, [...(JSON.parse(readFileSync("package.json", "utf8")) as { scripts: Record<string, string> }).scripts["sim"]!.split(" ").slice(1), "no\x1b[2Jsuch.json"], { encoding: "utf8" });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe("ccsim: no\\u001b[2Jsuch.json: cannot read file: ENOENT [SCN1000]\n");
  });
});

describe("standard output that cannot be written, as a process", () => {
  // What `npm run X` runs: the package's script, its `node` this process's.
  const script = (name: string): string[] => (JSON.parse(readFileSync("package.json", "utf8")) as { scripts: Record<string, string> }).scripts[name]!.split(" ").slice(1);

  it("a reader that goes away (| head) stops the command quietly, exit 0", async () => {
    const child = spawn(process.execPath, [...script("disasm"), "scenarios/ring8.json"], { stdio: ["ignore", "pipe", "pipe"] });
    let err = "";
    child.stderr.on("data", (d: Buffer) => (err += String(d)));
    // (The listing is far longer than a pipe holds: the command is still writing when its reader closes.)
    child.stdout.once("data", () => child.stdout.destroy());
    const code = await new Promise<number | null>((done) => child.on("close", done));
    expect(err).toBe("");
    expect(code).toBe(0);
  });

  it("a command whose verdict comes after its table runs on when its reader goes: the refusal said, exit 1", async () => {
    // (Only a listing, whose output is all it does, ends with its reader: disasm.)
    const child = spawn(process.execPath, [...script("sim"), "scenarios/ring8.json", "-b", "1K", "-e", "4K", "--op", "all-to-all"], { stdio: ["ignore", "pipe", "pipe"] });
    let err = "";
    child.stderr.on("data", (d: Buffer) => (err += String(d)));
    child.stdout.destroy();
    const code = await new Promise<number | null>((done) => child.on("close", done));
    expect(err).toMatch(/^ccsim: scenarios\/ring8\.json: ops\[0\]\.op: alltoall cannot be supported without Mesh algorithm.*\(3 sweep points\)$/m);
    expect(code).toBe(1);
  });

  it("a reader slower than the command gets every byte (written as said, not queued in memory)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ccsim-slow-"));
    const scn = JSON.parse(readFileSync("scenarios/ring8.json", "utf8")) as { ops: unknown[] };
    scn.ops = [{ op: "all-reduce", bytes: 16 * 2 ** 20, dtype: "fp32", reduce: "sum" }];
    writeFileSync(join(dir, "r8.json"), JSON.stringify(scn));
    const args = [...script("disasm"), join(dir, "r8.json")];
    const whole = spawnSync(process.execPath, args, { maxBuffer: 2 ** 30 });
    expect(whole.status).toBe(0);
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
    let err = "";
    child.stderr.on("data", (d: Buffer) => (err += String(d)));
    let got = 0;
    // (Not read for a while: the pipe fills and the command must wait for its reader.)
    child.stdout.pause();
    setTimeout(() => child.stdout.resume(), 500);
    child.stdout.on("data", (d: Buffer) => (got += d.length));
    const code = await new Promise<number | null>((done) => child.on("close", done));
    expect(err).toBe("");
    expect(code).toBe(0);
    expect(got).toBe(whole.stdout.length);
    expect(got).toBeGreaterThan(2 ** 20);
  });

  it.skipIf(!existsSync("/dev/full"))("a full disk is said on standard error, exit 1, no stack", () => {
    const full = openSync("/dev/full", "w");
    try {
      const r = spawnSync(process.execPath, [...script("nccom"), "allr", "-r", "8", "-b", "8", "-e", "64K"], { stdio: ["ignore", full, "pipe"], encoding: "utf8" });
      expect(r.status).toBe(1);
      expect(r.stderr).toMatch(/^nccom: cannot write standard output: ENOSPC$/m);
      expect(r.stderr).not.toMatch(/\n\s+at /);
      // Standard error on a full disk: the command's output is not its, and goes on whole.
      const quiet = spawnSync(process.execPath, [...script("nccom"), "allr", "-r", "8", "-b", "8", "-e", "64K"], { stdio: ["ignore", "pipe", full], encoding: "utf8" });
      expect(quiet.status).toBe(0);
      expect(quiet.stdout).toMatch(/^\s*65536\s/m);
    } finally {
      closeSync(full);
    }
  });
});
