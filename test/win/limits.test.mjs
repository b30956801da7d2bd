// C12 on Windows: with 'best-effort', the tree's Job Object carries the
// limits asked for (JOB_OBJECT_LIMIT_JOB_MEMORY, JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
// hard-capped CPU rate control), set by the anchor before the command runs.
// capabilities() does not claim them (guarantees.limits false, 'strict'
// refuses): Windows documents their enforcement, but this suite runs under
// Wine 8 in CI, which takes the memory and process limits without enforcing
// either, refuses CPU rate control, and answers a query for a job's limits
// with zeros. What each test observes from outside cordon:
//  - test-bin/job-limits.exe, a member of the job, asks the OS for its own
//    job's limits (compared on Windows; Wine's answer is zeros) and tries to
//    go over them (commits more memory, starts more processes than allowed):
//    under Wine that it can (what limits: false rests on), on Windows that it
//    cannot;
//  - under Wine, which Set calls Wine took or refused, as the anchor reports
//    them, and that a refusal stops an anchor launched without --best-effort.
import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import { test } from 'node:test';
import { alive, anchorReport, cordon, existsSync, join, nativeFixture, parsePids, pkgDir, readUntilReady, startTree, track, waitGone, underWine, within } from './helpers.mjs';

const { exe: probeExe, skip: noProbe } = nativeFixture('job-limits');

// winnt.h
const JOB_OBJECT_LIMIT_ACTIVE_PROCESS = 0x8;
const JOB_OBJECT_LIMIT_JOB_MEMORY = 0x200;
const JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000;
const CPU_RATE_ENABLE_HARD_CAP = 0x1 | 0x4;
const MEMORY = 64 * 1024 * 1024;

// proves C12 (own report), C11 (own report)
test('capabilities: limits are not claimed on Windows (enforcement never observed), and the notes say why', () => {
  const caps = cordon.capabilities();
  assert.equal(caps.tier, 'job-object');
  assert.equal(caps.guarantees.limits, false);
  const notes = caps.notes.join(' ');
  assert.match(notes, /JOB_OBJECT_LIMIT_JOB_MEMORY/);
  assert.match(notes, /never observed/);
  if (underWine) assert.match(notes, /Under Wine, resource limits are not enforced/);
});

// proves C12
test("strict: a spawn with limits is refused before anything runs (ERR_CORDON_CONTAINMENT)", async (ctx) => {
  const t = track(ctx);
  const marker = join(t.tmp(), 'ran');
  assert.throws(
    () => cordon.spawn(process.execPath, ['-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'ran')`], { limits: { memory: '64M' } }),
    (err) => {
      assert.equal(err.code, 'ERR_CORDON_CONTAINMENT');
      assert.equal(err.stage, 'input');
      assert.match(err.message, /not been observed/);
      return true;
    },
  );
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(existsSync(marker), false, 'the command ran although strict refused it');
});

// proves C12
test('the limits reach the tree\'s job before it runs (read back by a member on Windows), and the result says which the OS took', { skip: noProbe }, async (ctx) => {
  const t = track(ctx);
  const limits = { memory: '64M', processes: 20, cpu: 0.5 };
  // Only best-effort runs with limits (strict is refused: above).
  const proc = t.proc(cordon.spawn(probeExe, [], { stdio: ['ignore', 'pipe', 'ignore'], containment: 'best-effort', limits }));
  let out = '';
  proc.stdout.setEncoding('utf8').on('data', (d) => (out += d));
  const result = await within(proc.result, 30000, 'the result');
  assert.equal(result.exitCode, 0, out);
  const job = JSON.parse(out.trim());
  assert.equal(job.inJob, true, out);
  assert.deepEqual(result.limits.requested, { memory: MEMORY, processes: 20, cpu: 0.5 });
  assert.deepEqual(result.limits.hit, []);
  if (underWine) {
    // Wine's query for a job's limits is a stub (zeros, not even the
    // kill-on-close every tree's job has): nothing to read back. What Wine
    // took is what the anchor's Set calls returned (measured under Wine 8:
    // the memory and process limits taken, CPU rate control refused).
    assert.equal(job.extended.flags & JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, 0, `Wine now reports job limits: compare them (${out})`);
    assert.deepEqual(result.limits.accepted, ['memory', 'processes']);
    assert.equal(result.limits.applied, false);
    return;
  }
  assert.equal(job.extended.ok, true, `QueryInformationJobObject(NULL, extended limits): error ${job.extended.error}`);
  const flags = job.extended.flags;
  // The tree's own limits stay as they were.
  assert.ok(flags & JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, `flags ${flags}`);
  // What the result says the OS took is what a member of the job reads.
  const memorySet = Boolean(flags & JOB_OBJECT_LIMIT_JOB_MEMORY) && job.extended.jobMemoryLimit === MEMORY;
  const processesSet = Boolean(flags & JOB_OBJECT_LIMIT_ACTIVE_PROCESS) && job.extended.activeProcessLimit === 20;
  const cpuSet = job.cpuRate.ok && (job.cpuRate.flags & CPU_RATE_ENABLE_HARD_CAP) === CPU_RATE_ENABLE_HARD_CAP && job.cpuRate.rate > 0;
  const read = [...(memorySet ? ['memory'] : []), ...(processesSet ? ['processes'] : []), ...(cpuSet ? ['cpu'] : [])];
  assert.deepEqual(result.limits.accepted, read, JSON.stringify(job));
  assert.deepEqual(result.limits.accepted, ['memory', 'processes', 'cpu']);
  // Taken, not claimed enforced (capabilities().guarantees.limits is false).
  assert.equal(result.limits.applied, false);
});

// proves C12
test('enforcement: a member tries to commit 128M and start 4 processes in a tree limited to 64M and 3 processes', { skip: noProbe }, async (ctx) => {
  const t = track(ctx);
  const proc = t.proc(
    cordon.spawn(probeExe, ['--over', String(2 * MEMORY), '4'], {
      stdio: ['ignore', 'pipe', 'ignore'],
      containment: 'best-effort',
      limits: { memory: '64M', processes: 3 },
    }),
  );
  const pids = {};
  const lines = await readUntilReady(proc.stdout, 30000, (line) => Object.assign(pids, parsePids(line, t.add)));
  const rootPid = await within(proc.started, 10000, 'started');
  t.add(rootPid);
  const copies = Object.values(pids);
  const refused = lines.filter((l) => l.startsWith('REFUSED '));
  const alloc = lines.find((l) => l.startsWith('ALLOC '));
  // Every copy the fixture says it started runs now, with the root: all in the job at once.
  assert.ok([rootPid, ...copies].every(alive), `not all alive: ${lines.join(' | ')}`);
  await within(proc.terminate({ grace: 0 }), 15000, 'terminate()', [rootPid, ...copies]);
  await waitGone([rootPid, ...copies], 5000);
  const result = await within(proc.result, 15000, 'the result', [rootPid, ...copies]);
  assert.deepEqual(result.limits.requested, { memory: MEMORY, processes: 3 });
  assert.equal(result.limits.applied, false);
  if (underWine) {
    // Wine took both limits and enforces neither: what capabilities().guarantees.limits
    // false rests on. (If this fails, Wine enforces them now: the claim can be revisited.)
    assert.deepEqual(result.limits.accepted, ['memory', 'processes']);
    assert.equal(alloc, 'ALLOC ok', lines.join(' | '));
    assert.deepEqual(refused, [], lines.join(' | '));
    assert.equal(copies.length, 4, lines.join(' | '));
    assert.deepEqual(result.limits.hit, []);
    assert.equal(result.usage.peakProcesses, 5);
    return;
  }
  // Windows: the commit over the job's memory is refused, and so is every
  // process past the third in the job (at most two copies next to the root;
  // fewer if Windows counts a console host of the tree's in the job too).
  assert.match(alloc, /^ALLOC error \d+$/, lines.join(' | '));
  assert.ok(copies.length <= 2, lines.join(' | '));
  assert.equal(copies.length + refused.length, 4, lines.join(' | '));
  assert.deepEqual(result.limits.hit, ['memory', 'processes']);
  assert.ok(result.usage.peakProcesses <= 3, `peakProcesses ${result.usage.peakProcesses}`);
});

// proves C12
test('anchor: a limit the OS refuses is not applied; without --best-effort nothing runs (NOCONTAIN limits)', { skip: !underWine && 'Windows takes CPU rate control: no refusal to observe here' }, async (ctx) => {
  const t = track(ctx);
  const dir = t.tmp();
  const marker = join(dir, 'ran');
  const command = [process.execPath, 'node', '-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'ran')`];
  // Wine refuses JobObjectCpuRateControlInformation (ERROR_INVALID_PARAMETER: EINVAL, 22).
  // (The anchors run in the shared temp dir: see security.test.mjs.)
  const strict = await anchorReport(t, tmpdir(), ['--memory', String(MEMORY), '--cpu-quota', '50000'], command);
  assert.equal(strict.line, 'NOCONTAIN 22 limits');
  assert.ok(!strict.lines.some((l) => l.startsWith('READY')));
  assert.equal(existsSync(marker), false, 'the command ran although a limit was refused');
  // Best-effort: runs, and LIMITS (before READY) says the CPU quota was not taken.
  const loose = await anchorReport(t, tmpdir(), ['--best-effort', '--memory', String(MEMORY), '--max-processes', '20', '--cpu-quota', '50000'], command);
  assert.match(loose.line, /^READY \d+ job-object 0/);
  assert.deepEqual(loose.lines.filter((l) => l.startsWith('LIMITS ')), [`LIMITS ${MEMORY} 20 0 job`]);
});

// proves C12 (own report): the result's usage
test('usage: the most processes the job held at once; CPU time and peak memory where the OS keeps them', async (ctx) => {
  const t = track(ctx);
  const { proc, pids } = await startTree(t, ['--detached', '2']);
  const all = [pids.root, pids.gc0, pids.gc1];
  // Observed from outside: three members alive at once.
  assert.ok(all.every(alive), 'the root and both grandchildren run');
  await within(proc.terminate({ grace: 0 }), 15000, 'terminate()', all);
  await waitGone(all, 5000);
  const result = await within(proc.result, 15000, 'the result', all);
  assert.ok(result.usage.peakProcesses >= 3, `peakProcesses ${result.usage.peakProcesses}`);
  if (underWine) {
    // Wine 8 keeps no CPU times for a job: not measured, never a 0.
    assert.equal(result.usage.cpuMs, null);
  } else {
    assert.ok(result.usage.cpuMs >= 0);
  }
  assert.ok(result.usage.peakMemory === null || result.usage.peakMemory > 0, `peakMemory ${result.usage.peakMemory}`);
  assert.equal(result.limits, undefined);
});

// proves C12 (own report): typed input errors
test('invalid limits are typed input errors', () => {
  assert.throws(() => cordon.spawn(process.execPath, [], { limits: { processes: 0 } }), { code: 'ERR_INVALID_ARG_VALUE' });
});
