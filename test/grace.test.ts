// CONTRACT C3: terminate({ grace }) sends the polite signal to every member,
// waits up to `grace` for quiescence, then kills what remains; a `trap … TERM`
// handler (of the root or of any descendant) gets its window.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawn } from '../lib/index.js';
import { readStat, useTag, waitFor, within } from './helpers/procs.js';
import { tempDir } from './helpers/registry.js';
import { LOAD_ALLOWANCE_MS, promised } from './helpers/time.js';
import { catchesTerm, collect, expectAlive, expectGone, expectLateMemberTermed, startTermIgnoringTree, startTrapTree } from './helpers/trees.js';

const GRACE = 1000;

describe('C3: the grace window', () => {
  // proves C3
  it('a whole tree ignoring SIGTERM is killed after the grace, not before, not much later', async () => {
    const t = useTag();
    // Precondition (checked there): SIG_IGN was inherited by every member.
    const { proc, all } = await startTermIgnoringTree(t);

    const t0 = Date.now();
    await within(proc.terminate({ grace: GRACE }), GRACE + 10_000, 'terminate() to resolve', t.tag);
    const elapsed = Date.now() - t0;
    expectGone(all, t.tag, 'after terminate() resolved');
    expect(elapsed, 'the forced kill came before the grace was over').toBeGreaterThanOrEqual(GRACE);
    // Timed from the call: the grace starts when terminate() is called; the
    // allowance is this machine's measured delay (promised(), common.mjs), so
    // a forced kill at 1.5x the grace fails wherever the allowance is under
    // half the grace (an idle machine: the 150 ms floor).
    expect(elapsed, `the forced kill came long after the grace (allowance ${LOAD_ALLOWANCE_MS} ms)`).toBeLessThanOrEqual(promised(GRACE));
    const result = await within(proc.result, 5000, 'the result to settle', t.tag);
    expect(result.signal).toBe('SIGKILL');
  });

  // proves C3
  it("the root's TERM trap gets its window: it runs, and its exit is the result", async () => {
    const t = useTag();
    // (Waits, there, for the trap to be installed and the child to exec sleep.)
    const { proc, root, file } = await startTrapTree(
      t,
      'trap \'echo cleanup > "$FILE"; exit 7\' TERM; echo "PID root $$"; sleep 300 & echo "PID child $!"; echo READY; wait',
      { prefix: 'cordon-grace-', name: 'cleanup' },
    );
    expect(existsSync(file)).toBe(false);

    const t0 = Date.now();
    await within(proc.terminate({ grace: 3000 }), 10_000, 'terminate() to resolve', t.tag);
    const elapsed = Date.now() - t0;
    expect(readFileSync(file, 'utf8')).toBe('cleanup\n');
    // The trap exits at once: quiescence came well before the grace ran out (no SIGKILL wait).
    expect(elapsed, 'terminate() waited out the grace although the trap had exited').toBeLessThan(2000);
    expectGone([root], t.tag, 'after terminate() resolved');
    const result = await within(proc.result, 5000, 'the result to settle', t.tag);
    expect(result.reason).toBe('exit');
    expect(result.signal).toBe(null);
    expect(result.exitCode).toBe(7);
  });

  // proves C3
  it('a member forked after the polite signal gets it too, not only the forced kill', async () => {
    await expectLateMemberTermed(useTag(), 'cordon-grace-');
  });

  // proves C3
  it("a stopped member's TERM trap gets its window too: the polite signal comes with SIGCONT", async () => {
    const t = useTag();
    const file = join(tempDir('cordon-grace-'), 'cleanup');
    const inner = 'trap \'echo cleanup > "$FILE"; exit 0\' TERM; echo "PID trapper $$"; echo READY; while :; do sleep 0.1; done';
    const proc = spawn('sh', ['-c', 'echo "PID root $$"; sh -c "$INNER" & wait'], { env: { ...t.env, FILE: file, INNER: inner } });
    const { pids, all } = await collect(proc, t.tag);
    const trapper = pids.trapper!;
    await waitFor(() => catchesTerm(trapper), { timeout: 5000, what: 'the trap to be installed', watch: t.tag });
    // The test's own member, stopped by pid (its cleanup SIGKILLs it by tag).
    process.kill(trapper, 'SIGSTOP');
    await waitFor(() => readStat(trapper)?.state === 'T', { timeout: 5000, what: 'the member to be stopped', watch: t.tag });

    // A stopped process holds a SIGTERM pending; without a SIGCONT it stays
    // stopped until the forced kill (20 s here), its trap never run. In the
    // process-group tier a member still stopped when the root dies gets the
    // orphaned group's SIGHUP and dies untrapped: seen under load until the
    // group was resumed before its polite signal.
    const t0 = Date.now();
    await within(proc.terminate({ grace: 20_000 }), 30_000, 'terminate() to resolve', t.tag);
    const elapsed = Date.now() - t0;
    expectGone(all, t.tag, `after terminate() resolved (the trap wrote: ${existsSync(file) ? readFileSync(file, 'utf8') : 'nothing'})`);
    expect(existsSync(file) ? readFileSync(file, 'utf8') : 'no file', `the stopped member ran its trap (terminate() took ${elapsed} ms; result ${JSON.stringify(await proc.result.catch((e: Error) => e.message))})`).toBe('cleanup\n');
    expect(elapsed, 'the stopped member waited for the forced kill').toBeLessThan(10_000);
  });

  // proves C3
  it("a descendant's TERM trap gets its window too", async () => {
    const t = useTag();
    const dir = tempDir('cordon-grace-');
    const file = join(dir, 'cleanup');
    // The root dies of SIGTERM at once; its grandchild (inside a nested shell) traps it.
    const inner = 'trap \'echo cleanup > "$FILE"; exit 0\' TERM; echo "PID trapper $$"; echo READY; while :; do sleep 0.1; done';
    const proc = spawn('sh', ['-c', 'echo "PID root $$"; sh -c \'sh -c "$INNER" & wait\' & wait'], {
      env: { ...t.env, FILE: file, INNER: inner },
    });
    const { pids, all } = await collect(proc, t.tag);
    const trapper = pids.trapper!;
    expect(trapper).not.toBe(pids.root);
    await waitFor(() => catchesTerm(trapper), { timeout: 5000, what: 'the trap to be installed', watch: t.tag });
    expectAlive(all, 'before terminate()');
    expect(existsSync(file)).toBe(false);

    await within(proc.terminate({ grace: 3000 }), 10_000, 'terminate() to resolve', t.tag);
    expect(readFileSync(file, 'utf8')).toBe('cleanup\n');
    expectGone(all, t.tag, 'after terminate() resolved');
    const result = await within(proc.result, 5000, 'the result to settle', t.tag);
    expect(result.signal).toBe('SIGTERM');
  });
});
