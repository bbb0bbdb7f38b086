// The simulated machine: devices (HBM, DMA engines, TopSPs + semaphores) joined by the link
// fabric, built from a device spec; the host ports its engines and TopSPs reach the machine
// through; the run itself (image-loader.ts loads the image, faults.ts injects faults, outcome.ts reports).
import { type DeviceSpec, type Fault } from "../src/ir/spec.ts";
import { podNodesOf } from "../src/ir/topology.ts";
import { InternalError, SimError } from "../src/ir/errors.ts";
import type { Tick } from "../src/ir/time.ts";
import { addressFields, decodeAddress, describeAddress, ENGINES_PER_SENG, readAddress, type DecodedAddress } from "../src/encd/address.ts";
import { get32 } from "../src/encd/bits.ts";
import type { ProgramImage } from "../src/encd/image.ts";
import { DESC_BYTES } from "../src/encd/udma.ts";
import { DEFAULT_MAX_EVENTS, Kernel, Prio } from "./kernel/kernel.ts";
import type { SteadyVisitor } from "./kernel/steady.ts";
import type { DmaEngine, DmaHost } from "./hw/dma.ts";
import { Fabric } from "./hw/fabric.ts";
import { DeviceMemory, regionAt, type Region } from "./hw/memory.ts";
import { SemaphoreBlock } from "./hw/semaphore.ts";
import type { TopspHost } from "./hw/topsp.ts";
import type { TraceSink } from "./trace.ts";
import { deviceFaults, dropWaits, linkFaults, type FaultError } from "./faults.ts";
import { loadDeviceImage, type DeviceModel } from "./image-loader.ts";
import { checkBalance, hangReport, stat, VIOLATIONS_KEPT, type SimResult, type Violation } from "./outcome.ts";
import { ProxyQueue, type ProxyHost } from "./hw/proxy.ts";
import { RaceDetector, type Clock } from "./verify/races.ts";
import { SymbolicMemory } from "./verify/symbolic-memory.ts";
import { SteadyState } from "./steady-state.ts";

export interface SimOptions {
  /** Keep payload bytes (needed to check values); false = timing only. */
  readonly storePayload: boolean;
  readonly maxEvents?: number;
  /** An observer of spans and counters (traces). */
  readonly trace?: TraceSink;
  /** Faults to inject (the scenario's "faults"). */
  readonly faults?: readonly Fault[];
  /** Detect races (reads and writes not ordered through semaphores): each is a violation. */
  readonly races?: boolean;
  /**
   * Track payload symbolically (`--check symbolic`): these HBM ranges start as seed `id`'s bytes,
   * and `SimResult.symbolic` reads back which seeds' bytes reached a range.
   */
  readonly symbolic?: readonly { readonly addr: number; readonly bytes: number; readonly id: number; readonly device?: number }[];
  /** Symbolic runs: asked now and then whether memory is running out (with the bytes its sets of contributions hold outside the heap); a reason stops the run (SIM1518). */
  readonly symbolicFull?: (outsideBytes: number) => string | undefined;
  /** Called about once a second of wall time (every `progressMs`) while the run goes on: how far it is. */
  readonly progress?: (p: RunProgress) => void;
  readonly progressMs?: number;
  /**
   * Skip whole periods of a timing-only run once its state repeats (sim/steady-state.ts): the same
   * picoseconds, events and counters as running them. Default on; false runs every event.
   */
  readonly fastForward?: boolean;
  /** Tests: skip every repeat found of at least this many events (the default skips those worth the looking). */
  readonly fastForwardMinSkip?: number;
}

/** How far a run is: descriptors run of those the rings hold (so far handed over), events, simulated time. */
export interface RunProgress {
  readonly descriptorsRun: number;
  readonly descriptors: number;
  readonly events: number;
  readonly simPs: number;
}

/** Wall-clock milliseconds between two progress calls. */
const PROGRESS_MS = 1000;

export function simulate(spec: DeviceSpec, image: ProgramImage, opts: SimOptions): SimResult {
  try {
    return run(spec, image, opts);
  } finally {
    // A run that ends before its descriptor feed does (a hang, an error) lets the producer go.
    image.feed?.close?.();
  }
}

function run(spec: DeviceSpec, image: ProgramImage, opts: SimOptions): SimResult {
  if (image.format !== "ccsim-program-image" || image.version !== 1) throw new SimError("SIM1501", `not a version 1 program image`, { value: image.format });
  const kernel = new Kernel();
  const maxDevice = Math.max(0, ...image.devices.map((d) => d.device));
  const nodes = image.nodes ?? 1;
  const perNode = spec.topology.kind === "ring" ? (nodes > 1 || image.fold ? image.devicesPerNode : maxDevice + 1) : spec.devices;
  const deviceCount = perNode * nodes;
  if (maxDevice >= deviceCount) throw new SimError("SIM1502", `image names device ${maxDevice}; ${spec.name} has ${deviceCount}`, { value: maxDevice });
  if (nodes > 1 && !spec.network && podNodesOf(spec.topology, nodes) < nodes) throw new SimError("SIM1514", `a ${nodes}-node image on ${spec.name}, which has no network`, { value: nodes });
  const fabric = new Fabric(spec, perNode, nodes);
  // A folded image holds unit 0: traffic to another unit's device lands on unit 0's device in its place.
  const fold = image.fold;
  if (fold && (!Number.isInteger(fold.units) || fold.units < 2 || !Number.isInteger(fold.unitDevices) || fold.unitDevices < 1 || fold.units * fold.unitDevices > deviceCount || maxDevice >= fold.unitDevices)) {
    throw new SimError("SIM1517", `a folded image must hold unit 0 of at least 2 units of ${fold.unitDevices} device ids within the ${deviceCount} devices (it names ${fold.units} units and device ${maxDevice})`, { value: fold });
  }
  const home = fold ? (d: number) => d % fold.unitDevices : (d: number) => d;
  const faults = opts.faults ?? [];
  const faultNotes: string[] = [];
  const faultError: FaultError = (i, message) => {
    throw new SimError("SIM1601", message, { path: `faults[${i}]`, value: faults[i] });
  };
  linkFaults(fabric, spec, faults, faultNotes, faultError);
  const lost = faults.map((f, i) => ({ f, i, seen: 0 })).filter((x) => x.f.kind === "lost-increment");
  const imageDevices = image.devices.map((di) => dropWaits(di, faults, faultNotes));
  const devices = new Map<number, DeviceModel>();
  /** The same models by device id (the engines' per-packet lookups). */
  const byId: (DeviceModel | undefined)[] = [];
  const opEnd: Tick[] = [];
  const dev = (d: number): DeviceModel => {
    const m = byId[d];
    if (!m) throw new SimError("SIM1503", `access to device ${d}, which has no program`, { value: d });
    return m;
  };
  const semaBlock = (d: number, ts: number): SemaphoreBlock => {
    const m = dev(d);
    let b = m.semas.get(ts);
    if (!b) {
      if (ts >= spec.topsp.perDevice) throw new SimError("SIM1504", `TopSP ${ts} does not exist on ${spec.name}`, { value: ts });
      b = new SemaphoreBlock(kernel, spec.topsp.semaphores, spec.topsp.semaWakePs);
      if (trace) b.onChange = (sema, value) => trace.sema(d, ts, sema, value, kernel.now);
      m.semas.set(ts, b);
      steady?.addBlock(b);
    }
    return b;
  };

  /** The steady-state search (timing-only runs), once the machine is loaded. */
  let steady: SteadyState | undefined;
  const homeOf = (a: DecodedAddress): DecodedAddress => (a.device === home(a.device) ? a : { ...a, device: home(a.device) });
  const trace = opts.trace;
  const violations: Violation[] = [];
  const seen = new Map<Violation["kind"], number>();
  const violation = (kind: Violation["kind"], message: string): void => {
    const n = (seen.get(kind) ?? 0) + 1;
    seen.set(kind, n);
    if (n <= VIOLATIONS_KEPT) violations.push({ kind, message });
  };
  const races = opts.races ? new RaceDetector((message) => violation("race", message)) : undefined;
  const symbolic = opts.symbolic ? new SymbolicMemory(opts.symbolicFull) : undefined;
  const landed = addressFields();
  const rung = addressFields();
  const dmaHost: DmaHost = {
    kernel,
    fabric,
    trace,
    memory: (d) => dev(d).memory,
    faultHit: (message) => void faultNotes.push(message),
    home,
    races,
    symbolic,
    quietRegions(d) {
      return races || symbolic ? undefined : dev(home(d)).writable;
    },
    land(addr, from, bytes, len, acc, sym) {
      // Decoded into the run's own record (no object per landing), its device the stand-in's.
      const a = readAddress(addr, from, landed);
      a.device = home(a.device);
      if (a.kind === "hbm") {
        const m = dev(a.device);
        if (!inside(m.writable, a.offset, len)) violation("stray write", `a ${len}-byte write to ${describeAddress(addr, from)} at ${kernel.now} ps lands outside every buffer, scratch and slot region the image declares`);
        if (races && acc) races.write(a.device, a.offset, len, acc);
        if (symbolic) {
          if (sym) symbolic.write(a.device, a.offset, len, sym.stream, sym.at);
          else symbolic.clear(a.device, a.offset, len);
        }
        if (bytes) m.memory.write(a.offset, bytes);
        return;
      }
      if (a.kind === "sema") {
        if (len !== 4 || !bytes) throw new SimError("SIM1505", `a ${len}-byte write to semaphore ${describeAddress(addr, from)}; semaphore writes are 4 bytes`, { value: len });
        if (a.window === "read") throw new SimError("SIM1506", `write to the read window of ${describeAddress(addr, from)}`, { value: addr });
        const v = get32(bytes, 0);
        if (a.window === "inc") {
          for (const x of lost) {
            const f = x.f as Extract<Fault, { kind: "lost-increment" }>;
            if (f.device !== a.device || (f.semaphore !== undefined && f.semaphore !== a.sema)) continue;
            if (++x.seen === f.nth) {
              faultNotes.push(`increment ${f.nth} of ${f.semaphore === undefined ? `dev${f.device}` : `dev${f.device} semaphore ${f.semaphore}`} lost (fault): ${describeAddress(addr, from)} at ${(kernel.now / 1e6).toFixed(3)} us`);
              return;
            }
          }
        }
        const block = semaBlock(a.device, a.topsp);
        if (acc) block.release(a.sema, acc.clock, acc.agent, acc.epoch);
        block.write(a.sema, a.window, v);
        return;
      }
      throw new InternalError(`DMA landing at ${describeAddress(addr, from)}, which the engine should have refused`);
    },
  };
  const topspHost: TopspHost = {
    kernel,
    trace,
    races: races !== undefined,
    mmio(d, addr, value, mask, clock) {
      // (Decoded into a record of its own: a doorbell rings engines, which decode nothing into it.)
      const a = readAddress(addr, d, rung);
      if (a.kind !== "doorbell" || a.device !== d) throw new SimError("SIM1508", `dev${d}: core MMIO write to ${describeAddress(addr, d)} is not a local DMA doorbell`, { value: addr });
      const engines = dev(d).engines;
      // A broadcast doorbell rings every engine of the SENG its mask names, in engine order.
      if (a.engine !== undefined) ringDoorbell(engines, d, a.engine, a.queue, a.dir, value, clock);
      else for (let e = 0; e < ENGINES_PER_SENG; e++) if ((mask >>> e) & 1) ringDoorbell(engines, d, a.seng * ENGINES_PER_SENG + e, a.queue, a.dir, value, clock);
    },
    opDone(op, _d, _ts, t) {
      opEnd[op] = Math.max(opEnd[op] ?? 0, t);
    },
    signal(from, addr, value, clock) {
      const to = decodeAddress(addr, from);
      const a = homeOf(to);
      if (a.kind !== "sema" || a.window === "read") throw new SimError("SIM1513", `dev${from}: core signal to ${describeAddress(addr, from)}, which is not a semaphore write window`, { value: addr });
      const apply = () => {
        const block = semaBlock(a.device, a.topsp);
        if (clock) block.release(a.sema, clock);
        block.write(a.sema, a.window as "set" | "inc" | "dec", value);
      };
      // The route is the real one; the semaphore is its stand-in's in a folded run.
      const hops = to.device === from ? 0 : fabric.route(from, to.device).length;
      if (hops === 0) apply();
      else kernel.after(hops * fabric.latencyPs, Prio.LAND, apply);
    },
  };

  for (const di of imageDevices) {
    if (di.device >= deviceCount) throw new SimError("SIM1502", `image names device ${di.device}; ${spec.name} has ${deviceCount}`, { value: di.device });
    const model: DeviceModel = { memory: new DeviceMemory(opts.storePayload), writable: [], engines: new Map(), topsps: new Map(), semas: new Map() };
    devices.set(di.device, model);
    byId[di.device] = model;
    loadDeviceImage(model, di, { spec, races, dmaHost, topspHost, feed: image.feed, semaBlock });
  }
  deviceFaults(devices, faults, faultNotes, faultError);
  for (const sd of opts.symbolic ?? []) {
    const a = decodeAddress(sd.addr, sd.device);
    if (a.kind !== "hbm" || !devices.has(a.device)) throw new SimError("SIM1516", `symbolic seed ${sd.id} at ${describeAddress(sd.addr, sd.device)} is not HBM of a device in the program`, { value: sd.addr });
    symbolic!.seed(a.device, a.offset, sd.bytes, sd.id);
  }
  const proxies: ProxyQueue[] = [];
  const dropped = (d: number, off: number, len: number): boolean => dev(d).memory.dropped(off, len);
  const proxyHost: ProxyHost = {
    kernel,
    fabric,
    network: spec.network!,
    payload: (d, off, len) => (dropped(d, off, len) ? undefined : dev(d).memory.read(off, len)),
    home,
    land: dmaHost.land,
    trace,
    races,
    symbolic,
    quiet(addr, from, len) {
      const a = decodeAddress(addr, from);
      if (a.kind !== "hbm" || a.device >= deviceCount) return false;
      const r = dmaHost.quietRegions(a.device);
      return r !== undefined && regionAt(r, a.offset, len) !== undefined;
    },
    dropped,
  };
  for (const di of image.devices) for (const q of di.proxyQueues ?? []) proxies.push(new ProxyQueue(proxyHost, di.device, semaBlock(di.device, q.topsp), q.topsp, q.sema, q.fifo, q.folds));
  for (const p of proxies) p.start();
  const maxEvents = opts.maxEvents ?? DEFAULT_MAX_EVENTS;
  // (A program of fewer than STEADY_MIN_DESCRIPTORS descriptors has too few periods to skip for the looking to pay.)
  const descriptors = descriptorsOf(image);
  const big = opts.fastForwardMinSkip !== undefined || descriptors >= STEADY_MIN_DESCRIPTORS;
  steady = opts.fastForward !== false && big && !opts.storePayload && !races && !symbolic && !trace && faults.length === 0 ? steadyState(kernel, fabric, devices, proxies, maxEvents, descriptors, opts.fastForwardMinSkip, (v) => {
    v.same(opEnd.length);
    for (const t of opEnd) v.same(t ?? -1);
    v.same(violations.length);
    v.same(faultNotes.length);
  }) : undefined;
  // The runtime's launch reaches every TopSP at once, launchPs after the run starts.
  const launch = spec.topsp.launchPs;
  for (const m of devices.values()) for (const t of m.topsps.values()) launch > 0 ? kernel.at(launch, Prio.ISSUE, () => t.start()) : t.start();
  const summary = kernel.run(maxEvents, opts.progress ? progressTick(kernel, devices, image, opts.progress, opts.progressMs ?? PROGRESS_MS) : undefined);

  const hang = hangReport(devices, proxies, summary.endPs, faultNotes);
  if (!hang) checkBalance(image, devices, violation, seen, violations);
  /** An HBM address read back (a result's bytes). */
  const readBack = (addr: number, from: number): Extract<DecodedAddress, { kind: "hbm" }> => {
    const a = decodeAddress(addr, from);
    if (a.kind !== "hbm") throw new SimError("SIM1512", `read-back of ${describeAddress(addr, from)}, which is not HBM`, { value: addr });
    return a;
  };
  return {
    endPs: summary.endPs,
    events: summary.events,
    opEndPs: opEnd,
    hang,
    packets: [...devices.values()].reduce((n, m) => n + [...m.engines.values()].reduce((k, e) => k + e.packets, 0), 0),
    // A folded run's figures are unit 0's: its links and NICs (the other units' carried nothing).
    links: (fold ? fabric.resourcesOf((d) => d < fold.unitDevices) : [...fabric.links.values(), ...fabric.nicTx, ...fabric.nicRx]).map(stat),
    engines: [...devices.values()].flatMap((m) => [...m.engines.values()].map((e) => stat(e.res))),
    hbm: [...devices.keys()].sort((a, b) => a - b).map((d) => stat(fabric.hbm[d]!)),
    violations,
    ...(steady ? { steady: steady.report } : {}),
    read(addr, len, from = 0) {
      const a = readBack(addr, from);
      return dev(a.device).memory.read(a.offset, len);
    },
    each(addr, len, fn, from = 0) {
      const a = readBack(addr, from);
      dev(a.device).memory.each(a.offset, len, fn);
    },
    symbolic(addr, len, fn, from = 0) {
      const a = decodeAddress(addr, from);
      if (a.kind !== "hbm" || !symbolic) throw new SimError("SIM1512", `symbolic read-back of ${describeAddress(addr, from)}, which is not HBM of a symbolic run`, { value: addr });
      symbolic.visit(a.device, a.offset, len, fn);
    },
  };
}

/** Descriptors of a program below which a timing-only run does not look for a period (ring8's 256 MiB all-reduce has 2 M; a repeat of a few periods skips little). */
const STEADY_MIN_DESCRIPTORS = 1 << 20;

/** The descriptors the program's rings hold (a streamed ring's whole count). */
function descriptorsOf(image: ProgramImage): number {
  let n = 0;
  for (const d of image.devices) for (const q of d.queues) n += q.streamed ? q.streamed.txCount + q.streamed.rxCount : (q.tx.length + q.rx.length) / DESC_BYTES;
  return n;
}

/** The steady-state search over the machine, marked by the steps of the first TopSP's first channel. */
function steadyState(kernel: Kernel, fabric: Fabric, devices: ReadonlyMap<number, DeviceModel>, proxies: readonly ProxyQueue[], maxEvents: number, descriptors: number, minSkip: number | undefined, rest: (v: SteadyVisitor) => void): SteadyState | undefined {
  const models = [...devices.keys()].sort((a, b) => a - b).map((d) => devices.get(d)!);
  const first = models.flatMap((m) => [...m.topsps.values()].sort((a, b) => a.index - b.index))[0];
  if (!first) return undefined;
  first.marks = true;
  const blocks = models.flatMap((m) => [...m.semas.keys()].sort((a, b) => a - b).map((ts) => m.semas.get(ts)!));
  return new SteadyState({ kernel, blocks, resources: [...fabric.links.values(), ...fabric.hbm, ...fabric.nicTx, ...fabric.nicRx], devices: models, proxies, rest, maxEvents, descriptors, ...(minSkip !== undefined ? { minSkip } : {}) });
}

function ringDoorbell(engines: ReadonlyMap<number, DmaEngine>, d: number, e: number, queue: number, dir: "m2s" | "s2m", value: number, clock: Clock | undefined): void {
  const engine = engines.get(e);
  if (!engine) throw new SimError("SIM1509", `dev${d}: doorbell for DMA engine ${e}, which has no queues`, { value: e });
  engine.doorbell(queue, dir, value, clock);
}

/** [off, off + len) lies inside one of the sorted regions. */
function inside(regions: readonly Region[], off: number, len: number): boolean {
  return regionAt(regions, off, len) !== undefined;
}

/** A kernel tick that reports progress at most once every `everyMs` of wall time. */
function progressTick(kernel: Kernel, devices: ReadonlyMap<number, { readonly engines: ReadonlyMap<number, DmaEngine> }>, image: ProgramImage, report: (p: RunProgress) => void, everyMs: number): () => void {
  // The rings' descriptors: a streamed ring's whole count (it fills as the run goes), another's as loaded.
  const descriptors = descriptorsOf(image);
  let last = performance.now();
  return () => {
    const now = performance.now();
    if (now - last < everyMs) return;
    last = now;
    let run = 0;
    for (const m of devices.values()) for (const e of m.engines.values()) for (const q of e.queues.values()) run += q.txHead + q.rxHead;
    report({ descriptorsRun: run, descriptors, events: kernel.executed, simPs: kernel.now });
  };
}
