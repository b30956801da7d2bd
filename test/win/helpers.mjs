// Helpers of the Windows suite (node:test, plain JS, run with node.exe on
// Windows or under Wine by .ci/windows.sh). Liveness is observed from outside
// cordon: process.kill(pid, 0) from this test process (OpenProcess), on pids
// the fixtures print. Every test registers a cleanup that TerminateProcess-es
// what it saw (never through cordon) and every wait is bounded.
import { spawn as nodeSpawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const here = dirname(fileURLToPath(import.meta.url));
export const fixtures = join(here, 'fixtures');
/** The package under test: CORDON_PKG (a laid-out package dir) or this checkout. */
export const pkgDir = process.env.CORDON_PKG ?? join(here, '..', '..');
export const cordon = await import(pathToFileURL(join(pkgDir, 'dist', 'index.js')).href);
export const underWine = Boolean(cordon.capabilities().notes.find((n) => n.startsWith('Under Wine')));

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

/** Rejects with `what` (and which pids were alive) after `ms`. */
export async function within(promise, ms, what, pids = []) {
  let timer;
  const watchdog = new Promise((_, reject) => {
    timer = setTimeout(() => {
      const live = pids.filter(alive);
      reject(new Error(`timed out after ${ms} ms: ${what}${live.length ? ` (alive: ${live.join(', ')})` : ''}`));
    }, ms);
  });
  try {
    return await Promise.race([promise, watchdog]);
  } finally {
    clearTimeout(timer);
  }
}

export async function waitFor(pred, ms, what) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await pred()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(50);
  }
}

/** Resolves once every pid is gone; rejects naming the survivors after `ms`. */
export async function waitGone(pids, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const live = pids.filter(alive);
    if (live.length === 0) return;
    if (Date.now() > deadline) throw new Error(`still alive after ${ms} ms: ${live.join(', ')}`);
    await sleep(50);
  }
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
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
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
  let buf = '';
  stream.setEncoding('utf8');
  return within(
    new Promise((resolve, reject) => {
      stream.on('data', (d) => {
        buf += d;
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          const m = /^PID (\S+) (\d+)$/.exec(line);
          if (m) {
            pids[m[1]] = Number(m[2]);
            t.add(Number(m[2]));
          }
          if (line === 'READY') resolve(pids);
        }
      });
      stream.on('end', () => reject(new Error(`output ended before READY: ${JSON.stringify(buf)}`)));
    }),
    ms,
    'the fixture to print READY',
  );
}

/** The `PID <name> <pid>` lines of a finished fixture's output (a file's text); tracks each pid. */
export function parsePids(text, t) {
  const pids = {};
  for (const m of text.matchAll(/^PID (\S+) (\d+)\r?$/gm)) {
    pids[m[1]] = Number(m[2]);
    t.add(Number(m[2]));
  }
  return pids;
}

export function treeArgs(...args) {
  return [join(fixtures, 'tree.mjs'), ...args];
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

export { spawnChild, existsSync, readdirSync, join };
