// The text files ccsim is given (scenarios, presets, logs, HLO modules, partials), read whole with
// a bound: a path that never ends (/dev/zero, a pipe that keeps writing) is refused once it has
// given more than any file ccsim reads could hold, not read until the process runs out of memory.
import { closeSync, fstatSync, openSync, readSync } from "node:fs";

/** Bytes a text file may have: about the longest string this runtime makes (a file past it could not be read as text anyway). */
export const MAX_TEXT_BYTES = 512 * 2 ** 20;

/** Bytes read at a time from a file whose size is not known in advance (a device, a pipe). */
const CHUNK = 1 << 20;

/** Why a file could not be read (its message): an fs error code (ENOENT, EISDIR) or what was wrong with it. */
export class TextFileError extends Error {
  override name = "TextFileError";
}

/** The file's text (UTF-8), or a TextFileError saying why not. */
export function readTextFile(file: string, limit = MAX_TEXT_BYTES): string {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch (e) {
    throw new TextFileError(codeOf(e));
  }
  try {
    const size = fstatSync(fd).size;
    if (size > limit) throw new TextFileError(tooLong(limit));
    const pieces: Buffer[] = [];
    let total = 0;
    for (;;) {
      const piece = Buffer.allocUnsafe(Math.max(CHUNK, size - total + 1));
      const n = readSync(fd, piece, 0, piece.length, null);
      if (n === 0) break;
      total += n;
      if (total > limit) throw new TextFileError(tooLong(limit));
      pieces.push(n === piece.length ? piece : piece.subarray(0, n));
    }
    return Buffer.concat(pieces, total).toString("utf8");
  } catch (e) {
    throw e instanceof TextFileError ? e : new TextFileError(codeOf(e));
  } finally {
    closeSync(fd);
  }
}

function codeOf(e: unknown): string {
  return (e as NodeJS.ErrnoException).code ?? (e as Error).message;
}

function tooLong(limit: number): string {
  return `more than ${limit / 2 ** 20} MiB, longer than any file ccsim reads (an endless stream such as /dev/zero?)`;
}
