// C12 on Windows: the tree's Job Object carries the limits asked for
// (JOB_OBJECT_LIMIT_JOB_MEMORY, JOB_OBJECT_LIMIT_ACTIVE_PROCESS, hard-capped
// CPU rate control), set by the anchor before the command runs. Windows
// enforces them; Wine 8 (where this suite runs in CI) takes the memory and
// process limits without enforcing either (it keeps only the flags, not the
// values), refuses CPU rate control, and answers a query for a job's limits
// with zeros. So on Windows a member of the job reads the limits back
// (test-bin/job-limits.exe asks the OS about its own job, not cordon); under
// Wine what can be observed is only which Set calls Wine took or refused, as
// the anchor reports them, that a refusal stops a strict launch, and that the
// result and capabilities() say exactly that. Enforcement itself can only be
// observed on Windows, and is not tested here.
import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import { test } from 'node:test';
import { alive, anchorReport, cordon, existsSync, join, pkgDir, startTree, track, waitGone, underWine, within } from './helpers.mjs';

const probeExe = join(pkgDir, 'test-bin', 'job-limits.exe');
const noProbe = !existsSync(probeExe) && 'job-limits.exe is built by .ci/windows.sh (mingw-w64); not present here';

// winnt.h
const JOB_OBJECT_LIMIT_ACTIVE_PROCESS = 0x8;
const JOB_OBJECT_LIMIT_JOB_MEMORY = 0x200;
const JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000;
const CPU_RATE_ENABLE_HARD_CAP = 0x1 | 0x4;
const MEMORY = 64 * 1024 * 1024;

test('capabilities: limits are claimed where the Job Object enforces them, and not under Wine', () => {
  const caps = cordon.capabilities();
  assert.equal(caps.tier, 'job-object');
  assert.equal(caps.guarantees.limits, !underWine);
  const notes = caps.notes.join(' ');
  assert.match(notes, /JOB_OBJECT_LIMIT_JOB_MEMORY/);
  if (underWine) assert.match(notes, /Under Wine, resource limits are not enforced/);
});

test("strict under Wine: a spawn with limits is refused before anything runs (ERR_CORDON_CONTAINMENT)", { skip: !underWine && 'Windows enforces the limits: strict runs them (next test)' }, () => {
  assert.throws(() => cordon.spawn(process.execPath, ['-e', 'process.exit(0)'], { limits: { memory: '64M' } }), (err) => {
    assert.equal(err.code, 'ERR_CORDON_CONTAINMENT');
    assert.equal(err.stage, 'input');
    assert.match(err.message, /Wine does not/);
    return true;
  });
});

test('the limits reach the tree\'s job before it runs (read back by a member on Windows), and the result says which the OS took', { skip: noProbe }, async (ctx) => {
  const t = track(ctx);
  const limits = { memory: '64M', processes: 20, cpu: 0.5 };
  // Under Wine only best-effort runs with limits (strict is refused: above).
  const proc = t.proc(cordon.spawn(probeExe, [], { stdio: ['ignore', 'pipe', 'ignore'], containment: underWine ? 'best-effort' : 'strict', limits }));
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
  assert.equal(result.limits.applied, true);
});

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

test('invalid limits are typed input errors', () => {
  assert.throws(() => cordon.spawn(process.execPath, [], { limits: { processes: 0 } }), { code: 'ERR_INVALID_ARG_VALUE' });
});
