// The JSON files nccom-test's flags name, read as its documentation writes them: replica groups,
// source / target pairs (each with or without the documented extra level of list), and the
// variable-size metadata of all_gatherv / alltoallv.
import { UsageError } from "./args.ts";
import { readTextFile } from "../scenario/text-file.ts";

/**
 * all_gatherv's metadata (nccom-test --variable-size-op-metadata): {"metadata": [{send_counts,
 * send_displs, recv_counts, recv_displs}, ...]}, one entry for every rank or one per rank; each
 * rank sends send_counts[0] elements, and a receive side, where given, must list the same.
 */
/** A metadata file's entries (one for all ranks, or one per rank), and how it refuses a field. */
function metadataEntries(file: string, json: unknown, n: number): { list: Record<string, unknown>[]; bad: (why: string) => never } {
  const bad = (why: string): never => {
    throw new UsageError(`--variable-size-op-metadata: ${file}: ${why}`);
  };
  const entries = (json as { metadata?: unknown })?.metadata;
  if (!Array.isArray(entries) || (entries.length !== 1 && entries.length !== n)) bad(`metadata must be a list of one entry or one per rank (${n})`);
  return { list: entries as Record<string, unknown>[], bad };
}

export function gatherMetadata(file: string, json: unknown, n: number): number[] {
  const { list, bad } = metadataEntries(file, json, n);
  const sends = Array.from({ length: n }, (_, r) => {
    const e = list.length === 1 ? list[0]! : list[r]!;
    const sc = e?.["send_counts"];
    if (!Array.isArray(sc) || sc.length !== 1 || !Number.isInteger(sc[0]) || (sc[0] as number) < 1) bad(`metadata[${list.length === 1 ? 0 : r}].send_counts must be one positive whole count (elements)`);
    return (sc as number[])[0]!;
  });
  for (const [k, e] of list.entries()) {
    const rc = e["recv_counts"];
    if (Array.isArray(rc) && rc.length > 0 && (rc.length !== n || rc.some((c, r) => c !== sends[r]))) bad(`metadata[${k}].recv_counts must be empty or list every rank's send count (${sends.join(", ")})`);
  }
  return sends;
}

/**
 * alltoallv's --variable-size-op-metadata: each rank's send counts to every rank (elements), from
 * one entry for all ranks or one per rank. Displacements, when given, must list a non-negative
 * offset per peer (they place blocks in the buffers; the timing is the counts'); a receive side,
 * when given, must be what the send side delivers (rank j's recv_counts[i] = rank i's send_counts[j]).
 */
export function alltoallvMetadata(file: string, json: unknown, n: number): number[][] {
  const { list, bad } = metadataEntries(file, json, n);
  const at = (r: number) => (list.length === 1 ? 0 : r);
  const counts = (v: unknown, what: string, k: number, allowEmpty: boolean): number[] | undefined => {
    if (allowEmpty && (v === undefined || (Array.isArray(v) && v.length === 0))) return undefined;
    if (!Array.isArray(v) || v.length !== n || v.some((c) => !Number.isInteger(c) || (c as number) < 0)) bad(`metadata[${k}].${what} must list ${n} whole, non-negative counts (elements), one per rank`);
    return v as number[];
  };
  const sends = Array.from({ length: n }, (_, r) => counts(list[at(r)]?.["send_counts"], "send_counts", at(r), false)!);
  for (let r = 0; r < n; r++) {
    const e = list[at(r)]!;
    counts(e["send_displs"], "send_displs", at(r), true);
    counts(e["recv_displs"], "recv_displs", at(r), true);
    const recv = counts(e["recv_counts"], "recv_counts", at(r), true);
    if (recv && recv.some((c, i) => c !== sends[i]![r])) bad(`metadata[${at(r)}].recv_counts must be what the ranks send rank ${r} (${sends.map((row) => row[r]).join(", ")})`);
  }
  if (sends.every((row) => row.every((c) => c === 0))) bad("every send count is 0: nothing to send");
  return sends;
}

export function readJsonFile(file: string, flag: string): unknown {
  let text: string;
  try {
    text = readTextFile(file);
  } catch (e) {
    throw new UsageError(`${flag}: cannot read ${file}: ${(e as Error).message}`);
  }
  try {
    // (A leading byte-order mark is read past, as by the scenario reader.)
    return JSON.parse(text.replace(/^\uFEFF/, ""));
  } catch (e) {
    throw new UsageError(`${flag}: ${file} is not valid JSON: ${(e as Error).message}`);
  }
}

export function groupsOf(v: unknown): unknown {
  if (v !== null && typeof v === "object" && !Array.isArray(v)) return unwrapped((v as Record<string, unknown>)["replica_groups"] ?? (v as Record<string, unknown>)["replicaGroups"] ?? v);
  return v;
}

export function pairsOf(v: unknown): unknown {
  if (v !== null && typeof v === "object" && !Array.isArray(v)) return unwrapped((v as Record<string, unknown>)["src_target_pairs"] ?? (v as Record<string, unknown>)["pairs"] ?? v);
  return v;
}

/** nccom-test's documented files wrap the list in one more level ([[[0, 1], [1, 0]]]): one list of lists of lists is that list. */
function unwrapped(v: unknown): unknown {
  return Array.isArray(v) && v.length === 1 && Array.isArray(v[0]) && (v[0] as unknown[]).length > 0 && (v[0] as unknown[]).every((x) => Array.isArray(x)) ? v[0] : v;
}
