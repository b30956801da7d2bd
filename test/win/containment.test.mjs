// C1/C2 on Windows: assignment failure in strict mode runs nothing and
// rejects with ERR_CORDON_CONTAINMENT; best-effort runs with the weaker tier;
// a recycled pid is never reached through an old tree.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { alive, cordon, existsSync, join, readPids, sleep, spawnChild, track, treeArgs, underWine, waitGone, within } from './helpers.mjs';

// Wine nests every job and Windows 8+ nests almost every job, so a real
// assignment failure cannot be produced on demand: CORDON_TEST_FAIL_ASSIGN=1
// (test-only, read by cordon-anchor.exe) makes AssignProcessToJobObject's
// failure path run with the command created suspended, as a host inside a
// job that forbids nesting would see it.
const failEnv = () => ({ ...process.env, CORDON_TEST_FAIL_ASSIGN: '1' });

test('strict: assignment failure rejects before anything ran', async (ctx) => {
  const t = track(ctx);
  const marker = join(t.tmp(), 'ran');
  const proc = t.proc(cordon.spawn(process.execPath, treeArgs('--marker', marker, '--exit'), { env: failEnv(), stdio: 'ignore' }));
  await assert.rejects(within(proc.started, 10000, 'started'), (err) => err.code === 'ERR_CORDON_CONTAINMENT' && err.isLaunchFailure);
  await assert.rejects(within(proc.result, 10000, 'result'), (err) => err.code === 'ERR_CORDON_CONTAINMENT');
  await sleep(500);
  assert.equal(existsSync(marker), false, 'the command never ran');
});

test('best-effort: assignment failure runs with the weaker tier', async (ctx) => {
  const t = track(ctx);
  const proc = t.proc(
    cordon.spawn(process.execPath, treeArgs(), { env: failEnv(), stdio: ['ignore', 'pipe', 'ignore'], containment: 'best-effort' }),
  );
  const pids = await readPids(proc.stdout, t);
  await within(proc.started, 10000, 'started');
  assert.equal(proc.tier, 'process-handle');
  await within(proc.kill(), 10000, 'kill()', [pids.root]);
  await waitGone([pids.root], 2000);
});

test('an old tree never reaches a process that got a recycled pid', async (ctx) => {
  const t = track(ctx);
  // A leftover of a kept tree exits by itself; its pid may then be reused.
  const proc = t.proc(
    cordon.spawn(process.execPath, treeArgs('--detached', '1', '--exit'), { stdio: ['ignore', 'pipe', 'ignore'], leftovers: 'keep' }),
  );
  const pids = await readPids(proc.stdout, t);
  await within(proc.result, 15000, 'result');
  const old = pids.gc0;
  process.kill(old, 'SIGKILL'); // the leftover ends, not through cordon
  await waitGone([old], 5000);
  // Start outside processes until one gets the old pid (Windows reuses pids
  // quickly; Wine hands them out in increasing order, measured: so only a
  // few tries there, each spawn costs about a second).
  let reused;
  const started = [];
  const tries = underWine ? 10 : 300;
  for (let i = 0; i < tries && !reused; i++) {
    const c = spawnChild(process.execPath, ['-e', 'setInterval(() => {}, 100000)'], { stdio: 'ignore' });
    t.add(c.pid);
    if (c.pid === old) reused = c;
    else started.push(c);
    if (started.length >= 20) for (const s of started.splice(0)) s.kill('SIGKILL');
  }
  for (const s of started) s.kill('SIGKILL');
  if (!reused) {
    ctx.skip(`pid ${old} was not reused within ${tries} spawns${underWine ? ' (Wine does not recycle pids soon)' : ''}`);
    await within(proc.kill(), 10000, 'kill()');
    return;
  }
  await within(proc.kill(), 10000, 'kill()');
  await sleep(300);
  assert.ok(alive(reused.pid), 'the process with the recycled pid was not touched');
  reused.kill('SIGKILL');
});
