// CONTRACT C3: termination is complete even while the tree forks as fast as
// it can. A bounded fork storm (test/fixtures/fork-storm.sh: a doubling fork
// bomb of depth 6 and a loop starting up to 1000 `sh -c 'sleep 300 & sleep
// 300'` children, then forking on one child at a time) is stopped while it
// forks: no process carrying the tag survives.
import { describe, expect, it } from 'vitest';
import { spawn, type ContainedProcess } from '../lib/index.js';
import { capture, fixture } from './helpers/fixtures.js';
import { describeProcs, useTag, waitFor, within, type Tagged } from './helpers/procs.js';
import { watchdog } from './helpers/time.js';

const DEPTH = '6';
const LOOP_MAX = '1000';
/** Stop it once the storm is this big (counted by tag, from outside). */
const MID_STORM = 50;
/**
 * Under emulation (.ci/arm64.sh) the storm's shells run natively and the
 * test's observer (node reading /proc) several times slower: the whole loop
 * was done before one count came back. There the loop pauses 10 ms between
 * two children, so the storm is still growing when it is stopped, which is
 * what these tests are about; the fork bomb is not slowed.
 */
const PAUSE = process.env.CORDON_TEST_EMULATOR ? ['0.01'] : [];

async function startStorm(t: Tagged, signal?: AbortSignal): Promise<{ proc: ContainedProcess; out: ReturnType<typeof capture> }> {
  const proc = spawn(fixture('fork-storm.sh'), [DEPTH, LOOP_MAX, ...PAUSE], { env: t.env, signal });
  const out = capture(proc.stdout);
  proc.stderr?.resume();
  await within(proc.started, watchdog(10_000), 'the storm to start', t.tag);
  await waitFor(() => t.procs().length > MID_STORM, { timeout: watchdog(10_000), what: `the storm to grow past ${MID_STORM} processes` });
  return { proc, out };
}

/**
 * The storm is still forking: its loop has not finished starting its
 * children, or (past them: on a loaded machine the storm can outrun the
 * observer's count) it forks on, as FORKED lines printed from now on show.
 */
async function expectForking(t: Tagged, out: ReturnType<typeof capture>): Promise<void> {
  if (!/LOOP DONE/.test(out.text)) return;
  const from = out.text.length;
  await waitFor(() => /FORKED \d+/.test(out.text.slice(from)), { timeout: watchdog(5000), what: 'the storm to fork on past its loop', watch: t.tag });
}

function expectNoSurvivors(t: Tagged, when: string): void {
  const survivors = t.procs();
  expect(survivors.length, `survivors ${when}:\n${describeProcs(survivors.slice(0, 20))}`).toBe(0);
}

describe('C3: a fork storm', () => {
  // proves C3, C10
  it('an AbortSignal mid-storm leaves no survivor', async () => {
    const t = useTag();
    const ac = new AbortController();
    const { proc, out } = await startStorm(t, ac.signal);
    // Mid-storm: it is still forking.
    await expectForking(t, out);

    ac.abort();
    const result = await within(proc.result, 20_000, 'the storm to be ended after abort()', t.tag);
    expectNoSurvivors(t, 'after the result settled');
    expect(result.reason).toBe('canceled');
  });

  // proves C3
  it('kill() mid-storm leaves no survivor', async () => {
    const t = useTag();
    const { proc, out } = await startStorm(t);
    await expectForking(t, out);

    await within(proc.kill(), 20_000, 'kill() of the storm to resolve', t.tag);
    expectNoSurvivors(t, 'after kill() resolved');
    const result = await within(proc.result, 5000, 'the result to settle', t.tag);
    expect(result.signal).toBe('SIGKILL');
  });
});
