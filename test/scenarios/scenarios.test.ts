// Every scenario in scenarios/ runs end to end and passes its check (half of those of up to 256
// ranks here, the other half in scenarios-b.test.ts, the bigger ones in scenarios-big.test.ts).
import { describe, expect, it } from "vitest";
import { BIG_SCENARIOS, runsAndPasses, SCENARIO_FILES, scenarioHalf } from "./scenario-files.ts";

describe("scenarios/", () => {
  it("has scenarios, ring8 among them, and the three files run them all", () => {
    expect(SCENARIO_FILES).toContain("ring8.json");
    expect(BIG_SCENARIOS.length).toBeGreaterThan(0);
    expect([...scenarioHalf(0), ...scenarioHalf(1), ...BIG_SCENARIOS].sort()).toEqual(SCENARIO_FILES);
  });

  it.each(scenarioHalf(0))("%s runs and passes", runsAndPasses);
});
