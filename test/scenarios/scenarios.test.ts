// Every scenario in scenarios/ runs end to end and passes its check (half of them here, the other
// half in scenarios-b.test.ts).
import { describe, expect, it } from "vitest";
import { runsAndPasses, SCENARIO_FILES, scenarioHalf } from "./scenario-files.ts";

describe("scenarios/", () => {
  it("has scenarios, ring8 among them, and the two halves run them all", () => {
    expect(SCENARIO_FILES).toContain("ring8.json");
    expect([...scenarioHalf(0), ...scenarioHalf(1)].sort()).toEqual(SCENARIO_FILES);
  });

  it.each(scenarioHalf(0))("%s runs and passes", runsAndPasses);
});
