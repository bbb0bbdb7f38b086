// The other half of scenarios/ of up to 256 ranks, end to end (scenarios.test.ts runs the first).
import { describe, it } from "vitest";
import { runsAndPasses, scenarioHalf } from "./scenario-files.ts";

describe("scenarios/, second half", () => {
  it.each(scenarioHalf(1))("%s runs and passes", runsAndPasses);
});
