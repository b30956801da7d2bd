// C11: capabilities are reported, not assumed; the README's table is the
// code's table.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { capabilities } from '../lib/index.js';
import { guaranteeTable } from '../lib/guarantee-table.js';
import { cgroupWritable, limitControllerHere } from './helpers/cgroup.js';
import { repoRoot } from './helpers/fixtures.js';
import { subreaperAvailable, subreaperUnknown } from './helpers/subreaper.js';
import { itWhere } from './helpers/tier.js';

// The tiers that reap orphans need a host that allows a subreaper (measured
// without cordon: not so under the arm64 lane's emulator). Where the run
// cannot tell, the tests that need the answer are skipped, saying why.
const unknown = subreaperUnknown() ?? '';
const canReap = unknown === '' && subreaperAvailable();

describe('capabilities', () => {
  // proves C11 (own report): the README's table is the code's
  it('the README guarantee table is generated from the code', () => {
    const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
    const m = /<!-- guarantee-table:start -->\n([\s\S]*?)\n<!-- guarantee-table:end -->/.exec(readme);
    expect(m, 'README.md has the guarantee-table markers').not.toBeNull();
    expect(m![1]).toBe(guaranteeTable());
  });

  // proves C11: against this host's cgroup and subreaper, read from /proc
  itWhere(unknown === '', 'reports the tiers this Linux host has, strongest first', unknown, () => {
    const caps = capabilities();
    expect(caps.platform).toBe('linux');
    expect(caps.tiers).toContain('process-group');
    expect(caps.tiers.includes('subreaper')).toBe(canReap);
    // The cgroup tier exactly where cgroup v2 is mounted and this process's
    // own cgroup is writable (read here from /proc, not from cordon), on a
    // host that allows a subreaper.
    expect(caps.tiers[0]).toBe(!canReap ? 'process-group' : cgroupWritable() ? 'cgroup' : 'subreaper');
    expect(caps.tier).toBe(caps.tiers[0]);
    expect(typeof caps.pidfd).toBe('boolean');
  });

  // proves C11 (own report)
  it('only a tier with a second handle on the tree claims to end it when the anchor dies', () => {
    for (const tier of capabilities().tiers) {
      expect(capabilities({ tier }).guarantees.survivesAnchorDeath, tier).toBe(tier === 'cgroup');
    }
    // What the host's sweep after a lost anchor promises: every member in the
    // cgroup tier; in the others only what the tree's marker or session tells
    // (a member that scrubbed the marker and left the session: not promised).
    const pidfd = capabilities().pidfd;
    for (const tier of capabilities().tiers) {
      const caps = capabilities({ tier });
      expect(caps.guarantees.anchorLossSwept, tier).toBe(tier === 'cgroup' ? 'always' : pidfd ? 'marked' : 'never');
      if (tier !== 'cgroup' && pidfd) expect(caps.notes.join(' '), tier).toMatch(/If the anchor is killed|if the anchor is killed/);
      if (tier !== 'cgroup' && pidfd) expect(caps.notes.join(' '), tier).toMatch(/env -i\)[^.]*may run on/);
    }
  });

  // proves C11 (own report)
  itWhere(canReap, 'the subreaper tier catches every escapee and reaps orphans', unknown || 'this host does not allow a subreaper (see test/tier-availability.test.ts)', () => {
    const g = capabilities({ tier: 'subreaper' }).guarantees;
    expect(g.catchesEscapees).toBe('always');
    expect(g.reapsOrphans).toBe(true);
    expect(g.survivesHostSigkill).toBe(true);
    expect(g.pidReuseSafe).toBe(capabilities().pidfd);
  });

  // proves C11 (own report)
  it('the process-group tier says what it cannot do', () => {
    const caps = capabilities({ tier: 'process-group' });
    expect(caps.guarantees.catchesEscapees).toBe('marked');
    expect(caps.guarantees.reapsOrphans).toBe(false);
    expect(caps.notes.join(' ')).toMatch(/CORDON_TREE/);
    expect(caps.notes.join(' ')).toMatch(/scrubbed environment \(env -i\)/);
  });

  // proves C11: against this host's controllers, read from /proc
  it('only the cgroup tier claims resource limits, and only where the host has the controllers', () => {
    // Whether this host has them is the test's own look at /proc (v2 delegation, writable v1 hierarchies).
    const here = limitControllerHere('memory') && limitControllerHere('pids') && limitControllerHere('cpu');
    for (const tier of capabilities().tiers) {
      expect(capabilities({ tier }).guarantees.limits, tier).toBe(tier === 'cgroup' && here);
    }
  });

  // proves C11 (own report)
  it('an unavailable tier is a typed error', () => {
    expect(() => capabilities({ tier: 'bogus' as never })).toThrow(expect.objectContaining({ code: 'ERR_CORDON_CONTAINMENT' }));
  });
});
