// C4/C5 on Windows: the root exits while a detached grandchild still holds
// stdout. The result settles within waitDelay (+ a bound), says
// waitDelayExceeded, keeps the output read so far, and the holder is killed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { alive, cordon, startTree, track, waitGone, within } from './helpers.mjs';

test('root exits, grandchild holds stdout: waitDelayExceeded, grandchild killed', async (ctx) => {
  const t = track(ctx);
  const waitDelay = 1500;
  const { proc, pids } = await startTree(t, ['--holder', '--exit'], { waitDelay });
  assert.ok(pids.holder, 'the holder was started');
  const rootExit = new Promise((resolve) => proc.once('exit', () => resolve(Date.now())));
  const result = await within(proc.result, 20000, 'result', [pids.holder]);
  const exitedAt = await rootExit;
  assert.equal(result.exitCode, 0);
  assert.equal(result.waitDelayExceeded, true);
  assert.ok(result.settledAt - exitedAt >= waitDelay - 50, `settled ${result.settledAt - exitedAt} ms after root exit`);
  assert.ok(result.settledAt - exitedAt <= waitDelay + 5000, `settled ${result.settledAt - exitedAt} ms after root exit`);
  assert.ok(result.leftovers.some((l) => l.pid === pids.holder), JSON.stringify(result.leftovers));
  await waitGone([pids.holder], 5000);
  assert.ok(!alive(pids.root));
});

test('root exits, nothing holds stdout: no wait-delay overrun', async (ctx) => {
  const t = track(ctx);
  const { proc } = await startTree(t, ['--exit'], { waitDelay: 10000 });
  const result = await within(proc.result, 8000, 'result');
  assert.equal(result.waitDelayExceeded, false);
  assert.deepEqual(result.leftovers, []);
});

// Parity with child_process: a grandchild started with stdio 'ignore' does not
// hold the root's stdout. Under Wine, child_process.spawn of the same tree sees
// EOF about 0.3 s after the root exits (measured), but through cordon the pipe
// stays held until waitDelay, and killing the grandchild ends the hold at once:
// the grandchild holds a handle of the pipe (test/win/README.md, "Open", has
// what was measured; whether Windows behaves the same is not known).
// Marked todo (it runs and reports, it does not fail the lane) until found.
test('a grandchild with stdio ignore does not hold the output (as with child_process)', { todo: 'under investigation: through cordon the pipe stays held (issue 11 report)' }, async (ctx) => {
  const t = track(ctx);
  const { proc, pids } = await startTree(t, ['--detached', '1', '--exit'], { waitDelay: 3000 });
  const result = await within(proc.result, 20000, 'result', [pids.gc0]);
  assert.equal(result.waitDelayExceeded, false);
  await waitGone([pids.gc0], 5000);
});
