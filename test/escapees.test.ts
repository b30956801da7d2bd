// CONTRACT C2, C3: terminate() reaches every descendant, including ones that
// left the process group or session (setsid, double fork, nohup), and
// resolves only once the whole tree is gone. An escapee that also scrubbed its
// environment (env -i) carries no test tag: it is watched by the pid it
// printed (with its start time) and killed by that pid in the test's cleanup.
import { readdirSync } from 'node:fs';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { Registry, spawn } from '../lib/index.js';
import { capture, fixture } from './helpers/fixtures.js';
import { ensureDist, startHost } from './helpers/host.js';
import { hostEnded, killHost, spawnLeased, useRuntime } from './helpers/lease.js';
import { alive, sleep, useTag, waitFor, waitGone, within } from './helpers/procs.js';
import { caps, itWhere, orphanedEscapee, tier } from './helpers/tier.js';
import { has, missing, onlyWhere } from './helpers/requirements.js';
import { observer } from './helpers/observer.js';
import { promised, watchdog } from './helpers/time.js';
import { collect, expectNamedGone } from './helpers/trees.js';

describe('escapees', () => {
  // proves C3, C2
  it('terminate() reaches background, setsid, double-forked and nohup children', async () => {
    const t = useTag();
    const { proc, pids } = await collect(spawn(fixture('tree.sh'), [], { env: t.env }), t.tag);
    expect(Object.keys(pids).sort()).toEqual(['bg', 'double', 'nohup', 'setsid']);
    for (const pid of Object.values(pids)) expect(alive(pid)).toBe(true);

    await within(proc.terminate({ grace: 2000 }), 5000, 'terminate() to resolve', t.tag);
    // Resolved at quiescence of the tree, not of the root: nothing is left now.
    expectNamedGone(pids);
    expect(t.procs()).toEqual([]);
    const result = await within(proc.result, 5000, 'result to settle', t.tag);
    expect(result.signal).toBe('SIGTERM');
  });

  // proves C5
  it('a setsid escapee left after the root exits is killed under the default policy', async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', 'setsid sleep 300 >/dev/null 2>&1 & echo "PID s $!"'], { env: t.env });
    const out = capture(proc.stdout);
    const result = await within(proc.result, 10_000, 'result to settle', t.tag);
    expect(result.exitCode).toBe(0);
    expect(result.leftoversKept).toBe(false);
    // Orphaned at once: caught by a tier that catches orphaned escapees (the
    // process-group tier: by the marker in its environment).
    if (orphanedEscapee(t, out.pids().s, { program: 'sleep', forkedBy: 'member' })) expect(result.leftovers.map((l) => l.pid)).toContain(out.pids().s);
    await waitGone(t, 2000);
  });

  // A tier that claims every escapee (cgroup, subreaper) must catch one that
  // scrubbed its environment; one that does not (process-group: it finds
  // escapees by the marker in their environment) must say so.
  const claimsAll = caps.guarantees.catchesEscapees === 'always';
  const SCRUBBED = 'env -i setsid sleep 307 </dev/null >/dev/null 2>&1 & echo "PID s $!"';

  /** The scrubbed escapee's pid, once it runs `sleep 307` with an empty environment; killed by pid when the test ends. */
  async function scrubbedEscapee(pid: number | undefined): Promise<number> {
    expect(pid, 'the escapee printed its pid').toBeTypeOf('number');
    onTestFinished(() => {
      if (alive(pid!)) process.kill(pid!, 'SIGKILL');
    });
    // env -i, then setsid, then sleep: one pid, three images; wait for the last.
    await waitFor(() => !alive(pid!) || observer.cmdline(pid!) === 'sleep 307', { timeout: watchdog(10_000), what: 'the escapee to exec sleep 307', watch: [pid!] });
    if (alive(pid!)) expect(observer.environ(pid!) ?? [], 'the escapee scrubbed its environment').toEqual([]);
    return pid!;
  }

  // proves C3, C11
  it(`an escapee that scrubbed its environment (env -i) and left the session: ${claimsAll ? 'terminate() ends it' : `not promised by the ${tier} tier, which says so`}`, async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', `${SCRUBBED}; echo READY; exec sleep 300`], { env: t.env });
    const out = capture(proc.stdout);
    await out.until(/^READY$/m);
    const s = await scrubbedEscapee(out.pids().s);
    await within(proc.terminate({ grace: 2000 }), watchdog(15_000), 'terminate() to resolve', [t.tag, s]);
    const result = await within(proc.result, watchdog(10_000), 'the result', [t.tag, s]);
    if (claimsAll) {
      expect(alive(s), 'the scrubbed escapee is gone once terminate() resolved').toBe(false);
      expect(result.coverage).toBe('complete');
    } else {
      expect(caps.guarantees.catchesEscapees, `the ${tier} tier does not claim an escapee without its marker`).not.toBe('always');
      expect(result.coverage).toBe('partial');
    }
    await waitGone(t, 2000);
  });

  // proves C5, C11
  it(`an orphaned escapee that scrubbed its environment: ${claimsAll ? 'a leftover, killed under the default policy' : `not promised by the ${tier} tier, which says so`}`, async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', SCRUBBED], { env: t.env });
    const out = capture(proc.stdout);
    const result = await within(proc.result, watchdog(10_000), 'the result', t.tag);
    const s = await scrubbedEscapee(out.pids().s);
    if (claimsAll) {
      expect(result.leftovers.map((l) => l.pid), 'the escapee is reported as a leftover').toContain(s);
      // Default policy after exit 0: killed (leftoversKept false), so it is gone.
      expect(result.leftoversKept).toBe(false);
      await waitGone([s], watchdog(5000), 'the scrubbed escapee to be killed');
    } else {
      expect(caps.guarantees.catchesEscapees).not.toBe('always');
      expect(result.coverage).toBe('partial');
    }
  });

  // One that leaves the tree's process group without leaving its session
  // (setpgid, as a shell's job control moves every job) and scrubs its
  // environment: every tier catches it, the process-group tier by the
  // session, which the anchor leads and no process can join.
  const SETPGID = `(env -i python3 -c "import os; os.setpgid(0, 0); os.execve('/bin/sleep', ['sleep', '308'], {})" </dev/null >/dev/null 2>&1 & echo "PID s $!")`;
  // proves C3
  itWhere(has('python3'), 'an orphaned escapee that left the process group but not the session, its environment scrubbed: terminate() ends it in every tier', missing('python3') ?? '', async () => {
    const t = useTag();
    // (after the anchor's first snapshot, which could see it still parented)
    const proc = spawn('sh', ['-c', `sleep 0.3; ${SETPGID}; echo READY; exec sleep 300`], { env: t.env });
    const out = capture(proc.stdout);
    await out.until(/^READY$/m);
    const s = out.pids().s!;
    expect(s, 'the escapee printed its pid').toBeTypeOf('number');
    onTestFinished(() => {
      if (alive(s)) process.kill(s, 'SIGKILL');
    });
    await waitFor(() => !alive(s) || observer.cmdline(s) === 'sleep 308', { timeout: watchdog(10_000), what: 'the escapee to exec sleep 308', watch: [s] });
    expect(alive(s), 'the escapee runs').toBe(true);
    expect(observer.environ(s), 'it scrubbed its environment').toEqual([]);
    await within(proc.terminate({ grace: 2000 }), watchdog(15_000), 'terminate() to resolve', [t.tag, s]);
    expect(alive(s), 'the escapee is gone once terminate() resolved').toBe(false);
    await waitGone(t, 2000);
  });

  // The same with threads: the anchor's walks probe pids by number, which
  // reaches threads' /proc entries too (each with its process's session and
  // environment); a thread is never taken for a member of its own (named in
  // leftGroup by its thread id; the anchor's own threads, which qemu-user
  // gives it in the arm64 lane, would hold the stop until STUCK).
  const THREADED = `(env -i python3 -c "import os, threading, time; os.setpgid(0, 0); [threading.Thread(target=time.sleep, args=(300,), daemon=True).start() for _ in range(4)]; print('PID t', os.getpid(), flush=True); time.sleep(300)" </dev/null &)`;
  // Linux only: elsewhere (macOS) a thread has no pid for a walk to probe.
  const threadPids = onlyWhere(process.platform === 'linux', 'threads have pids a walk can probe only on Linux (/proc/<pid>/task)');
  // proves C3
  itWhere(has('python3') && !threadPids.skip, 'a threaded escapee that left the process group but not the session, its environment scrubbed: terminate() ends it, no thread taken for a member', missing('python3') ?? threadPids.note.replace(/^ \[skipped: (.*)\]$/, '$1'), async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', `sleep 0.3; ${THREADED}; exec sleep 300`], { env: t.env });
    const out = capture(proc.stdout);
    await out.until(/^PID t \d+$/m);
    const p = out.pids().t!;
    onTestFinished(() => {
      if (alive(p)) process.kill(p, 'SIGKILL');
    });
    await waitFor(() => !alive(p) || readdirSync(`/proc/${p}/task`).length >= 5, { timeout: watchdog(10_000), what: 'the escapee to start its threads', watch: [p] });
    expect(alive(p), 'the escapee runs').toBe(true);
    const threads = readdirSync(`/proc/${p}/task`).map(Number).filter((tid) => tid !== p);
    const named: number[] = [];
    proc.on('leftGroup', (l) => named.push(l.pid));
    await within(proc.terminate({ grace: 2000 }), watchdog(15_000), 'terminate() to resolve', [t.tag, p]);
    expect(alive(p), 'the escapee is gone once terminate() resolved').toBe(false);
    const result = await within(proc.result, watchdog(5000), 'the result', [t.tag, p]);
    expect(result.signal).toBe('SIGTERM');
    expect([...named, ...result.leftGroup.map((l) => l.pid)].filter((pid) => threads.includes(pid)), 'no thread named as a member').toEqual([]);
    await waitGone(t, 2000);
  });

  // Every other way a tree ends reaches the scrubbed escapee too, where the
  // tier claims it: kill(), an AbortSignal and an owner's release() in this
  // process; the host SIGKILLed and a lease run out with no host attached.
  const notClaimed = `the ${tier} tier finds escapees by their environment; it says so (catchesEscapees "${caps.guarantees.catchesEscapees}", asserted above)`;
  const ROOT = `${SCRUBBED}; echo READY; exec sleep 300`;

  for (const how of ['kill()', 'an AbortSignal', "its owner's release()"] as const) {
    // proves C3, C10
    itWhere(claimsAll, `the scrubbed escapee is gone once ${how} ended the tree`, notClaimed, async () => {
      const t = useTag();
      const ac = new AbortController();
      const owner = new Registry().owner(`scrubbed-${process.pid}`);
      const options = { env: t.env, ...(how === 'an AbortSignal' ? { signal: ac.signal } : {}) };
      const proc = how === "its owner's release()" ? owner.spawn('sh', ['-c', ROOT], options) : spawn('sh', ['-c', ROOT], options);
      proc.result.catch(() => undefined);
      const out = capture(proc.stdout);
      await out.until(/^READY$/m);
      const s = await scrubbedEscapee(out.pids().s);
      const ended = how === 'kill()' ? proc.kill() : how === 'an AbortSignal' ? (ac.abort(), proc.result.then(() => undefined, () => undefined)) : owner.release({ grace: 500 });
      await within(ended, watchdog(15_000), `${how} to resolve`, [t.tag, s]);
      expect(alive(s), `the scrubbed escapee is gone once ${how} resolved`).toBe(false);
      await waitGone(t, 2000);
    });
  }

  describe('with no host attached', () => {
    beforeAll(async () => {
      await ensureDist();
    });

    // proves C8
    itWhere(claimsAll, 'the host SIGKILLed: the anchor alone ends the scrubbed escapee', notClaimed, async () => {
      const t = useTag();
      const host = startHost(['wait', '--trees', 'scrubbed'], t.env);
      hostEnded(host);
      await host.ready();
      const s = await scrubbedEscapee(host.out.pids()['scrubbed.s']);
      await killHost(host, t);
      // C8's 1 s, with the suite's allowance for a loaded machine.
      await waitFor(() => !alive(s), { timeout: promised(1000), what: 'the scrubbed escapee to be gone after the host died', watch: [t.tag, s] });
      await waitGone(t, watchdog(5000));
    });

    // proves C8
    itWhere(claimsAll, 'a lease that runs out: the anchor ends the scrubbed escapee with the tree', notClaimed, async () => {
      const t = useTag();
      const { env } = useRuntime(t);
      const leased = await spawnLeased(env, 2000, 500, ROOT);
      const s = await scrubbedEscapee(leased.pids['tree.s']);
      await killHost(leased.host, t);
      await sleep(1000);
      expect(alive(s), 'the escapee of a leased tree lives on while the lease does').toBe(true);
      await waitFor(() => !alive(s), { timeout: watchdog(15_000), what: 'the scrubbed escapee to be gone when the lease ran out', watch: [t.tag, s] });
      await waitGone(t, watchdog(5000));
    });
  });
});
