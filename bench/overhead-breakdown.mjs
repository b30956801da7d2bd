#!/usr/bin/env node
// node bench/overhead-breakdown.mjs [--runs 200] [--ballast <MB>]
//
// --ballast: the host first fills that many MB of its heap (touched, kept
// alive), to show how each library's spawn cost depends on the host's size.
//
// Where the time of a contained /bin/true goes, phase by phase, next to plain
// child_process (interleaved runs, medians). A profiling aid: it reads
// cordon's private AnchorChannel (proc.anchor) to timestamp the protocol
// lines, so it may need updating when lib/anchor/channel.ts changes.
//
// cordon phases:
//   spawn()         the synchronous part of spawn(): option checks, PATH lookup, socketpair, uv_spawn of the anchor
//   -> READY        anchor exec, containment (prctl), fork + exec of the root, READY on the channel
//   -> EXIT         the root runs and exits; the anchor reaps it and reports
//   -> LEFTEND      the anchor's /proc scan for leftovers at root exit
//   -> QUIET        the anchor sees no member left
//   -> anchor exit  the anchor process exits, Node reaps it and its channel is closed
//   -> settled      the channel and output pipes close; proc.result resolves
import { spawn as spawnChild } from 'node:child_process';
import { spawn } from '../dist/index.js';
import { newTag, taggedEnv, killTagged } from './lib/procs.mjs';
import { quantile } from './lib/overhead.mjs';

let runs = 200;
let ballastMb = 0;
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--runs') runs = Number(argv[++i]);
  else if (argv[i] === '--ballast') ballastMb = Number(argv[++i]);
  else throw new Error(`unknown argument ${argv[i]}`);
}
// Many small objects (a heap a real host would have), not one big buffer.
const ballast = [];
for (let i = 0; i < ballastMb * 160; i++) ballast.push(Array.from({ length: 120 }, (_, j) => ({ i, j })));
const tag = newTag('breakdown');
const env = taggedEnv(tag);

async function cordonOnce() {
  const t = { start: performance.now() };
  const proc = spawn('/bin/true', [], { env });
  t.spawned = performance.now();
  const anchor = proc.anchor;
  const dispatch = anchor.dispatch.bind(anchor);
  anchor.dispatch = (line) => {
    const verb = line.split(' ')[0];
    t[verb] ??= performance.now();
    dispatch(line);
  };
  const anchorExit = anchor.on.anchorExit;
  anchor.on.anchorExit = (...a) => {
    t.anchorExit ??= performance.now();
    anchorExit.apply(anchor.on, a);
  };
  await proc.result;
  t.settled = performance.now();
  return t;
}

async function plainOnce() {
  const t = { start: performance.now() };
  const child = spawnChild('/bin/true', [], { env });
  t.spawned = performance.now();
  child.once('spawn', () => (t.spawn = performance.now()));
  child.once('exit', () => (t.exit = performance.now()));
  await new Promise((resolve) => child.once('close', resolve));
  t.close = performance.now();
  return t;
}

const C = [];
const P = [];
for (let i = 0; i < 20; i++) {
  await cordonOnce();
  await plainOnce();
}
for (let i = 0; i < runs; i++) {
  if (i % 2) {
    C.push(await cordonOnce());
    P.push(await plainOnce());
  } else {
    P.push(await plainOnce());
    C.push(await cordonOnce());
  }
}
killTagged({ tag });

const med = (xs) => quantile(xs, 0.5);
const p95 = (xs) => quantile(xs, 0.95);
function phase(samples, from, to) {
  const d = samples.filter((t) => t[from] !== undefined && t[to] !== undefined).map((t) => t[to] - t[from]);
  return { median: med(d), p95: p95(d), n: d.length };
}
const rows = [
  ['cordon', 'spawn() (sync)', phase(C, 'start', 'spawned')],
  ['cordon', '-> READY', phase(C, 'spawned', 'READY')],
  ['cordon', '-> EXIT', phase(C, 'READY', 'EXIT')],
  ['cordon', '-> LEFTEND', phase(C, 'EXIT', 'LEFTEND')],
  ['cordon', '-> QUIET', phase(C, 'LEFTEND', 'QUIET')],
  ['cordon', '-> anchor exit', phase(C, 'QUIET', 'anchorExit')],
  ['cordon', '-> settled', phase(C, 'anchorExit', 'settled')],
  ['cordon', 'total', phase(C, 'start', 'settled')],
  ['child_process', 'spawn() (sync)', phase(P, 'start', 'spawned')],
  ['child_process', "-> 'exit'", phase(P, 'spawned', 'exit')],
  ['child_process', "-> 'close'", phase(P, 'exit', 'close')],
  ['child_process', 'total', phase(P, 'start', 'close')],
];
const f = (x) => (Number.isFinite(x) ? x.toFixed(2).padStart(7) : '     -');
const rssMb = Math.round(process.memoryUsage().rss / 2 ** 20);
process.stdout.write(`${runs} runs each, interleaved (ms); host RSS ${rssMb} MB${ballast.length ? ` with ${ballastMb} MB of ballast` : ''}\n\n| library | phase | median | p95 |\n| --- | --- | --- | --- |\n`);
for (const [lib, name, p] of rows) process.stdout.write(`| ${lib} | ${name} | ${f(p.median)} | ${f(p.p95)} |\n`);
process.exit(0);
