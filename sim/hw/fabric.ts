// Device-to-device links (one resource per direction) with hop-by-hop routing, and the
// pipelined timing of one DMA packet through engine, HBM, links and the destination.
import { type DeviceSpec } from "../../src/ir/spec.ts";
import { acrossNodes, breadthFirst, podNodesOf, routingAdjacency } from "../../src/ir/topology.ts";
import { SimError } from "../../src/ir/errors.ts";
import { WIDE_ZERO, type Tick } from "../../src/ir/time.ts";
import { Resource } from "../kernel/kernel.ts";

export class Fabric {
  readonly links = new Map<string, Resource>();
  readonly hbm: Resource[];
  private readonly nextHop: number[][];
  /** Devices the routing table spans: the pod's, or one node's (routes never leave a node then). */
  private readonly hopSpan: number;
  readonly latencyPs: number;
  /** Some link has a time from which it is down (a fault): packets check their route. */
  linksDown = false;

  /** Devices per node; node k's device d is k * devicesPerNode + d. */
  readonly devicesPerNode: number;
  /** Each node's (or each device's) NIC, one resource per direction (the host network proxy drives them). */
  readonly nicTx: Resource[];
  readonly nicRx: Resource[];
  private readonly nicPerDevice: boolean;
  /** Nodes per NeuronLink pod (1: none): Z links join a pod's nodes, so routes cross nodes inside it. */
  readonly podNodes: number;
  /** A switch topology: each device's port to the switch, one resource per direction. */
  private readonly ports?: { readonly up: Resource[]; readonly down: Resource[] };

  constructor(spec: DeviceSpec, devicesPerNode: number, nodes = 1) {
    this.devicesPerNode = devicesPerNode;
    this.podNodes = podNodesOf(spec.topology, nodes);
    const adj = acrossNodes(routingAdjacency(spec.topology, devicesPerNode), nodes, this.podNodes);
    this.nicPerDevice = spec.network?.nicPerDevice === 1;
    const nics = !spec.network ? 0 : this.nicPerDevice ? nodes * devicesPerNode : nodes;
    const nicName = (k: number) => (this.nicPerDevice ? `dev${k}.nic` : `nic${k}`);
    this.nicTx = Array.from({ length: nics }, (_, k) => new Resource(`${nicName(k)}.tx`, spec.network?.bytesPerSecond ?? 0));
    this.nicRx = Array.from({ length: nics }, (_, k) => new Resource(`${nicName(k)}.rx`, spec.network?.bytesPerSecond ?? 0));
    if (spec.topology.kind === "switch") {
      // Every transfer crosses the sender's port up and the receiver's port down.
      this.ports = {
        up: adj.map((_, d) => new Resource(`port ${d}->switch`, spec.link.bytesPerSecond)),
        down: adj.map((_, d) => new Resource(`port switch->${d}`, spec.link.bytesPerSecond)),
      };
      adj.forEach((_, d) => {
        this.links.set(`${d}>sw`, this.ports!.up[d]!);
        this.links.set(`sw>${d}`, this.ports!.down[d]!);
      });
    } else for (let a = 0; a < adj.length; a++) for (const b of adj[a]!) this.links.set(`${a}>${b}`, new Resource(`link ${a}->${b}`, spec.link.bytesPerSecond));
    this.hbm = adj.map((_, d) => new Resource(`hbm${d}`, spec.hbm.bytesPerSecond));
    this.latencyPs = spec.link.latencyPs;
    // nextHop[src][dst]: first hop of a shortest path, breadth first in the preset's routing order
    // (dimension order on a torus), so the choice is deterministic. Every pod (every node, without
    // pods) routes alike inside itself: one pod's table serves all (ids offset by the pod's first).
    this.hopSpan = this.podNodes * devicesPerNode;
    // The first pod's devices link only among themselves, so its table spans hopSpan ids.
    const span = adj.slice(0, this.hopSpan);
    this.nextHop = span.map((_, src) => breadthFirst(span, src).first);
  }

  get deviceCount(): number {
    return this.hbm.length;
  }

  /**
   * The link directions and NIC sides of the devices `inUnit` accepts: a link whose two ends are
   * such devices (a switch port counts as an end of its device's), each NIC one of them uses.
   */
  resourcesOf(inUnit: (device: number) => boolean): Resource[] {
    const end = (x: string): boolean => x === "sw" || inUnit(Number(x));
    const links = [...this.links].filter(([key]) => key.split(">").every(end)).map(([, r]) => r);
    const nics = [...new Set(Array.from({ length: this.deviceCount }, (_, d) => d).filter(inUnit).map((d) => this.nicOf(d)))].filter((n) => n < this.nicTx.length);
    return [...links, ...nics.map((n) => this.nicTx[n]!), ...nics.map((n) => this.nicRx[n]!)];
  }

  /** The NIC a device's network traffic uses: its own, or its node's. */
  nicOf(device: number): number {
    return this.nicPerDevice ? device : this.nodeOf(device);
  }

  nodeOf(device: number): number {
    return Math.floor(device / this.devicesPerNode);
  }

  /** Routes already walked, by src * 2^16 + dst (the links do not change once a run starts). */
  private readonly routes = new Map<number, readonly Resource[]>();

  /** Links crossed from `src` to `dst`, in order (NeuronLink crosses nodes only in a pod's Z links). */
  route(src: number, dst: number): readonly Resource[] {
    const key = src * 65536 + dst;
    const known = this.routes.get(key);
    if (known) return known;
    const r = this.walk(src, dst);
    this.routes.set(key, r);
    return r;
  }

  private walk(src: number, dst: number): Resource[] {
    if (this.ports && this.nodeOf(src) === this.nodeOf(dst)) return src === dst ? [] : [this.ports.up[src]!, this.ports.down[dst]!];
    if (Math.floor(src / this.hopSpan) !== Math.floor(dst / this.hopSpan)) throw new SimError("SIM1202", `device ${src} (node ${this.nodeOf(src)}) has no NeuronLink path to device ${dst} (node ${this.nodeOf(dst)}); ${this.podNodes > 1 ? "traffic between pods" : "inter-node traffic"} goes through the network proxy`, { value: { src, dst } });
    const out: Resource[] = [];
    const base = src - (src % this.hopSpan);
    let at = src;
    while (at !== dst) {
      const hop = this.nextHop[at - base]?.[dst - base];
      if (hop === undefined || hop < 0) throw new SimError("SIM1201", `no route from device ${src} to device ${dst}`, { value: { src, dst } });
      out.push(this.links.get(`${at}>${base + hop}`)!);
      at = base + hop;
    }
    return out;
  }
}

export interface PacketTiming {
  /** When the engine may start its next packet (the data has left the source side). */
  engineFree: Tick;
  /** When the last byte is at the destination. */
  land: Tick;
}

/**
 * Timing of one packet through its stages, added one by one (`begin`, `stage`..., `end`). Contention
 * is resolved on a latency-free timeline: each resource serves its share of bytes (plus fixed cost)
 * in the earliest free slot from the moment the previous stage began serving (cut-through), and is
 * free for other transfers outside that slot. The data timeline adds the propagation delays: a
 * stage finishes no earlier than its own service end plus the latency accumulated before it, nor
 * before the previous stage's data has arrived. Resources with no rate limit and no fixed cost
 * never contend. One clock is reused from packet to packet (an engine's): it allocates nothing.
 */
export class PacketClock implements PacketTiming {
  /** Spans resources are busy, when traced. */
  onBusy: ((res: Resource, bytes: number, start: Tick, end: Tick) => void) | undefined = undefined;
  engineFree: Tick = WIDE_ZERO;
  land: Tick = WIDE_ZERO;
  // Times stay plain doubles: arithmetic from the start (`- 0`) and no time assigned on one branch
  // only (either would make V8 box each time it changes: a dozen allocations per packet).
  private start = WIDE_ZERO;
  private cs = WIDE_ZERO;
  private finish = WIDE_ZERO;
  private lat = WIDE_ZERO;
  private cumLat = WIDE_ZERO;

  /** A packet that may start at `t0`. */
  begin(t0: Tick): void {
    const start = t0 - 0;
    this.start = start;
    this.cs = start;
    this.finish = start;
    this.lat = 0;
    this.cumLat = 0;
    this.engineFree = start;
  }

  /** Its next stage: `bytes` through `res` (none: only fixed time) plus `fixedPs`, then `latPs` of propagation; `source` stages hold the engine. */
  stage(res: Resource | undefined, bytes: number, fixedPs: number, latPs: number, source: boolean): void {
    const own = fixedPs + (res ? res.psFor(bytes) : 0);
    const busy = res !== undefined && own > 0;
    const cs = busy ? res.reserve(this.cs, own, this.start) - 0 : this.cs;
    const cf = cs + (busy ? own : 0);
    if (busy) {
      res.busyPs += own;
      this.onBusy?.(res, bytes, cs, cf);
    }
    if (res) res.bytes += bytes;
    this.cs = cs;
    this.finish = Math.max(cf + this.cumLat, this.finish + this.lat);
    this.lat = latPs;
    this.cumLat += latPs;
    if (source) this.engineFree = Math.max(this.engineFree, cf);
  }

  /** The packet's last stage has been added: `land` is when its last byte is at the destination. */
  end(): PacketTiming {
    this.land = this.finish + this.lat;
    return this;
  }
}
