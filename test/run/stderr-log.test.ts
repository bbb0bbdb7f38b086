import { describe, expect, it } from "vitest";
import { newCommandLog, stderrLog } from "../../src/run/stderr-log.ts";

describe("the log on stderr", () => {
  it("writes a warning or error said again word for word once a command, and every other line", () => {
    newCommandLog();
    const lines: string[] = [];
    const sink = (l: string): void => void lines.push(l);
    // Two loggers stand for two sweep points of one command.
    for (const log of [stderrLog("info", sink), stderrLog("info", sink)]) {
      log.warn({ group: [0, 3, 5] }, "no ring over direct links for this group");
      log.error({ op: 1 }, "an error");
      log.info({ op: 0 }, "compiled");
    }
    stderrLog("info", sink).warn({ group: [0, 2] }, "no ring over direct links for this group");
    expect(lines.map((l) => JSON.parse(l) as { level: number; msg: string })).toEqual([
      { level: 40, group: [0, 3, 5], msg: "no ring over direct links for this group" },
      { level: 50, op: 1, msg: "an error" },
      { level: 30, op: 0, msg: "compiled" },
      { level: 30, op: 0, msg: "compiled" },
      { level: 40, group: [0, 2], msg: "no ring over direct links for this group" },
    ]);
    // The next command says it again.
    newCommandLog();
    stderrLog("warn", sink).warn({ group: [0, 3, 5] }, "no ring over direct links for this group");
    expect(lines).toHaveLength(6);
  });
});
