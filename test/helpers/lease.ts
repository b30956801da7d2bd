// Leased trees for the lease tests (test/lease*.test.ts, test/other-users.test.ts):
// a host fixture (test/fixtures/lease-host.mjs) that leases a tree and is
// then killed, adopters, and a private runtime directory per test. Every
// host started here is SIGKILLed by the test's cleanup if it still runs.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { Registry } from '../../lib/index.js';
import { startHost, type Host } from './host.js';
import { within, type Tagged } from './procs.js';
import { watchdog } from './time.js';

/** A tree that prints its child's pid, then a tick every 100 ms until TERM. */
export const TICKER = 'sleep 300 & echo "PID child $!"; echo READY; i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.1; done';

export interface Leased {
  host: Host;
  id: string;
  token: string;
  log: string;
  pids: Record<string, number>;
}

/** A private runtime directory (XDG_RUNTIME_DIR) per test: its endpoints are the test's alone. */
export function useRuntime(t: Tagged): { env: NodeJS.ProcessEnv; leaseDir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'cordon-lease-test-'));
  chmodSync(dir, 0o700);
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return { env: { ...t.env, XDG_RUNTIME_DIR: dir }, leaseDir: join(dir, 'cordon') };
}

export function hostEnded(host: Host): void {
  onTestFinished(() => {
    if (host.child.exitCode === null && host.child.signalCode === null) host.child.kill('SIGKILL');
  });
}

export async function spawnLeased(env: NodeJS.ProcessEnv, leaseMs: number, graceMs: number, script = TICKER, owner = 'alice', kind = 'command'): Promise<Leased> {
  const host = startHost(['spawn', String(leaseMs), String(graceMs), owner, kind, script], env, 'lease-host.mjs');
  hostEnded(host);
  await host.ready();
  const text = host.out.text;
  return {
    host,
    id: /^LEASEID (\S+)$/m.exec(text)![1]!,
    token: /^TOKEN (\S+)$/m.exec(text)![1]!,
    log: /^LOG (.+)$/m.exec(text)![1]!,
    pids: host.out.pids(),
  };
}

export async function killHost(host: Host, t: Tagged): Promise<void> {
  host.child.kill('SIGKILL');
  await within(host.exited, watchdog(5000), 'the SIGKILLed host to end', t.tag);
}

export function adopter(env: NodeJS.ProcessEnv, id: string, token: string, then: 'terminate' | 'result' | 'wait' | 'go', gated = false): Host {
  const host = startHost(['adopt', id, token, then, ...(gated ? ['gated'] : [])], env, 'lease-host.mjs');
  hostEnded(host);
  return host;
}

export function treePids(l: Leased): number[] {
  return Object.entries(l.pids)
    .filter(([name]) => name !== 'tree.anchor')
    .map(([, pid]) => pid);
}

/** registry.adoptable() over the test's private runtime directory, asked by the test process itself. */
export async function adoptableIn(env: NodeJS.ProcessEnv) {
  const saved = process.env.XDG_RUNTIME_DIR;
  process.env.XDG_RUNTIME_DIR = env.XDG_RUNTIME_DIR;
  try {
    return await new Registry().adoptable();
  } finally {
    if (saved === undefined) delete process.env.XDG_RUNTIME_DIR;
    else process.env.XDG_RUNTIME_DIR = saved;
  }
}


/** Makes the test's private runtime directory the test process's own XDG_RUNTIME_DIR (restored when the test finishes). */
export function useRuntimeHere(env: NodeJS.ProcessEnv): void {
  const saved = process.env.XDG_RUNTIME_DIR;
  onTestFinished(() => {
    if (saved === undefined) delete process.env.XDG_RUNTIME_DIR;
    else process.env.XDG_RUNTIME_DIR = saved;
  });
  process.env.XDG_RUNTIME_DIR = env.XDG_RUNTIME_DIR;
}

/** SIGSTOPs the leased tree's anchor (the test's own fixture's, by the pid it printed); the test's cleanup resumes it whatever happens, before the tag's SIGKILL. Returns its pid. */
export function stopAnchor(l: Leased): number {
  const anchor = l.pids['tree.anchor']!;
  onTestFinished(() => {
    try {
      process.kill(anchor, 'SIGCONT');
    } catch {}
  });
  process.kill(anchor, 'SIGSTOP');
  return anchor;
}
