// Every scenario in scenarios/ runs end to end and passes its check.
import { readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { main } from "../../src/cli/sim.ts";

const files = readdirSync("scenarios").filter((f) => f.endsWith(".json") && !f.endsWith(".schema.json"));

describe("scenarios/", () => {
  it("has scenarios, ring8 among them", () => {
    expect(files).toContain("ring8.json");
  });

  it.each(files)("%s runs and passes", (f) => {
    let out = "";
    let err = "";
    const code = main([`scenarios/${f}`, "--json"], (s) => (out += s), (s) => (err += s));
    expect(err).toBe("");
    expect(code).toBe(0);
    const j = JSON.parse(out);
    expect(j.results.length).toBeGreaterThan(0);
    for (const r of j.results) {
      expect(r.check).toBe("pass");
      expect(r.timeUs).toBeGreaterThan(0);
    }
  });
});
