// The CLI on Windows: `cordon run` forwards the exit status and ends the tree
// (leftovers kill by default, --timeout is 124); `cordon leaks` lists what
// outlived the command (pids the fixture printed), exits 23, then ends them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { join, pkgDir, readPids, spawnChild, track, treeArgs, waitGone, within } from './helpers.mjs';

function cli(t, argv) {
  const child = spawnChild(process.execPath, [join(pkgDir, 'dist', 'cli.js'), ...argv], { stdio: ['ignore', 'pipe', 'pipe'] });
  t.add(child.pid);
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => (stderr += d));
  const done = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, done, stderr: () => stderr };
}

/**
 * The CLI on a tree fixture: reads the pids it printed, then waits (bounded)
 * for the CLI to exit; `watch(pids)` are named if it does not.
 */
async function cliTree(t, argv, what, watch = () => []) {
  const c = cli(t, argv);
  const pids = await readPids(c.child.stdout, t);
  c.child.stdout.resume();
  const code = await within(c.done, 20000, what, watch(pids));
  return { pids, code, stderr: c.stderr };
}

// proves C5, C6
test('cordon run: the exit status is forwarded and the leftover is killed', async (ctx) => {
  const t = track(ctx);
  const argv = ['run', '--', process.execPath, ...treeArgs('--detached', '1', '--fail', '7')];
  const { pids, code, stderr } = await cliTree(t, argv, 'cordon run to exit', (p) => [p.root, p.gc0]);
  assert.equal(code, 7, stderr());
  await waitGone([pids.root, pids.gc0], 5000);
});

// proves C10, C3
test('cordon run --timeout: the tree ends, exit 124', async (ctx) => {
  const t = track(ctx);
  // 8 s: the tree must have printed its pids before the timeout (2 to 3 s under Wine, loaded).
  const argv = ['run', '--timeout', '8s', '--', process.execPath, ...treeArgs('--detached', '1')];
  const { pids, code, stderr } = await cliTree(t, argv, 'cordon run to exit', (p) => [p.root, p.gc0]);
  assert.equal(code, 124, stderr());
  await waitGone([pids.root, pids.gc0], 5000);
});

// proves C5
test('cordon leaks: lists the leaked grandchild, exits 23, then ends it', async (ctx) => {
  const t = track(ctx);
  const argv = ['leaks', '--', process.execPath, ...treeArgs('--detached', '1', '--exit')];
  const { pids, code, stderr } = await cliTree(t, argv, 'cordon leaks to exit', (p) => [p.gc0]);
  assert.equal(code, 23, stderr());
  assert.match(stderr(), new RegExp(`pid ${pids.gc0}\\b`));
  await waitGone([pids.gc0], 5000);
});

// proves C5
test('cordon leaks: nothing left behind, exit status of the command', async (ctx) => {
  const t = track(ctx);
  const { code, stderr } = await cliTree(t, ['leaks', '--', process.execPath, ...treeArgs('--exit')], 'cordon leaks to exit');
  assert.equal(code, 0, stderr());
  assert.match(stderr(), /no leaks/);
});
