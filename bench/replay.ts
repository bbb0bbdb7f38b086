// npm run bench:replay: the replay of a large HLO module (about 400 KB, 60 collectives: 12
// unrolled tensor-parallel layers, each with long metadata and a few hundred other instructions),
// written to a temporary file and replayed on trn1,trn2 in a process of its own; prints its wall
// time and peak RSS.
//
//   npm run bench:replay [-- --layers N]
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** An unrolled TP 8 x DP 2 model: per layer 2 all-gathers, 2 reduce-scatters and a gradient reduce-scatter, with filler. */
export function largeModule(layers: number): string {
  const lines = ["HloModule jit_unrolled, num_partitions=16", "", "add.bf16 {", "  x = bf16[] parameter(0)", "  y = bf16[] parameter(1)", "  ROOT r = bf16[] add(x, y)", "}", "", "ENTRY main {", "  h0 = bf16[256,4096]{1,0} parameter(0)"];
  const meta = (l: number, what: string) => `metadata={op_name="jit(train_step)/transformer/layers_${l}/${what}" source_file="/workspace/models/transformer.py" source_line=${100 + l}}`;
  for (let l = 0; l < layers; l++) {
    const h = `h${l}`;
    lines.push(`  ag.a.${l} = bf16[2048,4096]{1,0} all-gather(${h}), channel_id=${5 * l + 1}, replica_groups=[2,8]<=[16], dimensions={0}, use_global_device_ids=true, ${meta(l, "attn/all_gather")}`);
    for (let k = 0; k < 90; k++) lines.push(`  f.${l}.${k} = bf16[2048,4096]{1,0} multiply(ag.a.${l}, ag.a.${l}), ${meta(l, `attn/mul_${k}`)}`);
    lines.push(`  rs.a.${l} = bf16[256,4096]{1,0} reduce-scatter(f.${l}.89), channel_id=${5 * l + 2}, replica_groups=[2,8]<=[16], dimensions={0}, use_global_device_ids=true, to_apply=add.bf16, ${meta(l, "attn/reduce_scatter")}`);
    lines.push(`  ag.m.${l} = bf16[2048,4096]{1,0} all-gather(rs.a.${l}), channel_id=${5 * l + 3}, replica_groups=[2,8]<=[16], dimensions={0}, use_global_device_ids=true, ${meta(l, "mlp/all_gather")}`);
    for (let k = 0; k < 90; k++) lines.push(`  g.${l}.${k} = bf16[2048,4096]{1,0} add(ag.m.${l}, ag.m.${l}), ${meta(l, `mlp/add_${k}`)}`);
    lines.push(`  rs.m.${l} = bf16[256,4096]{1,0} reduce-scatter(g.${l}.89), channel_id=${5 * l + 4}, replica_groups=[2,8]<=[16], dimensions={0}, use_global_device_ids=true, to_apply=add.bf16, ${meta(l, "mlp/reduce_scatter")}`);
    lines.push(`  grad.${l} = bf16[${1 << 22}]{0} constant({...})`);
    lines.push(`  rs.g.${l} = bf16[${1 << 21}]{0} reduce-scatter(grad.${l}), channel_id=${5 * l + 5}, replica_groups=[8,2]<=[2,8]T(1,0), dimensions={0}, use_global_device_ids=true, to_apply=add.bf16, ${meta(l, "grad_sync")}`);
    lines.push(`  h${l + 1} = bf16[256,4096]{1,0} copy(rs.m.${l})`);
  }
  lines.push(`  ROOT out = bf16[256,4096]{1,0} copy(h${layers})`, "}", "");
  return lines.join("\n");
}

if (process.argv[1]?.endsWith("replay.ts")) {
  const at = process.argv.indexOf("--layers");
  const layers = at > 0 ? Number(process.argv[at + 1]) : 12;
  const dir = mkdtempSync(join(tmpdir(), "ccsim-bench-replay-"));
  try {
    const file = join(dir, "unrolled.hlo.txt");
    writeFileSync(file, largeModule(layers));
    const t0 = performance.now();
    const r = spawnSync(process.execPath, ["--max-semi-space-size=64", "bin/run.mjs", "src/cli/replay.ts", file, "--instance", "trn1,trn2", "--top", "3"], { encoding: "utf8" });
    const wall = (performance.now() - t0) / 1000;
    if (r.status !== 0) throw new Error(`replay failed (${r.status}): ${r.stderr}`);
    const time = spawnSync("/usr/bin/time", ["-f", "%M", process.execPath, "--max-semi-space-size=64", "bin/run.mjs", "src/cli/replay.ts", file, "--instance", "trn1,trn2"], { encoding: "utf8" });
    const rss = time.status === 0 ? `${Math.round(Number(time.stderr.trim().split("\n").pop()) / 1024)} MiB` : "n/a (no /usr/bin/time)";
    console.log(`module: ${layers} layers, ${(statSync(file).size / 1024).toFixed(0)} KB, ${layers * 5} collectives`);
    console.log(r.stdout.split("\n").filter((l) => /^collectives:|^communication/.test(l)).join("\n"));
    console.log(`replay on trn1,trn2: ${wall.toFixed(2)} s wall, peak RSS ${rss}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
