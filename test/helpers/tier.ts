// One suite, every tier: vitest runs every test file once per containment tier
// this machine has (CORDON_TIER, see vitest.config.ts). Where a tier does not
// promise a guarantee, the test asserts that capabilities() says so and checks
// what the tier does promise.
import { existsSync, realpathSync, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { expect, it, type TestContext } from 'vitest';
import { capabilities } from '../../lib/index.js';
import { probe } from '../../lib/native.js';
import type { Tagged } from './procs.js';

export const caps = capabilities();
export const tier = caps.tier;

/**
 * Whether an escapee orphaned before any snapshot saw it is still caught: by
 * a tier whose catchesEscapees is 'always', or 'marked' (the tests' escapees
 * keep their environment, and with it the tree's marker).
 */
export const catchesOrphanedEscapees = caps.guarantees.catchesEscapees !== 'never';

/**
 * Whether the anchor reads XNU's process table: macOS, or the darwin build on
 * Linux, on the model of XNU's process table (test/xnu-model, whose addon's
 * probe says xnu).
 */
export const xnu = process.platform === 'darwin' || probe().xnu === true;

/**
 * XNU withholds the environment of a cs_restricted program from every other
 * process, root's too (kern_sysctl.c, docs/xnu-model.md): Apple's system
 * programs, which SIP protects (/bin, /sbin, /usr/bin, /usr/sbin,
 * /usr/libexec; the model restricts the same), and setuid or setgid ones.
 * Whether `program` (a name searched in PATH, or a path) is one, where the
 * process table is XNU's; false elsewhere.
 */
export function environmentWithheld(program: string): boolean {
  if (!xnu) return false;
  let path = program;
  if (!program.includes('/')) {
    const dirs = (process.env.PATH ?? '').split(delimiter).filter(Boolean);
    path = dirs.map((d) => join(d, program)).find((p) => existsSync(p)) ?? program;
  }
  try {
    path = realpathSync(path);
    if ((statSync(path).mode & 0o6000) !== 0) return true;
    // (The Node running the tests: a Mac has it from a third party, wherever it is here.)
    if (path === realpathSync(process.execPath)) return false;
  } catch {
    return false;
  }
  return ['/bin/', '/sbin/', '/usr/bin/', '/usr/sbin/', '/usr/libexec/'].some((d) => path.startsWith(d));
}

/** How an escapee got away, where it matters (the process-group tier on XNU). */
export interface Escape {
  /** The program it runs now (`sleep`): one whose environment XNU withholds is found by lineage alone. */
  program: string;
  /**
   * Who forked it: a member the anchor knew (the root), or a process that
   * exited before any walk saw it (the subshell of `(setsid sleep &)`,
   * `setsid -f`'s first process, daemon(3)'s first fork).
   */
  forkedBy: 'member' | 'unseen';
  /** It stayed in the tree's session (left only the group): the session says it is a member. */
  inSession?: boolean;
}

/**
 * An escapee that was orphaned at once (setsid + its parent exited), with its
 * environment kept: caught by a tier whose catchesEscapees is 'always' or
 * 'marked'. Where the process table is XNU's, a 'marked' tier reads the
 * marker only of programs whose environment the kernel lets it read: one that
 * runs a cs_restricted program is caught in its session or by lineage (its
 * forker known), not when a process that exited unseen forked it (the
 * capabilities' notes say so). Where the tier does not promise it, assert
 * the tier says so, and let the test's cleanup kill it by pid without
 * failing. Returns whether the test may expect it gone.
 */
export function orphanedEscapee(t: Tagged, pid: number | undefined, escape?: Escape): boolean {
  if (escapePromised(escape)) return true;
  if (pid !== undefined) t.notPromised(pid);
  return false;
}

/**
 * Whether the tier promises to catch an escapee that got away as `escape`
 * says (orphanedEscapee's rule); where it does not, asserts that
 * capabilities() says so.
 */
export function escapePromised(escape?: Escape): boolean {
  const byLineageOnly = caps.guarantees.catchesEscapees === 'marked' && escape !== undefined && !escape.inSession && environmentWithheld(escape.program);
  if (catchesOrphanedEscapees && !(byLineageOnly && escape.forkedBy === 'unseen')) return true;
  if (!catchesOrphanedEscapees) {
    expect(caps.guarantees.catchesEscapees, `the ${tier} tier reports that it cannot promise this escapee`).toBe('never');
  } else {
    expect(caps.notes.join('\n'), `the ${tier} tier reports that an escapee running ${escape!.program} forked by a process it never saw is not promised`).toMatch(
      /withholds? (its|the) environment[^]*forked by a process the anchor knew[^]*One forked by a process that exited before any walk saw it/,
    );
  }
  return false;
}

/**
 * A test that applies only where `applies` holds; elsewhere it is skipped
 * with the reason in its name, so the run's output says why.
 */
export function itWhere(applies: boolean, title: string, reason: string, fn: (ctx: TestContext) => Promise<void> | void, timeout?: number): void {
  if (applies) it(title, fn, timeout);
  else it.skip(`${title} [skipped: ${reason}]`, fn);
}

