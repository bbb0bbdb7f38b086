// What a program needs decided before anything is composed: where its ranks sit on the preset,
// its streams and channel sets, the channel count its ops are posted at, and a TopSP's semaphore
// layout. The compile context (context.ts) builds the program on these.
import { EncAlgType } from "../ir/enums.ts";
import { CompileError } from "../ir/errors.ts";
import type { DeviceSpec, Scenario } from "../ir/spec.ts";
import { devicesPerNode, podNodesOf } from "../ir/topology.ts";
import { ADDRESS_BLOCK, MAX_DEVICES } from "../encd/address.ts";
import { postOperations, type Posted } from "./post.ts";
import { tapeSemaphores } from "./registry.ts";

/** Device ids per node: all of a table preset's devices; a ring preset's is sized to what is used. */
export function idsPerNodeOf(scn: Scenario, spec: DeviceSpec): number {
  return spec.topology.kind === "ring" ? devicesPerNode(scn) : spec.devices;
}

/**
 * A TopSP's semaphores, in order: the ring channels' (three a fold a slot a channel set), the
 * mesh-tape programs' (the families' needs for the largest group), the ring proxy triggers (one a
 * fold a slot a set), the device barrier's three, the trigger of a mesh-tape program's proxy
 * queue across nodes, then (a concurrent program) the program-end barrier's three: its streams
 * meet there, and a stream that arrives early must not count as an arrival at another stream's
 * step barrier. `used`: how many in all.
 */
export function semaphoreLayout(foldN: number, slotsPerTopsp: number, perStream: number, largestGroup: number, concurrent: boolean): { meshBase: number; proxyBase: number; barrierBase: number; meshProxySema: number; endBarrierBase: number; used: number } {
  const ringSemas = 3 * foldN * slotsPerTopsp * perStream;
  const proxyBase = ringSemas + tapeSemaphores(largestGroup);
  const barrierBase = proxyBase + perStream * slotsPerTopsp * foldN;
  const endBarrierBase = concurrent ? barrierBase + 4 : barrierBase;
  return { meshBase: ringSemas, proxyBase, barrierBase, meshProxySema: barrierBase + 3, endBarrierBase, used: barrierBase + (concurrent ? 7 : 4) };
}

export function check(cond: boolean, code: string, message: string, path: string, value: unknown): void {
  if (!cond) throw new CompileError(code, message, { path, value });
}

/** Whether ops `opIndices` run as a concurrent program (each stream on TopSPs and queues of its own). */
export function concurrentOf(scn: Scenario, opIndices: readonly number[]): boolean {
  return scn.concurrent === true && opIndices.length > 1;
}

/** The streams of the program, in order (one, unless it is concurrent). */
export function streamsOf(scn: Scenario, opIndices: readonly number[]): number[] {
  return concurrentOf(scn, opIndices) ? [...new Set(opIndices.map((i) => scn.ops[i]!.stream))].sort((a, b) => a - b) : [0];
}

/**
 * Channel sets per stream: 0 for the replica groups' own rings; a hierarchical op adds 1 (its
 * intra-node stages) and 2 (its inter-node stage), each with its own semaphores, slots and DMA
 * engines; a pipelined hierarchical all-reduce runs its intra all-gather beside the next slices'
 * intra reduce-scatter: a fourth. So 1, 3 or 4; a stream's sets follow the previous stream's, and
 * concurrent streams share the engines, so one stream's sets take them all.
 */
export function setsPerStream(scn: Scenario, opIndices: readonly number[], p: Posted): number {
  const hier = opIndices.some((i) => p.operations[i]!.groupAlgs.includes(EncAlgType.HIER));
  return hier ? (scn.hierarchical.slices > 1 ? 4 : 3) : 1;
}

/**
 * Ops `opIndices` posted at the channel count the program runs: the preset's unless the scenario
 * sets one; where the program's channel sets would need more DMA engines (foldN a channel) or ring
 * channel records (32) than a rank has at the preset's count, as many channels as fit, and `note`
 * says why. (A count the scenario sets is kept: the context refuses it if it does not fit.)
 */
export function postProgram(scn: Scenario, spec: DeviceSpec, opIndices: readonly number[], chunkBytes: number): { posted: Posted; channels: number; note?: string } {
  const post = (c: number): Posted => postOperations({ scn, spec, channels: c, chunkBytes });
  // A program of source/target-pairs ops only (permute, send/recv) takes the preset's permute channels.
  const pairsOnly = opIndices.every((i) => scn.ops[i]!.pairs !== undefined);
  const preset = pairsOnly ? (spec.collectives.permuteChannels ?? spec.ring.defaultChannels) : spec.ring.defaultChannels;
  if (scn.channels !== undefined) return { posted: post(scn.channels), channels: scn.channels };
  const engines = spec.dma.enginesPerCore * spec.collectives.virtualCoreSize;
  const streams = streamsOf(scn, opIndices).length;
  const foldN = spec.ring.foldN;
  const fits = (p: Posted, c: number): boolean => {
    const sets = setsPerStream(scn, opIndices, p);
    return sets * c * foldN <= engines && sets * streams * c <= 32;
  };
  const atPreset = post(preset);
  let channels = preset;
  let posted = atPreset;
  while (channels > 1 && !fits(posted, channels)) posted = post(--channels);
  if (channels === preset) return { posted, channels };
  const sets = setsPerStream(scn, opIndices, atPreset);
  const what = `${sets > 1 ? `a hierarchical op's ${sets} channel sets` : "one channel set"}${streams > 1 ? ` on each of ${streams} concurrent streams` : ""}`;
  const need = sets * preset * foldN > engines ? `${sets * preset * foldN} DMA engines (${foldN} a channel); a rank has ${engines}` : `${sets * streams * preset} ring channel records; there are 32`;
  const note = `${channels}, not ${spec.name}'s ${preset}${pairsOnly && spec.collectives.permuteChannels !== undefined ? " (collectives.permuteChannels)" : ""}: at ${preset}, ${what} would need ${need}`;
  return { posted: { ...posted, explain: posted.explain.map((e) => ({ ...e, channelsNote: note })) }, channels, note };
}

/**
 * Where a scenario's ranks can sit on a preset, checked: logical cores per device, whole devices
 * per node, nodes in pods, device ids within the address map and its 64-id blocks.
 */
export function placementOf(scn: Scenario, spec: DeviceSpec): { podNodes: number; idsPerNode: number; podIds: number; vcore: number } {
  const podNodes = podNodesOf(spec.topology, scn.nodes);
  check(scn.nodes === podNodes || spec.network !== undefined, "CMP1301", `${spec.name} has no network: a multi-node scenario needs a preset with a "network" section${spec.topology.kind === "table" && spec.topology.podNodes ? ` (or at most ${spec.topology.podNodes} nodes of its pod)` : ""}`, "nodes", scn.nodes);
  check(scn.nodes % podNodes === 0, "CMP1301", `${scn.nodes} nodes do not fill whole pods of ${podNodes} nodes`, "nodes", scn.nodes);
  // A rank is one logical core: virtualCoreSize physical NeuronCores, with their TopSPs and DMA engines.
  const vcore = spec.collectives.virtualCoreSize;
  const ranksPerDeviceMax = Math.floor(spec.coresPerDevice / vcore);
  check(scn.ranksPerDevice <= ranksPerDeviceMax, "CMP1302", `${spec.name} has ${spec.coresPerDevice} NeuronCores per device, ${ranksPerDeviceMax} rank(s) at logical core size ${vcore}`, "ranksPerDevice", scn.ranksPerDevice);
  const deviceCount = devicesPerNode(scn);
  check(Number.isInteger(deviceCount), "CMP1303", `${scn.ranks} ranks do not fill whole devices of ${scn.ranksPerDevice} on each of ${scn.nodes} nodes`, "ranks", scn.ranks);
  check(deviceCount <= spec.devices, "CMP1303", `${scn.ranks} ranks at ${scn.ranksPerDevice} per device need ${deviceCount} devices${scn.nodes > 1 ? " per node" : ""}; ${spec.name} has ${spec.devices}`, "ranks", scn.ranks);
  const idsPerNode = idsPerNodeOf(scn, spec);
  // An address names a device of the sender's 64-id block: a pod must fit one, and beyond one
  // block every block must hold whole nodes.
  const ids = idsPerNode * scn.nodes;
  check(ids <= MAX_DEVICES, "CMP1303", `${scn.nodes} nodes of ${idsPerNode} devices exceed the ${MAX_DEVICES} device ids of the address map`, "nodes", scn.nodes);
  const podIds = podNodes * idsPerNode;
  check(podIds <= ADDRESS_BLOCK, "CMP1303", `a pod of ${podNodes} nodes of ${idsPerNode} devices exceeds the ${ADDRESS_BLOCK} device ids one address block holds`, "nodes", scn.nodes);
  check(ids <= ADDRESS_BLOCK || ADDRESS_BLOCK % podIds === 0, "CMP1303", `${scn.nodes} nodes of ${idsPerNode} devices: beyond ${ADDRESS_BLOCK} device ids a ${podNodes > 1 ? "pod" : "node"}'s devices must tile the ${ADDRESS_BLOCK}-id address blocks (1, 2, 4, 8, 16, 32 or 64 devices a ${podNodes > 1 ? "pod" : "node"})`, "nodes", scn.nodes);
  return { podNodes, idsPerNode, podIds, vcore };
}
