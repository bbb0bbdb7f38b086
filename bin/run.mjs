// Starts one of the tool's commands: `node bin/run.mjs src/cli/<name>.ts [args...]` (the npm
// scripts). It runs the compiled copy in .build/ (`npm run build`, which `npm ci` runs) when that
// copy is newer than every source file, else the sources through tsx, as before there was a copy:
// an edited source is never run stale. Compiled, a command starts in a fraction of the time, and
// so does each worker thread it starts (tsx's loader costs each thread about a fifth of a second).
// CCSIM_FROM_SOURCES=1 runs the sources whatever the copy (stack traces name the .ts lines).
import { dirname, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { runnable } from "./fresh.mjs";

const source = process.argv[2];
if (source === undefined || !source.endsWith(".ts")) {
  process.stderr.write("usage: node bin/run.mjs src/cli/<command>.ts [args...]\n");
  process.exit(2);
}
const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const run = process.env.CCSIM_FROM_SOURCES === "1" ? resolve(root, source) : runnable(root, resolve(root, source));
// (The command's module runs as the process's entry: `asCommand` looks for itself in argv[1].)
process.argv.splice(1, 2, run);
if (run.endsWith(".ts")) await import("tsx");
await import(pathToFileURL(run).href);
