// The CLI on Windows: `cordon run` forwards the exit status and ends the tree
// (leftovers kill by default, --timeout is 124); `cordon leaks` lists what
// outlived the command (pids the fixture printed), exits 1, then ends them.
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

test('cordon run: the exit status is forwarded and the leftover is killed', async (ctx) => {
  const t = track(ctx);
  const c = cli(t, ['run', '--', process.execPath, ...treeArgs('--detached', '1', '--fail', '7')]);
  const pids = await readPids(c.child.stdout, t);
  c.child.stdout.resume();
  const code = await within(c.done, 20000, 'cordon run to exit', [pids.root, pids.gc0]);
  assert.equal(code, 7, c.stderr());
  await waitGone([pids.root, pids.gc0], 5000);
});

test('cordon run --timeout: the tree ends, exit 124', async (ctx) => {
  const t = track(ctx);
  const c = cli(t, ['run', '--timeout', '2s', '--', process.execPath, ...treeArgs('--detached', '1')]);
  const pids = await readPids(c.child.stdout, t);
  c.child.stdout.resume();
  const code = await within(c.done, 20000, 'cordon run to exit', [pids.root, pids.gc0]);
  assert.equal(code, 124, c.stderr());
  await waitGone([pids.root, pids.gc0], 5000);
});

test('cordon leaks: lists the leaked grandchild, exits 1, then ends it', async (ctx) => {
  const t = track(ctx);
  const c = cli(t, ['leaks', '--', process.execPath, ...treeArgs('--detached', '1', '--exit')]);
  const pids = await readPids(c.child.stdout, t);
  c.child.stdout.resume();
  const code = await within(c.done, 20000, 'cordon leaks to exit', [pids.gc0]);
  assert.equal(code, 1, c.stderr());
  assert.match(c.stderr(), new RegExp(`pid ${pids.gc0}\\b`));
  await waitGone([pids.gc0], 5000);
});

test('cordon leaks: nothing left behind, exit status of the command', async (ctx) => {
  const t = track(ctx);
  const c = cli(t, ['leaks', '--', process.execPath, ...treeArgs('--exit')]);
  await readPids(c.child.stdout, t);
  c.child.stdout.resume();
  const code = await within(c.done, 20000, 'cordon leaks to exit');
  assert.equal(code, 0, c.stderr());
  assert.match(c.stderr(), /no leaks/);
});
