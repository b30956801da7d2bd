// C6: a result never claims more than was observed. On Linux /proc answers
// for a thread's id when it is asked by number (/proc/<tid>/stat, environ),
// though its listing shows only processes; the process-group tier's sweep
// probes the newest pids one by one (a pid hopper lives shorter than a walk),
// and took each thread of a marked member that had left the group for a
// member of its own: a node daemon was reported as five to seven leftovers.
// Tier-specific (the sweep is the process-group tier's), so it asks for it.
import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { spawn } from '../lib/index.js';
import { capture } from './helpers/fixtures.js';
import { describeProcs, useTag, waitFor, within } from './helpers/procs.js';
import { onlyWhere } from './helpers/requirements.js';
import { watchdog } from './helpers/time.js';

const linux = onlyWhere(process.platform === 'linux', 'thread ids share the pid space only on Linux');

describe.skipIf(linux.skip)(`the process-group tier's sweep takes processes for members, never threads${linux.note}`, () => {
  // proves C5, C6
  it('a multi-threaded member that left the group is one leftover, under its own pid', async () => {
    const t = useTag();
    // The root waits on its stdin (`read` forks nothing, so the daemon's threads
    // stay among the newest pids the sweep probes) until the test has seen them.
    const script = 'setsid node -e "console.log(process.pid); setInterval(() => {}, 1e9)" & read go';
    const proc = spawn('sh', ['-c', script], { tier: 'process-group', env: t.env, waitDelay: 300 });
    const out = capture(proc.stdout);
    await waitFor(() => /^\d+\n/.test(out.text), { timeout: watchdog(20_000), what: 'the daemon to print its pid', watch: t.tag });
    const daemon = Number(out.text.split('\n')[0]);
    // From outside: it is one process with several threads, each with an id of its own.
    const threads = readdirSync(`/proc/${daemon}/task`).map(Number);
    expect(threads.length, `node (${daemon}) runs several threads`).toBeGreaterThan(1);
    expect(t.procs().map((p) => p.pid)).toContain(daemon);
    proc.stdin.end('go\n');
    const result = await within(proc.result, watchdog(20_000), 'the tree to settle', t.tag);
    const others = threads.filter((tid) => tid !== daemon);
    expect(result.leftovers.map((l) => l.pid), `leftovers, with the daemon's other threads ${others.join(' ')}`).toEqual([daemon]);
    expect(result.leftGroup.map((l) => l.pid), 'leftGroup').toEqual([daemon]);
    expect(t.procs(), `still alive:\n${describeProcs(t.procs())}`).toEqual([]);
  }, watchdog(60_000));
});
