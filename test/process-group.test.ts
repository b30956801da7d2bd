// The anchored process-group tier (the macOS strategy), exercised on Linux:
// the tree has a process group of its own that the anchor is not in (the
// anchor is in a session of its own, apart from the host's), pinned by the
// anchor's unreaped pin child until quiescence; members that left the group
// while still parented are caught by the anchor's snapshot, and members that
// left it at once (real daemons) by the tree's marker in their environment.
// Tier-specific, so it asks for the tier explicitly.
import { spawn as spawnChild } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { capabilities, spawn } from '../lib/index.js';
import { daemonTitle, daemons } from './helpers/daemons.js';
import { capture, repoRoot } from './helpers/fixtures.js';
import { ensureDist, startHost } from './helpers/host.js';
import { alive, describeProcs, readStat, sleep, useTag, waitFor, waitGone, within, type Tagged } from './helpers/procs.js';
import { missing } from './helpers/requirements.js';
import { itWhere } from './helpers/tier.js';
import { watchdog } from './helpers/time.js';

const tier = 'process-group' as const;
// The daemons and the members that leave at once start with `setsid -f`.
const noSetsidF = missing('setsid -f') ?? '';

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cordon-pg-'));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The tagged processes whose command line starts with each name, all outside the tree's group `group`. */
async function expectDaemons(t: Tagged, names: string[], group: number): Promise<number[]> {
  const found = () => names.map((n) => t.procs().find((p) => p.command.startsWith(n)));
  await waitFor(() => found().every((p) => p !== undefined), { timeout: 10_000, what: `the daemons (${names.join(', ')}) to be running`, watch: t.tag });
  const pids = found().map((p) => p!.pid);
  for (const [i, pid] of pids.entries()) expect(readStat(pid)?.pgid, `${names[i]} (${pid}) left the tree's group`).not.toBe(group);
  return pids;
}

describe('process-group tier', () => {
  // proves C11 (own report)
  it('is what capabilities() says it is', () => {
    const g = capabilities({ tier }).guarantees;
    expect(g.catchesEscapees).toBe('marked');
    expect(g.survivesHostSigkill).toBe(true);
    expect(g.gracefulStop).toBe(true);
  });

  // proves C2, C3
  it('the tree has a group of its own, apart from the anchor and the host; the anchor stays alive until quiescence; terminate() reaches group members after the root exits', async () => {
    const t = useTag();
    // The root exits at once, leaving a double-forked member: orphaned to init,
    // still in the group.
    const proc = spawn('sh', ['-c', '(sleep 300 >/dev/null 2>&1 & echo "PID m $!")'], { env: t.env, tier, leftovers: 'keep' });
    const out = capture(proc.stdout);
    const result = await within(proc.result, 10_000, 'result to settle', t.tag);
    expect(result.tier).toBe(tier);
    expect(result.leftoversKept).toBe(true);
    const member = out.pids().m!;
    const anchor = proc.anchorPid!;
    expect(alive(member)).toBe(true);
    expect(readStat(member)!.ppid, 'the member is an orphan, not a child of the anchor').not.toBe(anchor);
    const group = readStat(member)!.pgid;
    const host = readStat(process.pid)!;
    expect(group, 'the member is in a group of its own, not the host\'s').not.toBe(host.pgid);
    expect(readStat(anchor)!.pgid, 'the anchor is not in the tree\'s group').not.toBe(group);
    expect(readStat(anchor)!.sid, 'the anchor is not in the host\'s session').not.toBe(host.sid);
    expect(readStat(anchor)!.pgid, 'the anchor is not in the host\'s group').not.toBe(host.pgid);
    // The group's id is the pid of the anchor's pin: an unreaped zombie child
    // of the anchor, so the id cannot be reused while the tree lives.
    expect(readStat(group), 'the pin').toMatchObject({ state: 'Z', ppid: anchor });
    expect(alive(anchor), 'the anchor stays alive while the group has members').toBe(true);

    await within(proc.terminate({ grace: 2000 }), 5000, 'terminate() to resolve', t.tag);
    expect(alive(member)).toBe(false);
    // It exits right after its QUIET, which terminate() does not wait for
    // (by then it holds nothing of the command's: warm.test.ts).
    await waitFor(() => !alive(anchor), { timeout: watchdog(2000), what: `the anchor ${anchor} to exit once the tree is quiescent`, watch: [anchor] });
    await waitGone(t, 1000);
  });

  // proves C3, C11
  it('a member that called setsid while its parent lived is caught by the snapshot', async () => {
    const t = useTag();
    // The setsid'd sleeper stays parented for 2.5 s (past the anchor's 1 s
    // snapshot period), then its parent, the root, exits: it is an orphan
    // outside the group that only the snapshot knows.
    const proc = spawn('sh', ['-c', 'setsid sleep 300 >/dev/null 2>&1 & echo "PID s $!"; sleep 2.5'], { env: t.env, tier });
    const out = capture(proc.stdout);
    await out.until(/PID s \d+/);
    const escapee = out.pids().s!;
    await waitFor(() => readStat(escapee)?.pgid === escapee, { timeout: 5000, what: 'the sleeper to be in its own session', watch: [escapee] });
    const result = await within(proc.result, 15_000, 'result to settle', t.tag);
    expect(result.exitCode).toBe(0);
    expect(result.leftovers.map((l) => l.pid)).toContain(escapee);
    await waitFor(() => !alive(escapee), { timeout: 4000, what: 'the snapshot-known escapee to be killed', watch: [t.tag, escapee] });
    await waitGone(t, 1000);
  });

  // proves C11, C3
  it('a member a snapshot saw in the group that leaves it once orphaned is named in leftGroup and killed by terminate()', async () => {
    const t = useTag();
    // P is the root's child for 2 s (past the 1 s snapshot: seen in the group),
    // is orphaned in the group when the root exits, and at 3 s calls setsid
    // (setsid(1) as a non-leader: same pid, a session of its own).
    const proc = spawn('sh', ['-c', 'sh -c "sleep 3; exec setsid sleep 300" & echo "PID p $!"; sleep 2'], { env: t.env, tier, leftovers: 'keep' });
    const leavers: number[] = [];
    proc.on('leftGroup', (l: { pid: number }) => leavers.push(l.pid));
    const out = capture(proc.stdout);
    await out.until(/PID p \d+/);
    const p = out.pids().p!;
    const result = await within(proc.result, 15_000, 'result to settle', t.tag);
    expect(result.leftovers.map((l) => l.pid), 'P, left in the group at the root\'s exit').toContain(p);
    await waitFor(() => readStat(p)?.pgid === p, { timeout: 10_000, what: 'P to call setsid', watch: [t.tag, p] });
    await within(proc.terminate({ grace: 1000 }), 10_000, 'terminate() to resolve', t.tag);
    expect(alive(p)).toBe(false);
    expect(leavers, "P, reported ('leftGroup') once seen outside the group").toContain(p);
    await waitGone(t, 1000);
  });

  describe('the marker: members that left the group unseen', () => {
    // proves C3, C11
    itWhere(noSetsidF === '', `real daemons (${daemonTitle(true)}) are found and killed by terminate(); the result names them and still says partial`, noSetsidF, async () => {
      const t = useTag();
      const { script, names } = daemons(tempDir(), true, true);
      const proc = spawn('sh', ['-c', script], { env: t.env, tier });
      const out = capture(proc.stdout);
      await out.until(/^READY$/m, 20_000);
      const group = readStat(await proc.started)!.pgid;
      const pids = await expectDaemons(t, names, group);
      await within(proc.terminate({ grace: 2000 }), 10_000, 'terminate() to resolve', t.tag);
      expect(describeProcs(t.procs()), 'alive after terminate() resolved').toBe('(none)');
      for (const pid of pids) expect(alive(pid)).toBe(false);
      const result = await within(proc.result, 5000, 'the result', t.tag);
      // Found, but what scrubs its environment would not be: never 'complete'.
      expect(result.coverage).toBe('partial');
      for (const pid of pids) expect(result.leftGroup.map((l) => l.pid), JSON.stringify(result.leftGroup)).toContain(pid);
    });

    // proves C3
    itWhere(noSetsidF === '', 'a daemon started after the root exited, by a member that then exits too, keeps the tree from quiescence and is killed by terminate()', noSetsidF, async () => {
      const t = useTag();
      // Kept: no termination at root exit. The subshell is alone in the group
      // when it starts the daemon and exits: then the group is empty, and only
      // the sweep before quiescence can know the daemon.
      const proc = spawn('sh', ['-c', '(sleep 0.5; setsid -f sleep 307 >/dev/null 2>&1) >/dev/null 2>&1 &'], { env: t.env, tier, leftovers: 'keep' });
      const result = await within(proc.result, 10_000, 'the result', t.tag);
      expect(result.leftoversKept).toBe(true);
      const [daemon] = await expectDaemons(t, ['sleep 307'], -1);
      await waitFor(() => !t.procs().some((p) => p.command.startsWith('sh -c')), { timeout: 5000, what: 'the subshell to exit', watch: t.tag });
      // The anchor looks at its tree every second while it is young: past two
      // looks at an empty group, it would have declared quiescence.
      await sleep(2500);
      expect(alive(daemon!)).toBe(true);
      expect(proc.quiescent, 'quiescent while a marked member lives').toBe(false);
      await within(proc.terminate({ grace: 1000 }), 10_000, 'terminate() to resolve', t.tag);
      expect(alive(daemon!)).toBe(false);
      await waitGone(t, 2000);
    });

    // proves C11
    itWhere(noSetsidF === '', 'a member that scrubs its environment (env -i) escapes, as capabilities() and the result say; its marked sibling does not', noSetsidF, async () => {
      const t = useTag();
      expect(capabilities({ tier }).guarantees.catchesEscapees).toBe('marked');
      // The scrubbed one keeps only the test's tag (so the test finds it and its
      // cleanup kills it by pid); CORDON_TREE is gone from its environment.
      const script = [
        'env -i CORDON_TEST_TAG="$CORDON_TEST_TAG" setsid -f sleep 303 >/dev/null 2>&1',
        'setsid -f sleep 304 >/dev/null 2>&1',
        'echo READY',
        'exec sleep 299',
      ].join('\n');
      const proc = spawn('sh', ['-c', script], { env: t.env, tier });
      const out = capture(proc.stdout);
      await out.until(/^READY$/m, 20_000);
      const [scrubbed, marked] = await expectDaemons(t, ['sleep 303', 'sleep 304'], readStat(await proc.started)!.pgid);
      t.notPromised(scrubbed!);
      await within(proc.terminate({ grace: 1000 }), 10_000, 'terminate() to resolve', t.tag);
      expect(alive(marked!), 'the marked daemon').toBe(false);
      const result = await within(proc.result, 5000, 'the result', t.tag);
      expect(result.coverage).toBe('partial');
    });

    // proves C2
    it("a process outside the tree that carries the tree's marker with a wrong secret (or the token under another name) is not signalled", async () => {
      const t = useTag();
      const proc = spawn('sh', ['-c', 'echo "MARK $CORDON_TREE"; exec sleep 299'], { env: t.env, tier });
      const out = capture(proc.stdout);
      await out.until(/^MARK \S+$/m, 20_000);
      const token = /^MARK (\S+)$/m.exec(out.text)![1]!;
      // <anchor pid>.<anchor start>.<128 bits in hex>
      expect(token).toMatch(new RegExp(`^${proc.anchorPid}\\.\\d+\\.[0-9a-f]{32}$`));
      const prefix = token.slice(0, token.lastIndexOf('.') + 1);
      const secret = token.slice(prefix.length);
      const wrong = secret.replace(/^./, (c) => (c === '0' ? '1' : '0'));
      // Started after the anchor, as the host's user, outside the tree: only the environment differs.
      const forgers = [
        { CORDON_TREE: prefix + wrong },
        { CORDON_TREE: `${token}0` },
        { CORDON_TREE: `x${token}` },
        { CORDON_TREE_OTHER: token },
      ].map((extra) => spawnChild('sleep', ['305'], { env: { ...t.env, ...extra }, stdio: 'ignore', detached: true }));
      const pids = forgers.map((c) => c.pid!);
      // (Node's own handles: they never signal a child Node has reaped.)
      const killForgers = () => forgers.forEach((c) => c.kill('SIGKILL'));
      onTestFinished(killForgers);
      for (const c of forgers) c.unref();
      await waitFor(() => pids.every((pid) => alive(pid)), { timeout: 5000, what: 'the forgers to run', watch: pids });
      await within(proc.terminate({ grace: 1000 }), 10_000, 'terminate() to resolve', t.tag);
      for (const pid of pids) expect(alive(pid), `forger ${pid}`).toBe(true);
      const result = await within(proc.result, 5000, 'the result', t.tag);
      expect(result.leftGroup).toEqual([]);
      killForgers();
      await waitGone(t, 2000);
    });

    // proves C3
    itWhere(noSetsidF === '', 'a nested tree: its members carry both trees\' tokens, so the outer tree finds them', noSetsidF, async () => {
      const t = useTag();
      const inner = `
        import { spawn } from ${JSON.stringify(pathToFileURL(join(repoRoot, 'dist', 'index.js')).href)};
        const p = spawn('sh', ['-c', 'setsid -f sleep 306 >/dev/null 2>&1; echo "INNER $CORDON_TREE"; exec sleep 299'], { tier: 'process-group', stdio: ['ignore', 'inherit', 'inherit'] });
        await p.result;`;
      const proc = spawn(process.execPath, ['--input-type=module', '-e', inner], { env: t.env, tier });
      const out = capture(proc.stdout);
      await out.until(/^INNER \S+$/m, 20_000);
      const tokens = /^INNER (\S+)$/m.exec(out.text)![1]!.split(':');
      expect(tokens).toHaveLength(2);
      expect(tokens[0]!.startsWith(`${proc.anchorPid}.`), tokens.join(':')).toBe(true);
      const [daemon] = await expectDaemons(t, ['sleep 306'], readStat(await proc.started)!.pgid);
      // kill(): the outer anchor SIGKILLs the inner host and the inner anchor
      // at once, so the inner anchor ends nothing: only the outer tree's token
      // in the daemon's environment finds it.
      await within(proc.kill(), 10_000, 'kill() to resolve', t.tag);
      expect(alive(daemon!)).toBe(false);
      await waitGone(t, 2000);
    });
  });

  describe('host SIGKILLed', () => {
    beforeAll(async () => {
      await ensureDist();
    });

    // proves C8
    it('the whole group is killed by its anchor', async () => {
      const t = useTag({ CORDON_TIER: tier });
      const host = startHost(['wait', '--trees', 'tree,plain'], t.env);
      await host.ready(20_000);
      const pids = host.out.pids();
      const members = ['tree.bg', 'tree.double', 'tree.nohup', 'tree.setsid', 'plain.root'].map((n) => pids[n]!);
      for (const pid of members) expect(alive(pid)).toBe(true);
      const group = readStat(pids['tree.bg']!)!.pgid;
      expect(readStat(group), "the tree's group is pinned by the anchor's pin").toMatchObject({ state: 'Z', ppid: pids['tree.anchor'] });
      host.child.kill('SIGKILL');
      await within(host.exited, 10_000, 'the host to end', t.tag);
      await waitFor(() => members.every((pid) => !alive(pid)), { timeout: 1000, what: 'every member to be gone', watch: [t.tag, ...members] });
      await waitGone(t, 1000);
    });

    // proves C8
    itWhere(noSetsidF === '', `real daemons (${daemonTitle(true)}) are found by the marker and killed by the anchor alone`, noSetsidF, async () => {
      const t = useTag();
      const { script, names } = daemons(tempDir(), true, true);
      // A host of its own that starts the tree and waits to be killed.
      const host = `
        import { spawn } from ${JSON.stringify(pathToFileURL(join(repoRoot, 'dist', 'index.js')).href)};
        const p = spawn('sh', ['-c', ${JSON.stringify(script)}], { tier: 'process-group', stdio: ['ignore', 'pipe', 'ignore'] });
        p.stdout.on('data', (d) => process.stdout.write(d));
        await p.started;
        console.log('PID root ' + p.pid);
        setInterval(() => {}, 1000);`;
      const child = spawnChild(process.execPath, ['--input-type=module', '-e', host], { env: t.env, stdio: ['ignore', 'pipe', 'inherit'] });
      onTestFinished(() => void child.kill('SIGKILL'));
      const exited = new Promise((resolve) => child.once('exit', resolve));
      const out = capture(child.stdout);
      await out.until(/^READY$/m, 20_000);
      await out.until(/^PID root \d+$/m, 20_000);
      const pids = await expectDaemons(t, names, readStat(out.pids().root!)!.pgid);
      child.kill('SIGKILL');
      await within(exited, 10_000, 'the host to end', t.tag);
      // The anchor's grace after the host's death is the default 5 s; the sleeps end at once.
      await waitFor(() => pids.every((pid) => !alive(pid)), { timeout: 8000, what: 'every daemon to be gone', watch: [t.tag, ...pids] });
      await waitGone(t, 2000);
    });
  });
});
