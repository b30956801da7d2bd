// Helpers of the Windows suite (node:test, plain JS, run with node.exe on
// Windows or under Wine by .ci/windows.sh). Liveness is observed from outside
// cordon, on pids the fixtures print: a process is its pid and its creation
// time (the addon's processStart(), an OpenProcess from this test process),
// so a pid handed to another process is not taken for the one printed.
// Every test registers a cleanup that TerminateProcess-es what it saw and is
// still alive (never through cordon), and fails the test if it had to; that
// leak check also asks observe.exe (fixtures/observe.cc), a process of the
// suite's own that shares no code with cordon and lists the system's running
// processes another way (NtQuerySystemInformation). Every wait is bounded. Liveness, identities, the waits and how output is read are
// the ones both suites share (../helpers/common.mjs); this file installs the
// Windows probe for them.
import assert from 'node:assert/strict';
import { spawn as nodeSpawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { alive, forgetIdentities, onLines, parsePids, pollUntil, promised, rememberIdentity, renewIdentity, sameIdentity, sleep, useProbe, waitFor, waitGone, within } from '../helpers/common.mjs';

export const here = dirname(fileURLToPath(import.meta.url));
export const fixtures = join(here, 'fixtures');
/** The package under test: CORDON_PKG (a laid-out package dir) or this checkout. */
export const pkgDir = process.env.CORDON_PKG ?? join(here, '..', '..');
export const cordon = await import(pathToFileURL(join(pkgDir, 'dist', 'index.js')).href);
export const underWine = Boolean(cordon.capabilities().notes.find((n) => n.startsWith('Under Wine')));

// The package's own addon (the raw binding, not part of its API): its
// processStart(pid) is the process's creation time, "0" when no process has
// the pid or it has exited.
const { binding } = await import(pathToFileURL(join(pkgDir, 'dist', 'native.js')).href);
useProbe({
  name: 'processStart',
  start(pid) {
    const stamp = binding().processStart(pid);
    return stamp === '0' ? undefined : stamp;
  },
  describe: (pid) => `pid ${pid}`,
  pollMs: 50,
});

export { alive, parsePids, promised, renewIdentity, waitFor, waitGone, within };

/** How long what a test saw may take to end by itself once the test is over (Wine ends processes asynchronously). */
const SETTLE_MS = 5000;

/**
 * Per-test bookkeeping: pids to clean up (TerminateProcess, never cordon) and
 * temp dirs to remove. Call `const t = track(testContext)` first in a test.
 * A pid added is kept with the identity of the process on it then. When the
 * test is over, what it added and is still alive gets SETTLE_MS to end; what
 * is alive after that is TerminateProcess-ed and fails the test: a leak.
 */
export function track(ctx) {
  forgetIdentities(); // a new test: pids it learns are its own
  const pids = new Set();
  const dirs = [];
  const procs = [];
  ctx.after(async () => {
    for (const p of procs) p.result?.catch(() => {});
    const seen = [...pids];
    await pollUntil(() => !seen.some(alive), SETTLE_MS, 50);
    // And in the independent observer's snapshot (a few, 500 ms apart: Wine
    // ends processes asynchronously): a process the addon's probe calls gone
    // and the system still lists is a leak all the same.
    let listed = [];
    for (let i = 0; i < 5 && !noObserveExe; i++) {
      listed = observedAlive(seen);
      if (listed.length === 0) break;
      await sleep(500);
    }
    const left = [...new Set([...seen.filter(alive), ...listed])];
    for (const pid of left) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
    // A process that just ended may hold its working directory a moment
    // longer under Wine (EBUSY): Node's own retries for that (up to 2 s).
    let rmError;
    for (const d of dirs) {
      try {
        rmSync(d, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
      } catch (err) {
        rmError ??= err;
      }
    }
    if (left.length > 0) throw new Error(`the test left processes behind (alive ${SETTLE_MS} ms after it ended; now TerminateProcess-ed): ${left.map((pid) => `pid ${pid}`).join(', ')}`);
    if (rmError) throw rmError;
  });
  const add = (pid) => {
    if (!pid) return;
    rememberIdentity(pid);
    pids.add(pid);
  };
  return {
    pids,
    add,
    proc(p) {
      procs.push(p);
      if (p.anchorPid) add(p.anchorPid);
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
  const onLine = (line) => Object.assign(pids, parsePids(line, t.add));
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
 * them all (observed with alive(), bounded).
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
  // Written whole, then renamed: the watcher never reads a request half-written.
  writeFileSync(`${req}.tmp`, token);
  renameSync(`${req}.tmp`, req);
  await waitFor(() => existsSync(join(dir, `${token}.done`)), { timeout: 40000, what: 'the Linux killer to answer' });
  const answer = readFileSync(join(dir, `${token}.done`), 'utf8').trim();
  if (!answer.startsWith('killed')) throw new Error(`Linux killer: ${answer}`);
  return `kill -9 from Linux (${answer})`;
}

/**
 * A native test fixture, test-bin/<name>.exe (built from fixtures/<name>.cc by
 * .ci/windows.sh with mingw-w64, and by the GitHub windows job with MSVC):
 * its path, and `skip`, the reason a test that needs it is skipped when it is
 * not there. With CORDON_WIN_REQUIRE_FIXTURES=1 (set by the GitHub windows
 * job) a missing fixture is never a skip: the test runs and fails (ENOENT).
 */
export function nativeFixture(name) {
  const exe = join(pkgDir, 'test-bin', `${name}.exe`);
  const required = process.env.CORDON_WIN_REQUIRE_FIXTURES === '1';
  const skip = !required && !existsSync(exe) && `${name}.exe is built by .ci/windows.sh (mingw-w64) or the GitHub windows job (MSVC); not present here`;
  return { exe, skip };
}

/** test-bin/observe.exe (fixtures/observe.cc): the suite's own process observer. */
export const { exe: observeExe, skip: noObserveExe } = nativeFixture('observe');
if (noObserveExe) console.log(`# the leak checks ask the addon's probe alone: ${noObserveExe}`);

/**
 * The running processes as observe.exe lists them: one snapshot of the
 * kernel's process list (NtQuerySystemInformation), taken in a process of its
 * own that shares no code with cordon. A Map of pid to { ppid, start, name }
 * (start: the creation time as processStart() gives it; '?' where the
 * snapshot and GetProcessTimes gave none).
 */
export function observeProcesses() {
  const r = spawnSync(observeExe, [], { encoding: 'utf8', timeout: 30000, windowsHide: true });
  if (r.status !== 0 || !/^END \d+\r?$/m.test(r.stdout)) {
    throw new Error(`observe.exe gave no snapshot (status ${r.status}${r.error ? `, ${r.error.message}` : ''}): ${r.stderr}`);
  }
  const listed = new Map();
  for (const m of r.stdout.matchAll(/^(\d+) (\d+) (\d+|\?) (.*?)\r?$/gm)) listed.set(Number(m[1]), { ppid: Number(m[2]), start: m[3], name: m[4] });
  return listed;
}

/**
 * Of `pids`, the ones observe.exe's snapshot lists as the very process the
 * test knew on that pid (its creation time; one it could not read counts as
 * running).
 */
export function observedAlive(pids) {
  const listed = observeProcesses();
  return pids.filter((pid) => {
    const p = listed.get(pid);
    return p !== undefined && (p.start === '?' || sameIdentity(pid, p.start));
  });
}

/** test-bin/pipe-dacl.exe (fixtures/pipe-dacl.cc). */
export const { exe: daclExe, skip: noDaclExe } = nativeFixture('pipe-dacl');

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

/** The anchor as the package has it. */
export const anchorExe = join(pkgDir, 'build', 'Release', 'cordon-anchor.exe');

/**
 * The anchor driven directly, as the facade would (control channel at
 * fds 3 and 4), with `options` before `-- PATH ARGV0 ARGS...` (`command`):
 * every line it sent up to its first report (READY, EXECFAIL or NOCONTAIN;
 * `line`), then control EOF so it ends whatever it started and exits (bounded).
 * `exe`: another build of the anchor (default: the package's); `env`: its
 * environment, which is the command's (default: this process's).
 */
export async function anchorReport(t, cwd, options, command, { exe = anchorExe, env } = {}) {
  const child = spawnChild(exe, ['--tier', 'job-object', ...options, '--', ...command], {
    cwd,
    env,
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
