// CONTRACT C9: every process of a tree is reaped (the anchor reaps orphans
// reparented to it), and the host's open descriptors return to baseline after
// many spawns. Observed in /proc: zombie states, parents, /proc/self/fd.
import { once as onceEvent } from 'node:events';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { describe, expect, it, onTestFinished } from 'vitest';
import { spawn } from '../lib/index.js';
import { capture, fixture, repoRoot } from './helpers/fixtures.js';
import { ensureDist } from './helpers/host.js';
import {
  alive,
  isZombie,
  openFdCountBesideWarmPool,
  readStat,
  sleep,
  useTag,
  waitFor,
  waitGone,
  within,
  zombieChildren,
} from './helpers/procs.js';
import { caps, itWhere, tier } from './helpers/tier.js';
import { collect } from './helpers/trees.js';
import { watchdog } from './helpers/time.js';
import { onlyWhere } from './helpers/requirements.js';

// Whether this tier's anchor reaps orphans (the subreaper tier): elsewhere
// orphans go to init, and reaping them is init's job.
const reapsOrphans = caps.guarantees.reapsOrphans;
const NO_REAPING = `the ${tier} tier does not reap orphans (init does); "a tier that does not reap orphans says so" checks capabilities()`;

/** Gone from /proc, or the pid now belongs to another process: either way, reaped. */
function reaped(pid: number, start: string): boolean {
  const st = readStat(pid);
  return st === undefined || st.start !== start;
}

function describeState(pid: number): string {
  const st = readStat(pid);
  return st ? `pid ${pid} state ${st.state} ppid ${st.ppid}` : `pid ${pid} gone`;
}

describe(`reaping (C9), ${tier} tier`, () => {
  // proves C9
  it('no zombies after a tree with double-forked orphans is terminated', async () => {
    const t = useTag();
    const { proc, pids: printed } = await collect(spawn(fixture('tree.sh'), [], { env: t.env }), t.tag);
    const pids: Record<string, number> = { ...printed, root: proc.pid!, anchor: proc.anchorPid! };
    for (const [name, pid] of Object.entries(pids)) expect(alive(pid), `${name} ${pid}`).toBe(true);
    // The double-forked child is an orphan already: reparented to the anchor
    // where the tier reaps orphans.
    if (reapsOrphans) expect(readStat(pids.double!)?.ppid, 'parent of the double-forked orphan').toBe(proc.anchorPid);

    await within(proc.terminate({ grace: 2000 }), 5000, 'terminate() to resolve', t.tag);
    await within(proc.result, 5000, 'result to settle', t.tag);
    // The anchor exits right after its QUIET, which the result does not wait
    // for (it holds nothing of the command's by then: warm.test.ts); the host
    // reaps it when it comes.
    await waitFor(() => !alive(pids.anchor!) && !isZombie(pids.anchor!), { timeout: watchdog(2000), what: `the anchor ${pids.anchor} to exit and be reaped`, watch: [pids.anchor!] });
    for (const [name, pid] of Object.entries(pids)) {
      expect(alive(pid), `${name} ${describeState(pid)}`).toBe(false);
      // Where the tier does not reap orphans, a zombie left to init is init's.
      const initsToReap = !reapsOrphans && readStat(pid)?.ppid === 1;
      if (!initsToReap) expect(isZombie(pid), `${name} ${describeState(pid)}`).toBe(false);
    }
    // The anchor itself was reaped by the host (this process).
    expect(zombieChildren()).toEqual([]);
    expect(t.procs()).toEqual([]);
  });

  // proves C9
  itWhere(reapsOrphans, 'an orphan that exits while the root still runs is reaped by the anchor', NO_REAPING, async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', '(sleep 0.5 & echo "PID o $!"); echo "PID root $$"; exec sleep 300'], {
      env: t.env,
    });
    const out = capture(proc.stdout);
    await out.until(/^PID root \d+$/m, 10_000);
    const { o, root } = out.pids() as { o: number; root: number };
    const start = readStat(o)?.start;
    expect(start, `orphan ${o} alive when printed`).toBeDefined();
    // Its parent (the subshell) is gone: the anchor adopted it.
    await waitFor(() => readStat(o)?.ppid === proc.anchorPid || reaped(o, start!), {
      timeout: 2000,
      what: `orphan ${o} to be reparented to the anchor ${proc.anchorPid}`,
      watch: [o],
    });
    await waitFor(() => reaped(o, start!), { timeout: 3000, what: `orphan ${o} to exit and be reaped`, watch: t.tag });
    expect(alive(root), 'the root still runs').toBe(true);
    await within(proc.terminate({ grace: 2000 }), 5000, 'terminate() to resolve', t.tag);
    // (the anchor's exit, right after its QUIET, is reaped when it comes)
    await waitFor(() => zombieChildren().length === 0, { timeout: watchdog(2000), what: 'no zombie child of the host', watch: t.tag });
  });

  // proves C9, C5
  itWhere(reapsOrphans, 'a kept leftover that exits after the root is reaped by the anchor', NO_REAPING, async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', 'sleep 300 >/dev/null 2>&1 & echo "PID s $!"; sleep 0.5 >/dev/null 2>&1 & echo "PID o $!"'], {
      env: t.env,
      leftovers: 'keep',
    });
    const out = capture(proc.stdout);
    await out.until(/^PID o \d+$/m, 10_000);
    const { s, o } = out.pids() as { s: number; o: number };
    const start = readStat(o)?.start;
    expect(start, `leftover ${o} alive when printed`).toBeDefined();
    const result = await within(proc.result, 10_000, 'result to settle', t.tag);
    expect(result.leftoversKept).toBe(true);
    await waitFor(() => reaped(o, start!), {
      timeout: 3000,
      what: `kept leftover ${o} to exit and be reaped`,
      watch: t.tag,
    });
    expect(alive(s), 'the other kept leftover still runs').toBe(true);
    await within(proc.terminate({ grace: 2000 }), 5000, 'terminate() to resolve', t.tag);
    expect(alive(s)).toBe(false);
    // (the anchor's exit, right after its QUIET, is reaped when it comes)
    await waitFor(() => zombieChildren().length === 0, { timeout: watchdog(2000), what: 'no zombie child of the host', watch: t.tag });
  });

  // proves C11 (own report), C9 (own report)
  itWhere(!reapsOrphans, 'a tier that does not reap orphans says so', `the ${tier} tier reaps orphans (tested above)`, () => {
    // The orphan tests above do not apply; the tier must not claim otherwise.
    expect(caps.guarantees.reapsOrphans).toBe(false);
    expect(caps.tier).not.toBe('subreaper');
  });

  // proves C9
  it("the host's open descriptors return to baseline after 200 spawns", async () => {
    const t = useTag();
    const once = () => within(spawn('true', [], { env: t.env }).result, 10_000, 'a `true` run to settle', t.tag);
    const total = 200;
    const parallel = 8;
    // Warm-up: lazily created handles (the addon, stdio machinery), and the
    // warm anchors a burst of `parallel` leaves waiting (lib/anchor/warm.ts:
    // up to 8, each with its end of a channel here): not counted, the pool
    // given time to settle first.
    for (let i = 0; i < 2; i++) await once();
    await Promise.all(Array.from({ length: parallel }, once));
    const before = await openFdCountBesideWarmPool();

    for (let done = 0; done < total; done += parallel) {
      const results = await Promise.all(Array.from({ length: Math.min(parallel, total - done) }, once));
      for (const r of results) expect(r.exitCode).toBe(0);
    }
    // Closing is asynchronous for a moment after the last result: bounded wait.
    const slack = 3;
    const deadline = Date.now() + 2000;
    let after = await openFdCountBesideWarmPool();
    while (after > before + slack && Date.now() < deadline) {
      await sleep(20);
      after = await openFdCountBesideWarmPool();
    }
    expect(after, `open fds: ${before} before, ${after} after ${total} spawns`).toBeLessThanOrEqual(before + slack);
    await waitFor(() => zombieChildren().length === 0, { timeout: watchdog(2000), what: 'no zombie child of the host', watch: t.tag });
    await waitGone(t.tag, 1000);
  });

  // The host reaps each anchor itself (it is started with posix_spawn, not
  // through child_process): on SIGCHLD, and when its channel closes. A worker
  // thread gets no signals, so there only the second path exists.
  const posixReaping = onlyWhere(process.platform !== 'win32', 'the host reaps a POSIX anchor by pid on SIGCHLD; Windows has none');
  // proves C9
  it.skipIf(posixReaping.skip)(`anchors started from a worker thread are reaped too, without warnings${posixReaping.note}`, async () => {
    const t = useTag();
    await ensureDist();
    const index = pathToFileURL(join(repoRoot, 'dist', 'index.js')).href;
    const worker = new Worker(
      `const { parentPort, workerData } = require('node:worker_threads');
       const warnings = [];
       process.on('warning', (w) => warnings.push(w.message));
       import(workerData.index).then(async ({ spawn }) => {
         const codes = [];
         for (let i = 0; i < 20; i++) codes.push((await spawn('true', [], { env: workerData.env }).result).exitCode);
         const left = await spawn('sh', ['-c', 'sleep 300 >/dev/null 2>&1 & exit 0'], { env: workerData.env, leftovers: 'kill' }).result;
         parentPort.postMessage({ codes, left: left.leftovers.length, warnings });
       });`,
      { eval: true, workerData: { index, env: t.env } },
    );
    onTestFinished(() => void worker.terminate());
    const [report] = (await within(onceEvent(worker, 'message'), 20_000, 'the worker to finish its trees', t.tag)) as [
      { codes: number[]; left: number; warnings: string[] },
    ];
    expect(report.codes).toEqual(Array(20).fill(0));
    expect(report.left).toBe(1);
    expect(report.warnings).toEqual([]);
    await waitFor(() => zombieChildren().length === 0, { timeout: 2000, what: 'no zombie child of the host', watch: t.tag });
    await waitGone(t.tag, 2000);
  });
});

