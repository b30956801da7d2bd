// One suite, every tier: vitest runs every test file once per containment tier
// this machine has (CORDON_TIER, see vitest.config.ts). Where a tier does not
// promise a guarantee, the test asserts that capabilities() says so and checks
// what the tier does promise.
import { expect, it, type TestContext } from 'vitest';
import { capabilities } from '../../lib/index.js';
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
 * An escapee that was orphaned at once (setsid + its parent exited), with its
 * environment kept: caught by a tier whose catchesEscapees is 'always' or
 * 'marked'. Elsewhere assert the tier says so, and let the test's cleanup
 * kill it by pid without failing. Returns whether the test may expect it gone.
 */
export function orphanedEscapee(t: Tagged, pid: number | undefined): boolean {
  if (catchesOrphanedEscapees) return true;
  expect(caps.guarantees.catchesEscapees, `the ${tier} tier reports that it cannot promise this escapee`).toBe('never');
  if (pid !== undefined) t.notPromised(pid);
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

