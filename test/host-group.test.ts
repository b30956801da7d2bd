// Issue 10, part 2: the host's process group and terminal must not reach the
// anchors. Job control, `timeout`, CI runners and supervisors signal a host's
// whole process group (`kill -9 -<pgid>`), and a terminal hang-up sends SIGHUP
// to its foreground group: the anchors must survive that (they leave the
// host's group and session) and end their trees within C8's 1 s, the tree's
// cgroup included. The host is test/fixtures/host.mjs in a process group of
// its own; everything is observed from outside, through the pids it printed.
import { existsSync, rmdirSync } from 'node:fs';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { cgroupDirOf } from './helpers/cgroup.js';
import { ensureDist, startHost } from './helpers/host.js';
import { alive, readStat, useTag, waitFor, waitGone, within } from './helpers/procs.js';
import { orphanedEscapee, tier } from './helpers/tier.js';
import { promised } from './helpers/time.js';

const TREE_NAMES = [
  'tree.root', 'tree.anchor', 'tree.bg', 'tree.setsid', 'tree.double', 'tree.nohup',
  'daemon.root', 'daemon.anchor', 'daemon.daemon',
  'plain.root', 'plain.anchor',
];
const ROOTS = TREE_NAMES.filter((n) => n.endsWith('.root'));

describe("the host's process group", () => {
  beforeAll(async () => {
    await ensureDist();
  });

  // proves C8: the anchors' group and session, read from /proc
  it("the anchors share neither the host's process group nor its session", async () => {
    const t = useTag();
    const host = startHost(['wait', '--trees', 'plain'], t.env, 'host.mjs', { ownGroup: true });
    await host.ready();
    const hostPid = host.child.pid!;
    const hostStat = readStat(hostPid)!;
    expect(hostStat.pgid, 'the host leads its own group').toBe(hostPid);
    const pids = host.out.pids();
    const anchor = readStat(pids['plain.anchor']!)!;
    expect(anchor, 'the anchor is alive').toBeDefined();
    expect(anchor.pgid, "the anchor's process group").not.toBe(hostStat.pgid);
    expect(anchor.sid, "the anchor's session").not.toBe(hostStat.sid);
    if (tier !== 'process-group') {
      // The command itself stays where child_process would put it: in the
      // host's group and session, so the terminal's job control reaches it.
      const root = readStat(pids['plain.root']!)!;
      expect(root.pgid, "the command's process group").toBe(hostStat.pgid);
      expect(root.sid, "the command's session").toBe(hostStat.sid);
    }
    host.child.kill('SIGKILL');
    await within(host.exited, 10_000, 'the host to end', t.tag);
    await waitGone(t, 2000);
  });

  for (const signal of ['SIGKILL', 'SIGHUP'] as const) {
    // proves C8
    it(`${signal} to the host's whole process group: every tree process is gone within 1 s, and its cgroup`, async () => {
      const t = useTag();
      const host = startHost(['wait'], t.env, 'host.mjs', { ownGroup: true });
      await host.ready();
      const hostPid = host.child.pid!;
      expect(readStat(hostPid)?.pgid, 'the host leads its own group').toBe(hostPid);
      const pids = host.out.pids();
      expect(Object.keys(pids).sort(), host.out.text).toEqual([...TREE_NAMES].sort());
      for (const name of TREE_NAMES) expect(alive(pids[name]!), `${name} ${pids[name]} before`).toBe(true);
      // The cgroup tier: each tree's own cgroup, read from /proc while its root runs.
      const hostCgroup = cgroupDirOf(hostPid);
      const treeCgroups = ROOTS.map((name) => cgroupDirOf(pids[name]!)).filter((dir): dir is string => dir !== undefined && dir !== hostCgroup);
      if (tier === 'cgroup') expect(treeCgroups, 'every tree has a cgroup of its own').toHaveLength(ROOTS.length);
      onTestFinished(() => {
        for (const dir of treeCgroups) {
          try {
            rmdirSync(dir);
          } catch {
            // gone (as it should be), or still holding what the tag cleanup kills
          }
        }
      });
      const names = orphanedEscapee(t, pids['daemon.daemon'], { program: 'sleep', forkedBy: 'unseen' }) ? TREE_NAMES : TREE_NAMES.filter((n) => n !== 'daemon.daemon');
      const members = names.filter((name) => !name.endsWith('.anchor')).map((name) => pids[name]!);
      const all = names.map((name) => pids[name]!);

      process.kill(-hostPid, signal);
      const exit = await within(host.exited, 10_000, 'the host to end', t.tag);
      expect(exit.signal).toBe(signal);
      // C8: the host is gone (it could run no code): the anchors alone end the
      // trees, setsid'd and double-forked members included, within 1 s.
      await waitFor(() => members.every((pid) => !alive(pid)), {
        timeout: promised(1000),
        what: `every process of the host's trees to be gone after ${signal} to the host's group`,
        watch: [t.tag, ...members],
      });
      // The anchors (cordon's machinery, not members) right after, with their
      // trees' cgroups removed.
      await waitFor(() => all.every((pid) => !alive(pid)), { timeout: 2000, what: 'the anchors to exit', watch: [t.tag, ...all] });
      await waitFor(() => treeCgroups.every((dir) => !existsSync(dir)), {
        timeout: 2000,
        what: `the trees' cgroups to be removed: ${treeCgroups.filter((dir) => existsSync(dir)).join(', ')}`,
      });
      await waitGone(t, promised(1000));
    });
  }
});
