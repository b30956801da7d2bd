// The pool of warm anchors, what every platform's shares: anchors started
// ahead of need, keyed by what the host gives an anchor it starts and could
// change since (the anchor executable, its warm arguments, the host's
// identity as the platform reads it), each used once, retired when idle
// (`CORDON_WARM` ms, default WARM_IDLE_MS; 0: none is started), when the
// host's identity is not the one it was started with, or when it exits by
// itself. How one is started, watched, handed its command and ended is the
// platform's (a WarmDriver: ./warm.ts on Linux, ./windows-warm.ts on
// Windows); the guarantees each keeps are written there. As many wait as
// bursts of spawns have needed (up to MAX_WARM); those a burst left that
// later spawns do not use retire when idle, and the count goes down with them.
import { isMainThread } from 'node:worker_threads';
import { debug } from '../debug.js';
import { WARM_IDLE_MS } from '../defaults.js';

/** What a platform does with its warm anchors (the pool decides when). */
export interface WarmDriver<A extends { readonly pid: number }> {
  /** What the host is now, as an anchor it starts would take it (compared whole). */
  ids(): string;
  /** Starts one ahead of need; `done` with it once it waits, or with nothing (none could be started). */
  start(path: string, warmArgs: readonly string[], done: (anchor: A | undefined) => void): void;
  /** While it waits in the pool: `exited` once it exits by itself. */
  watch(anchor: A, warmArgs: readonly string[], exited: () => void): void;
  /** Ends a waiting one (closes its channel: it exits running nothing); `exited`: it is gone already. */
  end(anchor: A, exited: boolean): void;
  /** At the host's exit, with those still waiting (POSIX: resumed, so that each sees its host gone). */
  atExit?(waiting: A[]): void;
}

interface Warm<A> {
  key: string;
  /** The driver's ids() when it was started. */
  ids: string;
  anchor: A;
  idle: NodeJS.Timeout;
  /** Handed to a launch (its channel is the launch's now) or ended: never ended again. */
  done: boolean;
}

/** Per shape: the ready ones (oldest first), how many are starting, how many are wanted. */
interface Shape<A> {
  ready: Warm<A>[];
  starting: number;
  /**
   * How many are kept ready: 1, one more each time a spawn of a shape used
   * before found none ready (spawns come faster than one is started, or
   * several at once: a burst of 8 leaves 8 ready for the next), up to
   * MAX_WARM; one less each time one is retired unused. The newest ready one
   * is taken, so those a burst left beyond what the spawns since need are
   * the ones left unused.
   */
  depth: number;
  /** A spawn of this shape has come before. */
  used: boolean;
}

/** What a launch that may use a warm anchor gets: what the one that took the command gave (`started`), and the next one's start. */
export interface WarmTake<T> {
  started: T | undefined;
  /** Starts the next warm anchor of this shape (the launch calls it once its own anchor has launched the command, so the two do not compete for the CPU). */
  next(): void;
}

/** At most this many warm anchors in all (a new one retires the oldest of another shape). */
const MAX_WARM = 8;
/** None from here on (disableWarm()). */
let disabledAll = false;
const pools: Array<WarmPool<{ readonly pid: number }>> = [];

/** No warm anchors from here on (the CLI: one spawn per process). */
export function disableWarm(): void {
  disabledAll = true;
  for (const pool of pools) pool.retireAll();
}

/** How long a warm anchor waits for a spawn (ms); 0: none is started. */
function idleMs(): number {
  const v = process.env.CORDON_WARM;
  if (v === undefined || v === '') return WARM_IDLE_MS;
  if (/^\d{1,10}$/.test(v)) return Math.min(Number(v), 2 ** 31 - 1);
  debug('CORDON_WARM=%s is not a number of milliseconds: %d', v, WARM_IDLE_MS);
  return WARM_IDLE_MS;
}

function keyOf(path: string, args: readonly string[], ids: string): string {
  return [path, ...args, ids].join('\0');
}

export class WarmPool<A extends { readonly pid: number }> {
  private readonly shapes = new Map<string, Shape<A>>();
  /** Bumped by retireAll(): an anchor started before it is retired as it arrives. */
  private generation = 0;
  private exitHook = false;
  private readonly disabled: boolean;

  /**
   * `platform`: the one this driver is for. None is started from a worker
   * thread (POSIX: no SIGCHLD there; everywhere: its channel would outlive
   * the worker).
   */
  constructor(
    private readonly driver: WarmDriver<A>,
    platform: NodeJS.Platform,
  ) {
    this.disabled = !isMainThread || process.platform !== platform;
    pools.push(this as unknown as WarmPool<{ readonly pid: number }>);
  }

  private get off(): boolean {
    return this.disabled || disabledAll;
  }

  /**
   * The warm anchor for this launch, handed its command by `handOver` (what
   * it returns is `started`), or none (none ready, or it could not take it:
   * `handOver` threw; start one cold). Undefined where this launch cannot
   * use one (`warmArgs` undefined, disabled, CORDON_WARM=0).
   */
  take<T>(path: string, warmArgs: readonly string[] | undefined, handOver: (anchor: A) => T): WarmTake<T> | undefined {
    if (this.off || warmArgs === undefined) return undefined;
    const wait = idleMs();
    if (wait === 0) return undefined;
    const ids = this.driver.ids();
    this.retireStale(ids);
    const key = keyOf(path, warmArgs, ids);
    const next = (): void => this.schedule(key, path, warmArgs, ids, wait);
    const shape = this.shapeOf(key);
    const w = shape.ready.pop();
    const usedBefore = shape.used;
    shape.used = true;
    if (!w) {
      if (usedBefore) shape.depth = Math.min(shape.depth + 1, MAX_WARM);
      return { started: undefined, next };
    }
    clearTimeout(w.idle);
    let started: T;
    try {
      started = handOver(w.anchor);
    } catch (err) {
      debug('warm anchor %d could not take its command (%s): a cold one is started', w.anchor.pid, (err as Error).message);
      this.retire(w);
      return { started: undefined, next };
    }
    w.done = true;
    return { started, next };
  }

  /** Retires every ready one; one still starting is retired as it arrives. Returns those retired now. */
  retireAll(): A[] {
    this.generation++;
    const out: A[] = [];
    for (const shape of this.shapes.values()) {
      for (const w of [...shape.ready]) {
        out.push(w.anchor);
        this.retire(w);
      }
    }
    return out;
  }

  /** Those ready for a spawn (a barrier for tests: the pool has taken them in). */
  ready(): A[] {
    return [...this.shapes.values()].flatMap((shape) => shape.ready.map((w) => w.anchor));
  }

  private shapeOf(key: string): Shape<A> {
    let shape = this.shapes.get(key);
    if (!shape) this.shapes.set(key, (shape = { ready: [], starting: 0, depth: 1, used: false }));
    return shape;
  }

  private count(): number {
    let n = 0;
    for (const shape of this.shapes.values()) n += shape.ready.length + shape.starting;
    return n;
  }

  /**
   * Retires every ready one started while the host was someone else: never
   * used, and ended now, rather than left waiting for its idle timeout.
   */
  private retireStale(ids: string): void {
    for (const shape of this.shapes.values()) for (const w of [...shape.ready]) if (w.ids !== ids) this.retire(w);
  }

  /** Warm anchors of this shape up to its depth. */
  private schedule(key: string, path: string, warmArgs: readonly string[], ids: string, wait: number): void {
    // (Not for a host that changed since the launch that asked for it.)
    if (ids !== this.driver.ids()) return;
    const shape = this.shapeOf(key);
    while (!this.off && shape.ready.length + shape.starting < shape.depth) {
      if (this.count() >= MAX_WARM && !this.retireOldest(key)) return;
      this.start(key, shape, ids, path, warmArgs, wait);
    }
  }

  /** Retires the oldest ready anchor of another shape; false if there is none. */
  private retireOldest(except: string): boolean {
    for (const [key, shape] of this.shapes) {
      if (key !== except && shape.ready.length > 0) {
        this.retire(shape.ready[0]!);
        return true;
      }
    }
    return false;
  }

  private start(key: string, shape: Shape<A>, ids: string, path: string, warmArgs: readonly string[], wait: number): void {
    if (!this.exitHook && this.driver.atExit) {
      this.exitHook = true;
      const atExit = this.driver.atExit.bind(this.driver);
      process.once('exit', () => atExit(this.ready()));
    }
    shape.starting++;
    const gen = this.generation;
    this.driver.start(path, warmArgs, (anchor) => {
      shape.starting--;
      if (!anchor) return;
      const w: Warm<A> = { key, ids, anchor, idle: setTimeout(() => this.retireIdle(w), wait).unref(), done: false };
      // Until taken (the channel then watches it): an exit drops it.
      this.driver.watch(anchor, warmArgs, () => this.retire(w, true));
      shape.ready.push(w);
      if (this.off || gen !== this.generation || shape.ready.length > shape.depth || ids !== this.driver.ids()) this.retire(w);
    });
  }

  /** Unused for its idle time: retired, and its shape keeps one fewer ready. */
  private retireIdle(w: Warm<A>): void {
    const shape = this.shapes.get(w.key);
    if (shape) shape.depth = Math.max(1, shape.depth - 1);
    this.retire(w);
  }

  /** Out of the pool, and ended unless it was handed to a launch (`exited`: it is gone already). */
  private retire(w: Warm<A>, exited = false): void {
    const shape = this.shapes.get(w.key);
    if (shape) shape.ready = shape.ready.filter((x) => x !== w);
    clearTimeout(w.idle);
    if (w.done) return;
    w.done = true;
    this.driver.end(w.anchor, exited);
  }
}
