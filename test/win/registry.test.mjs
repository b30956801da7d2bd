// C7 on Windows: owners and kinds, scoped stop, hasLiveWork, detach /
// re-attach / release, log files. Every tree is observed from outside (pids
// the fixture prints, alive(): pid and creation time); cleanup never goes through cordon.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { alive, cordon, readPids, sleep, track, treeArgs, waitFor, waitGone, within } from './helpers.mjs';

const reg = (t) => new cordon.Registry({ logDir: t.tmp(), grace: 500 });
const start = async (t, owner, opts = {}) => {
  const p = t.proc(owner.spawn(process.execPath, treeArgs('--detached', '1'), { stdio: ['ignore', 'pipe', 'ignore'], ...opts }));
  const pids = await readPids(p.stdout, t);
  return { p, pids, all: [pids.root, pids.gc0] };
};

// proves C7
test('owners and kinds: scoped stop ends only the chosen kind; hasLiveWork follows the kinds', async (ctx) => {
  const t = track(ctx);
  const r = reg(t);
  const a = r.owner('a');
  const b = r.owner('b');
  const cmd = await start(t, a, { kind: 'command' });
  const sub = await start(t, a, { kind: 'subagent' });
  const other = await start(t, b, { kind: 'command' });
  assert.equal(r.ownerOfTree(sub.p.id), 'a');
  assert.equal(r.hasLiveWork('a'), true, 'a live subagent is unfinished work');
  assert.equal(r.hasLiveWork('b'), false, 'a live command is not');
  await within(a.stop({ kinds: ['subagent'] }), 15000, "a.stop({kinds:['subagent']})", sub.all);
  await waitGone(sub.all, 5000);
  assert.ok([...cmd.all, ...other.all].every(alive), 'the other kind and the other owner keep running');
  assert.equal(r.hasLiveWork('a'), false);
  assert.throws(() => a.spawn(process.execPath, [], { kind: 'no-such-kind' }), (e) => e.code === 'ERR_INVALID_ARG_VALUE');
  await assert.rejects(async () => b.stop(cmd.p.id), (e) => e.code === 'ERR_CORDON_NOT_OWNER');
  await within(a.stop(cmd.p.id), 15000, 'a.stop(id)', cmd.all);
  await waitGone(cmd.all, 5000);
  assert.ok(other.all.every(alive), "owner b's tree is untouched");
  await within(b.release(), 15000, 'b.release()', other.all);
  await waitGone(other.all, 5000);
});

// proves C8
test('detach keeps trees running, re-attach within keepAlive keeps them, expiry releases them', async (ctx) => {
  const t = track(ctx);
  const r = reg(t);
  const o = r.owner('session');
  const one = await start(t, o);
  o.detach({ keepAlive: 60000 });
  assert.equal(o.hasLiveWork(), true, 'a detached owner with a live tree has live work');
  assert.equal(r.owner('session'), o, 're-attach returns the same owner');
  assert.equal(o.detached, false);
  await sleep(300);
  assert.ok(one.all.every(alive), 'the tree survived detach and re-attach');
  o.detach({ keepAlive: 300 });
  await waitGone(one.all, 15000); // keep-alive over: released in the background
  await waitFor(() => o.released, { timeout: 5000, what: 'the owner to be released' });
  assert.throws(() => o.spawn(process.execPath, []), (e) => e.code === 'ERR_CORDON_OWNER_RELEASED');
  assert.notEqual(r.owner('session'), o, 'the id names a new owner after release');
});

// proves C8, C10
test('release ends every tree of every kind; log: true writes the output to a file', async (ctx) => {
  const t = track(ctx);
  const r = reg(t);
  const o = r.owner('rel');
  const x = await start(t, o, { kind: 'workflow', log: true });
  const y = await start(t, o, { kind: 'command' });
  const logPath = o.list().find((i) => i.id === x.p.id).logPath;
  assert.ok(logPath, 'the tree has a log path');
  await within(o.release(), 15000, 'release()', [...x.all, ...y.all]);
  await waitGone([...x.all, ...y.all], 5000);
  const result = await within(x.p.result, 10000, 'the logged tree\'s result');
  assert.equal(result.logPath, logPath);
  await waitFor(() => /PID root \d+/.test(readFileSync(logPath, 'utf8')), { timeout: 5000, what: 'the log to hold the output' });
  assert.match(readFileSync(logPath, 'utf8'), new RegExp(`PID root ${x.pids.root}`));
});

// proves C8
test('fork: the new owner starts with no trees, the old one keeps its own running', async (ctx) => {
  const t = track(ctx);
  const r = reg(t);
  const o = r.owner('parent');
  const one = await start(t, o);
  const f = o.fork('child');
  assert.deepEqual(f.list(), []);
  assert.equal(f.hasLiveWork(), false);
  await within(f.release(), 15000, 'release of the fork');
  await new Promise((res) => setTimeout(res, 300));
  assert.ok(one.all.every(alive), "releasing the fork does not touch the parent's tree");
  await within(r.releaseAll(), 15000, 'releaseAll()', one.all);
  await waitGone(one.all, 5000);
});
