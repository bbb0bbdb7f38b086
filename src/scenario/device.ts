// Loader + validator for device presets (devices/<instance>.json).
import { HBM_LIMIT } from "../encd/address.ts";
import { ALG_NAMES, NO_HOST_COSTS, algTypeOf, type AlgName, type DeviceSpec, type HostCosts } from "../ir/spec.ts";
import { type Topology } from "../ir/topology.ts";
import { Reader } from "./reader.ts";

const TOP_KEYS = ["$schema", "name", "description", "arch", "devices", "coresPerDevice", "topology", "topsp", "dma", "hbm", "sbuf", "link", "ring", "network", "collectives", "host", "sources"] as const;
const COLLECTIVE_KEYS = ["supportedAlgorithms", "virtualCoreSize", "meshMaxBytes", "meshMaxBytesTwoRanks", "cceReducePacketBytes"] as const;
/** Optional collectives numbers (each needs a source when given). */
const COLLECTIVE_OPTIONAL = ["rdhMinBytes", "rdhMaxBytes", "meshMaxBytesMultiNode", "flatRingMinBytes", "meshFolds", "permuteChannels"] as const;
/** The host section's costs (all optional; each needs a source when given). */
const HOST_KEYS = ["syncPs", "nodeSyncPs", "iterationPs", "countsPs"] as const;

/** Largest device count the address map's routing bits can name. */
export const MAX_DEVICES = 32;

/** Fixed costs and latencies (ps): at most 1 ms each, so simulated time stays an exact integer. */
export const MAX_COST_PS = 1_000_000_000;
/** The runtime's host-side costs per collective (topsp.launchPs, host.*): at most 10 ms each. */
export const MAX_HOST_COST_PS = 10_000_000_000;
/** Receive slots of a ring channel: at least three (see the ring section's check). */
export const MIN_RING_SLOTS = 3;
/** Receive slots of a network hop, at most: a step's drain target is an 8-bit field. */
const MAX_NETWORK_SLOTS = 255;
/** A ring chunk: at most 1 GiB (a chunk times ranks, channels and slots stays an exact integer). */
export const MAX_CHUNK_BYTES = 2 ** 30;
/** The algorithms' size windows, per rank: at most 1 TiB. */
export const MAX_WINDOW_BYTES = 2 ** 40;
/** Byte rates: 0 (unlimited, the ideal machines) or from 100 MB/s to 1 PB/s. */
export const MIN_RATE = 100_000_000;
export const MAX_RATE = 1_000_000_000_000_000;

/** A byte rate in bytes per second (0: no limit). */
function rate(f: Reader): number {
  const v = f.int(0, MAX_RATE);
  if (v > 0 && v < MIN_RATE) f.fail("SCN1101", `must be 0 (no limit) or at least ${MIN_RATE} bytes per second`);
  return v;
}

/** The source note of a preset field a run's `--set` changed. */
export const SET_SOURCE = "set on the command line (--set)";

/**
 * `sets`: the dotted paths a run's `--set` changed (loadDeviceWith): the number fields at or under
 * them are noted as set, and the notes of fields they took away (a `--set topology={...}` without
 * its routeOrder) are dropped.
 */
export function parseDeviceSpec(file: string, json: unknown, sets?: readonly string[]): DeviceSpec {
  const r = new Reader(file, "", json);
  r.keys(TOP_KEYS);
  const numbers: string[] = [];
  /** A section of required numbers (and `optional` keys, read by the caller). */
  const section = <K extends string>(name: string, keys: readonly K[], check: (k: K, f: Reader) => number, optional: readonly string[] = []): Record<K, number> => {
    const s = r.get(name);
    s.keys([...keys, ...optional]);
    const out = {} as Record<K, number>;
    for (const k of keys) {
      out[k] = check(k, s.get(k));
      numbers.push(`${name}.${k}`);
    }
    return out;
  };
  const devices = r.get("devices").int(1, MAX_DEVICES);
  const coresPerDevice = r.get("coresPerDevice").int(1, 8);
  if (32 % Math.min(32, r.get("dma").get("enginesPerCore").int(1, 32)) !== 0) r.get("dma").get("enginesPerCore").fail("SCN1101", "must divide 32 (a SENG's broadcast mask)");
  numbers.push("arch", "devices", "coresPerDevice");
  const topology = parseTopology(r.get("topology"), devices);
  if (topology.kind === "table") numbers.push("topology.neighbours");
  if (topology.kind === "table" && topology.routeOrder) numbers.push("topology.routeOrder");
  if (topology.kind === "table" && topology.podNodes !== undefined) numbers.push("topology.podNodes");
  // launchPs is optional (0: the TopSPs start as the run starts; the ideal machines).
  const topspR = r.get("topsp");
  const launchPs = topspR.opt("launchPs")?.int(0, MAX_HOST_COST_PS) ?? 0;
  if (topspR.has("launchPs")) numbers.push("topsp.launchPs");
  const topsp = {
    ...section("topsp", ["perDevice", "semaphores", "entryDecodePs", "stepIssuePs", "semaWakePs"] as const, (k, f) =>
      k === "perDevice" ? f.int(1, 16) : k === "semaphores" ? f.int(1, 256) : f.int(0, MAX_COST_PS),
      ["launchPs"],
    ),
    launchPs,
  };
  if (topsp.perDevice % coresPerDevice !== 0) r.get("topsp").get("perDevice").fail("SCN1101", `must be a multiple of coresPerDevice (${coresPerDevice})`);
  const dma = section("dma", ["enginesPerCore", "queuesPerEngine", "collectiveQueue", "engineBytesPerSecond", "descriptorCostPs", "maxDescriptorBytes", "cceMaxElements"] as const, (k, f) =>
    k === "enginesPerCore"
      ? f.int(1, 32)
      : k === "queuesPerEngine"
        ? f.int(1, 16)
        : k === "maxDescriptorBytes"
          ? f.int(64, 65536)
          : k === "cceMaxElements"
            ? f.int(1, 1 << 20)
            : k === "engineBytesPerSecond"
              ? rate(f)
              : f.int(0, MAX_COST_PS),
  );
  if (dma.collectiveQueue >= dma.queuesPerEngine) r.get("dma").get("collectiveQueue").fail("SCN1101", `must be below queuesPerEngine (${dma.queuesPerEngine})`);
  // (The device barriers run on the queue below the collective one, and further streams below that.)
  if (dma.collectiveQueue < 1) r.get("dma").get("collectiveQueue").fail("SCN1101", "must be at least 1: a device barrier runs on the queue below the collective one");
  if (dma.enginesPerCore * coresPerDevice > 256) r.get("dma").get("enginesPerCore").fail("SCN1101", "engines per device must be at most 256 (the DMA register map)");
  const hbmRates = section("hbm", ["bytesPerSecond"] as const, (_k, f) => rate(f), ["capacityBytes"]);
  // A device's HBM capacity (absent: no limit, as on the ideal machines); buffers must fit it.
  const capacity = r.get("hbm").opt("capacityBytes")?.int(1 << 20, HBM_LIMIT / 2);
  if (capacity !== undefined) numbers.push("hbm.capacityBytes");
  const hbm = { ...hbmRates, ...(capacity !== undefined ? { capacityBytes: capacity } : {}) };
  // SBUF per NeuronCore (absent: not given); from 1 MiB to 1 GiB.
  const sbuf = r.has("sbuf") ? section("sbuf", ["bytesPerCore"] as const, (_k, f) => f.int(1 << 20, 1 << 30)) : undefined;
  const link = section("link", ["bytesPerSecond", "latencyPs"] as const, (k, f) => (k === "bytesPerSecond" ? rate(f) : f.int(0, MAX_COST_PS)));
  // A ring step sends both halves of its first piece before it receives, and returns a credit to its
  // previous rank only with its next send: with two slots every rank waits for a third credit that no
  // rank can return (exit 4). Three slots is the least that always runs.
  const ring = section("ring", ["foldN", "chunkBytes", "bufferSlots", "defaultChannels"] as const, (k, f) =>
    k === "bufferSlots" && typeof f.value === "number" && f.value < MIN_RING_SLOTS ? f.fail("SCN1005", `must be at least ${MIN_RING_SLOTS}: a ring step sends both halves of its first piece before it receives and returns a credit only with its next send, so with ${f.value} slot(s) every rank of a ring waits for a credit no rank can return (the program deadlocks)`) :
    k === "foldN" ? f.int(1, 4) : k === "bufferSlots" ? f.int(2, 64) : k === "defaultChannels" ? f.int(1, 32) : f.int(64, MAX_CHUNK_BYTES),
  );
  // A ring step that crosses the network drains the hop's credits (all of its receive slots home)
  // before it issues, and its spad_slot_entry holds that count in 8 bits: 255 slots at most.
  const network = r.has("network")
    ? section("network", ["bytesPerSecond", "latencyPs", "messageCostPs", "bufferSlots", "nicPerDevice"] as const, (k, f) =>
        k === "bufferSlots" && typeof f.value === "number" && f.value > MAX_NETWORK_SLOTS ? f.fail("SCN1005", `must be at most ${MAX_NETWORK_SLOTS}: a ring step across the network waits for all of the hop's slots to be free again, and its step entry (spad_slot_entry.drain_target) holds that count in 8 bits`) :
        k === "bufferSlots" ? f.int(2, MAX_NETWORK_SLOTS) : k === "nicPerDevice" ? f.int(0, 1) : k === "bytesPerSecond" ? rate(f) : f.int(0, MAX_COST_PS),
      )
    : undefined;
  const collectives = parseCollectives(r.get("collectives"));
  const host = parseHost(r, numbers);
  numbers.push(...COLLECTIVE_KEYS.map((k) => `collectives.${k}`));
  for (const k of COLLECTIVE_OPTIONAL) if (r.get("collectives").has(k)) numbers.push(`collectives.${k}`);
  const sources = r.get("sources");
  const src: Record<string, string> = {};
  for (const k of Object.keys(sources.object())) src[k] = sources.get(k).string();
  if (sets) {
    const under = (k: string) => sets.some((p) => k === p || k.startsWith(`${p}.`));
    for (const n of numbers) if (under(n)) src[n] = SET_SOURCE;
    for (const k of Object.keys(src)) if (under(k) && !numbers.includes(k)) delete src[k];
  }
  for (const n of numbers) {
    if (!src[n]) sources.fail("SCN1102", `no source given for "${n}" (every number needs a source note or "assumption: ...")`, n, `sources.${n}`);
  }
  for (const k of Object.keys(src)) {
    if (!numbers.includes(k)) sources.fail("SCN1002", `source for unknown field "${k}"`, k, `sources.${k}`);
  }
  return {
    name: r.get("name").string(),
    description: r.get("description").string(),
    arch: r.get("arch").int(1, 4),
    devices,
    coresPerDevice,
    topology,
    topsp,
    dma,
    hbm,
    ...(sbuf ? { sbuf } : {}),
    link,
    ring,
    network,
    collectives,
    host,
    sources: src,
  };
}

/** The optional host section: costs around each collective (ps), every one named in `numbers`. */
function parseHost(r: Reader, numbers: string[]): HostCosts {
  if (!r.has("host")) return NO_HOST_COSTS;
  const h = r.get("host");
  h.keys([...HOST_KEYS, "algorithmPs"]);
  const cost = (k: string): number => {
    if (!h.has(k)) return 0;
    numbers.push(`host.${k}`);
    return h.get(k).int(0, MAX_HOST_COST_PS);
  };
  const algorithmPs: Partial<Record<AlgName, number>> = {};
  if (h.has("algorithmPs")) {
    const a = h.get("algorithmPs");
    for (const k of Object.keys(a.object())) {
      if (!(ALG_NAMES as readonly string[]).includes(k)) a.get(k).fail("SCN1002", `unknown algorithm "${k}" (one of ${ALG_NAMES.join(", ")})`, k);
      algorithmPs[k as AlgName] = a.get(k).int(0, MAX_HOST_COST_PS);
      numbers.push(`host.algorithmPs.${k}`);
    }
  }
  return { syncPs: cost("syncPs"), nodeSyncPs: cost("nodeSyncPs"), iterationPs: cost("iterationPs"), countsPs: cost("countsPs"), algorithmPs };
}

/** `{ [key]: v }` when v is given, else nothing (an optional field left out, not set to undefined). */
function present<K extends string>(key: K, v: number | undefined): Partial<Record<K, number>> {
  return v === undefined ? {} : ({ [key]: v } as Record<K, number>);
}

function parseCollectives(c: Reader): DeviceSpec["collectives"] {
  c.keys([...COLLECTIVE_KEYS, ...COLLECTIVE_OPTIONAL]);
  const supported = c.get("supportedAlgorithms").items().map((a) => algTypeOf(a.oneOf(ALG_NAMES)));
  if (!supported.includes(0)) c.get("supportedAlgorithms").fail("SCN1101", `must include "ring" (the universal fallback)`);
  const pkt = c.get("cceReducePacketBytes");
  const sizes = pkt.items().map((x) => {
    const n = x.int(32, 65536);
    if (n % 32 !== 0) x.fail("SCN1006", "must be a multiple of 32 bytes");
    return n;
  });
  if (sizes.length !== 5) pkt.fail("SCN1015", `needs one size per priority class (5), got ${sizes.length}`, sizes.length);
  return {
    supportedAlgorithms: supported,
    virtualCoreSize: c.get("virtualCoreSize").int(1, 2),
    meshMaxBytes: c.get("meshMaxBytes").int(0, MAX_WINDOW_BYTES),
    meshMaxBytesTwoRanks: c.get("meshMaxBytesTwoRanks").int(0, MAX_WINDOW_BYTES),
    ...present("meshMaxBytesMultiNode", c.opt("meshMaxBytesMultiNode")?.int(0, MAX_WINDOW_BYTES)),
    ...present("flatRingMinBytes", c.opt("flatRingMinBytes")?.int(0, MAX_WINDOW_BYTES)),
    cceReducePacketBytes: sizes,
    rdhMinBytes: c.opt("rdhMinBytes")?.int(0, MAX_WINDOW_BYTES) ?? 0,
    rdhMaxBytes: c.opt("rdhMaxBytes")?.int(0, MAX_WINDOW_BYTES) ?? Number.MAX_SAFE_INTEGER,
    meshFolds: c.opt("meshFolds")?.int(1, 32) ?? 1,
    permuteChannels: c.opt("permuteChannels")?.int(1, 32),
  };
}

function parseTopology(t: Reader, devices: number): Topology {
  const kind = t.get("kind").oneOf(["table", "ring", "switch"] as const);
  if (kind === "ring" || kind === "switch") {
    t.keys(["kind"]);
    return { kind };
  }
  t.keys(["kind", "neighbours", "routeOrder", "podNodes"]);
  const podNodes = t.opt("podNodes")?.int(2, 4);
  const rows = t.get("neighbours").items();
  if (rows.length !== devices) t.get("neighbours").fail("SCN1103", `has ${rows.length} rows, expected one per device (${devices})`, rows.length);
  const neighbours = rows.map((row, d) =>
    row.items().map((cell) => {
      const n = cell.int(0, devices - 1);
      if (n === d) cell.fail("SCN1103", `device ${d} lists itself as a neighbour`);
      return n;
    }),
  );
  neighbours.forEach((row, d) =>
    row.forEach((n, i) => {
      if (!neighbours[n]?.includes(d)) rows[d]!.items()[i]!.fail("SCN1103", `link ${d}->${n} has no reverse link ${n}->${d}`);
    }),
  );
  // Every device must reach every other over the links (a route is a path of them).
  const seen = new Set([0]);
  for (const queue = [0]; queue.length > 0; ) for (const n of neighbours[queue.shift()!]!) if (!seen.has(n)) seen.add(n), queue.push(n);
  if (seen.size < devices) {
    const lost = Array.from({ length: devices }, (_, d) => d).filter((d) => !seen.has(d));
    t.get("neighbours").fail("SCN1103", `device ${lost[0]} cannot reach device 0 over the links${lost.length > 1 ? ` (nor can ${lost.length - 1} more)` : ""}: every device needs a path of links to every other`, lost[0]);
  }
  const orderR = t.opt("routeOrder");
  const pod = podNodes === undefined ? {} : { podNodes };
  if (!orderR) return { kind, neighbours, ...pod };
  const width = Math.max(...neighbours.map((r) => r.length));
  const routeOrder = orderR.items().map((c) => c.int(0, width - 1));
  if (new Set(routeOrder).size !== width || routeOrder.length !== width) orderR.fail("SCN1103", `must list each of the ${width} table columns once`, routeOrder);
  return { kind, neighbours, routeOrder, ...pod };
}
