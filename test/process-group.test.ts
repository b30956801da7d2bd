// The anchored process-group tier (the macOS strategy), exercised on Linux:
// the tree has a process group of its own that the anchor is not in (the
// anchor is in a session of its own, apart from the host's), pinned by the
// anchor's unreaped pin child until quiescence; members that left the group
// while still parented are caught by the anchor's snapshot. Tier-specific, so
// it asks for the tier explicitly.
import { beforeAll, describe, expect, it } from 'vitest';
import { capabilities, spawn } from '../lib/index.js';
import { capture } from './helpers/fixtures.js';
import { ensureDist, startHost } from './helpers/host.js';
import { alive, readStat, useTag, waitFor, waitGone, within } from './helpers/procs.js';

const tier = 'process-group' as const;

describe('process-group tier', () => {
  it('is what capabilities() says it is', () => {
    const g = capabilities({ tier }).guarantees;
    expect(g.catchesEscapees).toBe('while-parented');
    expect(g.survivesHostSigkill).toBe(true);
    expect(g.gracefulStop).toBe(true);
  });

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
    expect(alive(anchor), 'the anchor is gone only at quiescence').toBe(false);
    await waitGone(t, 1000);
  });

  it('a member that called setsid while its parent lived is caught by the snapshot', async () => {
    const t = useTag();
    // The setsid'd sleeper stays parented for 2.5 s (past the anchor's 1 s
    // snapshot period), then its parent, the root, exits: it is an orphan
    // outside the group that only the snapshot knows.
    const proc = spawn('sh', ['-c', 'setsid sleep 300 >/dev/null 2>&1 & echo "PID s $!"; sleep 2.5'], { env: t.env, tier });
    const out = capture(proc.stdout);
    await out.until(/PID s \d+/);
    const escapee = out.pids().s!;
    await waitFor(() => readStat(escapee)?.pgid === escapee, { timeout: 5000, what: 'the sleeper to be in its own session', pids: [escapee] });
    const result = await within(proc.result, 15_000, 'result to settle', t.tag);
    expect(result.exitCode).toBe(0);
    expect(result.leftovers.map((l) => l.pid)).toContain(escapee);
    await waitFor(() => !alive(escapee), { timeout: 4000, what: 'the snapshot-known escapee to be killed', tag: t.tag, pids: [escapee] });
    await waitGone(t, 1000);
  });

  describe('host SIGKILLed', () => {
    beforeAll(async () => {
      await ensureDist();
    });

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
      await waitFor(() => members.every((pid) => !alive(pid)), { timeout: 1000, what: 'every member to be gone', tag: t.tag, pids: members });
      await waitGone(t, 1000);
    });
  });
});
