// Helpers for the registry tests (owners, kinds, release semantics): trees
// that print the pids of what they started (start them with owner.spawn()
// and collect() of trees.ts), a host application of our own
// (test/fixtures/registry-host.mjs) and small utilities. Processes are still
// observed from outside, through the observer (observer.ts) and the pids the trees print.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { Registry, type RegistryOptions } from '../../lib/index.js';
import { fixture } from './fixtures.js';
import { startHost, type Host } from './host.js';
import { within } from './procs.js';

/** `sleep 300` as the root itself: one process. */
export const PLAIN: [string, string[]] = ['sh', ['-c', 'echo "PID root $$"; echo READY; exec sleep 300']];
/** A root shell with a background child. */
export const WITH_CHILD: [string, string[]] = ['sh', ['-c', 'echo "PID root $$"; sleep 300 & echo "PID child $!"; echo READY; wait']];
/** The root exits 0 at once, leaving a `sleep 300` behind (a leftover). */
export const LEAVES: [string, string[]] = ['sh', ['-c', 'echo "PID root $$"; sleep 300 >/dev/null 2>&1 & echo "PID left $!"; echo READY']];
/** test/fixtures/tree.sh: background, setsid, double-forked and nohup children. */
export const ESCAPEES: [string, string[]] = [fixture('tree.sh'), []];

/**
 * A root whose TERM trap appends "trapped" to $TRAP_FILE, then exits 0
 * (`exits`) or keeps running until the forced kill.
 */
export function trapScript(exits: boolean): [string, string[]] {
  const onTerm = exits ? 'echo trapped >> \\"$TRAP_FILE\\"; exit 0' : 'echo trapped >> \\"$TRAP_FILE\\"';
  return ['sh', ['-c', `trap "${onTerm}" TERM; echo "PID root $$"; echo READY; while :; do sleep 0.1; done`]];
}

/**
 * A registry of this test (log files in a fresh directory). When the test
 * finishes, whatever it still owns is killed (grace 0) before the tag cleanup
 * runs, so no keep-alive timer of this test fires in a later one.
 */
export function newRegistry(options: RegistryOptions = {}): Registry {
  const registry = new Registry({ logDir: tempDir('cordon-registry-logs-'), ...options });
  onTestFinished(async () => {
    await within(registry.releaseAll({ grace: 0 }), 10_000, 'the cleanup releaseAll()').catch(() => {});
  });
  return registry;
}

/** A fresh directory, removed when the test finishes. */
export function tempDir(prefix = 'cordon-registry-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export function shuffle<T>(items: T[]): T[] {
  const a = [...items];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}

export type RegistryHost = Host;

/** Starts test/fixtures/registry-host.mjs (see that file for the endings it takes). */
export function startRegistryHost(args: string[], env: NodeJS.ProcessEnv): RegistryHost {
  return startHost(args, env, 'registry-host.mjs');
}
