// Windows security (issue 11): batch-file argument injection (BatBadBut,
// CVE-2024-24576 / CVE-2024-27980), the trailing dot/space name bypass
// (CVE-2024-43402 class), command lookup in the current directory (Go's
// exec.ErrDot), and the tree's Job Object opened from inside the tree.
// Observed from outside cordon: what a batch file echoes, whether a marker
// file an injected command would write exists, pids a fixture prints.
import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { test } from 'node:test';
import { alive, anchorReport, cordon, existsSync, fixtures, join, nativeFixture, pkgDir, readUntilReady, track, waitGone, within } from './helpers.mjs';

// A batch file that re-parses its arguments three ways: %* echoed, %* split
// by `for` (%%~a strips the quotes), and %* handed on through `call`.
const SHOW = [
  '@echo off',
  'echo [%*]',
  'for %%a in (%*) do echo {%%~a}',
  'call :show %*',
  'goto :eof',
  ':show',
  'echo call[%*]',
  '',
].join('\r\n');

// What an injected command would create in the batch file's directory.
const MARKER = 'pwned.txt';

/** Arrive literally: %~1 is the argument, %* holds it bare or in double quotes. */
const LITERAL = [
  'plain',
  'two words',
  '',
  ' ',
  'x&y',
  'a|b',
  '<in',
  'out>',
  'c^d',
  '(p)',
  ')',
  'semi;colon',
  'a,b',
  'eq=x',
  '--flag=a b',
  'trail\\',
  'C:\\dir\\',
  "it's",
  `& echo pwned > ${MARKER}`,
  `&& echo pwned > ${MARKER} & rem`,
  `| echo pwned > ${MARKER}`,
  `) & echo pwned > ${MARKER}`,
  `^& echo pwned > ${MARKER}`,
];

/** Refused before anything runs (ERR_CORDON_UNSAFE_BATCH_ARG). */
const REFUSED = [
  'quote"inside',
  '"',
  `x"&echo pwned>${MARKER}&"`,
  `"& echo pwned > ${MARKER} & "`,
  `\\"&echo pwned>${MARKER}&rem `,
  `^"&echo pwned>${MARKER}&rem `,
  '%PATH%',
  '100%',
  `%CMDCMDLINE:~0,1%&echo pwned>${MARKER}&rem `,
  '!bang!',
  `cr\r&echo pwned>${MARKER}`,
  `lf\necho pwned>${MARKER}`,
  'a b\\',
  'two words\\\\',
];

const bare = (a) => /^[A-Za-z0-9#$*+\-./:?@\\_]+$/.test(a);

async function attempt(cmd, args, opts) {
  let proc;
  try {
    proc = cordon.spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    return { refused: err };
  }
  const out = [];
  const errOut = [];
  proc.stdout.setEncoding('utf8').on('data', (d) => out.push(d));
  proc.stderr.setEncoding('utf8').on('data', (d) => errOut.push(d));
  const result = await within(proc.result.catch((e) => e), 20000, `${cmd} ${JSON.stringify(args)}`, [proc.anchorPid]);
  return { result, stdout: out.join(''), stderr: errOut.join('') };
}

// proves nothing of the contract: batch-file argument injection (threat model, no clause)
test('batch file: each argument reaches %* literally or is refused before anything runs', async (ctx) => {
  const t = track(ctx);
  const dir = t.tmp();
  const bat = join(dir, 'show.cmd');
  writeFileSync(bat, SHOW);
  const ran = [];
  for (const arg of [...LITERAL, ...REFUSED]) ran.push({ arg, ...(await attempt(bat, [arg], { cwd: dir })) });
  // First what matters most: no payload ran a command of its own.
  assert.equal(existsSync(join(dir, MARKER)), false, 'an injected command wrote the marker file');
  for (const r of ran) {
    const what = JSON.stringify(r.arg);
    if (REFUSED.includes(r.arg)) {
      assert.ok(r.refused, `${what} ran (stdout ${JSON.stringify(r.stdout)}) instead of being refused`);
      assert.equal(r.refused.code, 'ERR_CORDON_UNSAFE_BATCH_ARG', `${what}: ${r.refused.message}`);
      assert.equal(r.refused.isLaunchFailure, true);
      continue;
    }
    assert.ok(!r.refused, `${what} was refused: ${r.refused?.message}`);
    const q = bare(r.arg) ? r.arg : `"${r.arg}"`;
    const lines = r.stdout.split('\r\n').filter((l, i, all) => l !== '' || i < all.length - 1);
    assert.equal(lines[0], `[${q}]`, `${what}: %* (stdout ${JSON.stringify(r.stdout)}, stderr ${JSON.stringify(r.stderr)})`);
    assert.deepEqual(lines.slice(1, -1), [`{${r.arg}}`], `${what}: for %%~a (stdout ${JSON.stringify(r.stdout)})`);
    // CALL doubles quoted carets on Windows (cmd.exe's rule); Wine's cmd does not.
    assert.equal(lines.at(-1).replace(/\^\^/g, '^'), `call[${q}]`, `${what}: call (stdout ${JSON.stringify(r.stdout)})`);
    assert.equal(r.result.exitCode, 0, `${what}: exit`);
  }
});

// proves nothing of the contract: batch-file arguments
test('batch file: a program behind a .cmd shim gets the allowed arguments exactly', async (ctx) => {
  const t = track(ctx);
  const dir = t.tmp();
  const shim = join(dir, 'echo-args.cmd');
  writeFileSync(shim, `@"${process.execPath}" "${join(fixtures, 'echo-args.mjs')}" %*\r\n`);
  const args = ['plain', 'two words', '', 'x&y|z', '<>^', '(p)', 'trail\\', 'C:\\dir\\', "it's", 'é中𝄞', `& echo pwned > ${MARKER}`];
  const r = await within(cordon.run(shim, args, { cwd: dir }), 20000, 'run(echo-args.cmd)');
  assert.deepEqual(JSON.parse(r.stdout), args);
  assert.equal(existsSync(join(dir, MARKER)), false);
});

// proves nothing of the contract: batch-file name bypasses (threat model, no clause)
test('batch file: a trailing dot, space or ::$DATA does not escape the batch rules', async (ctx) => {
  const t = track(ctx);
  const dir = t.tmp();
  writeFileSync(join(dir, 'show.bat'), SHOW);
  // Also a file literally named `show.bat.` (only a \\?\ path can make one):
  // Node's fs, which uses \\?\ paths, then finds the name as given.
  writeFileSync(`\\\\?\\${join(dir, 'show.bat.')}`, SHOW);
  const payload = `a"&echo pwned>${MARKER}&"`;
  const safe = `a&echo pwned>${MARKER}`;
  for (const name of ['show.bat.', 'show.bat ', 'show.bat. .', 'show.bat::$DATA', 'SHOW.BAT..']) {
    const cmd = join(dir, name);
    const bad = await attempt(cmd, [payload], { cwd: dir });
    assert.equal(existsSync(join(dir, MARKER)), false, `${JSON.stringify(name)}: an injected command ran (stdout ${JSON.stringify(bad.stdout)})`);
    assert.equal(bad.refused?.code, 'ERR_CORDON_UNSAFE_BATCH_ARG', `${JSON.stringify(name)}: not refused (${bad.refused?.message ?? bad.stdout})`);
    const ok = await attempt(cmd, [safe], { cwd: dir });
    assert.ok(!ok.refused, `${JSON.stringify(name)}: ${ok.refused?.message}`);
    assert.equal(ok.stdout.split('\r\n')[0], `["${safe}"]`, `${JSON.stringify(name)} runs as show.bat`);
    assert.equal(existsSync(join(dir, MARKER)), false);
  }
  assert.throws(() => cordon.spawn(join(dir, 'show.bat:evil'), []), (err) => err.code === 'ERR_CORDON_BAD_COMMAND_NAME' && err.isLaunchFailure);
});

/** The environment with PATH (under whatever case the host spells it) replaced. */
function withPath(path) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.toUpperCase() !== 'PATH'));
  return { ...env, PATH: path };
}

// proves nothing of the contract: command lookup in the current directory (threat model, no clause)
test('lookup: a bare name never runs a file in the current directory', async (ctx) => {
  const t = track(ctx);
  const cwd = t.tmp();
  const bin = t.tmp();
  writeFileSync(join(cwd, 'tool.cmd'), '@echo cwd\r\n');
  writeFileSync(join(cwd, 'both.cmd'), '@echo cwd\r\n');
  writeFileSync(join(bin, 'both.cmd'), '@echo path\r\n');
  const env = withPath(`${bin};${process.env.PATH ?? process.env.Path ?? ''}`);
  // Only in cwd: a typed error before anything runs, naming the explicit form.
  assert.throws(
    () => cordon.spawn('tool', [], { cwd, env }),
    (err) => err.code === 'ERR_CORDON_CWD_LOOKUP' && err.isLaunchFailure && err.message.includes('.\\tool'),
  );
  // In cwd and on PATH: the PATH one.
  const both = await within(cordon.run('both', [], { cwd, env }), 20000, 'run(both)');
  assert.equal(both.stdout.trim(), 'path');
  // Explicitly from cwd: runs.
  const explicit = await within(cordon.run('.\\tool', [], { cwd, env }), 20000, 'run(.\\tool)');
  assert.equal(explicit.stdout.trim(), 'cwd');
  // An empty or relative PATH entry does not reach cwd either.
  for (const path of [`;${bin}`, `.;${bin}`, `sub;${bin}`]) {
    assert.throws(
      () => cordon.spawn('tool', [], { cwd, env: withPath(path) }),
      (err) => err.code === 'ERR_CORDON_CWD_LOOKUP',
      `PATH=${path}`,
    );
  }
  const sub = join(cwd, 'rel');
  mkdirSync(sub);
  writeFileSync(join(sub, 'reltool.cmd'), '@echo rel\r\n');
  assert.throws(
    () => cordon.spawn('reltool', [], { cwd, env: withPath(`rel;${bin}`) }),
    (err) => err.code === 'ENOENT',
    'a relative PATH entry is not searched',
  );
});

/** Lines of a fixture's stdout until READY (bounded). */
function readLines(stream, t, ms = 30000) {
  const onLine = (line) => {
    const m = /^(?:PID \S+|BREAKAWAY) (\d+)$/.exec(line);
    if (m) t.add(Number(m[1]));
  };
  return readUntilReady(stream, ms, onLine, 'job-escape.exe to print READY');
}

const { exe: escapeExe, skip: noEscapeExe } = nativeFixture('job-escape');

// proves C1: no member opens the job or breaks away from containment
test('job: a tree member cannot open the job by any name nor break away', { skip: noEscapeExe }, async (ctx) => {
  const t = track(ctx);
  const proc = t.proc(cordon.spawn(escapeExe, [], { stdio: ['ignore', 'pipe', 'ignore'] }));
  const lines = await readLines(proc.stdout, t);
  const rootPid = Number(/^PID root (\d+)$/.exec(lines[0])?.[1]);
  ctx.diagnostic(lines.join(' | '));
  const opened = lines.filter((l) => l.startsWith('OPENED '));
  assert.deepEqual(opened, [], 'a member opened a job by name');
  assert.ok(!lines.some((l) => l.startsWith('NAME ') && l.includes('on the parent')), 'the anchor names the job on its command line');
  const broke = lines.find((l) => l.startsWith('BREAKAWAY '));
  assert.equal(broke, undefined, 'a member started a process outside the job');
  assert.ok(lines.some((l) => l.startsWith('NOBREAKAWAY ')));
  await within(proc.terminate({ grace: 0 }), 15000, 'terminate()', [rootPid]);
  await waitGone([rootPid], 5000);
  assert.equal(alive(rootPid), false);
});

/** The anchor driven directly: its first report (READY, EXECFAIL or NOCONTAIN line). */
const anchorFirstReport = async (t, cwd, command) => (await anchorReport(t, cwd, [], command)).line;

// proves nothing of the contract: the anchor's command name rules (threat model, no clause)
test('anchor: runs only a fully qualified, canonical name, and refuses what a .cmd may not receive', async (ctx) => {
  const t = track(ctx);
  const dir = t.tmp();
  writeFileSync(join(dir, 'show.cmd'), SHOW);
  writeFileSync(join(dir, 'show.bat'), SHOW);
  // The anchors run in the shared temp dir, never in `dir`: under Wine, a
  // directory an anchor was started in has been seen to stay busy (EBUSY on
  // rmdir) after the anchor exited. The relative name's file is there too.
  const here = tmpdir();
  const rel = `cordon-rel-${process.pid}-${Date.now()}.cmd`;
  writeFileSync(join(here, rel), SHOW);
  rmSync(join(here, MARKER), { force: true }); // (left by an earlier failing run)
  ctx.after(() => {
    rmSync(join(here, rel), { force: true });
    rmSync(join(here, MARKER), { force: true });
  });
  // A relative name would be found by CreateProcessW's own search (cwd first).
  assert.equal(await anchorFirstReport(t, here, [rel, rel, 'x']), 'EXECFAIL 22');
  assert.equal(await anchorFirstReport(t, here, [join(dir, 'show.bat.'), 'show.bat.', 'x']), 'EXECFAIL 22');
  for (const arg of [`a"&echo pwned>${MARKER}&"`, `%CMDCMDLINE:~0,1%&echo pwned>${MARKER}`, 'cr\rx', 'a b\\']) {
    assert.equal(await anchorFirstReport(t, here, [join(dir, 'show.cmd'), 'show.cmd', arg]), 'EXECFAIL 22', JSON.stringify(arg));
  }
  assert.equal(existsSync(join(here, MARKER)), false, 'an injected command wrote the marker file');
  const ready = await anchorFirstReport(t, here, [join(dir, 'show.cmd'), 'show.cmd', 'a&b']);
  assert.match(ready, /^READY \d+ job-object/);
  // Control EOF ended the tree: the root is gone.
  await waitGone([Number(ready.split(' ')[1])], 10000);
});
