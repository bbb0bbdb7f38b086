// Where the project's files are, from a module's own address. The tool runs from its sources
// (through tsx) or from their compiled copy in .build/ (bin/run.mjs picks), so a module finds the
// project as the folder holding package.json at or above itself, and a module it starts in a
// worker thread in the form it runs in itself (.ts or .js).
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { InternalError } from "../ir/errors.ts";

/** The project's folder: the nearest at or above `moduleUrl`'s that holds package.json. */
export function projectRoot(moduleUrl: string): string {
  let dir = dirname(fileURLToPath(moduleUrl));
  for (;;) {
    if (existsSync(join(dir, "package.json"))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new InternalError(`no package.json at or above ${fileURLToPath(moduleUrl)}`);
    dir = up;
  }
}

/** This project's folder (found once: the sources and the compiled copy find the same one). */
export const PROJECT_ROOT = projectRoot(import.meta.url);

/** The module `relative` (written as its source, `./x.ts`) next to `moduleUrl`, compiled where `moduleUrl` is. */
export function siblingUrl(moduleUrl: string, relative: string): string {
  return new URL(moduleUrl.endsWith(".js") ? relative.replace(/\.ts$/, ".js") : relative, moduleUrl).href;
}
