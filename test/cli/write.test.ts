// Output files follow links and never replace them; a device is written in place, and a write that
// fails (no space) is an error naming the file.
import { describe, expect, it } from "vitest";
import { existsSync, lstatSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeTarget, writeWhole } from "../../src/cli/write.ts";
import { main as nccom } from "../../src/cli/nccom.ts";

const fail = (m: string) => new Error(m);

describe("writing outputs", () => {
  it("writes through a symbolic link: the link stays a link, its target gets the text", () => {
    const dir = mkdtempSync(join(tmpdir(), "ccsim-write-"));
    writeFileSync(join(dir, "real.json"), "old");
    symlinkSync("real.json", join(dir, "link.json"));
    writeWhole(join(dir, "link.json"), "new", fail);
    expect(lstatSync(join(dir, "link.json")).isSymbolicLink()).toBe(true);
    expect(readFileSync(join(dir, "real.json"), "utf8")).toBe("new");
    // A dangling link: its target is created.
    symlinkSync("later.json", join(dir, "dangling.json"));
    expect(writeTarget(join(dir, "dangling.json"))).toBe(join(dir, "later.json"));
    writeWhole(join(dir, "dangling.json"), ["a", "b"], fail);
    expect(readFileSync(join(dir, "later.json"), "utf8")).toBe("ab");
    expect(lstatSync(join(dir, "dangling.json")).isSymbolicLink()).toBe(true);
  });

  it.runIf(existsSync("/dev/full"))("a device that is full: exit 1 naming it, never a silent exit 0", () => {
    let err = "";
    const code = nccom(["allr", "-r", "8", "-b", "1K", "-e", "2K", "--report-to-json-file", "/dev/full"], () => {}, (s) => (err += s), {});
    expect(code).toBe(1);
    expect(err).toMatch(/cannot write \/dev\/full: ENOSPC/);
  });
});
