// Putting an unrelated process on a chosen (free) pid, to test that a stale
// handle never signals a recycled number. First choice: clone3 with set_tid
// (helpers/set-tid.py; Linux 5.5 or later, CAP_SYS_ADMIN or
// CAP_CHECKPOINT_RESTORE over the pid namespace) makes the process on exactly
// that pid and leaves the pid counter where it is; fallback: a shell that
// forks until the last pid handed out is target-1, then starts the process.
//
// Why not write target-1 to /proc/sys/kernel/ns_last_pid and fork (what this
// did before): until the counter was set back, every process that forked on
// the machine got a pid just above the target, pids another test had just
// seen die, in the same second; the ps observer, which tells processes apart
// by pid and start second, took such a newcomer for the member it had seen
// (a failed "all gone" in lane 6).
//
// Cycling moves the machine's counter: any process that forks meanwhile may
// take the target first, and then this attempt has missed (PidMissedError):
// the caller sets its scenario up afresh, with a new target, within its
// watchdog (occupyFreedPid does that). The test workers of this machine take
// turns at putting processes on pids (a lock file), so that two of them never
// steer each other's spawns.
import { spawn as spawnChild, spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { onTestFinished } from 'vitest';
import { capture } from './fixtures.js';
import { cmdline, readStat, sameAlive, sleep } from './procs.js';
import { missing } from './requirements.js';

const SET_TID = join(dirname(fileURLToPath(import.meta.url)), 'set-tid.py');

/**
 * This attempt missed: another process took the target pid (and kept it
 * longer than a moment), or the pid counter went past it. The caller may set
 * its scenario up again with a fresh target.
 */
export class PidMissedError extends Error {
  override name = 'PidMissedError';
}

/** A miss where no live process had the pid, yet the kernel would not give it (see viaSetTid). */
class PidNotGivenError extends PidMissedError {
  override name = 'PidNotGivenError';
}

/**
 * This machine cannot put a process on the target within the bound (no
 * clone3 with set_tid, and cycling through the pids would take more forks
 * or more time than allowed): the message says why; the caller skips, saying so.
 */
export class PidOutOfReachError extends Error {
  override name = 'PidOutOfReachError';
}

export interface Occupant {
  /** The unrelated process now holding the target pid (a `sleep 300`, or the command asked for). */
  pid: number;
  /** Its start time (as the observer gives it), to tell it from a later reuse. */
  start: string;
  /** What started it and waits on it (helpers/set-tid.py, or the cycling shell), to clean up. */
  helpers: number[];
  how: 'set_tid' | 'cycling';
  /** Kills the occupant (its starter then reaps it and exits) and the starter; resolves once the starter has exited. */
  end(): Promise<void>;
}

function occupant(shell: ChildProcess, pid: number, start: string, how: Occupant['how']): Occupant {
  return {
    pid,
    start,
    helpers: [shell.pid!],
    how,
    async end() {
      // (Its pid is a recycled one on purpose: the test may know it as the
      // process that had it before, which killPids would spare.)
      if (sameAlive(pid, start)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }
      await Promise.race([exitOf(shell), sleep(1000)]);
      shell.kill('SIGKILL'); // (a no-op once Node has reaped it: never a recycled pid)
      await exitOf(shell);
    },
  };
}

function exitOf(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
}

function describePid(pid: number): string {
  const st = readStat(pid);
  return st ? `pid ${pid} [${st.state}] ppid ${st.ppid} ${cmdline(pid) || '(no command line)'}` : `pid ${pid} (gone)`;
}

// How long a process that took the target may keep it before the attempt
// counts as missed: a short-lived process frees it within this, its
// zombie included when its parent was gone and init reaps it (measured on a
// machine whose init reaps orphans every second or two).
const TRANSIENT_MS = 2000;

/** Resolves once `target` is free; a process holding it longer than TRANSIENT_MS is a miss. */
async function untilFree(target: number): Promise<void> {
  const until = Date.now() + TRANSIENT_MS;
  while (readStat(target) !== undefined) {
    if (Date.now() > until) throw new PidMissedError(`pid ${target} was taken by another process meanwhile: ${describePid(target)}`);
    await sleep(5);
  }
}

// ---- taking turns at the pid counter --------------------------------------

const LOCK = join(tmpdir(), 'cordon-test-pid-counter.lock');
/**
 * A lock older than this is broken even if its holder's pid is in use (an
 * attempt holds it at most for its watchdog, 40 s unscaled; a holder that
 * died is seen at once).
 */
const LOCK_STALE_MS = 600_000;

function lockHolder(): number | undefined {
  try {
    return Number(readFileSync(LOCK, 'utf8')) || undefined;
  } catch {
    return undefined;
  }
}

function holderGone(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/**
 * Takes the machine-wide pid counter lock (a file holding our pid), waiting
 * for it until `deadline`; a lock whose holder is gone, or older than
 * LOCK_STALE_MS, is broken. Returns its release.
 */
async function lockCounter(deadline: number): Promise<() => void> {
  for (;;) {
    try {
      writeFileSync(LOCK, String(process.pid), { flag: 'wx' });
      return () => {
        if (lockHolder() === process.pid) unlinkSync(LOCK);
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = lockHolder();
    try {
      if (holderGone(holder) || Date.now() - statSync(LOCK).mtimeMs > LOCK_STALE_MS) unlinkSync(LOCK);
    } catch {
      // released meanwhile
    }
    if (Date.now() > deadline) throw new Error(`watchdog: the pid counter lock ${LOCK} (held by ${holder === undefined ? '?' : describePid(holder)}) was not released in time`);
    await sleep(20);
  }
}

// ---- clone3 with set_tid ------------------------------------------------

// How long a pid held as the group or session id of zombies is tried again
// before the attempt counts as missed (the kernel frees the pid when init
// reaps them: every second or two on this machine).
const TAKEN_RETRY_MS = 2500;

/** The occupant, or why set_tid cannot be used here. */
async function viaSetTid(target: number, env: NodeJS.ProcessEnv, deadline: number, command: string[]): Promise<Occupant | { unavailable: string }> {
  if (process.platform !== 'linux') return { unavailable: 'clone3 is Linux\'s' };
  const noPython = missing('python3');
  if (noPython !== undefined) return { unavailable: `helpers/set-tid.py ${noPython}` };
  const until = Math.min(deadline, Date.now() + TAKEN_RETRY_MS);
  for (let attempt = 1; ; attempt++) {
    await untilFree(target);
    const shell = spawnChild('python3', [SET_TID, String(target), ...command], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    const out = capture(shell.stdout);
    const said = /^(PID occupant \d+|TAKEN \w+|UNAVAILABLE.*)$/m;
    try {
      await out.until(said, Math.max(1000, deadline - Date.now()));
    } catch (err) {
      shell.kill('SIGKILL');
      await exitOf(shell);
      throw err;
    }
    const verdict = out.text.match(said)![1]!;
    if (verdict.startsWith('PID occupant')) {
      const st = readStat(target);
      if (st) return occupant(shell, target, st.start, 'set_tid');
      shell.kill('SIGKILL'); // the occupant ended already: try again
      await exitOf(shell);
      continue;
    }
    await exitOf(shell);
    if (verdict.startsWith('UNAVAILABLE')) return { unavailable: verdict.slice('UNAVAILABLE '.length) };
    // TAKEN: a process took the pid between untilFree() and the clone, or the
    // pid is still some zombie's group or session id (no process has it, yet
    // the kernel keeps it).
    if (readStat(target) !== undefined) throw new PidMissedError(`pid ${target} was taken by another process meanwhile: ${describePid(target)}`);
    if (Date.now() > until) {
      throw new PidNotGivenError(`in ${attempt} tries over ${TAKEN_RETRY_MS} ms the kernel kept pid ${target} in use (EEXIST) while no process had it`);
    }
    await sleep(50);
  }
}

// ---- cycling --------------------------------------------------------------

/** The most forks the fallback makes to reach a pid. */
const MAX_FORKS = 70_000;

/** Where the pid counter wraps: up to pid_max (exclusive), back to the lowest pid it hands out after a wrap. */
function pidRange(): { max: number; low: number } | undefined {
  if (process.platform === 'linux') {
    try {
      return { max: Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8')), low: 300 }; // RESERVED_PIDS
    } catch {
      return undefined;
    }
  }
  if (process.platform === 'darwin') return { max: 99_999, low: 100 }; // PID_MAX, and where the counter restarts
  return undefined;
}

/** Forks needed from `last` (the last pid handed out) until the last one is target-1. */
function forksToReach(target: number, last: number, range: { max: number; low: number }): number {
  return target - 1 >= last ? target - 1 - last : range.max - last + (target - 1 - range.low);
}

// One fork per iteration (`: &` forks a subshell); when the pid just handed
// out is target-1, the next fork is the occupant. Every 100 forks it says
// where it is (`AT forks pid`). It stops with MISSED when the counter went
// past the target without handing out target-1 (another process took it) or
// the occupant did not get the target, and with GAVEUP after `max` forks.
const CYCLE = `
t=$1; max=$2; shift 2; n=0; prev=0
while [ $n -lt $max ]; do
  : & p=$!
  wait $p
  n=$((n + 1))
  if [ $p -eq $((t - 1)) ]; then
    "$@" & q=$!
    if [ $q -eq $t ]; then echo "PID occupant $q"; wait $q; exit 0; fi
    kill -9 $q; wait $q
    echo "MISSED: pid $p was handed to us, then $q, not $t"; exit 2
  fi
  if [ $prev -ne 0 ] && [ $prev -lt $t ] && [ $p -ge $t ]; then echo "MISSED: the pids handed to us went from $prev to $p"; exit 2; fi
  prev=$p
  if [ $((n % 100)) -eq 0 ]; then echo "AT $n $p"; fi
done
echo "GAVEUP after $n forks"
exit 1
`;

async function viaCycling(target: number, env: NodeJS.ProcessEnv, deadline: number, command: string[], noSetTid: string): Promise<Occupant> {
  const range = pidRange();
  const last = spawnSync('true', { stdio: 'ignore' }).pid;
  const need = range && last ? forksToReach(target, last, range) : undefined;
  const why =
    process.env.CORDON_TEST_PID_CYCLING === '1'
      ? 'CORDON_TEST_PID_CYCLING=1 asks for the pid to be reached by forking until the counter comes round'
      : `clone3 with set_tid is not available here (${noSetTid}; it needs Linux 5.5 or later and CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE), so the pid is reached by forking until the counter comes round`;
  if (need !== undefined && need > MAX_FORKS) {
    throw new PidOutOfReachError(`reaching pid ${target} takes about ${need} forks (pid_max ${range!.max}, last pid ${last}), more than the ${MAX_FORKS} allowed: ${why}`);
  }
  const bound = need === undefined ? MAX_FORKS : Math.min(MAX_FORKS, need + 2000);
  const began = Date.now();
  const shell = spawnChild('sh', ['-c', CYCLE, 'cycle', String(target), String(bound), ...command], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  const out = capture(shell.stdout);
  const end = async (): Promise<void> => {
    shell.kill('SIGKILL');
    await exitOf(shell);
  };
  // Waits for the shell's verdict; gives up early when even the fastest fork
  // rate its progress allows (fewer than 100 forks since its last AT line)
  // cannot reach the target before the deadline.
  let outOfReach: string | undefined;
  const verdict = /^(PID occupant \d+|MISSED.*|GAVEUP.*)$/m;
  for (;;) {
    if (verdict.test(out.text)) break;
    const at = [...out.text.matchAll(/^AT (\d+) (\d+)$/gm)].at(-1);
    const elapsed = Date.now() - began;
    if (range && last && elapsed > 0) {
      const forks = at ? Number(at[1]) : 0;
      const left = forksToReach(target, at ? Number(at[2]) : last, range) - 100;
      const perSecond = ((forks + 100) * 1000) / elapsed;
      const msLeft = (left * 1000) / perSecond;
      if (Date.now() + msLeft > deadline) {
        outOfReach = `reaching pid ${target} takes about ${left} more forks, at most ${Math.round(perSecond)} forks/s here at least ${Math.round(msLeft / 1000)} s, more than the ${Math.round(Math.max(0, deadline - Date.now()) / 1000)} s left of the watchdog: ${why}`;
        break;
      }
    }
    if (Date.now() > deadline) {
      outOfReach = `cycling did not reach pid ${target} before the watchdog (${at ? `${at[1]} forks, at pid ${at[2]}` : 'fewer than 100 forks'} in ${Math.round(elapsed / 1000)} s): ${why}`;
      break;
    }
    await sleep(50);
  }
  const got = out.text.match(verdict)?.[1];
  if (!got?.startsWith('PID occupant')) {
    await end();
    if (got) throw new PidMissedError(`cycling to pid ${target}: ${got}`);
    throw new PidOutOfReachError(outOfReach!);
  }
  const pid = out.pids().occupant;
  const st = pid === undefined ? undefined : readStat(pid);
  if (pid !== target || !st) {
    await end();
    throw new Error(`could not put a process on pid ${target} by cycling pids:\n${out.text}`);
  }
  return occupant(shell, pid, st.start, 'cycling');
}

/**
 * Starts an unrelated `sleep 300` (or `command`, with `env`) on pid `target`,
 * which must be free. Bounded by `timeout`. The caller kills `pid` and
 * `helpers` by pid (and what `command` started, by tag). Throws
 * PidMissedError when another process took the target first (retry with a
 * fresh one) and PidOutOfReachError when this machine cannot get there in time.
 */
export async function occupyPid(target: number, env: NodeJS.ProcessEnv, timeout = 50_000, command: string[] = ['sleep', '300']): Promise<Occupant> {
  const deadline = Date.now() + timeout;
  await untilFree(target);
  const unlock = await lockCounter(deadline);
  try {
    // CORDON_TEST_PID_CYCLING=1 exercises the fallback where set_tid works.
    let noSetTid = 'CORDON_TEST_PID_CYCLING=1';
    if (process.env.CORDON_TEST_PID_CYCLING !== '1') {
      const got = await viaSetTid(target, env, deadline, command);
      if (!('unavailable' in got)) return got;
      noSetTid = got.unavailable;
    }
    return await viaCycling(target, env, deadline, command, noSetTid);
  } finally {
    unlock();
  }
}

/** The occupant is the very process we started (same pid, same start time) and alive. */
export function stillOccupied(o: Occupant): boolean {
  return sameAlive(o.pid, o.start);
}

/**
 * Sets a scenario up (`setup` frees a pid: the target) and puts an unrelated
 * process (`command`, with `env`; default `sleep 300`) on that pid; while
 * attempts miss (another process took the pid first), the scenario is ended
 * (`teardown`) and set up again with a new target, until `timeout` ms have
 * passed. Whatever fails, the scenario in hand is ended before the error is
 * thrown. Resolves with the scenario, its occupant (its cleanup, by pid,
 * registered) and why the attempts before missed; rejects with
 * PidOutOfReachError when this machine cannot reach a pid in time (the
 * caller skips, saying why), or with an error that says the precondition was
 * not met, never that the guarantee failed.
 */
/**
 * Processes whose group or session id is `pid` (Linux, /proc): while any
 * remains, even an unreaped zombie, the kernel hands the pid to no new
 * process. Described as "pid (state)".
 */
function idHolders(pid: number): string[] {
  if (process.platform !== 'linux') return [];
  const found: string[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(f[2]) === pid || Number(f[3]) === pid) found.push(`${entry} (${f[0]})`);
  }
  return found;
}

export async function occupyFreedPid<S>(options: {
  setup: () => Promise<{ scenario: S; target: number }>;
  teardown: (scenario: S) => Promise<void>;
  env: NodeJS.ProcessEnv;
  command?: string[];
  timeout: number;
}): Promise<{ scenario: S; occ: Occupant; misses: string[] }> {
  const deadline = Date.now() + options.timeout;
  const misses: string[] = [];
  // Attempts whose pid stayed a group or session id of zombies nobody reaped.
  let heldByZombies = 0;
  // Attempts whose pid the kernel kept in use (set_tid: EEXIST) while no live
  // process had it: what a pid held as the id of zombies looks like, also
  // when init reaps them just before the look.
  let notGiven = 0;
  for (let attempt = 1; ; attempt++) {
    if (attempt > 1 && deadline - Date.now() < 2000) {
      const tried = attempt - 1;
      if (heldByZombies === tried || (heldByZombies * 2 >= tried && notGiven === tried)) {
        throw new PidOutOfReachError(
          `in ${tried} attempts no freed pid could be given to a new process; in ${heldByZombies} of them it was seen as the session or group id of unreaped zombies (members ended after their anchor was lost, ` +
            `orphaned to an init that had not reaped them), and the kernel hands such a pid to no new process: none could be put on it here`,
        );
      }
      throw new Error(
        `precondition not met: in ${attempt - 1} attempts within ${options.timeout} ms no unrelated process could be put on a freed pid ` +
          `(the guarantee was not checked); the misses:\n${misses.join('\n')}`,
      );
    }
    const { scenario, target } = await options.setup();
    try {
      const occ = await occupyPid(target, options.env, Math.max(1000, deadline - Date.now()), options.command);
      // Registered after the test's useTag(): runs before its leak check. By
      // identity: the occupant may be gone long since (a test can end it on
      // purpose), and its pid another test's process by now.
      onTestFinished(() => occ.end());
      return { scenario, occ, misses };
    } catch (err) {
      await options.teardown(scenario);
      if (!(err instanceof PidMissedError)) throw err;
      const holders = idHolders(target).filter((h) => h.endsWith('(Z)'));
      if (holders.length > 0) heldByZombies++;
      if (err instanceof PidNotGivenError) notGiven++;
      misses.push(`  ${attempt}: ${err.message}${holders.length > 0 ? ` (pid ${target} is the group or session id of zombies: ${holders.join(', ')})` : ''}`);
    }
  }
}
