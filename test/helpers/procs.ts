// Observing processes from outside, never through cordon's bookkeeping:
// every process a test starts carries CORDON_TEST_TAG=<unique tag> in its
// environment; the observer (helpers/observer.ts: /proc, or ps) tells who is
// alive. Cleanup SIGKILLs by pid, found by tag, independent of the code under test.
import { readdirSync } from 'node:fs';
import { onTestFinished } from 'vitest';
import { parsePidLines, pollUntil, sleep, withWatchdog } from './common.mjs';
import { observer, TAG_VAR, type ProcInfo, type Stat } from './observer.js';

export { sleep, TAG_VAR, type ProcInfo };

let counter = 0;

/** What the observer says a process is now (undefined: no process has the pid). */
export function readStat(pid: number): Stat | undefined {
  return observer.stat(pid);
}

/** Its arguments joined by spaces ('' when gone). */
export function cmdline(pid: number): string {
  return observer.cmdline(pid);
}

/** Alive and not a zombie. */
export function alive(pid: number): boolean {
  const st = readStat(pid);
  if (st === undefined || st.state === 'Z' || st.state === 'X') return false;
  // A pid a fixture printed is that process, not whoever got the number once
  // it was freed (pid_max is 32768 here, and pid-reuse.test hands freed pids
  // out on purpose while other files run).
  const known = printed.get(pid);
  return known === undefined || known === st.start;
}

/**
 * Start times of the pids fixtures printed in the current test (useTag()
 * starts a test's record afresh), read the first time each was parsed.
 */
const printed = new Map<number, string>();

function rememberPrinted(pid: number): void {
  if (printed.has(pid)) return;
  const st = readStat(pid);
  if (st && st.state !== 'Z' && st.state !== 'X') printed.set(pid, st.start);
}

export function forgetPrinted(): void {
  printed.clear();
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

export function describeProcs(procs: ProcInfo[]): string {
  if (procs.length === 0) return '(none)';
  return procs.map((p) => `  pid ${p.pid} ppid ${p.ppid} [${p.state}] ${p.command}`).join('\n');
}

/** SIGKILL every process with this tag, by pid. Returns what it killed. */
export function killTagged(tag: string): ProcInfo[] {
  const killed: ProcInfo[] = [];
  for (let round = 0; round < 20; round++) {
    const found = findTagged(tag);
    if (found.length === 0) break;
    for (const p of found) {
      try {
        process.kill(p.pid, 'SIGKILL');
        if (round === 0) killed.push(p);
      } catch {
        // already gone
      }
    }
  }
  return killed;
}

export function killPids(pids: number[]): void {
  for (const pid of pids) {
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
}

/**
 * A fresh tag for this test, with its cleanup registered before anything runs:
 * whatever still carries the tag when the test finishes is SIGKILLed by pid,
 * and, if the test had passed, that leak fails it.
 */
export function useTag(extraEnv: NodeJS.ProcessEnv = {}): Tagged {
  forgetPrinted(); // a new test: pids it learns are its own
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
  return {
    tag,
    env,
    procs: () => findTagged(tag),
    promised: () => findTagged(tag).filter((p) => !excused.has(p.pid)),
    notPromised: (pid: number) => {
      excused.add(pid);
    },
  };
}

/** Poll until `check()` is true; on timeout fail with what was still alive. */
export async function waitFor(
  check: () => boolean,
  options: { timeout: number; what: string; tag?: string; pids?: number[] },
): Promise<void> {
  if (await pollUntil(check, options.timeout, 20)) return;
  const survivors = options.tag ? findTagged(options.tag) : [];
  const pids = (options.pids ?? []).filter(alive).map((pid) => `  pid ${pid} ${cmdline(pid)}`);
  throw new Error(
    `timed out after ${options.timeout} ms waiting for: ${options.what}\nstill alive:\n${describeProcs(survivors)}${
      pids.length ? '\n' + pids.join('\n') : ''
    }`,
  );
}

/** Wait until no process carries the tag (less the ones marked notPromised when a Tagged is given). */
export function waitGone(tag: string | Tagged, timeout: number, what = 'every tagged process to be gone'): Promise<void> {
  if (typeof tag === 'string') return waitFor(() => findTagged(tag).length === 0, { timeout, what, tag });
  const t = tag;
  return waitFor(() => t.promised().length === 0, { timeout, what, tag: t.tag });
}

/** Race a promise against a watchdog that fails with the tag's survivors. */
export function within<T>(promise: Promise<T>, timeout: number, what: string, tag?: string): Promise<T> {
  return withWatchdog(promise, timeout, () => {
    const survivors = tag ? findTagged(tag) : [];
    return new Error(`watchdog: ${what} did not happen within ${timeout} ms\nstill alive:\n${describeProcs(survivors)}`);
  });
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

/** Pids a fixture printed as `PID <name> <pid>` lines (each remembered for alive()). */
export function parsePids(text: string): Record<string, number> {
  return parsePidLines(text, rememberPrinted);
}
