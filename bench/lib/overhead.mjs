// Spawn-to-exit of /bin/true: cordon vs plain child_process vs execa, in the
// same process, interleaved (each round runs every library once, in a
// shuffled order) so drift in the machine's load hits all of them alike.
import { spawn as spawnChild } from 'node:child_process';
import { execa } from 'execa';
import { capabilities, spawn as cordonSpawn } from '../../dist/index.js';

/** A limited spawn (memory, processes and CPU: a cgroup per v1 hierarchy, or the v2 files), where this host enforces limits. */
const LIMITS = { memory: '256M', processes: 100, cpu: 1 };

export function makeImpls(env) {
  const limited = capabilities().guarantees.limits ? { 'cordon (limits)': () => cordonSpawn('/bin/true', [], { env, limits: LIMITS }).result } : {};
  return {
    child_process: () =>
      new Promise((resolve, reject) => {
        const c = spawnChild('/bin/true', [], { env });
        c.once('error', reject);
        c.once('close', resolve);
      }),
    cordon: () => cordonSpawn('/bin/true', [], { env }).result,
    execa: () => execa('/bin/true', [], { env, extendEnv: false }),
    ...limited,
  };
}

function shuffled(items) {
  const a = [...items];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

export function quantile(values, q) {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}

async function timed(fn) {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

/**
 * Spawn-to-exit times of each of `impls` (name -> () => Promise settled at the
 * command's end; default makeImpls(env)), interleaved; ratios are to the one
 * named child_process, which `impls` must have.
 */
export async function measureOverhead({ env, impls = makeImpls(env), runs = 200, concurrency = 8, warmup = 20, onProgress = () => {} }) {
  const names = Object.keys(impls);
  for (let i = 0; i < warmup; i++) for (const n of names) await impls[n]();
  const seq = Object.fromEntries(names.map((n) => [n, []]));
  for (let r = 0; r < runs; r++) {
    for (const n of shuffled(names)) seq[n].push(await timed(impls[n]));
    if ((r + 1) % 50 === 0) onProgress(`sequential ${r + 1}/${runs}`);
  }
  const conc = Object.fromEntries(names.map((n) => [n, []]));
  const batches = Math.ceil(runs / concurrency);
  for (let b = 0; b < batches; b++) {
    for (const n of shuffled(names)) {
      const times = await Promise.all(Array.from({ length: concurrency }, () => timed(impls[n])));
      conc[n].push(...times);
    }
    if ((b + 1) % 10 === 0) onProgress(`concurrent batch ${b + 1}/${batches}`);
  }
  const rows = (samples) => {
    const base = samples.child_process;
    const baseMedian = quantile(base, 0.5);
    const baseP95 = quantile(base, 0.95);
    return names.map((n) => {
      const median = quantile(samples[n], 0.5);
      const p95 = quantile(samples[n], 0.95);
      return {
        library: n,
        runs: samples[n].length,
        median,
        p95,
        mean: samples[n].reduce((a, b) => a + b, 0) / samples[n].length,
        medianRatio: median / baseMedian,
        p95Ratio: p95 / baseP95,
      };
    });
  };
  return {
    warmup,
    sequentialRuns: runs,
    concurrentRuns: batches * concurrency,
    concurrency,
    sequential: rows(seq),
    concurrent: rows(conc),
  };
}
