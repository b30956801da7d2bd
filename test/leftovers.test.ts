// CONTRACT C5: when the root exits and descendants remain, `leftovers`
// decides: 'kill' terminates them; 'kill-on-failure' keeps them only after a
// clean exit (code 0, pipes released) and kills them after a nonzero exit or a
// cancellation; 'keep' leaves them running until the owner is released or
// the host exits. The result lists what it saw, like a leak report.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { spawn, type LeftoversPolicy } from '../lib/index.js';
import { capture } from './helpers/fixtures.js';
import { ensureDist, startHost } from './helpers/host.js';
import { alive, useTag, waitFor, waitGone, within } from './helpers/procs.js';
import { collectResult, expectLeftover } from './helpers/trees.js';
import { missing, onlyWhere } from './helpers/requirements.js';
import { observer } from './helpers/observer.js';
import { itWhere } from './helpers/tier.js';
import { promised, watchdog } from './helpers/time.js';

// The leftover redirected its output away: it does not hold the captured pipes.
// The root exits only once the redirection is in place (a shell's child holds
// the pipe between its fork and its redirection, and a root that exits in
// that window rightly gets it reported as holding the output): the child has
// exec'd, as ps shows (the same on Linux and macOS), so its redirection is done.
const leaveOne = (exit: number) =>
  `sleep 300 >/dev/null 2>&1 & s=$!; until [ "$(ps -ww -o args= -p $s)" = "sleep 300" ]; do :; done; echo "PID s $s"; exit ${exit}`;

/** Runs leaveOne(exit) to its result, which must carry that exit code. */
async function runLeaving(exit: number, leftovers: LeftoversPolicy, env: NodeJS.ProcessEnv, tag: string) {
  // The pid line first: that the result may settle before the stream has
  // delivered it is checked in wait-delay.test.ts (drain), not here.
  const ready = /^PID s \d+$/m;
  const { proc, pids, result } = await collectResult(spawn('sh', ['-c', leaveOne(exit)], { env, leftovers }), tag, { ready });
  expect(result.exitCode).toBe(exit);
  return { proc, result, s: pids.s! };
}

describe('leftovers policy (C5)', () => {
  beforeAll(async () => {
    await ensureDist();
  });

  // proves C5
  it("'kill-on-failure' keeps a leftover after exit 0 and reports it", async () => {
    const t = useTag();
    const { proc, result, s } = await runLeaving(0, 'kill-on-failure', t.env, t.tag);
    expect(result.waitDelayExceeded).toBe(false);
    expect(alive(s), `leftover ${s} alive after settle`).toBe(true);
    expect(result.leftoversKept).toBe(true);
    const reported = result.leftovers.find((l) => l.pid === s);
    expect(reported, JSON.stringify(result.leftovers)).toBeDefined();
    expect(reported!.command).toContain('sleep 300');
    expect(reported!.heldOutput).toBe(false);
    // Still under the handle: terminate() reaches it.
    await within(proc.terminate({ grace: 2000 }), 5000, 'terminate() of the kept tree', t.tag);
    expect(alive(s)).toBe(false);
  });

  // proves C5
  it("'kill' terminates a leftover after exit 0", async () => {
    const t = useTag();
    const { result, s } = await runLeaving(0, 'kill', t.env, t.tag);
    // Under 'kill' the result settles once the leftovers are gone.
    expectLeftover(result, s, { kept: false });
    await waitGone(t.tag, 2000);
  });

  // proves C5
  it("'kill-on-failure' terminates a leftover after a nonzero exit", async () => {
    const t = useTag();
    const { result, s } = await runLeaving(3, 'kill-on-failure', t.env, t.tag);
    expectLeftover(result, s, { kept: false });
    await waitGone(t.tag, 2000);
  });

  // proves C5
  it("'keep' keeps a leftover even after a nonzero exit", async () => {
    const t = useTag();
    const { proc, result, s } = await runLeaving(3, 'keep', t.env, t.tag);
    expectLeftover(result, s, { kept: true });
    await within(proc.terminate({ grace: 2000 }), 5000, 'terminate() of the kept tree', t.tag);
    expect(alive(s)).toBe(false);
  });

  // proves C5
  it("a kept tree's settled result stays as it settled when the tree is ended later, its leftover running another program by then", async () => {
    const t = useTag();
    const script = `sh -c 'sleep 0.5; exec sleep 302' >/dev/null 2>&1 & s=$!; until case "$(ps -ww -o args= -p $s)" in "sh -c sleep 0.5; exec sleep 302"|"sleep 302") true;; *) false;; esac; do :; done; echo "PID s $s"; exit 0`;
    const { proc, pids, result } = await collectResult(spawn('sh', ['-c', script], { env: t.env, leftovers: 'keep' }), t.tag, { ready: /^PID s \d+$/m });
    const s = pids.s!;
    expectLeftover(result, s, { kept: true });
    const settled = JSON.stringify(result);
    const cmdline = () => observer.cmdline(s);
    await waitFor(() => cmdline() === 'sleep 302', { timeout: watchdog(5000), what: `leftover ${s} to exec sleep 302`, watch: t.tag });
    // Ending it now is reported by the anchor (named as it is), but not into the result the caller already has.
    await within(proc.terminate({ grace: 2000 }), watchdog(5000), 'terminate() of the kept tree', t.tag);
    expect(alive(s)).toBe(false);
    expect(JSON.stringify(result), 'the settled result').toBe(settled);
  });

  // proves C5, C10
  it("'kill-on-failure' kills leftovers of a cancelled run, even one that ignores SIGTERM", async () => {
    const t = useTag();
    const ac = new AbortController();
    const proc = spawn(
      'sh',
      ['-c', `trap '' TERM; sleep 300 >/dev/null 2>&1 & echo "PID s $!"; trap - TERM; echo "PID root $$"; exec sleep 300`],
      { env: t.env, leftovers: 'kill-on-failure', signal: ac.signal, interruptGrace: 500 },
    );
    const out = capture(proc.stdout);
    await out.until(/^PID root \d+$/m, 10_000);
    const { s, root } = out.pids() as { s: number; root: number };
    expect(alive(s)).toBe(true);
    expect(alive(root)).toBe(true);
    ac.abort();
    const result = await within(proc.result, 500 + 1500 + 3000, 'result of the cancelled run', t.tag);
    expect(result.reason).toBe('canceled');
    expect(alive(root), `root ${root}`).toBe(false);
    expect(alive(s), `leftover ${s} (ignores SIGTERM)`).toBe(false);
    expect(result.leftoversKept).toBe(false);
    await waitGone(t.tag, 2000);
  });

  for (const ending of ['natural', 'exit'] as const) {
    // proves C5, C8
    it(`kept leftovers end when the host exits (${ending === 'natural' ? 'event loop drains' : 'process.exit(0)'})`, async () => {
      const t = useTag();
      const host = startHost([ending, '--trees', 'keep'], t.env);
      await host.ready();
      const pids = host.out.pids();
      const left = pids['keep.left'];
      expect(left, host.out.text).toBeTypeOf('number');
      // The host printed READY after the result settled with the leftover kept.
      expect(alive(left!), `kept leftover ${left} before the host exits`).toBe(true);
      host.go();
      const { code } = await within(host.exited, 10_000, 'the host to exit', t.tag);
      expect(code, host.err.text).toBe(0);
      // It ends once the host is gone: 1 s plus a grace bound.
      await waitFor(() => !alive(left!), {
        timeout: promised(1000 + 1500),
        what: 'the kept leftover to end after the host exited',
        watch: [t.tag, left!],
      });
      // Then the anchor (cordon's machinery, not a tree member) exits too.
      await waitGone(t.tag, 2000);
    });
  }

  // What is reported is what was killed, named as it was then: a leftover
  // forked after the root's exit (while the tree was being stopped) is listed,
  // and one that exec'd another program meanwhile is named by that program.
  // The subshell ignores the polite signal; its `sleep 1` does not, so it
  // goes on: forks `sleep 303`, then execs `sleep 302`; the forced kill ends
  // both: a grace of 5 s leaves the subshell room for its second of sleep
  // (if the polite signal came before it started it) on a loaded machine.
  // Their pids come from a file (their output is not the tree's).
  // proves C5
  it('a daemon the root starts in a session of its own just before it exits is a leftover, listed and gone', async () => {
    const t = useTag();
    // 200 ms in: past the process-group tier's first look at the tree (20 ms
    // after the root's start) and long before its next; only what the anchor
    // looks for at the root's exit finds the daemon before the result.
    // The root exits once the daemon has left its process group (it writes
    // its pid after setsid), so no look at the group can find it there.
    const dir = mkdtempSync(join(tmpdir(), 'cordon-leftovers-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const f = join(dir, 'pid'); // (no space or quote: a tmpdir path)
    const line = `sleep 0.2; setsid sh -c 'echo $$ > ${f}.tmp; mv ${f}.tmp ${f}; exec sleep 300' </dev/null >/dev/null 2>&1 & until [ -s ${f} ]; do sleep 0.01; done; echo "PID s $(cat ${f})"; exit 0`;
    const { result, pids } = await collectResult(spawn('sh', ['-c', line], { env: t.env, leftovers: 'kill' }), t.tag, { ready: /^PID s \d+$/m });
    expect(result.exitCode).toBe(0);
    expectLeftover(result, pids.s!, { kept: false });
    await waitGone(t.tag, 2000);
  });

  // proves C5
  it('the result lists every leftover that was killed, named as when it was killed', async () => {
    const t = useTag();
    const dir = mkdtempSync(join(tmpdir(), 'cordon-leftovers-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'pids');
    // The root exits only once the subshell ignores TERM (a barrier: the
    // 'kill' policy's polite signal comes at the root's exit, and one that
    // came before the trap would end the subshell before 'late' exists).
    const script =
      `( trap '' TERM; : > "$1.trapped"; sleep 1; sleep 303 & echo "late $!" >> "$1"; exec sleep 302 ) >/dev/null 2>&1 </dev/null & echo "sub $!" >> "$1"; ` +
      `while [ ! -e "$1.trapped" ]; do sleep 0.01; done; exit 0`;
    const proc = spawn('sh', ['-c', script, 'sh', file], { env: t.env, leftovers: 'kill', grace: 5000, stdio: ['ignore', 'ignore', 'ignore'] });
    const result = await within(proc.result, watchdog(20_000), 'the result', t.tag);
    const pids = Object.fromEntries(readFileSync(file, 'utf8').trim().split('\n').map((l) => l.split(' ')).map(([k, v]) => [k, Number(v)]));
    expect(Object.keys(pids).sort(), readFileSync(file, 'utf8')).toEqual(['late', 'sub']);
    await waitGone([pids.sub!, pids.late!], promised(1000), 'the killed leftovers to be gone');
    const named = new Map(result.leftovers.map((l) => [l.pid, l.command]));
    expect(named.get(pids.late!), JSON.stringify(result.leftovers)).toBe('sleep 303');
    expect(named.get(pids.sub!), JSON.stringify(result.leftovers)).toBe('sleep 302');
    await waitGone(t.tag, 2000);
  });

  // Real programs that run their command in a child of their own, so each
  // leaves two processes: script (the child on a pseudo-terminal, in a
  // session of its own), timeout (in a process group of its own), flock.
  // Every one of the six is listed, named by what it ran, and gone. The root
  // exits once each inner command has written its pid (exec keeps it).
  // (util-linux's script -qc, coreutils' timeout and util-linux's flock: macOS ships none of them as such.)
  const gnuTools = onlyWhere(process.platform === 'linux', "needs util-linux's script -qc and flock and coreutils' timeout, which macOS does not ship");
  const twoWhy = missing('script') ?? (gnuTools.skip ? gnuTools.note.replace(/^ \[skipped: (.*)\]$/, '$1') : '');
  // proves C5
  itWhere(twoWhy === '', 'leftovers of two processes each (script -qc, timeout, flock): all six listed, named and gone', twoWhy, async () => {
    const t = useTag();
    const dir = mkdtempSync(join(tmpdir(), 'cordon-leftovers-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const f = join(dir, 'pids'); // (no space or quote: a tmpdir path)
    const inner = (k: string, n: number) => `echo inner-${k} $$ >> ${f}; exec sleep ${n}`;
    const quiet = '>/dev/null 2>&1 </dev/null';
    const script = [
      `script -qc '${inner('s', 310)}' /dev/null ${quiet} & echo outer-s $! >> ${f}`,
      `timeout 300 sh -c '${inner('t', 311)}' ${quiet} & echo outer-t $! >> ${f}`,
      `flock ${f}.lock sh -c '${inner('f', 312)}' ${quiet} & echo outer-f $! >> ${f}`,
      `until [ "$(grep -c '^inner' ${f})" = 3 ]; do sleep 0.01; done; exit 0`,
    ].join('; ');
    const proc = spawn('sh', ['-c', script], { env: t.env, leftovers: 'kill', stdio: ['ignore', 'ignore', 'ignore'] });
    const result = await within(proc.result, watchdog(20_000), 'the result', t.tag);
    const pids = Object.fromEntries(readFileSync(f, 'utf8').trim().split('\n').map((l) => l.split(' ')).map(([k, v]) => [k, Number(v)]));
    const keys = ['inner-f', 'inner-s', 'inner-t', 'outer-f', 'outer-s', 'outer-t'];
    expect(Object.keys(pids).sort(), readFileSync(f, 'utf8')).toEqual(keys);
    await waitGone(keys.map((k) => pids[k]!), promised(1000), 'the killed leftovers to be gone');
    const named = new Map(result.leftovers.map((l) => [l.pid, l.command]));
    const listed = JSON.stringify(result.leftovers);
    expect(named.get(pids['inner-s']!), listed).toBe('sleep 310');
    expect(named.get(pids['inner-t']!), listed).toBe('sleep 311');
    expect(named.get(pids['inner-f']!), listed).toBe('sleep 312');
    expect(named.get(pids['outer-s']!), listed).toMatch(/^script -qc /);
    expect(named.get(pids['outer-t']!), listed).toMatch(/^timeout 300 sh -c /);
    expect(named.get(pids['outer-f']!), listed).toMatch(/^flock /);
    await waitGone(t.tag, 2000);
  });
});
