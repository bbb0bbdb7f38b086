// Sharded runs as a cluster scheduler runs them: one process per shard, its shard from the
// scheduler's environment, then npm run merge, compared byte for byte with the run whole.
import { describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHash } from "node:crypto";
import { ccsimVersion } from "../../src/run/shard.ts";
import { main as nccomMain } from "../../src/cli/nccom.ts";
import { main as mergeMain } from "../../src/cli/merge.ts";
import { main as conformanceMain } from "../../src/cli/conformance.ts";
import { main as simMain } from "../../src/cli/sim.ts";
import { main as calibrateMain } from "../../src/cli/calibrate.ts";

const scripts = (JSON.parse(readFileSync("package.json", "utf8")) as { scripts: Record<string, string> }).scripts;

/** `npm run NAME -- ARGS` as a process (the package's script, this process's node), with `env` added. */
function npmRun(name: string, args: readonly string[], env: Record<string, string> = {}): { status: number | null; stdout: string; stderr: string } {
  const words = scripts[name]!.split(" ");
  // A clean environment of scheduler variables: only what the case sets.
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(SLURM_|JOB_COMPLETION_INDEX|CCSIM_SHARDS)/.test(k)));
  const r = spawnSync(process.execPath, [...words.slice(1), ...args], { encoding: "utf8", env: { ...base, ...env } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * `npm run NAME -- ARGS` in this process (each tool's `main`, the scheduler's variables from `env`
 * alone): what needs no scheduler's process of its own (a merge's refusals, shards by hand).
 */
function inProcess(name: "nccom" | "merge" | "conformance" | "sim" | "calibrate", args: readonly string[], env: Record<string, string> = {}): { status: number; stdout: string; stderr: string } {
  let stdout = "";
  let stderr = "";
  const out = (x: string) => (stdout += x);
  const err = (x: string) => (stderr += x);
  const mains = {
    nccom: () => nccomMain(args, out, err, env),
    merge: () => mergeMain(args, out, err),
    conformance: () => conformanceMain(args, out, err, undefined, env),
    sim: () => simMain(args, out, err),
    calibrate: () => calibrateMain(args, out, err, undefined, env),
  };
  const status = mains[name]();
  return { status, stdout, stderr };
}

const dir = mkdtempSync(join(tmpdir(), "ccsim-merge-"));

describe("a sweep sharded over a Slurm job array, merged", () => {
  const cmd = ["allr", "-r", "16", "-b", "8", "-e", "4M", "-f", "8", "-d", "fp32", "--show-algorithm", "-j", "1"];
  const files = [0, 1, 2].map((k) => join(dir, `slurm-${k}.json`));
  const whole = npmRun("nccom", cmd);

  it("each task writes its partial; the merge prints what the whole run prints, and exits as it", () => {
    files.forEach((f, k) => {
      const r = npmRun("nccom", [...cmd, "--shard", "auto", "--out", f], { SLURM_ARRAY_TASK_ID: String(k + 4), SLURM_ARRAY_TASK_MIN: "4", SLURM_ARRAY_TASK_COUNT: "3" });
      expect(r.status).toBe(0);
      expect(r.stdout).toBe("");
      expect(r.stderr).toContain(`shard ${k}/3:`);
    });
    const json = join(dir, "merged.json");
    const m = npmRun("merge", [...files, "--json", json]);
    expect(whole.status).toBe(0);
    expect(m.status).toBe(whole.status);
    expect(m.stdout).toBe(whole.stdout);
    expect(m.stderr).toBe(whole.stderr);
    // (The whole run's JSON, the reference, in this process.)
    expect(readFileSync(json, "utf8")).toBe(inProcess("nccom", [...cmd, "--json"]).stdout);
  });

  it("refuses a missing shard, a shard twice, an edited partial and another preset's, writing nothing", () => {
    const out = join(dir, "refused.json");
    const check = (args: string[], message: RegExp) => {
      const r = inProcess("merge", [...args, "--json", out]);
      expect(r.status).toBe(1);
      expect(r.stdout).toBe("");
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(r.stderr).toMatch(message);
      expect(existsSync(out)).toBe(false);
    };
    check([files[0]!, files[2]!], /shard 1 of 3 missing/);
    check([files[0]!, files[1]!, files[1]!, files[2]!], /slurm-1.json: shard 1\/3 given twice/);
    const edited = join(dir, "edited.json");
    const text = readFileSync(files[2]!, "utf8");
    const at = text.indexOf('"timeUs":') + 9;
    writeFileSync(edited, text.slice(0, at) + (text[at] === "9" ? "8" : "9") + text.slice(at + 1));
    check([files[0]!, files[1]!, edited], /edited.json: its checksum does not match its content/);
    const other = join(dir, "other-preset.json");
    expect(inProcess("nccom", [...cmd, "--instance", "trn2", "--shard", "2/3", "--out", other]).status).toBe(0);
    check([files[0]!, files[1]!, other], /another command's partial/);
    // The same command on a preset file whose content changed between shards.
    const preset = join(dir, "mine.json");
    const trn1 = JSON.parse(readFileSync("devices/trn1.json", "utf8")) as { topsp: { launchPs: number } };
    writeFileSync(preset, JSON.stringify(trn1));
    const mine = [0, 1].map((k) => join(dir, `mine-${k}.json`));
    expect(inProcess("nccom", [...cmd, "--instance", preset, "--shard", "0/2", "--out", mine[0]!]).status).toBe(0);
    writeFileSync(preset, JSON.stringify({ ...trn1, topsp: { ...trn1.topsp, launchPs: trn1.topsp.launchPs + 1_000_000 } }));
    expect(inProcess("nccom", [...cmd, "--instance", preset, "--shard", "1/2", "--out", mine[1]!]).status).toBe(0);
    check(mine, /mine-1.json: ran on another preset/);
  });

  it("refuses the partial of another checkout (its sources differ, the version alike), in the shards or against the merge itself", () => {
    // A partial as another build would write it, whole and checksummed: only its build differs.
    const rebuilt = (file: string, build: string, name: string): string => {
      const m = /^\{"checksum":"[0-9a-f]{64}","body":([\s\S]*)\}\n$/.exec(readFileSync(file, "utf8"))!;
      const body = JSON.stringify({ ...(JSON.parse(m[1]!) as object), version: build });
      const out = join(dir, name);
      writeFileSync(out, `{"checksum":"${createHash("sha256").update(body).digest("hex")}","body":${body}}\n`);
      return out;
    };
    const ours = ccsimVersion();
    expect(ours).toMatch(/^\d+\.\d+\.\d+\+src\.[0-9a-f]{12}$/);
    const theirs = ours.replace(/src\.[0-9a-f]{12}$/, "src.000000000000");
    const r = inProcess("merge", [files[0]!, files[1]!, rebuilt(files[2]!, theirs, "theirs-2.json")]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`theirs-2.json: written by ccsim ${theirs}, ${files[0]} by ${ours}`);
    // Every shard of that other build: alike among themselves, not this merge's to read.
    const m = inProcess("merge", files.map((f, k) => rebuilt(f, theirs, `theirs-${k}.json`)));
    expect(m.status).toBe(1);
    expect(m.stdout).toBe("");
    expect(m.stderr).toContain(`theirs-0.json: written by ccsim ${theirs}, and this is ccsim ${ours}`);
  });

  it("refuses a partial edited and checksummed again whose results are not the command's, or do not read (exit 1, no stack, nothing written)", () => {
    const m = /^\{"checksum":"[0-9a-f]{64}","body":([\s\S]*)\}\n$/.exec(readFileSync(files[1]!, "utf8"))!;
    const body = JSON.parse(m[1]!) as { pieces: { index: number; result: unknown }[] };
    const reshaped = (name: string, result: unknown): string => {
      const edited = JSON.stringify({ ...body, pieces: body.pieces.map((p, k) => (k === 0 ? { ...p, result } : p)) });
      const file = join(dir, name);
      writeFileSync(file, `{"checksum":"${createHash("sha256").update(edited).digest("hex")}","body":${edited}}\n`);
      return file;
    };
    const json = join(dir, "reshaped.json");
    const cases: [unknown, RegExp][] = [
      // Not of the command's shape at its top: named with the piece.
      [{ kind: "done", outcome: {} }, new RegExp(`reshaped-1.json: piece ${body.pieces[0]!.index}: not a result of nccom \\(its outcome is \\{\\}\\): the partial was edited and checksummed again; run its shard again\n$`)],
      [{ kind: "ran" }, /not a result of nccom \(its kind is "ran", not done, hang or error\)/],
      [[1, 2], /not a result of nccom \(\[1,2\] is not a record\)/],
      // Of its shape at the top, but not readable below: the replay says so.
      [{ kind: "done", outcome: { row: {} }, explain: [] }, /reshaped-1.json, .*: their results do not read as nccom's \(TypeError: .*\): a partial was edited and checksummed again; run the shards again\n$/],
    ];
    for (const [result, said] of cases) {
      const r = inProcess("merge", [files[0]!, reshaped("reshaped-1.json", result), files[2]!, "--json", json]);
      expect(r.status, JSON.stringify(result)).toBe(1);
      expect(r.stderr, JSON.stringify(result)).toMatch(said);
      expect(r.stderr).not.toMatch(/ at |internal error/);
      expect(existsSync(json)).toBe(false);
    }
    // A shard or a count of pieces edited out of range: refused before anything is sized by it
    // (a shard count of a billion ran the merge out of memory).
    const renumbered = (name: string, edit: object): string => {
      const edited = JSON.stringify({ ...body, ...edit });
      const file = join(dir, name);
      writeFileSync(file, `{"checksum":"${createHash("sha256").update(edited).digest("hex")}","body":${edited}}\n`);
      return file;
    };
    const bounds: [object, RegExp][] = [
      [{ shard: { index: 1, count: 1e9 } }, /renumbered.json: shard 1\/1000000000 is not a shard I\/N with 0 <= I < N <= 10000: the partial was edited\n$/],
      [{ shard: { index: -1, count: 3 } }, /shard -1\/3 is not a shard I\/N/],
      [{ shard: { index: 3, count: 3 } }, /shard 3\/3 is not a shard I\/N/],
      [{ total: 1e9 }, /renumbered.json: 1000000000 pieces in all, not 0 to 1048576: the partial was edited\n$/],
    ];
    // A command line with a number in it.
    bounds.push([{ argv: [...(body as unknown as { argv: string[] }).argv, 5] }, /renumbered.json: a field is missing or of the wrong type \(tool, argv,/]);
    for (const [edit, said] of bounds) {
      const r = inProcess("merge", [files[0]!, renumbered("renumbered.json", edit), files[2]!, "--json", json]);
      expect(r.status, JSON.stringify(edit)).toBe(1);
      expect(r.stderr, JSON.stringify(edit)).toMatch(said);
      expect(existsSync(json)).toBe(false);
    }
    // Every partial's command line with a shard's own flags put back: the replay would run as a
    // shard again (write a partial, print no table).
    const again = join(dir, "again.json");
    const flagged = files.map((f, k) => {
      const mk = /^\{"checksum":"[0-9a-f]{64}","body":([\s\S]*)\}\n$/.exec(readFileSync(f, "utf8"))!;
      const b = JSON.parse(mk[1]!) as { argv: string[] };
      const edited = JSON.stringify({ ...b, argv: [...b.argv, "--shard", "0/1", "--out", again] });
      const file = join(dir, `flagged-${k}.json`);
      writeFileSync(file, `{"checksum":"${createHash("sha256").update(edited).digest("hex")}","body":${edited}}\n`);
      return file;
    });
    const r = inProcess("merge", flagged);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/flagged-0.json: its command line holds --shard, which no shard keeps: the partial was edited and checksummed again; run the shards again\n$/);
    expect(existsSync(again)).toBe(false);
    // Nor does a shard trace: a trace in the command line was put there too.
    const traced = files.map((f, k) => {
      const mk = /^\{"checksum":"[0-9a-f]{64}","body":([\s\S]*)\}\n$/.exec(readFileSync(f, "utf8"))!;
      const b = JSON.parse(mk[1]!) as { argv: string[] };
      const edited = JSON.stringify({ ...b, argv: [...b.argv, "--trace", join(dir, "trace.json")] });
      const file = join(dir, `traced-${k}.json`);
      writeFileSync(file, `{"checksum":"${createHash("sha256").update(edited).digest("hex")}","body":${edited}}\n`);
      return file;
    });
    const t = inProcess("merge", traced);
    expect(t.status).toBe(1);
    expect(t.stderr).toMatch(/traced-0.json: its command line holds --trace, which no shard keeps/);
    expect(existsSync(join(dir, "trace.json"))).toBe(false);
  });
});

describe("an nccom sweep run with the runtime's packet variable, sharded", () => {
  it("the merge reads the command with the shards' variables (the whole run's table, its name), and refuses a shard run without them", () => {
    const env = { NEURON_RT_DBG_CC_DMA_PACKET_SIZE: "4096" };
    const cmd = ["allr", "-r", "8", "-b", "1K", "-e", "4M", "-f", "4", "--json", "-j", "1"];
    const whole = inProcess("nccom", cmd, env);
    expect(whole.status).toBe(0);
    const files = [0, 1].map((k) => join(dir, `env-${k}.json`));
    files.forEach((f, k) => expect(inProcess("nccom", [...cmd, "--shard", `${k}/2`, "--out", f], env).status).toBe(0));
    const m = inProcess("merge", files);
    expect(m.status, m.stderr).toBe(0);
    expect(JSON.parse(m.stdout)).toEqual(JSON.parse(whole.stdout));
    expect(JSON.parse(m.stdout).scenario).toMatch(/^NEURON_RT_DBG_CC_DMA_PACKET_SIZE=4096 nccom allr/);
    // A shard run again without the variable ran other packets: not merged with the others.
    const again = join(dir, "env-1-again.json");
    expect(inProcess("nccom", [...cmd, "--shard", "1/2", "--out", again]).status).toBe(0);
    const mixed = inProcess("merge", [files[0]!, again]);
    expect(mixed.status).toBe(1);
    expect(mixed.stderr).toContain(`env-1-again.json: ran with other runtime variables (none; ${files[0]}: NEURON_RT_DBG_CC_DMA_PACKET_SIZE=4096)`);
  });
});

describe("conformance sharded over a Kubernetes Indexed Job, merged", () => {
  it("prints the whole run's counts; only the wall-clock time on its first line differs", () => {
    const cmd = ["--cases", "16", "--seed", "7", "--max-bytes", "64K", "-j", "1"];
    const files = [0, 1].map((k) => join(dir, `k8s-${k}.json`));
    files.forEach((f, k) => {
      const r = npmRun("conformance", [...cmd, "--shard", "auto", "--out", f], { JOB_COMPLETION_INDEX: String(k), CCSIM_SHARDS: "2" });
      expect(r.status).toBe(0);
    });
    const whole = npmRun("conformance", cmd);
    const m = npmRun("merge", files);
    const wall = (s: string) => s.replace(/, [\d.]+ s\n/, ", <wall> s\n");
    expect(m.status).toBe(whole.status);
    expect(wall(m.stdout)).toBe(wall(whole.stdout));
    expect(m.stdout).toMatch(/all +pass: \d+, refused: \d+, fail: 0/);
  });

  it("--shard auto outside a scheduler says which variables it looked for", () => {
    const r = inProcess("conformance", ["--cases", "2", "--shard", "auto", "--out", join(dir, "none.json")]);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/SLURM_ARRAY_TASK_ID.*JOB_COMPLETION_INDEX/);
    const n = inProcess("nccom", ["allr", "-r", "8", "--shard", "1/2"]);
    expect(n.status).toBe(1);
    expect(n.stderr).toMatch(/give --out FILE/);
  });
});

/** `tool` run whole, and run as shards 0/2 and 1/2 (each must succeed) whose partials are merged. */
function wholeAndMerged(tool: "sim" | "calibrate", cmd: readonly string[]): { whole: ReturnType<typeof inProcess>; merged: ReturnType<typeof inProcess> } {
  const files = [0, 1].map((k) => join(dir, `${tool}-${k}.json`));
  files.forEach((f, k) => expect(inProcess(tool, [...cmd, "--shard", `${k}/2`, "--out", f]).status).toBe(0));
  return { whole: inProcess(tool, cmd), merged: inProcess("merge", files) };
}

describe("a scenario sweep sharded by hand, merged", () => {
  it("npm run sim -b / -e --shard I/N", () => {
    const { whole, merged: m } = wholeAndMerged("sim", ["scenarios/ring8.json", "-b", "1K", "-e", "1M", "-f", "4", "-j", "1"]);
    expect(m.stdout).toBe(whole.stdout);
    expect(m.status).toBe(0);
  });
});

describe("a calibration run sharded, merged", () => {
  it("the points split over shards; the merge prints the whole run's tables and held-out figures (wall-clock times aside)", () => {
    const { whole, merged: m } = wholeAndMerged("calibrate", ["--series", "newer-trn1-r32-allg-fp32", "--series", "newer-trn1-r8-permute-uint8", "--series", "newer-r4-allgv-fp16", "--cross-validate", "-j", "1"]);
    const wall = (x: string) => x.replace(/cross-validated \([\d.]+ s\)/g, "cross-validated (<wall> s)");
    expect(m.status).toBe(0);
    expect(wall(m.stdout)).toBe(wall(whole.stdout));
    expect(m.stdout).toMatch(/trn1 cross-validated/);
    expect(inProcess("calibrate", ["--fit", "--shard", "0/2", "--out", join(dir, "fit.json")]).stderr).toMatch(/a fit's trials follow one another/);
  });
});

describe("deploy/: the container, the Slurm script and the Kubernetes manifests", () => {
  it("the Dockerfile installs with npm ci on Node 20 and runs ring8 by default", () => {
    const d = readFileSync("deploy/Dockerfile", "utf8");
    expect(d).toMatch(/^FROM node:20/m);
    expect(d).toMatch(/^RUN npm ci$/m);
    expect(d).toMatch(/^ENTRYPOINT \["npm"\]$/m);
    expect(d).toMatch(/^CMD \["run", "sim", "--", "scenarios\/ring8.json"\]$/m);
  });

  it("the sbatch script runs --shard auto as an array and merges in a dependent job", () => {
    const s = readFileSync("deploy/slurm/sweep.sbatch", "utf8");
    expect(s).toMatch(/^#!\/bin\/bash/);
    expect(s).toMatch(/sbatch --parsable --array=0-\$\(\(SHARDS - 1\)\)/);
    expect(s).toMatch(/--dependency=afterok:"\$array"/);
    expect(s).toMatch(/npm run -s merge -- \$OUT\/shard-\*\.json/);
    expect(s).toMatch(/--shard auto .*--out "\$OUT\/shard-\$SLURM_ARRAY_TASK_ID\.json"/);
    expect(spawnSync("bash", ["-n", "deploy/slurm/sweep.sbatch"]).status).toBe(0);
  });

  it("the Indexed Job writes partials to the volume the merge Job reads", () => {
    type Container = { image: string; command: string[]; env?: { name: string; value?: string; valueFrom?: { fieldRef: { fieldPath: string } } }[]; volumeMounts: { name: string; mountPath: string }[] };
    type Job = { kind: string; apiVersion: string; spec: { completionMode?: string; completions: number; parallelism?: number; template: { spec: { restartPolicy: string; containers: Container[]; volumes: { name: string; persistentVolumeClaim: { claimName: string } }[] } } } };
    const shards = JSON.parse(readFileSync("deploy/k8s/shards-job.json", "utf8")) as Job;
    const merge = JSON.parse(readFileSync("deploy/k8s/merge-job.json", "utf8")) as Job;
    const pvc = JSON.parse(readFileSync("deploy/k8s/partials-pvc.json", "utf8")) as { kind: string; metadata: { name: string } };
    expect([shards.kind, shards.apiVersion, shards.spec.completionMode]).toEqual(["Job", "batch/v1", "Indexed"]);
    const c = shards.spec.template.spec.containers[0]!;
    expect(c.image).toBe("ccsim:latest");
    expect(c.command.slice(0, 3)).toEqual(["npm", "run", "-s"]);
    expect(scripts[c.command[3]!]).toBeDefined();
    expect(c.command.join(" ")).toContain("--shard auto");
    const index = c.env!.find((e) => e.name === "JOB_COMPLETION_INDEX")!;
    expect(index.valueFrom!.fieldRef.fieldPath).toBe("metadata.annotations['batch.kubernetes.io/job-completion-index']");
    expect(Number(c.env!.find((e) => e.name === "CCSIM_SHARDS")!.value)).toBe(shards.spec.completions);
    const out = c.command[c.command.indexOf("--out") + 1]!;
    expect(out.startsWith(c.volumeMounts[0]!.mountPath + "/")).toBe(true);
    expect(out).toContain("$(JOB_COMPLETION_INDEX)");
    const m = merge.spec.template.spec.containers[0]!;
    expect(m.command.join(" ")).toContain(`npm run -s merge -- ${m.volumeMounts[0]!.mountPath}/shard-*.json`);
    for (const j of [shards, merge]) {
      expect(j.spec.template.spec.restartPolicy).toBe("Never");
      expect(j.spec.template.spec.volumes[0]!.persistentVolumeClaim.claimName).toBe(pvc.metadata.name);
    }
    expect(pvc.kind).toBe("PersistentVolumeClaim");
  });
});
