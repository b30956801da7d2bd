// The suite's own leak check (helpers/procs.ts, killTagged: what every test's
// cleanup, the global teardown and the hopper tests' "nothing tagged is
// alive" rest on) catches what a single /proc walk misses: a tagged pid
// hopper that ignores the polite signals and forks faster than a walk,
// started on purpose with plain child_process (detached, never through
// cordon), is found and killed 20 times in 20, in its plain and its setsid
// form. Observed from outside: the hopper's heartbeat (one byte per
// generation) proves it alive before the check, and a second check finds
// nothing after it.
import { spawn as spawnChild } from 'node:child_process';
import { describe, expect, onTestFinished } from 'vitest';
import { fixtureProgram } from './helpers/compiled.js';
import { beatsAfter, hopperDir, hopperFile, silentFor, size } from './helpers/hopper.js';
import { describeProcs, killTagged, useTag } from './helpers/procs.js';
import { missing } from './helpers/requirements.js';
import { itWhere } from './helpers/tier.js';
import { watchdog } from './helpers/time.js';

const noCc = missing('cc') ?? '';
const ROUNDS = 20;

describe('the leak check a pid hopper cannot dodge', () => {
  itWhere(noCc === '', `killTagged finds and kills a SIGTERM/SIGHUP/SIGINT-ignoring pid hopper left alive on purpose, ${ROUNDS} times in ${ROUNDS} (half of them setsid in each generation)`, noCc, async () => {
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
