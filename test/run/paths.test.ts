import { describe, expect, it } from "vitest";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { projectRoot, siblingUrl } from "../../src/run/paths.ts";

describe("a module's project and siblings", () => {
  it("the project is the nearest folder holding package.json, from the sources or a compiled copy", () => {
    expect(projectRoot(pathToFileURL(resolve("src/run/load.ts")).href)).toBe(resolve("."));
    expect(projectRoot(pathToFileURL(resolve(".build/src/run/load.js")).href)).toBe(resolve("."));
  });

  it("a sibling is named as the module naming it runs: a source, or its compiled copy", () => {
    expect(siblingUrl("file:///p/src/run/sweep.ts", "./sweep-task.ts")).toBe("file:///p/src/run/sweep-task.ts");
    expect(siblingUrl("file:///p/.build/src/run/sweep.js", "./sweep-task.ts")).toBe("file:///p/.build/src/run/sweep-task.js");
    expect(siblingUrl("file:///p/.build/src/cli/conformance.js", "../run/conformance.ts")).toBe("file:///p/.build/src/run/conformance.js");
  });
});
