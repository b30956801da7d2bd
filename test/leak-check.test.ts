// The suite's own leak check (helpers/procs.ts, killTagged: what every test's
// cleanup, the global teardown and the hopper tests' "nothing tagged is
// alive" rest on) catches what a single /proc walk misses: a tagged pid
// hopper that ignores the polite signals and forks faster than a walk,
// started on purpose with plain child_process (detached, never through
// cordon), is found and killed 20 times in 20, in its plain and its setsid
// form. Observed from outside: the hopper's heartbeat (one byte per
// generation) proves it alive before the check, and a second check finds
// nothing after it.
//
// And the leak check without the environment (docs/macos-suite.md): on macOS
// ps is not shown the environment of Apple's sh, so a leaked sh above a
// tagged process is taken by lineage (observer.hiddenParents, and
// .ci/leak-check-ps.sh). Here a sh started with an empty environment (env -i)
// stands for it: ps shows it no environment, as macOS shows Apple's none.
import { spawn as spawnChild, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, onTestFinished } from 'vitest';
import { fixtureProgram } from './helpers/compiled.js';
import { capture } from './helpers/fixtures.js';
import { beatsAfter, hopperDir, hopperFile, silentFor, size } from './helpers/hopper.js';
import { observer, psObserver } from './helpers/observer.js';
import { alive, describeProcs, killPids, killTagged, useTag, waitFor, within, TAG_VAR } from './helpers/procs.js';
import { missing } from './helpers/requirements.js';
import { itWhere } from './helpers/tier.js';
import { watchdog } from './helpers/time.js';

const noCc = missing('cc') ?? '';
// Under ps a walk is two ps runs (the list, then each process's environment):
// a hopper's generation is gone by the second, so the check cannot promise to
// catch one there, and this test is the /proc observer's (macOS: docs/macos-suite.md).
const hopperWhy = noCc || (observer.name === 'ps' ? "under the ps observer a walk is two ps runs and a hopper's generation is gone by the second: the undodgeable check is /proc's" : '');
const noPsCc = missing('ps', 'cc') ?? '';
const underPs = observer.name === 'ps' ? noPsCc : noPsCc || 'the hidden-parent rule is the ps observer\'s (/proc is shown every environment of this user\'s): run with CORDON_TEST_OBSERVER=ps';

/**
 * A sh with an empty environment (env -i: ps shows it none, as macOS shows
 * Apple's sh none) that runs the compiled sleep with only `name`=`value` in
 * its environment, and waits. Both pids SIGKILLed when the test ends.
 */
async function hiddenShOverTagged(name: string, value: string): Promise<{ sh: number; leaf: number }> {
  // NAME=value never whole in the sh's own arguments (ps shows them: it would be tagged by them).
  const script = `n=${name}; v=${value}; /usr/bin/env "$n=$v" '${fixtureProgram()}' sleep 300 & echo "PID leaf $!"; echo "PID sh $$"; wait`;
  const child = spawnChild('env', ['-i', '/bin/sh', '-c', script], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
  const out = capture(child.stdout);
  onTestFinished(() => killPids(Object.values(out.pids())));
  child.unref();
  await within(out.until(/PID sh \d+/), watchdog(10_000), 'the sh to start');
  const { sh, leaf } = out.pids();
  // The leaf has exec'd (its command line is the sleep's).
  await waitFor(() => / sleep 300$/.test(psObserver.cmdline(leaf!)), { timeout: watchdog(10_000), what: 'the leaf to exec' });
  expect(psObserver.environ(sh!), 'ps shows the sh no environment').toEqual([]);
  return { sh: sh!, leaf: leaf! };
}
const ROUNDS = 20;

describe('the leak check a pid hopper cannot dodge', () => {
  // proves nothing of the contract: the suite's own leak check
  itWhere(hopperWhy === '', `killTagged finds and kills a SIGTERM/SIGHUP/SIGINT-ignoring pid hopper left alive on purpose, ${ROUNDS} times in ${ROUNDS} (half of them setsid in each generation)`, hopperWhy, async () => {
    const dir = hopperDir('cordon-leak-check-');
    const prog = fixtureProgram();
    const caught: number[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const t = useTag();
      const file = hopperFile(dir, `hop${round}`);
      const args = ['hop', file, '--ignore-polite', '--every', '1', '--lifetime', '60', ...(round % 2 === 0 ? ['--setsid'] : [])];
      const child = spawnChild(prog, args, { env: t.env, detached: true, stdio: 'ignore' });
      onTestFinished(() => void killTagged(t.tag));
      child.unref();
      // Alive and hopping: 50 generations (its first pid long gone).
      const before = await beatsAfter(file, 0, 50, `round ${round}`, t);
      const found = killTagged(t.tag);
      expect(found.length, `round ${round}: the check found the live hopper (heartbeat at ${before})`).toBeGreaterThan(0);
      // Then nothing is left: a second check finds nothing, and the
      // heartbeat no longer grows (400 ms: a generation is a fork, a
      // fraction of a millisecond idle, and every one beats; a corollary).
      expect(describeProcs(killTagged(t.tag)), `round ${round}: alive after the check`).toBe('(none)');
      expect(await silentFor(file, 400), `round ${round}: the heartbeat still grows after the check (at ${size(file)})`).toBe(true);
      caught.push(found.length);
    }
    expect(caught.length).toBe(ROUNDS);
    // 20 rounds of a few hundred ms each on an idle machine; a loaded one is slower.
  }, watchdog(90_000));
});

describe('the leak check without the environment: a parent ps is not shown the environment of', () => {
  // proves nothing of the contract: the suite's own observer
  itWhere(noPsCc === '', 'observer.hiddenParents (ps) names the sh above a tagged process, and neither the tagged one nor this worker', noPsCc, async () => {
    const t = useTag();
    const { sh, leaf } = await hiddenShOverTagged(TAG_VAR, t.tag);
    const tagged = psObserver.tagged({ value: t.tag });
    expect(tagged.map((p) => p.pid), 'ps sees the tagged leaf only').toEqual([leaf]);
    expect(psObserver.hiddenParents(tagged).map((p) => p.pid), 'the hidden parent: the sh, not this worker').toEqual([sh]);
    killPids([leaf, sh]);
    await waitFor(() => !alive(sh) && !alive(leaf), { timeout: watchdog(5_000), what: 'both to be gone' });
  });

  // proves nothing of the contract: the suite's own leak check
  itWhere(underPs === '', 'killTagged under the ps observer kills the sh above a tagged process too', underPs, async () => {
    const t = useTag();
    const { sh, leaf } = await hiddenShOverTagged(TAG_VAR, t.tag);
    const killed = killTagged(t.tag).map((p) => p.pid).sort((a, b) => a - b);
    expect(killed, 'the leaf and the sh').toEqual([leaf, sh].sort((a, b) => a - b));
    await waitFor(() => !alive(sh) && !alive(leaf), { timeout: watchdog(5_000), what: 'both to be gone' });
  });

  // proves nothing of the contract: CI's own leak check
  itWhere(noPsCc === '', '.ci/leak-check-ps.sh kills the tagged leaf and the sh above it, exits 1, and finds nothing the second time', noPsCc, async () => {
    // A variable of this test's alone: the script kills every process carrying it.
    const name = `CORDON_LEAK_CHECK_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
    const { sh, leaf } = await hiddenShOverTagged(name, 'x');
    const script = fileURLToPath(new URL('../.ci/leak-check-ps.sh', import.meta.url));
    const first = spawnSync('bash', [script, name], { encoding: 'utf8', timeout: watchdog(30_000) });
    expect(first.status, first.stdout + first.stderr).toBe(1);
    expect(first.stdout).toContain(`pid ${leaf} `);
    expect(first.stdout).toMatch(new RegExp(`pid ${sh} ppid \\d+ \\(hidden-parent\\)`));
    expect(first.stdout, 'two found').toMatch(/^2 process\(es\)/m);
    await waitFor(() => !alive(sh) && !alive(leaf), { timeout: watchdog(5_000), what: 'both to be gone' });
    const second = spawnSync('bash', [script, name], { encoding: 'utf8', timeout: watchdog(30_000) });
    expect(second.status, second.stdout + second.stderr).toBe(0);
  });
});
