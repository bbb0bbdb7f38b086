// Which file runs a command: its compiled copy in .build/ while that copy is newer than every
// source it is compiled from (and the compile's settings), else the source itself.
import { existsSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";

/** The newest modification time (ms) of the .ts files under src/ and sim/ and of the tsconfig files. */
function newestSource(root) {
  let newest = 0;
  const visit = (dir) => {
    if (!existsSync(dir)) return;
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) visit(p);
      else if (e.name.endsWith(".ts")) newest = Math.max(newest, statSync(p).mtimeMs);
    }
  };
  visit(join(root, "src"));
  visit(join(root, "sim"));
  for (const f of ["tsconfig.json", "tsconfig.build.json"]) if (existsSync(join(root, f))) newest = Math.max(newest, statSync(join(root, f)).mtimeMs);
  return newest;
}

/** The file to run for source module `sourcePath` of the project at `root`: its compiled copy if fresh, else the source. */
export function runnable(root, sourcePath) {
  const stamp = join(root, ".build", ".stamp");
  const compiled = join(root, ".build", relative(root, sourcePath)).replace(/\.ts$/, ".js");
  const fresh = existsSync(stamp) && existsSync(compiled) && statSync(stamp).mtimeMs >= newestSource(root);
  return fresh ? compiled : sourcePath;
}
