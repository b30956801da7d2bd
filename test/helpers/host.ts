// A host process of our own: test/fixtures/host.mjs imports the built package
// (dist/) and runs trees the way an application would. Tests start it with
// plain child_process, read the pids it prints and end it in a chosen way.
import { execFileSync, spawn as spawnChild, type ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, rmdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pollUntil } from './common.mjs';
import { capture, fixture, repoRoot } from './fixtures.js';
import { sleep } from './procs.js';
import { watchdog } from './time.js';

function newestMtime(dir: string, ext: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(path, ext));
    else if (entry.name.endsWith(ext)) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

function distFresh(): boolean {
  const lib = join(repoRoot, 'lib');
  const dist = join(repoRoot, 'dist');
  for (const entry of readdirSync(lib)) {
    if (!entry.endsWith('.ts')) continue;
    const js = join(dist, entry.replace(/\.ts$/, '.js'));
    let built: number;
    try {
      built = statSync(js).mtimeMs;
    } catch {
      return false;
    }
    if (built < statSync(join(lib, entry)).mtimeMs) return false;
  }
  return newestMtime(lib, '.ts') > 0;
}

/**
 * Builds dist/ with tsc when it is missing or older than lib/. Serialized
 * across test workers by a lock directory (bounded wait, stale locks broken).
 */
export async function ensureDist(): Promise<void> {
  const lock = join(tmpdir(), 'cordon-test-dist.lock');
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      try {
        if (Date.now() - statSync(lock).mtimeMs > 120_000) rmdirSync(lock);
      } catch {
        // gone meanwhile
      }
      if (Date.now() > deadline) throw new Error(`watchdog: the dist build lock ${lock} was not released within 120 s`);
      await sleep(100);
    }
  }
  try {
    if (distFresh()) return;
    try {
      execFileSync(process.execPath, [join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], {
        cwd: repoRoot,
        timeout: 120_000,
        stdio: 'pipe',
      });
    } catch (err) {
      const e = err as { stdout?: Buffer; stderr?: Buffer; message: string };
      throw new Error(`building dist/ with tsc failed: ${e.message}\n${e.stdout?.toString() ?? ''}${e.stderr?.toString() ?? ''}`);
    }
  } finally {
    rmdirSync(lock);
  }
}

export interface Host {
  child: ChildProcess;
  out: ReturnType<typeof capture>;
  err: ReturnType<typeof capture>;
  /** Resolves with how the host ended, at the moment node saw it exit. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  /** Tells a host waiting on stdin (endings exit, throw, natural) to end now. */
  go(): void;
  /** Waits (bounded) for the host's READY; fails early, with its stderr, if it ends first. */
  ready(timeout?: number): Promise<void>;
}

/**
 * Starts a host fixture (default test/fixtures/host.mjs) with `args` (see that
 * file for the words it takes). `ownGroup`: the host leads a process group
 * (and session) of its own, as under job control, `timeout` or a CI runner,
 * so a test can signal the host's whole group (`kill -<pgid>`) without
 * touching the test runner's.
 */
export function startHost(args: string[], env: NodeJS.ProcessEnv, script = 'host.mjs', options: { ownGroup?: boolean } = {}): Host {
  const child = spawnChild(process.execPath, [fixture(script), ...args], {
    env,
    cwd: repoRoot,
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: options.ownGroup === true,
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() }));
  });
  child.stdin!.on('error', () => {}); // a host that is gone already
  const out = capture(child.stdout);
  const err = capture(child.stderr);
  let ended: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  void exited.then((e) => (ended = e));
  const printedReady = () => /^READY$/m.test(out.text);
  // A test's wish: the fixture's Node starting and importing cordon, which
  // took over 15 s at load average 40 (a soak beside the suite).
  const ready = async (timeout = watchdog(30_000)) => {
    await pollUntil(() => printedReady() || ended !== undefined, timeout, 10);
    if (printedReady()) return;
    const why = ended ? `ended (code ${ended.code}, signal ${ended.signal})` : `printed no READY within ${timeout} ms`;
    throw new Error(`host.mjs ${args.join(' ')} ${why}\nstdout:\n${out.text}\nstderr:\n${err.text}`);
  };
  return { child, out, err, exited, go: () => child.stdin!.write('go\n'), ready };
}

/**
 * Waits (bounded) for a host of the test's own making (a child with piped
 * stdout and stderr) to print `REPORT <json>`, and returns the JSON; a
 * watchdog failure shows the host's stderr.
 */
export async function readReport(child: ChildProcess, timeout = watchdog(30_000)): Promise<any> {
  const out = capture(child.stdout);
  const err = capture(child.stderr);
  const text = await out.until(/^REPORT .*$/m, timeout).catch((e: Error) => {
    throw new Error(`${e.message}\nstderr:\n${err.text}`);
  });
  return JSON.parse(/^REPORT (.*)$/m.exec(text)![1]!);
}

/** `node dist/cli.js <args>` as users run it (stdin ignored; stdout and stderr captured). */
export function startCli(args: string[], env: NodeJS.ProcessEnv) {
  const child = spawnChild(process.execPath, [join(repoRoot, 'dist', 'cli.js'), ...args], { env, cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  return { child, out: capture(child.stdout), err: capture(child.stderr), exited };
}
