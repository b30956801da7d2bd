// Helpers for the registry tests (owners, kinds, release semantics): trees
// that print the pids of what they started, a host application of our own
// (test/fixtures/registry-host.mjs) and small utilities. Processes are still
// observed from outside, through /proc and the pids the trees print.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, onTestFinished } from 'vitest';
import { Registry, type ContainedProcess, type Owner, type RegistryOptions } from '../../lib/index.js';
import { capture, fixture } from './fixtures.js';
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

export interface Started {
  proc: ContainedProcess;
  out: ReturnType<typeof capture>;
  /** The root's pid. */
  root: number;
  /** What the tree printed as `PID <name> <pid>`. */
  pids: Record<string, number>;
  /** The root and every printed pid. */
  all: number[];
}

/**
 * owner.spawn(...), then waits (bounded) for the tree to print READY and
 * collects the pids it printed.
 */
export async function startTree(
  owner: Owner,
  [command, args]: [string, string[]],
  options: Parameters<Owner['spawn']>[2] & { env: NodeJS.ProcessEnv },
  tag: string,
): Promise<Started> {
  const proc = owner.spawn(command, args, options);
  const out = capture(proc.stdout);
  proc.stderr?.resume();
  const root = await within(proc.started, 10_000, `${command} to start`, tag);
  await out.until(/^READY$/m, 10_000);
  const pids = out.pids();
  const all = [...new Set([root, ...Object.values(pids)])];
  return { proc, out, root, pids, all };
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

/** `fn()` throws synchronously a CordonError with this code. */
export function expectThrowsCode(fn: () => unknown, code: string): void {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught, `expected a CordonError ${code}`).toBeDefined();
  expect((caught as { isCordonError?: boolean }).isCordonError).toBe(true);
  expect((caught as { code?: string }).code).toBe(code);
}

/** `promise` rejects (bounded) with a CordonError with this code. */
export async function expectRejectsCode(promise: Promise<unknown>, code: string, tag: string): Promise<void> {
  const outcome = await within(
    promise.then(
      () => ({ ok: true as const }),
      (err: unknown) => ({ ok: false as const, err }),
    ),
    10_000,
    `the call to settle (expecting ${code})`,
    tag,
  );
  expect(outcome.ok, `expected a rejection with ${code}`).toBe(false);
  if (!outcome.ok) {
    expect((outcome.err as { isCordonError?: boolean }).isCordonError).toBe(true);
    expect((outcome.err as { code?: string }).code).toBe(code);
  }
}

export type RegistryHost = Host;

/** Starts test/fixtures/registry-host.mjs (see that file for the endings it takes). */
export function startRegistryHost(args: string[], env: NodeJS.ProcessEnv): RegistryHost {
  return startHost(args, env, 'registry-host.mjs');
}
