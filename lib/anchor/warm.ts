// Warm anchors (Linux): an anchor started ahead of need, so that spawn()
// does not wait for one to start. Its own arguments say only its tier
// (native/posix/warm.h); it contains itself (a subreaper; in the cgroup
// tier the tree's cgroup is made once the LAUNCH came: a waiting anchor is
// still in the host's process group, and a kill of that group would leave a
// cgroup made ahead of need behind) and waits. spawn() hands it the command (LAUNCH: the arguments a cold
// anchor gets, the environment, the stdio as descriptors); the next one is
// started once that anchor has launched the command (READY), while it runs.
// As many wait as bursts of spawns have needed (up to MAX_WARM); those a
// burst left that later spawns do not use retire when idle.
//
// What keeps every guarantee:
// - one anchor per tree, used once: nothing of one tree reaches the next
//   (its cwd, environment, umask and stdio come with the LAUNCH);
// - only where launch-time containment is the anchor's alone: the cgroup
//   and subreaper tiers, no limits, no lease (those are started cold);
// - keyed by what the host gives an anchor it starts and could change since:
//   the anchor executable, the host's user and groups, its priority; one
//   started while the host was someone else is retired at the next spawn, and
//   the anchor itself exits, running nothing, once the host's credentials
//   (ids, groups, capability bounding set, no_new_privs, seccomp) are not its
//   own (native/posix/warm.h: checked every 250 ms and at the LAUNCH);
// - the host's death ends it (its exit watch, its channel's EOF); unused for
//   `CORDON_WARM` ms (default WARM_IDLE_MS) it is retired; none is started
//   from a worker thread (no SIGCHLD there, and its channel would outlive
//   the worker) or with CORDON_WARM=0.
import { closeSync, readdirSync } from 'node:fs';
import { getPriority } from 'node:os';
import { isMainThread } from 'node:worker_threads';
import { debug } from '../debug.js';
import { WARM_IDLE_MS } from '../defaults.js';
import { posixBinding } from '../native.js';
import { endCgroup, hostCgroupDir } from './cgroup.js';
import { reap, reapLater, signalAnchor, watchExit } from './posix-reap.js';

/** An anchor the host started and has handed its command. */
export interface StartedAnchor {
  pid: number;
  control: number;
  fds: number[];
}

interface Warm {
  key: string;
  /** idsNow() when it was started. */
  ids: string;
  pid: number;
  control: number;
  idle: NodeJS.Timeout;
  /** Taken, retired or gone: no longer in the pool. */
  out: boolean;
}

/** Per shape: the ready ones (oldest first), how many are starting, how many are wanted. */
interface Shape {
  ready: Warm[];
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

/** At most this many warm anchors in all (a new one retires the oldest of another shape). */
const MAX_WARM = 8;
const shapes = new Map<string, Shape>();
// Linux only: a waiting anchor must be told the host's umask at its LAUNCH,
// and only Linux lets a process read its umask without changing it
// (/proc/self/status); macOS has only umask(2)'s round trip, which would give
// the host's other threads a umask of 0 meanwhile. (The darwin build on the
// model of XNU, on Linux, has warm anchors: its credential check is XNU's.)
let disabled = !isMainThread || process.platform !== 'linux';
/** Bumped by retireWarmNow(): an anchor started before it is retired as it arrives. */
let generation = 0;

/** No warm anchors from here on (the CLI: one spawn per process). */
export function disableWarm(): void {
  disabled = true;
  for (const shape of shapes.values()) for (const w of [...shape.ready]) retire(w);
}

function shapeOf(key: string): Shape {
  let shape = shapes.get(key);
  if (!shape) shapes.set(key, (shape = { ready: [], starting: 0, depth: 1, used: false }));
  return shape;
}

function readyCount(): number {
  let n = 0;
  for (const shape of shapes.values()) n += shape.ready.length + shape.starting;
  return n;
}

/**
 * Retires every ready warm anchor and waits (bounded by `timeoutMs`) until
 * each has exited and been reaped; one still starting is retired as it
 * arrives. For prepareCgroupLimits(), which moves the host out of the
 * cgroup they wait in.
 */
export function retireWarmNow(timeoutMs = 2000): void {
  generation++;
  const pids: number[] = [];
  for (const shape of shapes.values()) {
    for (const w of [...shape.ready]) {
      pids.push(w.pid);
      retire(w);
    }
  }
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (const deadline = Date.now() + timeoutMs; pids.some((pid) => !reap(pid)) && Date.now() < deadline; ) Atomics.wait(pause, 0, 0, 2);
}

/** Internal, for tests: the pids of the warm anchors ready for a spawn (a barrier: the pool has taken them in). */
export function readyWarmPids(): number[] {
  return [...shapes.values()].flatMap((shape) => shape.ready.map((w) => w.pid));
}

/** Internal, for tests: the ready warm anchors and the host's end of each one's channel (what code in the host could write a LAUNCH to). */
export function readyWarmChannels(): Array<{ pid: number; control: number }> {
  return [...shapes.values()].flatMap((shape) => shape.ready.map((w) => ({ pid: w.pid, control: w.control })));
}

/** How long a warm anchor waits for a spawn (ms); 0: none is started. */
function idleMs(): number {
  const v = process.env.CORDON_WARM;
  if (v === undefined || v === '') return WARM_IDLE_MS;
  if (/^\d{1,10}$/.test(v)) return Math.min(Number(v), 2 ** 31 - 1);
  debug('CORDON_WARM=%s is not a number of milliseconds: %d', v, WARM_IDLE_MS);
  return WARM_IDLE_MS;
}

/** What the host is now, as an anchor it starts would take it: its user, groups and priority. */
function idsNow(): string {
  return [process.getuid!(), process.geteuid!(), process.getgid!(), process.getegid!(), process.getgroups!().join(','), getPriority()].join(':');
}

function keyOf(path: string, args: readonly string[], ids: string): string {
  return [path, ...args, ids].join('\0');
}

/**
 * Retires every ready warm anchor started while the host was someone else
 * (another user, other groups, another priority: it dropped privileges
 * since): never used, and ended now, rather than left waiting for its idle
 * timeout with the old credentials (the anchor also checks the host's
 * itself, native/posix/warm.h, and exits within 250 ms of a change).
 */
function retireStale(ids: string): void {
  for (const shape of shapes.values()) for (const w of [...shape.ready]) if (w.ids !== ids) retire(w);
}

/** What a launch that may use a warm anchor gets: the anchor, if one took the command; the next one's start. */
export interface WarmTake {
  started: StartedAnchor | undefined;
  /** Starts the next warm anchor of this shape (the launch calls it once its own anchor has launched the command, so the two do not compete for the CPU). */
  next(): void;
}

/**
 * The warm anchor for this launch, handed its command (`started`), or none
 * (none ready, or it could not take it: start one cold). Undefined where
 * this launch cannot use one.
 */
export function takeWarm(path: string, warmArgs: readonly string[] | undefined, args: string[], env: string[] | null, stdio: number[]): WarmTake | undefined {
  if (disabled || warmArgs === undefined) return undefined;
  const wait = idleMs();
  if (wait === 0) return undefined;
  const ids = idsNow();
  retireStale(ids);
  const key = keyOf(path, warmArgs, ids);
  const next = (): void => schedule(key, path, warmArgs, ids, wait);
  const shape = shapeOf(key);
  const w = shape.ready.pop();
  const usedBefore = shape.used;
  shape.used = true;
  if (!w) {
    if (usedBefore) shape.depth = Math.min(shape.depth + 1, MAX_WARM);
    return { started: undefined, next };
  }
  w.out = true;
  clearTimeout(w.idle);
  try {
    const fds = posixBinding().launchWarm(w.control, args, env, stdio);
    return { started: { pid: w.pid, control: w.control, fds }, next };
  } catch (err) {
    debug('warm anchor %d could not take its command (%s): a cold one is started', w.pid, (err as Error).message);
    retire(w);
    return { started: undefined, next };
  }
}

/** Warm anchors of this shape up to its depth, started on libuv's pool (the JS thread does not wait for them). */
function schedule(key: string, path: string, warmArgs: readonly string[], ids: string, wait: number): void {
  // (Not for a host that changed since the launch that asked for it.)
  if (ids !== idsNow()) return;
  const shape = shapeOf(key);
  while (!disabled && shape.ready.length + shape.starting < shape.depth) {
    if (readyCount() >= MAX_WARM && !retireOldest(key)) return;
    start(key, shape, ids, path, warmArgs, wait);
  }
}

/** Retires the oldest ready anchor of another shape; false if there is none. */
function retireOldest(except: string): boolean {
  for (const [key, shape] of shapes) {
    if (key !== except && shape.ready.length > 0) {
      retire(shape.ready[0]!);
      return true;
    }
  }
  return false;
}

let exitHook = false;

/** At the host's exit, a warm anchor that was stopped (SIGSTOP) is resumed, so that it sees its host gone and exits. */
function resumeAllAtExit(): void {
  if (exitHook) return;
  exitHook = true;
  process.once('exit', () => {
    for (const shape of shapes.values()) for (const w of shape.ready) signalAnchor(w.pid, 'SIGCONT');
  });
}

function start(key: string, shape: Shape, ids: string, path: string, warmArgs: readonly string[], wait: number): void {
  resumeAllAtExit();
  shape.starting++;
  const gen = generation;
  // Its environment until the LAUNCH gives it the command's: one entry, not
  // none. The process-group tier's sweeps read every process newer than their
  // tree, a warm anchor waiting beside it (and its pin) among them, and take
  // an empty environment for a process in the middle of an exec, read again
  // for 30 ms (measured: 30 ms more at each warm tree's root exit).
  posixBinding().spawnWarmAnchor(path, [path, '--warm', ...warmArgs], ['CORDON_WARM_ANCHOR=1'], [-2, -2, -2], (err, started) => {
    shape.starting--;
    if (err || !started) {
      debug('no warm anchor: %s', err?.message);
      return;
    }
    const w: Warm = { key, ids, pid: started.pid, control: started.control, idle: setTimeout(() => retireIdle(w), wait).unref(), out: false };
    // Until taken (the channel then watches it): an exit drops it; one that
    // did not exit cleanly (killed) could not remove its cgroup.
    watchExit(w.pid, (code) => {
      retire(w, true);
      if (code !== 0 && warmArgs.includes('cgroup')) removeCgroupOf(w.pid);
    });
    shape.ready.push(w);
    if (disabled || gen !== generation || shape.ready.length > shape.depth || ids !== idsNow()) retire(w);
  });
}

/**
 * A warm anchor of the cgroup tier that died (killed) after its LAUNCH could
 * not remove the cgroup it made then, beside the host's own: ended (its
 * members killed) and removed here.
 */
function removeCgroupOf(pid: number): void {
  const parent = hostCgroupDir();
  if (parent === null) return;
  let names: string[];
  try {
    names = readdirSync(parent).filter((n) => n.startsWith(`cordon-${pid}-`));
  } catch {
    return;
  }
  for (const n of names) void endCgroup(`${parent}/${n}`);
}

/** Unused for its idle time: retired, and its shape keeps one fewer ready. */
function retireIdle(w: Warm): void {
  const shape = shapes.get(w.key);
  if (shape) shape.depth = Math.max(1, shape.depth - 1);
  retire(w);
}

/**
 * Out of the pool, its channel closed: it removes what it made (its cgroup)
 * and exits, and is reaped here (`reaped`: it already was).
 */
function retire(w: Warm, reaped = false): void {
  const shape = shapes.get(w.key);
  if (shape) shape.ready = shape.ready.filter((x) => x !== w);
  clearTimeout(w.idle);
  w.out = true;
  if (w.control < 0) return;
  // (A stopped one could not see its channel close.)
  if (!reaped) signalAnchor(w.pid, 'SIGCONT');
  closeSync(w.control);
  w.control = -1;
  if (!reaped) reapLater(w.pid);
}
