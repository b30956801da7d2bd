#!/usr/bin/env node
// npm run bench:soak -- --trees 10000 [--concurrency 16] [--every 500] [--seed N]
//
// Spawns trees of random shapes with random fates at bounded concurrency and
// checks, from outside, that each one is gone when cordon says so:
//   shapes  0-3 background sleepers, a nested shell with its own sleeper, a
//           setsid escapee, a double-forked orphan (each prints its pid;
//           only the wait-delay fate's hold the pipes, the others let go
//           before the root goes on, so no load can make them late)
//   fates   cancel      AbortSignal or terminate() shortly after READY
//           timeout     the `timeout` option fires while the root still runs
//           leftovers   the root exits 0 leaving its sleepers (policy 'kill', or
//                       'keep' and then terminate())
//           wait-delay  the root exits while a sleeper holds stdout; a short waitDelay
// When a tree's result settles (and, for 'keep', terminate() resolved), every
// pid it printed, its root and its anchor must be gone and reaped (where the
// tier reaps orphans: else an orphan's zombie is its reaper's, counted apart); every
// --every trees a full /proc sweep looks for any process tagged with a
// settled tree's tag. At the end: survivors and zombies (must be 0),
// misclassified and rejected results, and the host's fds and memory at
// --checkpoint (1000) trees vs at the end, the pool drained for both ("flat":
// fds, V8 heap used and RSS outside V8's heap grew no more than 5%; the RSS
// and V8's reserve are printed beside them). Progress goes to stderr; the summary to stdout; the
// exit status is 0 only if every check passed.
// BENCH_CORDON=/path/to/dist/index.js soaks another build (e.g. a patched copy).
import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import {
  RUN_ID,
  TAG_VAR,
  cmdline,
  killTagged,
  openFdCount,
  readStat,
  rssBytes,
  sleep,
  sweepTagged,
  tagOf,
  zombieChildren,
} from './lib/procs.mjs';

const { spawn, capabilities } = await import(process.env.BENCH_CORDON ?? '../dist/index.js');
const TIER = capabilities().tier;
// Where the tier's anchor does not reap orphans (the process-group tier), a
// member whose parent died goes to init (or the nearest subreaper above the
// host): its zombie is that process's to reap, not cordon's (C9 is not given:
// capabilities().guarantees.reapsOrphans false). Counted apart, and the last
// few looked at again at the end: still zombies then is reported, not failed.
const REAPS_ORPHANS = capabilities().guarantees.reapsOrphans;
const ORPHANS_KEPT = 500;

/** The cgroup tier: the names of tree cgroups (cordon-<anchor pid>) below this process's cgroup. */
function treeCgroups() {
  if (TIER !== 'cgroup') return undefined;
  const mount = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .find((line) => / - cgroup2 /.test(line))
    ?.split(' ')[4];
  const own = /^0::(\/.*)$/m.exec(readFileSync('/proc/self/cgroup', 'utf8'))?.[1];
  if (!mount || !own) return undefined;
  const dir = own === '/' ? mount : mount + own;
  return new Set(readdirSync(dir).filter((n) => /^cordon-\d+$/.test(n)).map((n) => `${dir}/${n}`));
}

function parseArgs(argv) {
  const o = { trees: 1000, concurrency: 16, every: 0, seed: Date.now() % 1_000_000, checkpoint: 1000 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => Number(argv[++i]);
    if (a === '--trees') o.trees = v();
    else if (a === '--concurrency') o.concurrency = v();
    else if (a === '--every') o.every = v();
    else if (a === '--seed') o.seed = v();
    else if (a === '--checkpoint') o.checkpoint = v();
    else throw new Error(`unknown argument ${a}`);
  }
  if (!o.every) o.every = Math.max(100, Math.round(o.trees / 20));
  o.checkpoint = Math.min(o.checkpoint, o.trees);
  return o;
}

// A small deterministic PRNG (mulberry32), so a failing seed can be replayed.
function prng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const FATES = ['cancel', 'timeout', 'leftovers', 'wait-delay'];

function makeTree(rand) {
  const fate = FATES[Math.floor(rand() * FATES.length)];
  const parts = [];
  // Sleepers that keep the pipes only in the wait-delay fate.
  const quiet = fate === 'wait-delay' ? '' : ' >/dev/null 2>&1';
  // A quiet sleeper never holds the pipes, however late it is scheduled: the
  // shell redirects before it forks ({ …; } >/dev/null), where `cmd >/dev/null &`
  // has the child redirect itself, which at load average 40 may come after
  // the wait delay. The nested shell (it prints, then lets go) is waited for
  // through a command substitution, which ends when it has let go.
  const bgQuiet = (cmd) => (quiet ? `{ ${cmd} & }${quiet};` : `${cmd} &`);
  const bg = Math.floor(rand() * 4);
  for (let i = 0; i < bg; i++) parts.push(`${bgQuiet('sleep 300')} echo "PID bg${i} $!"`);
  if (rand() < 0.5) {
    const nested = `sh -c 'echo "PID nestedsh $$"; ${bgQuiet('sleep 300')} echo "PID nested $!"; ${quiet ? `exec${quiet}; ` : ''}wait'`;
    parts.push(quiet ? `nested=$(${nested} &); echo "$nested"` : `${nested} &`);
  }
  if (rand() < 0.4) parts.push('{ setsid sleep 300 & } >/dev/null 2>&1; echo "PID setsid $!"');
  if (rand() < 0.4) parts.push('({ sleep 300 & } >/dev/null 2>&1; echo "PID double $!")');
  if (fate === 'wait-delay') parts.push('sleep 300 & echo "PID holder $!"');
  parts.push('echo READY');
  const options = {};
  let end = 'exec sleep 300';
  let keep = false;
  let abortBy;
  if (fate === 'timeout') options.timeout = 20 + Math.floor(rand() * 200);
  if (fate === 'cancel') abortBy = rand() < 0.5 ? 'signal' : 'terminate';
  if (fate === 'leftovers') {
    end = 'exit 0';
    keep = rand() < 0.3;
    if (keep) options.leftovers = 'keep';
  }
  if (fate === 'wait-delay') {
    end = 'exit 0';
    options.waitDelay = 50 + Math.floor(rand() * 100);
  }
  if (fate !== 'wait-delay' && fate !== 'leftovers') options.interruptGrace = 200 + Math.floor(rand() * 300);
  parts.push(end);
  return { fate, script: parts.join('\n'), options, keep, abortBy, cancelAfter: Math.floor(rand() * 30) };
}

function expectedMismatch(tree, result) {
  switch (tree.fate) {
    case 'cancel':
      // An AbortSignal cancels (reason 'canceled'); terminate() is a teardown: the root dies by SIGTERM.
      if (tree.abortBy === 'signal') return result.reason === 'canceled' ? null : `reason ${result.reason}, expected canceled`;
      return result.reason === 'signal' && result.signal === 'SIGTERM' ? null : `reason ${result.reason} ${result.signal}, expected signal SIGTERM`;
    case 'timeout':
      return result.reason === 'timeout' ? null : `reason ${result.reason}, expected timeout`;
    case 'leftovers':
      if (result.reason !== 'exit' || result.exitCode !== 0) return `reason ${result.reason} code ${result.exitCode}, expected exit 0`;
      if (result.waitDelayExceeded) return 'waitDelayExceeded, expected not';
      // With nothing left over, 'keep' has nothing to keep: either answer is right.
      if (result.leftoversKept !== tree.keep && result.leftovers.length > 0) {
        return `leftoversKept ${result.leftoversKept}, expected ${tree.keep}`;
      }
      if (result.leftoversKept && !tree.keep) return 'leftoversKept under the kill policy';
      return null;
    case 'wait-delay':
      if (result.reason !== 'exit' || result.exitCode !== 0) return `reason ${result.reason} code ${result.exitCode}, expected exit 0`;
      return result.waitDelayExceeded ? null : 'waitDelayExceeded false, expected true';
    default:
      return `unknown fate ${tree.fate}`;
  }
}

async function withWatchdog(promise, ms, what) {
  let timer;
  try {
    return await Promise.race([
      promise,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`watchdog: ${what} within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const rand = prng(opts.seed);
  const cgroupsAtStart = treeCgroups();
  const stats = {
    started: 0,
    done: 0,
    fates: Object.fromEntries(FATES.map((f) => [f, 0])),
    survivors: [],
    zombies: [],
    orphanZombies: 0,
    orphanZombiesLast: [],
    misclassified: [],
    /** What was SIGKILLed by tag after a tree was found wrong. */
    killedAfter: [],
    rejected: [],
    hung: [],
    sweepSurvivors: [],
    leftoversSeen: 0,
  };
  const samples = [];
  const log = (s) => process.stderr.write(`soak: ${s}\n`);
  const t0 = performance.now();
  const loadStart = loadavg().map((x) => x.toFixed(1)).join(' / ');

  // RSS right after one GC swings by several MB with what V8 and malloc have
  // not returned yet: collect twice, then take the lowest of three readings
  // 100 ms apart (the same at every checkpoint).
  const sample = async (label) => {
    let rss = Infinity;
    for (let k = 0; k < 3; k++) {
      globalThis.gc?.();
      globalThis.gc?.();
      await sleep(100);
      rss = Math.min(rss, rssBytes());
    }
    const mem = process.memoryUsage();
    const s = {
      label,
      trees: stats.done,
      fds: openFdCount(),
      rss,
      heapUsed: mem.heapUsed,
      // What V8 holds for its heap, used or not: it keeps more of it after a
      // burst of allocation whatever the host keeps alive. RSS minus this is
      // what native code (the addon, libuv, Node's streams, malloc) holds.
      heapTotal: mem.heapTotal,
      outside: rss - mem.heapTotal,
      seconds: (performance.now() - t0) / 1000,
    };
    samples.push(s);
    return s;
  };

  // Baseline before any tree.
  await sample('start');

  // One byte a tree, allocated once: the soak's own bookkeeping must not grow
  // with the trees it measures.
  const settledTrees = new Uint8Array(opts.trees);
  async function one(i) {
    let dirty = false;
    const tree = makeTree(rand);
    stats.fates[tree.fate]++;
    const tag = `${RUN_ID}-soak-${i}`;
    const env = { ...process.env, [TAG_VAR]: tag };
    const controller = new AbortController();
    const options = { env, ...tree.options };
    if (tree.abortBy === 'signal') options.signal = controller.signal;
    const proc = spawn('sh', ['-c', tree.script], options);
    // Pids printed by the tree, with their start time read as they appear
    // (so a recycled pid is never mistaken for a survivor).
    const seen = new Map();
    const note = (pid) => {
      if (!pid || seen.has(pid)) return;
      seen.set(pid, readStat(pid)?.start);
    };
    note(proc.anchorPid);
    proc.once('spawn', (pid) => note(pid));
    let text = '';
    proc.stdout.setEncoding('utf8');
    proc.stdout.on('data', (chunk) => {
      text += chunk;
      for (const m of chunk.matchAll(/^PID \S+ (\d+)$/gm)) note(Number(m[1]));
    });
    proc.stderr.resume();
    try {
      if (tree.fate === 'cancel') {
        const deadline = performance.now() + 10_000;
        while (!/^READY$/m.test(text) && performance.now() < deadline) await sleep(5);
        await sleep(tree.cancelAfter);
        if (tree.abortBy === 'signal') controller.abort();
        else void proc.terminate({ grace: tree.options.interruptGrace }).catch(() => {});
      }
      let result;
      try {
        result = await withWatchdog(proc.result, 20_000, `tree ${i} (${tree.fate}) to settle`);
      } catch (err) {
        if (String(err.message).startsWith('watchdog')) throw err;
        stats.rejected.push({ i, fate: tree.fate, code: err.code, message: err.message });
        result = err.result;
      }
      if (result) {
        stats.leftoversSeen += result.leftovers.length;
        const why = expectedMismatch(tree, result);
        if (why) stats.misclassified.push({ i, fate: tree.fate, why, script: tree.script });
        if (result.leftoversKept) {
          try {
            await withWatchdog(proc.terminate(), 20_000, `terminate() of kept tree ${i}`);
          } catch (err) {
            if (String(err.message).startsWith('watchdog')) throw err;
            stats.rejected.push({ i, fate: tree.fate, code: err.code, message: `terminate(): ${err.message}` });
          }
        }
      }
      // Settled (and, if kept, terminated): everything it printed is gone and reaped.
      for (const [pid, start] of seen) {
        const st = readStat(pid);
        if (!st || start === undefined || st.start !== start) continue;
        const outsideParent = st.ppid !== process.pid && st.ppid !== proc.anchorPid;
        if (st.state === 'Z' && !REAPS_ORPHANS && outsideParent) {
          stats.orphanZombies++;
          stats.orphanZombiesLast.push({ pid, start, ppid: st.ppid });
          if (stats.orphanZombiesLast.length > ORPHANS_KEPT) stats.orphanZombiesLast.shift();
        } else if (st.state === 'Z') stats.zombies.push({ i, pid, ppid: st.ppid, fate: tree.fate });
        else if (st.state !== 'X') {
          // What it was, from outside: whether it still carries the tree's
          // tag (a member, not a process that took a recycled pid), its state,
          // parent and command line.
          const tagged = tagOf(pid) === tag;
          stats.survivors.push({ i, pid, fate: tree.fate, state: st.state, ppid: st.ppid, anchor: proc.anchorPid, tagged, command: cmdline(pid), script: tree.script });
          dirty = true;
        }
      }
    } catch (err) {
      stats.hung.push({ i, fate: tree.fate, message: err.message, script: tree.script });
      dirty = true;
    } finally {
      settledTrees[i] = 1;
      // A full /proc sweep per tree would load the host it measures: only
      // when something is known to be wrong (the periodic sweep finds the rest).
      if (dirty) {
        const killed = killTagged({ tag });
        if (killed.length > 0) stats.killedAfter.push({ i, killed: killed.map((p) => ({ pid: p.pid, command: p.command })) });
      }
    }
  }

  // From outside, independent of the printed pids: any process carrying the
  // tag of a tree that already settled is a survivor.
  function sweepSettled() {
    for (const p of sweepTagged(RUN_ID)) {
      const i = Number(/-soak-(\d+)$/.exec(p.tag)?.[1]);
      if (!settledTrees[i]) continue;
      stats.sweepSurvivors.push({ i, pid: p.pid, command: p.command });
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }

  let next = 0;
  let pauseAt = opts.checkpoint < opts.trees ? opts.checkpoint : Infinity;
  async function worker() {
    for (;;) {
      if (next >= opts.trees || next >= pauseAt) return;
      const i = next++;
      stats.started++;
      await one(i);
      stats.done++;
      if (stats.done % opts.every === 0 || stats.done === opts.trees) {
        sweepSettled();
        const secs = (performance.now() - t0) / 1000;
        const problems = stats.survivors.length + stats.sweepSurvivors.length + stats.zombies.length + stats.misclassified.length + stats.rejected.length + stats.hung.length;
        log(
          `${stats.done}/${opts.trees} trees, ${secs.toFixed(0)} s (${(stats.done / secs).toFixed(1)}/s), ` +
            `fds ${openFdCount()}, rss ${(rssBytes() / 2 ** 20).toFixed(1)} MB (V8 heap ${(process.memoryUsage().heapTotal / 2 ** 20).toFixed(1)} MB), problems ${problems}`,
        );
      }
    }
  }
  const pool = () => Promise.all(Array.from({ length: opts.concurrency }, worker));

  log(`${opts.trees} trees, concurrency ${opts.concurrency}, seed ${opts.seed}`);
  await pool();
  if (pauseAt !== Infinity) {
    // Drained: the 1k checkpoint, with nothing in flight.
    await sleep(200);
    const s = await sample(`after ${stats.done} trees`);
    log(`checkpoint at ${s.trees} trees: fds ${s.fds}, rss ${(s.rss / 2 ** 20).toFixed(1)} MB`);
    pauseAt = Infinity;
    await pool();
  }
  await sleep(200);
  const end = await sample(`after ${stats.done} trees`);

  // Final, uncached sweep for anything of this run, and the host's zombie children.
  const stray = sweepTagged(RUN_ID);
  if (stray.length > 0) killTagged({ prefix: RUN_ID });
  const hostZombies = zombieChildren();
  // The orphans' reaper has had until now, and 5 s more at most.
  const unreapedOrphans = () => stats.orphanZombiesLast.filter((z) => {
    const st = readStat(z.pid);
    return st?.state === 'Z' && st.start === z.start;
  });
  for (const until = performance.now() + 5000; unreapedOrphans().length > 0 && performance.now() < until; ) await sleep(100);
  const orphansLeft = unreapedOrphans();
  const cgroupsLeft = cgroupsAtStart ? [...treeCgroups()].filter((d) => !cgroupsAtStart.has(d)) : [];

  const check = samples.find((s) => s.trees === opts.checkpoint && s.label !== 'start') ?? samples[0];
  const pct = (a, b) => (b === 0 ? 0 : ((a - b) / b) * 100);
  const fdDelta = pct(end.fds, check.fds);
  const rssDelta = pct(end.rss, check.rss);
  const outsideDelta = pct(end.outside, check.outside);
  const heapDelta = pct(end.heapUsed, check.heapUsed);
  // "Flat": no growth beyond 5% from the checkpoint to the end (shrinking is
  // fine) of the fds, of the heap the host uses and of what native code
  // holds. The RSS is reported whole, with V8's reserve beside it: V8 keeps
  // more heap after bursts of allocation, whatever the host keeps alive.
  const flat = fdDelta <= 5 && outsideDelta <= 5 && heapDelta <= 5;
  const signed = (x) => `${x >= 0 ? '+' : ''}${x.toFixed(1)}%`;
  const survivors = stats.survivors.length + stats.sweepSurvivors.length + stray.length;
  const zombies = stats.zombies.length + hostZombies.length;
  const mb = (b) => (b / 2 ** 20).toFixed(1);
  const lines = [
    `# cordon soak: ${stats.done} trees, concurrency ${opts.concurrency}, seed ${opts.seed}, tier ${TIER}`,
    '',
    `Duration ${end.seconds.toFixed(0)} s (${(stats.done / end.seconds).toFixed(1)} trees/s). Fates: ` +
      FATES.map((f) => `${f} ${stats.fates[f]}`).join(', ') +
      `. Leftovers reported by cordon: ${stats.leftoversSeen}. Load average (1/5/15 min) at start ${loadStart}, ` +
      `at end ${loadavg().map((x) => x.toFixed(1)).join(' / ')}.`,
    '',
    '| check | result |',
    '| --- | --- |',
    `| survivors (printed pids alive after settle; tagged processes of settled trees in the periodic sweeps; anything tagged at the end) | ${survivors} ${survivors === 0 ? '(ok)' : '(FAIL)'} |`,
    `| zombies (printed pids unreaped after settle, plus the host's zombie children) | ${zombies} ${zombies === 0 ? '(ok)' : '(FAIL)'} |`,
    ...(REAPS_ORPHANS
      ? []
      : [
          `| zombies of orphans, whose reaper is init or a subreaper above the host (this tier: reapsOrphans false; not counted above) | ${stats.orphanZombies} seen after settle; of the last ${stats.orphanZombiesLast.length}, ${orphansLeft.length} still unreaped 5 s after the end${orphansLeft.length ? ` (reaper pid(s) ${[...new Set(orphansLeft.map((z) => z.ppid))].join(', ')})` : ''} |`,
        ]),
    ...(cgroupsAtStart ? [`| cgroups of settled trees left behind (the cgroup tier) | ${cgroupsLeft.length} ${cgroupsLeft.length === 0 ? '(ok)' : '(FAIL)'} |`] : []),
    `| misclassified results | ${stats.misclassified.length} |`,
    `| rejected results (cleanup failures) | ${stats.rejected.length} |`,
    `| trees that did not settle within 20 s | ${stats.hung.length} |`,
    `| host fds: start / ${check.label} / ${end.label} | ${samples[0].fds} / ${check.fds} / ${end.fds} (${fdDelta >= 0 ? '+' : ''}${fdDelta.toFixed(1)}%) |`,
    `| host RSS: start / ${check.label} / ${end.label} | ${mb(samples[0].rss)} / ${mb(check.rss)} / ${mb(end.rss)} MB (${signed(rssDelta)}) |`,
    `| of it V8's heap, reserved (heapTotal): start / ${check.label} / ${end.label} | ${mb(samples[0].heapTotal)} / ${mb(check.heapTotal)} / ${mb(end.heapTotal)} MB |`,
    `| of it outside V8's heap (RSS - heapTotal: node's own pages, the addon, libuv, malloc) | ${mb(samples[0].outside)} / ${mb(check.outside)} / ${mb(end.outside)} MB (${signed(outsideDelta)}) |`,
    `| host heap used: start / ${check.label} / ${end.label} | ${mb(samples[0].heapUsed)} / ${mb(check.heapUsed)} / ${mb(end.heapUsed)} MB (${signed(heapDelta)}) |`,
    `| flat: fds, heap used and memory outside V8's heap grew at most 5% from ${check.trees} to ${end.trees} trees | ${flat ? 'yes' : 'NO'} |`,
    '',
  ];
  for (const [name, list] of [
    ['survivors', stats.survivors],
    ['survivors found by the sweeps', stats.sweepSurvivors],
    ['zombies', stats.zombies],
    ['misclassified', stats.misclassified],
    ['rejected', stats.rejected],
    ['hung', stats.hung],
    ['killed by tag after a problem', stats.killedAfter],
  ]) {
    if (list.length > 0) lines.push(`${name} (first 5): ${JSON.stringify(list.slice(0, 5))}`, '');
  }
  if (stray.length > 0) lines.push(`tagged at the end (SIGKILLed): ${JSON.stringify(stray.slice(0, 10))}`, '');
  if (cgroupsLeft.length > 0) lines.push(`cgroups left (first 10): ${cgroupsLeft.slice(0, 10).join(', ')}`, '');
  process.stdout.write(lines.join('\n'));
  const ok =
    survivors === 0 && zombies === 0 && cgroupsLeft.length === 0 && stats.hung.length === 0 && stats.misclassified.length === 0 && stats.rejected.length === 0 && flat;
  process.exit(ok ? 0 : 1);
}

main().catch((err) => {
  process.stderr.write(`soak: ${err.stack ?? err}\n`);
  killTagged({ prefix: RUN_ID });
  process.exit(1);
});
