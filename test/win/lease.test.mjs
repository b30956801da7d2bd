// Leases on Windows, the anchor's side, driven through dist/anchor/windows.js,
// windows-endpoint.js and adopted.js (the lease option of spawn() is the shared code's):
// a host killed hard with a lease leaves its tree running; a second host
// adopts it through the endpoint with the token and ends it; a lease that
// runs out ends the tree, and its endpoint answers DENIED expired until the
// anchor exits; a wrong token and the loser of two racing adopters are
// refused. Liveness is observed from outside (alive(): pid and creation
// time, on the pids the tree printed); cleanup TerminateProcess-es them, never
// through cordon.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { alive, assertUserOnlyDacl, fixtures, hardKill, join, nativeFixture, noDaclExe, pkgDir, readPids, sleep, spawnChild, track, underWine, waitFor, waitGone, within } from './helpers.mjs';

const { exe: inJobExe, skip: noInJob } = nativeFixture('in-job');
const { exe: windowApp, skip: noWindowApp } = nativeFixture('window-app');
// Wine answers every job's limits with zeros: there a test build of the
// anchor (CORDON_WIN_TEST_HOOKS=1) is told the limits its job was given.
const noJobLimits =
  noInJob || (underWine && process.env.CORDON_WIN_TEST_HOOKS !== '1' && 'Wine reads every job\'s limits as none and the anchor is a release build (no CORDON_TEST_JOB_LIMITS): the refusal cannot be shown here');

const distAnchor = (name) => import(pathToFileURL(join(pkgDir, 'dist', 'anchor', name)).href);
const { WindowsAnchorChannel } = await distAnchor('windows.js');
const { adoptWindowsTree, connectAdoptionEndpoint, connectAdoptionOutput, leaseEndpoint, leaseInfo } = await distAnchor('windows-endpoint.js');
const { AdoptedAnchorChannel } = await distAnchor('adopted.js');

const hex = (bytes) => randomBytes(bytes).toString('hex');

/** A host (fixtures/lease-host.mjs) with one leased tree; its pids, endpoint and token once READY. */
async function leasedTree(t, leaseMs, treeArgs = ['--detached', '2'], env = {}, stdin = 'ignore') {
  const token = hex(16);
  const id = hex(8);
  const kill = `lease-host-${hex(6)}`;
  const host = spawnChild(process.execPath, [join(fixtures, 'lease-host.mjs'), String(leaseMs), token, id, kill, ...treeArgs], {
    env: { ...process.env, CORDON_PKG: pkgDir, ...env },
    stdio: [stdin, 'pipe', 'inherit'],
  });
  t.add(host.pid);
  let endpoint;
  host.stdout.on('data', (d) => {
    const m = /^ENDPOINT (.+)$/m.exec(String(d));
    if (m) endpoint = m[1].trim();
  });
  const pids = await readPids(host.stdout, t);
  assert.ok(endpoint, 'the host printed the endpoint');
  const tree = Object.entries(pids)
    .filter(([name]) => name.startsWith('tree.'))
    .map(([, pid]) => pid);
  return { host, kill, token, endpoint, anchor: pids.anchor, tree, pids };
}

/** Kills the host hard (no code of its own runs) and waits until it is gone. */
async function killHost(ctx, h) {
  const how = await hardKill(h.host.pid, h.kill);
  ctx.diagnostic(`host ended by ${how}`);
  await waitGone([h.host.pid], 5000);
}

/** A leased tree whose host was killed hard; `all`: the anchor and the tree's pids. */
async function orphanedTree(ctx, t, leaseMs = 60000) {
  const h = await leasedTree(t, leaseMs);
  await killHost(ctx, h);
  return { h, all: [h.anchor, ...h.tree] };
}

/** The adopter ends the tree (KILL): its anchor exits, nothing of the tree is left (bounded). */
async function endThroughAdopter(a, all) {
  a.channel.terminate(0);
  await within(a.gone, 20000, 'the anchor to exit after KILL', all);
  await waitGone(all, 5000);
}

/** Adopts through the endpoint; the channel and the events it reports (replay first). */
async function adopt(h, withOutput = false) {
  const adoption = await (withOutput ? adoptWindowsTree : connectAdoptionEndpoint)(h.endpoint, h.anchor, h.token);
  const events = [];
  let exited;
  const gone = new Promise((resolve) => (exited = resolve));
  const on = new Proxy(
    {},
    {
      get: (_, name) =>
        name === 'anchorExit'
          ? (...args) => {
              events.push(['anchorExit', ...args]);
              exited();
            }
          : (...args) => events.push([name, ...args]),
    },
  );
  const channel = new AdoptedAnchorChannel(adoption, h.anchor, on, 500);
  return { adoption, channel, events, gone };
}

// proves C8
test('lease: the host killed hard leaves its tree running; a second host adopts it and ends it', async (ctx) => {
  const t = track(ctx);
  const h = await leasedTree(t, 60000);
  const all = [h.anchor, ...h.tree];
  assert.ok(all.every(alive), 'the tree runs under its host');
  await killHost(ctx, h);
  // The host's death (its job handle closed, Node's kill-on-close job gone)
  // ends nothing: the anchor keeps the job, the lease clock runs.
  await sleep(1500);
  assert.deepEqual(all.filter((p) => !alive(p)), [], 'nothing of the tree ended with the host');
  const info = await within(leaseInfo(h.endpoint, h.anchor), 10000, 'INFO', all);
  ctx.diagnostic(`INFO: ${JSON.stringify(info)}`);
  assert.equal(info.rootRunning, true);
  assert.ok(info.leftMs !== null && info.leftMs > 0 && info.leftMs <= 60000, `lease left ${info.leftMs}`);

  // A first adopter gets the replay, then drops the connection: the lease
  // clock starts again, in full, and the tree stays adoptable.
  const adoptStart = Date.now();
  const first = await within(adopt(h), 10000, 'the first adoption', all);
  await waitFor(() => first.events.some(([e]) => e === 'ready'), { timeout: 10000, what: 'the replayed READY' });
  ctx.diagnostic(`adoption (connect, ADOPT, replay up to READY): ${Date.now() - adoptStart} ms`);
  const ready = first.events.find(([e]) => e === 'ready');
  assert.equal(ready[1], h.pids['tree.root'], 'the replay names the tree root');
  assert.equal(ready[2], 'job-object');
  assert.equal((await leaseInfo(h.endpoint, h.anchor)).leftMs, null, 'INFO while a host is attached');
  first.adoption.socket.destroy();
  await within(
    (async () => {
      while ((await leaseInfo(h.endpoint, h.anchor)).leftMs === null) await sleep(100);
    })(),
    10000,
    'the lease clock to start again',
    all,
  );
  const again = await leaseInfo(h.endpoint, h.anchor);
  assert.ok(again.leftMs > 50000, `the clock restarted in full (left ${again.leftMs})`);

  // The second adopter ends the tree: QUIET, the anchor exits, nothing is left.
  const second = await within(adopt(h), 10000, 'the second adoption', all);
  second.channel.terminate(0);
  await within(second.gone, 20000, 'the anchor to exit after KILL', all);
  assert.ok(second.events.some(([e]) => e === 'quiescent'), `QUIET reported: ${JSON.stringify(second.events)}`);
  await waitGone(all, 5000);
});

// proves C8, C3
test('lease: while its host lives, a leased tree is that host\'s as any other (terminate, QUIET, nothing left)', async (ctx) => {
  const t = track(ctx);
  const events = [];
  let exited;
  const gone = new Promise((resolve) => (exited = resolve));
  const on = new Proxy({}, { get: (_, name) => (...args) => (events.push([name, ...args]), name === 'anchorExit' && exited()) });
  const id = hex(8);
  const channel = new WindowsAnchorChannel(
    {
      path: join(pkgDir, 'build', 'Release', 'cordon-anchor.exe'),
      args: ['--cwd', process.cwd(), '--tier', 'job-object', '--watch-fd', '1', '--lease', '60000', '--lease-id', id, '--', process.execPath, process.execPath, join(fixtures, 'tree.mjs'), '--detached', '2'],
      cwd: process.cwd(),
      env: process.env,
      stdio: ['ignore', 'pipe', 'ignore'],
      exitGrace: 500,
      lease: { ms: 60000, token: hex(16), dir: '' },
    },
    on,
  );
  t.add(channel.pid);
  const pids = await readPids(channel.child.stdout, t);
  const all = [channel.pid, ...Object.values(pids)];
  assert.equal((await leaseInfo(leaseEndpoint(`${channel.pid}-${id}`), channel.pid)).leftMs, null, 'INFO: a host is attached');
  channel.terminate(0);
  await within(gone, 20000, 'the anchor to exit after KILL', all);
  assert.ok(events.some(([e]) => e === 'quiescent'), JSON.stringify(events));
  await waitGone(all, 5000);
});

// proves C8
test('lease: nobody adopts, the lease runs out and the tree is ended', async (ctx) => {
  const t = track(ctx);
  const leaseMs = 4000;
  const h = await leasedTree(t, leaseMs);
  const all = [h.anchor, ...h.tree];
  await killHost(ctx, h);
  const killedAt = Date.now();
  await sleep(1000);
  assert.deepEqual(all.filter((p) => !alive(p)), [], 'the tree outlives its host while the lease runs');
  // The lease, then the teardown grace (CTRL_BREAK does not exist under Wine:
  // the forced stop follows at once), bounded generously for a loaded Wine.
  await waitGone(all, leaseMs + 15000);
  const took = Date.now() - killedAt;
  ctx.diagnostic(`tree gone ${took} ms after the host's death (lease ${leaseMs} ms)`);
  // (The anchor starts its clock when it sees EOF, after the kill.)
  assert.ok(took >= leaseMs - 200, `ended only after the lease (${took} ms)`);
  // The endpoint went with the anchor.
  await assert.rejects(leaseInfo(h.endpoint, h.anchor), { code: 'ERR_CORDON_UNKNOWN_TREE' });
});

// proves nothing of the contract: the threat model's endpoint name, never free while the anchor lives (no clause)
test('lease: once the lease ran out, the endpoint answers until its anchor exits (ADOPT: DENIED expired), so the name is never free while the anchor is alive', { skip: noWindowApp }, async (ctx) => {
  const t = track(ctx);
  const dir = t.tmp();
  const closed = join(dir, 'closed.txt');
  const graceMs = 8000;
  // The teardown lasts its grace: a member with a window gets WM_CLOSE (and
  // ends), the root ignores CTRL_BREAK and has no window, so it ends only at
  // the forced stop after the grace.
  const h = await leasedTree(t, 2000, ['--window', windowApp, closed, '--ignore-break'], { CORDON_TEST_LEASE_GRACE: String(graceMs) });
  const all = [h.anchor, ...h.tree];
  await killHost(ctx, h);
  // (window-app.exe writes <closed>.<pid> on WM_CLOSE.)
  await waitFor(() => readdirSync(dir).some((name) => name.startsWith('closed.txt.')), { timeout: 20000, what: 'the lease to run out (the window told to close)' });
  assert.ok(alive(h.anchor), 'the anchor is in its teardown');
  const err = await within(connectAdoptionEndpoint(h.endpoint, h.anchor, h.token).catch((e) => e), 5000, 'ADOPT after the lease ran out', all);
  ctx.diagnostic(`ADOPT during the teardown: ${err.code} ${err.why ?? err.message}`);
  assert.equal(err.code, 'ERR_CORDON_ADOPT_DENIED');
  assert.equal(err.why, 'expired');
  assert.ok(alive(h.anchor), 'the anchor was alive when it answered');
  await waitGone(all, graceMs + 15000);
});

// proves C8
test('lease: a host that exits normally (its exit hook runs) leaves a leased tree running', async (ctx) => {
  const t = track(ctx);
  const h = await leasedTree(t, 60000, ['--detached', '2'], { CORDON_TEST_LEASE_EXIT: '1' });
  const all = [h.anchor, ...h.tree];
  const code = await within(new Promise((resolve) => h.host.on('exit', resolve)), 15000, 'the host to exit', [h.host.pid]);
  assert.equal(code, 0);
  await sleep(1500);
  assert.deepEqual(all.filter((p) => !alive(p)), [], 'nothing of the tree ended with the host');
  const a = await within(adopt(h), 10000, 'the adoption', all);
  await endThroughAdopter(a, all);
});

// proves C8
test('lease: a leased anchor runs from a copy of its own: the package it came from can be removed while its tree lives', async (ctx) => {
  // Windows removes neither a running program's file nor a process's working
  // directory: an anchor run from node_modules would make npm ci or an
  // upgrade fail for as long as the leased tree lives.
  const t = track(ctx);
  const pkg = mkdtempSync(join(tmpdir(), 'cordon-pkg-'));
  ctx.after(() => rmSync(pkg, { recursive: true, force: true }));
  for (const part of ['dist', 'package.json', join('build', 'Release'), join('node_modules', 'node-gyp-build')]) {
    cpSync(join(pkgDir, part), join(pkg, part), { recursive: true });
  }
  const h = await leasedTree(t, 60000, ['--detached', '2'], { CORDON_PKG: pkg });
  const all = [h.anchor, ...h.tree];
  await killHost(ctx, h);
  let removed;
  try {
    // (Retried a moment: an antivirus may hold a file it just scanned.)
    rmSync(pkg, { recursive: true, maxRetries: 10, retryDelay: 200 });
    removed = 'removed';
  } catch (err) {
    removed = `${err.code}: ${err.message}`;
  }
  assert.equal(removed, 'removed', 'the package a leased tree came from is removed while the tree lives');
  assert.ok(all.every(alive), 'the tree runs on');
  const a = await within(adopt(h), 10000, 'the adoption', all);
  await endThroughAdopter(a, all);
});

/**
 * Runs fixtures/job-lease-host.mjs inside a job of `flags` (in-job.exe), the
 * host spawning first or not; its lines once it exited, whether the leased
 * command ran (its marker file) and the leased anchor's trace. Under Wine,
 * which answers every job's limits with zeros, the anchor (a test build)
 * reads `flags` as its immediate job's limits (CORDON_TEST_JOB_LIMITS) when
 * it is in a job: whether it is in one, and which, is Wine's own answer.
 */
async function hostInJob(ctx, t, flags, spawnFirst) {
  const dir = mkdtempSync(join(tmpdir(), 'cordon-lease-job-'));
  ctx.after(() => rmSync(dir, { recursive: true, force: true }));
  const marker = join(dir, 'ran');
  const trace = join(dir, 'trace.txt');
  const hook = underWine ? { CORDON_TEST_JOB_LIMITS: flags.toString(16) } : {};
  const host = spawnChild(inJobExe, [flags.toString(16), process.execPath, join(fixtures, 'job-lease-host.mjs'), ...(spawnFirst ? ['--spawn-first'] : []), marker], {
    env: { ...process.env, CORDON_PKG: pkgDir, CORDON_TRACE: trace, ...hook },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.add(host.pid);
  let out = '';
  host.stdout.on('data', (d) => {
    out += d;
    for (const m of out.matchAll(/^PID \S+ (\d+)\r?$/gm)) t.add(Number(m[1]));
  });
  const code = await within(new Promise((resolve) => host.on('exit', resolve)), 60000, 'the host in its job to finish', [host.pid, ...t.pids]);
  const job = JSON.parse(/^JOB (.+)$/m.exec(out)?.[1] ?? 'null');
  const traced = existsSync(trace) ? readFileSync(trace, 'utf8') : '';
  const anchorSaw = /lease: (the anchor runs in [^\r\n]*)/.exec(traced)?.[1] ?? '(no lease line in the trace)';
  const read = /lease: its immediate job's LimitFlags 0x([0-9a-f]+)/.exec(traced)?.[1];
  return { code, out, job, ran: existsSync(marker), anchorSaw, anchorFlags: read === undefined ? undefined : Number.parseInt(read, 16) };
}

// proves C8, C1
test('lease: the leased anchor asks whether it can outlive its host: in a Job Object that kills on close and does not let it leave silently, ERR_CORDON_LEASE_JOB before the command runs, also after the host spawned (libuv\'s own job); with silent breakaway the lease holds', { skip: noJobLimits }, async (ctx) => {
  const KILL_ON_CLOSE = 0x2000;
  const SILENT_BREAKAWAY = 0x1000;
  const BREAKAWAY_OK = 0x800;
  const t = track(ctx);
  const cases = [
    { flags: KILL_ON_CLOSE, spawnFirst: false, held: false },
    // The bug this guards against: the host's first non-detached spawn puts
    // it into libuv's job (kill-on-close, silent breakaway) inside the
    // service's; the host's own view is then libuv's job, the anchor's the service's.
    { flags: KILL_ON_CLOSE, spawnFirst: true, held: false },
    // Breakaway on request only: Node starts the detached anchor without CREATE_BREAKAWAY_FROM_JOB.
    { flags: KILL_ON_CLOSE | BREAKAWAY_OK, spawnFirst: true, held: false },
    { flags: KILL_ON_CLOSE | SILENT_BREAKAWAY, spawnFirst: true, held: true },
  ];
  for (const c of cases) {
    const what = `job 0x${c.flags.toString(16)}, host ${c.spawnFirst ? 'spawned first' : 'spawned nothing before'}`;
    const r = await hostInJob(ctx, t, c.flags, c.spawnFirst);
    ctx.diagnostic(`${what}: ${r.out.trim().replace(/\r?\n/g, ' | ')} | anchor: ${r.anchorSaw}`);
    assert.equal(r.code, 0, `${what}: ${r.out}`);
    assert.equal(r.job?.inJob, true, `${what}: the host runs in a job`);
    if (c.spawnFirst) assert.match(r.out, /^SPAWNED FIRST\r?$/m, what);
    let held = c.held;
    const outer = held && !underWine && /^the anchor runs in a Job Object/.test(r.anchorSaw);
    if (outer) {
      // It left in-job.exe's job silently and stayed in one around this
      // whole run (a CI runner's, a service's): that job decides, as it would
      // for any host here.
      held = r.anchorFlags === undefined || (r.anchorFlags & KILL_ON_CLOSE) === 0;
      ctx.diagnostic(`${what}: the anchor stayed in a job around the test run (LimitFlags ${r.anchorFlags === undefined ? 'unread' : `0x${r.anchorFlags.toString(16)}`}): it decides, so the lease is ${held ? 'kept' : 'refused'}`);
    }
    if (held) {
      assert.match(r.out, /^ENDED\r?$/m, `${what}: the leased tree ran and was ended`);
      assert.ok(r.ran, `${what}: the command ran`);
      if (!outer) assert.match(r.anchorSaw, /^the anchor runs in no Job Object/, `${what}: the anchor left every job silently`);
    } else {
      assert.match(r.out, /^REFUSED ERR_CORDON_LEASE_JOB launch\r?$/m, `${what}: a typed error`);
      assert.doesNotMatch(r.out, /^PID tree\.root /m, what);
      assert.equal(r.ran, false, `${what}: nothing of the command ran`);
      assert.match(r.anchorSaw, /^the anchor runs in a Job Object/, `${what}: the anchor found itself in the job`);
    }
  }
});

// proves C8
test('lease: a wrong token is refused, the tree runs on', async (ctx) => {
  const { h, all } = await orphanedTree(ctx, track(ctx));
  const wrong = hex(16);
  await assert.rejects(connectAdoptionEndpoint(h.endpoint, h.anchor, wrong), { code: 'ERR_CORDON_ADOPT_DENIED' });
  assert.ok(all.every(alive), 'a refused adopter changes nothing');
  // A client that connects and says nothing is dropped (after 5 s), and
  // holds nobody up for longer: the endpoint serves the next one.
  const silent = connect(h.endpoint);
  let told = '';
  silent.on('error', () => {});
  silent.on('data', (d) => (told += d));
  const dropped = new Promise((resolve) => silent.on('close', resolve));
  await within(new Promise((resolve) => silent.once('connect', resolve)), 10000, 'the silent client to connect', all);
  // The right token still adopts (the refusal took nothing away); then end it.
  const a = await within(adopt(h), 15000, 'the adoption after the silent client', all);
  await within(dropped, 10000, 'the silent client to be dropped', all);
  assert.equal(told, 'DENIED hello\n');
  await endThroughAdopter(a, all);
});

// proves C8
test('lease: of two hosts racing to adopt, exactly one wins', async (ctx) => {
  const { h, all } = await orphanedTree(ctx, track(ctx));
  const [a, b] = await within(Promise.allSettled([adopt(h), adopt(h)]), 20000, 'both adoptions to settle', all);
  const won = [a, b].filter((r) => r.status === 'fulfilled');
  const lost = [a, b].filter((r) => r.status === 'rejected');
  assert.equal(won.length, 1, `one winner: ${JSON.stringify([a.status, b.status])}`);
  assert.equal(lost[0].reason.code, 'ERR_CORDON_ADOPT_DENIED');
  assert.ok(all.every(alive));
  const winner = won[0].value;
  await endThroughAdopter(winner, all);
});

// proves C8, C5
test('lease: a root that exited while no host was attached: the adopter gets its exit and leftovers', async (ctx) => {
  const t = track(ctx);
  // The root exits 0 right after READY; one detached grandchild stays.
  const h = await leasedTree(t, 60000, ['--detached', '1', '--exit']);
  await killHost(ctx, h);
  await waitGone([h.pids['tree.root']], 10000);
  const all = [h.anchor, h.pids['tree.gc0']];
  assert.ok(all.every(alive), 'the anchor and the grandchild live on');
  assert.equal((await leaseInfo(h.endpoint, h.anchor)).rootRunning, false);
  const a = await within(adopt(h), 10000, 'the adoption', all);
  await waitFor(() => a.events.some(([e]) => e === 'leftEnd'), { timeout: 10000, what: 'the replayed LEFTEND' });
  const names = a.events.map(([e]) => e);
  assert.deepEqual(names.slice(0, 2), ['ready', 'rootExit'], JSON.stringify(a.events));
  assert.deepEqual(a.events[1].slice(1), [0, null], 'the root exited 0');
  // The grandchild is the one leftover: the leased root's console host
  // (conhost.exe: a console program started without a console to share gets
  // one, as its child and so in the job) is no member.
  const left = a.events.filter(([e]) => e === 'left');
  assert.deepEqual(left.map(([, pid]) => pid), [h.pids['tree.gc0']], `the grandchild alone is a leftover: ${JSON.stringify(left)}`);
  await endThroughAdopter(a, all);
});

// proves C8, C6
test('lease: a result the host never read (it stopped reading, then was killed) is held for an adopter', async (ctx) => {
  const t = track(ctx);
  const gate = join(t.tmp(), 'go');
  // The root exits 7 once the gate exists; no member outlives it.
  const h = await leasedTree(t, 60000, ['--gate', gate, '--fail', '7'], { CORDON_TEST_LEASE_BLOCK: '1' }, 'pipe');
  const blocked = new Promise((resolve) => h.host.stdout.on('data', (d) => String(d).includes('BLOCKED') && resolve()));
  h.host.stdin.write('block\n');
  await within(blocked, 10000, 'the host to stop reading', [h.host.pid]);
  writeFileSync(gate, '');
  await waitGone([h.pids['tree.root']], 10000);
  // Quiescent, its result sent to a host that has not read it: the anchor
  // holds it (INFO answers, root not running, host attached) instead of exiting.
  let info;
  await waitFor(
    async () => {
      info = await leaseInfo(h.endpoint, h.anchor).catch(() => undefined);
      return info?.rootRunning === false;
    },
    { timeout: 10000, what: `the quiescent anchor to hold the result (anchor alive: ${alive(h.anchor)})` },
  );
  assert.equal(info.leftMs, null, 'the host is still attached');
  await killHost(ctx, h);
  const a = await within(adopt(h), 10000, 'the adoption', [h.anchor]);
  // The adopter read QUIET and said DONE: the anchor exits.
  await within(a.gone, 20000, 'the anchor to exit once the adopter has the result', [h.anchor]);
  const exit = a.events.find(([e]) => e === 'rootExit');
  assert.deepEqual(exit?.slice(1), [7, null], JSON.stringify(a.events));
  assert.ok(a.events.some(([e]) => e === 'quiescent'), JSON.stringify(a.events));
  await waitGone([h.anchor], 5000);
});

// proves C8
test('lease: output with no host attached goes to the log; after adoption it streams to the adopter', async (ctx) => {
  const t = track(ctx);
  const log = join(t.tmp(), 'tree.log');
  const h = await leasedTree(t, 60000, ['--detached', '1', '--tick', '100'], { CORDON_TEST_LEASE_LOG: log });
  const all = [h.anchor, ...h.tree];
  await killHost(ctx, h);
  const ticks = () => (existsSync(log) ? readFileSync(log, 'utf8').match(/^TICK \d+$/gm)?.length ?? 0 : 0);
  await waitFor(() => ticks() >= 3, { timeout: 10000, what: 'the tree\'s output in the log' });
  const seen = ticks();
  await waitFor(() => ticks() > seen, { timeout: 5000, what: 'more output in the log' });
  assert.ok(all.every(alive), 'writing with its host gone harms nobody in the tree');
  // Only the host that adopted the tree gets its output.
  await assert.rejects(connectAdoptionOutput(h.endpoint, h.anchor, h.token, 1), { code: 'ERR_CORDON_ADOPT_DENIED' });
  const a = await within(adopt(h, true), 10000, 'the adoption', all);
  assert.equal(a.adoption.logPath, log, 'ADOPTED names the log');
  assert.deepEqual(a.adoption.relayed, { stdout: true, stderr: false }, 'ADOPTED says which streams are relayed');
  assert.equal(a.adoption.stderr, null);
  assert.equal(a.channel.child.stdout, a.adoption.stdout, 'the channel carries the output stream');
  const out = a.adoption.stdout;
  let got = '';
  const closed = new Promise((resolve) => out.on('close', resolve));
  out.on('data', (d) => (got += d));
  out.resume();
  await waitFor(() => /^TICK \d+$/m.test(got), { timeout: 10000, what: 'the tree\'s output on the adopter\'s stream' });
  a.channel.terminate(0);
  await within(a.gone, 20000, 'the anchor to exit after KILL', all);
  await within(closed, 10000, 'EOF on the output stream', all);
  await waitGone(all, 5000);
});

// proves nothing of the contract: the threat model's private endpoint (no clause)
test('lease: the endpoint admits its user alone (its DACL, read from outside)', { skip: noDaclExe }, async (ctx) => {
  const t = track(ctx);
  const { h, all } = await orphanedTree(ctx, t);
  await assertUserOnlyDacl(ctx, t, [h.endpoint]);
  // Then the tree ends through an adopter: the test leaves nothing behind.
  const a = await within(adopt(h), 10000, 'the adoption', all);
  await endThroughAdopter(a, all);
});
