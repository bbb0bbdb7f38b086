// The streaming composition on a second core. A streamed run composes its descriptor rings twice:
// a counting pass before the run, and the streaming pass that fills the rings as the engines
// reach them. The streaming pass is a pure function of the scenario, so it can run on a worker
// thread ahead of the simulation: the worker posts the descriptors it emits in batches; the
// simulation's feed takes the next batch (waiting if it is not there yet) whenever an engine
// needs a descriptor that has not arrived. The rings receive the same bytes in the same order as
// when the pass runs in the simulation's thread, so nothing the run computes changes; the worker
// keeps at most AHEAD descriptors (16 MiB) unread, or two batches where one step holds more, so
// memory stays proportional to what is in flight. A batch's buffer, once read, goes back to the
// worker to be filled again: fresh memory costs its first touch page by page (ring8's 1 GiB
// all-reduce posts about 127 batches of 1 MiB; five runs each, alternating: 1.51-1.90 s, median
// 1.60, with a fresh buffer a batch; 1.50-1.55 s, median 1.50, with them reused).
import { availableParallelism } from "node:os";
import { isMainThread, MessageChannel, receiveMessageOnPort, type MessagePort, type Worker } from "node:worker_threads";
import { countUnits, streamPass, type CountJob, type FeedRunner, type FeedSource, type StreamJob } from "../enc/compile.ts";
import type { DeviceSig } from "../encd/fold.ts";
import { InternalError } from "../ir/errors.ts";
import { opEntry } from "../ir/ops.ts";
import { opPacketBytes, opReduceSlice } from "../enc/gates.ts";
import { DESC_BYTES, MAX_DESC_BYTES } from "../encd/udma.ts";
import { DescPages, forgetFreePages } from "../encd/pages.ts";
import type { VringStore } from "../encd/vring.ts";
import { errorData, moduleWorker, revive, type ErrorData } from "./parallel.ts";

/**
 * Programs with fewer descriptors compose in the run's thread: a worker takes 0.2–0.3 s of a core to
 * start, and the run composes steps itself meanwhile, which smaller programs do not win back
 * (docs/device-model.md §1: ring8's 1 GiB all-reduce, 8.3 M descriptors, is about even).
 */
export const THREAD_MIN_DESCRIPTORS = 8_000_000;
/** Op bytes over the ranks a copying op's descriptor moves, about (`warm`): a 64 KiB copy is two. */
const COPY_BYTES_PER_DESCRIPTOR = 16384;
/** Descriptors a batch gathers before it is posted (1 MiB of them; in practice up to one step's worth more). */
const BATCH_DESCRIPTORS = 1 << 16;
/** Descriptors the worker may have posted and the run not yet taken (16 MiB; a batch more when one step is bigger). */
const AHEAD = 1 << 20;
/**
 * Descriptors a stream the thread started on its own (unit 0's, as soon as its share of a folded
 * count has ended) may post before the run takes its first batch: 16 Mi (256 MiB). The run's thread
 * is still counting then; what the stream composes meanwhile is off the run's path (4,096 ranks:
 * the run took its first batch 0.7 s after the thread's count ended).
 */
const AHEAD_UNTAKEN = 1 << 24;
/** How long the run waits for a batch while the worker shows no sign of life (no step composed) before it gives up. */
const STALL_MS = 60_000;
/** Shared counters: batches posted, batches taken, a stop flag, and steps composed (the worker's heartbeat). */
const POSTED = 0;
const TAKEN = 1;
const STOP = 2;
const BEAT = 3;
/** Counting passes the worker has finished (a folded program's second half of pods, `FeedRunner.count`). */
const COUNTED = 4;

/**
 * One batch: (key index * 2 + side, first descriptor, count) triples and the descriptors in that
 * order; the steps of the pass done when it was posted; and whether the pass has ended.
 */
interface Batch {
  readonly parts: Int32Array;
  readonly steps: number;
  readonly bytes: Uint8Array;
  readonly done: boolean;
  readonly hashes?: readonly (readonly [string, string])[];
  /** An open stream's rings first written in this batch, in order: their indices follow the earlier batches'. */
  readonly keys?: readonly string[];
  /** The last batch: buffers the worker made for the pass (the others were ones the run gave back). */
  readonly buffers?: number;
  readonly error?: ErrorData;
}

/** How a thread feed runs: `composeWhileStarting` (default true, see `attach`); for tests, how long a silent worker is waited for, and the worker's entry (another export stands for a worker that fails to start). */
export interface ThreadFeedOptions {
  readonly composeWhileStarting?: boolean;
  readonly stallMs?: number;
  readonly entry?: string;
  /** A folded program's pods counted on two threads from this many pods on (default `SPLIT_MIN_PODS`). */
  readonly splitMinPods?: number;
  /** False: start a thread even when one is kept from an earlier run (a test of a thread that is not ready yet). */
  readonly kept?: boolean;
}

/**
 * Pods from which a folded program's count is split over the two threads: each thread composes the
 * whole program's set-up and mesh-type stages, a few pods' worth (4,096 ranks: 5 s of set-up, 0.25 s a
 * pod), so fewer pods gain nothing and hold both threads' compositions at once (4 pods: the same
 * time, 50 MB more).
 */
export const SPLIT_MIN_PODS = 8;

/**
 * The runner of `compileStreamed` that puts a big program's streaming pass on a worker thread:
 * when the machine has a second core, this is the main thread (a sweep's jobs already use the
 * cores), and the program has at least `minDescriptors` descriptors. The worker is taken (one kept
 * from an earlier run, or started) before the counting pass when the ops look big enough (a start
 * overlaps the count), and handed back if the count says otherwise. One runner serves one compile;
 * `threads.started` counts the threads it took, `threads.split` the counts it shared, `threads.early`
 * the streams a thread began at the end of its share that the run took, `threads.buffers` the
 * batch buffers they made.
 */
export function threadFeed(minDescriptors = THREAD_MIN_DESCRIPTORS, opts: ThreadFeedOptions = {}): FeedRunner & { readonly threads: { started: number; used: number; split: number; early: number; buffers: number } } {
  let booted: Thread | undefined;
  /** `booted` started unit 0's stream after its count (until a run takes it). */
  let streaming = false;
  const usable = () => isMainThread && availableParallelism() >= 2;
  const threads = { started: 0, used: 0, split: 0, early: 0, buffers: 0 };
  const start = (): Thread => {
    threads.started++;
    return boot(opts.entry ?? "serveFeed", opts.kept ?? true);
  };
  return {
    threads,
    warm(scn, spec, opIndices) {
      // A reduce's descriptors move about a quarter of its CCE packet of op bytes over the ranks
      // each (a packet takes four: trn1's 4 KiB fp32 packet, a KiB a descriptor: ring16 0.97 KiB,
      // ring8 1.04, kangaring32 1.45, hier-2x16 1.87; its uint8 packet, ring over 8 ranks at 1
      // GiB: 0.28 KiB); an op that only copies moves 64 KiB a descriptor pair, about 16 KiB a
      // descriptor (all-gather over 32 ranks at 1 GiB: 2.1 M): a program whose estimate reaches
      // the floor may have enough. (A thread started and not used costs its start, about 0.06 s
      // of a run and more on two cores; one started at the run, the count's time, 0.14 s for ring8
      // at 1 GiB.)
      const estimate = opIndices.reduce((n, i) => {
        const op = scn.ops[i]!;
        // (A CC DMA packet below 64 KiB cuts either finer.)
        const packet = opPacketBytes(spec, scn, op);
        const each = opEntry(op.op).reduces ? opReduceSlice(spec, op.dtype, op.priorityClass, packet) / 4 : (COPY_BYTES_PER_DESCRIPTOR * packet) / MAX_DESC_BYTES;
        return n + (op.bytes * scn.ranks) / each;
      }, 0);
      if (!booted && usable() && estimate >= minDescriptors) booted = start();
    },
    cancel() {
      booted?.close();
      booted = undefined;
      streaming = false;
    },
    count(job) {
      // The thread started for the streaming pass counts the other pods first, while the run's
      // thread counts its own (a folded program's count composes every pod: 4,096 ranks spend
      // most of their time there); then it streams unit 0's rings at once, if they are enough for
      // a thread (the run takes that stream when its fold holds, with the same rings).
      const t = booted;
      if (!t || !usable() || job.units.to < (opts.splitMinPods ?? SPLIT_MIN_PODS)) return undefined;
      threads.split++;
      t.port.postMessage({ count: job, streamFrom: minDescriptors });
      t.sent();
      return {
        wait: () => {
          const answer = counted(t, opts.stallMs ?? STALL_MS);
          if (answer?.sigs) {
            t.ended();
            if (answer.streaming) {
              t.sent();
              streaming = true;
            }
          } else {
            // (It failed or went silent: the run's thread counts every pod, and composes the stream itself or on a new thread.)
            t.close();
            if (booted === t) booted = undefined;
          }
          return answer?.sigs;
        },
      };
    },
    run(job, stores) {
      let t = booted;
      booted = undefined;
      const started = streaming;
      streaming = false;
      if (!usable() || job.descriptors < minDescriptors) {
        t?.close();
        return undefined;
      }
      // (The stream the thread started is unit 0's: not this one when the pods were not alike. It is stopped, and the thread with it.)
      const taken = started && job.unitDevices !== undefined;
      if (t && started && !taken) {
        t.close();
        t = undefined;
      }
      threads.used++;
      if (taken) threads.early++;
      return attach(t ?? start(), job, stores, { composeWhileStarting: opts.composeWhileStarting ?? true, started: taken }, opts.stallMs ?? STALL_MS, (n) => (threads.buffers += n));
    },
  };
}

/** A worker taken for one run, waiting for its job. */
interface Thread {
  readonly port: MessagePort;
  readonly ctrl: Int32Array;
  /** A job was posted to it; `ended`: the run has seen that job's end (its answer, or its last batch). */
  sent(): void;
  ended(): void;
  /** Done with it: kept for the next run if every job it was sent has ended as it should (not an error, not silence); else stopped. */
  close(): void;
}

/** The worker's answer to a count, waited for: its devices' signatures (none when it failed) and whether it went on to stream unit 0; undefined when it composed nothing for `stallMs`. */
function counted(t: Thread, stallMs: number): CountAnswer | undefined {
  return nextMessage(t, COUNTED, stallMs)?.message as CountAnswer | undefined;
}

interface CountAnswer {
  readonly sigs?: readonly DeviceSig[];
  /** It streams unit 0's rings now (an open stream: its batches name the rings). */
  readonly streaming?: boolean;
}

/**
 * The thread's next message, waiting (on its `signal` counter) while it shows signs of life (its
 * heartbeat moves); undefined once it has been silent for `stallMs` (a long step is waited for).
 */
function nextMessage(t: Thread, signal: number, stallMs: number): { message: unknown } | undefined {
  const { port, ctrl } = t;
  let beat = Atomics.load(ctrl, BEAT);
  let since = performance.now();
  for (;;) {
    const seen = Atomics.load(ctrl, signal);
    const m = receiveMessageOnPort(port);
    if (m) return m;
    if (Atomics.wait(ctrl, signal, seen, Math.min(1000, stallMs)) !== "timed-out") continue;
    const now = Atomics.load(ctrl, BEAT);
    if (now !== beat) {
      beat = now;
      since = performance.now();
    } else if (performance.now() - since > stallMs) return undefined;
  }
}

/**
 * Feed threads between runs, kept for the process's next big program: a thread takes 0.3-0.4 s of
 * a core to start (tsx's loader, then the tool loaded again), which a sweep of several big sizes
 * paid for each. A thread goes back here only when every job it was sent has ended as it should
 * (the count answered, the stream's last batch taken; or it was sent none): one stopped part-way
 * (a run that ended before its feed) or one that failed is let go.
 */
const idle: { readonly worker: Worker; readonly control: MessagePort; readonly entry: string }[] = [];
/** The most threads kept between runs (a run uses one). */
const MAX_IDLE = 2;

/** Threads started so far in this process (not taken from `idle`): for tests. */
export let feedThreadsStarted = 0;

function boot(entry: string, reuse: boolean): Thread {
  const kept = reuse ? idle.findIndex((k) => k.entry === entry) : -1;
  const k = kept >= 0 ? idle.splice(kept, 1)[0]! : spawn(entry);
  const ctrl = new Int32Array(new SharedArrayBuffer(32));
  const ch = new MessageChannel();
  k.control.postMessage({ port: ch.port2, ctrl }, [ch.port2]);
  let over = false;
  /** Jobs posted to it whose end the run has not seen. */
  let running = 0;
  return {
    port: ch.port1,
    ctrl,
    sent(): void {
      running++;
    },
    ended(): void {
      running--;
    },
    close(): void {
      if (over) return;
      over = true;
      Atomics.store(ctrl, STOP, 1);
      Atomics.notify(ctrl, TAKEN);
      ch.port1.close();
      if (running === 0 && idle.length < MAX_IDLE) idle.push(k);
      else void k.worker.terminate();
    },
  };
}

/** A new feed thread serving jobs of `entry`. */
function spawn(entry: string): { readonly worker: Worker; readonly control: MessagePort; readonly entry: string } {
  feedThreadsStarted++;
  const ch = new MessageChannel();
  const worker = moduleWorker(import.meta.url, entry, { control: ch.port2 }, [ch.port2]);
  // A worker that fails outside the pass (it could not start) says nothing on the port: the run
  // composes here until a batch comes, or gives up waiting for one (STALL_MS); the event itself
  // must not end the process.
  worker.on("error", () => {});
  const k = { worker, control: ch.port1, entry };
  worker.on("exit", () => {
    const at = idle.indexOf(k);
    if (at >= 0) idle.splice(at, 1);
  });
  return k;
}

/**
 * The streaming pass of `job` on thread `t`, as a feed source of the run's rings `stores`. Until
 * the thread's first batch is there (it starts in a fraction of a second), the run composes steps
 * itself, as without a thread, taking (and dropping) what the thread posts for steps it has done;
 * from the first batch past them on, the thread's batches feed it. Either way each descriptor is
 * the composition's, so the rings get the same bytes. (`composeWhileStarting` false: the thread's
 * batches from the first on.)
 */
function attach(t: Thread, job: StreamJob, stores: Map<string, VringStore>, how: { readonly composeWhileStarting: boolean; readonly started: boolean }, stallMs: number, made: (buffers: number) => void): FeedSource {
  const { port, ctrl } = t;
  const storeOf = (k: string): VringStore => {
    const s = stores.get(k);
    if (!s) {
      t.close();
      throw new InternalError(`streamed ring ${k} has no store`);
    }
    return s;
  };
  // (A stream the thread started names its rings in its batches.)
  const keys = how.started ? [] : [...job.keys];
  const rings = keys.map(storeOf);
  // (A stream the thread started after its count is this one: its batches are on the port.)
  if (!how.started) {
    port.postMessage(job);
    t.sent();
  }
  let hashes: ReadonlyMap<string, string> = new Map();
  let over = false;
  /** Steps the rings hold, and the run's own pass while it composes them itself. */
  let steps = 0;
  let local: FeedSource | undefined = undefined;
  let fed = how.started || !how.composeWhileStarting;
  const close = (): void => {
    over = true;
    t.close();
  };
  /** Take a posted batch (the thread may post the next). */
  const take = (m: { message: unknown }): Batch => {
    Atomics.add(ctrl, TAKEN, 1);
    Atomics.notify(ctrl, TAKEN);
    const batch = m.message as Batch;
    if (batch.error) {
      close();
      throw revive(batch.error);
    }
    if (batch.done) made(batch.buffers ?? 0);
    return batch;
  };
  /** A batch's buffer, read: the thread fills it again (fresh memory costs its first touch, page by page). */
  const giveBack = (batch: Batch): void => {
    const buffer = batch.bytes.buffer as ArrayBuffer;
    port.postMessage({ back: buffer }, [buffer]);
  };
  /** Append what the rings do not hold yet of a batch's descriptors; false when the pass has ended. */
  const apply = (batch: Batch): boolean => {
    for (const k of batch.keys ?? []) {
      keys.push(k);
      rings.push(storeOf(k));
    }
    let at = 0;
    for (let k = 0; k < batch.parts.length; k += 3) {
      const which = batch.parts[k]!;
      const from = batch.parts[k + 1]!;
      const n = batch.parts[k + 2]!;
      const ring = rings[which >> 1]!;
      const list = which & 1 ? ring.rx : ring.tx;
      const held = list.count - from;
      if (held < 0) throw new InternalError(`ring ${keys[which >> 1]}: the composition thread's batch starts at descriptor ${from}, the ring holds ${list.count}`);
      if (held < n) list.append(batch.bytes, at + held * DESC_BYTES, n - held);
      at += n * DESC_BYTES;
    }
    steps = batch.steps;
    if (batch.done) {
      hashes = new Map(batch.hashes ?? []);
      t.ended();
      close();
    } else giveBack(batch);
    return !batch.done;
  };
  return {
    step(): boolean {
      if (over) return false;
      if (!fed) {
        // Whatever the thread has posted, without waiting: batches of steps done here are dropped.
        for (let m = receiveMessageOnPort(port); m; m = receiveMessageOnPort(port)) {
          const batch = take(m);
          if (batch.steps <= steps) {
            if (!batch.done) giveBack(batch);
            continue;
          }
          fed = true;
          return apply(batch);
        }
        local ??= streamPass(job, stores);
        const more = local.step();
        steps++;
        if (!more) {
          hashes = local.hashes();
          close();
        }
        return more;
      }
      const m = nextMessage(t, POSTED, stallMs);
      if (m) return apply(take(m));
      close();
      throw new InternalError(`the composition thread composed nothing for ${stallMs / 1000} s and posted no descriptors`);
    },
    hashes: () => hashes,
    close,
  };
}

/**
 * The worker's side: each run's port and control words come on `control` (a thread is kept from
 * run to run); on that port, a counting job may come first (a folded program's second half of
 * pods), then the streaming pass, run into rings of its own and posted in batches.
 */
export function serveFeed(data: { control: MessagePort }): void {
  data.control.on("message", ({ port, ctrl }: { port: MessagePort; ctrl: Int32Array }) => {
    const next = (m: StreamJob | { readonly count: CountJob; readonly streamFrom: number }): void => {
      if (!("count" in m)) return compose(m, port, ctrl);
      const stream = countFor(m.count, m.streamFrom, port, ctrl);
      if (stream) compose(stream, port, ctrl, AHEAD_UNTAKEN);
      else port.once("message", next);
    };
    port.once("message", next);
  });
}

/**
 * Count `job`'s units and post their devices' signatures (none, on an error: the run counts them
 * itself); and unit 0's streaming pass, when it has `streamFrom` descriptors or more: the answer
 * says so, and the stream is to start at once.
 */
function countFor(job: CountJob, streamFrom: number, port: MessagePort, ctrl: Int32Array): StreamJob | undefined {
  let answer: CountAnswer = {};
  let stream: StreamJob | undefined;
  try {
    const counted = countUnits(job, () => Atomics.add(ctrl, BEAT, 1));
    if (counted.stream.descriptors >= streamFrom) stream = counted.stream;
    answer = { sigs: counted.sigs, ...(stream ? { streaming: true } : {}) };
  } catch {
    stream = undefined;
  }
  port.postMessage(answer);
  Atomics.add(ctrl, COUNTED, 1);
  Atomics.notify(ctrl, COUNTED);
  return stream;
}

/** The streaming pass of `job`, posted in batches; at most `firstAhead` descriptors untaken until the run takes its first batch, then `AHEAD`. */
function compose(job: StreamJob, port: MessagePort, ctrl: Int32Array, firstAhead = AHEAD): void {
  try {
    // (Every list counts what it appends into one counter: what waits to be posted is read there.)
    const appended = { n: 0 };
    const ring = (): VringStore => ({ tx: new DescPages(true, appended), rx: new DescPages(true, appended) });
    const stores = new Map<string, VringStore>(job.keys.map((k) => [k, ring()]));
    /** The rings the run knows, in its order: the job's, then an open stream's as they come. */
    const keys = [...job.keys];
    const lists = keys.flatMap((k) => [stores.get(k)!.tx, stores.get(k)!.rx]);
    const sent = new Array<number>(lists.length).fill(0);
    const src = streamPass(job, stores, ring);
    let posted = 0;
    /** Descriptors posted in all batches so far. */
    let postedDescriptors = 0;
    let steps = 0;
    /** Descriptors of each batch posted (to know how many the run has not taken). */
    const sizes: number[] = [];
    let untaken = 0;
    let counted = 0;
    /** Buffers the run has read and given back, to fill again; and how many were made. */
    const spare: ArrayBuffer[] = [];
    let made = 0;
    const bufferFor = (bytes: number): ArrayBuffer => {
      for (let m = receiveMessageOnPort(port); m; m = receiveMessageOnPort(port)) spare.push((m.message as { back: ArrayBuffer }).back);
      const k = spare.findIndex((b) => b.byteLength >= bytes);
      if (k >= 0) return spare.splice(k, 1)[0]!;
      made++;
      return new ArrayBuffer(Math.max(bytes, 2 * BATCH_DESCRIPTORS * DESC_BYTES));
    };
    for (let more = true; more; ) {
      // Steps until a batch's worth is waiting (or the pass ends).
      let waiting = 0;
      do {
        more = src.step();
        steps++;
        Atomics.store(ctrl, BEAT, steps);
        waiting = appended.n - postedDescriptors;
      } while (more && waiting < BATCH_DESCRIPTORS);
      // (The rings bound since the last batch, named for the run: an open stream's stores are in the order bound.)
      const fresh = stores.size > keys.length ? [...stores.keys()].slice(keys.length) : [];
      for (const k of fresh) {
        keys.push(k);
        lists.push(stores.get(k)!.tx, stores.get(k)!.rx);
        sent.push(0, 0);
      }
      const parts: number[] = [];
      const buffer = bufferFor(waiting * DESC_BYTES);
      const bytes = new Uint8Array(buffer, 0, waiting * DESC_BYTES);
      let at = 0;
      for (let i = 0; i < lists.length; i++) {
        const list = lists[i]!;
        const n = list.count - sent[i]!;
        if (n === 0) continue;
        parts.push(i, sent[i]!, n);
        list.copyOut(sent[i]!, list.count, bytes, at);
        at += n * DESC_BYTES;
        sent[i] = list.count;
        list.release(list.count);
      }
      if (at !== waiting * DESC_BYTES) throw new InternalError(`a batch of ${at / DESC_BYTES} descriptors where the lists counted ${waiting} appended`);
      postedDescriptors += waiting;
      const batch: Batch = { parts: Int32Array.from(parts), steps, bytes, done: !more, ...(fresh.length > 0 ? { keys: fresh } : {}), ...(more ? {} : { hashes: [...src.hashes()], buffers: made }) };
      port.postMessage(batch, [buffer]);
      sizes.push(waiting);
      untaken += waiting;
      Atomics.store(ctrl, POSTED, ++posted);
      Atomics.notify(ctrl, POSTED);
      // Stay at most AHEAD descriptors ahead of the run, or one batch untaken when a step holds more
      // (a long ring's round: the run would otherwise wait for each next one to be composed).
      for (;;) {
        if (Atomics.load(ctrl, STOP)) return;
        const taken = Atomics.load(ctrl, TAKEN);
        for (; counted < taken; counted++) untaken -= sizes[counted]!;
        if (untaken < (taken === 0 ? firstAhead : AHEAD) || posted - taken < 2) break;
        Atomics.wait(ctrl, TAKEN, taken, 1000);
      }
    }
  } catch (e) {
    port.postMessage({ parts: new Int32Array(0), steps: 0, bytes: new Uint8Array(0), done: true, error: errorData(e) } satisfies Batch);
    Atomics.add(ctrl, POSTED, 1);
    Atomics.notify(ctrl, POSTED);
  } finally {
    // (A kept thread serves run after run: its free pages go with each job's rings.)
    forgetFreePages();
  }
}
