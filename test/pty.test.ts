// CONTRACT C13 (with C1, C3, C4, C5, C8, C11): the contained terminal (the
// `pty` option): real interactive programs on a terminal of their tree's own,
// observed from outside: what the terminal shows (the tty's name, `stty size`, a REPL's answer), the pids the
// programs print, and the test's tag in every process they start. Every
// clause of the contract holds with a terminal: terminate() ends whatever the
// terminal started (setsid, double fork, nohup, a tmux server), the host's
// SIGKILL ends it all within 1 s, and a member that keeps the terminal open
// after the root exits does not hold the result past waitDelay (C4).
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { capabilities, Registry, run, spawn } from '../lib/index.js';
import { tierGuarantees } from '../lib/capabilities.js';
import { normalizeOptions } from '../lib/options.js';
import { terminalOption } from '../lib/terminal.js';
import { spawn as spawnChild } from 'node:child_process';
import { capture, repoRoot } from './helpers/fixtures.js';
import { ensureDist, startHost } from './helpers/host.js';
import { alive, useTag, waitFor, waitGone, within, type Tagged } from './helpers/procs.js';
import { has, missing } from './helpers/requirements.js';
import { escapePromised, itWhere, orphanedEscapee, tier, xnu, type Escape } from './helpers/tier.js';
import { killHost, spawnLeased, useRuntime } from './helpers/lease.js';
import { LOAD_ALLOWANCE_MS, promised, watchdog } from './helpers/time.js';

/** An interactive bash on a terminal: its output so far, and typing into it. */
/** The polite signal spawn() would use with these options. */
const spawnOptionsKillSignal = (options: object) => normalizeOptions(options).killSignal;

function shell(t: Tagged, size = { cols: 100, rows: 30 }) {
  // No TERM of the host's: the terminal's own default applies.
  const proc = spawn('bash', ['--norc', '--noprofile', '-i'], { pty: size, env: { ...t.env, PS1: 'PROMPT> ', TERM: undefined } });
  onTestFinished(() => void proc.kill());
  const out = capture(proc.stdout);
  const type = (text: string) => proc.stdin.write(text);
  // A line the shell answers with `<name>-<n*n>`: the evaluated number is in
  // the output only once the shell ran it (the echo of what was typed shows
  // the expression).
  let n = 0;
  const answered = async (name: string, command = '') => {
    n++;
    type(`${command}${command ? '\n' : ''}echo ${name}-$((${n}*${n}))\n`);
    await out.until(new RegExp(`${name}-${n * n}\\b`));
  };
  return { proc, out, type, answered };
}

describe(`terminal (pty) in the ${tier} tier`, () => {
  beforeAll(async () => {
    await ensureDist();
  });

  // proves C13 (own report), C11 (own report)
  it('capabilities() claims a terminal in every POSIX tier, none on Windows (no pseudo console yet)', () => {
    expect(capabilities().guarantees.terminal).toBe(process.platform !== 'win32');
    expect(tierGuarantees('win32', 'job-object', true).guarantees.terminal).toBe(false);
    expect(() => terminalOption(true, 'win32')).toThrow(expect.objectContaining({ code: 'ERR_CORDON_UNSUPPORTED' }));
  });

  // proves C13 (own report): typed errors for the terminal's options
  it('bad terminal options are typed errors before anything runs', () => {
    const bad: Array<[unknown, string]> = [
      [{ pty: { cols: 0 } }, 'ERR_INVALID_ARG_VALUE'],
      [{ pty: { rows: 65536 } }, 'ERR_INVALID_ARG_VALUE'],
      [{ pty: { cols: '80' } }, 'ERR_INVALID_ARG_TYPE'],
      [{ pty: { term: '' } }, 'ERR_INVALID_ARG_VALUE'],
      [{ pty: { term: 'xterm\0' } }, 'ERR_INVALID_ARG_VALUE'],
      [{ pty: { colour: true } }, 'ERR_INVALID_ARG_VALUE'],
      [{ pty: 'yes' }, 'ERR_INVALID_ARG_TYPE'],
      [{ pty: true, stdio: 'inherit' }, 'ERR_INVALID_ARG_VALUE'],
    ];
    for (const [options, code] of bad) {
      expect(() => spawn('sh', ['-c', 'exit 0'], options as never), JSON.stringify(options)).toThrow(expect.objectContaining({ code }));
    }
    const piped = spawn('sh', ['-c', 'exit 0']);
    expect(() => piped.resize(80, 24)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }));
    return piped.result;
  });

  // proves C13
  it('an interactive shell answers on a real tty; stty size follows resize(); the foreground job gets SIGWINCH', async () => {
    const t = useTag();
    const sh = shell(t);
    await sh.answered('FIRST', 'tty; stty size; echo "T=$TERM"');
    expect(sh.out.text).toMatch(/^\/dev\/pts\/\d+\r$/m);
    expect(sh.out.text).toMatch(/^30 100\r$/m);
    expect(sh.out.text).toMatch(/^T=xterm-256color\r$/m);
    expect(sh.proc.stderr).toBeNull();
    sh.proc.resize(120, 40);
    // RESIZE lines the anchor must not take (a size out of 1..65535, a missing
    // or extra word, a sign): written on the control channel as they are.
    const channel = (sh.proc as unknown as { anchor: { send(line: string): void } }).anchor;
    for (const line of ['RESIZE 0 5', 'RESIZE 99999 10', 'RESIZE 80', 'RESIZE 80 24 1', 'RESIZE -1 5', 'RESIZE 1e2 5']) channel.send(`${line}\n`);
    await sh.answered('SECOND', 'stty size');
    expect(sh.out.text).toMatch(/^40 120\r$/m);
    expect(sh.out.text).not.toMatch(/^(5 0|10 99999|24 80|5 -1|5 100)\r$/m);
    // A foreground job that handles SIGWINCH: the kernel sends it on resize.
    sh.type(`python3 -c "import signal, time; signal.signal(signal.SIGWINCH, lambda *a: print('WINCH', flush=True)); print('WAITING', flush=True); time.sleep(60)"\n`);
    await sh.out.until(/^WAITING\r$/m);
    sh.proc.resize(90, 20);
    await sh.out.until(/^WINCH\r$/m);
    sh.type('\x03');
    await sh.answered('THIRD', 'stty size');
    expect(sh.out.text).toMatch(/^20 90\r$/m);
    sh.type('exit 7\n');
    const result = await within(sh.proc.result, watchdog(10_000), 'the shell to exit', t.tag);
    expect(result.exitCode).toBe(7);
    await waitGone(t, 2000);
  });

  // proves C13
  it('Ctrl-C interrupts the foreground job (SIGINT through the line discipline); job control works', async () => {
    const t = useTag();
    const sh = shell(t);
    await sh.answered('UP');
    sh.type(`sh -c 'echo "PID f $$"; exec sleep 300'\n`);
    await sh.out.until(/^PID f \d+\r$/m);
    const f = Number(/^PID f (\d+)\r$/m.exec(sh.out.text)![1]);
    expect(alive(f)).toBe(true);
    sh.type('\x03');
    await waitFor(() => !alive(f), { timeout: watchdog(5000), what: 'Ctrl-C to end the foreground sleep', watch: f });
    await sh.answered('RC', 'echo "rc=$?"');
    expect(sh.out.text).toMatch(/^rc=130\r$/m);
    // A background job, listed by the shell's job control, then brought back and interrupted.
    await sh.answered('JOBS', 'sleep 301 & jobs');
    expect(sh.out.text).toMatch(/^\[1\]\+\s+Running\s+sleep 301 &\r$/m);
    sh.type('fg\n');
    await sh.out.until(/^sleep 301\r$/m);
    sh.type('\x03');
    await sh.answered('AFTER', 'jobs; echo "rc=$?"');
    expect(t.procs().map((p) => p.command)).not.toContain('sleep 301');
    sh.type('exit\n');
    await within(sh.proc.result, watchdog(10_000), 'the shell to exit', t.tag);
    await waitGone(t, 2000);
  });

  // proves C13, C3
  it('terminate() ends everything the terminal started: a setsid job, a (sleep &) double fork, nohup, a tmux server', async () => {
    const t = useTag();
    const dir = mkdtempSync(join(tmpdir(), 'cordon-pty-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const sh = shell(t);
    const tmux = has('tmux') ? `\ntmux -S ${dir}/tmux.sock new-session -d 'sleep 313' </dev/null >/dev/null 2>&1` : '';
    await sh.answered('STARTED', `setsid sleep 310 & (sleep 311 &) ; nohup sleep 312 >/dev/null 2>&1 &${tmux}`);
    const expected = ['sleep 310', 'sleep 311', 'sleep 312', ...(tmux ? ['sleep 313'] : [])];
    await waitFor(() => expected.every((c) => t.procs().some((p) => p.command === c)), { timeout: watchdog(10_000), what: `${expected.join(', ')} to run`, watch: t });
    // How each got away, where the tier's promise depends on it (helpers/tier.ts):
    // job control makes the setsid job lead its group, so setsid forks first
    // and exits; tmux's client forks the server, which daemonizes.
    const escapes: Array<[RegExp, Escape]> = [
      [/^sleep 310$/, { program: 'sleep', forkedBy: 'unseen' }],
      [/^(tmux|sleep 313)/, { program: 'tmux', forkedBy: 'unseen' }],
    ];
    const unpromised = (command: string) => escapes.some(([re, e]) => re.test(command) && !escapePromised(e));
    await within(sh.proc.terminate({ grace: 2000 }), watchdog(15_000), 'terminate() to resolve', t.tag);
    // Resolved at quiescence: nothing the terminal started is left now.
    for (const p of t.procs()) if (unpromised(p.command)) t.notPromised(p.pid);
    expect(t.procs().filter((p) => !unpromised(p.command))).toEqual([]);
    const result = await within(sh.proc.result, watchdog(5000), 'the result', t.tag);
    expect(result.signal).not.toBeNull(); // the shell itself was ended by the stop
  });

  // proves C13, C3
  it('an interactive shell on a terminal is asked to stop as a closed terminal asks (SIGHUP, the default killSignal there), not left to the forced kill', async () => {
    const t = useTag();
    const sh = shell(t);
    await sh.answered('UP');
    // An interactive bash ignores SIGTERM: with it, only the forced kill after this grace would end it.
    await within(sh.proc.terminate({ grace: 60_000 }), watchdog(15_000), 'terminate() to end the shell by SIGHUP, well within its grace', t.tag);
    const result = await within(sh.proc.result, watchdog(5000), 'the result', t.tag);
    expect(result.signal, 'the shell died of the hang-up').toBe('SIGHUP');
    // An explicit killSignal still wins.
    expect(spawnOptionsKillSignal({ pty: true })).toBe('SIGHUP');
    expect(spawnOptionsKillSignal({ pty: true, killSignal: 'SIGINT' })).toBe('SIGINT');
    expect(spawnOptionsKillSignal({})).toBe('SIGTERM');
    await waitGone(t, promised(1000));
  });

  // proves C13, C3
  it("a root that outlives the first SIGHUP gets the terminal's hang-up again, once, 250 ms later: ended by SIGHUP, not the grace's SIGKILL", async () => {
    const t = useTag();
    // The first SIGHUP is taken by a trap that then restores the default (so
    // does an interactive bash lose one, between its check for a caught signal
    // and its wait for input); only a second one ends this root.
    const proc = spawn('sh', ['-c', 'trap "echo HUP-ONE; trap - HUP" HUP; echo READY; while :; do sleep 0.05; done'], { pty: true, env: t.env });
    const out = capture(proc.stdout);
    await within(out.until(/READY\r\n/), watchdog(10_000), 'the root to set its trap', t.tag);
    const asked = Date.now();
    await within(proc.terminate({ grace: 60_000 }), watchdog(15_000), 'terminate() to end the root by the second SIGHUP, well within its grace', t.tag);
    const result = await within(proc.result, watchdog(5000), 'the result', t.tag);
    expect(out.text, 'the first SIGHUP reached the trap').toMatch(/HUP-ONE/);
    expect(result.signal, 'the root died of the second hang-up').toBe('SIGHUP');
    // Not before 250 ms: the second is the hang-up's, not the first's twin.
    expect(Date.now() - asked).toBeGreaterThanOrEqual(240);
    await waitGone(t, promised(1000));
  });

  // proves C13, C4, C3
  it('a member that keeps the terminal after the root exits does not hold the result past waitDelay (C4); terminate() ends it', async () => {
    const t = useTag();
    // Kept (leftovers 'keep'), so it holds the terminal for as long as the
    // test lets it; it ignores SIGHUP (from its fork on: the root ignores it
    // first), which the root's exit sends to the terminal's foreground group
    // where the root leads the terminal's session.
    // The root's last act is to print the time (ms) it exits at (GNU date's
    // %N; where date has none, BSD's, node's clock): the wait delay is timed from it.
    const stamp = 't=$(date +%s%3N); case $t in *N) t=$("$1" -e "process.stdout.write(String(Date.now()))");; esac; echo "EXIT $t"';
    const proc = spawn('sh', ['-c', `trap "" HUP; sleep 320 & echo "PID s $!"; ${stamp}; exit 0`, 'sh', process.execPath], { pty: true, env: t.env, waitDelay: 1000, leftovers: 'keep' });
    const settledAt = proc.result.then(() => Date.now(), () => Date.now());
    const out = capture(proc.stdout);
    const result = await within(proc.result, watchdog(10_000), 'the result', t.tag);
    const exitAt = Number(/^EXIT (\d+)\r$/m.exec(out.text)?.[1]);
    const elapsed = (await settledAt) - exitAt;
    // The promise, waitDelay after the root's exit, plus this machine's
    // measured allowance: a wait delay 50% too long fails (on an idle machine).
    expect(elapsed, `settled after the root's exit (ms; allowance ${LOAD_ALLOWANCE_MS} ms)`).toBeLessThanOrEqual(promised(1000));
    expect(elapsed, 'waited for the wait delay before giving up (ms)').toBeGreaterThanOrEqual(1000 - 20);
    expect(result.exitCode).toBe(0);
    expect(result.waitDelayExceeded).toBe(true);
    expect(result.leftoversKept).toBe(true);
    const s = Number(/^PID s (\d+)\r$/m.exec(out.text)?.[1]);
    expect(alive(s), 'the kept member still holds the terminal').toBe(true);
    expect(result.leftovers.map((l) => l.pid)).toContain(s);
    await within(proc.terminate({ grace: 1000 }), watchdog(10_000), 'terminate() to resolve', t.tag);
    await waitGone(t, promised(3000));
  });

  // proves C13
  it('once no process has the terminal open, the anchor closes it: a member that let go of it cannot open it again', async () => {
    const t = useTag();
    const dir = mkdtempSync(join(tmpdir(), 'cordon-pty-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    // The member (node): it ignores the hang-up the root's exit sends the
    // terminal's foreground group, notes its terminal (the path, and the
    // device's change time, which a terminal made later on the same number
    // has newer), lets go of it, then waits (kept: leftovers 'keep') for the
    // test's go, given once the result says the terminal is released; then it
    // tries to open that path again (read only, no controlling terminal: a
    // pty made since on that number, another program's, is not disturbed)
    // and writes what came of it. Its tag is in its environment: the test's
    // cleanup ends it by tag.
    const member = `
      const fs = require('node:fs');
      process.on('SIGHUP', () => {});
      const [dir, path] = process.argv.slice(1);
      const ctime = fs.fstatSync(1, { bigint: true }).ctimeNs;
      // (fs, not console: a stdout stream on a terminal has libuv open it again.)
      fs.writeSync(1, 'MEMBER ' + process.pid + ' ' + path + '\\n');
      for (const fd of [0, 1, 2]) fs.closeSync(fd);
      const tick = setInterval(() => {
        if (!fs.existsSync(dir + '/go')) return;
        clearInterval(tick);
        let outcome;
        try {
          const fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NOCTTY | fs.constants.O_NONBLOCK);
          outcome = fs.fstatSync(fd, { bigint: true }).ctimeNs === ctime ? 'REOPENED' : 'ANOTHER';
          fs.closeSync(fd);
        } catch (e) {
          outcome = 'REFUSED ' + e.code;
        }
        fs.writeFileSync(dir + '/outcome', outcome);
        setInterval(() => {}, 1000);
      }, 50);`;
    const proc = spawn('sh', ['-c', 'p=$(tty); trap "" HUP; "$1" -e "$3" "$2" "$p" & exit 0', 'sh', process.execPath, dir, member], { pty: true, env: t.env, leftovers: 'keep', waitDelay: 30_000 });
    const out = capture(proc.stdout);
    const result = await within(proc.result, watchdog(15_000), 'the result (the terminal released: no process holds it)', t.tag);
    expect(result.waitDelayExceeded, 'the output ended when the terminal was released, not at waitDelay').toBe(false);
    const [, pid, path] = /^MEMBER (\d+) (\S+)\r$/m.exec(out.text) ?? [];
    expect(path, `the terminal's path (the output: ${JSON.stringify(out.text)})`).toMatch(/^\/dev\//);
    expect(alive(Number(pid)), 'the member lives on, kept').toBe(true);
    writeFileSync(join(dir, 'go'), '');
    await waitFor(() => existsSync(join(dir, 'outcome')), { timeout: watchdog(10_000), what: 'the member to try the terminal again', watch: t.tag });
    // Refused (the terminal is gone), or a terminal made since on the same number: never ours.
    expect(readFileSync(join(dir, 'outcome'), 'utf8'), `what opening ${path} again gave`).toMatch(/^(REFUSED E[A-Z]+|ANOTHER)$/);
    await within(proc.terminate({ grace: 1000 }), watchdog(10_000), 'terminate() to resolve', t.tag);
    await waitGone(t, promised(3000));
  });

  // proves C13
  it('output is complete and its end (EIO on the terminal) is no error: 200,000 lines through the terminal', async () => {
    const t = useTag();
    // (stripFinalNewline: false, so that the last line's CR-LF is seen too.)
    const r = await within(run('seq', ['1', '200000'], { pty: true, env: t.env, stripFinalNewline: false }), watchdog(30_000), 'seq to finish', t.tag);
    expect(r.exitCode).toBe(0);
    const lines = r.stdout.split('\r\n');
    // Where a line is missing or wrong, the first place and what is there
    // (lines run together: a lost CR-LF; a gap: lost bytes), so that a loss
    // seen once says where it happened.
    const first = lines.findIndex((line, i) => i < 200000 && line !== String(i + 1));
    const around = first < 0 ? '' : `first wrong line at index ${first}: ${JSON.stringify(lines.slice(Math.max(0, first - 2), first + 3))}; `;
    expect(`${around}${lines.length} lines, the last ${JSON.stringify(lines.slice(-3))}, ${r.stdout.length} characters, waitDelayExceeded ${r.waitDelayExceeded}`)
      .toBe(`200001 lines, the last ${JSON.stringify(['199999', '200000', ''])}, ${r.stdout.length} characters, waitDelayExceeded false`);
    expect(r.stderr).toBe('');
  });

  // proves C13 (own report), C11 (own report)
  it("capabilities() claims the terminal's last output kept for a stalled host on Linux only (macOS: a pipe cannot grow)", () => {
    // (The darwin build on the model of XNU's process table claims what macOS gives.)
    expect(capabilities().guarantees.terminalOutputKept).toBe(process.platform === 'linux' && !xnu);
    expect(tierGuarantees('darwin', 'process-group', false).guarantees.terminalOutputKept).toBe(false);
    expect(tierGuarantees('win32', 'job-object', true).guarantees.terminalOutputKept).toBe(false);
    for (const t of ['cgroup', 'subreaper', 'process-group'] as const) expect(tierGuarantees('linux', t, true).guarantees.terminalOutputKept, t).toBe(true);
  });

  // proves C13
  itWhere(
    capabilities().guarantees.terminalOutputKept,
    "a host whose event loop stalls as the tree ends loses none of the terminal's output (the kernel keeps it, as a pipe's)",
    "capabilities().guarantees.terminalOutputKept is false here (macOS: a pipe cannot be grown, so the anchor holds the terminal's last output and drops what the host has not taken 2 s after the tree's end)",
    async () => {
      const t = useTag();
      // About 94 kB: more than the host's pipe holds, less than the pipe and
      // the anchor's relay buffer together, so seq finishes while the host
      // takes nothing and the anchor holds the rest when the tree ends.
      const proc = spawn('seq', ['1', '15000'], { pty: true, env: t.env });
      let text = '';
      let stalled = false;
      proc.stdout.setEncoding('utf8');
      proc.stdout.on('data', (chunk: string) => {
        text += chunk;
        if (stalled) return;
        stalled = true;
        // The host's event loop stalls (a long synchronous task, a GC pause on
        // a loaded machine) from its first chunk until seq has been gone,
        // seen from outside, for 2.5 s: longer than the anchor waited for a
        // host that takes nothing at the tree's end (2 s).
        const until = Date.now() + watchdog(10_000);
        while (t.procs().length > 0 && Date.now() < until) {
          /* busy: the stall */
        }
        const gone = Date.now();
        while (Date.now() - gone < 2500) {
          /* busy */
        }
      });
      const r = await within(proc.result, watchdog(20_000), 'seq to finish', t.tag);
      expect(r.exitCode).toBe(0);
      const lines = text.split('\r\n');
      expect(`${lines.length} lines, the last ${JSON.stringify(lines.slice(-3))}, waitDelayExceeded ${r.waitDelayExceeded}`)
        .toBe(`15001 lines, the last ${JSON.stringify(['14999', '15000', ''])}, waitDelayExceeded false`);
      expect(lines.slice(0, 15000).every((line, i) => line === String(i + 1)), 'every line, in order').toBe(true);
    },
  );

  // proves C13, C3
  it("a host that does not read the terminal's output cannot hold the tree's end: terminate() resolves, the result is no cleanup failure", async () => {
    const t = useTag();
    // A wait delay far beyond the test: the host never closes its end. On
    // Linux the anchor hands what the terminal still holds to the host's pipe
    // (grown to take it) and ends; elsewhere its own bound (what the host has
    // not taken 2 s after the tree's end is dropped) lets the tree end.
    const proc = spawn('sh', ['-c', 'echo "PID root $$"; seq 1 1000000; exec sleep 300'], { pty: true, env: t.env, waitDelay: '10m' });
    proc.stdout.pause(); // (never read: the terminal, the relay and the pipe fill up)
    await waitFor(() => t.procs().some((p) => p.command === 'sleep 300' || p.command.startsWith('seq')), { timeout: watchdog(10_000), what: 'the tree to run', watch: t.tag });
    await within(proc.terminate({ grace: 500 }), watchdog(20_000), 'terminate() to resolve with the output unread', t.tag);
    const result = await within(proc.result, watchdog(10_000), 'the result', t.tag);
    expect(result.signal, "the polite signal of a tree on a terminal: a closing terminal's").toBe('SIGHUP');
    await waitGone(t, 2000);
  });

  // proves C13
  itWhere(has('python3'), "python3's REPL answers, and Ctrl-D ends it", missing('python3') ?? '', async () => {
    const t = useTag();
    const proc = spawn('python3', ['-q'], { pty: true, env: t.env });
    const out = capture(proc.stdout);
    await out.until(/>>> /);
    proc.stdin.write('print(6*7)\n');
    await out.until(/^42\r$/m);
    proc.stdin.write('\x04');
    const result = await within(proc.result, watchdog(10_000), 'python3 to exit', t.tag);
    expect(result.exitCode).toBe(0);
  });

  // proves C13
  it('a full-screen program (less) draws on the terminal and quits on a key', async () => {
    const t = useTag();
    const dir = mkdtempSync(join(tmpdir(), 'cordon-pty-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'lines.txt');
    writeFileSync(file, Array.from({ length: 100 }, (_, i) => `line ${i + 1}`).join('\n') + '\n');
    const proc = spawn('less', [file], { pty: { cols: 40, rows: 10 }, env: { ...t.env, LESS: '', LESSOPEN: undefined, TERM: undefined } });
    const out = capture(proc.stdout);
    await out.until(/line 9\b/);
    expect(out.text, 'the first screen only').not.toMatch(/line 10\b/);
    expect(out.text, 'escape sequences: it drives the screen').toMatch(/\x1b\[/);
    proc.stdin.write('G');
    await out.until(/line 100\b/);
    proc.stdin.write('q');
    const result = await within(proc.result, watchdog(10_000), 'less to quit', t.tag);
    expect(result.exitCode).toBe(0);
  });

  // proves C13, C8
  it('a host SIGKILLed with a terminal tree running: nothing of it is left within 1 s (C8)', async () => {
    const t = useTag();
    const host = startHost(['wait', '--trees', 'terminal'], t.env);
    await host.ready();
    const pids = host.out.pids();
    const names = ['terminal.root', 'terminal.s', 'terminal.d'].filter(
      (n) => n === 'terminal.root' || orphanedEscapee(t, pids[n], n === 'terminal.s' ? { program: 'sleep', forkedBy: 'member' } : { program: 'sleep', forkedBy: 'unseen', inSession: true }),
    );
    for (const name of names) expect(alive(pids[name]!), `${name} before`).toBe(true);
    host.child.kill('SIGKILL');
    await within(host.exited, watchdog(10_000), 'the host to end', t.tag);
    await waitFor(() => names.every((n) => !alive(pids[n]!)), { timeout: promised(1000), what: "the terminal tree to be gone after the host's SIGKILL", watch: [t.tag, ...names.map((n) => pids[n]!)] });
    await waitGone(t, promised(1000));
  });

  // proves C13, C8
  it("a leased tree keeps its terminal when its host dies; the adopter gets it: the output meanwhile in the log, then input, output and resize", async () => {
    const t = useTag();
    const { env } = useRuntime(t);
    const script = 'echo READY; sleep 0.5; echo WHILE-DETACHED; while read line; do echo "GOT $line"; stty size; done';
    const leased = await spawnLeased({ ...env, LEASE_PTY: '1' }, 60_000, 1000, script);
    await killHost(leased.host, t);
    await waitFor(() => readFileSync(leased.log, 'utf8').includes('WHILE-DETACHED'), { timeout: watchdog(10_000), what: 'the detached output in the log', watch: t.tag });
    // This process adopts it (the test's private lease directory).
    const saved = process.env.XDG_RUNTIME_DIR;
    process.env.XDG_RUNTIME_DIR = env.XDG_RUNTIME_DIR;
    let proc;
    try {
      proc = await new Registry().adopt(leased.id, { token: leased.token });
    } finally {
      if (saved === undefined) delete process.env.XDG_RUNTIME_DIR;
      else process.env.XDG_RUNTIME_DIR = saved;
    }
    onTestFinished(() => void proc.kill());
    expect(proc.stdin, 'an adopted terminal takes input').not.toBeNull();
    expect(proc.stderr).toBeNull();
    const out = capture(proc.stdout);
    proc.stdin!.write('hello\n');
    await out.until(/^GOT hello\r$/m);
    await out.until(/^30 100\r$/m);
    proc.resize(120, 40);
    proc.stdin!.write('again\n');
    await out.until(/^40 120\r$/m);
    await within(proc.terminate({ grace: 1000 }), watchdog(10_000), 'terminate() to resolve', t.tag);
    await waitGone(t, 2000);
  });

  // proves C13, C8
  itWhere(has('python3'), 'cordon adopt of a leased terminal tree attaches the terminal it runs in: typing, its window size, Ctrl-C to the tree', missing('python3') ?? '', async () => {
    const t = useTag();
    const { env } = useRuntime(t);
    const script = 'echo READY; while read line; do echo "GOT $line"; stty size; done';
    const leased = await spawnLeased({ ...env, LEASE_PTY: '1' }, 60_000, 1000, script);
    await killHost(leased.host, t);
    const term = spawnChild('python3', [join(repoRoot, 'test', 'helpers', 'terminal.py'), '--', process.execPath, join(repoRoot, 'dist', 'cli.js'), 'adopt', leased.id, '--token', leased.token], {
      env,
      cwd: repoRoot,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    onTestFinished(() => {
      if (term.exitCode === null && term.signalCode === null) term.kill('SIGKILL');
    });
    const exited = new Promise<void>((resolve) => term.once('exit', () => resolve()));
    const screen = capture(term.stdout);
    const err = capture(term.stderr);
    term.stdin!.write('TYPE hello\n');
    await screen.until(/GOT hello\r/, watchdog(15_000)).catch((e: Error) => {
      throw new Error(`${e.message}\nstderr: ${err.text}`);
    });
    term.stdin!.write('SIZE 90 20\n');
    await waitFor(
      async () => {
        term.stdin!.write('TYPE again\n');
        await new Promise((r) => setTimeout(r, 100));
        return /^20 90\r/m.test(screen.text);
      },
      { timeout: watchdog(10_000), what: "the adopted terminal to take the outer window's size", watch: t.tag },
    );
    term.stdin!.write('INTR\n');
    await screen.until(/PTY-EXIT \d+/, watchdog(10_000));
    expect(screen.text, 'the tree took the Ctrl-C (SIGINT): cordon adopt exits with its status').toMatch(/PTY-EXIT 130/);
    await within(exited, watchdog(10_000), 'the terminal helper to exit', t.tag);
    await waitGone(t, promised(2000));
  });
});
