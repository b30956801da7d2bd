// C12 on Windows: the Job Object tier sets no resource limits (not
// implemented: Wine 8 accepts JOB_OBJECT_LIMIT_JOB_MEMORY and
// JOB_OBJECT_LIMIT_ACTIVE_PROCESS without enforcing them and refuses CPU rate
// control, so they cannot be tested here). capabilities() says so, 'strict'
// refuses a spawn with limits before anything runs, 'best-effort' runs
// without them and the result says so.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cordon, track, within } from './helpers.mjs';

test('capabilities: the job-object tier enforces no limits, and says so', () => {
  const caps = cordon.capabilities();
  assert.equal(caps.guarantees.limits, false);
  assert.match(caps.notes.join(' '), /resource limits are not enforced/);
});

test("strict: a spawn with limits is refused before anything runs (ERR_CORDON_CONTAINMENT)", () => {
  assert.throws(() => cordon.spawn(process.execPath, ['-e', 'process.exit(0)'], { limits: { memory: '64M' } }), (err) => {
    assert.equal(err.code, 'ERR_CORDON_CONTAINMENT');
    assert.equal(err.stage, 'input');
    return true;
  });
});

test('invalid limits are typed input errors', () => {
  assert.throws(() => cordon.spawn(process.execPath, [], { limits: { processes: 0 } }), { code: 'ERR_INVALID_ARG_VALUE' });
});

test("best-effort: runs without the limits; result.limits.applied is false, usage not measured", async (ctx) => {
  const t = track(ctx);
  const proc = t.proc(cordon.spawn(process.execPath, ['-e', 'process.exit(0)'], { containment: 'best-effort', limits: { processes: 20, cpu: 0.5 } }));
  const result = await within(proc.result, 20000, 'result');
  assert.equal(result.exitCode, 0);
  assert.deepEqual(result.limits, { requested: { processes: 20, cpu: 0.5 }, applied: false, hit: [] });
  assert.deepEqual(result.usage, { cpuMs: null, peakMemory: null, peakProcesses: null });
});
