// Helpers for the termination, grace, cancellation, launch-failure and
// control-channel tests: starting a tree and collecting the pids it printed,
// and reading what the observer says about a process (signal dispositions;
// open descriptors, which only /proc shows). Everything is observed from
// outside, never through cordon's bookkeeping.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { spawn, type ContainedProcess, type ContainedResult, type SpawnOptions } from '../../lib/index.js';
import { capture, fixture } from './fixtures.js';
import { observer } from './observer.js';
import { alive, aliveTagged, cmdline, rememberIdentity, describeProcs, findTagged, readStat, waitFor, within, type Tagged } from './procs.js';
import { tempDir } from './registry.js';

export interface Started {
  proc: ContainedProcess;
  out: ReturnType<typeof capture>;
  err: ReturnType<typeof capture>;
  /** The root's pid (from `proc.started`). */
  root: number;
  /** What the tree printed as `PID <name> <pid>`. */
  pids: Record<string, number>;
  /** The root and every printed pid, deduplicated. */
  all: number[];
}

export interface CollectOptions {
  /** What the tree prints once every member it names is running (default: a READY line). */
  ready?: RegExp;
  /** The bound of each wait, for the root to start and for `ready` (default 10 s). */
  timeout?: number;
}

/**
 * The one way the tests start a tree and learn its pids: takes what spawn()
 * or owner.spawn() returned (so that `await using` and owners work as they
 * are), waits (bounded) for the root to run and for the tree to print
 * `ready`, then collects the pids it printed.
 */
export async function collect(proc: ContainedProcess, tag: string, options: CollectOptions = {}): Promise<Started> {
  const { ready = /^READY$/m, timeout = 10_000 } = options;
  const out = capture(proc.stdout);
  const err = capture(proc.stderr);
  // The root's identity is kept as a printed pid's is (alive() then tells it
  // from a later process on the same pid).
  const root = rememberIdentity(await within(proc.started, timeout, `${proc.command} to start`, tag));
  await out.until(ready, timeout);
  const pids = out.pids();
  const all = [...new Set([root, ...Object.values(pids)])];
  return { proc, out, err, root, pids, all };
}

/**
 * collect(), then the result (bounded): for a root that ends on its own once
 * it has printed its pids.
 */
export async function collectResult(proc: ContainedProcess, tag: string, options: CollectOptions = {}) {
  const started = await collect(proc, tag, options);
  const result = await within(proc.result, 10_000, 'result to settle', tag);
  return { ...started, result };
}

/**
 * fixtures/bg-tree.sh started and collected: six members (the root, three
 * background sleepers, a nested shell and its own sleeper), all alive.
 */
export async function startBgTree(t: Tagged, options: SpawnOptions = {}) {
  const proc = spawn(fixture('bg-tree.sh'), [], { env: t.env, ...options });
  const started = await collect(proc, t.tag);
  expect(Object.keys(started.pids).sort()).toEqual(['nested', 'nestedbg', 'root', 's1', 's2', 's3']);
  expect(started.all).toHaveLength(6);
  expectAlive(started.all, 'before the tree is stopped');
  return started;
}

/**
 * fixtures/term-ignoring-tree.sh started and collected: five members (root,
 * two children, a subshell, a grandchild), each checked to ignore SIGTERM
 * (inherited SIG_IGN), so that only the forced kill can end them.
 */
export async function startTermIgnoringTree(t: Tagged, options: SpawnOptions = {}) {
  const proc = spawn(fixture('term-ignoring-tree.sh'), [], { env: t.env, ...options });
  const started = await collect(proc, t.tag);
  expect(Object.keys(started.pids).sort()).toEqual(['c1', 'c2', 'gc', 'root', 'sub']);
  for (const pid of started.all) expect(ignoresTerm(pid), `pid ${pid} ignores SIGTERM`).toBe(true);
  return started;
}

/**
 * A tree whose root has a TERM trap that writes to $FILE (`name` in a fresh
 * directory, `prefix`), started and collected, then waited on (bounded) until
 * the trap is installed and, where the tree printed a `child`, until that
 * child has exec'd `sleep 300`: a SIGTERM that reaches it between fork and
 * exec runs the shell's inherited trap handler instead, and the child then
 * sleeps on with the signal spent, until the forced kill.
 */
export async function startTrapTree(
  t: Tagged,
  script: string,
  { prefix, name, options = {} }: { prefix: string; name: string; options?: SpawnOptions },
): Promise<Started & { file: string }> {
  const file = join(tempDir(prefix), name);
  const proc = spawn('sh', ['-c', script], { env: { ...t.env, FILE: file }, ...options });
  const started = await collect(proc, t.tag);
  await waitFor(() => catchesTerm(started.root), { timeout: 5000, what: 'the trap to be installed', watch: t.tag });
  const child = started.pids.child;
  if (child !== undefined) await waitFor(() => cmdline(child) === 'sleep 300', { timeout: 5000, what: 'the child to exec sleep', watch: t.tag });
  return { ...started, file };
}

/**
 * A member forked after the polite signal gets it too (C3): the root's TERM
 * trap starts a new member, whose SIGTERM is at its default, and waits for
 * it; terminate() with a long grace (20 s) must end the tree well before the
 * forced kill, and the result is the trap's exit (5). Everything asserted here.
 */
export async function expectLateMemberTermed(t: Tagged, prefix: string): Promise<void> {
  const { proc, root, file } = await startTrapTree(
    t,
    // `trap - TERM` first: the late member is forked with SIGTERM at its
    // default, so a TERM that reaches it between fork and exec ends it, rather
    // than running the root's inherited trap and being spent (shell semantics,
    // docs/lifecycle.md; seen on a loaded machine as a 20 s forced kill).
    'trap \'trap - TERM; sh -c "echo \\$\\$ > \\"$FILE\\"; exec sleep 300" & wait $!; exit 5\' TERM; echo "PID root $$"; echo READY; while :; do sleep 0.05; done',
    { prefix, name: 'late' },
  );
  const t0 = Date.now();
  await within(proc.terminate({ grace: 20_000 }), 30_000, 'terminate() to resolve', t.tag);
  const elapsed = Date.now() - t0;
  // The late member writes its pid once it runs; one that the polite signal
  // ended before that wrote nothing, and was ended all the same.
  const late = existsSync(file) ? Number(readFileSync(file, 'utf8')) : 0;
  expectGone(late > 0 ? [root, late] : [root], t.tag, 'after terminate() resolved');
  // Without a polite signal of its own the late member lives until the
  // forced kill at 20 s; with one, the tree ends in about a tier's rescan
  // period. 10 s is far from both on a loaded machine.
  expect(elapsed, 'the late member waited for the forced kill').toBeLessThan(10_000);
  const result = await within(proc.result, 5000, 'the result to settle', t.tag);
  expect(result.exitCode).toBe(5);
}

/** Every pid named is alive now (fails with the dead ones). */
export function expectAlive(pids: number[], when: string): void {
  const dead = pids.filter((pid) => !alive(pid));
  expect(dead, `pids not alive ${when}`).toEqual([]);
}

/** Every pid a tree printed is gone now (no waiting; one assertion per pid, which says who holds it). */
export function expectNamedGone(pids: Record<string, number>): void {
  for (const [name, pid] of Object.entries(pids)) expect(alive(pid), `${name} ${pid}: ${cmdline(pid)} ${JSON.stringify(readStat(pid))}`).toBe(false);
}

/** Every pid named, and every process carrying the tag, is gone now (no waiting). */
export function expectGone(pids: number[], tag: string, when: string): void {
  // By pid and tag: a freed pid may be reused at once (a kernel thread was
  // seen taking one); a member that lived on still carries the tag.
  const living = pids.filter((pid) => aliveTagged(pid, tag)).map((pid) => `${pid} ${cmdline(pid)}`);
  expect(living, `pids still alive ${when}`).toEqual([]);
  const tagged = findTagged(tag);
  expect(tagged, `tagged processes still alive ${when}:\n${describeProcs(tagged)}`).toEqual([]);
}

/** Every pid of every tree named is alive now (one assertion per pid, naming its tree). */
export function expectAllAlive(trees: Started[], when: string): void {
  for (const s of trees) for (const pid of s.all) expect(alive(pid), `pid ${pid} (${s.proc.command}) ${when}`).toBe(true);
}

/** Every pid of every tree named is gone now (no waiting). */
export function expectAllGone(trees: Started[], when: string): void {
  // The message names what holds the pid now (its command line and stat), so
  // that a member that lived on is told from a pid taken by another process.
  for (const s of trees) for (const pid of s.all) expect(alive(pid), `pid ${pid} (a member of ${s.proc.command}) ${when}: now ${cmdline(pid)} ${JSON.stringify(readStat(pid))}`).toBe(false);
}

/** Bounded wait for every pid of every tree named to be gone. */
export function waitAllGone(trees: Started[], timeout: number, what: string, tag: string): Promise<void> {
  return waitPidsGone(trees.flatMap((s) => s.all), timeout, what, tag);
}

/**
 * The result lists `pid` among its leftovers, and says whether they were
 * kept: a kept one is alive when the result settles, a killed one gone.
 */
export function expectLeftover(result: ContainedResult, pid: number, { kept }: { kept: boolean }): void {
  expect(alive(pid), `leftover ${pid} ${kept ? 'alive after settle' : 'after settle'}`).toBe(kept);
  expect(result.leftoversKept).toBe(kept);
  expect(result.leftovers.map((l) => l.pid)).toContain(pid);
}

/** Bounded wait for every pid named to be gone. */
export function waitPidsGone(pids: number[], timeout: number, what: string, tag?: string): Promise<void> {
  return waitFor(() => pids.every((pid) => !alive(pid)), { timeout, what, watch: tag === undefined ? pids : [tag, ...pids] });
}

const SIGTERM_BIT = 1n << 14n; // signal 15

/** The process ignores SIGTERM (SIG_IGN), as the observer says (SigIgn of /proc/<pid>/status, ps's `ignored`). */
export function ignoresTerm(pid: number): boolean {
  const ign = observer.signals(pid)?.ignored;
  return ign !== undefined && (ign & SIGTERM_BIT) !== 0n;
}

/** The process has a handler for SIGTERM installed (a shell `trap ... TERM`). */
export function catchesTerm(pid: number): boolean {
  return catchesSignal(pid, 15);
}

/** The process has a handler installed for signal number `signo` (SigCgt of /proc/<pid>/status, ps's `caught`). */
export function catchesSignal(pid: number, signo: number): boolean {
  const cgt = observer.signals(pid)?.caught;
  return cgt !== undefined && (cgt & (1n << BigInt(signo - 1))) !== 0n;
}

/** The open descriptors of a process as /proc shows them: fd -> link target (the ps observer cannot: it throws). */
export function fdTable(pid: number | 'self'): Map<number, string> {
  return observer.openFds(pid);
}

/**
 * Parses `ls -l /proc/<pid>/fd` output into fd -> link target
 * (lines like `lrwx------ 1 root root 64 Nov 29 08:00 3 -> socket:[1234]`).
 */
export function parseLsFd(text: string): Map<number, string> {
  const out = new Map<number, string>();
  for (const m of text.matchAll(/ (\d+) -> (.*)$/gm)) out.set(Number(m[1]), m[2]!);
  return out;
}

/** Settles (bounded) and returns how: the value or the error, never throws the error. */
export async function outcome<T>(
  promise: Promise<T>,
  timeout: number,
  what: string,
  tag?: string,
): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  return within(
    promise.then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    ),
    timeout,
    what,
    tag,
  );
}
