// Windows command lines: a cmd.exe tree is contained and ended whole; a .cmd
// found through PATH and PATHEXT runs; arguments arrive exactly as Node's own
// child_process delivers them (and, through a .cmd, those a .cmd may receive).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { test } from 'node:test';
import { assertCmdTreeEndsWhole, cordon, fixtures, join, track, treeArgs, within } from './helpers.mjs';

const TRICKY = ['plain', 'two words', '', ' ', 'quote"inside', '"', '\\', 'trail\\', 'trail\\\\', 'a\\"b', 'a\\\\"b', '\\\\server\\share', 'tab\there', 'x&y|z', '<>^', '%PATH%', '!bang!', 'é中𝄞', "it's", '--flag=a b'];
// What a .cmd may receive (README): arguments without " % ! CR LF, and no
// trailing backslash on one that needs quotes; others are refused before
// anything runs (security.test.mjs covers both sides).
const CMD_SAFE = ['plain', 'two words', 'x&y|z', '<>^', '(p)', 'trail\\', "it's", '--flag=a b'];

// proves nothing of the contract: Windows argument quoting
test('tricky arguments arrive as with child_process.spawn', async (ctx) => {
  track(ctx);
  const echo = join(fixtures, 'echo-args.mjs');
  const expected = JSON.parse(execFileSync(process.execPath, [echo, ...TRICKY], { encoding: 'utf8' }));
  assert.deepEqual(expected, TRICKY, 'Node itself round-trips these');
  const r = await within(cordon.run(process.execPath, [echo, ...TRICKY]), 15000, 'run()');
  assert.deepEqual(JSON.parse(r.stdout), expected);
});

// proves nothing of the contract: the Windows command lookup
test('a .cmd is found through PATH and PATHEXT and gets its arguments', async (ctx) => {
  const t = track(ctx);
  const dir = t.tmp();
  writeFileSync(join(dir, 'echo-args.cmd'), `@"${process.execPath}" "${join(fixtures, 'echo-args.mjs')}" %*\r\n`);
  const env = { ...process.env, PATH: `${dir};${process.env.PATH ?? ''}` };
  for (const arg of CMD_SAFE) {
    const r = await within(cordon.run('echo-args', [arg], { env }), 15000, `run(echo-args ${arg})`);
    assert.deepEqual(JSON.parse(r.stdout), [arg], `argument ${JSON.stringify(arg)}`);
  }
});

// proves nothing of the contract: the Windows command lookup
test('PATHEXT: a foo.py earlier in PATH does not shadow a foo.cmd (only what CreateProcessW runs is tried)', async (ctx) => {
  const t = track(ctx);
  const first = t.tmp();
  const second = t.tmp();
  writeFileSync(join(first, 'shadow-probe.py'), 'print("the script ran")\r\n');
  writeFileSync(join(second, 'shadow-probe.cmd'), '@echo found-the-cmd\r\n');
  const env = { ...process.env, PATH: `${first};${second};${process.env.PATH ?? ''}`, PATHEXT: '.PY;.JS;.COM;.EXE;.BAT;.CMD' };
  const r = await within(cordon.run('shadow-probe', [], { env }), 15000, 'run(shadow-probe)');
  assert.equal(r.stdout.trim(), 'found-the-cmd');
});

// proves C3
test('a cmd.exe tree (cmd -> node -> detached grandchild) is ended whole', async (ctx) => {
  const t = track(ctx);
  const dir = t.tmp();
  const script = join(dir, 'tree.cmd');
  writeFileSync(script, `@"${process.execPath}" ${treeArgs('--detached', '1').map((a) => `"${a}"`).join(' ')}\r\n`);
  await assertCmdTreeEndsWhole(t, t.proc(cordon.spawn(script, [], { stdio: ['ignore', 'pipe', 'ignore'] })));
});

// proves C6 (own report): a launch failure's code
test('a missing command is ENOENT before anything runs', () => {
  assert.throws(() => cordon.spawn('no-such-command-here', []), (err) => err.code === 'ENOENT' && err.isLaunchFailure);
});
