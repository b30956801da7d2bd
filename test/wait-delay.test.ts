// CONTRACT C4: when the root exits while a descendant still holds the
// captured stdout/stderr, the result settles no later than `waitDelay` after
// the root exit, our ends of the pipes are closed, output read so far is kept
// and the result says `waitDelayExceeded: true`. The leftovers policy then
// applies (C5: a wait-delay overrun counts as a failure for 'kill-on-failure').
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createConnection, createServer } from 'node:net';
import { PassThrough } from 'node:stream';
import { spawn, type LeftoversPolicy } from '../lib/index.js';
import { TreeOutput } from '../lib/output.js';
import { capture } from './helpers/fixtures.js';
import { alive, useTag, within, type Tagged } from './helpers/procs.js';
import { missing } from './helpers/requirements.js';
import { itWhere } from './helpers/tier.js';
import { LOAD_ALLOWANCE_MS, promised } from './helpers/time.js';

const WAIT_DELAY = 1000; // 1.5x of it (a wait delay 50% too long) is 500 ms late: past the allowance's 500 ms floor
const BOUND = 1500;
/** The root's last line: the time it exits at, in ms since the epoch (GNU date). */
const EXIT = 'echo "EXIT $(date +%s%3N)"; exit 0';

/** The overrun tests find the reading end of a socket pair with `ss`. */
const noSs = missing('ss') ?? '';

/** What a process's fd refers to, from /proc (`pipe:[inode]` or `socket:[inode]`). */
function fdTarget(pid: number, fd: number): string {
  return readlinkSync(`/proc/${pid}/fd/${fd}`);
}

/**
 * The other end of a pipe or socket pair, as /proc names it. A pipe's ends
 * share one inode; node's stdio pipes are socket pairs, whose peer inode the
 * kernel reports through sock_diag (`ss -x`).
 */
function otherEnd(target: string): string {
  const socket = /^socket:\[(\d+)\]$/.exec(target);
  if (!socket) return target;
  const table = execFileSync('ss', ['-xH'], { encoding: 'utf8' });
  for (const line of table.split('\n')) {
    const f = line.trim().split(/\s+/);
    // Netid State Recv-Q Send-Q Local Port Peer Port
    if (f[5] === socket[1]) return `socket:[${f[7]}]`;
  }
  throw new Error(`no peer found for ${target} in ss -x`);
}

/** Whether this (test) process still holds an fd on `target`. */
function weHold(target: string): boolean {
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) === target) return true;
    } catch {
      // closed meanwhile
    }
  }
  return false;
}

/**
 * Runs `script` (it prints `PID g <pid>` for a grandchild that keeps the
 * root's `fd` and exits at once), checks that the test process holds the
 * reading end of that pipe before the root exits, and that the result then
 * settles after the wait delay and within the bound, as an overrun, with our
 * end of the pipe closed although the grandchild still holds its own.
 */
async function overrun(t: Tagged, script: string, fd: 1 | 2, leftovers: LeftoversPolicy) {
  const proc = spawn('sh', ['-c', script], { env: t.env, waitDelay: WAIT_DELAY, leftovers });
  const settledAt = proc.result.then(
    () => Date.now(),
    () => Date.now(),
  );
  const out = capture(proc.stdout);
  const err = capture(proc.stderr);
  // The root's last act is to print the time (ms) it exits at: the wait
  // delay starts after that, whenever this process gets to read the line.
  const exitAt = Number((await out.until(/^EXIT \d+$/m, 10_000)).match(/^EXIT (\d+)$/m)![1]);
  const g = out.pids().g!;
  expect(alive(g)).toBe(true);
  const pipe = fdTarget(g, fd);
  expect(pipe).toMatch(/^(pipe|socket):/);
  const ours = otherEnd(pipe);
  expect(weHold(ours), `the test process holds ${ours} (the reading end) before the root exits`).toBe(true);

  const result = await within(proc.result, WAIT_DELAY + BOUND + 3000, 'result to settle', t.tag);
  const elapsed = (await settledAt) - exitAt;
  // Timed from the cause: the root dates its own exit. The allowance is this
  // machine's measured delay (promised(), common.mjs): a wait delay 4x (or,
  // on an idle machine, 1.5x) too long fails.
  expect(elapsed, `settled after the root exit (ms; allowance ${LOAD_ALLOWANCE_MS} ms)`).toBeLessThanOrEqual(promised(WAIT_DELAY));
  // (Less 20 ms: date's milliseconds and the anchor's clock are read apart.)
  expect(elapsed, 'waited for the wait delay before giving up (ms)').toBeGreaterThanOrEqual(WAIT_DELAY - 20);
  expect(result.waitDelayExceeded).toBe(true);
  expect(weHold(ours), `the test process still holds ${ours}`).toBe(false);
  return { proc, result, out, err, g };
}

describe('wait delay (C4)', () => {
  for (const leftovers of ['kill', 'kill-on-failure', 'keep'] as LeftoversPolicy[]) {
    // proves C4, C5
    itWhere(noSs === '', `a grandchild holding stdout: settles within waitDelay, output kept, leftovers '${leftovers}'`, noSs, async () => {
      const t = useTag();
      const { proc, result, out, g } = await overrun(t, `echo before-exit; sleep 300 & echo "PID g $!"; ${EXIT}`, 1, leftovers);
      expect(result.exitCode).toBe(0);
      // Output printed before the overrun is kept.
      expect(out.text).toContain('before-exit\n');

      if (leftovers === 'keep') {
        expect(alive(g), 'kept grandchild alive after settle').toBe(true);
        expect(result.leftoversKept).toBe(true);
        // The handle still reaches what it kept.
        await within(proc.terminate({ grace: 2000 }), 5000, 'terminate() of the kept tree', t.tag);
        expect(alive(g), 'grandchild after terminate()').toBe(false);
      } else {
        // 'kill', and 'kill-on-failure' (it held the pipe past the wait delay):
        // the result settles once the leftovers are gone.
        expect(alive(g), 'grandchild after settle').toBe(false);
        expect(result.leftoversKept).toBe(false);
        expect(t.procs()).toEqual([]);
      }
    });
  }

  for (const leftovers of ['kill', 'kill-on-failure'] as LeftoversPolicy[]) {
    // proves C4, C5
    itWhere(noSs === '', `a grandchild holding stderr only: the same bound, leftovers '${leftovers}'`, noSs, async () => {
      const t = useTag();
      const script = `echo before-exit >&2; sleep 300 >/dev/null & echo "PID g $!"; ${EXIT}`;
      const { result, err, g } = await overrun(t, script, 2, leftovers);
      expect(err.text).toContain('before-exit\n');
      expect(alive(g), 'grandchild after settle').toBe(false);
      expect(result.leftoversKept).toBe(false);
    });
  }

  for (const leftovers of ['keep', 'kill-on-failure'] as LeftoversPolicy[]) {
    // proves C4
    it(`when no descendant holds the output, the result settles only after it is drained (kept leftover, '${leftovers}')`, async () => {
      // The root prints and exits; a kept leftover redirected its output away,
      // so the pipes are released at once. The result must not settle before
      // what the root printed has been read (the drain that `waitDelay`
      // bounds). The host is busy for a moment when the root exits, as real
      // hosts are; repeated because the window is a race.
      const t = useTag();
      const early: string[] = [];
      for (let i = 0; i < 10; i++) {
        const proc = spawn('sh', ['-c', 'sleep 300 >/dev/null 2>&1 & echo "PID s $!"; echo last-line; exit 0'], {
          env: t.env,
          leftovers,
        });
        const out = capture(proc.stdout);
        await within(proc.started, 10_000, 'the root to start', t.tag);
        const busyUntil = Date.now() + 100;
        while (Date.now() < busyUntil) {
          // a busy host: the root exits meanwhile
        }
        const result = await within(proc.result, 10_000, 'result to settle', t.tag);
        const atSettle = out.text;
        const ended = proc.stdout!.readableEnded;
        expect(result.waitDelayExceeded).toBe(false);
        expect(result.leftoversKept).toBe(true);
        await out.until(/^last-line$/m, 5000);
        const s = out.pids().s!;
        await within(proc.terminate({ grace: 2000 }), 5000, 'terminate() of the kept tree', t.tag);
        expect(alive(s)).toBe(false);
        if (!atSettle.includes('last-line\n')) early.push(`run ${i}: settled with stdout ${JSON.stringify(atSettle)} (stream ended: ${ended})`);
      }
      expect(early, 'results that settled before the output was drained').toEqual([]);
    });
  }

  for (const where of ['a file descriptor', "'inherit'"] as const) {
    // proves C4
    it(`a grandchild holding an output cordon did not capture (${where}) is no overrun`, async () => {
      const t = useTag();
      let stderr: number | 'inherit' = 'inherit';
      if (where === 'a file descriptor') {
        const dir = mkdtempSync(join(tmpdir(), 'cordon-wd-'));
        stderr = openSync(join(dir, 'stderr'), 'w');
        const fd = stderr;
        onTestFinished(() => {
          closeSync(fd);
          rmSync(dir, { recursive: true, force: true });
        });
      }
      // Long enough that a loaded machine settles well before it runs out.
      const waitDelay = 5000;
      const proc = spawn('sh', ['-c', `sleep 300 >/dev/null & echo "PID g $!"; ${EXIT}`], {
        env: t.env,
        stdio: ['ignore', 'pipe', stderr],
        waitDelay,
        leftovers: 'kill-on-failure',
      });
      const settledAt = proc.result.then(
        () => Date.now(),
        () => Date.now(),
      );
      const out = capture(proc.stdout);
      const exitAt = Number((await out.until(/^EXIT \d+$/m, 10_000)).match(/^EXIT (\d+)$/m)![1]);
      const g = out.pids().g!;
      expect(alive(g)).toBe(true);

      const result = await within(proc.result, waitDelay + BOUND + 3000, 'result to settle', t.tag);
      expect((await settledAt) - exitAt, 'settled before the wait delay could run out (ms)').toBeLessThan(waitDelay);
      expect(result.waitDelayExceeded).toBe(false);
      // Not an overrun, root exited 0: 'kill-on-failure' keeps the grandchild.
      expect(result.leftoversKept).toBe(true);
      expect(alive(g), 'kept grandchild alive after settle').toBe(true);
      await within(proc.terminate({ grace: 2000 }), 5000, 'terminate() of the kept tree', t.tag);
      expect(alive(g), 'grandchild after terminate()').toBe(false);
    });
  }

  // proves C4
  it("a host whose event loop stalls past the wait delay reads what is already waiting (the anchor's word) before the deadline's verdict", async () => {
    // The deadline's timer comes due during a stall; the anchor's word that
    // no member holds the pipes (here: a byte on a socket, standing for its
    // RELEASED or QUIET line) arrived during it. libuv runs due timers before
    // it reads: the verdict must wait for this turn's reads, not cut pipes
    // that nobody held and say the wait delay was exceeded.
    const dir = mkdtempSync(join(tmpdir(), 'cordon-deadline-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 's');
    const server = createServer();
    onTestFinished(() => void server.close());
    const accepted = new Promise<import('node:net').Socket>((resolve) => server.once('connection', resolve));
    await new Promise<void>((resolve) => server.listen(path, resolve));
    const client = createConnection(path);
    onTestFinished(() => void client.destroy());
    await new Promise<void>((resolve) => client.once('connect', resolve));
    const anchorSide = await accepted;
    const stdout = new PassThrough();
    stdout.resume();
    let changed = 0;
    const output = new TreeOutput({ command: 'test', waitDelay: 50, logFd: undefined, logPath: undefined, targets: { stdout: 'pipe', stderr: 'pipe' } }, { stdout, stderr: null }, {
      changed: () => void changed++,
      partial: () => false,
    });
    anchorSide.on('data', () => output.release());
    output.rootExited();
    client.write('Q'); // (written at once: the socket is writable)
    const until = Date.now() + 300;
    while (Date.now() < until) {
      /* the stall: the deadline comes due */
    }
    // (the interval is the test's own, cleared however the wait ends)
    let poll: NodeJS.Timeout | undefined;
    onTestFinished(() => clearInterval(poll));
    const verdict = new Promise<void>((resolve) => {
      poll = setInterval(() => {
        if (changed > 0) resolve();
      }, 5);
    });
    await within(verdict, 5000, 'the deadline to pass');
    clearInterval(poll);
    expect(output.waitDelayExceeded, 'the wait delay was not exceeded: the anchor had said no member holds the pipes').toBe(false);
    expect(stdout.destroyed, 'our end of the pipe is not cut').toBe(false);
  });
});
