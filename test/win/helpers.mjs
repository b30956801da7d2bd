// Helpers of the Windows suite (node:test, plain JS, run with node.exe on
// Windows or under Wine by .ci/windows.sh). Liveness is observed from outside
// cordon: process.kill(pid, 0) from this test process (OpenProcess), on pids
// the fixtures print. Every test registers a cleanup that TerminateProcess-es
// what it saw (never through cordon) and every wait is bounded. How output is
// read and waits are bounded is shared with the vitest suite:
// ../helpers/common.mjs.
import assert from 'node:assert/strict';
import { spawn as nodeSpawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { onLines, parsePidLines, pollUntil, sleep, withWatchdog } from '../helpers/common.mjs';

export const here = dirname(fileURLToPath(import.meta.url));
export const fixtures = join(here, 'fixtures');
/** The package under test: CORDON_PKG (a laid-out package dir) or this checkout. */
export const pkgDir = process.env.CORDON_PKG ?? join(here, '..', '..');
export const cordon = await import(pathToFileURL(join(pkgDir, 'dist', 'index.js')).href);
export const underWine = Boolean(cordon.capabilities().notes.find((n) => n.startsWith('Under Wine')));

export function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

/** Rejects with `what` (and which pids were alive) after `ms`. */
export function within(promise, ms, what, pids = []) {
  return withWatchdog(promise, ms, () => {
    const live = pids.filter(alive);
    return new Error(`timed out after ${ms} ms: ${what}${live.length ? ` (alive: ${live.join(', ')})` : ''}`);
  });
}

export async function waitFor(pred, ms, what) {
  if (!(await pollUntil(pred, ms, 50))) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

/** Resolves once every pid is gone; rejects naming the survivors after `ms`. */
export async function waitGone(pids, ms) {
  if (!(await pollUntil(() => !pids.some(alive), ms, 50))) throw new Error(`still alive after ${ms} ms: ${pids.filter(alive).join(', ')}`);
}

/**
 * Per-test bookkeeping: pids to clean up (TerminateProcess, never cordon) and
 * temp dirs to remove. Call `const t = track(testContext)` first in a test.
 */
export function track(ctx) {
  const pids = new Set();
  const dirs = [];
  const procs = [];
  ctx.after(async () => {
    for (const p of procs) p.result?.catch(() => {});
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
    // A process that just ended may hold its working directory a moment
    // longer under Wine (EBUSY): Node's own retries for that (up to 2 s).
    for (const d of dirs) rmSync(d, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
  });
  return {
    pids,
    add: (pid) => pid && pids.add(pid),
    proc(p) {
      procs.push(p);
      if (p.anchorPid) pids.add(p.anchorPid);
      return p;
    },
    tmp() {
      const d = mkdtempSync(join(tmpdir(), 'cordon-win-'));
      dirs.push(d);
      return d;
    },
  };
}

/** Reads `PID <name> <pid>` lines from a stream until READY (bounded). */
export function readPids(stream, t, ms = 30000) {
  const pids = {};
  const onLine = (line) => Object.assign(pids, parsePidLines(line, (pid) => t.add(pid)));
  return readUntilReady(stream, ms, onLine).then(() => pids);
}

/**
 * Calls `onLine` with each line of a fixture's stdout and resolves with all
 * of them once a READY line came (bounded; rejects if the output ends first).
 */
export function readUntilReady(stream, ms, onLine, what = 'the fixture to print READY') {
  const lines = [];
  return within(
    new Promise((resolve, reject) => {
      const rest = onLines(stream, (line) => {
        lines.push(line);
        onLine(line);
        if (line === 'READY') resolve(lines);
      });
      stream.on('end', () => reject(new Error(`output ended before READY: ${JSON.stringify(lines.join('\n') + rest())}`)));
    }),
    ms,
    what,
  );
}

/** The `PID <name> <pid>` lines of a finished fixture's output (a file's text); tracks each pid. */
export function parsePids(text, t) {
  return parsePidLines(text, (pid) => t.add(pid));
}

export function treeArgs(...args) {
  return [join(fixtures, 'tree.mjs'), ...args];
}

/**
 * fixtures/tree.mjs with `args` under cordon (stdout piped, stderr ignored,
 * `options` added), tracked for cleanup, and the pids it printed once READY
 * (bounded): the Windows suite's way to start a tree.
 */
export async function startTree(t, args, options = {}) {
  const proc = t.proc(cordon.spawn(process.execPath, treeArgs(...args), { stdio: ['ignore', 'pipe', 'ignore'], ...options }));
  const pids = await readPids(proc.stdout, t);
  return { proc, pids };
}

/**
 * A tree started by cmd.exe (cmd -> node fixtures/tree.mjs -> detached
 * grandchild; `proc`'s stdout piped): all three run, and terminate() ends
 * them all (observed with process.kill(pid, 0), bounded).
 */
export async function assertCmdTreeEndsWhole(t, proc) {
  const pids = await readPids(proc.stdout, t);
  const cmdPid = await within(proc.started, 10000, 'started');
  t.add(cmdPid);
  const all = [cmdPid, pids.root, pids.gc0];
  assert.ok(all.every(alive), 'cmd.exe, node and the grandchild run');
  await within(proc.terminate({ grace: 500 }), 15000, 'terminate()', all);
  await waitGone(all, 2000);
}

/**
 * Kills a process the hard way, with no code of its own running: from Linux
 * with kill -9 when the Wine lane provides a killer (CORDON_WIN_KILLER_DIR:
 * a request file naming a token of the process's command line; the lane's
 * watcher finds the Wine process whose cmdline has the token and SIGKILLs
 * it), else TerminateProcess (Node's SIGKILL on Windows).
 */
export async function hardKill(pid, token) {
  const dir = process.env.CORDON_WIN_KILLER_DIR;
  if (!dir) {
    process.kill(pid, 'SIGKILL');
    return 'TerminateProcess';
  }
  const req = join(dir, `${token}.req`);
  writeFileSync(req, token);
  await waitFor(() => existsSync(join(dir, `${token}.done`)), 20000, 'the Linux killer to answer');
  const answer = readFileSync(join(dir, `${token}.done`), 'utf8').trim();
  if (!answer.startsWith('killed')) throw new Error(`Linux killer: ${answer}`);
  return `kill -9 from Linux (${answer})`;
}

/** test-bin/pipe-dacl.exe (test only, built by .ci/windows.sh from fixtures/pipe-dacl.cc). */
export const daclExe = join(pkgDir, 'test-bin', 'pipe-dacl.exe');
export const noDaclExe = !existsSync(daclExe) && 'pipe-dacl.exe is built by .ci/windows.sh (mingw-w64); not present here';

/**
 * Reads a DACL from outside with pipe-dacl.exe (`args`: a pipe name, or
 * --dir and a directory) and asserts it admits this user alone: protected
 * (nothing inherited), one ACCESS_ALLOWED ACE, this user's SID. (Whether
 * another user is refused cannot be seen under Wine, which runs one user.)
 */
export async function assertUserOnlyDacl(ctx, t, args) {
  const probe = spawnChild(daclExe, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  t.add(probe.pid);
  let out = '';
  let err = '';
  probe.stdout.on('data', (d) => (out += d));
  probe.stderr.on('data', (d) => (err += d));
  const code = await within(new Promise((resolve) => probe.on('close', resolve)), 20000, 'pipe-dacl.exe', [probe.pid]);
  ctx.diagnostic(out.trim().replace(/\r?\n/g, ' | '));
  assert.equal(code, 0, err);
  const aces = out.split(/\r?\n/).filter((l) => l.startsWith('ACE '));
  assert.equal(aces.length, 1, `one ACE: ${out}`);
  const [, type, , , mine] = aces[0].split(' ');
  assert.equal(type, '0', 'an ACCESS_ALLOWED ACE');
  assert.equal(mine, '1', "for this user's SID");
  assert.match(out, /^PROTECTED 1\r?$/m, 'nothing inherited');
}

/** The anchor helper as the package has it. */
export const anchorExe = join(pkgDir, 'build', 'Release', 'cordon-anchor.exe');

/**
 * The anchor helper driven directly, as the facade would (control channel at
 * fds 3 and 4), with `options` before `-- PATH ARGV0 ARGS...` (`command`):
 * every line it sent up to its first report (READY, EXECFAIL or NOCONTAIN;
 * `line`), then control EOF so it ends whatever it started and exits (bounded).
 */
export async function anchorReport(t, cwd, options, command) {
  const child = spawnChild(anchorExe, ['--tier', 'job-object', ...options, '--', ...command], {
    cwd,
    stdio: ['ignore', 'pipe', 'ignore', 'overlapped', 'overlapped'],
    windowsHide: true,
  });
  t.add(child.pid);
  const exited = new Promise((resolve) => child.on('exit', resolve));
  let buf = '';
  child.stdio[3].setEncoding('utf8');
  try {
    return await within(
      new Promise((resolve, reject) => {
        child.stdio[3].on('data', (d) => {
          buf += d;
          const lines = buf.split('\n').map((l) => l.trim());
          const at = lines.findIndex((l) => /^(READY|EXECFAIL|NOCONTAIN) /.test(l));
          if (at >= 0) resolve({ line: lines[at], lines: lines.slice(0, at + 1) });
        });
        child.stdio[3].on('end', () => reject(new Error(`the anchor ended without a report: ${JSON.stringify(buf)}`)));
      }),
      20000,
      'the anchor to report',
      [child.pid],
    );
  } finally {
    child.stdio[4].end();
    await within(exited, 20000, 'the anchor to exit after control EOF', [child.pid]);
  }
}

/**
 * child_process.spawn for the tests' own processes. Under a loaded Wine,
 * CreateProcess has failed now and then with UNKNOWN (thrown at once, nothing
 * started: seen once per run or so); that is Wine's, not what any test asks,
 * so it is tried again, said in the log. Every other failure stands.
 */
function spawnChild(...args) {
  for (let attempt = 1; ; attempt++) {
    try {
      return nodeSpawn(...args);
    } catch (err) {
      if (err?.code !== 'UNKNOWN' || attempt >= 3) throw err;
      console.log(`# spawn ${args[0]}: UNKNOWN (Wine's CreateProcess), trying again`);
    }
  }
}

export { spawnChild, existsSync, readdirSync, join, sleep };
