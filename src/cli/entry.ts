// How a command line starts: only when its module is the process's entry (tests import main), and
// in the folder the user typed it in — npm runs a script in the project's folder and says where
// the user was in INIT_CWD, so a relative path on the command line is the user's, as with any tool.
// What it says goes to standard output and error as it says it; what it throws is an internal error.
import { basename, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { writeSync } from "node:fs";

export interface CommandOptions {
  /**
   * The command's standard output is the whole of what it does (a listing: no verdict, file or
   * exit code comes after it), so a reader that goes away ends it at once (`npm run disasm --
   * big.json | head` listed a 1 GiB op for seconds into nothing). Other commands run on after
   * their reader has gone: what they say after their table (a failed check) and their exit code
   * still count.
   */
  readonly outputOnly?: boolean;
}

/**
 * Run `main` with the process's arguments if `moduleUrl` is the entry module; its exit code is the
 * process's. What `main` throws (it answers every input it can name with a message and exit 1) is
 * the tool's own fault: said as an internal error, exit 2.
 */
export function asCommand(moduleUrl: string, main: (argv: readonly string[], out: (s: string) => void, err: (s: string) => void) => number, options: CommandOptions = {}): void {
  const self = fileURLToPath(moduleUrl);
  if (process.argv[1] === undefined || resolve(process.argv[1]) !== self) return;
  const file = basename(self).replace(/\.[jt]s$/, "");
  // (As the commands name themselves in their messages.)
  const name = file === "sim" ? "ccsim" : file === "disasm" ? "ccsim disasm" : file;
  const from = process.env["INIT_CWD"];
  if (from !== undefined && from !== "" && resolve(from) !== process.cwd()) {
    try {
      process.chdir(from);
    } catch (e) {
      // (The folder npm was run from has gone since, or the variable was set by hand.)
      process.stderr.write(`${name}: cannot work from INIT_CWD ${JSON.stringify(from)}, the folder npm was run from (relative paths are read from there): ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}\n`);
      process.exitCode = 1;
      return;
    }
  }
  listingOnly = options.outputOnly === true;
  process.stdout.on("error", (e) => unwritable(name, "standard output", e));
  process.stderr.on("error", () => {});
  try {
    process.exitCode = main(process.argv.slice(2), writer(1, name), writer(2, name));
  } catch (e) {
    process.stderr.write(`${name}: internal error: ${(e as Error)?.stack ?? String(e)}\n`);
    process.exitCode = 2;
  }
}

/** The command's standard output is all it does (`CommandOptions.outputOnly`). */
let listingOnly = false;

/** The reader of standard output has gone (`| head`: EPIPE): it wants no more (`CommandOptions.outputOnly`). */
function readerGone(): void {
  if (listingOnly) process.exit(typeof process.exitCode === "number" ? process.exitCode : 0);
}

/**
 * Standard output could not be written (by `writer`, or by a write that went around it through the
 * process's stream). A reader that has gone is `readerGone`'s. Anything else (a full disk, EIO) is
 * said on standard error where it still can be, exit 1. (Standard error that cannot be written is
 * let be.)
 */
function unwritable(name: string, what: string, e: NodeJS.ErrnoException): void {
  if (e.code === "EPIPE") return readerGone();
  try {
    writeSync(2, `${name}: cannot write ${what}: ${e.code ?? e.message}\n`);
  } catch {
    // (Nowhere left to say it.)
  }
  process.exit(1);
}

/**
 * Control characters a file or flag put in a message (a scenario named "\x1b[2J" cleared the
 * terminal it was named on) shown as escapes, as JSON writes them; line breaks, tabs and the
 * progress line's own return and clear-to-end stay.
 */
export function visible(s: string): string {
  return CONTROL.test(s) ? s.replace(CONTROL_ALL, (c) => (c === "\x1b[K" ? c : `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)) : s;
}
const CONTROL = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]/;
const CONTROL_ALL = /\x1b\[K|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]/g;

/** A millisecond's pause (a pipe that is full for now). */
const PAUSE = new Int32Array(new SharedArrayBuffer(4));

/**
 * Standard output (1) or error (2) written at once, as a command says it: not queued behind a
 * slow reader (a 634 MB listing piped to one was held in memory until the process ran out of it).
 * A reader that has gone (EPIPE), or standard error that cannot be written at all, gets nothing
 * more: a gone reader of standard output is `readerGone`'s, and standard error's failures leave the
 * command to run on. Standard output that fails otherwise is `unwritable`'s.
 */
function writer(fd: 1 | 2, name: string): (s: string) => void {
  let gone = false;
  // (What a person reads: standard error, and standard output on a terminal.)
  const shown = fd === 2 || process.stdout.isTTY === true;
  return (s) => {
    if (gone || s.length === 0) return;
    const bytes = Buffer.from(shown ? visible(s) : s, "utf8");
    for (let at = 0; at < bytes.length; ) {
      try {
        at += writeSync(fd, bytes, at, bytes.length - at);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === "EAGAIN") Atomics.wait(PAUSE, 0, 0, 1);
        else if (code === "EPIPE" || fd === 2) {
          // (Standard error that cannot be written, `2>/dev/full`, says nothing more: the command's output is not its.)
          gone = true;
          if (fd === 1) readerGone();
          return;
        } else unwritable(name, "standard output", e as NodeJS.ErrnoException);
      }
    }
  };
}
