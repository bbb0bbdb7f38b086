// The scenarios of more than 256 ranks, end to end (scenarios.test.ts runs the rest, in halves with scenarios-b.test.ts).
import { describe, it } from "vitest";
import { BIG_SCENARIOS, runsAndPasses } from "./scenario-files.ts";

describe("scenarios/ of more than 256 ranks", () => {
  it.each(BIG_SCENARIOS)("%s runs and passes", runsAndPasses);
});
