// Putting an unrelated process on a chosen (free) pid, to test that a stale
// handle never signals a recycled number. First choice: write target-1 to
// /proc/sys/kernel/ns_last_pid (needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE
// in the pid namespace) and spawn; fallback: a shell that forks until the
// last pid handed out is target-1, then starts the process.
import { spawn as spawnChild, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { capture } from './fixtures.js';
import { killPids, readStat, sameAlive, sleep } from './procs.js';

const NS_LAST_PID = '/proc/sys/kernel/ns_last_pid';

/** Another process took the target pid first: the caller may retry with a fresh target. */
export class PidTakenError extends Error {}

export interface Occupant {
  /** The unrelated process now holding the target pid (a `sleep 300`, or the command asked for). */
  pid: number;
  /** Its start time (as the observer gives it), to tell it from a later reuse. */
  start: string;
  /** Other processes started to get there (the fallback's shell), to clean up. */
  helpers: number[];
  how: 'ns_last_pid' | 'cycling';
}

function exitOf(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
}

async function viaNsLastPid(target: number, env: NodeJS.ProcessEnv, command: string[]): Promise<Occupant | 'unavailable' | 'missed'> {
  for (let attempt = 0; attempt < 50; attempt++) {
    if (readStat(target) !== undefined) return 'missed'; // taken meanwhile
    // The counter goes back to where it was right after our spawn: left at
    // target+1, it would hand out again, at once, the pids that other tests
    // running meanwhile just saw die (and check to be gone).
    let saved: number;
    try {
      saved = Number(readFileSync(NS_LAST_PID, 'utf8')); // Linux only
    } catch {
      return 'unavailable';
    }
    try {
      writeFileSync(NS_LAST_PID, String(target - 1));
    } catch {
      return 'unavailable';
    }
    let child: ChildProcess;
    try {
      // Its own process group, so that a miss ends whatever `command` started too.
      child = spawnChild(command[0]!, command.slice(1), { env, stdio: 'ignore', detached: true });
    } finally {
      if (Number(readFileSync(NS_LAST_PID, 'utf8')) < saved) writeFileSync(NS_LAST_PID, String(saved));
    }
    if (child.pid === target) {
      const st = readStat(target);
      if (st) return { pid: target, start: st.start, helpers: [], how: 'ns_last_pid' };
    }
    // Someone else forked in between: drop ours and try again.
    if (child.pid !== undefined) {
      try {
        process.kill(-child.pid, 'SIGKILL'); // our unreaped child leads the group: its id is pinned
      } catch {
        killPids([child.pid]);
      }
    }
    await exitOf(child);
  }
  return 'missed';
}

// One fork per iteration (`: &` forks a subshell); when the pid just handed
// out is target-1, the next fork is the occupant. Bounded to `maxForks`.
const CYCLE = `
t=$1; max=$2; shift 2; n=0
while [ $n -lt $max ]; do
  : & p=$!
  wait $p
  n=$((n + 1))
  if [ $p -eq $((t - 1)) ]; then
    "$@" & q=$!
    if [ $q -eq $t ]; then echo "PID occupant $q"; wait $q; exit 0; fi
    kill -9 $q; wait $q
  fi
done
echo GAVEUP
exit 1
`;

async function viaCycling(target: number, env: NodeJS.ProcessEnv, timeout: number, command: string[]): Promise<Occupant> {
  const shell = spawnChild('sh', ['-c', CYCLE, 'cycle', String(target), '70000', ...command], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  const out = capture(shell.stdout);
  try {
    await out.until(/^(PID occupant \d+|GAVEUP)$/m, timeout);
  } catch (err) {
    killPids([shell.pid!]);
    throw err;
  }
  const pid = out.pids().occupant;
  const st = pid === undefined ? undefined : readStat(pid);
  if (pid !== target || !st) {
    killPids([shell.pid!]);
    throw new Error(`could not put a process on pid ${target} by cycling pids:\n${out.text}`);
  }
  return { pid, start: st.start, helpers: [shell.pid!], how: 'cycling' };
}

/**
 * Starts an unrelated `sleep 300` (or `command`, with `env`) on pid `target`,
 * which must be free. Bounded by `timeout`. The caller kills `pid` and
 * `helpers` by pid (and what `command` started, by tag).
 */
export async function occupyPid(target: number, env: NodeJS.ProcessEnv, timeout = 50_000, command: string[] = ['sleep', '300']): Promise<Occupant> {
  if (readStat(target) !== undefined) throw new PidTakenError(`pid ${target} is not free: ${JSON.stringify(readStat(target))}`);
  const deadline = Date.now() + timeout;
  // CORDON_TEST_PID_CYCLING=1 exercises the fallback where ns_last_pid is writable.
  if (process.env.CORDON_TEST_PID_CYCLING === '1') return viaCycling(target, env, timeout, command);
  for (;;) {
    const got = await viaNsLastPid(target, env, command);
    if (typeof got === 'object') return got;
    if (got === 'unavailable') return viaCycling(target, env, Math.max(1000, deadline - Date.now()), command);
    if (readStat(target) !== undefined) throw new PidTakenError(`pid ${target} was taken by another process meanwhile`);
    if (Date.now() > deadline) throw new Error(`watchdog: could not put a process on pid ${target} within ${timeout} ms`);
    await sleep(10);
  }
}

/** The occupant is the very process we started (same pid, same start time) and alive. */
export function stillOccupied(o: Occupant): boolean {
  return sameAlive(o.pid, o.start);
}
