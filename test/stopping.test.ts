// How a tree is asked to stop (issue #16): `killSignal` is the polite signal
// every member gets, and the `stop` hook (Go's Cmd.Cancel) is asked first;
// whatever they do, the stop still ends in the forced kill of the whole tree.
// Observed from outside: what the root's traps print, and which tagged
// processes /proc still lists.
import { describe, expect, it, onTestFinished } from 'vitest';
import { spawn, type ContainedProcess } from '../lib/index.js';
import { killSignalOption, rootSignal } from '../lib/stopping.js';
import { capture } from './helpers/fixtures.js';
import { alive, cmdline, killPids, useTag, waitFor, waitGone, within } from './helpers/procs.js';
import { caps, tier } from './helpers/tier.js';

/** A root that reports each of INT, HUP and TERM on stdout and exits 0; with a background child. */
const REPORTS = [
  '-c',
  'for s in INT HUP TERM; do trap "echo got $s; exit 0" $s; done; sleep 300 & echo "PID child $!"; echo "PID root $$"; while :; do sleep 0.05; done',
];

/** A root that exits when it reads a line on stdin ("q"), and reports a TERM; with a background child. */
const READS_Q = ['-c', 'trap "echo got TERM; exit 0" TERM; sleep 300 & echo "PID child $!"; echo "PID root $$"; read x; echo "bye $x"; exit 0'];

async function started(proc: ContainedProcess, tag: string) {
  const out = capture(proc.stdout);
  await within(out.until(/PID root \d+/), 10_000, 'the root to start', tag);
  // A barrier: the background child has exec'd sleep. A signal that reaches
  // it between fork and exec runs the root's inherited trap (a pending trap
  // that dash forgets at the exec), and sleep then outlives the polite signal
  // until the forced kill: shell semantics, not cordon's (seen in CI).
  const child = out.pids().child!;
  await waitFor(() => cmdline(child) === 'sleep 300', { timeout: 10_000, what: 'the child to exec sleep', watch: tag });
  return out;
}

describe('killSignal', () => {
  for (const signal of ['SIGINT', 'SIGHUP'] as const) {
    // proves C3
    it(`${signal} is the polite signal of terminate(); the child is still ended`, async () => {
      const t = useTag();
      const proc = spawn('sh', REPORTS, { env: t.env, killSignal: signal, stdio: ['ignore', 'pipe', 'ignore'] });
      const out = await started(proc, t.tag);
      const { child } = out.pids();
      await within(proc.terminate({ grace: 5_000 }), 15_000, 'terminate', t.tag);
      const result = await within(proc.result, 5_000, 'the result', t.tag);
      expect(out.text).toContain(`got ${signal.slice(3)}\n`);
      expect(out.text).not.toContain('got TERM');
      expect(result.exitCode).toBe(0);
      expect(alive(child!), 'the background child is gone (a non-interactive sh makes it ignore SIGINT: the forced kill ends it)').toBe(false);
      await waitGone(t, 5_000);
    });
  }

  // proves C3
  it('default: SIGTERM', async () => {
    const t = useTag();
    const proc = spawn('sh', REPORTS, { env: t.env, stdio: ['ignore', 'pipe', 'ignore'] });
    const out = await started(proc, t.tag);
    await within(proc.terminate({ grace: 5_000 }), 15_000, 'terminate', t.tag);
    const result = await within(proc.result, 5_000, 'the result', t.tag);
    expect(out.text, `the root's trap ran (the result: ${JSON.stringify({ exitCode: result.exitCode, signal: result.signal })})`).toContain('got TERM\n');
  });

  // terminate() resolves once the tree is quiescent and the output its pipes
  // carried has been read (the result is out then): code that awaits it and
  // then looks at what it read sees all of it, whichever of the anchor's
  // channel and the pipe the host's event loop reads first. The root writes
  // 256 kB and its last line at the polite signal. A holder of stdout that
  // scrubbed its environment, left the session and lost its parent at once
  // (a double fork) is ended with the tree where every escapee is caught; in
  // the process-group tier no walk sees it, so the tree is quiescent while the
  // pipe is held, and terminate() waits for the wait delay to close it.
  // proves C3, C4
  it('terminate() resolves with the output read and the result out, bounded by the wait delay where an unseen process holds the pipe', async () => {
    const t = useTag();
    const holders: number[] = [];
    // Untagged (env -i): ended by pid, by this test's own cleanup.
    onTestFinished(() => killPids(holders));
    const proc = spawn(
      'sh',
      [
        '-c',
        // (printf is the shell's own: a process forked after the polite signal would get it too)
        'trap "i=0; while [ \\$i -lt 4096 ]; do printf %064d 0; i=\\$((i+1)); done; echo; echo got TERM; exit 0" TERM; (env -i setsid sleep 300 & echo "PID holder $!"); sleep 300 & echo "PID child $!"; echo "PID root $$"; while :; do sleep 0.05; done',
      ],
      { env: t.env, waitDelay: 1_000, stdio: ['ignore', 'pipe', 'ignore'] },
    );
    const out = await started(proc, t.tag);
    const holder = out.pids().holder!;
    holders.push(holder);
    await waitFor(() => cmdline(holder) === 'sleep 300', { timeout: 10_000, what: 'the holder to exec sleep', watch: t.tag });
    let resultOut = false;
    void proc.result.then(
      () => (resultOut = true),
      () => (resultOut = true),
    );
    await within(proc.terminate({ grace: 5_000 }), 15_000, 'terminate', t.tag);
    expect(resultOut, 'the result is out when terminate() resolves').toBe(true);
    expect(out.text).toMatch(/\n0{262144}\ngot TERM\n$/);
    const result = await proc.result;
    expect(result.exitCode).toBe(0);
    if (caps.guarantees.catchesEscapees === 'always') {
      expect(alive(holder), 'the holder is ended with the tree').toBe(false);
      expect(result.waitDelayExceeded).toBe(false);
    } else {
      expect(caps.notes.join(' '), `the ${tier} tier says a double-forked escapee with a scrubbed environment is not caught`).toMatch(/scrubbed environment \(env -i\)[^]*\(a double fork[^]*?\) is not/);
      expect(alive(holder), 'the holder escaped, as the tier says').toBe(true);
      expect(result.waitDelayExceeded, 'the wait delay closed the pipe it held').toBe(true);
    }
    await waitGone(t, 5_000);
  });

  // proves C3
  it('a root that ignores the killSignal still ends with the whole tree at the forced kill', async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', 'trap "" INT; sleep 300 & echo "PID child $!"; echo "PID root $$"; while :; do sleep 0.05; done'], {
      env: t.env,
      killSignal: 'SIGINT',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const out = await started(proc, t.tag);
    await within(proc.terminate({ grace: 300 }), 15_000, 'terminate', t.tag);
    const result = await within(proc.result, 5_000, 'the result', t.tag);
    expect(result.signal).toBe('SIGKILL');
    for (const pid of Object.values(out.pids())) expect(alive(pid)).toBe(false);
    await waitGone(t, 5_000);
  });

  // proves C3 (own report): typed errors for killSignal
  it('bad values are typed errors before anything runs; Windows takes only SIGTERM', () => {
    const t = useTag();
    for (const killSignal of ['SIGKILL', 'SIGSTOP', 'SIGCONT', 'SIGNOPE']) {
      expect(() => spawn('sh', ['-c', 'exit 0'], { env: t.env, killSignal: killSignal as NodeJS.Signals })).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE', stage: 'input' }),
      );
    }
    expect(() => spawn('sh', ['-c', 'exit 0'], { env: t.env, killSignal: 2 as never })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
    expect(() => spawn('sh', ['-c', 'exit 0'], { env: t.env, stop: 'q' as never })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
    expect(() => killSignalOption('SIGINT', 'win32')).toThrow(expect.objectContaining({ code: 'ERR_CORDON_UNSUPPORTED' }));
    expect(killSignalOption('SIGTERM', 'win32')).toBe('SIGTERM');
    expect(t.procs()).toEqual([]);
  });
});

// kill(signal): a signal for the root alone, as ChildProcess.kill(signal)
// sends one (a host forwarding Ctrl-C). Not a stop: the tree runs on.
describe('kill(signal): the root alone, the tree runs on', () => {
  // proves C3: kill(signal) reaches the root alone
  it("kill('SIGINT') reaches the root's trap; the root and its child keep running; after the root exits it is false", async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', 'trap "echo got INT" INT; sleep 300 & echo "PID child $!"; echo "PID root $$"; while :; do sleep 0.05; done'], {
      env: t.env,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const out = await started(proc, t.tag);
    const { root, child } = out.pids();
    expect(proc.kill('SIGINT')).toBe(true);
    await out.until(/^got INT$/m);
    expect(proc.kill(2), 'by number').toBe(true);
    await waitFor(() => out.text.split('got INT').length === 3, { timeout: 5000, what: 'the trap to run twice', watch: t.tag });
    expect(proc.kill(0), 'signal 0: the root is there, nothing sent').toBe(true);
    expect([alive(root!), alive(child!)], 'the root and its child after kill(signal)').toEqual([true, true]);
    expect(proc.rootExited).toBe(false);
    // A signal the root does not trap ends it, and only it: the tree's leftovers policy then applies.
    expect(proc.kill('SIGTERM')).toBe(true);
    const result = await within(proc.result, 15_000, 'the result', t.tag);
    expect(result.signal).toBe('SIGTERM');
    expect(proc.kill('SIGINT'), 'the root has exited: nothing is sent').toBe(false);
    await waitGone(t, 5_000);
  });

  // proves C3 (own report): typed errors for signals
  it('a signal this platform lacks, a number out of range, another type: typed errors, nothing sent', async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', 'trap "echo got INT" INT; sleep 300 & echo "PID child $!"; echo "PID root $$"; while :; do sleep 0.05; done'], { env: t.env, stdio: ['ignore', 'pipe', 'ignore'] });
    await started(proc, t.tag);
    for (const bad of ['SIGNOPE', 65, -1, 1.5]) expect(() => proc.kill(bad as never), String(bad)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }));
    expect(() => proc.kill({} as never)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
    expect(() => rootSignal('SIGHUP', 'win32')).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }));
    expect(rootSignal('SIGINT', 'win32')).toBe(2);
    expect(proc.rootExited).toBe(false);
    await within(proc.kill(), 15_000, 'kill()', t.tag);
    await waitGone(t, 5_000);
  });
});

/**
 * READS_Q with a hook that writes "q" (counting its calls and the pids it saw);
 * `stopAt` says when terminate() is asked: once the root printed its pid, or
 * right after spawn().
 */
async function quitsOnQ(tag: string, env: NodeJS.ProcessEnv, stopAt: 'started' | 'spawned') {
  const hook = { calls: 0, pids: [] as (number | undefined)[] };
  const proc = spawn('sh', READS_Q, {
    env,
    stdio: ['pipe', 'pipe', 'ignore'],
    stop: (p) => {
      hook.calls++;
      hook.pids.push(p.pid);
      p.stdin!.write('q\n');
    },
  });
  const out = stopAt === 'started' ? await started(proc, tag) : capture(proc.stdout);
  await within(proc.terminate({ grace: 10_000 }), 15_000, 'terminate', tag);
  const result = await within(proc.result, 5_000, 'the result', tag);
  expect(hook.calls).toBe(1);
  expect(hook.pids[0], 'the hook sees the running root').toBeGreaterThan(0);
  expect(out.text).toContain('bye q\n');
  expect(out.text).not.toContain('got TERM');
  expect(result.exitCode).toBe(0);
  return out;
}

describe('the stop hook', () => {
  // proves C3
  it('is asked first: the root exits on "q" without any signal; the rest of the tree is still ended', async () => {
    const t = useTag();
    const out = await quitsOnQ(t.tag, t.env, 'started');
    expect(alive(out.pids().child!)).toBe(false);
    await waitGone(t, 5_000);
  });

  // proves C3
  it('a stop asked for before the root is reported running asks the hook once it runs', async () => {
    // terminate() right after spawn(): the anchor has not reported the root yet
    // (under emulation its output can even arrive before that report).
    const t = useTag();
    await quitsOnQ(t.tag, t.env, 'spawned');
    await waitGone(t, 5_000);
  });

  // proves C3
  it('a hook that does not stop the root: killSignal after the grace, then the forced kill', async () => {
    const t = useTag();
    let hookAt = 0;
    const proc = spawn('sh', READS_Q, { env: t.env, stdio: ['pipe', 'pipe', 'ignore'], stop: () => void (hookAt = Date.now()) });
    const out = await started(proc, t.tag);
    const termSeen = within(out.until(/got TERM/, 15_000).then(() => Date.now()), 15_000, 'the TERM trap', t.tag);
    await within(proc.terminate({ grace: 600 }), 15_000, 'terminate', t.tag);
    const seenAt = await termSeen;
    expect(hookAt).toBeGreaterThan(0);
    // The grace is a lower bound (timers never fire early); no upper bound: the machine may be loaded.
    expect(seenAt - hookAt).toBeGreaterThanOrEqual(550);
    await waitGone(t, 5_000);
  });

  for (const how of ['throws', 'rejects'] as const) {
    // proves C3
    it(`a hook that ${how} is reported (event and result.stopError) and the teardown goes on at once`, async () => {
      const t = useTag();
      const boom = new Error('boom');
      const proc = spawn('sh', READS_Q, {
        env: t.env,
        stdio: ['pipe', 'pipe', 'ignore'],
        stop: how === 'throws' ? () => { throw boom; } : async () => { throw boom; },
      });
      const reported: unknown[] = [];
      proc.on('stopError', (e) => reported.push(e));
      const out = await started(proc, t.tag);
      const before = Date.now();
      // A grace far beyond the watchdog: only the hook's failure can make this finish in time.
      await within(proc.terminate({ grace: 60_000 }), 15_000, 'terminate', t.tag);
      const result = await within(proc.result, 5_000, 'the result', t.tag);
      expect(Date.now() - before).toBeLessThan(15_000);
      expect(reported).toEqual([boom]);
      expect(result.stopError).toBe(boom);
      expect(out.text).toContain('got TERM');
      await waitGone(t, 5_000);
    });
  }

  // proves C3, C10
  it('a timeout asks the hook too (reason timeout); kill() never calls it', async () => {
    const t = useTag();
    const proc = spawn('sh', READS_Q, { env: t.env, timeout: 200, stdio: ['pipe', 'pipe', 'ignore'], stop: (p) => void p.stdin!.write('q\n') });
    const out = capture(proc.stdout);
    const result = await within(proc.result, 15_000, 'the result', t.tag);
    expect(result.reason).toBe('timeout');
    expect(out.text).toContain('bye q\n');

    let called = false;
    const killed = spawn('sh', READS_Q, { env: t.env, stdio: ['pipe', 'pipe', 'ignore'], stop: () => void (called = true) });
    await started(killed, t.tag);
    await within(killed.kill(), 15_000, 'kill', t.tag);
    const r = await within(killed.result, 5_000, 'the result', t.tag);
    expect(called).toBe(false);
    expect(r.signal).toBe('SIGKILL');
    await waitGone(t, 5_000);
  });

  // proves C3
  it('kill() during the hook wait cuts it short', async () => {
    const t = useTag();
    const proc = spawn('sh', READS_Q, { env: t.env, stdio: ['pipe', 'pipe', 'ignore'], stop: () => {} });
    await started(proc, t.tag);
    const polite = proc.terminate({ grace: 60_000 });
    await within(proc.kill(), 15_000, 'kill during the hook wait', t.tag);
    await within(polite, 5_000, 'the first terminate', t.tag);
    expect((await proc.result).signal).toBe('SIGKILL');
    await waitGone(t, 5_000);
  });
});
