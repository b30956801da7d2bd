#!/usr/bin/env node
// npm run bench [-- options]
//
// One run: cordon vs child_process, detached + kill(-pid), execa and tree-kill
// on the scenarios of bench/lib/scenarios.mjs, plus the /bin/true overhead,
// and (POSIX) cordon's terminal beside node-pty (bench/lib/pty.mjs; node-pty
// from bench/peers/node-pty, else that half is skipped), and (Linux) the confine
// option beside bubblewrap (bench/lib/confine.mjs; bwrap from the OS, else its
// rows are skipped with the reason).
// Writes bench/results/latest.{md,json,svg} and prints the markdown.
//
//   --bound <ms>        how long each trial waits for settle and quiescence (default 10000)
//   --runs <n>          overhead: sequential runs per library (default 200)
//   --only <what>       scenarios | overhead | scale | adoption | pty | confine
//   --ballast <n>       start n idle unrelated processes (`sleep 100000`) before
//                       the overhead and the scenarios; ended by pid at the end
//   --scale-ballast a,b ballast levels of the scale section (default 0,1000,5000;
//                       the section sets the ballast to each level itself)
//   --scale-trees a,b   trees stopped at once (default 1,50,200)
//   --scale-tiers a,b   cordon tiers measured there (default cgroup,subreaper,
//                       those this host has), beside a detached group kill
//   --scale-reps <n>    stops per cell of a single tree, median (default 5)
//   --storm-reps <n>    fork storms stopped per method, median (default 5; 0 leaves
//                       the storm out); without ballast, beside the group kill
//   --no-scale          leave the scale section out
//   --pty-runs <n>      pty: start-to-prompt runs per library (default 20)
//   --no-pty            leave the pty section out
//   --confine-runs <n>  confine: sequential (and 8-way) runs per approach and command (default 100)
//   --no-confine        leave the confine section out
//   --scenarios a,b     only these scenario ids
//   --libs a,b          only these libraries (cordon is the first)
//   --out <dir>         where results go (default bench/results)
//   --render <json>     only re-render latest.{md,svg} in --out from a results JSON
//
// Every process carries CORDON_BENCH_TAG; whatever a library leaves behind is
// counted, then SIGKILLed by pid. The run ends by checking that nothing of it
// is left.
import { execFileSync, spawn as spawnChild } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { capabilities } from '../dist/index.js';
import { execa10, libraries, stopPeers } from './lib/libraries.mjs';
import { Ballast } from './lib/ballast.mjs';
import { measureOverhead } from './lib/overhead.mjs';
import { measureAdoption } from './lib/adoption.mjs';
import { measurePty } from './lib/pty.mjs';
import { measureConfine } from './lib/confine.mjs';
import {
  RUN_ID,
  alive,
  cmdline,
  findTagged,
  findTaggedZombies,
  killTagged,
  hostProcessCount,
  machine,
  newTag,
  sleep,
  sweepTagged,
  taggedEnv,
} from './lib/procs.mjs';
import { markdown, svg } from './lib/report.mjs';
import { METHODS, measureScale, measureStorm } from './lib/scale.mjs';
import { scenarios } from './lib/scenarios.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');

function parseArgs(argv) {
  const o = {
    bound: 10_000,
    runs: 200,
    only: undefined,
    scenarios: undefined,
    libs: undefined,
    out: join(here, 'results'),
    activeWindow: 1000,
    ballast: 0,
    scale: true,
    pty: true,
    ptyRuns: 20,
    confine: true,
    confineRuns: 100,
    scaleBallast: [0, 1000, 5000],
    scaleTrees: [1, 50, 200],
    scaleTiers: ['cgroup', 'subreaper'],
    scaleReps: 5,
    stormReps: 5,
    scaleBound: 30_000,
  };
  const list = (x) => x.split(',').map(Number);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => {
      const x = argv[++i];
      if (x === undefined) throw new Error(`${a} needs a value`);
      return x;
    };
    if (a === '--bound') o.bound = Number(v());
    else if (a === '--runs') o.runs = Number(v());
    else if (a === '--only') o.only = v();
    else if (a === '--scenarios') o.scenarios = v().split(',');
    else if (a === '--libs') o.libs = v().split(',');
    else if (a === '--out') o.out = v();
    else if (a === '--render') o.render = v();
    else if (a === '--ballast') o.ballast = Number(v());
    else if (a === '--scale-ballast') o.scaleBallast = list(v()).sort((x, y) => x - y);
    else if (a === '--scale-trees') o.scaleTrees = list(v());
    else if (a === '--scale-tiers') o.scaleTiers = v().split(',');
    else if (a === '--scale-reps') o.scaleReps = Number(v());
    else if (a === '--storm-reps') o.stormReps = Number(v());
    else if (a === '--no-scale') o.scale = false;
    else if (a === '--pty-runs') o.ptyRuns = Number(v());
    else if (a === '--no-pty') o.pty = false;
    else if (a === '--confine-runs') o.confineRuns = Number(v());
    else if (a === '--no-confine') o.confine = false;
    else throw new Error(`unknown argument ${a}`);
  }
  return o;
}

const t00 = performance.now();
const log = (s) => process.stderr.write(`bench [${((performance.now() - t00) / 1000).toFixed(0).padStart(3)} s]: ${s}\n`);

function nodeVersion(node) {
  try {
    return execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
  } catch {
    return node;
  }
}

function version(pkg) {
  return JSON.parse(readFileSync(join(root, 'node_modules', pkg, 'package.json'), 'utf8')).version;
}

async function waitUntil(check, timeoutMs, what) {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms`);
    await sleep(5);
  }
}

function startHost(lib, script, env) {
  const child = spawnChild(lib.hostNode ?? process.execPath, [join(here, 'host.mjs'), lib.name, script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  let errText = '';
  child.stdout.setEncoding('utf8').on('data', (c) => (text += c));
  child.stderr.setEncoding('utf8').on('data', (c) => (errText += c));
  return { child, get text() { return text; }, get errText() { return errText; } };
}

/**
 * One library on one scenario. Resolves `active` when the next trial may
 * start (this one is done, or `activeWindow` ms after t0: what remains is a
 * passive bounded wait) and `done` with the record.
 */
function trial(lib, sc, opts, scratch) {
  let activeResolve;
  const active = new Promise((r) => (activeResolve = r));
  const done = (async () => {
    const tag = newTag(sc.id);
    const extra = sc.mark ? { BENCH_MARK: join(scratch, `mark-${tag}`) } : {};
    const env = taggedEnv(tag, extra);
    const rec = { library: lib.name, scenario: sc.id };
    const handles = [];
    let host;
    try {
      if (sc.trigger === 'host-kill') {
        host = startHost(lib, sc.script, env);
        await waitUntil(() => /^READY$/m.test(host.text), 15_000, `host READY (${host.errText.trim()})`);
      } else {
        for (let i = 0; i < (sc.count ?? 1); i++) handles.push(lib.start('sh', ['-c', sc.script], env));
        await waitUntil(() => handles.every((h) => /^READY$/m.test(h.out.text)), 15_000, 'READY from every tree');
      }
      rec.processes = findTagged({ tag, maxAgeMs: 0 }).filter((p) => p.pid !== host?.child.pid).length;

      let t0;
      if (sc.trigger === 'cancel') {
        t0 = performance.now();
        for (const h of handles) h.cancel();
      } else if (sc.trigger === 'host-kill') {
        t0 = performance.now();
        process.kill(host.child.pid, 'SIGKILL');
      } else {
        // cordon learns the root's pid from its anchor, possibly after the root printed READY.
        await waitUntil(() => handles[0].rootPid() !== undefined, 10_000, "the root's pid");
        const rootPid = handles[0].rootPid();
        await waitUntil(() => !alive(rootPid), 10_000, 'the root to exit');
        t0 = performance.now();
      }

      let settledAt = null;
      const settles = sc.trigger === 'host-kill' ? null : Promise.all(handles.map((h) => h.completion));
      settles?.then((list) => {
        settledAt = Math.max(...list.map((x) => x.at));
        rec.outcome = describe(list[list.length - 1]);
      });
      // Quiescent = two consecutive empty scans (a process caught mid-execve
      // is unreadable for an instant); the time is that of the first.
      let quietAt = null;
      let emptySince = null;
      const deadline = t0 + opts.bound;
      for (;;) {
        const now = performance.now();
        if (quietAt === null) {
          if (findTagged({ tag }).length > 0) emptySince = null;
          else if (emptySince === null) emptySince = now;
          else quietAt = emptySince;
        }
        if (quietAt !== null && (settles === null || settledAt !== null)) break;
        if (now > deadline) break;
        if (now - t0 > opts.activeWindow) activeResolve();
        await sleep(now - t0 < opts.activeWindow ? 5 : 20);
      }
      const left = findTagged({ tag, maxAgeMs: 0 });
      rec.leftBehind = left.length;
      rec.leftCommands = left.map((p) => cmdline(p.pid)).slice(0, 20);
      rec.settledMs = settles === null ? undefined : settledAt === null ? null : settledAt - t0;
      rec.quiescentMs = quietAt === null ? null : quietAt - t0;
      if (sc.note) rec.note = sc.note(env);
    } catch (err) {
      rec.error = err.message;
      rec.leftBehind = findTagged({ tag, maxAgeMs: 0 }).length;
      rec.quiescentMs = null;
    } finally {
      const killed = killTagged({ tag });
      if (killed.length > 0) rec.killedByBench = killed.length;
      // Self-check of the instrument: the uncached sweep must not find more than the scanner did.
      if (killed.length > (rec.leftBehind ?? 0)) {
        rec.scannerMissed = killed.length - (rec.leftBehind ?? 0);
        log(`WARNING: ${sc.id} / ${lib.name}: the scanner saw ${rec.leftBehind} left, the sweep killed ${killed.length}`);
      }
      rec.zombies = findTaggedZombies({ tag }).length;
      activeResolve();
    }
    return rec;
  })();
  return { active, done };
}

function describe(settle) {
  if (settle.ok) {
    const v = settle.value;
    if (v && typeof v === 'object' && 'reason' in v) return `${v.reason}${v.signal ? ' ' + v.signal : ''}`;
    if (v && typeof v === 'object' && 'code' in v) return v.signal ? `close ${v.signal}` : `close ${v.code}`;
    return 'resolved';
  }
  const e = settle.error;
  return `rejected ${e?.code ?? e?.signal ?? e?.name ?? ''}`.trim();
}

async function runScenarios(opts, libs, scs) {
  const scratch = mkdtempSync(join(tmpdir(), 'cordon-bench-'));
  const pending = [];
  try {
    for (const sc of scs) {
      for (const lib of libs) {
        const t = trial(lib, sc, opts, scratch);
        t.done.then((r) => {
          const what = r.error ? `error: ${r.error}` : `${r.leftBehind} left, settled ${r.settledMs === undefined ? 'n/a' : r.settledMs === null ? 'never' : Math.round(r.settledMs) + ' ms'}, quiet ${r.quiescentMs === null ? 'never' : Math.round(r.quiescentMs) + ' ms'}`;
          log(`${sc.id} / ${lib.name}: ${what}`);
        });
        pending.push(t.done);
        await t.active;
      }
    }
    return await Promise.all(pending);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (opts.render) {
    const run = JSON.parse(readFileSync(opts.render, 'utf8'));
    mkdirSync(opts.out, { recursive: true });
    writeFileSync(join(opts.out, 'latest.md'), markdown(run));
    if (run.trials.length > 0) writeFileSync(join(opts.out, 'latest.svg'), svg(run));
    process.stdout.write(markdown(run));
    return;
  }
  const started = performance.now();
  const libs = opts.libs ? libraries.filter((l) => opts.libs.includes(l.name)) : libraries;
  const scs = opts.scenarios ? scenarios.filter((s) => opts.scenarios.includes(s.id)) : scenarios;
  const run = {
    date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    machine: machine(),
    cordonTier: capabilities().tier,
    versions: { execa: version('execa'), 'tree-kill': version('tree-kill') },
    execa10: execa10.skipped ? { skipped: execa10.skipped } : { version: execa10.version, mode: execa10.mode, node: execa10.mode === 'peer' ? nodeVersion(execa10.node) : process.version },
    options: { bound: opts.bound, runs: opts.runs, activeWindow: opts.activeWindow },
    loadavgAtStart: loadavg().map((x) => Number(x.toFixed(2))),
    libraries: libs.map((l) => ({ name: l.name, how: l.how })),
    scenarios: opts.only !== undefined && opts.only !== 'scenarios' ? [] : scs.map(({ id, title, detail, trigger }) => ({ id, title, detail, trigger })),
    trials: [],
    overhead: undefined,
  };
  // The terminal first: before any --ballast (its scans are uncached full sweeps).
  if (((opts.only === undefined && opts.pty) || opts.only === 'pty') && process.platform !== 'win32') {
    log(`pty: cordon's terminal beside node-pty, ${opts.ptyRuns} prompts, 3 cats, 1 escape run each`);
    run.pty = await measurePty({ runs: opts.ptyRuns, bound: opts.bound, log: (s) => log(`pty: ${s}`) });
  }
  if ((opts.only === undefined && opts.confine) || opts.only === 'confine') {
    log(`confine: beside bwrap, ${opts.confineRuns} runs per approach and command, the policy, a setsid escapee`);
    run.confine = await measureConfine({ runs: opts.confineRuns, log: (s) => log(`confine: ${s}`) });
  }
  if (opts.ballast > 0) {
    const t = performance.now();
    await ballast.grow(opts.ballast);
    await sleep(1000); // let the fork burst settle
    run.ballast = { processes: opts.ballast, hostProcesses: hostProcessCount(), startedInMs: performance.now() - t };
    log(`ballast: ${opts.ballast} idle processes (${run.ballast.hostProcesses} on the host)`);
  }

  if (opts.only === undefined || opts.only === 'overhead') {
    log(`overhead: /bin/true, ${opts.runs} sequential + ${opts.runs} 8-way concurrent per library`);
    const tag = newTag('overhead');
    run.overhead = await measureOverhead({ env: taggedEnv(tag), runs: opts.runs, onProgress: (s) => log(`overhead: ${s}`) });
    const left = killTagged({ tag });
    if (left.length > 0) run.overhead.leftBehind = left.length;
  }
  if ((opts.only === undefined || opts.only === 'adoption') && process.platform !== 'win32') {
    log('adoption: a leased tree whose host was SIGKILLed, adopted by this process, 10 times');
    const tag = newTag('adoption');
    run.adoption = await measureAdoption({ env: taggedEnv(tag), onProgress: (s) => log(`adoption: ${s}`) });
    const left = killTagged({ tag });
    if (left.length > 0) run.adoption.leftBehind = left.length;
  }
  if (opts.only === undefined || opts.only === 'scenarios') {
    log(`scenarios: ${scs.map((s) => s.id).join(', ')} × ${libs.map((l) => l.name).join(', ')} (bound ${opts.bound} ms)`);
    run.trials = await runScenarios(opts, libs, scs);
  }
  if ((opts.only === undefined && opts.scale) || opts.only === 'scale') {
    const have = capabilities().tiers;
    const methods = METHODS.filter((m) => m.kind !== 'cordon' || (opts.scaleTiers.includes(m.tier) && have.includes(m.tier)));
    const missing = opts.scaleTiers.filter((t) => !have.includes(t));
    if (missing.length > 0) log(`scale: tier(s) ${missing.join(', ')} not available on this host: skipped`);
    log(`scale: ballast ${opts.scaleBallast.join(', ')} × trees ${opts.scaleTrees.join(', ')} × ${methods.map((m) => m.name).join(', ')}`);
    run.scale = await measureScale({
      ballast,
      levels: opts.scaleBallast,
      treeCounts: opts.scaleTrees,
      methods,
      reps: opts.scaleReps,
      bound: opts.scaleBound,
      log,
    });
    if (missing.length > 0) run.scale.skippedTiers = missing;
    if (opts.stormReps > 0) {
      log(`scale: fork storm × ${methods.map((m) => m.name).join(', ')}, ${opts.stormReps} each`);
      run.scale.storm = await measureStorm({ ballast, methods, reps: opts.stormReps, bound: opts.scaleBound, log, settleTo: run.scale.levels[0]?.hostProcesses });
    }
  }
  await ballast.clear();
  stopPeers();
  run.durationMs = performance.now() - started;
  run.loadavgAtEnd = loadavg().map((x) => Number(x.toFixed(2)));

  // Nothing of this run may be left: sweep by tag, uncached.
  const stray = sweepTagged(RUN_ID);
  if (stray.length > 0) {
    killTagged({ prefix: RUN_ID });
    log(`WARNING: ${stray.length} tagged processes were still alive at the end (now SIGKILLed)`);
  }
  run.strayAtEnd = stray.length;

  mkdirSync(opts.out, { recursive: true });
  const md = markdown(run);
  writeFileSync(join(opts.out, 'latest.md'), md);
  writeFileSync(join(opts.out, 'latest.json'), JSON.stringify(run, null, 2) + '\n');
  if (run.trials.length > 0) writeFileSync(join(opts.out, 'latest.svg'), svg(run));
  process.stdout.write(md);
  log(`done in ${(run.durationMs / 1000).toFixed(1)} s; results in ${opts.out}`);
  // Library handles that never settled (the point of some scenarios) may
  // still hold the event loop: everything tagged is gone, so exit now.
  process.exit(0);
}

// The ballast is ended by pid however the run ends.
const ballast = new Ballast();
process.on('exit', () => ballast.clearSync());
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(sig, () => {
    process.stderr.write(`bench: ${sig}: ending the ballast and everything tagged\n`);
    ballast.clearSync();
    killTagged({ prefix: RUN_ID });
    process.exit(130);
  });
}

main().catch((err) => {
  process.stderr.write(`bench: ${err.stack ?? err}\n`);
  ballast.clearSync();
  killTagged({ prefix: RUN_ID });
  process.exit(1);
});
