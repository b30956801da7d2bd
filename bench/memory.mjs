#!/usr/bin/env node
// node bench/memory.mjs [--trees 1000] [--tier cgroup|subreaper|process-group]
//
// The host's memory per live tree (issue #23), cordon beside child_process in
// the same run: each library is measured in a host process of its own
// (node --expose-gc), which starts --trees children of `sleep 600` with
// stdin, stdout and stderr piped, then as many again.
//
// Per host: RSS (VmRSS) and V8 heap used at three points, each after two
// gc() calls, the lowest of three readings 100 ms apart, 1.5 s after the
// last spawn:
//   base  after one child's whole life (the library loaded and warmed)
//   N     with --trees children alive
//   2N    with twice as many alive
// "per child at N" is (N - base) / N, what a host that starts N trees pays;
// "marginal" is (2N - N) / N, what one more tree costs once V8's young
// generation has grown to what this rate of allocation makes it (it grows
// with any burst of allocation, up to a cap, whatever the number of trees).
//
// Every child is tagged and SIGKILLed by tag when a host ends, however it ends.
import { spawn as spawnChild } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { killTagged, newTag, openFdCount, rssBytes, sleep, taggedEnv } from './lib/procs.mjs';

const argv = process.argv.slice(2);
let trees = 1000;
let tier;
let role;
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--trees') trees = Number(argv[++i]);
  else if (argv[i] === '--tier') tier = argv[++i];
  else if (argv[i] === '--host') role = argv[++i];
  else throw new Error(`unknown argument ${argv[i]}`);
}
if (!Number.isInteger(trees) || trees < 1) throw new Error('--trees needs a positive integer');

async function sample() {
  let rss = Infinity;
  for (let k = 0; k < 3; k++) {
    globalThis.gc();
    globalThis.gc();
    await sleep(100);
    rss = Math.min(rss, rssBytes());
  }
  return { rss, heap: process.memoryUsage().heapUsed, fds: openFdCount() };
}

/** One measuring host: prints its samples as one JSON line. */
async function host(lib) {
  if (!globalThis.gc) throw new Error('run with node --expose-gc');
  const tag = newTag(`memory-${lib}`);
  const env = taggedEnv(tag);
  process.on('exit', () => killTagged({ tag }));
  let start;
  let stop;
  if (lib === 'cordon') {
    const { spawn } = await import('../dist/index.js');
    start = () => {
      const p = spawn('sleep', ['600'], { env, ...(tier ? { tier } : {}) });
      p.result.catch(() => {});
      return new Promise((resolve, reject) => {
        p.once('spawn', () => resolve(p));
        p.once('error', reject);
      });
    };
    stop = (p) => p.terminate();
  } else {
    start = () => {
      const p = spawnChild('sleep', ['600'], { env, stdio: 'pipe' });
      return new Promise((resolve, reject) => {
        p.once('spawn', () => resolve(p));
        p.once('error', reject);
      });
    };
    stop = (p) => new Promise((resolve) => {
      p.once('close', resolve);
      p.kill('SIGKILL');
    });
  }
  await stop(await start());
  await sleep(500);
  const base = await sample();
  const live = [];
  const grow = async () => {
    const batch = [];
    for (let i = 0; i < trees; i++) batch.push(start());
    live.push(...(await Promise.all(batch)));
    await sleep(1500);
    return sample();
  };
  const atN = await grow();
  const at2N = await grow();
  await Promise.all(live.map(stop));
  process.stdout.write(`${JSON.stringify({ lib, tier: lib === 'cordon' ? tier ?? 'default' : undefined, base, atN, at2N })}\n`);
}

function runHost(lib) {
  const args = ['--expose-gc', fileURLToPath(import.meta.url), '--host', lib, '--trees', String(trees)];
  if (tier) args.push('--tier', tier);
  return new Promise((resolve, reject) => {
    const c = spawnChild(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    c.stdout.on('data', (d) => (out += d));
    c.on('close', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`${lib} host exited ${code}`))));
  });
}

if (role) {
  await host(role);
} else {
  const kb = (b) => `${(b / 1024).toFixed(1)} kB`;
  const rows = [];
  // Alternated, so that neither library always runs on the fresher machine.
  for (const lib of ['child_process', 'cordon', 'child_process', 'cordon']) rows.push(await runHost(lib));
  console.log(`host memory per live child, ${trees} then ${2 * trees} children of \`sleep 600\`, stdio piped${tier ? `, tier ${tier}` : ''}`);
  console.log('| library | RSS per child at N | RSS marginal (N to 2N) | heap used per child at N | heap marginal | fds per child |');
  console.log('| --- | --- | --- | --- | --- | --- |');
  for (const r of rows) {
    const perN = (k) => (r.atN[k] - r.base[k]) / trees;
    const marginal = (k) => (r.at2N[k] - r.atN[k]) / trees;
    console.log(`| ${r.lib}${r.tier ? ` (${r.tier})` : ''} | ${kb(perN('rss'))} | ${kb(marginal('rss'))} | ${kb(perN('heap'))} | ${kb(marginal('heap'))} | ${perN('fds').toFixed(2)} |`);
  }
}
