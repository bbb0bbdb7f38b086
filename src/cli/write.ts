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
  // (A device or pipe is judged by the path as given: /dev/stdout on a pipe links to "pipe:[N]", no path to follow.)
  const special = !isRegularOrAbsent(file);
  const target = special ? file : writeTarget(file);
  const pieces = typeof text === "string" ? [text] : text;
  if (special || !isRegularOrAbsent(target)) {
    // A device or pipe: written in place. This process's own descriptors (/dev/stdout, /dev/fd/N)
    // are written as they are: a socket (a parent's pipe) cannot be opened again by its path.
    const own = /^\/(?:dev\/(?:(stdout)|(stderr)|fd\/(\d+))|proc\/self\/fd\/(\d+))$/.exec(file);
    const given = own ? (own[1] ? 1 : own[2] ? 2 : Number(own[3] ?? own[4])) : undefined;
    let fd: number | undefined;
    try {
      fd = given ?? openSync(target, "w");
      for (const piece of pieces) writeSync(fd, piece);
    } catch (e) {
      throw fail(`cannot write ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    } finally {
      if (fd !== undefined && given === undefined) closeSync(fd);
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

/** Whether paths `a` and `b` name one file (through links, and hard links of an existing file). */
function sameFile(a: string, b: string): boolean {
  const ta = writeTarget(a);
  const tb = writeTarget(b);
  if (ta === tb) return true;
  try {
    const sa = statSync(ta);
    const sb = statSync(tb);
    return sa.ino === sb.ino && sa.dev === sb.dev;
  } catch {
    return false;
  }
}

/**
 * Before a command runs: none of its output files (flag, path) is a file it reads, nor named by two
 * of its flags; else `fail`'s error, and nothing is run or written. (A fit's `--out` over its own
 * `--from` log wrote the preset over the measurements.)
 */
export function refuseOverwrite(outputs: readonly (readonly [flag: string, file: string | undefined])[], inputs: readonly (readonly [what: string, file: string | undefined])[], fail: (message: string) => Error): void {
  const outs = outputs.filter((o): o is readonly [string, string] => o[1] !== undefined && isRegularOrAbsent(o[1]) && isRegularOrAbsent(writeTarget(o[1])));
  for (const [flag, file] of outs) {
    const read = inputs.find(([, f]) => f !== undefined && sameFile(file, f));
    if (read) throw fail(`${flag} ${file} is ${read[0]}, which this command reads: it would be written over; name another file`);
  }
  outs.forEach(([flag, file], i) => {
    const other = outs.slice(0, i).find(([, f]) => sameFile(file, f));
    if (other) throw fail(`${other[0]} and ${flag} both name ${file}: one would be written over the other`);
  });
}
