// Observing processes from outside, never through cordon's bookkeeping:
// every process a test starts carries CORDON_TEST_TAG=<unique tag> in its
// environment; the observer (helpers/observer.ts: /proc, or ps) tells who is
// alive. Cleanup SIGKILLs by pid, found by tag, independent of the code under test.
//
// Liveness, identities and the bounded waits are the ones both suites share
// (common.mjs); this suite's probe for them is the observer, and a name it
// can list is a tag.
import { readdirSync, readFileSync } from 'node:fs';
import { onTestFinished } from 'vitest';
import { readyWarmChannels, readyWarmPids } from '../../lib/anchor/warm.js';
import { alive, forgetIdentities, parsePids, rememberIdentity, sameIdentity, sleep, useProbe, waitFor, waitGone, within, type Survivor, type Watch } from './common.mjs';
import { observer, TAG_VAR, type ProcInfo, type Stat } from './observer.js';

export { alive, parsePids, rememberIdentity, sleep, TAG_VAR, waitFor, waitGone, within, type ProcInfo, type Watch };

let counter = 0;

/** What the observer says a process is now (undefined: no process has the pid). */
export function readStat(pid: number): Stat | undefined {
  return observer.stat(pid);
}

/** Its arguments joined by spaces ('' when gone). */
export function cmdline(pid: number): string {
  return observer.cmdline(pid);
}

/**
 * The process first seen as `pid` with start time `start` is alive (not
 * a zombie): where a test sets the pid counter back (pid-reuse.test.ts), a
 * freed pid can be handed to another test's process at once.
 */
export function sameAlive(pid: number, start: string): boolean {
  const st = readStat(pid);
  return st !== undefined && st.start === start && st.state !== 'Z' && st.state !== 'X';
}

export function isZombie(pid: number): boolean {
  return readStat(pid)?.state === 'Z';
}

/**
 * `pid` is alive and is still one of the test's processes: it carries `tag`.
 * (pid_max is 32768 here: a member's pid that was freed can belong to anyone
 * a moment later, a kernel thread included.)
 */
export function aliveTagged(pid: number, tag: string): boolean {
  return alive(pid) && observer.hasTag(pid, tag);
}

/** This run's id: every tag of this run starts with it (set by the global setup). */
export const RUN_VAR = 'CORDON_TEST_RUN';

/** Every live process carrying the tag (or, with no tag, any tag of this run). */
export function findTagged(tag?: string): ProcInfo[] {
  return observer.tagged(tag === undefined ? { prefix: process.env[RUN_VAR] ?? '' } : { value: tag });
}

function describeProc(p: ProcInfo): string {
  return `pid ${p.pid} ppid ${p.ppid} [${p.state}] ${p.command}`;
}

export function describeProcs(procs: ProcInfo[]): string {
  if (procs.length === 0) return '(none)';
  return procs.map((p) => `  ${describeProc(p)}`).join('\n');
}

const asSurvivors = (procs: ProcInfo[]): Survivor[] => procs.map((p) => ({ pid: p.pid, line: describeProc(p) }));

// The observer is how this suite sees processes; a name is a tag.
useProbe({
  name: observer.name,
  start(pid) {
    const st = readStat(pid);
    return st === undefined || st.state === 'Z' || st.state === 'X' ? undefined : st.start;
  },
  describe(pid) {
    const st = readStat(pid);
    return st ? `pid ${pid} ppid ${st.ppid} [${st.state}] ${cmdline(pid)}` : `pid ${pid} (gone)`;
  },
  named: (tag) => asSurvivors(findTagged(tag)),
  pollMs: 20,
});

// ---- the leak check a pid hopper cannot dodge ---------------------------
//
// A process that forks and exits every fraction of a millisecond (a pid
// hopper) is missed by most walks that list /proc and then read each
// process: by the time the walk reads the generation it listed, that one has
// exited and its child, forked meanwhile, was not listed (an ascending walk
// of observer.tagged() saw a live hopper in 1 to 3 walks of 50). A walk
// below first sniffs: SNIFF_ROUNDS times it reads the pid the kernel handed
// out last (/proc/loadavg's last field) and the SNIFF_BELOW pids under it,
// which is where a hopper's current generation is: it forks more than
// anything else. Then it reads the pids just above the newest one it knows
// (the next pids the kernel hands out), then the pids new since its previous
// listing, newest first, then every other pid, newest first. It hands each
// tagged process to its caller the moment it reads it, so that the caller
// stops it before it forks again. Measured here, 100 walks each, beside three
// loops of /bin/true (pid churn, both cores busy): without the sniff a walk
// saw a live hopper 16 and 72 times in 100 (so 10 calm walks in a row could
// pass it by: the arm64 lane's failure at stop 54); with it, 100 in 100.
// Where the observer is ps (macOS), a walk is one ps snapshot.

/** Walks that must in a row find no tagged process running that was not stopped already, before the freeze is taken as complete. */
export const FREEZE_CALM_WALKS = 10;
/** Walks that must in a row find no tagged process alive, after the kill. */
export const KILL_EMPTY_WALKS = 5;
/** How far above the newest pid known a walk looks, after its sniff (the next pids the kernel hands out). */
const LOOK_AHEAD = 32;
/** How many times a walk reads the last pid handed out, and the pids just under it, before its listing. */
const SNIFF_ROUNDS = 8;
/** How many pids under the last one handed out each sniff reads (other programs fork too). */
const SNIFF_BELOW = 8;

/** The pid the kernel handed out last in this pid namespace (/proc/loadavg's last field; 0 when unreadable). */
function lastPid(): number {
  try {
    return Number(readFileSync('/proc/loadavg', 'utf8').trim().split(' ').pop()) || 0;
  } catch {
    return 0;
  }
}

const PID_MAX = (() => {
  try {
    return Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8')) || 32768;
  } catch {
    return 32768;
  }
})();

/** The process's environment has the tag variable matching `match` (as the proc observer reads it; false when gone). */
function environMatches(pid: number, entry: string, exact: boolean): boolean {
  let env: Buffer;
  try {
    env = readFileSync(`/proc/${pid}/environ`);
  } catch {
    return false;
  }
  const want = exact ? `${entry}\0` : entry;
  for (let at = env.indexOf(want); at >= 0; at = env.indexOf(want, at + 1)) if (at === 0 || env[at - 1] === 0) return true;
  return false;
}

/**
 * A walker for the processes with this tag (any tag of this run when
 * undefined): each call is one walk, handing every live tagged process
 * (zombies left out) to `onFound` as it is read. It remembers the pids of
 * its previous walk, to read the new ones first.
 */
function tagWalker(tag?: string): (onFound: (p: ProcInfo) => void) => void {
  const match = tag === undefined ? { prefix: process.env[RUN_VAR] ?? '' } : { value: tag };
  if (observer.name !== 'proc') {
    // ps: one snapshot a walk; and the parents of what it finds that ps is
    // not shown the environment of (on macOS Apple's sh or perl above a
    // tagged process: observer.hiddenParents), taken by lineage.
    return (onFound) => {
      const found = observer.tagged(match);
      for (const p of found) onFound(p);
      for (const p of observer.hiddenParents(found)) onFound(p);
    };
  }
  const entry = 'value' in match ? `${TAG_VAR}=${match.value}` : `${TAG_VAR}=${match.prefix}`;
  const exact = 'value' in match;
  let previous = new Set<number>();
  let newest = 0;
  /** Reads one pid, handing it to onFound when it is a live tagged process. */
  const readOne = (pid: number, onFound: (p: ProcInfo) => void): void => {
    if (pid <= 0 || pid === process.pid || !environMatches(pid, entry, exact)) return;
    const st = readStat(pid);
    if (!st || st.state === 'Z' || st.state === 'X') return;
    onFound({ pid, ppid: st.ppid, state: st.state, command: cmdline(pid) });
  };
  return (onFound) => {
    // The sniff: where the newest generation of anything that forks fast is.
    for (let round = 0; round < SNIFF_ROUNDS; round++) {
      const last = lastPid();
      for (let pid = last; pid > last - SNIFF_BELOW && pid > 0; pid--) readOne(pid, onFound);
    }
    const listed = readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .map(Number)
      .sort((a, b) => b - a);
    const fresh = listed.filter((pid) => !previous.has(pid));
    previous = new Set(listed);
    newest = fresh[0] ?? listed[0] ?? newest;
    const ahead: number[] = [];
    for (let i = 1; i <= LOOK_AHEAD; i++) ahead.push(newest + i < PID_MAX ? newest + i : newest + i - PID_MAX + 300);
    const read = new Set<number>();
    for (const pid of [...ahead, ...fresh, ...listed]) {
      if (read.has(pid) || pid === process.pid) continue;
      read.add(pid);
      readOne(pid, onFound);
    }
  };
}

/** A state in which a process runs no code of its own: stopped, traced, or in an uninterruptible wait (it takes a pending SIGSTOP before it runs again). */
const frozenState = (state: string): boolean => state === 'T' || state === 't' || state === 'D';

/**
 * SIGKILL every process with this tag (every tag of this run when `tag` is
 * undefined), by pid, in a way a pid hopper cannot dodge, and return what it
 * found (empty: nothing tagged was alive). What it does, exactly:
 *   1. Freeze: walks (tagWalker above) SIGSTOP each tagged process the moment
 *      they read it (a stopped process forks no more), until
 *      FREEZE_CALM_WALKS (10) walks in a row find no tagged process that is
 *      not stopped already (a new one, or one that still runs).
 *   2. Kill: everything found gets SIGKILL, then SIGCONT (a stopped process
 *      takes the kill at once).
 *   3. Check: walks go on until KILL_EMPTY_WALKS (5) in a row find no tagged
 *      process alive; what they find that was not found before is SIGSTOPped
 *      and the whole goes back to 1 (a hopper's generation that 1 missed);
 *      what was found and is still dying gets SIGKILL again.
 * Bounded: 20 s in all, then it returns what it found (with no tagged
 * process left unsignalled that a walk saw).
 */
export function killTagged(tag?: string): ProcInfo[] {
  const found = new Map<number, ProcInfo>();
  const signal = (pid: number, sig: NodeJS.Signals): void => {
    try {
      process.kill(pid, sig);
    } catch {
      // already gone
    }
  };
  const walk = tagWalker(tag);
  const deadline = Date.now() + 20_000;
  for (let again = true; again && Date.now() < deadline; ) {
    again = false;
    // 1. Freeze, until FREEZE_CALM_WALKS walks in a row find nothing new running.
    for (let calm = 0; calm < FREEZE_CALM_WALKS && Date.now() < deadline; ) {
      let running = 0;
      walk((p) => {
        if (found.has(p.pid) && frozenState(p.state)) return;
        signal(p.pid, 'SIGSTOP');
        if (!found.has(p.pid)) found.set(p.pid, p);
        running++;
      });
      calm = running === 0 ? calm + 1 : 0;
    }
    // 2. Kill what was found.
    for (const pid of found.keys()) signal(pid, 'SIGKILL');
    for (const pid of found.keys()) signal(pid, 'SIGCONT');
    // 3. Check, until KILL_EMPTY_WALKS walks in a row find nothing alive.
    for (let empty = 0; empty < KILL_EMPTY_WALKS && !again && Date.now() < deadline; ) {
      let left = 0;
      walk((p) => {
        left++;
        if (found.has(p.pid)) return signal(p.pid, 'SIGKILL');
        signal(p.pid, 'SIGSTOP');
        found.set(p.pid, p);
        again = true;
      });
      empty = left === 0 ? empty + 1 : 0;
    }
  }
  return [...found.values()];
}

/**
 * Every tagged process that `walks` walks in a row (tagWalker: a live hopper
 * is seen by 3 to 8 walks in 10) saw alive, with no signal sent: for a wait
 * on something else (an anchor alone) to stop the tree, where a check that
 * stops and kills would do the product's work. Not proof of absence on its
 * own: a test that waits on it ends with aliveByFreeze or killTagged.
 */
export function seenByWalks(tag: string, walks = 20): ProcInfo[] {
  const walk = tagWalker(tag);
  const seen = new Map<number, ProcInfo>();
  for (let i = 0; i < walks; i++) walk((p) => seen.set(p.pid, p));
  return [...seen.values()];
}

/**
 * What killTagged(tag) found alive, described ('(none)': nothing), for an
 * assertion that nothing tagged is alive: the check a hopper cannot dodge,
 * which also kills what it finds.
 */
export function aliveByFreeze(tag: string): string {
  return describeProcs(killTagged(tag));
}

/**
 * SIGKILLs each pid, but one whose identity the test knows (parsePids,
 * rememberIdentity) and that is now another process: a pid freed since may
 * be another test's process by the time a cleanup runs.
 */
export function killPids(pids: number[]): void {
  for (const pid of pids) {
    if (!alive(pid)) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

export interface Tagged {
  tag: string;
  env: NodeJS.ProcessEnv;
  /** Live processes carrying this test's tag. */
  procs(): ProcInfo[];
  /** Live processes carrying this test's tag, less the ones the tier does not promise to catch. */
  promised(): ProcInfo[];
  /**
   * A process this tier does not promise to catch (capabilities() says so and
   * the test asserted it): the cleanup still SIGKILLs it, without failing.
   */
  notPromised(pid: number): void;
  /** What promised() lists, as a watch (common.mjs): waitGone(t) waits for those. */
  survivors(): Survivor[];
}

/**
 * A fresh tag for this test, with its cleanup registered before anything runs:
 * whatever still carries the tag when the test finishes is SIGKILLed by pid
 * (killTagged: freeze, list, kill, walk until empty), and, if the test had
 * passed, that leak fails it.
 */
export function useTag(extraEnv: NodeJS.ProcessEnv = {}): Tagged {
  forgetIdentities(); // a new test: pids it learns are its own
  const tag = `${process.env[RUN_VAR] ?? 'run'}-t${process.pid}-${++counter}-${Math.random().toString(36).slice(2, 8)}`;
  const excused = new Set<number>();
  onTestFinished(() => {
    const leaked = killTagged(tag).filter((p) => !excused.has(p.pid));
    if (leaked.length > 0) {
      // Let the test's own assertion stand if it failed; otherwise this is a leak.
      throw new Error(`test left processes behind (now SIGKILLed):\n${describeProcs(leaked)}`);
    }
  });
  const env = { ...process.env, ...extraEnv, [TAG_VAR]: tag };
  const promised = () => findTagged(tag).filter((p) => !excused.has(p.pid));
  return {
    tag,
    env,
    procs: () => findTagged(tag),
    promised,
    notPromised: (pid: number) => {
      excused.add(pid);
    },
    survivors: () => asSurvivors(promised()),
  };
}

/** One look at every process (observer.list()), for the helpers below to share. */
export type Listing = Array<{ pid: number } & Stat>;
export const listProcesses = (): Listing => observer.list();

/** Zombie children of this test process (the anchors it spawned must be reaped), in `now` (else a new listing). */
export function zombieChildren(now: Listing = listProcesses()): number[] {
  return now.filter((p) => p.state === 'Z' && p.ppid === process.pid).map((p) => p.pid);
}

/**
 * The pids of `pids` that are alive in `now` (else a new listing), as alive()
 * tells one: not a zombie, and the process the test knows on that pid. One
 * listing however many pids: the ps observer runs ps once for each alive(),
 * and a check of 200 pids took seconds there, the host's event loop blocked
 * (it could not reap the anchors the check waited for).
 */
export function aliveAmong(pids: readonly number[], now: Listing = listProcesses()): number[] {
  const byPid = new Map(now.map((p) => [p.pid, p]));
  return pids.filter((pid) => {
    const p = byPid.get(pid);
    return p !== undefined && p.state !== 'Z' && p.state !== 'X' && sameIdentity(pid, p.start);
  });
}

/** This process's open descriptors (its own: /proc/self/fd on Linux, /dev/fd elsewhere; no observer needed). */
export function openFdCount(): number {
  return readdirSync(process.platform === 'linux' ? '/proc/self/fd' : '/dev/fd').length;
}

/**
 * The host's open descriptors besides its warm anchors' channels (up to 8
 * wait after a burst of spawns: lib/anchor/warm.ts), counted once the pool
 * has stopped changing (bounded: 3 s). The pool's own list is used only to
 * leave its channels out.
 */
export async function openFdCountBesideWarmPool(): Promise<number> {
  let ready = -1;
  for (let i = 0; i < 30 && readyWarmPids().length !== ready; i++) {
    ready = readyWarmPids().length;
    await sleep(100);
  }
  return openFdCount() - readyWarmChannels().length;
}
