// The tool's log: pino's JSON lines on stderr, each written as it is made. A sweep runs every
// point through the whole pipeline, so a point-independent warning (a group with no ring over
// direct links, a preset's channel count cut) came once a point; a warning or error line the same
// word for word as one already written by this command on this thread is dropped (a sweep's worker
// threads each say it once).
import pino, { type Logger } from "pino";

/** Warning-or-worse lines written so far (this command, this thread). */
const said = new Set<string>();
/** Lines remembered at most (a command that warns more, differently, is let through). */
const MAX_SAID = 4096;
/** pino's number for `warn`. */
const WARN = 40;

/** A logger at `level` onto stderr (or `sink`: tests), its repeated warnings and errors dropped. */
export function stderrLog(level: string, sink?: (line: string) => void): Logger {
  const write = sink ?? stderrSink();
  return pino(
    { level, base: null, timestamp: false },
    {
      write(line: string): void {
        const m = /^\{"level":(\d+)/.exec(line);
        if (m && Number(m[1]) >= WARN) {
          if (said.has(line)) return;
          if (said.size < MAX_SAID) said.add(line);
        }
        write(line);
      },
    },
  );
}

function stderrSink(): (line: string) => void {
  const fd = pino.destination({ dest: 2, sync: true });
  return (line) => void fd.write(line);
}

/** A new command starts: what earlier ones said may be said again. */
export function newCommandLog(): void {
  said.clear();
}
