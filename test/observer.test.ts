// The observers the suite looks through (helpers/observer.ts): /proc and ps.
// On a tree the test starts itself with plain child_process (no cordon), both
// must say the same: pids, parents, groups, sessions, the tag (as a whole
// environment entry, not a prefix or a substring of another variable), the
// command line, a start identity that does not move, signal dispositions, a
// zombie, and a dead pid reported dead. Where /proc is missing only ps is
// checked, and the proc observer must refuse to be selected.
// Also: putting a process on a freed pid (helpers/pids.ts) hands no other
// process a pid out of turn.
import { spawn as spawnChild, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it, onTestFinished } from 'vitest';
import { capture } from './helpers/fixtures.js';
import {
  ObserverError,
  parsePsLines,
  parsePsTime,
  procObserver,
  psObserver,
  selectObserver,
  sessionByGetsid,
  tagPattern,
  TAG_VAR,
  type Observer,
} from './helpers/observer.js';
import { occupyPid, PidMissedError, PidOutOfReachError, type Occupant } from './helpers/pids.js';
import { RUN_VAR, useTag, waitFor, waitGone, within } from './helpers/procs.js';
import { watchdog } from './helpers/time.js';
import { missing } from './helpers/requirements.js';
import { itWhere } from './helpers/tier.js';

const hasProc = process.platform === 'linux';
const observers: Observer[] = hasProc ? [procObserver, psObserver] : [psObserver];
const noPs = missing('ps') ?? '';

/** The environment of the test, without any test tag (for the decoys). */
function untagged(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env[TAG_VAR];
  return { ...env, ...extra };
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
}

// The root, in a session and group of its own (detached): it ignores TERM and
// catches USR1, starts a sleeper, a shell that starts a grandchild sleeper,
// and a zombie's parent ($2: a shell that starts a child that prints its pid
// and exits, and at once execs sleep, which never reaps it). An argument with
// two blanks in a row shows how each observer joins arguments.
const ZOMBIE_PARENT = `sh -c 'echo "PID zombie $$"' & exec sleep 300`;
const ROOT_SCRIPT =
  "trap '' TERM; trap ':' USR1; " +
  'sleep 300 & echo "PID child $!"; ' +
  'sh -c \'sleep 300 & echo "PID grandchild $!"; wait\' & echo "PID middle $!"; ' +
  'sh -c "$2" zparent & echo "PID zparent $!"; ' +
  'echo READY; wait';
const ROOT_ARGS = ['-c', ROOT_SCRIPT, 'root', 'two  blanks', ZOMBIE_PARENT];

describe('the process observers', () => {
  // proves nothing of the contract: the suite's own observer
  it(`the observer is chosen by CORDON_TEST_OBSERVER (this run: ${selectObserver().name})`, () => {
    expect(selectObserver({}, 'linux').name).toBe('proc');
    expect(selectObserver({}, 'darwin').name).toBe('ps');
    expect(selectObserver({ CORDON_TEST_OBSERVER: 'ps' }, 'linux').name).toBe('ps');
    expect(selectObserver({ CORDON_TEST_OBSERVER: 'proc' }, 'linux').name).toBe('proc');
    expect(() => selectObserver({ CORDON_TEST_OBSERVER: 'proc' }, 'darwin')).toThrow(ObserverError);
    expect(() => selectObserver({ CORDON_TEST_OBSERVER: 'pss' }, 'linux')).toThrow(/must be proc or ps/);
  });

  // proves nothing of the contract: the suite's own observer
  it("ps's CPU time reads as seconds, from procps ([dd-]hh:mm:ss) and from BSD ps (mm:ss.cc); anything else is an error", () => {
    expect(parsePsTime('00:00:01')).toBe(1);
    expect(parsePsTime('2-01:00:03')).toBe(2 * 86_400 + 3603);
    expect(parsePsTime('0:00.12')).toBeCloseTo(0.12);
    expect(parsePsTime('  1:02:03.50')).toBeCloseTo(3723.5);
    expect(() => parsePsTime('12')).toThrow(ObserverError);
    expect(() => parsePsTime('-')).toThrow(ObserverError);
  });

  // proves nothing of the contract: the suite's own observer
  it('ps lines parse with arguments and environment after the columns, and a line that does not parse is an error', () => {
    const out =
      '  412     1   412   412 Mon Nov  2 03:04:05 2026 Ss   sh -c echo  a b CORDON_TEST_TAG=r1-t2 HOME=/x y\n' +
      '99999   412   412   412 Sun Nov 29 23:59:59 2026 Z    [sh] <defunct>\n';
    const rows = parsePsLines(out, true);
    expect(rows.map((r) => [r.pid, r.stat.ppid, r.stat.pgid, r.stat.sid, r.stat.start, r.stat.state])).toEqual([
      [412, 1, 412, '412', 'Mon Nov 2 03:04:05 2026', 'S'],
      [99999, 412, 412, '412', 'Sun Nov 29 23:59:59 2026', 'Z'],
    ]);
    expect(rows[0]!.rest).toBe('sh -c echo  a b CORDON_TEST_TAG=r1-t2 HOME=/x y');
    expect(tagPattern({ value: 'r1-t2' }).test(rows[0]!.rest)).toBe(true);
    expect(tagPattern({ value: 'r1-t' }).test(rows[0]!.rest), 'a prefix of the tag is not the tag').toBe(false);
    expect(tagPattern({ prefix: 'r1-' }).test(rows[0]!.rest)).toBe(true);
    expect(tagPattern({ value: 'r1-t2' }).test('sh XCORDON_TEST_TAG=r1-t2'), 'another variable ending in the name').toBe(false);
    expect(tagPattern({ value: 'r1-t2' }).test('sh OTHER=CORDON_TEST_TAG=r1-t2'), 'a value that looks like the tag').toBe(false);
    expect(() => parsePsLines('  412 garbage\n', true)).toThrow(ObserverError);
    // BSD ps shows a session handle of 0 where it hides sessions: asking for it is an error.
    const hidden = parsePsLines('  412     1   412     0 Mon Nov  2 03:04:05 2026 Ss   sh\n', false)[0]!;
    expect(() => hidden.stat.sid).toThrow(/cannot tell the session/);
  });

  // proves nothing of the contract: the suite's own observer
  it('a session read when asked (macOS: getsid through the compiled fixture) is read once, and one of a process gone is an error', () => {
    const asked: number[] = [];
    const rows = parsePsLines('  412     1   412     0 Mon Nov  2 03:04:05 2026 Ss   sh\n  413   412   412     0 Mon Nov  2 03:04:05 2026 S    sh\n', (pid) => {
      asked.push(pid);
      return pid === 412 ? '412' : undefined;
    });
    expect(asked, 'nothing asked while parsing').toEqual([]);
    expect(rows[0]!.stat.sid).toBe('412');
    expect(rows[0]!.stat.sid).toBe('412');
    expect(asked, 'asked once').toEqual([412]);
    expect(() => rows[1]!.stat.sid).toThrow(/cannot tell the session of pid 413: it is gone/);
  });

  const noPsCc = missing('ps', 'cc') ?? '';
  // proves nothing of the contract: the suite's own observer
  itWhere(noPsCc === '', "the compiled fixture's getsid (how the ps observer reads sessions on macOS) gives the session ps -o sid and /proc give, and nothing for a dead pid", noPsCc, async () => {
    // Ours, our parent's, and a child's in a session of its own.
    const child = spawnChild('sleep', ['30'], { detached: true, stdio: 'ignore' });
    onTestFinished(() => void child.kill('SIGKILL'));
    for (const pid of [process.pid, process.ppid, child.pid!]) {
      const got = sessionByGetsid(pid);
      expect(got, `pid ${pid}`).toMatch(/^\d+$/);
      if (process.platform !== 'darwin') expect(got, `pid ${pid}: getsid and ps -o sid`).toBe(psObserver.stat(pid)!.sid);
      // (Under an emulator, CORDON_TEST_EMULATOR, qemu-user answers this process's own
      // /proc/<pid>/stat itself, its session 0: only the others' are the kernel's.)
      if (hasProc && !(process.env.CORDON_TEST_EMULATOR && pid === process.pid)) expect(got, `pid ${pid}: getsid and /proc`).toBe(procObserver.stat(pid)!.sid);
    }
    expect(sessionByGetsid(child.pid!), "the detached child's session is its own").toBe(String(child.pid));
    child.kill('SIGKILL');
    await exited(child);
    expect(sessionByGetsid(child.pid!), 'a reaped pid').toBeUndefined();
  });

  // proves nothing of the contract: the suite's own observer
  itWhere(noPs === '', `${observers.map((o) => o.name).join(' and ')} give this process's user and group ids (real, effective, saved${hasProc ? ', filesystem; and the supplementary groups' : ''})`, noPs, () => {
    const uid = process.getuid!();
    const gid = process.getgid!();
    for (const o of observers) {
      const c = o.credentials(process.pid)!;
      const n = process.platform === 'linux' ? 4 : 3;
      expect(c.uid, `${o.name}: uids`).toEqual(Array(n).fill(uid));
      expect(c.gid, `${o.name}: gids`).toEqual(Array(n).fill(gid));
      // Supplementary groups: /proc and procps; BSD ps has no keyword for them.
      if (hasProc) expect(c.groups, `${o.name}: groups, as /proc gives them`).toEqual(procObserver.credentials(process.pid)!.groups);
      else expect(c.groups, 'macOS ps: no supplementary groups').toBeUndefined();
    }
    expect(psObserver.credentials(2 ** 22 + 12_345), 'no such process').toBeUndefined();
  });

  // proves nothing of the contract: the suite's own observer
  itWhere(noPs === '', `${observers.map((o) => o.name).join(' and ')} agree on a tree the test started (pids, parents, groups, sessions, tag, start, signals, zombie, a dead pid)`, noPs, async () => {
    const t = useTag();
    const run = process.env[RUN_VAR] ?? '';
    const children: ChildProcess[] = [];
    let group: number | undefined;
    onTestFinished(async () => {
      // The tree by its group (the root, our unreaped child until it exits, pins the id), the rest by pid.
      if (group !== undefined) {
        try {
          process.kill(-group, 'SIGKILL');
        } catch {
          // gone
        }
      }
      // (Node's own handle: it never signals a child it has reaped, whose pid may be another's now.)
      for (const c of children) {
        c.kill('SIGKILL');
        await exited(c);
      }
      // A SIGKILLed process is listed, running, until it has run its exit: on
      // a loaded machine the tag's leak check after this cleanup saw one
      // (seen in CI). Wait for what this cleanup killed to be gone.
      await waitGone(t, watchdog(10_000), 'the tree this test killed to be gone');
    });

    const root = spawnChild('sh', ROOT_ARGS, { env: t.env, stdio: ['ignore', 'pipe', 'inherit'], detached: true });
    children.push(root);
    group = root.pid;
    // Decoys: the tag with one more character (found by the run prefix, not by
    // the tag), and the tag under another name and inside another value.
    const longer = spawnChild('sleep', ['300'], { env: untagged({ [TAG_VAR]: `${t.tag}x` }), stdio: 'ignore' });
    const elsewhere = spawnChild('sleep', ['300'], { env: untagged({ [`X${TAG_VAR}`]: t.tag, OTHER: `${TAG_VAR}=${t.tag}` }), stdio: 'ignore' });
    children.push(longer, elsewhere);

    const out = capture(root.stdout);
    await within(out.until(/^READY$[\s\S]*^PID zombie \d+$|^PID zombie \d+$[\s\S]*^READY$/m), 10_000, 'the tree to start', t.tag);
    // The middle shell prints the grandchild's pid on its own time: after
    // READY when the machine is loaded (seen in CI).
    await within(out.until(/^PID grandchild \d+$/m), 10_000, 'the grandchild to start', t.tag);
    const pids = out.pids();
    const rootPid = root.pid!;
    const { zombie, zparent, child, middle, grandchild } = pids as Record<string, number>;
    const members = [rootPid, child, middle, grandchild, zparent].sort((a, b) => a - b);
    // The zombie is one once its parent has exec'd sleep; the grandchild runs once printed.
    await waitFor(() => observers.every((o) => o.stat(zombie)?.state === 'Z'), { timeout: 5000, what: `pid ${zombie} to be a zombie`, watch: t.tag });

    const seen = observers.map((o) => {
      const stat = (pid: number) => {
        const s = o.stat(pid);
        return s && { ppid: s.ppid, pgid: s.pgid, sid: s.sid };
      };
      return {
        name: o.name,
        tagged: o
          .tagged({ value: t.tag })
          .map((p) => p.pid)
          .sort((a, b) => a - b),
        byRun: new Set(o.tagged({ prefix: run }).map((p) => p.pid)),
        me: stat(process.pid),
        root: stat(rootPid),
        child: stat(child),
        grandchild: stat(grandchild),
        zparent: stat(zparent),
        zombie: o.stat(zombie),
        hasTag: [o.hasTag(rootPid, t.tag), o.hasTag(grandchild, t.tag), o.hasTag(longer.pid!, t.tag), o.hasTag(elsewhere.pid!, t.tag)],
        cmdline: o.cmdline(rootPid),
        environ: o.environ(rootPid),
        cpu: o.cpuSeconds(rootPid),
        starts: members.map((pid) => o.stat(pid)!.start),
        startsAgain: members.map((pid) => o.stat(pid)!.start),
        signals: o.signals(rootPid),
      };
    });

    for (const s of seen) {
      const why = (what: string) => `${s.name}: ${what}`;
      expect(s.tagged, why('the tagged processes: the tree, not the decoys, not the zombie')).toEqual(members);
      expect(s.byRun.has(longer.pid!), why("the run's prefix finds the longer tag")).toBe(true);
      expect(s.byRun.has(elsewhere.pid!), why('the tag under another name is no tag')).toBe(false);
      for (const pid of members) expect(s.byRun.has(pid), why(`the run's prefix finds member ${pid}`)).toBe(true);
      expect(s.hasTag, why('hasTag: root, grandchild, longer tag, tag elsewhere')).toEqual([true, true, false, false]);
      expect(s.root, why('the root: our child, leader of its own group')).toEqual({ ppid: process.pid, pgid: rootPid, sid: s.root!.sid });
      expect(s.root!.sid, why("the root's session (setsid) is not ours")).not.toBe(s.me!.sid);
      expect(s.child, why('the child: in the root\'s group and session')).toEqual({ ppid: rootPid, pgid: rootPid, sid: s.root!.sid });
      expect(s.grandchild, why('the grandchild')).toEqual({ ppid: middle, pgid: rootPid, sid: s.root!.sid });
      expect(s.zparent?.sid, why("the zombie's parent")).toBe(s.root!.sid);
      expect(s.zombie?.state, why('the unreaped child')).toBe('Z');
      expect(s.zombie?.ppid, why("the zombie's parent")).toBe(zparent);
      expect(s.tagged, why('a zombie is not a live tagged process')).not.toContain(zombie);
      expect(s.cmdline, why("the root's command line")).toBe(['sh', ...ROOT_ARGS].join(' '));
      expect(s.environ, why("the root's environment: the tag, an entry of its own")).toContain(`${TAG_VAR}=${t.tag}`);
      expect(s.cpu, why("the root's CPU time: a count of seconds")).toBeGreaterThanOrEqual(0);
      expect(s.startsAgain, why('start identities do not move')).toEqual(s.starts);
      expect(s.signals, why("the root's signals")).toBeDefined();
      expect(s.signals!.ignored & (1n << 14n), why('SIGTERM ignored')).not.toBe(0n);
      expect(s.signals!.caught & (1n << 9n), why('SIGUSR1 caught')).not.toBe(0n);
    }
    if (hasProc) {
      const [proc, ps] = seen;
      expect(ps!.tagged).toEqual(proc!.tagged);
      expect(ps!.root!.sid, 'the session, as ps and /proc give it').toBe(proc!.root!.sid);
      expect(ps!.signals).toEqual(proc!.signals);
      expect(procObserver.openFds(rootPid).has(0), '/proc lists the root\'s descriptors').toBe(true);
    }
    expect(() => psObserver.openFds(rootPid), 'ps cannot list descriptors: a clear error').toThrow(/only \/proc can/);

    // A dead pid: a tagged child of this process, seen alive by both, then
    // SIGKILLed and reaped (by Node).
    const victim = spawnChild('sleep', ['300'], { env: t.env, stdio: 'ignore' });
    children.push(victim);
    const v = victim.pid!;
    await waitFor(() => observers.every((o) => o.hasTag(v, t.tag)), { timeout: 5000, what: `pid ${v} to be seen tagged`, watch: t.tag });
    const vStarts = observers.map((o) => o.stat(v)!.start);
    for (const o of observers) expect(o.tagged({ value: t.tag }).map((p) => p.pid), `${o.name}: the victim, alive`).toContain(v);
    victim.kill('SIGKILL');
    await within(exited(victim), 5000, `pid ${v} to exit`, t.tag);
    observers.forEach((o, i) => {
      const st = o.stat(v);
      // Reaped: no process has the pid, or another one got it (another start).
      if (st) expect(st.start, `${o.name}: pid ${v} is another process now`).not.toBe(vStarts[i]);
      else {
        expect(o.cmdline(v), `${o.name}: no command line for a dead pid`).toBe('');
        expect(o.environ(v), `${o.name}: no environment for a dead pid`).toBeUndefined();
        expect(o.cpuSeconds(v), `${o.name}: no CPU time for a dead pid`).toBeUndefined();
        expect(o.hasTag(v, t.tag), `${o.name}: no tag on a dead pid`).toBe(false);
        expect(o.signals(v), `${o.name}: no signals for a dead pid`).toBeUndefined();
      }
      expect(
        o.tagged({ value: t.tag }).map((p) => p.pid),
        `${o.name}: the dead pid is not tagged`,
      ).not.toContain(v);
    });
  });
});

// helpers/pids.ts puts an unrelated process on a freed pid (pid-reuse tests).
// It must not hand any other process a pid out of turn: a test running beside
// it (another worker) that has just seen its member die would find the pid
// taken again in the same second, which the ps observer (start to the second)
// cannot tell from the member. The kernel hands pids out in rising order,
// wrapping at pid_max; an unrelated forker watched meanwhile must see exactly
// that.
describe('a process put on a freed pid (helpers/pids.ts)', () => {
  // proves nothing of the contract: the suite's own pid-reuse helper
  itWhere(process.platform !== 'win32', "hands no other process a pid out of turn: an unrelated forker's pids only rise (or wrap at pid_max)", 'helpers/pids.ts puts processes on chosen pids on Linux and macOS only', async (ctx) => {
    const t = useTag();
    // Each fork's pid, in the order the kernel handed them to this loop.
    const forker = spawnChild('sh', ['-c', 'while :; do /bin/true & echo $!; wait $!; done'], { env: t.env, stdio: ['ignore', 'pipe', 'ignore'] });
    onTestFinished(async () => {
      forker.kill('SIGKILL');
      await exited(forker);
    });
    const out = capture(forker.stdout);
    const forks = () => out.text.split('\n').filter((l) => /^\d+$/.test(l)).map(Number);
    await waitFor(() => forks().length >= 20, { timeout: watchdog(10_000), what: 'the forker to fork 20 times', watch: t.tag });
    const deadline = Date.now() + watchdog(40_000);
    let occ: Occupant | undefined;
    const misses: string[] = [];
    while (!occ) {
      if (Date.now() > deadline) throw new Error(`watchdog: no process could be put on a freed pid; the misses:\n${misses.join('\n')}`);
      // The target: a child of this process, exited and reaped.
      const victim = spawnChild('true', [], { env: t.env, stdio: 'ignore' });
      await within(exited(victim), watchdog(5000), 'the victim to exit', t.tag);
      try {
        occ = await occupyPid(victim.pid!, t.env, Math.max(1000, deadline - Date.now()));
      } catch (err) {
        if (err instanceof PidOutOfReachError) {
          console.log(`skipped: ${err.message}`);
          ctx.skip(err.message);
          return;
        }
        if (!(err instanceof PidMissedError)) throw err;
        misses.push(`  ${err.message}`);
      }
    }
    const o = occ;
    onTestFinished(() => o.end());
    // A moment more of forking once the occupant is there.
    const before = forks().length;
    await waitFor(() => forks().length >= before + 20, { timeout: watchdog(10_000), what: 'the forker to fork 20 times more', watch: t.tag });
    forker.kill('SIGKILL');
    await exited(forker);
    const pids = forks();
    const pidMax = process.platform === 'linux' ? Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8')) : 99_999;
    // A step down by less than half the pid space is a pid out of turn; a wrap goes down by nearly all of it.
    const outOfTurn = pids.flatMap((p, i) => (i > 0 && p < pids[i - 1]! && pids[i - 1]! - p < pidMax / 2 ? [`${pids[i - 1]} then ${p}`] : []));
    expect(outOfTurn, `the forker's ${pids.length} pids around the occupant on ${o.pid} (${o.how})`).toEqual([]);
  });
});
