// C1-C3 on Windows: a tree whose grandchildren are detached (they left the
// root's console group and Node's own job) is ended whole by terminate() and
// kill(), and the result is classified.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { alive, cordon, noObserveExe, observedAlive, startTree, track, waitGone, within } from './helpers.mjs';

// proves C3, C6
test('terminate() ends the root and its detached grandchildren', async (ctx) => {
  const t = track(ctx);
  const { proc, pids } = await startTree(t, ['--detached', '2']);
  assert.equal(await within(proc.started, 10000, 'started'), pids.root);
  assert.equal(proc.tier, 'job-object');
  const all = [pids.root, pids.gc0, pids.gc1];
  assert.ok(all.every(alive), 'the whole tree runs before terminate()');
  // The suite's own observer (observe.exe, no code of cordon's) sees the
  // whole tree too: its word on the stop below means something.
  if (!noObserveExe) assert.deepEqual(observedAlive(all), all, 'observe.exe lists the whole tree before terminate()');
  await within(proc.terminate({ grace: 1000 }), 15000, 'terminate()', all);
  await waitGone(all, 2000);
  if (!noObserveExe) assert.deepEqual(observedAlive(all), [], 'observe.exe lists none of the tree after terminate()');
  const result = await within(proc.result, 10000, 'result', all);
  assert.ok(['signal', 'exit'].includes(result.reason));
  assert.ok(result.signal === 'SIGKILL' || result.signal === 'SIGBREAK', `signal ${result.signal}`);
  // C11: the Job Object sees every descendant, and says so in both places.
  assert.equal(cordon.capabilities().guarantees.catchesEscapees, 'always');
  assert.equal(result.coverage, 'complete');
});

// proves C3, C5
test('kill() ends a tree whose root already exited, leftovers reported', async (ctx) => {
  const t = track(ctx);
  const { proc, pids } = await startTree(t, ['--detached', '1', '--exit'], { leftovers: 'keep' });
  const result = await within(proc.result, 15000, 'result', [pids.gc0]);
  assert.equal(result.exitCode, 0);
  assert.equal(result.leftoversKept, true);
  // The grandchild (stdio 'ignore') does not hold the output, so the result
  // came without a wait-delay overrun (wait-delay.test.mjs has the details).
  assert.equal(result.waitDelayExceeded, false);
  assert.ok(result.leftovers.some((l) => l.pid === pids.gc0), JSON.stringify(result.leftovers));
  assert.equal(result.coverage, 'complete', 'C11: the job lists every leftover');
  assert.ok(alive(pids.gc0), 'the kept leftover still runs');
  assert.ok(!alive(pids.root), 'the root exited');
  await within(proc.kill(), 10000, 'kill()', [pids.gc0]);
  await waitGone([pids.gc0], 2000);
  // Repeated and concurrent calls after quiescence are no-ops.
  await within(Promise.all([proc.kill(), proc.terminate()]), 5000, 'repeated kill()');
});

// proves C3: kill(signal) reaches the root alone
test("kill('SIGINT') ends the root alone (TerminateProcess, as Node's ChildProcess.kill does); the tree's grandchild runs on until kill()", async (ctx) => {
  const t = track(ctx);
  const { proc, pids } = await startTree(t, ['--detached', '1'], { leftovers: 'keep' });
  await within(proc.started, 10000, 'started');
  assert.ok(alive(pids.root) && alive(pids.gc0), 'the tree runs');
  assert.equal(proc.kill(0), true, 'signal 0: the root is there');
  assert.throws(() => proc.kill('SIGHUP'), (err) => err.code === 'ERR_INVALID_ARG_VALUE', 'Windows takes SIGTERM, SIGKILL and SIGINT');
  assert.equal(proc.kill('SIGINT'), true);
  const result = await within(proc.result, 15000, 'result', [pids.gc0]);
  assert.equal(result.exitCode, 1, 'TerminateProcess with 1, as Node');
  assert.ok(!alive(pids.root), 'the root ended');
  assert.ok(alive(pids.gc0), 'its grandchild runs on (a signal for the root alone is not a stop)');
  assert.equal(proc.kill('SIGINT'), false, 'the root has exited: nothing is sent');
  await within(proc.kill(), 10000, 'kill()', [pids.gc0]);
  await waitGone([pids.gc0], 2000);
});

// proves C2
test('the anchor killed: the host ends the tree through its job handle', async (ctx) => {
  const t = track(ctx);
  const { proc, pids } = await startTree(t, ['--detached', '1']);
  await within(proc.started, 10000, 'started');
  const all = [pids.root, pids.gc0];
  assert.ok(all.every(alive), 'the tree runs');
  assert.equal(cordon.capabilities().guarantees.survivesAnchorDeath, true);
  // The test's own grandchild, by pid: the anchor, not the tree.
  process.kill(proc.anchorPid, 'SIGKILL');
  await assert.rejects(within(proc.result, 10000, 'result', all), (err) => err.code === 'ERR_CORDON_ANCHOR_LOST');
  await waitGone(all, 2000);
});
