// CONTRACT C10 (cancellation fits the platform's conventions) and C6 (results
// are classified): an AbortSignal and `timeout` terminate the tree with the
// interrupt grace and say so in the result; `await using` terminates at scope
// exit; a log file receives stdout and stderr and is kept; run() collects,
// feeds stdin, rejects on a nonzero exit or an overflow, and leaves nothing
// running.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_INTERRUPT_GRACE_MS, run, spawn, type CordonError, type RunResult } from '../lib/index.js';
import { expectCordonError, rejected } from './helpers/assert.js';
import { fixture } from './helpers/fixtures.js';
import { parsePids, useTag, within } from './helpers/procs.js';
import { tempDir } from './helpers/registry.js';
import { collect, expectAlive, expectGone, ignoresTerm, outcome, startBgTree } from './helpers/trees.js';
import { LOAD_ALLOWANCE_MS, promised } from './helpers/time.js';

// The bounds: the promise plus this machine's measured allowance (promised(),
// common.mjs), timed from the cause (spawn() starts the timeout's clock;
// abort() the interrupt grace's). They tell the interrupt grace from the
// teardown grace (10 s) and from an interrupt grace applied 50% too long.
const TEARDOWN_GRACE = 10_000;
/** The root ignores SIGTERM (SIG_IGN survives the exec), so only the forced kill ends it. */
const TERM_IGNORING: [string, string[]] = ['sh', ['-c', 'trap \'\' TERM; echo "PID root $$"; echo READY; exec sleep 300']];

type RunError = CordonError & { stdout: string; stderr: string; exitCode: number | null; result: RunResult };

describe('C10: AbortSignal and timeout', () => {
  // proves C10, C6
  it("aborting mid-run ends the tree; reason 'canceled'", async () => {
    const t = useTag();
    const ac = new AbortController();
    const { proc, all } = await startBgTree(t, { signal: ac.signal });

    ac.abort();
    const result = await within(proc.result, 10_000, 'the result to settle after abort()', t.tag);
    expectGone(all, t.tag, 'after the result settled');
    expect(result.reason).toBe('canceled');
    expect(result.signal).toBe('SIGTERM');
  });

  // The timeouts below leave the tree time to start and print its pids (and
  // the root time to set its trap) on a loaded machine: a timeout that fires
  // first ends a tree the test never saw.
  // proves C10, C6
  it("timeout: 3000 ends the tree; reason 'timeout'", async () => {
    const t = useTag();
    const proc = spawn(fixture('bg-tree.sh'), [], { env: t.env, timeout: 3000 });
    const { all } = await collect(proc, t.tag);
    const result = await within(proc.result, 10_000, 'the result to settle after the timeout', t.tag);
    expectGone(all, t.tag, 'after the result settled');
    expect(result.reason).toBe('timeout');
  });

  // proves C10, C3
  it('the interrupt grace is used on timeout, not the teardown grace', async () => {
    const t = useTag();
    const t0 = Date.now();
    const proc = spawn(...TERM_IGNORING, { env: t.env, timeout: 2000, interruptGrace: 400, grace: TEARDOWN_GRACE });
    const { root } = await collect(proc, t.tag);
    const result = await within(proc.result, 10_000, 'the result to settle after the timeout', t.tag);
    const elapsed = Date.now() - t0;
    expectGone([root], t.tag, 'after the result settled');
    expect(result.reason).toBe('timeout');
    // SIGTERM was ignored: the forced kill after the interrupt grace ended it.
    expect(result.signal).toBe('SIGKILL');
    expect(elapsed, 'the forced kill came before timeout + interruptGrace').toBeGreaterThanOrEqual(2000 + 400);
    expect(elapsed, `settled long after timeout + interruptGrace (teardown grace used? allowance ${LOAD_ALLOWANCE_MS} ms)`).toBeLessThanOrEqual(promised(2000 + 400));
  });

  // proves C10, C3
  it('the default interrupt grace (500 ms) bounds an abort of a SIGTERM-ignoring root', async () => {
    const t = useTag();
    const ac = new AbortController();
    const proc = spawn(...TERM_IGNORING, { env: t.env, signal: ac.signal, grace: TEARDOWN_GRACE });
    const { root } = await collect(proc, t.tag);
    expect(ignoresTerm(root), 'precondition: the root ignores SIGTERM').toBe(true);

    const t0 = Date.now();
    ac.abort();
    const result = await within(proc.result, 10_000, 'the result to settle after abort()', t.tag);
    const elapsed = Date.now() - t0;
    expectGone([root], t.tag, 'after the result settled');
    expect(result.reason).toBe('canceled');
    expect(result.signal).toBe('SIGKILL');
    expect(DEFAULT_INTERRUPT_GRACE_MS).toBe(500);
    expect(elapsed).toBeGreaterThanOrEqual(DEFAULT_INTERRUPT_GRACE_MS);
    expect(elapsed, `settled long after the interrupt grace (allowance ${LOAD_ALLOWANCE_MS} ms)`).toBeLessThanOrEqual(promised(DEFAULT_INTERRUPT_GRACE_MS));
  });
});

describe('C10: await using', () => {
  // proves C10
  it('terminates the tree at scope exit', async () => {
    const t = useTag();
    const scope = async () => {
      await using proc = spawn(fixture('bg-tree.sh'), [], { env: t.env });
      const { all } = await collect(proc, t.tag);
      expectAlive(all, 'inside the scope');
      return all;
    };
    const all = await within(scope(), 15_000, 'the `await using` scope to exit', t.tag);
    expectGone(all, t.tag, 'after the scope exited');
  });

  // proves C10
  it('terminates the tree when the scope exits by an exception', async () => {
    const t = useTag();
    let all: number[] = [];
    const scope = async () => {
      await using proc = spawn(fixture('bg-tree.sh'), [], { env: t.env });
      ({ all } = await collect(proc, t.tag));
      expectAlive(all, 'inside the scope');
      throw new Error('leaving the scope');
    };
    const how = await outcome(scope(), 15_000, 'the `await using` scope to exit', t.tag);
    expect(rejected<Error>(how).message).toBe('leaving the scope');
    expectGone(all, t.tag, 'after the scope exited');
  });
});

describe('C10: log file', () => {
  // proves C10
  it('receives stdout and stderr and is kept after the process is terminated', async () => {
    const t = useTag();
    const log = join(tempDir('cordon-log-'), 'out.log');
    const proc = spawn('sh', ['-c', 'echo "PID root $$"; echo to-stdout; echo to-stderr >&2; echo READY; exec sleep 300'], {
      env: t.env,
      log,
    });
    const { root, out } = await collect(proc, t.tag);
    expect(out.text).toContain('to-stdout\n');

    await within(proc.terminate(), 10_000, 'terminate() to resolve', t.tag);
    const result = await within(proc.result, 5000, 'the result to settle', t.tag);
    expectGone([root], t.tag, 'after terminate()');
    expect(result.logPath).toBe(log);
    expect(existsSync(log)).toBe(true);
    const text = readFileSync(log, 'utf8');
    expect(text).toContain('to-stdout\n');
    expect(text).toContain('to-stderr\n');
    expect(text).toContain('READY\n');
  });

  // proves C10
  it('holds everything the command wrote, stdout and stderr, by the time the result settles', async () => {
    const t = useTag();
    const dir = tempDir('cordon-log-');
    // 300 kB on stdout, then a last line on each stream; several trees at once.
    const script = 'head -c 300000 /dev/zero | tr "\\0" x; echo; echo END-OUT; echo END-ERR >&2';
    const trees = Array.from({ length: 6 }, (_, i) => {
      const log = join(dir, `out${i}.log`);
      const proc = spawn('sh', ['-c', script], { env: t.env, log });
      proc.stdout?.resume();
      proc.stderr?.resume();
      return { log, proc };
    });
    const incomplete: string[] = [];
    for (const { log, proc } of trees) {
      const result = await within(proc.result, 10_000, 'the result to settle', t.tag);
      expect(result.exitCode).toBe(0);
      // Read at once, as a caller would after `await proc.result`.
      const text = readFileSync(log, 'utf8');
      if (text.length !== 300_017 || !text.includes('END-OUT\n') || !text.includes('END-ERR\n')) {
        incomplete.push(`${log}: ${text.length} bytes of 300017 when the result settled`);
      }
    }
    expect(incomplete, 'log files not yet complete when the result settled').toEqual([]);
    expect(t.procs()).toEqual([]);
  });
});

describe('C6/C10: run()', () => {
  // proves nothing of the contract: run()'s collection of the output is API, not a clause (C4 and C10 have their own tests)
  it('collects stdout and stderr', async () => {
    const t = useTag();
    const r = await within(run('sh', ['-c', 'echo out; echo err >&2'], { env: t.env }), 10_000, 'run()', t.tag);
    // (One final newline stripped, as execa: stripFinalNewline.)
    expect(r.stdout).toBe('out');
    expect(r.stderr).toBe('err');
    expect(r.exitCode).toBe(0);
    expect(r.reason).toBe('exit');
    expect(t.procs()).toEqual([]);
  });

  // proves C6
  it('rejects on a nonzero exit with ERR_CORDON_EXIT and the output attached; reject: false returns the result', async () => {
    const t = useTag();
    const script = 'echo partial; echo bad >&2; exit 3';
    const how = await outcome(run('sh', ['-c', script], { env: t.env }), 10_000, 'run()', t.tag);
    const err = rejected<RunError>(how, 'run() resolved although the command exited 3');
    expectCordonError(err, 'ERR_CORDON_EXIT');
    expect(err.isLaunchFailure).toBe(false);
    expect(err.stdout).toBe('partial');
    expect(err.stderr).toBe('bad');
    expect(err.exitCode).toBe(3);
    expect(err.result.exitCode).toBe(3);

    const r = await within(run('sh', ['-c', script], { env: t.env, reject: false }), 10_000, 'run() with reject: false', t.tag);
    expect(r.exitCode).toBe(3);
    expect(r.reason).toBe('exit');
    expect(r.stdout).toBe('partial');
    expect(r.stderr).toBe('bad');
    expect(t.procs()).toEqual([]);
  });

  // proves nothing of the contract: the input option feeds stdin, API, not a clause
  it('feeds input to stdin', async () => {
    const t = useTag();
    const r = await within(
      run('sh', ['-c', 'read first; echo "got $first"; cat'], { env: t.env, input: 'hello\nsecond line\n' }),
      10_000,
      'run() with input',
      t.tag,
    );
    expect(r.stdout).toBe('got hello\nsecond line');
    expect(r.exitCode).toBe(0);
  });

  // proves C3, C6
  it('rejects with ERR_CORDON_MAX_BUFFER on overflow and leaves nothing running', async () => {
    const t = useTag();
    const script = 'echo "PID root $$"; sleep 300 >/dev/null 2>&1 & echo "PID bg $!"; exec yes';
    const how = await outcome(run('sh', ['-c', script], { env: t.env, maxBuffer: 4096 }), 10_000, 'run() to overflow', t.tag);
    const err = rejected<RunError>(how, 'run() resolved although the output overflowed');
    expectCordonError(err, 'ERR_CORDON_MAX_BUFFER');
    expect(err.stdout.length).toBeLessThanOrEqual(4096);
    const pids = parsePids(err.stdout);
    expect(Object.keys(pids).sort()).toEqual(['bg', 'root']);
    expectGone(Object.values(pids), t.tag, 'after run() rejected');
  });
});
