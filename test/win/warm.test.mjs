// Warm anchors on Windows (lib/anchor/windows-warm.ts, native/win/warm.h):
// an anchor started ahead of need takes the next spawn's command, and the
// tree is what a cold anchor's is. Observed from outside: which anchor
// processes exist before a spawn is observe.exe's snapshot (the suite's own
// observer; a process is its pid and creation time), what the command got is
// what it printed, and the tree's end is its processes gone. Under Wine, so
// the path is exercised here; its timing is not a claim about Windows.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { onLines } from '../helpers/common.mjs';
import {
  alive,
  cordon,
  fixtures,
  hardKill,
  join,
  noObserveExe,
  observeProcesses,
  pkgDir,
  promised,
  readPids,
  readUntilReady,
  spawnChild,
  startTree,
  track,
  waitFor,
  waitGone,
  within,
} from './helpers.mjs';

const skip = noObserveExe;

/** The cordon-anchor.exe processes observe.exe lists as children of `host` (pid -> creation time). */
function anchorsOf(host) {
  const out = new Map();
  for (const [pid, p] of observeProcesses()) if (p.ppid === host && /^cordon-anchor\.exe$/i.test(p.name)) out.set(pid, p.start);
  return out;
}

/** Waits (bounded) until observe.exe lists an anchor child of `host` other than `known`: its pid and creation time. */
async function waitForWarm(host, known = []) {
  let found;
  await waitFor(
    () => {
      const listed = [...anchorsOf(host)].filter(([pid]) => !known.includes(pid));
      found = listed[0];
      return found !== undefined;
    },
    { timeout: 30000, interval: 200, what: 'a warm anchor to be listed' },
  );
  return { pid: found[0], start: found[1] };
}

/**
 * What observe.exe lists as children of `pid`, but its console host (Wine 8
 * serves a hidden console with a conhost.exe it starts as the console's first
 * process's child, native/win/launch.cc; it may outlive that process a moment):
 * what an anchor ran.
 */
function ranUnder(pid) {
  return [...observeProcesses()].filter(([, p]) => p.ppid === pid && !/^conhost\.exe$/i.test(p.name));
}

const hostEnv = (extra = {}) => ({ ...process.env, CORDON_PKG: pkgDir, ...extra });

/** fixtures/warm-host.mjs in `mode`, tracked; resolves once it printed WARM (or CHECK), with its pids. */
async function startHost(t, mode, { env, token = '' } = {}) {
  const host = spawnChild(process.execPath, [join(fixtures, 'warm-host.mjs'), mode, token], {
    env: hostEnv(env),
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  t.add(host.pid);
  const pids = {};
  const lines = [];
  const seen = (want) =>
    new Promise((resolve, reject) => {
      const rest = onLines(host.stdout, (line) => {
        lines.push(line);
        const m = /^PID (\S+) (\d+)$/.exec(line);
        if (m) {
          pids[m[1]] = Number(m[2]);
          t.add(Number(m[2]));
        }
        if (line === want) resolve();
      });
      host.stdout.on('end', () => reject(new Error(`the host ended before ${want}: ${JSON.stringify(lines.join('\n') + rest())}`)));
    });
  const first = mode === 'off' ? 'CHECK' : 'WARM';
  await within(seen(first), 60000, `the host to print ${first}`, [host.pid]);
  return { host, pids, lines };
}

// proves C1
test('spawn() takes a warm anchor that existed before it, and the command gets its stdin, stdout, stderr, cwd and environment', { skip }, async (ctx) => {
  const t = track(ctx);
  // A first tree: once its anchor launched it, a warm anchor is started.
  const first = t.proc(cordon.spawn(process.execPath, ['-e', ''], { stdio: 'ignore' }));
  await within(first.result, 20000, 'the first tree');
  const warm = await waitForWarm(process.pid, [first.anchorPid]);
  ctx.diagnostic(`warm anchor ${warm.pid} listed before the spawn`);
  const cwd = t.tmp();
  const script =
    "let s = ''; process.stdin.setEncoding('utf8').on('data', (d) => (s += d)).on('end', () => { console.log(JSON.stringify({ stdin: s, cwd: process.cwd(), v: process.env.WARM_TEST_VAR, host: process.env.WARM_HOST_ONLY ?? null, waiting: process.env.CORDON_WARM_ANCHOR ?? null })); console.error('to stderr'); });";
  process.env.WARM_HOST_ONLY = 'the host has it, the command must not';
  let proc;
  try {
    // (extendEnv: false: `env` is the whole environment, as a cold anchor's.)
    proc = t.proc(cordon.spawn(process.execPath, ['-e', script], { cwd, env: { SystemRoot: process.env.SystemRoot, WARM_TEST_VAR: 'warm \u00e9 value' }, extendEnv: false, stdio: ['pipe', 'pipe', 'pipe'] }));
  } finally {
    delete process.env.WARM_HOST_ONLY;
  }
  // (1) the very process observe.exe listed before the spawn is this tree's anchor.
  assert.equal(proc.anchorPid, warm.pid, 'the anchor is the warm one listed before the spawn');
  assert.equal(anchorsOf(process.pid).get(warm.pid), warm.start, 'the same process (its creation time), not a new one on its pid');
  let out = '';
  let err = '';
  proc.stdout.on('data', (d) => (out += d));
  proc.stderr.on('data', (d) => (err += d));
  proc.stdin.end('piped in\n');
  const result = await within(proc.result, 20000, 'the result');
  assert.equal(result.exitCode, 0);
  assert.equal(result.tier, 'job-object');
  const got = JSON.parse(out.trim());
  assert.equal(got.stdin, 'piped in\n');
  assert.equal(got.cwd.toLowerCase(), cwd.toLowerCase());
  assert.equal(got.v, 'warm \u00e9 value');
  assert.equal(got.host, null, "the host's environment is not the command's");
  assert.equal(got.waiting, null, "the waiting anchor's environment is not the command's");
  assert.equal(err.trim(), 'to stderr');
});

// proves C1
test("a warm anchor honours 'inherit' and 'ignore' as child_process does", { skip }, async (ctx) => {
  const t = track(ctx);
  const { host, pids, lines } = await startHost(t, 'stdio');
  assert.ok(anchorsOf(pids.host).has(pids.warm), 'observe.exe lists the warm anchor before the spawn');
  const exited = new Promise((resolve) => host.on('exit', resolve));
  host.stdin.write('go\n');
  assert.equal(await within(exited, 60000, 'the host to finish', [host.pid]), 0, lines.join('\n'));
  const all = lines;
  assert.ok(all.includes(`ANCHOR 1 ${pids.warm}`), `the first command's anchor is the warm one: ${all.join(' | ')}`);
  // 'inherit': the command wrote to the host's own stdout (this test's pipe).
  assert.ok(all.includes('INHERITED-OUT'), `the command's stdout was the host's: ${all.join(' | ')}`);
  // 'ignore': NUL, read empty and written to nowhere.
  assert.ok(!all.includes('IGNORED-OUT'), `an ignored stdout reached the host: ${all.join(' | ')}`);
  assert.ok(all.includes(`STDERR 1 ${JSON.stringify('STDIN-EOF ""\n')}`), all.join(' | '));
  assert.ok(all.includes(`STDERR 2 ${JSON.stringify('STDIN-EOF ""\n')}`), all.join(' | '));
  // The second command took a warm anchor too (started after the first launched).
  const second = all.find((l) => l.startsWith('ANCHOR 2 '));
  assert.ok(second && Number(second.split(' ')[2]) !== pids.warm, all.join(' | '));
});

// proves C2, C3
test("terminate() ends a warm anchor's tree whole, detached grandchildren included", { skip }, async (ctx) => {
  const t = track(ctx);
  const first = t.proc(cordon.spawn(process.execPath, ['-e', ''], { stdio: 'ignore' }));
  await within(first.result, 20000, 'the first tree');
  const warm = await waitForWarm(process.pid, [first.anchorPid]);
  const { proc, pids } = await startTree(t, ['--detached', '2']);
  assert.equal(proc.anchorPid, warm.pid, 'the tree runs under the warm anchor listed before the spawn');
  assert.equal(proc.tier, 'job-object');
  const all = [pids.root, pids.gc0, pids.gc1];
  assert.ok(all.every(alive), 'the whole tree runs');
  await within(proc.terminate({ grace: 500 }), 15000, 'terminate()', all);
  await waitGone(all, 2000);
  const result = await within(proc.result, 10000, 'result', all);
  assert.equal(result.coverage, 'complete');
});

// proves C8
test("host killed hard: a warm anchor's tree dies with it", { skip }, async (ctx) => {
  const t = track(ctx);
  const token = `warm-host-${randomBytes(6).toString('hex')}`;
  const { host, pids } = await startHost(t, 'tree', { token });
  host.stdin.write('go\n');
  const more = {};
  await readUntilReady(host.stdout, 30000, (line) => {
    const m = /^PID (\S+) (\d+)$/.exec(line);
    if (m) {
      more[m[1]] = Number(m[2]);
      t.add(Number(m[2]));
    }
  });
  assert.equal(more.anchor, pids.warm, 'the tree runs under the warm anchor');
  const tree = [more['tree.root'], more['tree.gc0']];
  assert.ok(tree.every(alive), 'the tree runs under the host');
  ctx.diagnostic(`host ended by ${await hardKill(host.pid, token)}`);
  await waitGone([host.pid], 5000);
  await waitGone([...tree, more.anchor], promised(1000), 'the tree to be gone within 1 s of the host (C8)');
});

// proves C8
test('a warm anchor whose host is killed exits, running nothing', { skip }, async (ctx) => {
  const t = track(ctx);
  const token = `warm-idle-${randomBytes(6).toString('hex')}`;
  const { host, pids } = await startHost(t, 'idle', { token });
  assert.ok(alive(pids.warm), 'the warm anchor waits');
  assert.ok(anchorsOf(pids.host).has(pids.warm), 'observe.exe lists it as the host’s child');
  ctx.diagnostic(`host ended by ${await hardKill(host.pid, token)}`);
  await waitGone([host.pid], 5000);
  await waitGone([pids.warm], promised(1000), 'the warm anchor to be gone within 1 s of its host');
  const children = ranUnder(pids.warm);
  assert.deepEqual(children.map(([pid, p]) => `${pid} ${p.name}`), [], 'nothing ran under it');
});

// proves C8
test('an idle warm anchor is retired after CORDON_WARM ms, running nothing', { skip }, async (ctx) => {
  const t = track(ctx);
  const { host, pids } = await startHost(t, 'idle', { env: { CORDON_WARM: '1500' } });
  assert.ok(alive(pids.warm), 'the warm anchor waits');
  // Retired by its host (its channel closed) while the host lives on.
  await waitGone([pids.warm], promised(1500 + 5000), 'the idle warm anchor to be retired');
  assert.ok(alive(host.pid), 'the host still runs');
  assert.ok(!anchorsOf(host.pid).has(pids.warm), 'observe.exe no longer lists it');
  host.kill();
  await waitGone([host.pid], 5000);
});

// proves C1: a warm anchor is never used by a host that changed since it started
test('a host that changes its priority class: its warm anchor exits within 1 s, running nothing', { skip }, async (ctx) => {
  const t = track(ctx);
  const { host, pids, lines } = await startHost(t, 'renice');
  assert.ok(alive(pids.warm), 'the warm anchor waits');
  host.stdin.write('go\n');
  await waitFor(() => lines.includes('RENICED'), { timeout: 20000, what: 'the host to lower its priority' });
  // No spawn comes: the anchor sees it by itself (its host's token and
  // priority class, checked every 250 ms), as a cold anchor started now would
  // get the host's new ones.
  await waitGone([pids.warm], promised(1000), 'the warm anchor to exit once its host changed');
  assert.ok(alive(host.pid), 'the host still runs');
  const children = ranUnder(pids.warm);
  assert.deepEqual(children.map(([pid, p]) => `${pid} ${p.name}`), [], 'nothing ran under it');
  host.kill();
  await waitGone([host.pid], 5000);
});

// proves C1
test('CORDON_WARM=0: no anchor is started ahead of need', { skip }, async (ctx) => {
  const t = track(ctx);
  const { host, pids, lines } = await startHost(t, 'off', { env: { CORDON_WARM: '0' } });
  // 1.5 s after the first tree started (it runs 3 s): its anchor is the host's only one.
  const listed = [...anchorsOf(pids.host).keys()];
  assert.deepEqual(listed, [pids.anchor], 'only the running tree’s anchor');
  const exited = new Promise((resolve) => host.on('exit', resolve));
  host.stdin.write('go\n');
  assert.equal(await within(exited, 30000, 'the host to finish', [host.pid]), 0);
  assert.ok(pids.anchor2 !== undefined, lines.join(' | '));
  assert.ok(!listed.includes(pids.anchor2), 'the second spawn started its own anchor');
});
