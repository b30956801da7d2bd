// CONTRACT C3: whole-tree termination is complete (every member, found by the
// pids the tree printed and by the test tag; the AbortSignal case is in
// cancellation.test.ts), kill() is the immediate forced
// kill, terminate() is idempotent and safe concurrently, and it reaches
// leftovers kept after the root exited, resolving only once they are gone.
import { describe, expect, it } from 'vitest';
import { DEFAULT_GRACE_MS, spawn } from '../lib/index.js';
import { capture } from './helpers/fixtures.js';
import { alive, useTag, waitFor, within, aliveTagged } from './helpers/procs.js';
import { catchesTerm, expectAlive, expectGone, ignoresTerm, startBgTree, startTermIgnoringTree } from './helpers/trees.js';

describe('C3: whole-tree termination', () => {
  // proves C3
  it('kill() is immediate: a tree ignoring SIGTERM is gone well under the default grace', async () => {
    const t = useTag();
    // Precondition (checked there): every member ignores SIGTERM, so only SIGKILL ends it.
    const { proc, all } = await startTermIgnoringTree(t);

    const t0 = Date.now();
    await within(proc.kill(), 10_000, 'kill() to resolve', t.tag);
    const elapsed = Date.now() - t0;
    expectGone(all, t.tag, 'after kill() resolved');
    expect(elapsed, 'kill() took the grace instead of killing at once').toBeLessThan(DEFAULT_GRACE_MS - 1000);
    const result = await within(proc.result, 5000, 'the result to settle', t.tag);
    expect(result.signal).toBe('SIGKILL');
  });

  // proves C3, C2
  it('terminate() is idempotent and safe concurrently: three concurrent calls and one after quiescence', async () => {
    const t = useTag();
    const { proc, all } = await startBgTree(t);

    const calls = [proc.terminate({ grace: 2000 }), proc.terminate({ grace: 2000 }), proc.terminate()];
    const settled = await within(Promise.allSettled(calls), 10_000, 'three concurrent terminate() calls to settle', t.tag);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    expectGone(all, t.tag, 'after the concurrent terminate() calls resolved');

    // Once more after quiescence, and a kill() for good measure: both resolve at once.
    await within(proc.terminate({ grace: 2000 }), 2000, 'terminate() after quiescence to resolve', t.tag);
    await within(proc.kill(), 2000, 'kill() after quiescence to resolve', t.tag);
    const result = await within(proc.result, 5000, 'the result to settle', t.tag);
    expect(result.signal).toBe('SIGTERM');
    expectGone(all, t.tag, 'at the end');
  });

  // proves C3, C5
  it("terminate() after the root exited reaches leftovers kept by leftovers: 'keep', and resolves only once they are gone", async () => {
    const t = useTag();
    // Two leftovers: `slow` exits 1 s after SIGTERM (its TERM trap ignores
    // further TERMs while it sleeps), `stubborn` ignores SIGTERM altogether.
    const script = [
      `sh -c 'echo "PID slow $$"; exec >/dev/null 2>&1; trap "trap \\"\\" TERM; sleep 1; exit 0" TERM; while :; do sleep 0.1; done' &`,
      `sh -c 'trap "" TERM; exec sleep 300' >/dev/null 2>&1 &`,
      'echo "PID stubborn $!"',
      'echo "PID root $$"',
    ].join('\n');
    const proc = spawn('sh', ['-c', script], { env: t.env, leftovers: 'keep' });
    const out = capture(proc.stdout);
    proc.stderr?.resume();
    const result = await within(proc.result, 10_000, 'the result to settle (root exits at once)', t.tag);
    await out.until(/^PID slow \d+$/m, 5000);
    const { slow, stubborn, root } = out.pids();
    expect(result.exitCode).toBe(0);
    expect(result.leftoversKept).toBe(true);
    // By tag too: the root was reaped, and its pid may already be another
    // process's (pid-reuse.test hands freed pids out on purpose).
    expect(aliveTagged(root!, t.tag), `root ${root}`).toBe(false);
    expectAlive([slow!, stubborn!], 'after the result settled (kept)');
    // Preconditions: the traps are in place.
    await waitFor(() => catchesTerm(slow!) && ignoresTerm(stubborn!), {
      timeout: 5000,
      what: 'the leftovers to install their TERM dispositions',
      watch: t.tag,
    });

    await within(proc.terminate({ grace: 1500 }), 10_000, 'terminate() of the kept leftovers to resolve', t.tag);
    // Resolved at quiescence: `slow` finished its 1 s trap, `stubborn` was killed after the grace.
    expectGone([slow!, stubborn!], t.tag, 'after terminate() resolved');
  });
});
