// The other half of scenarios/, end to end (scenarios.test.ts runs the first).
import { describe, it } from "vitest";
import { runsAndPasses, scenarioHalf } from "./scenario-files.ts";

describe("scenarios/, second half", () => {
  it.each(scenarioHalf(1))("%s runs and passes", runsAndPasses);
});
