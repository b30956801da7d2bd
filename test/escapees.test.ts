// CONTRACT C2, C3: terminate() reaches every descendant, including ones that
// left the process group or session (setsid, double fork, nohup), and
// resolves only once the whole tree is gone.
import { describe, expect, it } from 'vitest';
import { spawn } from '../lib/index.js';
import { capture, fixture } from './helpers/fixtures.js';
import { alive, useTag, waitGone, within } from './helpers/procs.js';
import { orphanedEscapee } from './helpers/tier.js';
import { collect, expectNamedGone } from './helpers/trees.js';

describe('escapees', () => {
  it('terminate() reaches background, setsid, double-forked and nohup children', async () => {
    const t = useTag();
    const { proc, pids } = await collect(spawn(fixture('tree.sh'), [], { env: t.env }), t.tag);
    expect(Object.keys(pids).sort()).toEqual(['bg', 'double', 'nohup', 'setsid']);
    for (const pid of Object.values(pids)) expect(alive(pid)).toBe(true);

    await within(proc.terminate({ grace: 2000 }), 5000, 'terminate() to resolve', t.tag);
    // Resolved at quiescence of the tree, not of the root: nothing is left now.
    expectNamedGone(pids);
    expect(t.procs()).toEqual([]);
    const result = await within(proc.result, 5000, 'result to settle', t.tag);
    expect(result.signal).toBe('SIGTERM');
  });

  it('a setsid escapee left after the root exits is killed under the default policy', async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', 'setsid sleep 300 >/dev/null 2>&1 & echo "PID s $!"'], { env: t.env });
    const out = capture(proc.stdout);
    const result = await within(proc.result, 10_000, 'result to settle', t.tag);
    expect(result.exitCode).toBe(0);
    expect(result.leftoversKept).toBe(false);
    // Orphaned at once: caught by a tier that catches orphaned escapees (the
    // process-group tier: by the marker in its environment).
    if (orphanedEscapee(t, out.pids().s)) expect(result.leftovers.map((l) => l.pid)).toContain(out.pids().s);
    await waitGone(t, 2000);
  });
});
