// Compiles the tool into .build/ (`npm run build`; `npm ci` runs it as `prepare`), then marks the
// copy with the time the compile started: bin/run.mjs runs the copy only while no source is newer.
// `--if-possible` (prepare): where there is nothing to compile yet (a container's install before
// its sources are copied) or no compiler (dev dependencies left out), say so and succeed: the
// commands then run from the sources.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const lenient = process.argv.includes("--if-possible");
const stamp = join(root, ".build", ".stamp");
/** The TypeScript compiler's script (run with this Node, on any platform), or undefined. */
function compiler() {
  try {
    const pkg = createRequire(join(root, "package.json")).resolve("typescript/package.json");
    const bin = JSON.parse(readFileSync(pkg, "utf8")).bin;
    return join(dirname(pkg), typeof bin === "string" ? bin : bin.tsc);
  } catch {
    return undefined;
  }
}
const tsc = compiler();
const config = join(root, "tsconfig.build.json");

function skip(why) {
  process.stderr.write(`ccsim build: ${why}: the commands run from the sources (through tsx)\n`);
  process.exit(lenient ? 0 : 1);
}

if (!existsSync(config) || !existsSync(join(root, "src"))) skip("no sources to compile yet");
if (tsc === undefined || !existsSync(tsc)) skip("no TypeScript compiler (dev dependencies not installed)");
// (Not run while compiling: the copy is half written.)
rmSync(stamp, { force: true });
const started = new Date();
const r = spawnSync(process.execPath, [tsc, "-p", config], { cwd: root, stdio: "inherit" });
if (r.status !== 0) skip(`the compile failed (exit ${r.status ?? r.signal})`);
mkdirSync(dirname(stamp), { recursive: true });
writeFileSync(stamp, "");
utimesSync(stamp, started, started);
