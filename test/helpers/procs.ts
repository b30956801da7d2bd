// Observing processes from outside, never through cordon's bookkeeping:
// every process a test starts carries CORDON_TEST_TAG=<unique tag> in its
// environment; the observer (helpers/observer.ts: /proc, or ps) tells who is
// alive. Cleanup SIGKILLs by pid, found by tag, independent of the code under test.
//
// Liveness, identities and the bounded waits are the ones both suites share
// (common.mjs); this suite's probe for them is the observer, and a name it
// can list is a tag.
import { readdirSync } from 'node:fs';
import { onTestFinished } from 'vitest';
import { alive, forgetIdentities, parsePids, rememberIdentity, sleep, useProbe, waitFor, waitGone, within, type Survivor, type Watch } from './common.mjs';
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

/**
 * SIGKILL every process with this tag (every tag of this run when `tag` is
 * undefined), by pid, in a way a fast process cannot dodge: what a walk finds
 * is SIGSTOPped first (a stopped process forks no more), walks go on until five
 * in a row find nothing new, then everything found is SIGKILLed (and
 * SIGCONTed, so a stopped process takes the kill at once), and walks go on
 * until five in a row find nothing at all. A pid hopper is caught once a
 * walk stops one of its generations before that one forked: the more walks,
 * the likelier. Bounded (10 s); returns what it found.
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
  const deadline = Date.now() + 10_000;
  // 1. Stop whatever runs, until two walks in a row see nothing new.
  for (let calm = 0; calm < 5 && Date.now() < deadline; ) {
    let fresh = 0;
    for (const p of findTagged(tag)) {
      if (found.has(p.pid) || p.state === 'Z') continue;
      found.set(p.pid, p);
      signal(p.pid, 'SIGSTOP');
      fresh++;
    }
    calm = fresh === 0 ? calm + 1 : 0;
  }
  // 2. Kill what was found, then whatever a walk still sees, until two walks in a row are empty.
  for (const pid of found.keys()) signal(pid, 'SIGKILL');
  for (const pid of found.keys()) signal(pid, 'SIGCONT');
  for (let empty = 0; empty < 5 && Date.now() < deadline; ) {
    const left = findTagged(tag).filter((p) => p.state !== 'Z');
    empty = left.length === 0 ? empty + 1 : 0;
    for (const p of left) {
      if (!found.has(p.pid)) found.set(p.pid, p);
      signal(p.pid, 'SIGKILL');
    }
  }
  return [...found.values()];
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
 * whatever still carries the tag when the test finishes is SIGKILLed by pid,
 * and, if the test had passed, that leak fails it.
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

/** Zombie children of this test process (the anchors it spawned must be reaped). */
export function zombieChildren(): number[] {
  return observer
    .list()
    .filter((p) => p.state === 'Z' && p.ppid === process.pid)
    .map((p) => p.pid);
}

/** This process's open descriptors (its own: /proc/self/fd on Linux, /dev/fd elsewhere; no observer needed). */
export function openFdCount(): number {
  return readdirSync(process.platform === 'linux' ? '/proc/self/fd' : '/dev/fd').length;
}
