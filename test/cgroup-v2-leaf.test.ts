// CONTRACT C12, the cgroup v2 "no internal processes" rule: only when asked,
// by prepareCgroupLimits({ moveHost: true }), the host's own process moves
// into the leaf `cordon-host` and the controllers are enabled in the host's
// cgroup; the trees' cgroups are made beside the leaf; a process the host did
// not start is never moved (a cgroup that holds one is refused, naming it);
// where it cannot apply it refuses, typed, before changing anything.
//
// The decision is tested against real files in a temporary directory laid
// out as a cgroup's (cgroup.controllers, cgroup.subtree_control,
// cgroup.procs, cgroup.type), checking afterwards that nothing was written.
// The real move runs a host fixture alone in a cgroup of its own (so the test
// runner itself is never moved) where this process's cgroup already enables
// the pids controller for its children; elsewhere it is skipped, naming why.
import { spawn as spawnChild } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { prepareCgroupLimits } from '../lib/index.js';
import { hostCgroupDir, planCgroupLeaf, applyCgroupLeaf, type CgroupLeafError } from '../lib/cgroup-leaf.js';
import { cgroupMount, cgroupOf, cgroupWritable } from './helpers/cgroup.js';
import { ensureDist } from './helpers/host.js';
import { capture, fixture, repoRoot } from './helpers/fixtures.js';
import { alive, sleep, useTag, waitFor, within, type Tagged } from './helpers/procs.js';
import { missing, type Requirement } from './helpers/requirements.js';
import { itWhere } from './helpers/tier.js';
import { watchdog } from './helpers/time.js';

/** A directory laid out as a cgroup v2 directory's files; `type` undefined: the root cgroup (it has no cgroup.type). */
function fakeCgroup(files: { controllers?: string; subtree?: string; procs?: number[]; type?: string }): string {
  const dir = mkdtempSync(join(tmpdir(), 'cordon-fake-cgroup-'));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  if (files.controllers !== undefined) writeFileSync(`${dir}/cgroup.controllers`, `${files.controllers}\n`);
  writeFileSync(`${dir}/cgroup.subtree_control`, `${files.subtree ?? ''}\n`);
  writeFileSync(`${dir}/cgroup.procs`, (files.procs ?? []).map((p) => `${p}\n`).join(''));
  if (files.type !== undefined) writeFileSync(`${dir}/cgroup.type`, `${files.type}\n`);
  return dir;
}

/** Every file of a fake cgroup with its content: compared before and after, to see that nothing was written. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(dir)) out[name] = statSync(`${dir}/${name}`).isDirectory() ? '<dir>' : readFileSync(`${dir}/${name}`, 'utf8');
  return out;
}

/** prepareCgroupLimits()'s steps on the directory `dir` (the function itself takes this process's own cgroup). */
function prepareLeafAt(dir: string) {
  return applyCgroupLeaf(planCgroupLeaf(dir));
}

function refusal(fn: () => unknown): CgroupLeafError {
  try {
    fn();
  } catch (err) {
    return err as CgroupLeafError;
  }
  throw new Error('expected a refusal, got none');
}

describe('C12: the host moved into a leaf of its cgroup, only when asked', () => {
  // proves C12 (own report): the plan on a directory laid out as a cgroup's, not a cgroup
  it('a cgroup holding the host alone, the controllers given but not enabled: the host moves into cordon-host, then the controllers are enabled', () => {
    const dir = fakeCgroup({ controllers: 'cpuset cpu io memory pids', subtree: '', procs: [process.pid], type: 'domain' });
    const before = snapshot(dir);
    const plan = planCgroupLeaf(dir);
    expect(plan).toEqual({ cgroup: dir, leaf: `${dir}/cordon-host`, move: true, procs: [process.pid], self: process.pid, enable: ['memory', 'pids', 'cpu'], alreadyEnabled: [] });
    expect(snapshot(dir), 'planning writes nothing').toEqual(before);
    const done = applyCgroupLeaf(plan);
    expect(done).toEqual({ outcome: 'enabled', cgroup: dir, leaf: `${dir}/cordon-host`, moved: [process.pid], enabled: ['memory', 'pids', 'cpu'], alreadyEnabled: [] });
    expect(readFileSync(`${dir}/cordon-host/cgroup.procs`, 'utf8'), "the one pid written to the leaf's cgroup.procs").toBe(String(process.pid));
    expect(readFileSync(`${dir}/cgroup.subtree_control`, 'utf8')).toBe('+memory +pids +cpu');
  });

  // proves C12 (own report): the plan on a directory laid out as a cgroup's, not a cgroup
  it('a sibling in the host\'s cgroup (a process the host did not start): refused by its pid, nothing moved or written, the sibling untouched', async () => {
    const t = useTag();
    const sibling = spawnChild('sleep', ['300'], { env: t.env, stdio: 'ignore' });
    await within(new Promise((resolve) => sibling.once('spawn', resolve)), watchdog(5000), 'the sibling to start', t.tag);
    const pid = sibling.pid!;
    const dir = fakeCgroup({ controllers: 'cpu memory pids', subtree: '', procs: [pid, process.pid], type: 'domain' });
    const before = snapshot(dir);
    const err = refusal(() => prepareLeafAt(dir));
    expect(err).toMatchObject({ code: 'ERR_CORDON_CGROUP_LEAF', reason: 'not-alone', stage: 'input', path: dir, pids: [pid] });
    expect(err.message).toMatch(new RegExp(`other processes than this one \\(${pid}\\)`));
    expect(snapshot(dir), 'nothing written, no leaf made').toEqual(before);
    expect(alive(pid), 'the sibling').toBe(true);
    // PID 1 of a root host in init.scope is such a sibling too.
    const init = fakeCgroup({ controllers: 'cpu memory pids', subtree: '', procs: [1, process.pid], type: 'domain' });
    expect(refusal(() => prepareLeafAt(init))).toMatchObject({ reason: 'not-alone', pids: [1] });
    expect(existsSync(`${init}/cordon-host`)).toBe(false);
    // Ended and reaped here, not left dying for the tag's leak check (which
    // once saw it still running, SIGKILL not yet taken, and called it a leak).
    const gone = new Promise((resolve) => sibling.once('exit', resolve));
    sibling.kill('SIGKILL');
    await within(gone, watchdog(5000), 'the sibling to exit after SIGKILL', t.tag);
  });

  // proves C12 (own report): the plan on a directory laid out as a cgroup's, not a cgroup
  it('some controllers enabled already: only the others are enabled', () => {
    const dir = fakeCgroup({ controllers: 'cpu memory pids', subtree: 'pids', procs: [], type: 'domain' });
    const plan = planCgroupLeaf(dir);
    expect(plan.enable).toEqual(['memory', 'cpu']);
    expect(plan.alreadyEnabled).toEqual(['pids']);
    expect(plan.move, 'an empty cgroup has nothing to move').toBe(false);
  });

  // proves C12 (own report): the plan on a directory laid out as a cgroup's, not a cgroup
  it('the root cgroup (no cgroup.type): the rule does not bind it, so nothing moves', () => {
    const dir = fakeCgroup({ controllers: 'cpu memory pids', subtree: '', procs: [1, 2, 3] });
    const plan = planCgroupLeaf(dir);
    expect(plan.move).toBe(false);
    expect(plan.enable).toEqual(['memory', 'pids', 'cpu']);
  });

  // proves C12 (own report): the plan on a directory laid out as a cgroup's, not a cgroup
  it('carried out in the root cgroup: the controllers are written to cgroup.subtree_control as the kernel takes them, nothing moves', () => {
    const dir = fakeCgroup({ controllers: 'cpu memory pids', subtree: 'pids', procs: [1, 2] });
    const done = applyCgroupLeaf(planCgroupLeaf(dir));
    expect(done).toEqual({ outcome: 'enabled', cgroup: dir, leaf: null, moved: [], enabled: ['memory', 'cpu'], alreadyEnabled: ['pids'] });
    expect(readFileSync(`${dir}/cgroup.subtree_control`, 'utf8')).toBe('+memory +cpu');
    expect(existsSync(`${dir}/cordon-host`), 'no leaf in the root cgroup').toBe(false);
  });

  // proves C12 (own report): the plan on a directory laid out as a cgroup's, not a cgroup
  it('already delegated: the answer says so, and nothing is written', () => {
    const dir = fakeCgroup({ controllers: 'cpu memory pids', subtree: 'cpu memory pids', procs: [], type: 'domain' });
    const before = snapshot(dir);
    const done = applyCgroupLeaf(planCgroupLeaf(dir));
    expect(done).toEqual({ outcome: 'already-delegated', cgroup: dir, leaf: null, moved: [], enabled: [], alreadyEnabled: ['memory', 'pids', 'cpu'] });
    expect(snapshot(dir)).toEqual(before);
  });

  // proves C12 (own report): the plan on a directory laid out as a cgroup's, not a cgroup
  it('a controller the cgroup is not given (as on this machine: cgroup2 with hugetlb only): a typed refusal naming it, nothing changed', () => {
    const dir = fakeCgroup({ controllers: 'hugetlb', subtree: '', procs: [4242], type: 'domain' });
    const before = snapshot(dir);
    const err = refusal(() => planCgroupLeaf(dir));
    expect(err).toMatchObject({ code: 'ERR_CORDON_CGROUP_LEAF', reason: 'controllers-unavailable', stage: 'input', path: dir, pids: [] });
    expect(err.message).toMatch(/memory, pids, cpu controllers/);
    expect(err.message).toMatch(/lists: hugetlb/);
    expect(snapshot(dir)).toEqual(before);
  });

  // proves C12 (own report): the plan on a directory laid out as a cgroup's, not a cgroup
  it('not a cgroup v2 directory, or a threaded cgroup: typed refusals', () => {
    const plain = fakeCgroup({ subtree: '', procs: [] });
    expect(refusal(() => planCgroupLeaf(plain))).toMatchObject({ code: 'ERR_CORDON_CGROUP_LEAF', reason: 'no-cgroup-v2' });
    const threaded = fakeCgroup({ controllers: 'cpu memory pids', subtree: '', procs: [4242], type: 'threaded' });
    const before = snapshot(threaded);
    expect(refusal(() => planCgroupLeaf(threaded))).toMatchObject({ code: 'ERR_CORDON_CGROUP_LEAF', reason: 'not-domain' });
    expect(snapshot(threaded)).toEqual(before);
  });

  // proves C12 (own report): the plan on a directory laid out as a cgroup's, not a cgroup
  it('a host the kernel will not move is refused by its pid, and the controllers stay off', () => {
    const dir = fakeCgroup({ controllers: 'cpu memory pids', subtree: '', procs: [process.pid], type: 'domain' });
    // The leaf's cgroup.procs a directory: every write to it fails (EISDIR), as a kernel's EPERM would.
    mkdirSync(`${dir}/cordon-host/cgroup.procs`, { recursive: true });
    const err = refusal(() => applyCgroupLeaf(planCgroupLeaf(dir)));
    expect(err).toMatchObject({ code: 'ERR_CORDON_CGROUP_LEAF', reason: 'unmovable', pids: [process.pid] });
    expect(err.message).toMatch(new RegExp(`${process.pid} \\(EISDIR\\)`));
    expect(readFileSync(`${dir}/cgroup.subtree_control`, 'utf8').trim(), 'no controller enabled').toBe('');
  });

  // proves C12 (own report): the plan on a directory laid out as a cgroup's, not a cgroup
  it('never implicit: moveHost must be true, and the controllers are checked, before anything is read', () => {
    for (const options of [undefined, {}, { moveHost: false }, { moveHost: 'yes' }]) {
      expect(refusal(() => prepareCgroupLimits(options as never)), JSON.stringify(options)).toMatchObject({ code: 'ERR_INVALID_ARG_VALUE', stage: 'input' });
    }
    for (const controllers of [[], ['io'], 'pids']) {
      expect(refusal(() => prepareCgroupLimits({ moveHost: true, controllers: controllers as never }))).toMatchObject({ code: 'ERR_INVALID_ARG_VALUE', stage: 'input' });
    }
  });

  // Called for real only where it is bound to refuse: elsewhere it would move this test runner.
  const host = process.platform === 'linux' ? hostCgroupDir() : null;
  let expected: string | undefined = process.platform !== 'linux' ? 'not-linux' : host === null ? 'no-cgroup-v2' : undefined;
  if (host !== null) {
    try {
      planCgroupLeaf(host);
    } catch (err) {
      expected = (err as CgroupLeafError).reason;
    }
  }
  // proves C12
  itWhere(
    expected !== undefined,
    "on this host it refuses, typed, and this process's cgroup is unchanged",
    `this host's cgroup ${host} can be prepared (or already is): calling it would move this test runner, which this test never does`,
    () => {
      const cgroupBefore = readFileSync('/proc/self/cgroup', 'utf8');
      const subtreeBefore = host === null ? '' : readFileSync(`${host}/cgroup.subtree_control`, 'utf8');
      expect(refusal(() => prepareCgroupLimits({ moveHost: true }))).toMatchObject({ code: 'ERR_CORDON_CGROUP_LEAF', reason: expected });
      expect(readFileSync('/proc/self/cgroup', 'utf8')).toBe(cgroupBefore);
      if (host !== null) {
        expect(readFileSync(`${host}/cgroup.subtree_control`, 'utf8')).toBe(subtreeBefore);
        expect(existsSync(`${host}/cordon-host`), 'no leaf made').toBe(false);
      }
    },
  );
});

/**
 * Where the real move can run without moving the test runner: this process's
 * v2 cgroup enables pids for its children (so a cgroup made below it is given
 * pids, and a host alone in it can be moved into its leaf), and it is
 * writable. Otherwise the reason, in words.
 */
function realMove(): { parent: string; controllers: string[] } | string {
  if (process.platform !== 'linux') return `cgroups are Linux's (this is ${process.platform})`;
  const mount = cgroupMount();
  const own = cgroupOf('self');
  if (!mount || !own) return 'this machine has no cgroup v2 mount';
  const parent = own === '/' ? mount : mount + own;
  const given = readFileSync(`${parent}/cgroup.controllers`, 'utf8').trim().split(/\s+/).filter(Boolean);
  if (!given.includes('pids')) {
    return `this machine mounts cgroup2 without controllers for this process (cgroup.controllers of ${parent} lists: ${given.join(' ') || 'none'}): there is no v2 controller to enable, so the move and a v2-enforced limit cannot run here`;
  }
  const enabled = readFileSync(`${parent}/cgroup.subtree_control`, 'utf8').trim().split(/\s+/).filter(Boolean);
  if (!enabled.includes('pids')) {
    return `pids is given to this test runner's cgroup ${parent} but not enabled for its children: a cgroup of the host's own with pids would need the test runner moved out of ${parent}, which this test never does`;
  }
  if (!cgroupWritable()) return `this process's cgroup ${parent} is not writable (or the kernel is older than 5.14)`;
  return { parent, controllers: ['memory', 'pids', 'cpu'].filter((c) => enabled.includes(c)) };
}

const real = realMove();

/**
 * A test of the real move, where it can run and this machine has what it
 * `needs` (elsewhere skipped, naming why): given its own cgroup (made), the
 * controllers to ask for, and its tag.
 */
function itWithRealMove(title: string, fn: (dir: string, controllers: string[], t: Tagged) => Promise<void>, needs: Requirement[] = []): void {
  const why = typeof real === 'string' ? real : (missing(...needs) ?? '');
  itWhere(why === '', title, why, async () => {
    const { parent, controllers } = real as Exclude<typeof real, string>;
    await ensureDist();
    const dir = useTestCgroup(parent);
    const t = useTag();
    mkdirSync(dir);
    await fn(dir, controllers, t);
  });
}

describe('C12: the real move, in a cgroup of the test\'s own', () => {
  // proves C12
  itWithRealMove(
    "the host fixture's cgroup: the host in cordon-host, pids enabled, a tree beside the leaf stopped at processes: 20",
    async (dir, controllers, t) => {
      expect(readFileSync(`${dir}/cgroup.controllers`, 'utf8')).toMatch(/\bpids\b/);
      const host = startLeafHost(dir, controllers, t.env);
      const out = capture(host.stdout);
      const err = capture(host.stderr);
      const line = async (word: string) => {
        const text = await out.until(new RegExp(`^(${word}|REFUSED) .*$`, 'm'), watchdog(20_000)).catch((e: Error) => {
          throw new Error(`${e.message}\nstdout:\n${out.text}\nstderr:\n${err.text}`);
        });
        const m = new RegExp(`^(${word}|REFUSED) (.*)$`, 'm').exec(text)!;
        if (m[1] === 'REFUSED') throw new Error(`prepareCgroupLimits refused: ${m[2]}`);
        return JSON.parse(m[2]!);
      };
      const before = await line('CAPS_BEFORE');
      const prepared = await line('PREPARED');
      const leaf = `${dir}/cordon-host`;
      expect(prepared).toMatchObject({ outcome: 'enabled', cgroup: dir, leaf, enabled: controllers });
      expect(prepared.moved, 'the host alone moved').toEqual([host.pid]);
      // Observed from outside: the host is in the leaf, the controllers are on in its cgroup, and the leaf is a leaf.
      expect(cgroupOf(host.pid!)).toBe(`${own()}/${dir.split('/').pop()}/cordon-host`);
      expect(readFileSync(`${dir}/cgroup.subtree_control`, 'utf8').trim().split(/\s+/).sort()).toEqual([...controllers].sort());
      expect(readFileSync(`${leaf}/cgroup.subtree_control`, 'utf8').trim()).toBe('');
      // capabilities() saw the change (its probe is forgotten after the move).
      const after = await line('CAPS_AFTER');
      expect(before.notes.join(' ')).not.toMatch(/processes in the tree's cgroup \(v2/);
      expect(after.notes.join(' ')).toMatch(/processes in the tree's cgroup \(v2, delegated\)/);
      // The tree's cgroup is the leaf's sibling, under the host's cgroup, with the limit set.
      const root: number = await within(line('PID root'), watchdog(20_000), 'the fork loop to start', t.tag);
      const treeRel = cgroupOf(root);
      const tree = `${cgroupMount()}${treeRel}`;
      expect(tree.slice(0, tree.lastIndexOf('/')), 'the tree is made beside the leaf, never inside it').toBe(dir);
      expect(tree.split('/').pop()).toMatch(/^cordon-\d+-[0-9a-f]+$/);
      expect(readFileSync(`${tree}/pids.max`, 'utf8').trim()).toBe('20');
      expect(readdirSync(leaf, { withFileTypes: true }).filter((e) => e.isDirectory()), 'nothing below the leaf').toEqual([]);
      // Counted from outside: the tagged processes at once (the tree, its anchor and the host fixture).
      let most = 0;
      const count = setInterval(() => (most = Math.max(most, t.procs().length)), 5);
      host.stdin!.write('go\n');
      let result;
      try {
        result = await line('RESULT');
      } finally {
        clearInterval(count);
      }
      expect(result).toMatchObject({ reason: 'limit', limit: 'processes', limits: { applied: true, hit: ['processes'] } });
      expect(most, 'tagged processes at once: 20 in the tree, the anchor, the host').toBeLessThanOrEqual(22);
      expect(most, 'the loop did reach the limit').toBeGreaterThanOrEqual(15);
      const exited = new Promise((resolve) => host.once('exit', resolve));
      if (host.exitCode === null) await within(exited, watchdog(10_000), 'the host fixture to exit', t.tag);
    },
    ['perl'], // the host's fork loop
  );

  // proves C12
  itWithRealMove(
    "the host fixture's cgroup with a sibling in it (a process the host did not start): refused by the sibling's pid; the sibling and the host stay where they were",
    async (dir, controllers, t) => {
      const inDir = `${own()}/${dir.split('/').pop()}`;
      const sibling = spawnChild('sh', ['-c', 'echo $$ > "$1/cgroup.procs" && exec sleep 300', 'sh', dir], { env: t.env, stdio: 'ignore' });
      await waitFor(() => cgroupOf(sibling.pid!) === inDir, { timeout: watchdog(10_000), what: 'the sibling to enter the test cgroup', watch: t.tag });
      const host = startLeafHost(dir, controllers, t.env);
      const out = capture(host.stdout);
      const text = await out.until(/^(REFUSED|PREPARED) .*$/m, watchdog(20_000));
      const refused = JSON.parse(/^REFUSED (.*)$/m.exec(text)?.[1] ?? 'null');
      expect(refused, text).toMatchObject({ code: 'ERR_CORDON_CGROUP_LEAF', reason: 'not-alone', pids: [sibling.pid] });
      expect(cgroupOf(sibling.pid!), 'the sibling was not moved').toBe(inDir);
      expect(existsSync(`${dir}/cordon-host`), 'no leaf made').toBe(false);
      expect(readFileSync(`${dir}/cgroup.subtree_control`, 'utf8').trim(), 'no controller enabled').toBe('');
      sibling.kill('SIGKILL');
      const exited = new Promise((resolve) => host.once('exit', resolve));
      if (host.exitCode === null) await within(exited, watchdog(10_000), 'the host fixture to exit', t.tag);
    },
  );
});

/** The host fixture (test/fixtures/leaf-host.mjs), started in the cgroup `dir` before it runs anything. */
function startLeafHost(dir: string, controllers: string[], env: NodeJS.ProcessEnv) {
  return spawnChild('sh', ['-c', 'echo $$ > "$1/cgroup.procs" && exec "$2" "$3" "$4"', 'sh', dir, process.execPath, fixture('leaf-host.mjs'), controllers.join(',')], {
    env,
    cwd: repoRoot,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

/**
 * A cgroup of the test's own below `parent` (its path; the test makes it).
 * The cleanup is registered before the tag's, so it runs after it (hooks run
 * as a stack): once every tagged process is SIGKILLed by pid, the cgroups go,
 * bottom-up, bounded.
 */
function useTestCgroup(parent: string): string {
  const dir = `${parent}/cordon-leaf-test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  onTestFinished(async () => {
    const removeAll = (d: string) => {
      for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) removeAll(`${d}/${e.name}`);
      rmdirSync(d);
    };
    for (const deadline = Date.now() + 5000; existsSync(dir); ) {
      try {
        removeAll(dir);
      } catch (err) {
        if (Date.now() > deadline) throw new Error(`the test cgroup ${dir} could not be removed: ${(err as Error).message}`);
        await sleep(50);
      }
    }
  });
  return dir;
}

function own(): string {
  const rel = cgroupOf('self')!;
  return rel === '/' ? '' : rel;
}
