// Text inputs are read whole, with a bound: an endless path is refused, not read until memory runs out.
import { describe, expect, it } from "vitest";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readTextFile, TextFileError, MAX_TEXT_BYTES } from "../../src/scenario/text-file.ts";

const reason = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(TextFileError);
    return (e as TextFileError).message;
  }
  throw new Error("read");
};

describe("readTextFile", () => {
  const dir = mkdtempSync(join(tmpdir(), "ccsim-text-"));

  it("reads a file whole, as UTF-8, across many reads", () => {
    const text = "é".repeat(1_500_000) + "\n";
    writeFileSync(join(dir, "big.txt"), text);
    expect(readTextFile(join(dir, "big.txt"))).toBe(text);
    writeFileSync(join(dir, "empty.txt"), "");
    expect(readTextFile(join(dir, "empty.txt"))).toBe("");
  });

  it("a file longer than the bound is refused by its size, before it is read", () => {
    writeFileSync(join(dir, "long.txt"), "x".repeat(3000));
    expect(reason(() => readTextFile(join(dir, "long.txt"), 2048))).toMatch(/^more than .* MiB, longer than any file ccsim reads/);
    expect(MAX_TEXT_BYTES).toBe(512 * 2 ** 20);
  });

  it.skipIf(!existsSync("/dev/zero"))("an endless stream is refused once it has given more than the bound", () => {
    expect(reason(() => readTextFile("/dev/zero", 4 * 2 ** 20))).toMatch(/an endless stream such as \/dev\/zero\?/);
  });

  it("a folder, a missing file: the system's code", () => {
    expect(reason(() => readTextFile(dir))).toBe("EISDIR");
    expect(reason(() => readTextFile(join(dir, "nothing.json")))).toBe("ENOENT");
  });
});
