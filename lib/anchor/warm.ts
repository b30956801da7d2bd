// Warm anchors (Linux): an anchor started ahead of need, so that spawn()
// does not wait for one to start. Its own arguments say only its tier
// (native/posix/warm.h); it contains itself (a subreaper; in the cgroup
// tier the tree's cgroup is made once the LAUNCH came: a waiting anchor is
// still in the host's process group, and a kill of that group would leave a
// cgroup made ahead of need behind) and waits. spawn() hands it the command (LAUNCH: the arguments a cold
// anchor gets, the environment, the stdio as descriptors); the next one is
// started once that anchor has launched the command (READY), while it runs.
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
// The pool (keys, depth, MAX_WARM, idle and stale retirement) is every
// platform's (./warm-pool.ts); this file is Linux's driver of it (Windows':
// ./windows-warm.ts).
import { closeSync, readdirSync } from 'node:fs';
import { getPriority } from 'node:os';
import { debug } from '../debug.js';
import { posixBinding } from '../native.js';
import { endCgroup, hostCgroupDir } from './cgroup.js';
import { reap, reapLater, signalAnchor, watchExit } from './posix-reap.js';
import { WarmPool, type WarmDriver, type WarmTake } from './warm-pool.js';

export { disableWarm } from './warm-pool.js';

/** An anchor the host started and has handed its command. */
export interface StartedAnchor {
  pid: number;
  control: number;
  fds: number[];
}

/** A warm anchor while it waits: its pid and the host's end of its channel (-1 once closed). */
interface PosixWarm {
  readonly pid: number;
  control: number;
}

const driver: WarmDriver<PosixWarm> = {
  /** What the host is now, as an anchor it starts would take it: its user, groups and priority. */
  ids: () => [process.getuid!(), process.geteuid!(), process.getgid!(), process.getegid!(), process.getgroups!().join(','), getPriority()].join(':'),
  start(path, warmArgs, done) {
    // Its environment until the LAUNCH gives it the command's: one entry, not
    // none. The process-group tier's sweeps read every process newer than their
    // tree, a warm anchor waiting beside it (and its pin) among them, and take
    // an empty environment for a process in the middle of an exec, read again
    // for 30 ms (measured: 30 ms more at each warm tree's root exit).
    // (On libuv's pool: the JS thread does not wait for its exec.)
    posixBinding().spawnWarmAnchor(path, [path, '--warm', ...warmArgs], ['CORDON_WARM_ANCHOR=1'], [-2, -2, -2], (err, started) => {
      if (err || !started) {
        debug('no warm anchor: %s', err?.message);
        done(undefined);
        return;
      }
      done({ pid: started.pid, control: started.control });
    });
  },
  watch(w, warmArgs, exited) {
    // Until taken (the channel then watches it): an exit drops it; one that
    // did not exit cleanly (killed) could not remove its cgroup.
    watchExit(w.pid, (code) => {
      exited();
      if (code !== 0 && warmArgs.includes('cgroup')) removeCgroupOf(w.pid);
    });
  },
  end(w, reaped) {
    // Its channel closed: it removes what it made (its cgroup) and exits,
    // and is reaped here (`reaped`: it already was).
    if (w.control < 0) return;
    // (A stopped one could not see its channel close.)
    if (!reaped) signalAnchor(w.pid, 'SIGCONT');
    closeSync(w.control);
    w.control = -1;
    if (!reaped) reapLater(w.pid);
  },
  /** At the host's exit, a warm anchor that was stopped (SIGSTOP) is resumed, so that it sees its host gone and exits. */
  atExit(waiting) {
    for (const w of waiting) signalAnchor(w.pid, 'SIGCONT');
  },
};

// Linux only: a waiting anchor must be told the host's umask at its LAUNCH,
// and only Linux lets a process read its umask without changing it
// (/proc/self/status); macOS has only umask(2)'s round trip, which would give
// the host's other threads a umask of 0 meanwhile. (The darwin build on the
// model of XNU, on Linux, has warm anchors: its credential check is XNU's.)
const pool = new WarmPool(driver, 'linux');

/**
 * Retires every ready warm anchor and waits (bounded by `timeoutMs`) until
 * each has exited and been reaped; one still starting is retired as it
 * arrives. For prepareCgroupLimits(), which moves the host out of the
 * cgroup they wait in.
 */
export function retireWarmNow(timeoutMs = 2000): void {
  const pids = pool.retireAll().map((w) => w.pid);
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (const deadline = Date.now() + timeoutMs; pids.some((pid) => !reap(pid)) && Date.now() < deadline; ) Atomics.wait(pause, 0, 0, 2);
}

/** Internal, for tests: the pids of the warm anchors ready for a spawn (a barrier: the pool has taken them in). */
export function readyWarmPids(): number[] {
  return pool.ready().map((w) => w.pid);
}

/** Internal, for tests: the ready warm anchors and the host's end of each one's channel (what code in the host could write a LAUNCH to). */
export function readyWarmChannels(): Array<{ pid: number; control: number }> {
  return pool.ready().map((w) => ({ pid: w.pid, control: w.control }));
}

/**
 * The warm anchor for this launch, handed its command (`started`), or none
 * (none ready, or it could not take it: start one cold). Undefined where
 * this launch cannot use one.
 */
export function takeWarm(path: string, warmArgs: readonly string[] | undefined, args: string[], env: string[] | null, stdio: number[]): WarmTake<StartedAnchor> | undefined {
  return pool.take(path, warmArgs, (w) => {
    const fds = posixBinding().launchWarm(w.control, args, env, stdio);
    return { pid: w.pid, control: w.control, fds };
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
