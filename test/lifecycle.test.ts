// CONTRACT C8 (release semantics), one test per row of its table, through the
// registry (lib/registry.ts). Trees are real processes observed from outside:
// /proc (alive(pid)), the test tag, and the pids the trees print. The host
// rows use test/fixtures/registry-host.mjs, an application using the built
// package with several owners and kinds.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { ensureDist } from './helpers/host.js';
import { expectRejectsCode, expectThrowsCode } from './helpers/assert.js';
import { ESCAPEES, LEAVES, PLAIN, WITH_CHILD, newRegistry, startRegistryHost, tempDir, trapScript } from './helpers/registry.js';
import { alive, killPids, sleep, useTag, waitFor, waitGone, within } from './helpers/procs.js';
import { collect, expectAllAlive, expectAllGone, waitAllGone, type Started } from './helpers/trees.js';
import { orphanedEscapee } from './helpers/tier.js';
import { promised, watchdog } from './helpers/time.js';

const LINES: [string, string[]] = [
  'sh',
  ['-c', 'echo "PID root $$"; echo READY; i=0; while :; do i=$((i + 1)); echo "line $i"; sleep 0.1; done'],
];

function size(path: string): number {
  return statSync(path).size;
}

describe('C8: a view of the owner closes (detach)', () => {
  // proves C8, C7
  it('detach(): the trees keep running, of every kind, escapees included', async () => {
    const t = useTag();
    const registry = newRegistry({ grace: 2000 });
    const owner = registry.owner('view-1');
    const trees = [
      await collect(owner.spawn(...WITH_CHILD, { kind: 'subagent', env: t.env }), t.tag),
      await collect(owner.spawn(...ESCAPEES, { kind: 'command', env: t.env }), t.tag),
      await collect(owner.spawn(...LEAVES, { kind: 'workflow', leftovers: 'keep', env: t.env }), t.tag),
    ];
    await within(trees[2]!.proc.result, 10_000, 'the keep tree to settle', t.tag);
    expect(trees[2]!.all.filter(alive)).toEqual([trees[2]!.pids.left]);
    trees[2]!.all = [trees[2]!.pids.left!]; // the root exited; its kept leftover runs on
    expectAllAlive(trees, 'before detach');

    owner.detach({ keepAlive: 60_000 });
    expect(owner.detached).toBe(true);
    await sleep(500);
    expectAllAlive(trees, '500 ms after detach');
    expect(registry.ownerIds()).toContain('view-1');
    expect(registry.hasLiveWork('view-1')).toBe(true);

    await within(owner.release(), 10_000, 'release()', t.tag);
    expectAllGone(trees, 'after release');
    await waitGone(t, promised(1000));
  });

  // proves C8
  it('re-attach by id within keepAlive: same owner, same trees; a log: true tree keeps logging; no release after keepAlive', async () => {
    const t = useTag();
    const registry = newRegistry({ grace: 2000 });
    const released: string[] = [];
    registry.on('release', (id: string) => released.push(id));
    const owner = registry.owner('view-2');
    const logger = await collect(owner.spawn(...LINES, { kind: 'command', log: true, env: t.env }), t.tag);
    const agent = await collect(owner.spawn(...WITH_CHILD, { kind: 'subagent', env: t.env }), t.tag);
    const before = owner.list().map(({ id, pid, kind, logPath }) => ({ id, pid, kind, logPath }));
    expect(before.map((i) => i.pid).sort()).toEqual([logger.root, agent.root].sort());
    const logPath = before.find((i) => i.pid === logger.root)!.logPath!;
    expect(logPath.startsWith(registry.logDir)).toBe(true);
    await waitFor(() => readFileSync(logPath, 'utf8').includes('line 2'), { timeout: 5000, what: 'the log to fill', watch: t.tag });

    const keepAlive = 1500;
    owner.detach({ keepAlive });
    const detachedAt = Date.now();
    const size0 = size(logPath);
    await waitFor(() => size(logPath) > size0, { timeout: promised(1000), what: 'the log to grow while detached', watch: t.tag });

    const again = registry.owner('view-2');
    expect(Date.now() - detachedAt, 're-attached within the keep-alive').toBeLessThan(keepAlive);
    expect(again).toBe(owner);
    expect(again.detached).toBe(false);
    expect(again.list().map(({ id, pid, kind, logPath }) => ({ id, pid, kind, logPath }))).toEqual(before);

    // Past the keep-alive the re-attached owner is not released.
    await sleep(detachedAt + keepAlive + 1000 - Date.now());
    expect(released).toEqual([]);
    expect(registry.ownerIds()).toContain('view-2');
    expectAllAlive([logger, agent], 'after the keep-alive of a re-attached owner');
    const size1 = size(logPath);
    await waitFor(() => size(logPath) > size1, { timeout: 2000, what: 'the log to keep growing after re-attach', watch: t.tag });
    expect(again.get(before[0]!.id)).toBe(logger.proc);

    await within(again.release(), 10_000, 'release()', t.tag);
    expectAllGone([logger, agent], 'after release');
    // The log is kept after the tree is gone.
    expect(readFileSync(logPath, 'utf8')).toMatch(/^line \d+$/m);
    await waitGone(t, promised(1000));
  });

  // proves C8
  it('keepAlive (500 ms) over with no re-attach: the owner is released and every tree is gone shortly after', async () => {
    const t = useTag();
    const registry = newRegistry({ grace: 2000 });
    const released: string[] = [];
    registry.on('release', (id: string) => released.push(id));
    const owner = registry.owner('view-3');
    const trees = [
      await collect(owner.spawn(...WITH_CHILD, { kind: 'subagent', env: t.env }), t.tag),
      await collect(owner.spawn(...ESCAPEES, { kind: 'command', env: t.env }), t.tag),
      await collect(owner.spawn(...LEAVES, { kind: 'command', leftovers: 'keep', env: t.env }), t.tag),
    ];
    await within(trees[2]!.proc.result, 10_000, 'the keep tree to settle', t.tag);
    trees[2]!.all = [trees[2]!.pids.left!];
    const other = await collect(registry.owner('bystander').spawn(...PLAIN, { kind: 'command', env: t.env }), t.tag);

    const keepAlive = 500;
    owner.detach({ keepAlive });
    const detachedAt = Date.now();
    expectAllAlive(trees, 'right after detach');
    await waitAllGone(trees, keepAlive + promised(2500), 'the trees of the detached owner to be gone after its keep-alive', t.tag);
    expect(Date.now() - detachedAt, 'gone only after the keep-alive (ms)').toBeGreaterThanOrEqual(keepAlive);
    await waitFor(() => released.includes('view-3'), { timeout: 2000, what: "the 'release' event", watch: t.tag });
    expect(registry.ownerIds()).not.toContain('view-3');
    expect(registry.hasLiveWork('view-3')).toBe(false);
    // Another owner's tree is not touched.
    expectAllAlive([other], 'the other owner after the release');

    await within(registry.owner('bystander').release(), 10_000, 'release()', t.tag);
    await waitGone(t, promised(1000));
  });

  // proves C8, C7
  it('an owner with no live work is released at once on detach, whatever the keepAlive', async () => {
    const t = useTag();
    const registry = newRegistry({ grace: 2000 });
    const released: string[] = [];
    registry.on('release', (id: string) => released.push(id));
    const idle = registry.owner('idle');
    const done = idle.spawn('sh', ['-c', 'echo "PID root $$"'], { kind: 'subagent', env: t.env });
    await within(done.result, 10_000, 'the short tree to settle', t.tag);
    expect(done.state).toBe('ended');
    registry.owner('empty');
    // Contrast: a detached owner whose only tree is a running 'command' still
    // counts as live within its keep-alive (see hasLiveWork()).
    const busy = registry.owner('busy');
    const cmd = await collect(busy.spawn(...PLAIN, { kind: 'command', env: t.env }), t.tag);
    expect(busy.hasLiveWork()).toBe(false);

    for (const id of ['idle', 'empty']) expect(registry.hasLiveWork(id)).toBe(false);
    registry.owner('idle').detach({ keepAlive: 60_000 });
    registry.owner('empty').detach({ keepAlive: 60_000 });
    busy.detach({ keepAlive: 60_000 });
    await waitFor(() => released.includes('idle') && released.includes('empty'), {
      timeout: promised(1000),
      what: 'owners with no live work to be released at once',
      watch: t.tag,
    });
    expect(registry.ownerIds()).not.toContain('idle');
    expect(registry.ownerIds()).not.toContain('empty');
    expect(idle.released).toBe(true);
    expectThrowsCode(() => idle.spawn('true', [], { env: t.env }), 'ERR_CORDON_OWNER_RELEASED');

    await sleep(300);
    expect(released).not.toContain('busy');
    expect(registry.ownerIds()).toContain('busy');
    expect(registry.hasLiveWork('busy')).toBe(true);
    expectAllAlive([cmd], 'the detached command tree within its keep-alive');

    await within(busy.release(), 10_000, 'release()', t.tag);
    expectAllGone([cmd], 'after release');
    await waitGone(t, promised(1000));
  });

  // proves C8
  it('right after an owner with no live work is released by detach, registry.owner(id) gives a usable owner', async () => {
    const t = useTag();
    const registry = newRegistry({ grace: 2000 });
    const view = registry.owner('session-9');
    view.detach({ keepAlive: 5000 }); // nothing live: released at once
    // A new view of the same session opens at once.
    const next = registry.owner('session-9');
    expect(next.released, 'registry.owner(id) returned the released handle').toBe(false);
    const s = await collect(next.spawn(...PLAIN, { kind: 'subagent', env: t.env }), t.tag);
    expectAllAlive([s], 'the new tree');
    await within(registry.owner('session-9').release(), 10_000, 'release()', t.tag);
    expectAllGone([s], 'after release');
  });
});

describe('C8: owner forked', () => {
  // proves C8
  it('fork(): the new owner starts with none; the old keeps running', async () => {
    const t = useTag();
    const registry = newRegistry({ grace: 2000 });
    const old = registry.owner('conv-1');
    const trees = [
      await collect(old.spawn(...WITH_CHILD, { kind: 'subagent', env: t.env }), t.tag),
      await collect(old.spawn(...ESCAPEES, { kind: 'command', env: t.env }), t.tag),
    ];
    const ids = old.list().map((i) => i.id);

    const forked = old.fork('conv-1-fork');
    expect(forked.id).toBe('conv-1-fork');
    expect(forked.list()).toEqual([]);
    expect(forked.hasLiveWork()).toBe(false);
    expect(old.hasLiveWork()).toBe(true);
    expect(registry.ownerIds().sort()).toEqual(['conv-1', 'conv-1-fork']);
    expectThrowsCode(() => forked.get(ids[0]!), 'ERR_CORDON_NOT_OWNER');
    expectThrowsCode(() => old.fork('conv-1-fork'), 'ERR_CORDON_OWNER_EXISTS');
    expectAllAlive(trees, 'after fork');

    // The fork lives its own life; ending it leaves the old owner's trees running.
    const mine = await collect(forked.spawn(...PLAIN, { kind: 'subagent', env: t.env }), t.tag);
    expect(old.list().map((i) => i.id)).toEqual(ids);
    await within(forked.release(), 10_000, "the fork's release()", t.tag);
    expectAllGone([mine], "after the fork's release");
    expectAllAlive(trees, "the old owner's trees after the fork's release");
    expect(old.list().map((i) => i.id)).toEqual(ids);

    await within(old.release(), 10_000, 'release()', t.tag);
    expectAllGone(trees, 'after release');
    await waitGone(t, promised(1000));
  });
});

describe('C8: owner released', () => {
  // proves C8, C3
  it('release(): every kind is terminated gracefully, TERM traps get the grace, kept leftovers too', async () => {
    const t = useTag();
    const grace = 1500;
    const registry = newRegistry({ grace });
    registry.defineKind('review', { unfinishedWork: true });
    registry.defineKind('preview', { unfinishedWork: false });
    const dir = tempDir();
    const owner = registry.owner('deleted-session');
    const kinds = ['command', 'subagent', 'workflow', 'review', 'preview'];
    const trees: Started[] = [];
    const trapFiles: string[] = [];
    for (const kind of kinds) {
      const file = join(dir, `${kind}.trapped`);
      trapFiles.push(file);
      // The subagent's trap does not exit: only the forced kill after the grace ends it.
      trees.push(await collect(owner.spawn(...trapScript(kind !== 'subagent'), { kind, env: { ...t.env, TRAP_FILE: file } }), t.tag));
    }
    const keep = await collect(owner.spawn(...LEAVES, { kind: 'command', leftovers: 'keep', env: t.env }), t.tag);
    await within(keep.proc.result, 10_000, 'the keep tree to settle', t.tag);
    keep.all = [keep.pids.left!];
    trees.push(keep);
    expectAllAlive(trees, 'before release');
    for (const file of trapFiles) expect(existsSync(file)).toBe(false);
    const released: string[] = [];
    registry.on('release', (id: string) => released.push(id));

    const startedAt = Date.now();
    await within(owner.release(), grace + 5000, 'release()', t.tag);
    const elapsed = Date.now() - startedAt;
    // Resolved at quiescence of every tree.
    expectAllGone(trees, 'when release() resolved');
    for (const [i, file] of trapFiles.entries()) {
      expect(existsSync(file) ? readFileSync(file, 'utf8') : '', `the ${kinds[i]} tree's TERM trap ran`).toContain('trapped');
    }
    expect(elapsed, 'the trap that keeps running got the whole grace (ms)').toBeGreaterThanOrEqual(grace);
    expect(elapsed, 'and was killed soon after it (ms)').toBeLessThanOrEqual(grace + 2000);
    expect(released).toEqual(['deleted-session']);
    expect(registry.ownerIds()).toEqual([]);
    expect(owner.released).toBe(true);
    expectThrowsCode(() => owner.spawn('true', [], { env: t.env }), 'ERR_CORDON_OWNER_RELEASED');
    await waitGone(t, promised(1000));
  });
});

describe('C8: owner.stop({ kinds })', () => {
  // proves C7, C8
  it('only the trees of those kinds are terminated', async () => {
    const t = useTag();
    const registry = newRegistry({ grace: 2000 });
    registry.defineKind('review', { unfinishedWork: true });
    registry.defineKind('preview', { unfinishedWork: false });
    const owner = registry.owner('mixed');
    const byKind: Record<string, Started> = {};
    for (const kind of ['command', 'subagent', 'workflow', 'review', 'preview']) {
      byKind[kind] = await collect(owner.spawn(...WITH_CHILD, { kind, env: t.env }), t.tag);
    }
    const pick = (...kinds: string[]) => kinds.map((k) => byKind[k]!);

    await within(owner.stop({ kinds: ['workflow', 'review'] }), 10_000, 'stop({ kinds: [workflow, review] })', t.tag);
    expectAllGone(pick('workflow', 'review'), 'after stopping their kinds');
    expectAllAlive(pick('command', 'subagent', 'preview'), 'the other kinds');

    // An unknown kind is a typed error and stops nothing.
    await expectRejectsCode(owner.stop({ kinds: ['command', 'no-such-kind'] }), 'ERR_INVALID_ARG_VALUE', t.tag);
    expectAllAlive(pick('command', 'subagent', 'preview'), 'after a rejected stop()');

    await within(owner.stop({ kinds: ['command', 'preview'] }), 10_000, 'stop({ kinds: [command, preview] })', t.tag);
    expectAllGone(pick('command', 'preview'), 'after stopping their kinds');
    expectAllAlive(pick('subagent'), 'the subagent');
    expect(owner.hasLiveWork()).toBe(true);
    expect(Object.fromEntries(owner.list().map((i) => [i.kind, i.state]))).toEqual({
      command: 'ended',
      subagent: 'running',
      workflow: 'ended',
      review: 'ended',
      preview: 'ended',
    });

    await within(owner.release(), 10_000, 'release()', t.tag);
    expectAllGone(pick('subagent'), 'after release');
    await waitGone(t, promised(1000));
  });
});

// Every process the fixture host prints: owners alice/bob/carol/dave (dave detached).
const HOST_PIDS = [
  'alice.esc.root', 'alice.esc.anchor', 'alice.esc.bg', 'alice.esc.setsid', 'alice.esc.double', 'alice.esc.nohup',
  'alice.agent.root', 'alice.agent.anchor',
  'bob.flow.root', 'bob.flow.anchor', 'bob.flow.daemon',
  'bob.review.root', 'bob.review.anchor',
  'carol.keep.root', 'carol.keep.anchor', 'carol.keep.left',
  'carol.preview.root', 'carol.preview.anchor', 'carol.preview.child',
  'dave.agent.root', 'dave.agent.anchor',
];
// carol.keep.root exited by design (its leftover was kept).
const HOST_LIVE = HOST_PIDS.filter((name) => name !== 'carol.keep.root');

describe('C8: the host goes away', () => {
  beforeAll(async () => {
    await ensureDist();
  });

  type Ending = 'exit' | 'throw' | 'SIGTERM' | 'SIGINT' | 'SIGKILL';
  const how: Record<Ending, string> = {
    exit: 'exits normally (process.exit(0))',
    throw: 'throws an uncaught exception',
    SIGTERM: 'gets SIGTERM (no handler)',
    SIGINT: 'gets SIGINT (no handler)',
    SIGKILL: 'is SIGKILLed',
  };
  for (const ending of Object.keys(how) as Ending[]) {
    // proves C8
    it(`every tree of every owner and kind is gone within 1 s when the host ${how[ending]}`, async () => {
      const t = useTag();
      const signalled = ending.startsWith('SIG');
      const host = startRegistryHost([signalled ? 'wait' : ending, '--log-dir', tempDir()], t.env);
      await host.out.until(/^READY$/m, watchdog(20_000));
      const pids = host.out.pids();
      expect(Object.keys(pids).sort(), host.out.text + host.err.text).toEqual([...HOST_PIDS].sort());
      expect(host.out.text).toMatch(/^LIVEWORK alice true$/m);
      expect(host.out.text).toMatch(/^LIVEWORK bob true$/m);
      expect(host.out.text).toMatch(/^LIVEWORK carol false$/m);
      expect(host.out.text).toMatch(/^LIVEWORK dave true$/m);
      // bob's daemon is orphaned at once: the process-group tier promises it by
      // its marker, but not on XNU (sleep's environment withheld, forked by a
      // subshell that exited unseen).
      const live = HOST_LIVE.filter((n) => n !== 'bob.flow.daemon' || orphanedEscapee(t, pids[n], { program: 'sleep', forkedBy: 'unseen' })).map((name) => pids[name]!);
      for (const name of HOST_LIVE) expect(alive(pids[name]!), `${name} ${pids[name]} before`).toBe(true);

      if (signalled) host.child.kill(ending as NodeJS.Signals);
      else host.go();
      const exit = await within(host.exited, 10_000, 'the host to end', t.tag);
      if (signalled) expect(exit.signal).toBe(ending);
      else if (ending === 'exit') expect(exit.code, host.err.text).toBe(0);
      else {
        expect(exit.code).toBe(1);
        expect(host.err.text).toContain('uncaught on purpose');
      }
      // 1 s is C8's promise for a SIGKILLed host. The other endings reach the
      // anchors the same way (EOF, or TERM with the teardown grace from the
      // 'exit' listener), and none of these trees' members traps SIGTERM, so
      // the grace never runs: the same 1 s holds for them.
      await waitFor(() => live.every((pid) => !alive(pid)), {
        timeout: promised(1000),
        what: `every tree of the host to be gone after the host ${how[ending]}`,
        watch: [t.tag, ...live],
      });
      await waitGone(t, promised(1000));
    });
  }

  // proves C8
  it('detach() of an owner whose tree lost its anchor does not crash the host', async () => {
    const t = useTag();
    const host = startRegistryHost(['detach', '--log-dir', tempDir()], t.env);
    await host.out.until(/^READY$/m, watchdog(20_000));
    const pids = host.out.pids();
    const daveRoot = pids['dave.agent.root']!;
    // The anchor of dave's only tree dies (its members may run on, unanchored:
    // the tree's result says ERR_CORDON_ANCHOR_LOST). We clean up its root.
    onTestFinished(() => killPids([daveRoot]));
    process.kill(pids['dave.agent.anchor']!, 'SIGKILL');
    await waitFor(() => !alive(pids['dave.agent.anchor']!), { timeout: 2000, what: "dave's anchor to die", watch: t.tag });
    await sleep(1200); // the host has seen the anchor go (its exit is reported within 1 s)

    host.go(); // dave: re-attach, then detach with nothing live -> released at once
    const outcome = await Promise.race([
      host.out.until(/^SURVIVED$/m, 5000).then(() => 'survived'),
      host.exited.then((e) => `exited (code ${e.code}, signal ${e.signal}):\n${host.err.text}`),
    ]);
    expect(outcome).toBe('survived');
    expect(host.out.text).toMatch(/^RELEASED dave$/m);

    killPids([daveRoot]);
    host.child.kill('SIGKILL');
    await within(host.exited, 10_000, 'the host to end', t.tag);
    const rest = HOST_LIVE.filter((n) => !n.startsWith('dave.'))
      .filter((n) => n !== 'bob.flow.daemon' || orphanedEscapee(t, pids[n], { program: 'sleep', forkedBy: 'unseen' }))
      .map((n) => pids[n]!);
    await waitFor(() => rest.every((pid) => !alive(pid)), { timeout: promised(1000), what: 'the other trees to be gone', watch: [t.tag, ...rest] });
    await waitGone(t, promised(1000));
  });
});
