// CONTRACT C12: resource limits per tree. Where the tier enforces them
// (capabilities().guarantees.limits), the kernel stops a fork loop at
// `processes`, ends a memory hog at `memory` and throttles a busy loop to
// `cpu`; the result classifies it and reports usage; the tree's per-tree
// cgroups are gone afterwards. Everything is observed from outside: tagged
// processes in /proc, the cgroups a member is in (/proc/<pid>/cgroup, read
// from the host's cgroup namespace) and their files. Where the tier does not
// enforce limits, it says so and 'strict' refuses before anything runs.
import { existsSync, mkdirSync, readFileSync, rmdirSync, utimesSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { run, spawn, registry, type ContainedProcess } from '../lib/index.js';
import { cgroupMount, treeCgroupDirs, v1OwnDir, v2Delegated } from './helpers/cgroup.js';
import { ensureDist, startCli, startHost } from './helpers/host.js';
import { capture, fixture } from './helpers/fixtures.js';
import { useTag, waitFor, within, type Tagged } from './helpers/procs.js';
import { missing } from './helpers/requirements.js';
import { caps, itWhere, tier } from './helpers/tier.js';

const enforced = caps.guarantees.limits;
const notEnforced = `the ${tier} tier does not enforce limits on this host (asserted below)`;
// The fork loops (fixtures/fork-loop.pl) give up at the first fork the
// kernel refuses, exit 2 and say `fork: <error>`, whatever /bin/sh is.
const noPerl = missing('perl');
const forkLoopRuns = enforced && noPerl === undefined;
const forkLoopWhy = enforced ? (noPerl ?? '') : notEnforced;

/** The cgroups a live process is in, per hierarchy ('0' for v2, else the controllers), as absolute paths. */
function cgroupsOf(pid: number): Map<string, string> {
  const out = new Map<string, string>();
  const roots: Record<string, string | undefined> = { '0': cgroupMount(), memory: mountOf('memory'), pids: mountOf('pids'), cpu: mountOf('cpu') };
  for (const line of readFileSync(`/proc/${pid}/cgroup`, 'utf8').trim().split('\n')) {
    const [id, controllers = '', ...rest] = line.split(':');
    const path = rest.join(':');
    const key = id === '0' ? '0' : ['memory', 'pids', 'cpu'].find((c) => controllers.split(',').includes(c));
    const root = key && roots[key];
    if (key && root) out.set(key, path === '/' ? root : root + path);
  }
  return out;
}

function mountOf(controller: string): string | undefined {
  const f = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' '))
    .find((x) => x.includes('-') && x[x.indexOf('-') + 1] === 'cgroup' && (x[x.indexOf('-') + 3] ?? '').split(',').includes(controller));
  return f?.[4];
}

/** The per-tree cgroups of the tree whose anchor is `anchorPid`, that still exist. */
function treeDirsOf(anchorPid: number): string[] {
  return treeCgroupDirs().filter((d) => d.split('/').pop()!.startsWith(`cordon-${anchorPid}-`));
}

/** After the result: not one per-tree cgroup of this tree is left, in v2 or any v1 hierarchy. */
function expectNoCgroupLeft(proc: ContainedProcess, seen: string[]): void {
  expect(treeDirsOf(proc.anchorPid!), 'per-tree cgroups left behind').toEqual([]);
  for (const dir of seen) expect(existsSync(dir), `${dir} still exists`).toBe(false);
}

async function rootCgroups(proc: ContainedProcess, t: Tagged): Promise<Map<string, string>> {
  const pid = await within(proc.started, 10_000, 'the command to start', t.tag);
  return cgroupsOf(pid);
}

describe('C12: resource limits', () => {
  // proves C12 (own report): typed input errors
  it('invalid limits are typed input errors before anything runs', () => {
    const bad: unknown[] = [
      { memory: '12Q' }, { memory: -1 }, { memory: 100 }, { memory: 1.5 }, { memory: true },
      { processes: 0 }, { processes: 2.5 }, { processes: '20' },
      { cpu: 0 }, { cpu: -0.5 }, { cpu: Infinity }, { cpu: '0.5' },
      { disk: 10 }, 'lots', null,
    ];
    for (const limits of bad) {
      let err: unknown;
      try {
        spawn('sh', ['-c', 'exit 0'], { limits: limits as never });
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(limits)).toMatchObject({ stage: 'input', code: expect.stringMatching(/^ERR_INVALID_ARG_(VALUE|TYPE)$/) });
    }
    expect(() => registry.owner(`limits-bad-${process.pid}`, { limits: { processes: -3 } })).toThrow(/limits\.processes/);
  });

  // proves C12: refused, and nothing ran
  it(`a tier that cannot enforce limits says so, and 'strict' refuses them before anything runs`, async () => {
    // The process-group tier has no per-tree kernel limits anywhere (the macOS strategy).
    const t = useTag();
    expect(() => spawn('sh', ['-c', 'echo ran'], { env: t.env, tier: 'process-group', limits: { processes: 20 } })).toThrow(
      expect.objectContaining({ code: 'ERR_CORDON_CONTAINMENT', stage: 'input' }),
    );
    expect(t.procs()).toEqual([]);
    if (!enforced) {
      expect(caps.guarantees.limits).toBe(false);
      expect(() => spawn('sh', ['-c', 'echo ran'], { env: t.env, limits: { memory: '64M' } })).toThrow(expect.objectContaining({ code: 'ERR_CORDON_CONTAINMENT' }));
    }
  });

  // proves C12 (own report): the result's limits field
  it(`'best-effort' runs without limits the tier cannot enforce, and the result says so`, async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', 'exit 0'], { env: t.env, tier: 'process-group', containment: 'best-effort', limits: { processes: 20 } });
    const result = await within(proc.result, 15_000, 'the result', t.tag);
    expect(result.limits).toEqual({ requested: { processes: 20 }, applied: false, accepted: [], hit: [] });
    // The process-group tier measures nothing: not measured, never 0.
    expect(result.usage).toEqual({ cpuMs: null, peakMemory: null, peakProcesses: null });
  });

  // proves C12
  itWhere(forkLoopRuns, 'a fork loop stops at processes: 20, and the anchor is outside the limit', forkLoopWhy, async () => {
    const t = useTag();
    // At most 300 children, each living 20 s unless the tree is ended; the
    // loop gives up at the first fork the kernel refuses. It starts when told
    // (stdin), once the test has looked at its cgroups.
    const proc = spawn('perl', [fixture('fork-loop.pl'), 'wait'], {
      env: t.env,
      stdio: ['pipe', 'ignore', 'pipe'],
      limits: { processes: 20 },
    });
    const err = capture(proc.stderr);
    const cgroups = await rootCgroups(proc, t);
    const pidsDir = cgroups.get('pids') ?? cgroups.get('0')!;
    expect(pidsDir, 'the command is in a cgroup of its tree for pids').toMatch(/\/cordon-\d+-[0-9a-f]+$/);
    expect(readFileSync(`${pidsDir}/pids.max`, 'utf8').trim()).toBe('20');
    // The anchor is not in it (it must always be able to end the tree).
    expect(cgroupsOf(proc.anchorPid!).get('pids')).not.toBe(pidsDir);
    let most = 0;
    const count = setInterval(() => (most = Math.max(most, t.procs().length)), 5);
    proc.stdin!.end('go\n');
    try {
      const result = await within(proc.result, 30_000, 'the fork loop to end', t.tag);
      most = Math.max(most, t.procs().length);
      // 20 in the tree at most, plus the anchor (it carries the tag too).
      expect(most, 'tagged processes at once').toBeLessThanOrEqual(21);
      expect(most, 'the loop did reach the limit').toBeGreaterThanOrEqual(15);
      expect(err.text).toMatch(/fork/i);
      expect(result.reason).toBe('limit');
      expect(result.limit).toBe('processes');
      expect(result.limits).toEqual({ requested: { processes: 20 }, applied: true, accepted: ['processes'], hit: ['processes'] });
      expect(result.usage.peakProcesses).toBe(20);
      expect(result.usage.cpuMs).toEqual(expect.any(Number));
      expect(result.usage.peakMemory).toBeNull(); // no memory limit: not measured
    } finally {
      clearInterval(count);
    }
    expectNoCgroupLeft(proc, [...cgroups.values()].filter((d) => d.includes("/cordon-")));
  });

  // proves C12, C6
  itWhere(enforced, "a memory hog is ended by memory: '64M' and classified", notEnforced, async () => {
    const t = useTag();
    // tail keeps a line it has not seen the end of: 200 MiB without a newline (bounded, should the limit fail).
    // It starts when told (stdin), once the test has looked at its cgroups.
    const proc = spawn('sh', ['-c', 'read go; head -c 200M /dev/zero | tail'], { env: t.env, stdio: ['pipe', 'ignore', 'ignore'], limits: { memory: '64M' } });
    const cgroups = await rootCgroups(proc, t);
    const memDir = cgroups.get('memory') ?? cgroups.get('0')!;
    const limitFile = existsSync(`${memDir}/memory.limit_in_bytes`) ? 'memory.limit_in_bytes' : 'memory.max';
    expect(readFileSync(`${memDir}/${limitFile}`, 'utf8').trim()).toBe(String(64 * 1024 * 1024));
    proc.stdin!.end('go\n');
    const result = await within(proc.result, 30_000, 'the hog to be ended', t.tag);
    expect(result.exitCode, 'tail was SIGKILLed by the OOM killer').toBe(128 + 9);
    expect(result.reason).toBe('limit');
    expect(result.limit).toBe('memory');
    expect(result.limits?.hit).toEqual(['memory']);
    expect(result.usage.peakMemory).toBeGreaterThan(32 * 1024 * 1024);
    expect(result.usage.peakMemory).toBeLessThanOrEqual(64 * 1024 * 1024);
    expectNoCgroupLeft(proc, [...cgroups.values()].filter((d) => d.includes("/cordon-")));
  });

  // proves C12, C6
  itWhere(enforced, 'run() rejects a tree a limit ended, saying which limit', notEnforced, async () => {
    const t = useTag();
    const err = await within(run('sh', ['-c', 'head -c 200M /dev/zero | tail'], { env: t.env, limits: { memory: '64M' } }).then(() => undefined, (e: unknown) => e), 30_000, 'run() to settle', t.tag);
    expect(err).toMatchObject({ code: 'ERR_CORDON_EXIT', result: { reason: 'limit', limit: 'memory' } });
    expect((err as Error).message).toMatch(/memory limit/);
  });

  // proves C12
  itWhere(enforced, 'cpu: 0.5 holds three busy loops to about half of one core together', notEnforced, async () => {
    const t = useTag();
    // Three loops that each burn 1.5 s of CPU (counted in CPU time, not wall
    // time, so a loaded machine cannot end them before the quota bites) want
    // three cores: far more than the quota, so the kernel has to throttle them,
    // and under the quota they run for at least 9 s.
    const loop = `"${process.execPath}" -e "let u; do u = process.cpuUsage(); while (u.user + u.system < 1.5e6);"`;
    const proc = spawn('sh', ['-c', `${loop} & ${loop} & ${loop} & wait`], { env: t.env, limits: { cpu: 0.5 } });
    const cgroups = await rootCgroups(proc, t);
    const cpuDir = cgroups.get('cpu') ?? cgroups.get('0')!;
    const v1 = existsSync(`${cpuDir}/cpu.cfs_quota_us`);
    expect(readFileSync(`${cpuDir}/${v1 ? 'cpu.cfs_quota_us' : 'cpu.max'}`, 'utf8').trim()).toBe(v1 ? '50000' : '50000 100000');
    // The kernel throttled the tree: seen from outside while it runs.
    await waitFor(() => /^nr_throttled [1-9]/m.test(readFileSync(`${cpuDir}/cpu.stat`, 'utf8')), { timeout: 5000, what: 'the loops to be throttled', watch: t.tag });
    const result = await within(proc.result, 45_000, 'the loops to end', t.tag);
    const ratio = result.usage.cpuMs! / (result.rootExitedAt - result.startedAt);
    // Wide on purpose: the promise is the upper bound (the quota is per
    // 100 ms period, and the window includes the start before the loops and
    // the end after them: at most 0.5 plus rounding). The lower bound only
    // says the loops ran at all: on this shared, loaded 2-core machine the
    // tree may get much less than its quota.
    expect(ratio).toBeLessThan(0.65);
    expect(ratio).toBeGreaterThan(0.1);
    expect(result.reason).toBe('exit');
    expect(result.limits).toEqual({ requested: { cpu: 0.5 }, applied: true, accepted: ['cpu'], hit: [] });
    expectNoCgroupLeft(proc, [...cgroups.values()].filter((d) => d.includes("/cordon-")));
  });

  // proves C12
  itWhere(enforced, "an owner's default limits apply to its trees; a spawn's own override them", notEnforced, async () => {
    const t = useTag();
    const owner = registry.owner(`limits-${process.pid}-${Date.now()}`, { limits: { processes: 30, memory: '256M' } });
    try {
      // The command waits (stdin) while the test reads its cgroups from outside.
      const proc = owner.spawn('sh', ['-c', 'read go'], { env: t.env, stdio: ['pipe', 'ignore', 'ignore'], limits: { processes: 25 } });
      const cgroups = await rootCgroups(proc, t);
      const pidsDir = cgroups.get('pids') ?? cgroups.get('0')!;
      const memDir = cgroups.get('memory') ?? cgroups.get('0')!;
      // The spawn's own processes limit, the owner's memory default: in the kernel's files.
      expect(readFileSync(`${pidsDir}/pids.max`, 'utf8').trim()).toBe('25');
      const memFile = existsSync(`${memDir}/memory.limit_in_bytes`) ? 'memory.limit_in_bytes' : 'memory.max';
      expect(readFileSync(`${memDir}/${memFile}`, 'utf8').trim()).toBe(String(256 * 1024 * 1024));
      proc.stdin!.end('go\n');
      const result = await within(proc.result, 15_000, 'the result', t.tag);
      expect(result.limits).toEqual({ requested: { processes: 25, memory: 256 * 1024 * 1024 }, applied: true, accepted: ['memory', 'processes'], hit: [] });
      expect(result.reason).toBe('exit');
      expect(result.usage.peakProcesses).toBeGreaterThanOrEqual(1);
      expectNoCgroupLeft(proc, [...cgroups.values()].filter((d) => d.includes("/cordon-")));
    } finally {
      await owner.release();
    }
  });

  // proves C12
  itWhere(enforced, 'a tree whose anchor is SIGKILLed leaves no per-tree cgroup behind (the host removes them)', notEnforced, async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', 'sleep 300'], { env: t.env, limits: { processes: 10, memory: '128M' } });
    const cgroups = await rootCgroups(proc, t);
    expect([...cgroups.values()].some((d) => d.includes('/cordon-')), 'the tree is in cgroups of its own').toBe(true);
    process.kill(proc.anchorPid!, 'SIGKILL');
    await within(proc.result.catch((e: unknown) => e), 20_000, 'the result after the anchor died', t.tag);
    await waitFor(() => treeDirsOf(proc.anchorPid!).length === 0, { timeout: 5000, what: 'the per-tree cgroups to be removed', watch: t.tag });
    expectNoCgroupLeft(proc, [...cgroups.values()].filter((d) => d.includes("/cordon-")));
  });
});

describe('C12: where each limit lives', () => {
  // The kernel interfaces differ (v2: files of the tree's own cgroup; v1: a
  // cgroup of the tree's own per hierarchy); each case runs where the host
  // has that layout and is skipped, saying so, elsewhere.
  const v2 = v2Delegated('memory') && v2Delegated('pids') && v2Delegated('cpu');
  const v1 = !v2 && v1OwnDir('memory') !== undefined && v1OwnDir('pids') !== undefined && v1OwnDir('cpu') !== undefined;

  // proves C12
  itWhere(enforced && v2, "v2: the limits are the tree's own cgroup's memory.max, memory.swap.max, pids.max and cpu.max", 'no memory, pids and cpu controllers delegated to this process\'s cgroup v2 here', async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', 'sleep 30'], { env: t.env, limits: { memory: '96M', processes: 30, cpu: 0.25 } });
    const cgroups = await rootCgroups(proc, t);
    const dir = cgroups.get('0')!;
    expect(dir).toMatch(/\/cordon-\d+-[0-9a-f]+$/);
    expect(readFileSync(`${dir}/memory.max`, 'utf8').trim()).toBe(String(96 * 1024 * 1024));
    if (existsSync(`${dir}/memory.swap.max`)) expect(readFileSync(`${dir}/memory.swap.max`, 'utf8').trim()).toBe('0');
    expect(readFileSync(`${dir}/pids.max`, 'utf8').trim()).toBe('30');
    expect(readFileSync(`${dir}/cpu.max`, 'utf8').trim()).toBe('25000 100000');
    await within(proc.kill(), 15_000, 'kill()', t.tag);
    expectNoCgroupLeft(proc, [dir]);
  });

  // proves C12
  itWhere(enforced && v1, 'v1: a cgroup of the tree\'s own in each hierarchy, below the host\'s own cgroup there; the anchor stays outside', 'this host has no writable cgroup v1 memory, pids and cpu hierarchies (or v2 delegates the controllers)', async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', 'sleep 30'], { env: t.env, limits: { memory: '96M', processes: 30, cpu: 0.25 } });
    const cgroups = await rootCgroups(proc, t);
    const anchor = cgroupsOf(proc.anchorPid!);
    for (const [controller, key] of [['memory', 'memory'], ['pids', 'pids'], ['cpu', 'cpu']] as const) {
      const dir = cgroups.get(key)!;
      // Nested under the host's own cgroup in that hierarchy (a tree never leaves its host's limits).
      expect(dir.startsWith(`${v1OwnDir(controller)}/cordon-`), `${dir} below ${v1OwnDir(controller)}`).toBe(true);
      expect(anchor.get(key), `the anchor is not in the tree's ${controller} cgroup`).toBe(v1OwnDir(controller));
    }
    expect(readFileSync(`${cgroups.get('memory')}/memory.limit_in_bytes`, 'utf8').trim()).toBe(String(96 * 1024 * 1024));
    expect(readFileSync(`${cgroups.get('pids')}/pids.max`, 'utf8').trim()).toBe('30');
    expect(readFileSync(`${cgroups.get('cpu')}/cpu.cfs_quota_us`, 'utf8').trim()).toBe('25000');
    expect(readFileSync(`${cgroups.get('cpu')}/cpu.cfs_period_us`, 'utf8').trim()).toBe('100000');
    await within(proc.kill(), 15_000, 'kill()', t.tag);
    expectNoCgroupLeft(proc, [...cgroups.values()].filter((d) => d.includes('/cordon-')));
  });
});

describe('C12: per-tree cgroups left by an anchor killed with its host', () => {
  const v1 = v1OwnDir('pids');
  // proves C12
  itWhere(enforced && v1 !== undefined, 'are removed when the next limited tree is made (empty, anchor gone, older than 5 s)', 'no writable cgroup v1 pids hierarchy here', async () => {
    const t = useTag();
    // A pid no process has (the kernel's pid_max here is 32768; checked below).
    let pid = 32767;
    while (existsSync(`/proc/${pid}`) && pid > 30000) pid--;
    const stale = `${v1}/cordon-${pid}-00000000deadbeef`;
    mkdirSync(stale);
    const old = new Date(Date.now() - 60_000);
    utimesSync(stale, old, old);
    try {
      const result = await within(spawn('sh', ['-c', 'exit 0'], { env: t.env, limits: { processes: 5 } }).result, 15_000, 'the result', t.tag);
      expect(result.limits?.applied).toBe(true);
      expect(existsSync(stale), `${stale} was not swept`).toBe(false);
    } finally {
      if (existsSync(stale)) rmdirSync(stale);
    }
  });
});

describe('C12: limits when the host is SIGKILLed', () => {
  beforeAll(async () => {
    await ensureDist();
  });

  // proves C12
  itWhere(enforced, 'the anchor ends the tree and removes its per-tree cgroups', notEnforced, async () => {
    const t = useTag();
    const host = startHost(['wait', '--trees', 'limited'], t.env);
    await host.ready();
    const pids = host.out.pids();
    const seen = [...cgroupsOf(pids['limited.root']!).values()].filter((d) => d.includes('/cordon-'));
    // v1 here: its v2 cgroup and one per v1 hierarchy a limit uses; v2 with delegated controllers: one.
    expect(seen.length, 'the tree is in cgroups of its own').toBeGreaterThanOrEqual(1);
    host.child.kill('SIGKILL');
    await waitFor(() => seen.every((d) => !existsSync(d)), { timeout: 10_000, what: 'the per-tree cgroups to be removed', watch: t.tag });
    await waitFor(() => t.procs().length === 0, { timeout: 10_000, what: 'the tree to be gone', watch: t.tag });
  });
});

describe('C12: the CLI\'s limit flags', () => {
  beforeAll(async () => {
    await ensureDist();
  });

  // proves C12 (own report): the CLI's usage errors
  it('a bad --memory, --max-processes or --cpu is a usage error (exit 2) before anything runs', async () => {
    const t = useTag();
    for (const args of [['--memory', '12Q'], ['--max-processes', '0'], ['--cpu', 'half']]) {
      const c = startCli(['run', ...args, '--', 'sh', '-c', 'echo ran'], t.env);
      const { code } = await within(c.exited, 15_000, `cordon run ${args.join(' ')} to exit`, t.tag);
      expect(code, args.join(' ')).toBe(2);
      expect(c.err.text).toContain(args[0]);
      expect(c.out.text).not.toContain('ran');
    }
  });

  // proves C12
  itWhere(forkLoopRuns, 'cordon run --max-processes 20 stops a fork loop', forkLoopWhy, async () => {
    const t = useTag();
    const c = startCli(['run', '--max-processes', '20', '--memory', '256M', '--cpu', '1', '--', 'perl', fixture('fork-loop.pl')], t.env);
    const { code } = await within(c.exited, 30_000, 'cordon run to exit', t.tag);
    expect(code, c.err.text).toBe(2); // the loop's status when the kernel refuses a fork (0 when every fork is granted)
    expect(c.err.text).toMatch(/fork/i);
    await waitFor(() => t.procs().length === 0, { timeout: 10_000, what: 'the tree to be gone', watch: t.tag });
  });
});
