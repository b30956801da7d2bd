// Lease look-ups are bounded per anchor, and an adoption is whole when it
// resolves. An anchor that is stopped with its listen backlog full (each
// `cordon ps` against a stopped anchor leaves one more connection queued, so
// the backlog fills without malice too) makes `cordon ps`,
// registry.adoptable() and registry.adopt() end within the request's bound,
// listing it as not answering. registry.adopt() resolves once the replay has
// said READY: the process's pid and state are known at once. Hosts and the
// CLI are real node processes; the anchor is the test's own fixture's,
// resumed by the test's cleanup whatever happens.
import type { Socket } from 'node:net';
import { connect } from 'node:net';
import { join } from 'node:path';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { Registry } from '../lib/index.js';
import { ensureDist, startCli, startHost } from './helpers/host.js';
import { adopter, hostEnded, killHost, spawnLeased, stopAnchor, useRuntime, useRuntimeHere } from './helpers/lease.js';
import { useTag, waitGone, within } from './helpers/procs.js';
import { watchdog } from './helpers/time.js';

/** Connects to `path` until the kernel refuses (EAGAIN: the listener's backlog is full) or `max` are queued; the sockets are closed by the test's cleanup. */
async function fillBacklog(path: string, max = 64): Promise<{ queued: number; refused: string | undefined }> {
  const held: Socket[] = [];
  onTestFinished(() => {
    for (const s of held) s.destroy();
  });
  for (let i = 0; i < max; i++) {
    const outcome = await new Promise<string | undefined>((resolve) => {
      const s = connect(path);
      s.once('connect', () => {
        held.push(s);
        resolve(undefined);
      });
      s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    });
    if (outcome !== undefined) return { queued: held.length, refused: outcome };
  }
  return { queued: held.length, refused: undefined };
}

describe('lease look-ups', () => {
  beforeAll(async () => {
    await ensureDist();
  });

  // proves nothing of the contract: the threat model's bounded look-ups (no clause)
  it('an anchor stopped with its listen backlog full: cordon ps, adoptable() and adopt() each end within seconds, listing it as not answering', async () => {
    const t = useTag();
    const { env, leaseDir } = useRuntime(t);
    const l = await spawnLeased(env, 60_000, 500);
    await killHost(l.host, t);
    const anchor = stopAnchor(l);
    const filled = await fillBacklog(join(leaseDir, `${l.id}.sock`));
    expect(filled.refused, `the backlog took ${filled.queued} connections`).toBe('EAGAIN');

    // Each look-up is bounded by the request's 5 s; Node's start-up, seconds on a loaded machine, comes on top.
    const ps = startCli(['ps', '--json'], env);
    onTestFinished(() => {
      if (ps.child.exitCode === null && ps.child.signalCode === null) ps.child.kill('SIGKILL');
    });
    expect((await within(ps.exited, watchdog(20_000), 'cordon ps against the stopped anchor', t.tag)).code, ps.err.text).toBe(0);
    expect(JSON.parse(ps.out.text)).toEqual([expect.objectContaining({ id: l.id, answered: false, rootRunning: null, leaseLeftMs: null })]);

    const list = startHost(['list'], env, 'lease-host.mjs');
    hostEnded(list);
    expect((await within(list.exited, watchdog(20_000), 'registry.adoptable() against the stopped anchor', t.tag)).code, list.err.text).toBe(0);
    expect(JSON.parse(/^LIST (.*)$/m.exec(list.out.text)![1]!)).toEqual([expect.objectContaining({ id: l.id, answered: false })]);

    const a = adopter(env, l.id, l.token, 'terminate');
    expect((await within(a.exited, watchdog(20_000), 'registry.adopt() of the stopped anchor', t.tag)).code, a.out.text + a.err.text).toBe(3);
    expect(a.out.text).toMatch(/^DENIED ERR_CORDON_TIMEOUT$/m);

    // Resumed, it answers again and is adopted (and ended).
    process.kill(anchor, 'SIGCONT');
    const b = adopter(env, l.id, l.token, 'terminate');
    expect((await within(b.exited, watchdog(20_000), 'the adopter of the resumed anchor', t.tag)).code, b.out.text + b.err.text).toBe(0);
    await waitGone(t, 2000);
  });

  // proves C8
  it('registry.adopt() resolves with the root pid and state known (the replay READY read first)', async () => {
    const t = useTag();
    const { env } = useRuntime(t);
    const l = await spawnLeased(env, 60_000, 500);
    await killHost(l.host, t);
    useRuntimeHere(env);
    const proc = await within(new Registry().adopt(l.id, { token: l.token }), watchdog(15_000), 'registry.adopt()', t.tag);
    onTestFinished(() => void proc.kill().catch(() => {}));
    // Nothing awaited in between: what adopt() resolved with is complete.
    const seen = { pid: proc.pid, state: proc.state };
    expect(seen).toEqual({ pid: l.pids['tree.root'], state: 'running' });
    await within(proc.terminate({ grace: 500 }), watchdog(10_000), 'terminate() of the adopted tree', t.tag);
    await waitGone(t, 2000);
  });
});
