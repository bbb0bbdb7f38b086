// The simulator may only see emitted bytes: sim/ must not import the composer (src/enc).
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p) : p.endsWith(".ts") ? [p] : [];
  });
}

const imports = (file: string): string[] => [...readFileSync(file, "utf8").matchAll(/from\s+["']([^"']+)["']/g)].map((m) => m[1]!);

describe("layering", () => {
  it("sim/ imports only src/ir and src/encd (decoders), never src/enc or later stages", () => {
    const bad: string[] = [];
    for (const f of files("sim")) {
      for (const i of imports(f)) {
        if (i.startsWith(".") && /src\/(?!ir\/|encd\/)/.test(i)) bad.push(`${f}: ${i}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it("sim/ reads program images, never the builder that writes them (src/encd/program.ts)", () => {
    const bad = files("sim").flatMap((f) => imports(f).filter((i) => /encd\/program\.ts$/.test(i)).map((i) => `${f}: ${i}`));
    expect(bad).toEqual([]);
  });

  it("src/encd does not import the composer, and src/ir imports nothing outside itself", () => {
    const bad = [
      ...files("src/encd").flatMap((f) => imports(f).filter((i) => /\/enc\//.test(i)).map((i) => `${f}: ${i}`)),
      ...files("src/ir").flatMap((f) => imports(f).filter((i) => i.startsWith("..")).map((i) => `${f}: ${i}`)),
    ];
    expect(bad).toEqual([]);
  });

  it("the check finds a forbidden import when there is one", () => {
    expect(/src\/(?!ir\/|encd\/)/.test("../../src/enc/compile.ts")).toBe(true);
    expect(/src\/(?!ir\/|encd\/)/.test("../../src/encd/udma.ts")).toBe(false);
  });
});
