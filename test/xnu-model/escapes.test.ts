// CONTRACT C2, C5, C11 on XNU's rules: the darwin build's process-group tier,
// on the model of XNU's process table (.ci/darwin-model.sh), against the
// escapees a Mac makes hard: Apple's own programs (/bin/sleep, /bin/sh:
// cs_restricted, so their environment, and the tree's marker in it, is
// withheld from the anchor) that leave the session, another user's members,
// and a compiled hopper that ignores SIGTERM. Each is observed from outside
// (the pids the tree prints, the hopper's heartbeat, the test's tag), and
// each must be killed and named in the result's leftovers. What XNU's rules
// do not let the tier promise (a restricted escapee forked by a process that
// exited unseen) is asserted as such: the result never says it was clean.
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { spawn } from '../../lib/index.js';
import { fixtureProgram } from '../helpers/compiled.js';
import { capture } from '../helpers/fixtures.js';
import { hopperDir, hopperFile, size, taggedByWalks } from '../helpers/hopper.js';
import { alive, sleep, useTag, waitFor, waitGone, within } from '../helpers/procs.js';
import { missing, runuserPath } from '../helpers/requirements.js';
import { caps, environmentWithheld, escapePromised, itWhere } from '../helpers/tier.js';
import { watchdog } from '../helpers/time.js';
import { modelRelease } from './client.js';

const from154 = modelRelease === '15.4';
const asRoot = process.getuid?.() === 0;

/** Runs `script` in a tree that keeps nothing; its result, and the pid it printed as `PID s`. */
async function leftover(t: ReturnType<typeof useTag>, script: string, opts: { uid?: number; gid?: number } = {}) {
  const proc = spawn('sh', ['-c', script], { env: t.env, cwd: tmpdir(), stdio: ['ignore', 'pipe', 'ignore'], ...opts });
  const out = capture(proc.stdout);
  const result = await within(proc.result, watchdog(15_000), 'the result', t.tag);
  const s = out.pids().s!;
  expect(s, out.text).toBeGreaterThan(0);
  return { result, s };
}

describe(`the darwin build on XNU ${modelRelease}'s rules: escapees of Apple's programs, other users, a hopper`, () => {
  // proves nothing of the contract: the model's own rule, the ground the other tests stand on
  it('the model restricts what a Mac restricts: /bin/sleep withheld, the compiled fixture not', () => {
    expect(environmentWithheld('/bin/sleep')).toBe(true);
    expect(environmentWithheld('sh')).toBe(true);
    expect(environmentWithheld(process.execPath), 'node (a third-party program on a Mac)').toBe(false);
    expect(caps.guarantees.catchesEscapees).toBe('marked');
    expect(caps.notes.join('\n')).toMatch(/macOS withholds its environment/);
  });

  // Usually the shell has exited by the time setsid execs sleep (its
  // p_puniqueid is launchd's then): only p_orig_ppidversion names the root.
  // Five rounds: without it (CORDON_XNU_MUTATE=orig-ppidversion) most escape.
  // proves C3, C5
  itWhere(from154, "sh -c 'setsid /bin/sleep 1000 &': its forker was the root, which the anchor knew: killed and named (5 rounds)", 'lineage across exec needs p_orig_ppidversion (macOS 15.4)', async () => {
    for (let round = 1; round <= 5; round++) {
      const t = useTag();
      const { result, s } = await leftover(t, 'setsid /bin/sleep 1000 >/dev/null 2>&1 & echo "PID s $!"');
      expect(result.leftovers.map((l) => l.pid), `round ${round}: ${JSON.stringify(result.leftovers)}`).toContain(s);
      await waitFor(() => !alive(s), { timeout: watchdog(5000), what: `round ${round}: the escapee ${s} to be gone`, watch: t.tag });
      await waitGone(t, watchdog(5000));
    }
  });

  // proves C3, C5
  it("sh -c '(/bin/sleep 1000 &)': a double fork that stays in the tree's group: killed and named", async () => {
    const t = useTag();
    const { result, s } = await leftover(t, '(/bin/sleep 1000 >/dev/null 2>&1 & echo "PID s $!")');
    expect(result.leftovers.map((l) => l.pid), JSON.stringify(result.leftovers)).toContain(s);
    await waitFor(() => !alive(s), { timeout: watchdog(5000), what: `the escapee ${s} to be gone`, watch: t.tag });
    await waitGone(t, watchdog(5000));
  });

  // proves C11
  it("sh -c '(setsid /bin/sleep 1000 &)': forked by a subshell that exited unseen: not promised, and never reported clean", async () => {
    const t = useTag();
    const { result, s } = await leftover(t, '(setsid /bin/sleep 1000 >/dev/null 2>&1 & echo "PID s $!"); sleep 0.3');
    expect(escapePromised({ program: '/bin/sleep', forkedBy: 'unseen' }), 'the tier does not promise it (capabilities say so)').toBe(false);
    t.notPromised(s);
    expect(result.coverage).toBe('partial');
    if (alive(s)) expect(result.leftovers.map((l) => l.pid), 'an escapee not seen is not listed as seen').not.toContain(s);
  });

  const noCc = missing('cc') ?? '';
  // proves C3
  itWhere(noCc === '', 'a compiled setsid hopper that ignores SIGTERM: terminate() stops it (the forced stop, freeze first), nothing tagged left', noCc, async () => {
    const t = useTag();
    const file = hopperFile(hopperDir('cordon-xnu-hop-'), 'hop');
    // (16 ms a generation: the model's reads are slower than XNU's, test/process-group-escapes.test.ts.)
    const proc = spawn(fixtureProgram(), ['hop', file, '--setsid', '--ignore-term', '--pause-us', '16000'], { env: t.env, leftovers: 'keep', stdio: ['ignore', 'ignore', 'ignore'] });
    proc.result.catch(() => undefined);
    await waitFor(() => size(file) >= 3, { timeout: watchdog(30_000), what: 'the hopper to hop 30 times', watch: t.tag });
    await within(proc.terminate({ grace: 500 }), watchdog(15_000), 'terminate() to resolve', t.tag);
    const at = size(file);
    await sleep(500);
    expect(size(file), 'the hopper still hops after terminate() resolved').toBe(at);
    expect(taggedByWalks(t), 'tagged processes after terminate() resolved').toBe('(none)');
  });

  const runuserWhy = !asRoot ? 'needs a root test runner' : (missing('nobody', 'runuser') ?? '');
  // proves C3, C5
  itWhere(runuserWhy === '', "runuser -u nobody -- setsid /bin/sleep: another user's restricted escapee, forked by runuser (in the group): killed and named", runuserWhy, async () => {
    const t = useTag();
    const { result, s } = await leftover(t, `${runuserPath()} -u nobody -- sh -c 'echo "PID s $$"; exec setsid /bin/sleep 1000 >/dev/null 2>&1' & sleep 0.5`);
    expect(result.leftovers.map((l) => l.pid), JSON.stringify(result.leftovers)).toContain(s);
    await waitFor(() => !alive(s), { timeout: watchdog(5000), what: `nobody's sleeper ${s} to be gone`, watch: t.tag });
    await waitGone(t, watchdog(5000));
  });

  const uidWhy = !asRoot ? 'needs a root test runner' : (missing('nobody') ?? '');
  // proves C3, C5
  itWhere(uidWhy === '' && from154, "the uid option: setsid /bin/sleep as nobody, forked by the root: killed and named", uidWhy || 'lineage across exec needs p_orig_ppidversion (macOS 15.4)', async () => {
    const t = useTag();
    const { result, s } = await leftover(t, 'setsid /bin/sleep 1000 >/dev/null 2>&1 & echo "PID s $!"; sleep 0.5', { uid: 65534, gid: 65534 });
    expect(result.leftovers.map((l) => l.pid), JSON.stringify(result.leftovers)).toContain(s);
    await waitFor(() => !alive(s), { timeout: watchdog(5000), what: `nobody's sleeper ${s} to be gone`, watch: t.tag });
    await waitGone(t, watchdog(5000));
  });
});
