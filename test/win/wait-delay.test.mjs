// C4/C5 on Windows: the root exits while a detached grandchild still holds
// stdout. The result settles within waitDelay (+ a bound), says
// waitDelayExceeded, keeps the output read so far, and the holder is killed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { once } from 'node:events';
import { alive, cordon, readPids, spawnChild, startTree, track, treeArgs, waitGone, within } from './helpers.mjs';

// proves C4, C5
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

// proves C4
test('root exits, nothing holds stdout: no wait-delay overrun', async (ctx) => {
  const t = track(ctx);
  const { proc } = await startTree(t, ['--exit'], { waitDelay: 10000 });
  const result = await within(proc.result, 8000, 'result');
  assert.equal(result.waitDelayExceeded, false);
  assert.deepEqual(result.leftovers, []);
});

// Parity with child_process: a grandchild started with stdio 'ignore' does not
// hold the root's stdout. The same tree under child_process first, as the
// control (EOF while the grandchild runs), then under cordon: EOF on the
// host's pipe right after the root exits, no wait-delay overrun. Failed under
// Wine before the anchor closed its console host's copies of the handles it
// inherited (native/win/launch.cc, close_console_host_copies): Wine's
// conhost.exe held the pipe as long as the anchor lived (test/win/README.md).
// proves C4
test('a grandchild with stdio ignore does not hold the output (as with child_process)', async (ctx) => {
  const t = track(ctx);
  const waitDelay = 3000;
  const plain = spawnChild(process.execPath, treeArgs('--detached', '1', '--exit'), { stdio: ['ignore', 'pipe', 'ignore'] });
  t.add(plain.pid);
  const plainEnd = once(plain.stdout, 'end');
  const plainPids = await readPids(plain.stdout, t);
  await within(plainEnd, 10000, 'EOF of the tree under child_process', [plainPids.gc0]);
  assert.ok(alive(plainPids.gc0), 'under child_process, the grandchild outlives the EOF');
  // The control's grandchild is nobody's to end but this test's (child_process contains nothing).
  process.kill(plainPids.gc0, 'SIGKILL');
  await waitGone([plainPids.gc0], 5000);

  const proc = t.proc(cordon.spawn(process.execPath, treeArgs('--detached', '1', '--exit'), { stdio: ['ignore', 'pipe', 'ignore'], waitDelay }));
  const eof = new Promise((resolve) => proc.stdout.once('end', () => resolve(Date.now())));
  const rootExit = new Promise((resolve) => proc.once('exit', () => resolve(Date.now())));
  const pids = await readPids(proc.stdout, t);
  const result = await within(proc.result, 20000, 'result', [pids.gc0]);
  const exitedAt = await rootExit;
  assert.equal(result.waitDelayExceeded, false);
  const eofAt = await within(eof, 5000, 'EOF of the tree under cordon', [pids.gc0]);
  assert.ok(eofAt - exitedAt < waitDelay, `EOF ${eofAt - exitedAt} ms after the root exited`);
  assert.ok(result.leftovers.some((l) => l.pid === pids.gc0), JSON.stringify(result.leftovers));
  await waitGone([pids.gc0], 5000);
});
