// npm run nccom -- <op> -r N [...]: nccom-test's command line, no scenario file. The flags build a
// scenario (validated like a file; --dump-scenario prints it) and run it as a sweep.
import { ScenarioError } from "../ir/errors.ts";
import { gatherCounts, streamsPointJson, sweepPointJson, uniformCounts, type ScenarioSource } from "../run/overrides.ts";
import { setFlagWords, UsageError, type SweepArgs } from "../command/args.ts";
import { groupsRanksLcm, type CheckMode } from "../ir/spec.ts";
import { EXIT, runSource, type RunStyle } from "./sim.ts";
import { sweepSizes } from "../ir/sizes.ts";
import { opSweepSizes, splitSizes } from "../run/sweep.ts";
import { coalescedOps, parseNccomArgs, runtimeVariables, type NccomArgs } from "../command/nccom.ts";
import { DTYPES, dtypeSize } from "../ir/dtypes.ts";
import { asCommand } from "./entry.ts";

const HELP = `ccsim nccom: nccom-test's command line on the simulator (no scenario file)

usage: npm run nccom -- <op> -r N [-N NODES] [-b MIN] [-e MAX] [-f FACTOR | -i STEP] [-d TYPE] [options]

ops: all_reduce (allr), all_gather (allg), all_gatherv (allgv), reduce_scatter (redsct), sendrecv, alltoall, alltoallv, permute
  (allgv runs as the runtime reaches the device: an all-to-all-v whose every destination reads the
  sender's one block; it needs the mesh, as all-to-all does)
  -r, --nworkers N          ranks in all; they fill NeuronCores in order (device 0's cores, then device 1's, ...)
  -N, --nnodes N            nodes (default 1); -r counts the ranks of all of them
  -b, --minbytes SIZE       smallest size (default 32M); units 2kb, 1MB, 1GB
  -e, --maxbytes SIZE       largest size (default 32M, or -b if larger)
  -f, --stepfactor N        multiply by N each step (default 2)
  -i, --stepbytes SIZE      add SIZE each step
  -d, --datatype TYPE       ${DTYPES.join(", ")}, fp8 (= fp8e4) (default uint8)
  --instance NAME|FILE.json device preset: a name in --devices (default trn1), or a preset file
  --lnc 1|2                 logical NeuronCore size on trn2 (default: NEURON_LOGICAL_NC_CONFIG, else 2)
  --custom-replica-groups F JSON: [[ranks], ...] or {"replica_groups": [[ranks], ...]}
  --custom-src-target-pairs F  JSON: [[src, dst], ...] or {"src_target_pairs": [...]} (sendrecv, permute)
  --variable-size-op-metadata F  {"metadata": [{send_counts, send_displs, recv_counts, recv_displs}, ...]}
                            (elements; one entry for all ranks or one per rank): allgv's counts run at
                            their sum, alltoallv's at the largest rank's send total; other sizes split evenly
  --data-parallel-dimension D  the op at once in sub-groups of D ranks, one rank every -r / D
                            (with -N D: one rank per node); the time is the slowest group's
  --coalesced-cc-size-ratio [a,b,...]  each size as coalesced ops of a:b:... of it (at most 4), run at
                            once, each on a CC stream of its own; the row is their bytes in the last one's end
  --streams-json F          {"streams": [{...}, ...]}: up to 4 streams at once, each an object of
                            long-form flags with "-" written "_" ("operation", "datatype", "minbytes",
                            "maxbytes", "stepfactor", "custom_replica_groups" (a file, found from F's
                            folder), ...) over the command line's, plus "ops_per_iter" (default 1);
                            point k runs every stream at its k-th size (its last once it ran them all);
                            one block a stream, its time the end of its last op of an iteration
  --sb2sb [--input-shape [s0,s1][n0,n1] --output-shape ... --cc-dim 0|1]  every rank's buffers in SBUF:
                            refused where they exceed a rank's (sbuf.bytesPerCore per NeuronCore); timed as HBM
  --unique-buff, --shared-output-buff  accepted, each said (buffer placement a simulation times alike)
  --show-algorithm          add the algorithm column
  --show-input-output-size  add total_input_size(B) and total_output_size(B) (a rank's buffers) after the count
  --report-to-json-file F   nccom-test's JSON report
  -t, --stats [avg pNN ...]  time every iteration on its own, as nccom-test does with these flags:
                            the preset's host.iterationPs is added (the host's launch of each
                            iteration, which a NEFF's loop otherwise amortizes); each pNN column
                            repeats the average (a simulated op takes the same time every iteration)
  -I, -W                    in-NEFF iterations and warm-up: accepted, and said so; the time is a
                            NEFF loop's average as without them (the host's launch amortized)
  -n, -w, -s/--hosts, --hosts-file, --non-interactive, --debug, -S/--slurm-mode, --slurm-job-id,
  --vcpu-pin-mode, --data-collector-port, --data-collector-host
                            accepted and ignored, each said on stderr (a simulation has no
                            iterations, warm-up, hosts or processes)
  a flag that takes a value may be given once (-r 8 -r 16 is refused)

environment:
  NEURON_LOGICAL_NC_CONFIG  as --lnc
  NEURON_RT_DBG_CC_DMA_PACKET_SIZE N[,N...]  the CC DMA packet size in bytes (64 to 65536; default and
                            most 64 KiB), one for every CC stream or one per stream: copies are cut at it,
                            CCE packets no larger (the scenario's ccDmaPacketBytes; README: Scenarios)
  NEURON_RT_DBG_DMA_PACKETIZATION_SIZE, NEURON_RT_DBG_INTRA_RDH_CHANNEL_BUFFER_SIZE,
  NEURON_RT_RANKS_PER_NETWORK_PROXY   not read, each said on stderr when set

ccsim's own:
  --json, --explain, --link-stats (npm run sim's --stats: per link, engine and HBM), --trace F, --trace-limit N, --plot F, --check values|symbolic|none, --seed N, --devices DIR, -j/--jobs N,
  --launch-us US (the runtime's fixed cost per collective; see npm run sim -- --help), --no-fold, --no-fastforward,
  --cc-dma-packet N[,N...] (as NEURON_RT_DBG_CC_DMA_PACKET_SIZE, over it), --set FIELD=VALUE (a preset field
  changed for the run, repeatable: --set link.bytesPerSecond=2e11; see npm run sim -- --help),
  --log-level LEVEL, --dump-scenario (print the scenario the flags build, at the first size, and stop; stderr
  says the npm run sim flags that run the sweep from it),
  --shard I/N|auto --out F (run shard I of N of the sizes, write a partial; auto: Slurm job array or
  Kubernetes Indexed Job, with --shards N; npm run merge -- F... prints the whole run)

Defaults where nccom-test's are not published: sendrecv pairs each even rank with the next odd one
(both ways); permute sends rank i to rank i+1 (mod N); alltoallv sends size / N bytes to every peer
(without metadata, or at a size other than its counts').
exit codes: as npm run sim (0 ok, 1 bad input, 2 internal error, 3 check failed, 4 hang)
`;

/** Ranks a size is a whole number of blocks of: the least common multiple of the replica groups' sizes (all the ranks without groups). */
function groupRanks(scn: Record<string, unknown>): number {
  const g = scn["replicaGroups"];
  // (Uneven groups of 3 and 5 ranks take blocks of 15, as the sweep's sizes do.)
  return Array.isArray(g) && g.every((x) => Array.isArray(x)) && g.length > 0 ? groupsRanksLcm(g as unknown[][]) : Number(scn["ranks"]);
}

export function main(argv: readonly string[], out: (s: string) => void, err: (s: string) => void, env: Readonly<Record<string, string | undefined>> = process.env, progress = false, merged?: RunStyle["merged"]): number {
  let a: NccomArgs | "help";
  try {
    a = parseNccomArgs(argv, env);
  } catch (e) {
    if (e instanceof UsageError || e instanceof ScenarioError) {
      err(`nccom: ${e instanceof ScenarioError ? e.render() : e.message}\n(try --help)\n`);
      return EXIT.BAD_INPUT;
    }
    throw e;
  }
  if (a === "help") {
    out(HELP);
    return EXIT.OK;
  }
  for (const f of a.ignored) err(`nccom: ${f}\n`);
  const label = a.run.scenario;
  const counts = a.counts;
  // A size the metadata's counts add up to runs them; another size splits evenly.
  const metaCounts = counts && ((op: Record<string, unknown>, bytes: number) => (bytes === counts.reduce((x, y) => x + y, 0) ? { ...op, counts } : gatherCounts(op, bytes)));
  // alltoallv's metadata runs at the size of its largest rank's send total; another size sends size / N to every peer.
  const matrix = a.matrix;
  const matrixSize = matrix ? Math.max(...matrix.map((row) => row.reduce((x, y) => x + y, 0))) : 0;
  const metaMatrix = matrix && ((op: Record<string, unknown>, bytes: number) => (bytes === matrixSize ? { ...op, counts: matrix } : uniformCounts(op, bytes)));
  const sw = a.run.sweep!;
  if (matrix && !sweepSizes(sizesOf(sw)).includes(matrixSize)) err(`nccom: --variable-size-op-metadata: its counts run at ${matrixSize} B (the largest rank's send total); the sizes asked send size / N to every peer\n`);
  // --coalesced-cc-size-ratio: each size as its shares, coalesced ops run at once.
  const ratios = a.coalesced;
  const blocked = a.op === "all-gather" || a.op === "reduce-scatter";
  const unit = dtypeSize(a.run.dtype!) * (blocked ? groupRanks(a.scenario) : 1);
  const split = ratios && ((op: Record<string, unknown>, bytes: number) => coalescedOps(op, bytes, ratios, unit));
  if (ratios) err(`nccom: --coalesced-cc-size-ratio ${ratios.join(",")}: each size runs as ${ratios.length} ops of ${ratios.join(":")} of it at once, each on a CC stream of its own; the time is the last one's end\n`);
  if (a.streams) err(`nccom: --streams-json: ${a.streams.length} streams at once (${a.streams.map((st, s) => `stream ${s}: ${st.op["op"]} ${st.op["dtype"]}, ${st.sizes.length} size(s), ${st.opsPerIter} op(s) an iteration, ${st.replicaGroups.length} group(s) of ${st.replicaGroups[0]!.length}`).join("; ")}); one block a stream, its time the end of its iteration's last op in the run of all of them\n`);
  const source = (): ScenarioSource => ({ file: label, json: a.scenario, flags: "", ...(a.op === "all-to-all-v" ? { sizeOp: metaMatrix ?? uniformCounts } : a.op === "all-gather-v" ? { sizeOp: metaCounts ?? gatherCounts } : {}), ...(split ? { splitOp: split } : {}), ...(a.streams ? { streams: a.streams } : {}) });
  if (a.dump) {
    // The command's first point: its op at the sweep's first size (every stream's op at its first, a multistream command's).
    // (The sweep's first size as it runs: rounded down to whole units, those below one skipped.)
    const op = { op: a.op, dtype: a.run.dtype! };
    const first = a.streams ? 0 : splitSizes(source(), op, opSweepSizes(op, groupRanks(a.scenario), sw).sizes).sizes[0];
    if (first === undefined) {
      err(`nccom: --dump-scenario: no size of the sweep runs (each is below one ${a.op} ${a.run.dtype} element${blocked ? " per rank" : ""}${split ? ", or too small to split into the coalesced ops" : ""})\n`);
      return EXIT.BAD_INPUT;
    }
    const shown = a.streams ? { ...a.scenario, concurrent: true, ops: streamsPointJson(a.streams, 0), replicaGroups: undefined } : sweepPointJson(source(), a.op, a.run.dtype, first, a.scenario["check"] as CheckMode);
    out(JSON.stringify(shown, null, 2) + "\n");
    const rerun = simFlags(a);
    // (The preset's fields a --set changed are not in the scenario: sim takes them again.)
    const sets = setFlagWords(a.run.presetSets ?? []);
    err(`nccom: the scenario of the command's first point (${a.streams ? "every stream's first size" : `${first} B`}): npm run sim ${sets ? `-- FILE${sets} ` : ""}runs it${rerun ? `; npm run sim -- FILE ${rerun}${sets} runs the command's whole sweep from it` : ` (the sweep's other sizes${a.streams || a.coalesced ? "" : " and their per-rank counts"} come from the command line only)`}\n`);
    return EXIT.OK;
  }
  return runSource(a.run, source, out, err, {}, { timeHeader: "time:avg(us)", notesToStderr: true, percentiles: a.percentiles, ioSizes: a.ioSizes, progress, command: { tool: "nccom", argv }, env, runtimeEnv: runtimeVariables(env), ...(merged ? { merged } : {}), inputs: a.inputs });
}


/** The sizes of a command line's sweep, as `sweepSizes` takes them. */
function sizesOf(sw: SweepArgs): Parameters<typeof sweepSizes>[0] {
  return { min: sw.min, max: sw.max, ...(sw.factor !== undefined ? { factor: sw.factor } : {}), ...(sw.step !== undefined ? { step: sw.step } : {}) };
}

/**
 * The `npm run sim` flags that run the sweep of a dumped scenario as this command line does, or
 * undefined where a scenario file cannot say it (sizes that set per-rank counts, coalesced or
 * concurrent ops).
 */
function simFlags(a: NccomArgs): string | undefined {
  const sw = a.run.sweep;
  if (!sw || a.streams || a.coalesced || a.op === "all-to-all-v" || a.op === "all-gather-v") return undefined;
  const step = sw.step !== undefined ? ` -i ${sw.step}` : sw.factor !== undefined ? ` -f ${sw.factor}` : "";
  const launch = a.run.launchPs !== undefined ? ` --launch-us ${a.run.launchPs / 1e6}` : "";
  return `-b ${sw.min} -e ${sw.max}${step} --op ${a.op} -d ${a.run.dtype}${launch}`;
}

asCommand(import.meta.url, (argv, out, err) => main(argv, out, err, process.env, true));
