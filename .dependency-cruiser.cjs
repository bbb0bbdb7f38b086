// Architecture rules, checked in CI (.ci/run): `npx depcruise src sim --config .dependency-cruiser.cjs`.
// Layers, top to bottom:
//   src/cli                          command lines (argument parsing and printing only)
//   src/fit, src/replay              calibration from logs; HLO replay
//   src/command                      command lines read as data (sim's flags, nccom-test's)
//   src/run                          load -> compile -> simulate -> check, worker threads
//   sim/, src/enc                    the simulator; the composer
//   src/encd, src/scenario, src/check, src/report
//   src/ir                           enums, types, errors, time
/** A path pattern for folders of src. */
const src = (...dirs) => `^src/(${dirs.join("|")})/`;

module.exports = {
  forbidden: [
    { name: "no-circular", comment: "no import circle anywhere", severity: "error", from: {}, to: { circular: true } },
    { name: "cli-is-a-shell", comment: "nothing imports a command line's module", severity: "error", from: { path: "^(src|sim)/", pathNot: "^src/cli/" }, to: { path: "^src/cli/" } },
    { name: "sim-reads-bytes", comment: "the simulator reads the program image (encd decoders) and the preset (ir): never the composer, the runner or the checks", severity: "error", from: { path: "^sim/" }, to: { path: "^src/", pathNot: src("encd", "ir") } },
    { name: "sim-reads-images", comment: "the simulator reads program images, never the builder that writes them", severity: "error", from: { path: "^sim/" }, to: { path: "^src/encd/(program|channel-writer|mesh-writer)\\.ts$" } },
    { name: "ir-is-the-floor", comment: "src/ir imports nothing of the project", severity: "error", from: { path: src("ir") }, to: { path: "^(src|sim)/", pathNot: src("ir") } },
    { name: "formats-below-composer", comment: "wire formats, loaders, checks and reports sit below the composer and the runner", severity: "error", from: { path: src("encd", "scenario", "check", "report") }, to: { path: [src("enc", "run", "command", "fit", "replay", "cli"), "^sim/"] } },
    { name: "composer-below-runner", comment: "the composer never reaches up to the runner or the simulator", severity: "error", from: { path: src("enc") }, to: { path: [src("run", "command", "fit", "replay", "cli"), "^sim/"] } },
    { name: "runner-below-commands", comment: "the runner does not read command lines", severity: "error", from: { path: src("run") }, to: { path: src("command", "fit", "replay", "cli") } },
    { name: "commands-below-capabilities", comment: "command-line readers do not reach fit or replay", severity: "error", from: { path: src("command") }, to: { path: src("fit", "replay", "cli") } },
    { name: "capabilities-apart", comment: "fit and replay do not import each other", severity: "error", from: { path: src("fit") }, to: { path: src("replay") } },
    { name: "replay-apart", severity: "error", from: { path: src("replay") }, to: { path: src("fit") } },
    {
      name: "family-contract",
      comment: "an algorithm family composes against src/enc/stage.ts: it never imports what chooses between families or the compile context",
      severity: "error",
      from: { path: "^src/enc/(ring|kangaring|mesh|rdh|podmesh)\\.ts$" },
      to: { path: "^src/enc/(registry|algorithms|gates|post|hier|hier-plan|context|compile)\\.ts$" },
    },
    {
      name: "families-apart",
      comment: "a family does not import another family (what they share is in src/enc/kit.ts or the contract)",
      severity: "error",
      from: { path: "^src/enc/(ring|kangaring|mesh|rdh|podmesh)\\.ts$" },
      to: { path: "^src/enc/(ring|kangaring|mesh|rdh|podmesh)\\.ts$", pathNot: "^src/enc/$1\\.ts$" },
    },
  ],
  options: {
    tsPreCompilationDeps: true,
    doNotFollow: { path: "node_modules" },
    exclude: { path: "node_modules" },
  },
};
