// node bench/ab.mjs --a <other build's dist/index.js> [--runs 400] [--width 1] [--gap 0]
//
// Two builds of cordon beside each other in one host, with child_process:
// spawn to exit of /bin/true, `--width` at a time (awaited together), each
// library in turn, the order rotated every round so that none always runs
// right after another (a spawn leaves work behind it: its anchor exiting,
// the next warm anchor starting). Build A is the path given; B is this
// checkout's dist/. One host, so both pay the same for the host's size and
// state. Prints the median of each and its ratio to child_process. The tier
// is the one CORDON_TIER or this machine chooses; `--gap` ms between runs.
// (Each build loads its own addon; both reap only their own anchors.)
import { spawn as cpSpawn } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { dirname, join, resolve } from 'node:path';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const aPath = opt('--a', undefined);
if (!aPath) {
  console.error('usage: node bench/ab.mjs --a <other build dist/index.js> [--runs 400] [--width 1] [--gap 0]');
  process.exit(2);
}
const N = Number(opt('--runs', '400'));
const W = Number(opt('--width', '1'));
const GAP = Number(opt('--gap', '0'));
const here = dirname(fileURLToPath(import.meta.url));
const A = await import(pathToFileURL(resolve(aPath)).href);
const B = await import(pathToFileURL(join(here, '..', 'dist', 'index.js')).href);
const cp = () => new Promise((r) => cpSpawn('/bin/true', [], { stdio: 'pipe' }).on('close', r));
const libs = { A: () => A.spawn('/bin/true').result, B: () => B.spawn('/bin/true').result, child_process: cp };
const keys = Object.keys(libs);
const batch = (f) => Promise.all(Array.from({ length: W }, f));
for (const f of Object.values(libs)) for (let i = 0; i < 30; i++) await batch(f);
const times = Object.fromEntries(keys.map((k) => [k, []]));
for (let i = 0; i < N; i++) {
  for (let j = 0; j < keys.length; j++) {
    const k = keys[(i + j) % keys.length];
    if (GAP) await new Promise((r) => setTimeout(r, GAP));
    const t0 = performance.now();
    await batch(libs[k]);
    times[k].push(performance.now() - t0);
  }
}
const median = (x) => [...x].sort((a, b) => a - b)[Math.floor(x.length / 2)];
const m = Object.fromEntries(keys.map((k) => [k, median(times[k])]));
const tier = B.capabilities().tier;
console.log(`${N} rounds, ${W} at a time, tier ${tier}; medians: child_process ${m.child_process.toFixed(2)} ms; A (${aPath}) ${m.A.toFixed(2)} ms, ${(m.A / m.child_process).toFixed(2)}x; B (this checkout) ${m.B.toFixed(2)} ms, ${(m.B / m.child_process).toFixed(2)}x`);
process.exit(0);
