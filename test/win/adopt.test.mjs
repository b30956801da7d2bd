// Leases on Windows through the public API (issue #17): a host (a node
// process using Registry, fixtures/registry-lease-host.mjs) spawns a leased
// tree and is killed hard; this process, a second host, finds the tree with
// registry.adoptable() and takes it with registry.adopt(id, { token }), gets
// its output, and terminates it; an endpoint served by another process than
// the tree's anchor gets nothing, the token included. Liveness is observed from outside
// (alive(): pid and creation time, on the pids the tree printed); cleanup
// TerminateProcess-es them, never through cordon.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { alive, assertUserOnlyDacl, cordon, existsSync, noDaclExe, underWine, fixtures, hardKill, join, pkgDir, readPids, sleep, spawnChild, track, waitFor, waitGone, within } from './helpers.mjs';

const hex = (bytes) => randomBytes(bytes).toString('hex');

/**
 * A leased tree whose host was killed hard. LOCALAPPDATA is a directory of
 * this test's (for the host and for this process), so the records are its own.
 */
async function orphanedTree(ctx, t, leaseMs, treeArgs, env = {}) {
  const saved = process.env.LOCALAPPDATA;
  process.env.LOCALAPPDATA = t.tmp();
  ctx.after(() => {
    if (saved === undefined) delete process.env.LOCALAPPDATA;
    else process.env.LOCALAPPDATA = saved;
  });
  const kill = `registry-lease-host-${hex(6)}`;
  const host = spawnChild(process.execPath, [join(fixtures, 'registry-lease-host.mjs'), kill, String(leaseMs), ...treeArgs], {
    env: { ...process.env, CORDON_PKG: pkgDir, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.add(host.pid);
  let id;
  let token;
  host.stdout.on('data', (d) => {
    id ??= /^ID (\S+)/m.exec(String(d))?.[1];
    token ??= /^TOKEN (\S+)/m.exec(String(d))?.[1];
  });
  const pids = await readPids(host.stdout, t);
  assert.match(id ?? '', /^\d+-[0-9a-f]{16}$/, 'the host printed the tree\'s lease id');
  assert.match(token ?? '', /^[0-9a-f]{32}$/, 'the host printed the adoption token');
  const all = [pids.anchor, ...Object.entries(pids).filter(([n]) => n.startsWith('tree.')).map(([, p]) => p)];
  const how = await hardKill(host.pid, kill);
  ctx.diagnostic(`host ended by ${how}`);
  await waitGone([host.pid], 5000);
  return { id, token, pids, all, hostPid: host.pid, dir: join(process.env.LOCALAPPDATA, 'cordon', 'leases') };
}

// proves C8
test('adoption through the registry: adoptable() lists the tree of a killed host, adopt() takes it (output, terminate), a wrong token is refused', async (ctx) => {
  const t = track(ctx);
  const o = await orphanedTree(ctx, t, 60000, ['--detached', '1', '--tick', '100']);
  await sleep(1000);
  assert.deepEqual(o.all.filter((p) => !alive(p)), [], 'nothing of the tree ended with its host');
  assert.ok(existsSync(join(o.dir, `${o.id}.json`)), 'the host wrote the record');

  // A record whose anchor is gone (here: the dead host's pid) is removed by adoptable().
  const stale = `${o.hostPid}-${hex(8)}`;
  writeFileSync(
    join(o.dir, `${stale}.json`),
    JSON.stringify({ version: 1, id: stale, anchorPid: o.hostPid, anchorStart: '1', endpoint: `\\\\.\\pipe\\cordon-lease-${stale}`, owner: 'x', kind: 'command', label: 'x', command: 'x', args: [], cwd: '.', logPath: null, started: 0, lease: 1000, tier: 'job-object' }),
  );

  const registry = new cordon.Registry({ grace: 500 });
  const list = await within(registry.adoptable(), 20000, 'adoptable()', o.all);
  ctx.diagnostic(`adoptable(): ${JSON.stringify(list)}`);
  assert.ok(!existsSync(join(o.dir, `${stale}.json`)), 'the stale record is gone');
  assert.deepEqual(list.map((x) => x.id), [o.id], 'only the live tree is listed');
  const [tree] = list;
  assert.equal(tree.owner, 'win-owner');
  assert.equal(tree.kind, 'subagent');
  assert.equal(tree.label, 'adoptee');
  assert.equal(tree.answered, true);
  assert.equal(tree.rootRunning, true);
  assert.equal(tree.tier, 'job-object');
  assert.ok(tree.leaseLeftMs > 0 && tree.leaseLeftMs <= 60000, `lease left ${tree.leaseLeftMs}`);
  assert.ok(tree.logPath, 'a leased tree has a log');

  // A wrong token: refused, and nothing changes.
  await assert.rejects(within(registry.adopt(o.id, { token: hex(16) }), 20000, 'adopt() with a wrong token', o.all), { code: 'ERR_CORDON_ADOPT_DENIED' });
  assert.deepEqual(o.all.filter((p) => !alive(p)), [], 'a refused adopter changes nothing');

  const started = Date.now();
  const proc = t.proc(await within(registry.adopt(o.id, { token: o.token }), 20000, 'adopt()', o.all));
  ctx.diagnostic(`registry.adopt(): ${Date.now() - started} ms`);
  assert.equal(proc.adopted, true);
  assert.equal(proc.stdin, null, 'stdin is not carried over');
  assert.equal(proc.leaseId, o.id);
  assert.equal(proc.logPath, tree.logPath);
  assert.equal(await within(proc.started, 10000, 'the replayed READY', o.all), o.pids['tree.root'], 'the adopted process knows its root');
  assert.deepEqual(registry.owner('win-owner').list().map((x) => x.id), [proc.id], 'registered under its owner');
  assert.equal(registry.hasLiveWork('win-owner'), true, 'a live subagent is unfinished work');
  let got = '';
  proc.stdout.on('data', (d) => (got += d));
  await waitFor(() => /^TICK \d+\r?$/m.test(got), { timeout: 10000, what: "the tree's output on the adopter's proc.stdout" });
  assert.equal((await registry.adoptable())[0]?.leaseLeftMs, null, 'listed with no clock running while adopted');

  await within(proc.terminate({ grace: 500 }), 20000, 'terminate() of the adopted tree', o.all);
  await waitGone(o.all, 5000);
  const result = await within(proc.result.catch((e) => e), 10000, 'the result', o.all);
  ctx.diagnostic(`result: ${JSON.stringify({ code: result.exitCode, reason: result.reason, error: result.code })}`);
  // (No CTRL_BREAK under Wine: the forced stop, TerminateJobObject, reported as a kill.)
  assert.equal(result.reason, 'signal', `the adopter gets the tree's result: ${result.message ?? ''}`);
  assert.equal(registry.hasLiveWork('win-owner'), false);
  await waitFor(() => !existsSync(join(o.dir, `${o.id}.json`)), { timeout: 5000, what: 'the record to go with the anchor' });
  assert.deepEqual(await registry.adoptable(), []);
});

// proves C8, C7
test('owner.adopt() with the registry secret takes every tree of the owner; another secret takes none', async (ctx) => {
  const t = track(ctx);
  const secret = hex(12);
  const o = await orphanedTree(ctx, t, 60000, ['--detached', '1'], { CORDON_TEST_SECRET: secret });
  const none = await within(new cordon.Registry({ grace: 500, secret: 'not-the-hosts' }).owner('win-owner').adopt(), 20000, 'owner.adopt() with another secret', o.all);
  assert.deepEqual(none, [], 'a tree its anchor refuses is left out');
  assert.deepEqual(o.all.filter((p) => !alive(p)), [], 'and runs on');
  const registry = new cordon.Registry({ grace: 500, secret });
  const procs = await within(registry.owner('win-owner').adopt(), 20000, 'owner.adopt() with the secret', o.all);
  for (const p of procs) t.proc(p);
  assert.deepEqual(procs.map((p) => p.leaseId), [o.id]);
  await within(procs[0].kill(), 20000, 'kill() of the adopted tree', o.all);
  await waitGone(o.all, 5000);
});

/** The CLI of the package under test (its environment: this process's, LOCALAPPDATA included); its output and exit code. */
function cli(t, argv) {
  const child = spawnChild(process.execPath, [join(pkgDir, 'dist', 'cli.js'), ...argv], { env: { ...process.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  t.add(child.pid);
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (d) => (out.stdout += d));
  child.stderr.on('data', (d) => (out.stderr += d));
  const done = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, out, done };
}

// proves C8
test('the CLI: cordon ps lists the tree of a killed host, cordon adopt streams its output (a wrong token exits 77), and its hard death gives the tree back to its lease', async (ctx) => {
  const t = track(ctx);
  const o = await orphanedTree(ctx, t, 60000, ['--detached', '1', '--tick', '100']);
  const ps = cli(t, ['ps', '--json']);
  assert.equal(await within(ps.done, 20000, 'cordon ps --json', o.all), 0, ps.out.stderr);
  const listed = JSON.parse(ps.out.stdout);
  assert.deepEqual(
    listed.map((x) => [x.id, x.owner, x.kind, x.label, x.leaseLeftMs > 0]),
    [[o.id, 'win-owner', 'subagent', 'adoptee', true]],
  );
  const wrong = cli(t, ['adopt', o.id, '--token', hex(16)]);
  assert.equal(await within(wrong.done, 20000, 'cordon adopt with a wrong token', o.all), 77, wrong.out.stderr);
  assert.match(wrong.out.stderr, /ERR_CORDON_ADOPT_DENIED/);

  const adopt = cli(t, ['adopt', o.id, '--token', o.token]);
  await waitFor(() => /^TICK \d+\r?$/m.test(adopt.out.stdout), { timeout: 20000, what: "the tree's output on cordon adopt's stdout" });
  const registry = new cordon.Registry({ grace: 500 });
  assert.equal((await registry.adoptable())[0]?.leaseLeftMs, null, 'attached to cordon adopt');
  // (No Ctrl-C to send a process on Windows from here: TerminateProcess.)
  process.kill(adopt.child.pid, 'SIGKILL');
  await within(adopt.done, 10000, 'cordon adopt to end', [adopt.child.pid]);
  await waitFor(async () => (await registry.adoptable())[0]?.leaseLeftMs > 0, { timeout: 10000, what: 'the lease clock to run again' });
  assert.deepEqual(o.all.filter((p) => !alive(p)), [], 'the tree outlives its adopter');
  const proc = t.proc(await within(registry.adopt(o.id, { token: o.token }), 20000, 'adopt()', o.all));
  await within(proc.kill(), 20000, 'kill() of the adopted tree', o.all);
  await waitGone(o.all, 5000);
});

// proves nothing of the contract: the threat model's token sent only to the anchor (no clause)
test("adopt() writes nothing to a pipe that is not served by the tree's anchor: a record whose endpoint another process serves is refused (ERR_CORDON_ADOPT_DENIED), the token never sent", async (ctx) => {
  const t = track(ctx);
  const o = await orphanedTree(ctx, t, 60000, ['--detached', '1']);
  // The real endpoint cannot be taken while its anchor lives (it answers until
  // it exits); the name is free once it has exited, and a liveness check made
  // just before that passes. That moment, made to last: a record naming the
  // live anchor (pid and start) under an id whose pipe this process serves.
  const { writeRecord } = await import(pathToFileURL(join(pkgDir, 'dist', 'lease.js')).href);
  const real = JSON.parse(readFileSync(join(o.dir, `${o.id}.json`), 'utf8'));
  const id = `${process.pid}-${hex(8)}`;
  let received = '';
  let connections = 0;
  const server = createServer((conn) => {
    connections++;
    conn.on('data', (d) => (received += d));
    conn.on('error', () => {});
  });
  const name = `\\\\.\\pipe\\cordon-lease-${id}`;
  await within(new Promise((resolve, reject) => server.listen(name, resolve).once('error', reject)), 10000, 'the impostor pipe to listen');
  ctx.after(() => server.close());
  writeRecord(o.dir, { ...real, id });
  const registry = new cordon.Registry();
  const err = await within(registry.adopt(id, { token: o.token }).catch((e) => e), 20000, 'adopt() of the impostor', o.all);
  ctx.diagnostic(err.message);
  assert.equal(err.code, 'ERR_CORDON_ADOPT_DENIED');
  assert.equal(err.why, 'impostor');
  assert.equal(err.serverPid, process.pid);
  assert.match(err.message, new RegExp(`served by process ${process.pid}, not by the tree's anchor \\(pid ${o.pids.anchor}\\)`));
  await sleep(500); // (anything written would have arrived by now)
  assert.equal(connections, 1, 'the adopter connected');
  assert.equal(received, '', 'and wrote nothing: no ADOPT, no token');
  assert.deepEqual(o.all.filter((p) => !alive(p)), [], 'the tree runs on');
  // The real one is adopted as ever, and ended.
  const proc = t.proc(await within(registry.adopt(o.id, { token: o.token }), 20000, 'adopt() of the real tree', o.all));
  await within(proc.kill(), 20000, 'kill() of the adopted tree', o.all);
  await waitGone(o.all, 5000);
});

// proves nothing of the contract: the threat model's private lease directory (no clause)
test(
  'the record directory (%LOCALAPPDATA%\\cordon\\leases) admits its user alone (its DACL, read from outside)',
  {
    skip:
      (underWine &&
        "Wine does not keep a file's security descriptor here: it reads back its default (SYSTEM and the user, not protected), whatever CreateDirectory was given") ||
      noDaclExe,
  },
  async (ctx) => {
    const t = track(ctx);
    const saved = process.env.LOCALAPPDATA;
    process.env.LOCALAPPDATA = t.tmp();
    ctx.after(() => {
      if (saved === undefined) delete process.env.LOCALAPPDATA;
      else process.env.LOCALAPPDATA = saved;
    });
    assert.deepEqual(await within(new cordon.Registry().adoptable(), 20000, 'adoptable()'), []);
    const dir = join(process.env.LOCALAPPDATA, 'cordon', 'leases');
    assert.ok(existsSync(dir), 'adoptable() made the directory');
    await assertUserOnlyDacl(ctx, t, ['--dir', dir]);
  },
);
