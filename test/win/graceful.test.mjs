// C3 on Windows: terminate() sends CTRL_BREAK to the root's console process
// group and waits the grace. Wine 8 does not implement
// GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT): there capabilities() says
// gracefulStop false, and what the tier does instead is tested: terminate()
// is the forced stop at once.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readdirSync, readFileSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { onLines } from '../helpers/common.mjs';
import { cordon, existsSync, join, nativeFixture, parsePids, startTree, track, underWine, waitGone, within } from './helpers.mjs';

const { exe: windowApp, skip: noWindowApp } = nativeFixture('window-app');

// proves C3
test('terminate() delivers CTRL_BREAK and the root gets its grace', { skip: underWine && 'Wine 8 does not implement GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT): the graceful stop cannot be tested here' }, async (ctx) => {
  const t = track(ctx);
  const file = join(t.tmp(), 'break');
  const { proc, pids } = await startTree(t, ['--break', file]);
  const t0 = Date.now();
  await within(proc.terminate({ grace: 8000 }), 15000, 'terminate()', [pids.root]);
  assert.ok(Date.now() - t0 < 8000, 'the root ended within the grace, by its handler');
  assert.ok(existsSync(file), 'the SIGBREAK handler ran');
  await waitGone([pids.root], 2000);
  const result = await within(proc.result, 5000, 'result');
  assert.equal(result.exitCode, 0);
});

// proves C3, C11
test('where there is no graceful stop (Wine), terminate() is the forced stop at once: the handler never runs, the grace is not waited', { skip: !underWine && 'the graceful stop is available here (tested above)' }, async (ctx) => {
  const t = track(ctx);
  const file = join(t.tmp(), 'break');
  const { proc, pids } = await startTree(t, ['--break', file]);
  assert.equal(cordon.capabilities().guarantees.gracefulStop, false);
  const t0 = Date.now();
  await within(proc.terminate({ grace: 20000 }), 15000, 'terminate() without waiting its 20 s grace', [pids.root]);
  ctx.diagnostic(`terminate() took ${Date.now() - t0} ms with a 20 s grace`);
  await waitGone([pids.root], 2000);
  assert.equal(existsSync(file), false, 'no SIGBREAK handler ran');
  const result = await within(proc.result, 5000, 'result');
  assert.equal(result.signal, 'SIGKILL');
});

// proves C3
test('terminate() tells members with windows to close (WM_CLOSE), which CTRL_BREAK never reaches, and they get the grace', { skip: noWindowApp }, async (ctx) => {
  // window-app.exe ignores every console event: only WM_CLOSE ends it
  // politely. The root and its child each have a top-level window.
  const t = track(ctx);
  const file = join(t.tmp(), 'closed');
  const proc = t.proc(cordon.spawn(windowApp, [file, '--child'], { stdio: ['ignore', 'pipe', 'ignore'] }));
  const pids = {};
  await within(
    new Promise((resolve) => {
      onLines(proc.stdout, (line) => {
        Object.assign(pids, parsePids(line, t.add));
        if (pids.root && pids.child) resolve();
      });
    }),
    30000,
    'the root and its child to show their windows',
  );
  const t0 = Date.now();
  // (A 60 s grace, bounded at 30 s: waited out, or a forced stop, fails.)
  await within(proc.terminate({ grace: 60000 }), 30000, 'terminate() to end the tree by WM_CLOSE, within its grace', [pids.root, pids.child]);
  ctx.diagnostic(`terminate() took ${Date.now() - t0} ms`);
  await waitGone([pids.root, pids.child], 5000);
  // Each one that ran its handler wrote <file>.<pid> (window-app.cc).
  const closed = readdirSync(dirname(file)).filter((name) => name.startsWith(`${basename(file)}.`)).map((name) => Number(readFileSync(join(dirname(file), name), 'utf8').trim())).sort();
  assert.deepEqual(closed, [pids.root, pids.child].sort(), 'both got WM_CLOSE and ran their handler');
  const result = await within(proc.result, 5000, 'result');
  assert.equal(result.exitCode, 3, 'the root exited by its own WM_CLOSE handler');
  assert.equal(result.signal, null);
});

// proves C11 (own report)
test('capabilities() says whether the graceful stop is available', () => {
  const caps = cordon.capabilities();
  assert.equal(caps.tier, 'job-object');
  assert.equal(caps.guarantees.gracefulStop, !underWine);
  assert.equal(caps.guarantees.catchesEscapees, 'always');
});
