// What cordon is not (issue 10, part 6; docs/contract.md "What cordon is
// not"): it contains careless and daemonizing programs, not hostile ones.
// The cgroup tier runs the command in a cgroup namespace rooted at its tree's
// cgroup where the host may make one (CAP_SYS_ADMIN). What that does and does
// not prevent is observed here from outside, as this suite runs as root.
import { readFileSync, readlinkSync } from 'node:fs';
import { describe, expect } from 'vitest';
import { spawn } from '../lib/index.js';
import { cgroupMount, cgroupOf } from './helpers/cgroup.js';
import { useTag, within } from './helpers/procs.js';
import { caps, itWhere, tier } from './helpers/tier.js';
import { collect, waitPidsGone } from './helpers/trees.js';

const isRoot = process.getuid?.() === 0;

/** The cgroup2 mount's super options include nsdelegate (namespaces are delegation boundaries). */
function nsdelegate(): boolean {
  const line = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .find((l) => / - cgroup2 /.test(l));
  return line !== undefined && /(^|,)nsdelegate(,|$)/.test(line.split(' - ')[1]!.split(' ')[2] ?? '');
}

describe(`the command's cgroup namespace, ${tier} tier`, () => {
  // proves nothing of the contract: the threat model's cgroup namespace (no clause)
  itWhere(tier === 'cgroup', "the command's cgroup namespace is rooted at its tree's cgroup where capabilities() says so", `the ${tier} tier makes no cgroup`, async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', 'echo "SEES $(grep "^0::" /proc/self/cgroup)"; echo "PID root $$"; echo READY; exec sleep 300'], { env: t.env });
    const { out, root } = await collect(proc, t.tag);
    const mine = readlinkSync('/proc/self/ns/cgroup');
    const its = readlinkSync(`/proc/${root}/ns/cgroup`);
    const seen = /^SEES 0::(.*)$/m.exec(out.text)![1];
    if (caps.guarantees.cgroupNamespace) {
      expect(its, 'a cgroup namespace of its own').not.toBe(mine);
      expect(seen, 'its own cgroup is the root of its view').toBe('/');
    } else {
      expect(isRoot, 'capabilities() denies a cgroup namespace only to a host without CAP_SYS_ADMIN').toBe(false);
      expect(its).toBe(mine);
    }
    expect(cgroupOf(root), 'seen from outside, it is in the tree cgroup').toMatch(new RegExp(`/cordon-${proc.anchorPid}-[0-9a-f]{16}$`));
    await within(proc.kill(), 10_000, 'kill()', t.tag);
  });

  // proves C3: a member that left for an ancestor cgroup is still ended
  itWhere(
    tier === 'cgroup' && isRoot,
    'a root member writing its pid to an ancestor cgroup: refused only with nsdelegate; terminate() still reaches it while the anchor lives',
    tier === 'cgroup' ? 'the test does not run as root' : `the ${tier} tier makes no cgroup`,
    async () => {
      const t = useTag();
      const host = cgroupOf('self')!;
      const target = host === '/' ? cgroupMount()! : cgroupMount()! + host;
      const mover = 'echo "PID mover $$"; if echo $$ > "$TARGET/cgroup.procs"; then echo MOVED; else echo REFUSED; fi; echo READY; exec sleep 300';
      const proc = spawn('sh', ['-c', 'sh -c "$MOVER" & echo "PID root $$"; wait'], { env: { ...t.env, TARGET: target, MOVER: mover } });
      const { out, pids, all } = await collect(proc, t.tag);
      const moved = /^MOVED$/m.test(out.text);
      // What the namespace gives is what the mount allows: without nsdelegate
      // the existing cgroup2 mount still reaches every ancestor.
      expect(moved ? 'MOVED' : 'REFUSED', `nsdelegate on the cgroup2 mount: ${nsdelegate()}`).toBe(nsdelegate() ? 'REFUSED' : 'MOVED');
      expect(caps.guarantees.holdsHostileMembers, 'capabilities() does not claim to hold such a member').toBe(false);
      if (moved) expect(cgroupOf(pids.mover!), 'the member left the tree cgroup').toBe(host);
      // It is still the anchor's descendant: terminate() ends it (its cgroup
      // no longer does, so an anchor it also killed would leave it running).
      await within(proc.terminate({ grace: 1000 }), 15_000, 'terminate()', t.tag);
      await waitPidsGone(all, 2000, 'every member, the one that left the cgroup included', t.tag);
    },
  );
});
