// C11 where a host lacks what a tier needs: the tiers that reap orphans
// (subreaper, cgroup) need PR_SET_CHILD_SUBREAPER, which an emulator may
// refuse (the arm64 lane, .ci/arm64.sh, runs under qemu-user, which does).
// capabilities() must say so, and asking for such a tier must be a typed
// error before anything runs. What the host allows is measured without
// cordon (test/helpers/subreaper.ts).
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect } from 'vitest';
import { capabilities, spawn } from '../lib/index.js';
import type { CordonError } from '../lib/index.js';
import { describeProcs, findTagged, useTag, within } from './helpers/procs.js';
import { subreaperAvailable, subreaperUnknown } from './helpers/subreaper.js';
import { itWhere } from './helpers/tier.js';

// Where the run cannot tell whether the host allows a subreaper, the tests are skipped, saying why.
const unknown = (process.platform === 'linux' && subreaperUnknown()) || '';
const canReap = process.platform === 'linux' && unknown === '' && subreaperAvailable();
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('tiers offered where the host can give them', () => {
  // proves C11: against whether this host lets a process become a subreaper
  itWhere(unknown === '', 'the subreaper and cgroup tiers are offered exactly where a process can become a subreaper', unknown, () => {
    const caps = capabilities();
    expect(caps.tiers, 'the process-group tier needs nothing special').toContain('process-group');
    expect(caps.tiers.includes('subreaper'), `subreaper tier offered (host allows a subreaper: ${canReap})`).toBe(canReap);
    if (!canReap) expect(caps.tiers, 'the cgroup tier is the subreaper tier plus a cgroup').not.toContain('cgroup');
    expect(caps.tier).toBe(caps.tiers[0]);
    if (!canReap) expect(caps.guarantees.reapsOrphans, 'the default tier does not claim to reap orphans').toBe(false);
  });

  // proves C1, C11
  itWhere(
    unknown === '' && !canReap,
    'a subreaper tier asked for where there is none: a typed error, and nothing ran; best-effort runs in the process-group tier',
    unknown || 'this host lets a process become a subreaper',
    async () => {
      const t = useTag();
      const dir = mkdtempSync(join(tmpdir(), 'cordon-tier-'));
      dirs.push(dir);
      const marker = join(dir, 'ran');
      expect(() => capabilities({ tier: 'subreaper' })).toThrow(expect.objectContaining({ code: 'ERR_CORDON_CONTAINMENT' }));
      for (const tier of ['subreaper', 'cgroup'] as const) {
        // Refused at spawn() or by the anchor before the command: either way typed, nothing ran.
        const refusal = async (): Promise<CordonError | undefined> => {
          try {
            const proc = spawn('sh', ['-c', `echo ran > ${marker}`], { tier, env: t.env, stdio: 'ignore' });
            return await within(proc.result.then(() => undefined, (e: CordonError) => e), 20_000, `the ${tier} tier's refusal`, t.tag);
          } catch (e) {
            return e as CordonError;
          }
        };
        const error = await refusal();
        expect(error?.code, `tier '${tier}': ${error?.message}`).toBe('ERR_CORDON_CONTAINMENT');
        expect(existsSync(marker), `the command did not run in the ${tier} tier`).toBe(false);
        expect(describeProcs(findTagged(t.tag)), 'no process of this test runs').toBe('(none)');
      }
      const proc = spawn('sh', ['-c', `echo ran > ${marker}`], { containment: 'best-effort', tier: 'subreaper', env: t.env, stdio: 'ignore' });
      const result = await within(proc.result, 20_000, 'the best-effort run', t.tag);
      expect(proc.tier).toBe('process-group');
      expect(result.exitCode).toBe(0);
      expect(existsSync(marker), 'best-effort ran the command').toBe(true);
    },
  );
});
