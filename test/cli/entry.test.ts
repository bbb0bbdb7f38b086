// A command's process: its exit code is main's; what main throws is the tool's fault, said as an
// internal error with exit 2 (not Node's own report, whose exit 1 would read as bad input).
import { afterEach, describe, expect, it, vi } from "vitest";
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";
import { asCommand } from "../../src/cli/entry.ts";

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
