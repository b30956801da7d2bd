// C8 on Windows: the host dies with no code of its own running (kill -9 of its
// Wine process from Linux, or TerminateProcess on Windows) and its tree ends
// through kill-on-close; and a host that itself runs inside a cordon job
// (nested jobs) contains and terminates its own tree.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { alive, cordon, fixtures, hardKill, join, pkgDir, promised, readPids, spawnChild, track, waitGone, within } from './helpers.mjs';

const hostEnv = () => ({ ...process.env, CORDON_PKG: pkgDir });

// proves C8
test('host killed hard: the tree dies through kill-on-close', async (ctx) => {
  const t = track(ctx);
  const token = `host-${randomBytes(6).toString('hex')}`;
  const host = spawnChild(process.execPath, [join(fixtures, 'host.mjs'), 'wait', token], {
    env: hostEnv(),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.add(host.pid);
  const pids = await readPids(host.stdout, t);
  const tree = [pids['tree.root'], pids['tree.gc0'], pids['tree.gc1']];
  assert.ok(tree.every(alive), 'the tree runs under the host');
  const how = await hardKill(host.pid, token);
  ctx.diagnostic(`host ended by ${how}`);
  await waitGone([host.pid], 5000);
  // C8: within 1 s of the host's death, with the suite's allowance for a
  // loaded machine (LOAD_ALLOWANCE_MS), timed from when this test saw the
  // host gone (so never shorter than the promise).
  const gone = Date.now();
  await waitGone([...tree, pids.anchor], promised(1000), 'the tree to be gone within 1 s of the host (C8)');
  ctx.diagnostic(`the tree was gone ${Date.now() - gone} ms after the host was seen gone`);
});

// proves C1, C3
test('nested job: a host inside a cordon job contains and ends its own tree', async (ctx) => {
  const t = track(ctx);
  const outer = t.proc(
    cordon.spawn(process.execPath, [join(fixtures, 'host.mjs'), 'terminate'], { env: hostEnv(), stdio: ['pipe', 'pipe', 'inherit'] }),
  );
  const pids = await readPids(outer.stdout, t);
  const tree = [pids['tree.root'], pids['tree.gc0'], pids['tree.gc1']];
  assert.ok(tree.every(alive), 'the inner tree runs');
  // The inner cordon got its job inside the outer one.
  outer.stdin.write('go\n');
  const done = new Promise((resolve) => outer.stdout.on('data', (d) => String(d).includes('DONE') && resolve()));
  await within(done, 15000, 'the inner host to terminate its tree', tree);
  await waitGone(tree, 2000);
  const result = await within(outer.result, 15000, 'the outer result');
  assert.equal(result.exitCode, 0);
});

// proves C3
test('nested job: ending the outer tree ends the inner host and its tree', async (ctx) => {
  const t = track(ctx);
  const outer = t.proc(cordon.spawn(process.execPath, [join(fixtures, 'host.mjs'), 'wait'], { env: hostEnv(), stdio: ['ignore', 'pipe', 'inherit'] }));
  const pids = await readPids(outer.stdout, t);
  const all = [outer.pid, pids.anchor, pids['tree.root'], pids['tree.gc0'], pids['tree.gc1']];
  assert.ok(all.every(alive));
  await within(outer.kill(), 15000, 'outer kill()', all);
  await waitGone(all, 3000);
});

for (const mode of ['exit', 'throw']) {
  // proves C8
  test(`host ${mode === 'exit' ? 'exits normally (process.exit)' : 'dies of an uncaught exception'}: the tree ends with it`, async (ctx) => {
    const t = track(ctx);
    const host = spawnChild(process.execPath, [join(fixtures, 'host.mjs'), mode], { env: hostEnv(), stdio: ['pipe', 'pipe', 'pipe'] });
    t.add(host.pid);
    let stderr = '';
    host.stderr.on('data', (d) => (stderr += d));
    const pids = await readPids(host.stdout, t);
    const tree = [pids.anchor, pids['tree.root'], pids['tree.gc0'], pids['tree.gc1']];
    assert.ok(tree.every(alive), 'the tree runs under the host');
    const exited = new Promise((resolve) => host.once('exit', (code) => resolve(code)));
    // 'exit' can come before the last of stderr is read: the message is
    // looked for once the stream has ended.
    const stderrEnded = new Promise((resolve) => host.stderr.once('end', resolve));
    host.stdin.write('go\n');
    const code = await within(exited, 15000, 'the host to exit', [host.pid]);
    if (mode === 'exit') assert.equal(code, 0);
    else assert.notEqual(code, 0);
    // The host ran no cordon code at exit: Node's kill-on-close job ends the
    // anchor, whose job's kill-on-close ends the tree: C8's 1 s from the
    // host's exit, with the suite's load allowance.
    await waitGone(tree, promised(1000), 'the tree to be gone within 1 s of the host (C8)');
    if (mode === 'throw') {
      await within(stderrEnded, 15000, "the host's stderr to end", [host.pid]);
      assert.match(stderr, /uncaught, on purpose/);
    }
  });
}
