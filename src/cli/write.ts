// Output files: written whole or not at all, and never in place of what the path points through.
// A symbolic link is followed (its target is written; the link stays a link); a path that is not a
// regular file (a terminal, a pipe, /dev/stdout, /dev/full) is written in place, since a device
// cannot be renamed over, and an error writing it (no space) is said.
import { closeSync, lstatSync, openSync, readlinkSync, realpathSync, renameSync, statSync, unlinkSync, writeFileSync, writeSync } from "node:fs";
import { dirname, resolve } from "node:path";

/** Where writing `file` lands: the final target of its links (dangling ones included). */
export function writeTarget(file: string): string {
  let path = resolve(file);
  for (let hops = 0; hops < 40; hops++) {
    let st;
    try {
      st = lstatSync(path);
    } catch {
      return path; // a new file (or the end of a dangling link)
    }
    if (!st.isSymbolicLink()) return path;
    try {
      return realpathSync(path);
    } catch {
      path = resolve(dirname(path), readlinkSync(path));
    }
  }
  return path;
}

function isRegularOrAbsent(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return true;
  }
}

/** Write `text` (a string, or pieces one after another) to `file` whole or not at all; errors say the file and why. */
export function writeWhole(file: string, text: string | Iterable<string>, fail: (message: string) => Error): void {
  const target = writeTarget(file);
  const pieces = typeof text === "string" ? [text] : text;
  if (!isRegularOrAbsent(target)) {
    // A device or pipe: written in place.
    let fd: number | undefined;
    try {
      fd = openSync(target, "w");
      for (const piece of pieces) writeSync(fd, piece);
    } catch (e) {
      throw fail(`cannot write ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
    return;
  }
  const tmp = `${target}.tmp-${process.pid}`;
  try {
    if (typeof text === "string") writeFileSync(tmp, text);
    else {
      const fd = openSync(tmp, "w");
      try {
        for (const piece of pieces) writeSync(fd, piece);
      } finally {
        closeSync(fd);
      }
    }
    renameSync(tmp, target);
  } catch (e) {
    try {
      unlinkSync(tmp);
    } catch {
      // nothing was written
    }
    throw fail(`cannot write ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}
