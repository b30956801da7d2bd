// This machine's scheduling delay, measured once per run by the global setup
// (global-setup.ts) and handed to the workers in CORDON_TEST_ALLOWANCE_MS:
// the allowance a promised bound gets (promised(), common.mjs). Measured on
// the machine as it is while the suite runs (scripts/loaded.sh's load
// included), three rounds, the worst round kept:
//   - the p99 lateness of 100 timers of 2 ms (the event loop's own delay);
//   - the slowest of 5 spawn-and-reaps of /bin/true (a fork, an exec, an exit
//     and its reaping: what the anchor's kill and the kernel's teardown cost);
//   - twice the slowest walk of every process's /proc entry (stat and
//     environ, what the anchor's sweeps read: a forced stop ends with walks
//     that find nothing, and 2,000 idle processes make each one slow).
// Kept between ALLOWANCE_FLOOR_MS and ALLOWANCE_CAP_MS (common.mjs). On a
// platform without /proc (macOS) the walk is `ps -A` once, its nearest cost.
import { execFile, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { ALLOWANCE_CAP_MS, clampAllowance } from './common.mjs';

export interface AllowanceMeasure {
  /** ms, the worst round's parts */
  lateness: number;
  spawnReap: number;
  walk: number;
  /** what the parts add up to, before the floor and the cap */
  measured: number;
  /** the allowance: measured, between the floor and the cap */
  allowance: number;
}

async function timerLateness(n: number, ms: number): Promise<number> {
  const late: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await sleep(ms);
    late.push(performance.now() - t - ms);
  }
  late.sort((a, b) => a - b);
  return late[Math.ceil(n * 0.99) - 1]!;
}

async function spawnReap(): Promise<number> {
  const t = performance.now();
  await new Promise<void>((resolve, reject) => {
    const c = spawn('/bin/true', [], { stdio: 'ignore' });
    c.on('error', reject);
    c.on('exit', () => resolve());
  });
  return performance.now() - t;
}

async function walk(): Promise<number> {
  const t = performance.now();
  if (process.platform === 'linux') {
    for (const d of readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      try {
        readFileSync(`/proc/${d}/stat`);
        readFileSync(`/proc/${d}/environ`);
      } catch {
        // gone, or another user's environment
      }
    }
  } else {
    await new Promise<void>((resolve) => execFile('ps', ['-A', '-o', 'pid=,ppid=,command='], { maxBuffer: 64 << 20 }, () => resolve()));
  }
  return performance.now() - t;
}

export async function measureAllowance(): Promise<AllowanceMeasure> {
  let worst: AllowanceMeasure | undefined;
  for (let round = 0; round < 3; round++) {
    const lateness = await timerLateness(100, 2);
    let spawn = 0;
    for (let i = 0; i < 5; i++) spawn = Math.max(spawn, await spawnReap());
    let w = 0;
    for (let i = 0; i < 2; i++) w = Math.max(w, await walk());
    const measured = lateness + spawn + 2 * w;
    if (!worst || measured > worst.measured) {
      worst = { lateness, spawnReap: spawn, walk: w, measured, allowance: clampAllowance(measured) };
    }
  }
  return worst!;
}

/** The line the run prints. */
export function allowanceLine(m: AllowanceMeasure): string {
  const f = (x: number): string => x.toFixed(1);
  const capped = m.measured > ALLOWANCE_CAP_MS ? ` (capped: this machine is slower than the suite's bounds allow)` : '';
  return `timing allowance: ${m.allowance} ms (timer p99 lateness ${f(m.lateness)} + spawn-and-reap ${f(m.spawnReap)} + 2 x /proc walk ${f(m.walk)} = ${f(m.measured)} ms; floor/cap applied)${capped}`;
}
