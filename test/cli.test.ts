// The cordon CLI, run as users run it (`node dist/cli.js`): `cordon run`
// forwards the command's status, ends the whole tree on --timeout and on
// Ctrl-C, and reports leftovers; `cordon leaks` lists every process a command
// left behind, terminates them, and says so in its exit status. Processes
// are observed from outside, through /proc, by the pids the commands print.
import { beforeAll, describe, expect, it } from 'vitest';
import { spawn as spawnChild } from 'node:child_process';
import { chmodSync, chownSync, existsSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parsePidLines } from './helpers/common.mjs';
import { capture, fixture, repoRoot } from './helpers/fixtures.js';
import { ensureDist, startCli as cli } from './helpers/host.js';
import { alive, cmdline, describeProcs, readStat, useTag, waitFor, within, type Tagged } from './helpers/procs.js';
import { missing } from './helpers/requirements.js';
import { caps, itWhere } from './helpers/tier.js';
import { TIME_SCALE, watchdog } from './helpers/time.js';
import { expectNamedGone } from './helpers/trees.js';
import { tempDir } from './helpers/registry.js';

const CLI = join(repoRoot, 'dist', 'cli.js');
/** The terminal (test/helpers/terminal.py) is python3. */
const noPython = missing('python3') ?? '';

const TREE_PIDS = ['bg', 'setsid', 'double', 'nohup'];

/** `cordon <words> tree.sh`: waits (bounded) for READY and checks that the tree printed every pid. */
async function cliTree(words: string[], env: NodeJS.ProcessEnv) {
  const run = cli([...words, fixture('tree.sh')], env);
  await run.out.until(/^READY$/m, 15_000);
  const pids = run.out.pids();
  expect(Object.keys(pids).sort()).toEqual([...TREE_PIDS].sort());
  return { run, pids };
}

/** cordon exits (bounded) with `code` and no signal (a failure shows its stderr). */
async function expectExit(run: ReturnType<typeof cli>, t: Tagged, code: number, what: string, bound = 15_000): Promise<void> {
  expect(await within(run.exited, bound, what, t.tag), run.err.text).toEqual({ code, signal: null });
}

describe('the CLI itself', () => {
  beforeAll(async () => {
    await ensureDist();
  });

  // proves nothing of the contract: the CLI's usage and version
  it('--version prints the package version; help prints the usage (exit 0); a usage error of any subcommand is its line and a pointer to --help (exit 2), and nothing runs', async () => {
    const t = useTag();
    const { version } = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string };
    for (const args of [['--version'], ['version']]) {
      const c = cli(args, t.env);
      expect((await within(c.exited, watchdog(15_000), `cordon ${args[0]}`, t.tag)).code).toBe(0);
      expect(c.out.text).toBe(`cordon ${version}\n`);
    }
    for (const args of [['help'], ['--help']]) {
      const c = cli(args, t.env);
      expect((await within(c.exited, watchdog(15_000), `cordon ${args[0]}`, t.tag)).code).toBe(0);
      expect(c.out.text).toMatch(/^Usage:\n {2}cordon run /);
    }
    // Each would leave this file if its command ran (a process walk misses a command that lives milliseconds).
    const marker = join(tempDir('cordon-cli-usage-'), 'ran');
    const touch = ['sh', '-c', `touch '${marker}'`];
    for (const [args, line] of [
      [['bogus'], 'cordon: unknown command bogus'],
      [['run', '--timeout'], 'cordon: --timeout needs a value'],
      [['run', '--nope', '--', ...touch], 'cordon: unknown option --nope'],
      [['run', '-x', ...touch], 'cordon: unknown option -x'],
      [['run', '--log', '--report', ...touch], 'cordon: --log needs a value (a value that starts with a dash is written --log=-…)'],
      [['run', '--grace', '30', ...touch], 'cordon: --grace takes a duration with its unit, such as 500ms, 3s or 2m; got "30". A duration written as text carries its unit: "30ms" or "30s".'],
      [['run', '--report'], 'cordon: run needs a command'],
      [['leaks', '--leftovers', 'keep', ...touch], 'cordon: leaks keeps the leftovers to report them: --leftovers does not apply'],
      [['ps', '--bogus'], 'cordon: unknown option --bogus'],
      [['ps', 'extra'], 'cordon: unexpected argument extra'],
      [['adopt', 'some-id'], 'cordon: adopt needs a tree id (cordon ps) and --token'],
      [['adopt', 'a', 'b', '--token', 'x'], 'cordon: unexpected argument b'],
    ] as Array<[string[], string]>) {
      const c = cli([...args], t.env);
      expect((await within(c.exited, watchdog(15_000), `cordon ${args.join(' ')}`, t.tag)).code, c.err.text).toBe(2);
      expect(c.err.text).toBe(`${line}\ncordon: see cordon --help\n`);
    }
    expect(existsSync(marker), 'a command ran after a usage error').toBe(false);
    // Sixteen CLI runs, each a Node start bounded by its own watchdog above:
    // the test's bound is their sum, not the default 60 s (on a loaded 2-core
    // machine, load average 20, they took about 4 s each and the test 63 s).
  }, watchdog(16 * 15_000));

  // proves nothing of the contract: the CLI's wording of errors
  it("an error that reaches a CLI user is in the CLI's words (its flags, the environment, cordon ps), its code unchanged, and nothing runs", async () => {
    // The library's messages speak to a program (`The option "tier"`, `a
    // PATH in env`, `registry.adoptable()`); the CLI rewrites them
    // (lib/cli-messages.ts). Each case runs the real CLI and reads its stderr.
    const t = useTag();
    const marker = join(tempDir('cordon-cli-words-'), 'ran');
    const touch = ['sh', '-c', `touch '${marker}'`];
    const tiers = '[a-z-]+(?:, [a-z-]+)*'; // (this platform's tiers, as the usage lists them)
    const token = '0123456789abcdef0123456789abcdef';
    const cases: Array<[string[], NodeJS.ProcessEnv, number, RegExp]> = [
      [['run', '--tier', 'bogus', '--', ...touch], {}, 2, new RegExp(`^cordon: --tier must be one of ${tiers}; got "bogus"\\. \\[ERR_INVALID_ARG_VALUE\\]\\n$`)],
      [['run', '--leftovers', 'sometimes', '--', ...touch], {}, 2, /^cordon: --leftovers must be one of kill, kill-on-failure, keep; got "sometimes"\. \[ERR_INVALID_ARG_VALUE\]\n$/],
      [['run', '--', ...touch], { CORDON_TIER: 'bogus' }, 2, new RegExp(`^cordon: CORDON_TIER \\(in the environment\\) must be one of ${tiers}; got "bogus"\\. \\[ERR_INVALID_ARG_VALUE\\]\\n$`)],
      [['run', '--', `no-such-command-${t.tag}`], {}, 127, new RegExp(`^cordon: Command not found: no-such-command-${t.tag}\\. Check the name, or give its absolute path, or set PATH in the environment to include its directory\\. \\[ENOENT\\]\\n$`)],
      [['run', '--max-processes', '0', '--', ...touch], {}, 2, /^cordon: --max-processes must be a whole number of processes from 1 to 2147483647; got 0\.\ncordon: see cordon --help\n$/],
      [['run', '--memory', '12Q', '--', ...touch], {}, 2, /^cordon: --memory must be a byte count or a size such as 512M or 1G; got "12Q"\.\ncordon: see cordon --help\n$/],
      [['adopt', '1-0123456789abcdef', '--token', token], {}, 2, /^cordon: No adoptable tree 1-0123456789abcdef \(it ended, its lease ran out, or it belongs to another user\); list them with cordon ps\. \[ERR_CORDON_UNKNOWN_TREE\]\n$/],
      [['adopt', '1-0123456789abcdef', '--token', 'nothex'], {}, 2, /^cordon: --token takes the tree's adoption token \(32 hex characters\), as cordon run --lease printed it\. \[ERR_INVALID_ARG_VALUE\]\n$/],
    ];
    // Limits a tier cannot enforce: the process-group tier never does (C12).
    if (caps.tiers.includes('process-group')) {
      cases.push([
        ['run', '--tier', 'process-group', '--memory', '64M', '--', ...touch],
        {},
        2,
        /^cordon: The process-group tier cannot enforce the memory limit on this host \(cordon capabilities: guarantees\.limits and its notes say where it can\)\. Use --tier cgroup where .*, or --best-effort to run without the limits \(--report says they were not applied\)\. \[ERR_CORDON_CONTAINMENT\]\n$/,
      ]);
    }
    for (const [args, env, status, said] of cases) {
      const c = cli(args, { ...t.env, ...env });
      expect((await within(c.exited, watchdog(15_000), `cordon ${args.join(' ')}`, t.tag)).code, c.err.text).toBe(status);
      expect(c.err.text).toMatch(said);
      // None of the library's words for a program calling it.
      expect(c.err.text).not.toMatch(/The option "|registry\.|in env\b|capabilities\(\)|containment: |proc\.|spawn\(|adopt\(/);
    }
    // The CLI's own working directory deleted under it: cd, not cwd or process.chdir().
    const gone = tempDir('cordon-cli-gone-');
    const c = spawnChild('sh', ['-c', 'cd "$1" && rmdir "$1" && exec "$2" "$3" run -- sh -c "touch \'$4\'"', 'sh', gone, process.execPath, CLI, marker], { env: t.env, stdio: ['ignore', 'pipe', 'pipe'] });
    const err = capture(c.stderr);
    const exited = new Promise<number | null>((resolve) => c.once('exit', (code) => resolve(code)));
    expect(await within(exited, watchdog(15_000), 'cordon run in a deleted directory', t.tag), err.text).toBe(127);
    expect(err.text).toMatch(/^cordon: The current directory cannot be read \(ENOENT: it was probably deleted\), and the command would inherit it; nothing ran\. cd to an existing directory and run cordon again\. \[ENOENT\]\n$/);
    expect(existsSync(marker), 'a command ran after a refusal').toBe(false);
  }, watchdog(11 * 15_000));
});

describe('cordon run', () => {
  beforeAll(async () => {
    await ensureDist();
  });

  // proves C6
  it('exits with the command status, and 128+N when it dies by signal N', async () => {
    const t = useTag();
    const code = cli(['run', '--', 'sh', '-c', 'exit 7'], t.env);
    await expectExit(code, t, 7, 'cordon run (exit 7) to exit');
    const killed = cli(['run', '--', 'sh', '-c', 'kill -TERM $$'], t.env);
    await expectExit(killed, t, 128 + 15, 'cordon run (SIGTERM) to exit');
  });

  // proves C10, C3
  it('--timeout: exit 124, and the whole tree is gone when cordon exits', async () => {
    const t = useTag();
    // Long enough for a loaded machine to print READY before it, so that
    // every member is seen alive first (at 1 s, a run here beside two busy
    // loops came to READY after the timeout had ended the tree).
    const seconds = Math.round(4 * TIME_SCALE);
    const tree = await cliTree(['run', '--timeout', `${seconds}s`, '--'], t.env);
    for (const pid of Object.values(tree.pids)) expect(alive(pid), `member ${pid} before the timeout`).toBe(true);
    // cordon run exits once the tree is quiescent: nothing may be left now.
    await expectExit(tree.run, t, 124, 'cordon run --timeout to exit', seconds * 1000 + watchdog(15_000));
    expectNamedGone(tree.pids);
    expect(describeProcs(t.procs())).toBe('(none)');
  });

  // proves C8, C3: the CLI is the host; SIGINT ends the tree
  it('SIGINT to cordon: exit 130, and the whole tree is gone when cordon exits', async () => {
    const t = useTag();
    const tree = await cliTree(['run', '--'], t.env);
    tree.run.child.kill('SIGINT');
    await expectExit(tree.run, t, 130, 'cordon run to exit after SIGINT');
    expectNamedGone(tree.pids);
    expect(describeProcs(t.procs())).toBe('(none)');
  });

  // proves C3
  itWhere(noPython === '', 'in a terminal, Ctrl-C: the first stops gracefully, the second kills at once; exit 130', noPython, async () => {
    // A real terminal (test/helpers/terminal.py, a pseudo-terminal from python3's
    // pty module): cordon run is its foreground job, and Ctrl-C is the
    // interrupt character typed into it, so the kernel sends SIGINT to the
    // terminal's foreground process group, the command's members included.
    // The command ignores SIGINT and traps SIGTERM without exiting: only
    // cordon's escalation can end it. The interrupt grace is long (30 s) so
    // that only the second Ctrl-C can explain a quick end.
    const t = useTag();
    const script =
      'trap "" INT; trap "echo TERMED" TERM; echo "PID root $$"; setsid sleep 300 & echo "PID setsid $!"; ' +
      'sleep 300 & echo "PID bg $!"; echo READY; while :; do sleep 0.1; done';
    const term = spawnChild(
      'python3',
      [join(repoRoot, 'test', 'helpers', 'terminal.py'), '--', process.execPath, CLI, 'run', '--interrupt-grace', '30s', '--', 'sh', '-c', script],
      { env: t.env, cwd: repoRoot, stdio: ['pipe', 'pipe', 'pipe'] },
    );
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      term.once('exit', (code, signal) => resolve({ code, signal }));
    });
    const screen = capture(term.stdout);
    const err = capture(term.stderr);
    await screen.until(/^READY\r?$/m, 15_000);
    // The terminal shows \r\n line ends.
    const pids = parsePidLines(screen.text);
    expect(Object.keys(pids).sort(), screen.text).toEqual(['bg', 'root', 'setsid']);
    for (const pid of Object.values(pids)) expect(alive(pid)).toBe(true);
    // cordon run installs its signal handlers before it spawns (Node's own
    // startup handler would otherwise end it on a SIGINT as early as this):
    // READY means the handlers are there.
    const cordonPid = readStat(readStat(pids.root!)!.ppid)!.ppid;
    expect(cmdline(cordonPid)).toContain(CLI);
    // A barrier: both children have exec'd sleep. A SIGTERM that reaches a
    // child between fork and exec runs the shell's inherited trap instead, and
    // the child then sleeps on with the signal spent until the forced kill
    // (30 s here): shell semantics, not cordon's (seen on a loaded machine).
    for (const name of ['bg', 'setsid']) {
      await waitFor(() => cmdline(pids[name]!) === 'sleep 300', { timeout: 10_000, what: `the ${name} child to exec sleep`, watch: t.tag });
    }

    term.stdin!.write('INTR\n');
    await screen.until(/TERMED\r?$/m, 10_000); // (after the echoed ^C, on the same line)
    // Graceful: the trap ran and the root keeps running within the grace;
    // the rest of the tree (setsid'd member included) took the SIGTERM.
    await within(
      (async () => {
        while (alive(pids.bg!) || alive(pids.setsid!)) await new Promise((r) => setTimeout(r, 20));
      })(),
      10_000,
      'the SIGTERMed members to end',
      t.tag,
    );
    expect(alive(pids.root!), 'the root, which traps SIGTERM, is still running within the grace').toBe(true);
    expect(screen.text).not.toMatch(/PTY-EXIT/);

    const secondAt = Date.now();
    term.stdin!.write('INTR\n');
    // The watchdog stays under the 30 s grace; the bound asserted is half of it.
    await screen.until(/PTY-EXIT \d+/, 28_000);
    expect(Date.now() - secondAt, 'the second Ctrl-C forced the end, long before the 30 s grace (ms)').toBeLessThan(15_000);
    expect(screen.text, err.text).toMatch(/PTY-EXIT 130/);
    await within(exited, 10_000, 'the terminal helper to exit', t.tag);
    expect(alive(pids.root!), 'the root after the second Ctrl-C').toBe(false);
    expect(describeProcs(t.procs())).toBe('(none)');
  });

  // proves C13
  itWhere(noPython === '', 'run --pty attaches the terminal it runs in: raw keys (Ctrl-C reaches the command, not cordon), the window size, the exit status', noPython, async () => {
    // cordon run --pty in a real terminal (test/helpers/terminal.py): the
    // contained bash has a terminal of its own; what the test types into the
    // outer terminal reaches it through cordon's raw mode, and a resize of
    // the outer window is forwarded (stty size inside sees it).
    const t = useTag();
    const term = spawnChild('python3', [join(repoRoot, 'test', 'helpers', 'terminal.py'), '--', process.execPath, CLI, 'run', '--pty', '--', 'bash', '--norc', '--noprofile', '-i'], {
      env: t.env,
      cwd: repoRoot,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const exited = new Promise<{ code: number | null }>((resolve) => term.once('exit', (code) => resolve({ code })));
    const screen = capture(term.stdout);
    const type = (line: string) => term.stdin!.write(`TYPE ${line}\n`);
    // (typed at once: the terminals keep it until bash reads it)
    type('stty size; echo "A-$((6*7))"');
    await screen.until(/^A-42\r/m, watchdog(15_000));
    expect(screen.text, 'the outer terminal has no size: the default').toMatch(/^24 80\r/m);
    term.stdin!.write('SIZE 100 30\n');
    // (the resize travels: outer terminal, cordon's SIGWINCH, RESIZE, the inner terminal)
    await waitFor(
      async () => {
        type('stty size');
        await new Promise((r) => setTimeout(r, 100));
        return /^30 100\r/m.test(screen.text);
      },
      { timeout: watchdog(10_000), what: 'stty size to show the new window size', watch: t.tag },
    );
    type(`sh -c 'echo "PID f $$"; exec sleep 300'`);
    await screen.until(/^PID f \d+\r/m);
    const f = Number(/^PID f (\d+)\r/m.exec(screen.text)![1]);
    term.stdin!.write('INTR\n');
    await waitFor(() => !alive(f), { timeout: watchdog(5000), what: 'Ctrl-C to end the contained foreground job', watch: f });
    type('echo "rc=$?"');
    await screen.until(/^rc=130\r/m);
    expect(screen.text, 'cordon itself was not interrupted').not.toMatch(/PTY-EXIT/);
    type('exit 5');
    await screen.until(/PTY-EXIT \d+/, watchdog(10_000));
    expect(screen.text).toMatch(/PTY-EXIT 5/);
    await within(exited, watchdog(10_000), 'the terminal helper to exit', t.tag);
    expect(describeProcs(t.procs())).toBe('(none)');
  });

  // proves C13
  itWhere(noPython === '', "run --pty shows the tree's terminal byte for byte: CR LF once per line into a pipe and into a terminal, a bare LF left bare", noPython, async () => {
    // The tree's terminal turns each LF into CR LF (its ONLCR); cordon passes
    // that on as it is, as ssh -t and script do. Into a pipe nothing is added;
    // into a terminal (test/helpers/terminal.py, a real pseudo-terminal with
    // the default ONLCR) cordon turns the outer terminal's output processing
    // off while attached, or it would show CR CR LF, and a full-screen
    // program's bare LF (its terminal's ONLCR off) as CR LF.
    const t = useTag();
    const script = "echo a; echo b; stty -onlcr; printf 'x\\ny\\n'; stty onlcr; echo END";
    const want = 'a\r\nb\r\nx\ny\nEND\r\n';
    const piped = cli(['run', '--pty', '--', 'sh', '-c', script], t.env);
    await expectExit(piped, t, 0, 'cordon run --pty into a pipe to exit');
    expect(JSON.stringify(piped.out.text)).toBe(JSON.stringify(want));

    const term = spawnChild('python3', [join(repoRoot, 'test', 'helpers', 'terminal.py'), '--', process.execPath, CLI, 'run', '--pty', '--', 'sh', '-c', script], {
      env: t.env,
      cwd: repoRoot,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const exited = new Promise<{ code: number | null }>((resolve) => term.once('exit', (code) => resolve({ code })));
    const screen = capture(term.stdout);
    await screen.until(/PTY-EXIT \d+/, watchdog(15_000));
    await within(exited, watchdog(10_000), 'the terminal helper to exit', t.tag);
    expect(screen.text).toMatch(/PTY-EXIT 0/);
    const shown = screen.text.slice(0, screen.text.indexOf('\nPTY-EXIT'));
    expect(JSON.stringify(shown), 'what the outer terminal showed').toBe(JSON.stringify(want));
    expect(describeProcs(t.procs())).toBe('(none)');
  });

  // proves C5
  it('--report names the leftovers it terminated; --json - says the same as one JSON line on stderr', async () => {
    const t = useTag();
    const run = cli(['run', '--report', '--json', '-', '--', fixture('leaky.sh')], t.env);
    await expectExit(run, t, 0, 'cordon run --report to exit');
    const { held, free } = run.out.pids();
    expect(held).toBeGreaterThan(0);
    expect(free).toBeGreaterThan(0);
    expect(run.err.text).toMatch(/cordon: \S*leaky\.sh \(pid \d+, [\w-]+ tier\) exited with code 0 after \S+; reason: exit/);
    expect(run.err.text).toContain('cordon: 2 leftover process(es) terminated:');
    expect(run.err.text).toContain(`cordon:   pid ${held}: sleep 300`);
    expect(run.err.text).toContain(`cordon:   pid ${free}: sleep 300`);
    expect(run.err.text).toMatch(/cordon: cleanup took \S+ after the root exited/);
    const line = run.err.text.split('\n').find((l) => l.startsWith('{'));
    expect(line, run.err.text).toBeDefined();
    const report = JSON.parse(line!) as { status: number; reason: string; leftoversKept: boolean; leftovers: { pid: number }[] };
    expect([report.status, report.reason, report.leftoversKept]).toEqual([0, 'exit', false]);
    expect(report.leftovers.map((l) => l.pid).sort()).toEqual([held, free].sort());
    // Terminated before cordon exited.
    expect(alive(held), `held ${held}`).toBe(false);
    expect(alive(free), `free ${free}`).toBe(false);
    expect(describeProcs(t.procs())).toBe('(none)');
  });
});

describe('cordon run --json <file>: opened before anything runs, never through a link or into another user\'s file', () => {
  beforeAll(async () => {
    await ensureDist();
  });

  /** `cordon run --json <path> -- sh -c 'echo RAN'`: refused (exit 2) before the command runs, saying why. */
  async function refused(t: Tagged, path: string, why: RegExp): Promise<void> {
    const run = cli(['run', '--json', path, '--', 'sh', '-c', 'echo RAN'], t.env);
    await expectExit(run, t, 2, 'cordon run to refuse --json');
    expect(run.out.text, 'the command did not run').not.toContain('RAN');
    expect(run.err.text).toMatch(why);
    expect(run.err.text).toContain('nothing ran');
  }

  // proves nothing of the contract: the CLI's report file is not written through a link
  it('a report that cannot be written (its directory missing), a symbolic link: exit 2, the command not run, the link\'s target untouched', async () => {
    const t = useTag();
    await refused(t, '/nonexistent-cordon-dir/x.json', /cannot write the JSON report to \/nonexistent-cordon-dir\/x\.json: ENOENT/);
    const dir = tempDir('cordon-json-');
    const target = join(dir, 'target');
    writeFileSync(target, 'keep me\n', { mode: 0o644 });
    const link = join(dir, 'report.json');
    symlinkSync(target, link);
    await refused(t, link, /it is a symbolic link/);
    expect(readFileSync(target, 'utf8')).toBe('keep me\n');
  });

  const otherWhy = process.getuid?.() !== 0 ? 'needs a root test runner (a file of another user, made by chown)' : '';
  // proves nothing of the contract: the CLI's report file is not written into another user's file
  itWhere(otherWhy === '', "another user's existing file (0666): refused, unchanged; this user's own: written and made 0600, the command's status kept", otherWhy, async () => {
    const t = useTag();
    const dir = tempDir('cordon-json-');
    const theirs = join(dir, 'theirs.json');
    writeFileSync(theirs, 'theirs\n', { mode: 0o666 });
    chmodSync(theirs, 0o666);
    chownSync(theirs, 65534, 65534);
    await refused(t, theirs, /belongs to another user \(uid 65534\)/);
    expect(readFileSync(theirs, 'utf8')).toBe('theirs\n');

    const mine = join(dir, 'mine.json');
    writeFileSync(mine, 'old content, longer than what replaces it? no: replaced whole\n'.repeat(100), { mode: 0o644 });
    chmodSync(mine, 0o644);
    const run = cli(['run', '--json', mine, '--', 'sh', '-c', 'echo RAN; exit 3'], t.env);
    await expectExit(run, t, 3, 'cordon run to exit with the command\'s status');
    expect(run.out.text).toContain('RAN');
    expect(statSync(mine).mode & 0o777, 'the report holds command lines: 0600').toBe(0o600);
    const report = JSON.parse(readFileSync(mine, 'utf8')) as { status: number; exitCode: number };
    expect([report.status, report.exitCode]).toEqual([3, 3]);
  });
});

describe('cordon leaks', () => {
  beforeAll(async () => {
    await ensureDist();
  });

  // proves C5
  it('a leaky command: exit 23, every leaked pid listed (text and --json), and gone afterwards', async () => {
    const t = useTag();
    const json = join(tempDir('cordon-leaks-json-'), 'report.json');
    const leaks = cli(['leaks', '--wait-delay', '300ms', '--json', json, '--', fixture('leaky.sh')], t.env);
    await expectExit(leaks, t, 23, 'cordon leaks to exit');
    // The command's output was forwarded.
    expect(leaks.out.text).toMatch(/^out$/m);
    expect(leaks.err.text).toMatch(/^err$/m);
    const { held, free } = leaks.out.pids();
    expect(held).toBeGreaterThan(0);
    expect(free).toBeGreaterThan(0);
    expect(leaks.err.text).toContain('cordon: 2 process(es) leaked: still running when the command exited:');
    expect(leaks.err.text).toContain(`cordon:   pid ${held} (held the output pipes): sleep 300`);
    expect(leaks.err.text).toContain(`cordon:   pid ${free}: sleep 300`);
    expect(leaks.err.text).toContain('cordon: the leaked processes were terminated');
    // The same facts as JSON, for a CI step: the pids the fixture printed, the status, leaked.
    const report = JSON.parse(readFileSync(json, 'utf8')) as { status: number; leaked: boolean; leftovers: { pid: number; heldOutput: boolean }[]; exitCode: number };
    expect(report.status).toBe(23);
    expect(report.leaked).toBe(true);
    expect(report.exitCode).toBe(0);
    expect(report.leftovers.map((l) => [l.pid, l.heldOutput]).sort()).toEqual([[held, true], [free, false]].sort());
    expect(statSync(json).mode & 0o777, 'the report holds command lines: 0600').toBe(0o600);
    // Terminated before cordon exited.
    expect(alive(held), `held ${held}`).toBe(false);
    expect(alive(free), `free ${free}`).toBe(false);
    expect(describeProcs(t.procs())).toBe('(none)');
  });

  // proves C5
  it('a clean command: its own exit status, and no leaks reported (text and --json)', async () => {
    const t = useTag();
    const json = join(tempDir('cordon-leaks-json-'), 'report.json');
    const leaks = cli(['leaks', '--json', json, '--', 'sh', '-c', 'echo hi; exit 3'], t.env);
    await expectExit(leaks, t, 3, 'cordon leaks to exit');
    const report = JSON.parse(readFileSync(json, 'utf8')) as { status: number; leaked: boolean; leftovers: unknown[]; coverage: string };
    expect([report.status, report.leaked, report.leftovers]).toEqual([3, false, []]);
    expect(report.coverage).toBe(caps.guarantees.catchesEscapees === 'always' ? 'complete' : 'partial');
    expect(leaks.out.text).toBe('hi\n');
    // Where the tier cannot see every descendant, it says so rather than "no leaks".
    expect(leaks.err.text).toContain(
      caps.guarantees.catchesEscapees === 'always'
        ? 'cordon: no leaks: nothing outlived the command'
        : 'cordon: no leaks seen in the process group; this tier cannot see processes that left its session with a scrubbed (env -i) or unreadable environment',
    );
    expect(leaks.err.text).not.toContain('leaked');
    expect(describeProcs(t.procs())).toBe('(none)');
  });
});
