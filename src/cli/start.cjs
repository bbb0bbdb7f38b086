// Starts a command line: `node --require tsx/cjs src/cli/start.cjs <module.ts> args...` runs the
// TypeScript module (a path from the project's folder) as the process's entry, loaded through
// tsx's require hook in the process's own thread. Through its import hooks (`--import tsx`) every
// module went through a loader thread of its own: a process took 0.71-0.84 s to print --help, this
// way 0.41-0.55 s.
"use strict";
const { resolve } = require("node:path");

const file = resolve(__dirname, "../..", process.argv[2] ?? "");
// The module is the entry, as with `node <module.ts> args...` (src/cli/entry.ts checks argv[1]).
process.argv.splice(1, 2, file);
require(file);
