// Issue 13: the cost of stopping a tree grows with the tree, never with the
// host. Observed from outside: the host gets thousands of idle processes that
// have nothing to do with cordon (the "ballast": started here, killed by pid
// here), and the anchor's CPU time is read from /proc/<anchor>/stat. The
// anchor is the root's parent in every tier that runs it (found through
// /proc, never through cordon).
import { spawn as spawnChild, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { spawn } from '../lib/index.js';
import { aliveTagged, cmdline, killTagged, readStat, RUN_VAR, TAG_VAR, useTag, waitFor, within, type Tagged } from './helpers/procs.js';
import { tempDir } from './helpers/registry.js';
import { catchesTerm, collect, expectGone, expectLateMemberTermed, startTermIgnoringTree } from './helpers/trees.js';
import { caps, itWhere, tier } from './helpers/tier.js';
import { watchdog } from './helpers/time.js';

const BALLAST = 3000;
/** Clock ticks per second of /proc's utime and stime (USER_HZ: 100 on every Linux architecture cordon builds for). */
const TICK_MS = 10;
/** Whether this tier claims a stop that reads the tree alone (capabilities(); the process-group tier does not). */
const walksTheTree = caps.guarantees.stopCostIsTheTree;
const notClaimed = `the ${tier} tier walks every process of the host and says so (stopCostIsTheTree false, asserted below)`;

/**
 * BALLAST idle processes (`sleep`), children of one shell that waits on them
 * (so they are reaped when killed), each carrying a tag of its own. The
 * cleanup is registered before any of them runs: SIGKILL by pid (checked to
 * still carry the tag), then the shell, then whatever still carries the tag.
 */
async function startBallast(n: number): Promise<number[]> {
  const tag = `${process.env[RUN_VAR] ?? 'run'}-ballast-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const pids: number[] = [];
  let shell: ChildProcess | undefined;
  onTestFinished(async () => {
    for (const pid of pids) {
      if (!aliveTagged(pid, tag)) continue;
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    if (shell && shell.exitCode === null && shell.signalCode === null) {
      const exited = new Promise((resolve) => shell!.once('exit', resolve));
      shell.kill('SIGKILL');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5000))]);
    }
    killTagged(tag);
  });
  shell = spawnChild('sh', ['-c', 'i=0; while [ "$i" -lt "$N" ]; do sleep 86400 & echo "$!"; i=$((i + 1)); done; echo READY; wait'], {
    env: { ...process.env, [TAG_VAR]: tag, N: String(n) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let rest = '';
  const ready = new Promise<void>((resolve, reject) => {
    shell!.stdout!.setEncoding('utf8');
    shell!.stdout!.on('data', (chunk: string) => {
      const lines = (rest + chunk).split('\n');
      rest = lines.pop()!;
      for (const line of lines) {
        if (line === 'READY') resolve();
        else if (/^\d+$/.test(line)) pids.push(Number(line));
      }
    });
    shell!.once('exit', (code, signal) => reject(new Error(`the ballast shell exited early (${code ?? signal})`)));
  });
  await within(ready, 120_000, `${n} ballast processes to start`);
  expect(pids).toHaveLength(n);
  return pids;
}

/** The anchor of a tree: its root's parent, checked to be a cordon-anchor. */
function anchorOf(root: number): number {
  const anchor = readStat(root)?.ppid;
  expect(anchor, 'the root has a parent').toBeGreaterThan(1);
  expect(cmdline(anchor!)).toMatch(/cordon-anchor/);
  return anchor!;
}

/**
 * What `pid` has used so far, or undefined once it is gone (not counting its
 * reaped children): CPU time (utime + stime, in clock ticks) and read()
 * calls (`syscr` of /proc/<pid>/io: a walk of all of /proc reads one file a
 * process, so its count grows with the host; a walk of the tree's own files
 * does not).
 */
function usage(pid: number): { ticks: number; reads: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const reads = /^syscr: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'));
    // fields[0] is field 3 (state): utime is field 14, stime field 15.
    return { ticks: Number(fields[11]) + Number(fields[12]), reads: Number(reads![1]) };
  } catch {
    return undefined;
  }
}

/**
 * Stops a tree whose five members ignore SIGTERM (so the anchor works
 * through the whole grace and then the forced kill) and returns what the
 * anchor used for it: CPU in ms, and read() calls. Sampled every 5 ms until
 * it is gone (what it does in the last few ms before its exit may be missed,
 * which favours no case).
 */
async function anchorCostToStop(t: Tagged, grace: number): Promise<{ cpuMs: number; reads: number }> {
  const { proc, root, all } = await startTermIgnoringTree(t);
  const anchor = anchorOf(root);
  const before = usage(anchor)!;
  let last = before;
  const sampler = setInterval(() => {
    last = usage(anchor) ?? last;
  }, 5);
  try {
    await within(proc.terminate({ grace }), grace + 10_000, 'terminate() to resolve', t.tag);
  } finally {
    clearInterval(sampler);
  }
  expectGone(all, t.tag, 'after terminate() resolved');
  return { cpuMs: (last.ticks - before.ticks) * TICK_MS, reads: last.reads - before.reads };
}

describe('the cost of stopping a tree grows with the tree, not with the host', () => {
  // proves C11: the stop costs what capabilities() says, read from /proc
  itWhere(
    walksTheTree,
    `with ${BALLAST} idle unrelated processes, the anchor reads and spends about as little stopping a tree as without`,
    notClaimed,
    async () => {
      const GRACE = 1000;
      const idle = await anchorCostToStop(useTag(), GRACE);
      await startBallast(BALLAST);
      const loaded = await anchorCostToStop(useTag(), GRACE);
      const figures = `with ${BALLAST} idle processes: ${loaded.cpuMs} ms, ${loaded.reads} reads; without: ${idle.cpuMs} ms, ${idle.reads} reads`;
      // A walk of all of /proc reads one file per process: with the ballast,
      // a single one adds BALLAST reads (and rounds every 100 ms over a 1 s
      // grace made a dozen). A walk of the tree's own files reads the same
      // with or without it; the number of rounds varies a little with timing.
      expect(loaded.reads, `the anchor's reads grew with the host (${figures})`).toBeLessThan(idle.reads + BALLAST / 2);
      // Its CPU time, generously (twice, plus 100 ms: the clock ticks are
      // 10 ms, and a loaded two-core machine charges the anchor for cache
      // misses and the like); the walks of all of /proc cost hundreds of ms.
      expect(loaded.cpuMs, `the anchor's CPU grew with the host (${figures})`).toBeLessThanOrEqual(2 * idle.cpuMs + 100);
    },
    // 3,000 processes started and stopped: seconds on an idle 2-core machine, minutes on a loaded one.
    watchdog(180_000),
  );

  // proves C3
  itWhere(
    walksTheTree,
    `with ${BALLAST} idle unrelated processes, a member forked after the polite signal still gets it before the forced kill`,
    notClaimed,
    async () => {
      await startBallast(BALLAST);
      await expectLateMemberTermed(useTag(), 'cordon-scale-');
    },
    watchdog(180_000),
  );
});

describe('a tier that walks the host says so', () => {
  // proves C11 (own report)
  itWhere(!walksTheTree, `capabilities() of the ${tier} tier: stopCostIsTheTree false`, `the ${tier} tier claims a stop that reads the tree alone (tested above)`, () => {
    expect(caps.guarantees.stopCostIsTheTree).toBe(false);
    expect(tier).toBe('process-group');
  });
});

describe('members are found whichever thread forked them', () => {
  // A child belongs to the thread that forked it (/proc/<pid>/task/<tid>/children
  // is per thread): here a worker thread of the root forks it.
  const ROOT = `
    const { Worker } = require('node:worker_threads');
    const w = new Worker(\`
      const { spawn } = require('node:child_process');
      const { parentPort } = require('node:worker_threads');
      const c = spawn('sh', ['-c', process.env.LATE], { stdio: ['ignore', 'inherit', 'inherit'] });
      c.on('exit', () => parentPort.postMessage('gone'));
    \`, { eval: true });
    let gone = false, termed = false;
    w.on('message', () => { gone = true; if (termed) process.exit(6); });
    process.on('SIGTERM', () => { termed = true; if (gone) process.exit(6); });
    console.log('PID root ' + process.pid);
    setInterval(() => {}, 1000);
  `;
  const LATE = 'trap \'echo term > "$FILE"; exit 0\' TERM; echo "PID worker_child $$"; echo READY; while :; do sleep 0.05; done';

  // proves C3
  it("a worker thread's child gets the polite signal, not only the forced kill", async () => {
    const t = useTag();
    const file = join(tempDir('cordon-scale-'), 'term');
    const proc = spawn(process.execPath, ['-e', ROOT], { env: { ...t.env, FILE: file, LATE } });
    const { root, pids } = await collect(proc, t.tag, { ready: /^READY$/m });
    const child = pids.worker_child!;
    expect(readStat(child)?.ppid, "the root is the worker's child's parent").toBe(root);
    await waitFor(() => catchesTerm(child), { timeout: 5000, what: 'the trap to be installed', watch: t.tag });
    // Its parent thread is not the root's main thread (where the kernel lists children per thread).
    const mainChildren = `/proc/${root}/task/${root}/children`;
    if (existsSync(mainChildren)) {
      const listed = readFileSync(mainChildren, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
      expect(listed, "the root's main thread did not fork it").not.toContain(child);
    }

    const t0 = Date.now();
    await within(proc.terminate({ grace: 20_000 }), 30_000, 'terminate() to resolve', t.tag);
    const elapsed = Date.now() - t0;
    expect(readFileSync(file, 'utf8'), "the worker's child got SIGTERM").toBe('term\n');
    expectGone([root, child], t.tag, 'after terminate() resolved');
    expect(elapsed, 'the tree waited for the forced kill').toBeLessThan(10_000);
    const result = await within(proc.result, 5000, 'the result to settle', t.tag);
    expect(result.exitCode).toBe(6);
  });
});
