// The cgroup tier's directory names (issue 10, part 5): a tree's cgroup used
// to be cordon-<anchor pid>, so a directory left by a killed anchor (whose
// pid is later reused; pid_max may be 32768) or made on purpose by any
// same-user process failed the next spawn with EEXIST. Names now carry a
// random suffix, and empty tree cgroups whose anchor is gone are removed.
// And when the default tier's cgroup cannot be made at spawn time, the tree
// runs in the next tier instead of not at all.
import { spawn as spawnChild, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, onTestFinished } from 'vitest';
import { spawn } from '../lib/index.js';
import { cgroupMount, cgroupOf } from './helpers/cgroup.js';
import { repoRoot } from './helpers/fixtures.js';
import { ensureDist, readReport } from './helpers/host.js';
import { readStat, sleep, useTag, waitFor, within } from './helpers/procs.js';
import { itWhere, tier } from './helpers/tier.js';
import { collect, outcome } from './helpers/trees.js';

const applies = tier === 'cgroup';
const why = `the ${tier} tier makes no cgroup`;

function hostCgroupDir(): string {
  const own = cgroupOf('self')!;
  return own === '/' ? cgroupMount()! : cgroupMount()! + own;
}

/** Made by the test, removed by it whatever happens (registered before it is made). */
function makeDir(path: string, agoSeconds = 0): void {
  onTestFinished(() => {
    try {
      rmdirSync(path);
    } catch {
      // removed already (by cordon, as the test wants)
    }
  });
  mkdirSync(path);
  if (agoSeconds > 0) {
    const then = Date.now() / 1000 - agoSeconds;
    utimesSync(path, then, then);
  }
}

/** A pid no process has now: that of a `true` that has exited (and was reaped). */
function deadPid(): number {
  const r = spawnSync('true');
  expect(r.status).toBe(0);
  expect(readStat(r.pid!)).toBeUndefined();
  return r.pid!;
}

describe(`cgroup names, ${tier} tier`, () => {
  // proves C1
  itWhere(applies, 'cordon-<pid> directories already there for the next pids do not stop a spawn', why, async () => {
    const t = useTag();
    const dir = hostCgroupDir();
    // The anchor's pid cannot be chosen, so the old-style name is taken for
    // each of the next pids; the attempt counts when the anchor's pid was
    // among them (other processes may fork meanwhile: retried). The anchor
    // must start after the names are taken: no warm anchor (started ahead of
    // need, it would have made its cgroup already) for this test.
    const warm = process.env.CORDON_WARM;
    process.env.CORDON_WARM = '0';
    onTestFinished(() => {
      if (warm === undefined) delete process.env.CORDON_WARM;
      else process.env.CORDON_WARM = warm;
    });
    const WINDOW = 48;
    for (let attempt = 0; attempt < 5; attempt++) {
      const last = Number(readFileSync('/proc/sys/kernel/ns_last_pid', 'utf8'));
      const taken: number[] = [];
      for (let pid = last + 1; pid <= last + WINDOW; pid++) {
        if (existsSync(`${dir}/cordon-${pid}`)) continue;
        makeDir(`${dir}/cordon-${pid}`);
        taken.push(pid);
      }
      const proc = spawn('sh', ['-c', 'echo "PID root $$"; echo READY; exec sleep 300'], { env: t.env });
      const started = await outcome(proc.started, 10_000, 'the spawn', t.tag);
      // Taken only as long as needed: other runs on this machine share the directory.
      for (const pid of taken) rmdirSync(`${dir}/cordon-${pid}`);
      if (!taken.includes(proc.anchorPid!)) {
        await within(proc.kill(), 10_000, 'kill()', t.tag);
        continue;
      }
      expect(started.ok, `spawn with cordon-${proc.anchorPid} already there: ${started.ok ? '' : String((started as { error: unknown }).error)}`).toBe(true);
      await collect(proc, t.tag);
      const own = cgroupOf(proc.pid!)!;
      expect(own).toMatch(new RegExp(`/cordon-${proc.anchorPid}-[0-9a-f]{16}$`));
      await within(proc.kill(), 10_000, 'kill()', t.tag);
      return;
    }
    throw new Error(`in 5 attempts the anchor's pid never fell among the ${WINDOW} pids taken in advance`);
  });

  // proves C9
  itWhere(applies, 'an empty tree cgroup whose anchor is gone is removed when the next anchor starts; live or populated ones are not', why, async () => {
    const t = useTag();
    const dir = hostCgroupDir();
    const gone = deadPid();
    const stale = [`${dir}/cordon-${gone}`, `${dir}/cordon-${gone}-00000000deadbeef`];
    for (const p of stale) makeDir(p, 60);
    // Not stale: its "anchor" pid is a live process (this test worker).
    const live = `${dir}/cordon-${process.pid}-00000000feedface`;
    makeDir(live, 60);

    // The next anchor to start: this tree's, or (a warm anchor, started
    // ahead of need, took it) the one started once it has launched it.
    const proc = spawn('sh', ['-c', 'echo "PID root $$"; echo READY; exec sleep 300'], { env: t.env });
    await collect(proc, t.tag);
    await waitFor(() => stale.every((p) => !existsSync(p)), { timeout: 5000, what: `${stale.join(', ')} (empty, anchor ${gone} gone) to be removed`, watch: t.tag });
    expect(existsSync(live), `${live} (its pid is alive) is kept`).toBe(true);
    // A populated cgroup is never removed (the kernel refuses): the live tree's own.
    expect(existsSync(`${cgroupMount()}${cgroupOf(proc.pid!)}`)).toBe(true);
    await within(proc.kill(), 10_000, 'kill()', t.tag);
    await waitFor(() => !readdirSync(dir).some((n) => n.startsWith(`cordon-${proc.anchorPid}-`)), {
      timeout: 5000,
      what: 'the tree cgroup to be removed with the tree',
      watch: t.tag,
    });
  });
});

describe(`the default tier falls back when its cgroup cannot be made, ${tier} tier`, () => {
  // proves C1
  itWhere(applies, 'cgroup.max.descendants reached after the probe: the default spawns in the subreaper tier and says so; tier: "cgroup" stays strict', why, async () => {
    const t = useTag();
    await ensureDist();
    // A cgroup of the test's own for a host of its own, so that the limit
    // touches nobody else: the host is moved into it before it loads cordon;
    // cordon probes it writable (it is), then cannot make a child cgroup.
    const box = `${hostCgroupDir()}/test-fallback-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
    onTestFinished(async () => {
      // After the host (tagged, killed by useTag's cleanup or exited) is gone.
      for (let i = 0; i < 100 && existsSync(box); i++) {
        try {
          rmdirSync(box);
        } catch {
          await sleep(20);
        }
      }
    });
    mkdirSync(box);
    writeFileSync(`${box}/cgroup.max.descendants`, '0');
    const script = `
      const { capabilities, spawn } = await import(${JSON.stringify(join(repoRoot, 'dist', 'index.js'))});
      const report = { probed: capabilities().tier };
      const proc = spawn('sh', ['-c', 'grep "^0::" /proc/self/cgroup'], {});
      let printed = '';
      proc.stdout.on('data', (d) => (printed += d));
      try {
        const r = await proc.result;
        report.byDefault = { procTier: proc.tier, resultTier: r.tier, exitCode: r.exitCode };
        report.commandCgroup = printed.trim();
      } catch (e) {
        report.byDefault = { code: e.code, message: e.message };
      }
      try {
        await spawn('true', [], { tier: 'cgroup' }).started;
        report.asked = 'ran';
      } catch (e) {
        report.asked = { code: e.code, errno: e.errno };
      }
      console.log('REPORT ' + JSON.stringify(report));
    `;
    const env = { ...t.env };
    delete env.CORDON_TIER; // the default tier, not one asked for
    const host = spawnChild('sh', ['-c', 'echo $$ > "$BOX/cgroup.procs" && exec "$NODE" --input-type=module -e "$SCRIPT"'], {
      env: { ...env, BOX: box, NODE: process.execPath, SCRIPT: script },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const hostExit = new Promise((resolve) => host.once('exit', resolve));
    const report = await readReport(host);
    await within(hostExit, 10_000, 'the host to exit', t.tag);
    expect(report.probed, 'the host probed its cgroup as usable').toBe('cgroup');
    expect(report.byDefault, 'the default tier, its cgroup refused').toEqual({ procTier: 'subreaper', resultTier: 'subreaper', exitCode: 0 });
    // Seen by the command itself: it ran in the host's cgroup (the box), in no tree cgroup.
    expect(report.commandCgroup, "the command's own /proc/self/cgroup").toBe(`0::${box.slice(cgroupMount()!.length)}`);
    expect(report.asked, 'tier: "cgroup" asked for').toMatchObject({ code: 'ERR_CORDON_CONTAINMENT' });
  });
});
