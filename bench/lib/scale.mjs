// Scale (issue #13): does the cost of stopping a tree grow with the host?
//
// For each ballast level (idle unrelated processes, bench/lib/ballast.mjs), for
// 1, 50 and 200 trees stopped at once, and for each method:
//   cgroup, subreaper   cordon spawn({ tier }) + proc.terminate() (grace 3 s)
//   group kill          spawn({ detached: true }) + process.kill(-pid, 'SIGTERM'),
//                       the physical reference: these trees never leave their
//                       group, so it leaks nothing here
// each tree being `sh` + a background `sleep` + a child `sh` with its own
// `sleep`, all of which print their pids. Then, without ballast, a fork storm
// stopped mid-storm by each method (measureStorm).
//
// Measured from outside, at a cost that follows the trees, not the host (no
// /proc walk while timing: the ballast would make the instrument the load):
//   settled     t0 (the stop calls, one loop) to the last completion (cordon's
//               proc.result, child_process 'close')
//   quiescent   t0 to the first check where every printed pid is gone (its
//               /proc/<pid>/stat missing, a zombie, or another start time)
//   anchor CPU  per tree, from t0 until the anchor is gone: each anchor's
//               /proc/<anchorPid>/schedstat (ns) is sampled every check (4 ms;
//               1 ms while at most 5 anchors live) while it lives; the last sample is final when it was taken of the
//               zombie, otherwise a lower bound short of at most one check
//               interval (the share of exact readings is reported)
//   host Δcutime per tree, the cross-check: the bench's own cutime + cstime
//               (10 ms ticks) from before the trees start to after every one
//               is reaped: the anchors' whole lives and whatever they reaped
//               (the roots), or for the group kill, the trees themselves
//   late        results settled later than grace + 100 ms after t0
//   zombies     printed pids and anchors still unreaped 50 ms after the cell
//               (those whose parent is init, which reaps lazily here, apart)
import { spawn as spawnChild } from 'node:child_process';
import { spawn as cordonSpawn } from '../../dist/index.js';
import { childrenCpuMs, cpuOf, findTagged, hostProcessCount, killTagged, newTag, readStat, sleep, taggedEnv, zombieChildren } from './procs.mjs';

// Prints every pid of the tree, then READY.
const TREE =
  'sleep 300 & echo "PID $!"; sh -c \'sleep 300 & echo "PID $!"; wait\' & echo "PID $!"; echo "PID $$"; echo READY; wait';
const TREE_PIDS = 4;
export const GRACE_MS = 3000; // terminate()'s default teardown grace

export const METHODS = [
  { name: 'group kill', kind: 'group', how: "spawn({ detached: true }) + process.kill(-pid, 'SIGTERM')" },
  { name: 'cgroup', kind: 'cordon', tier: 'cgroup', how: "cordon spawn({ tier: 'cgroup' }) + terminate()" },
  { name: 'subreaper', kind: 'cordon', tier: 'subreaper', how: "cordon spawn({ tier: 'subreaper' }) + terminate()" },
  { name: 'process-group', kind: 'cordon', tier: 'process-group', how: "cordon spawn({ tier: 'process-group' }) + terminate()" },
];

function settleTime(promise) {
  return promise.then(
    () => performance.now(),
    () => performance.now(),
  );
}

function startTree(method, env) {
  let text = '';
  let handle;
  if (method.kind === 'cordon') {
    const proc = cordonSpawn('sh', ['-c', TREE], { env, tier: method.tier });
    proc.stdout.setEncoding('utf8').on('data', (c) => (text += c));
    proc.stderr.resume();
    handle = {
      anchorPid: proc.anchorPid,
      completion: settleTime(proc.result),
      cancel: () => void proc.terminate().catch(() => {}),
    };
  } else {
    const child = spawnChild('sh', ['-c', TREE], { env, detached: true });
    child.stdout.setEncoding('utf8').on('data', (c) => (text += c));
    child.stderr.resume();
    handle = {
      anchorPid: undefined,
      completion: new Promise((resolve) => {
        child.once('close', () => resolve(performance.now()));
        child.once('error', () => resolve(performance.now()));
      }),
      cancel: () => {
        try {
          process.kill(-child.pid, 'SIGTERM');
        } catch {
          // the group is gone
        }
      },
    };
  }
  handle.ready = () => /^READY$/m.test(text) && [...text.matchAll(/^PID (\d+)$/gm)].length >= TREE_PIDS;
  handle.pids = () => [...text.matchAll(/^PID (\d+)$/gm)].map((m) => Number(m[1]));
  return handle;
}

function gone(pid, start) {
  const st = readStat(pid);
  return !st || st.start !== start || st.state === 'Z' || st.state === 'X';
}

/** One stop of `trees` trees with `method`; the record of the cell. */
async function stopOnce(method, trees, bound) {
  const tag = newTag(`scale${method.kind}`);
  const env = taggedEnv(tag);
  const rec = {};
  const cpu0 = childrenCpuMs();
  const handles = [];
  let cancelled = false;
  try {
    for (let i = 0; i < trees; i++) handles.push(startTree(method, env));
    const readyBy = performance.now() + 60_000;
    while (!handles.every((h) => h.ready())) {
      if (performance.now() > readyBy) throw new Error('not every tree printed READY within 60 s');
      await sleep(5);
    }
    // Every printed pid with its start time (a recycled pid is not the member).
    const members = [];
    for (const h of handles) for (const pid of h.pids()) members.push({ pid, start: readStat(pid)?.start });
    const anchors = handles
      .filter((h) => h.anchorPid !== undefined)
      .map((h) => ({ pid: h.anchorPid, start: readStat(h.anchorPid)?.start, at0: cpuOf(h.anchorPid)?.ms, last: undefined, exact: false, gone: false }));
    let settledAt = null;
    Promise.all(handles.map((h) => h.completion)).then((times) => {
      settledAt = Math.max(...times);
      rec.settleTimes = times;
    });

    const t0 = performance.now();
    cancelled = true;
    for (const h of handles) h.cancel();
    let live = members.filter((m) => m.start !== undefined);
    let quietAt = null;
    const deadline = t0 + bound;
    for (;;) {
      const now = performance.now();
      for (const a of anchors) {
        if (a.gone) continue;
        const c = cpuOf(a.pid);
        if (!c || c.start !== a.start) a.gone = true;
        else {
          a.last = c.ms;
          a.exact = c.state === 'Z';
        }
      }
      if (quietAt === null) {
        live = live.filter((m) => !gone(m.pid, m.start));
        if (live.length === 0) quietAt = now;
      }
      if (quietAt !== null && settledAt !== null && anchors.every((a) => a.gone)) break;
      if (now > deadline) break;
      // Few anchors: sample them every ~1 ms (a stop can take less than 4).
      await sleep(anchors.filter((a) => !a.gone).length <= 5 ? 1 : 4);
    }
    rec.settledMs = settledAt === null ? null : settledAt - t0;
    rec.quiescentMs = quietAt === null ? null : quietAt - t0;
    rec.late = settledAt === null ? trees : rec.settleTimes.filter((t) => t - t0 > GRACE_MS + 100).length;
    rec.leftBehind = live.length;
    if (anchors.length > 0) {
      const measured = anchors.filter((a) => a.at0 !== undefined && a.last !== undefined);
      rec.anchorCpuMsPerTree = measured.reduce((n, a) => n + (a.last - a.at0), 0) / Math.max(1, measured.length);
      rec.anchorCpuExact = measured.filter((a) => a.exact).length / Math.max(1, measured.length);
      rec.anchorsNotGone = anchors.filter((a) => !a.gone).length;
    }
    // Reaped by now? Zombies among the members and the anchors (same start time).
    await sleep(50);
    // A zombie whose parent is init waits on init (which here reaps lazily), not on the method: counted apart.
    const zombie = (p) => {
      const st = readStat(p.pid);
      return st?.state === 'Z' && st.start === p.start ? st : undefined;
    };
    const z = [...members, ...anchors].map(zombie).filter(Boolean);
    rec.zombies = z.filter((st) => st.ppid !== 1).length;
    rec.initZombies = z.length - rec.zombies;
    rec.hostCpuMsPerTree = (childrenCpuMs() - cpu0) / trees;
  } catch (err) {
    rec.error = err.message;
  } finally {
    // Stopped once only: a second kill(-pgid) could reach a recycled group.
    if (!cancelled) for (const h of handles) h.cancel();
    if (rec.error || rec.leftBehind > 0 || rec.anchorsNotGone > 0) {
      const killed = killTagged({ tag });
      if (killed.length > 0) rec.killedByBench = killed.length;
    }
  }
  return rec;
}

function median(values) {
  const s = values.filter((v) => v !== null && v !== undefined).sort((a, b) => a - b);
  return s.length === 0 ? null : s[(s.length - 1) >> 1];
}

/**
 * The whole scale section. `levels`: ballast sizes (ascending); `treeCounts`;
 * `reps`: stops per cell for a single tree (one stop for more trees).
 */
export async function measureScale({ ballast, levels, treeCounts, methods, reps, bound, log }) {
  await ballast.clear();
  const out = { levels: [], treeCounts, methods: methods.map(({ name, how }) => ({ name, how })), reps, bound, graceMs: GRACE_MS, cells: [] };
  for (const level of levels) {
    const t = performance.now();
    await ballast.grow(level);
    await sleep(level > 0 ? 1000 : 0); // let the fork burst settle
    const hostProcesses = hostProcessCount();
    out.levels.push({ ballast: level, hostProcesses, startedInMs: performance.now() - t });
    log(`scale: ballast ${level} (${hostProcesses} processes on the host, started in ${((performance.now() - t) / 1000).toFixed(1)} s)`);
    for (const trees of treeCounts) {
      for (const method of methods) {
        const n = trees === 1 ? reps : 1;
        const runs = [];
        for (let r = 0; r < n; r++) {
          runs.push(await stopOnce(method, trees, bound));
          await sleep(100);
        }
        const pick = (k) => median(runs.map((x) => x[k]));
        const cell = {
          method: method.name,
          ballast: level,
          trees,
          runs: runs.length,
          settledMs: pick('settledMs'),
          quiescentMs: pick('quiescentMs'),
          anchorCpuMsPerTree: pick('anchorCpuMsPerTree'),
          anchorCpuExact: pick('anchorCpuExact'),
          hostCpuMsPerTree: pick('hostCpuMsPerTree'),
          late: runs.reduce((s, x) => s + (x.late ?? 0), 0),
          results: runs.length * trees,
          zombies: runs.reduce((s, x) => s + (x.zombies ?? 0), 0),
          initZombies: runs.reduce((s, x) => s + (x.initZombies ?? 0), 0),
          leftBehind: runs.reduce((s, x) => s + (x.leftBehind ?? 0), 0),
          errors: runs.filter((x) => x.error).map((x) => x.error),
        };
        out.cells.push(cell);
        log(
          `scale: ${method.name}, ballast ${level}, ${trees} tree(s): settled ${fmt(cell.settledMs)}, quiet ${fmt(cell.quiescentMs)}` +
            (cell.anchorCpuMsPerTree !== null ? `, anchor CPU ${cell.anchorCpuMsPerTree.toFixed(1)} ms/tree` : '') +
            `, late ${cell.late}/${cell.results}, zombies ${cell.zombies} (+${cell.initZombies} of init), left ${cell.leftBehind}${cell.errors.length ? `, errors: ${cell.errors.join('; ')}` : ''}`,
        );
      }
    }
  }
  await ballast.clear();
  out.hostZombieChildren = zombieChildren().length;
  return out;
}

// The fork storm of test/fixtures/fork-storm.sh: a doubling fork bomb (depth
// 6, its leaves sleep) beside a loop starting `sh -c 'sleep 300 & sleep 300'`
// children as fast as it can (at most 1000). Nothing in it exits on its own,
// nothing leaves the root's process group, so a group kill leaks nothing.
const STORM = `
bomb() {
  if [ "$1" -gt 0 ]; then bomb $(($1 - 1)) & bomb $(($1 - 1)) & wait; else exec sleep 300; fi
}
bomb 6 &
n=0
while [ "$n" -lt 1000 ]; do sh -c 'sleep 300 & sleep 300' & n=$((n + 1)); done
wait`;
/** The storm is stopped once this many of its processes are counted (by tag, from outside). */
export const STORM_MID = 50;

/**
 * One stop of a fork storm mid-storm with `method`. Quiescence is checked by
 * tag (a walk of /proc every 5 ms: the storm's members print nothing), so the
 * section runs it without ballast.
 */
async function stormOnce(method, bound) {
  const tag = newTag(`storm${method.kind}`);
  const env = taggedEnv(tag);
  const rec = {};
  let cancel;
  let completion;
  let cancelled = false;
  try {
    if (method.kind === 'cordon') {
      const proc = cordonSpawn('sh', ['-c', STORM], { env, tier: method.tier });
      proc.stdout.resume();
      proc.stderr.resume();
      completion = settleTime(proc.result);
      cancel = () => void proc.terminate().catch(() => {});
    } else {
      const child = spawnChild('sh', ['-c', STORM], { env, detached: true });
      child.stdout.resume();
      child.stderr.resume();
      completion = new Promise((resolve) => {
        child.once('close', () => resolve(performance.now()));
        child.once('error', () => resolve(performance.now()));
      });
      cancel = () => {
        try {
          process.kill(-child.pid, 'SIGTERM');
        } catch {
          // the group is gone
        }
      };
    }
    const growBy = performance.now() + 30_000;
    while ((rec.membersAtStop = findTagged({ tag, maxAgeMs: 0 }).length) <= STORM_MID) {
      if (performance.now() > growBy) throw new Error(`the storm did not grow past ${STORM_MID} processes within 30 s`);
      await sleep(2);
    }
    let settledAt = null;
    completion.then((t) => (settledAt = t));
    const t0 = performance.now();
    cancelled = true;
    cancel();
    let quietAt = null;
    let peak = rec.membersAtStop;
    while (performance.now() < t0 + bound) {
      if (quietAt === null) {
        const n = findTagged({ tag, maxAgeMs: 0 }).length;
        peak = Math.max(peak, n);
        if (n === 0) quietAt = performance.now();
      }
      if (quietAt !== null && settledAt !== null) break;
      await sleep(5);
    }
    rec.peakMembers = peak;
    rec.settledMs = settledAt === null ? null : settledAt - t0;
    rec.quiescentMs = quietAt === null ? null : quietAt - t0;
    rec.late = settledAt === null || settledAt - t0 > GRACE_MS + 100 ? 1 : 0;
  } catch (err) {
    rec.error = err.message;
  } finally {
    if (!cancelled) cancel?.();
    const killed = killTagged({ tag });
    rec.leftBehind = killed.length;
  }
  return rec;
}

/**
 * The fork storm beside the group kill (issue #13: within 2x of it): each
 * method stops `reps` storms (median), without ballast.
 */
export async function measureStorm({ ballast, methods, reps, bound, log, settleTo }) {
  await ballast.clear();
  // The ballast's killed sleeps linger as init's zombies for a while (init
  // reaps lazily here), and every walk by tag would read them all.
  const quietBy = performance.now() + 20_000;
  while (settleTo !== undefined && hostProcessCount() > settleTo + 200 && performance.now() < quietBy) await sleep(100);
  const out = { reps, bound, graceMs: GRACE_MS, mid: STORM_MID, hostProcesses: hostProcessCount(), cells: [] };
  for (const method of methods) {
    const runs = [];
    for (let r = 0; r < reps; r++) {
      runs.push(await stormOnce(method, bound));
      await sleep(200);
    }
    const pick = (k) => median(runs.map((x) => x[k]));
    const cell = {
      method: method.name,
      runs: runs.length,
      settledMs: pick('settledMs'),
      quiescentMs: pick('quiescentMs'),
      membersAtStop: pick('membersAtStop'),
      peakMembers: pick('peakMembers'),
      late: runs.reduce((n, x) => n + (x.late ?? 0), 0),
      leftBehind: runs.reduce((n, x) => n + (x.leftBehind ?? 0), 0),
      errors: runs.filter((x) => x.error).map((x) => x.error),
    };
    out.cells.push(cell);
    log(
      `scale: fork storm, ${method.name}: settled ${fmt(cell.settledMs)}, quiet ${fmt(cell.quiescentMs)}, ` +
        `${cell.membersAtStop} members at t0 (peak ${cell.peakMembers}), left ${cell.leftBehind}${cell.errors.length ? `, errors: ${cell.errors.join('; ')}` : ''}`,
    );
  }
  return out;
}

/** Each cordon tier's fork storm against the group kill's, from one run. */
export function stormRatios(storm) {
  const g = storm?.cells.find((c) => c.method === 'group kill');
  if (!g) return [];
  const ratio = (a, b) => (a == null || b == null || b === 0 ? null : a / b);
  return storm.cells
    .filter((c) => c.method !== 'group kill')
    .map((c) => ({ method: c.method, settled: ratio(c.settledMs, g.settledMs), quiescent: ratio(c.quiescentMs, g.quiescentMs) }));
}

function fmt(ms) {
  return ms === null || ms === undefined ? 'never' : `${ms.toFixed(1)} ms`;
}

/** The ratios issue #13 sets goals on, from one run's scale section. */
export function scaleRatios(scale) {
  const cell = (method, ballast, trees) => scale.cells.find((c) => c.method === method && c.ballast === ballast && c.trees === trees);
  const lo = scale.levels[0]?.ballast;
  const hi = scale.levels[scale.levels.length - 1]?.ballast;
  const ratio = (a, b) => (a == null || b == null || b === 0 ? null : a / b);
  const byBallast = [];
  for (const m of scale.methods) {
    for (const trees of scale.treeCounts) {
      const a = cell(m.name, hi, trees);
      const b = cell(m.name, lo, trees);
      if (!a || !b) continue;
      byBallast.push({ method: m.name, trees, settled: ratio(a.settledMs, b.settledMs), quiescent: ratio(a.quiescentMs, b.quiescentMs) });
    }
  }
  const vsGroup = [];
  for (const lvl of scale.levels) {
    for (const trees of scale.treeCounts.filter((t) => t > 1)) {
      const g = cell('group kill', lvl.ballast, trees);
      if (!g) continue;
      for (const m of scale.methods.filter((x) => x.name !== 'group kill')) {
        const c = cell(m.name, lvl.ballast, trees);
        if (!c) continue;
        vsGroup.push({ method: m.name, ballast: lvl.ballast, trees, settled: ratio(c.settledMs, g.settledMs), quiescent: ratio(c.quiescentMs, g.quiescentMs) });
      }
    }
  }
  return { lo, hi, byBallast, vsGroup };
}
