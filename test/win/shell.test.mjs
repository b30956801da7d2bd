// Shell mode on Windows (issue #16): shell: true runs one line through the
// system's cmd.exe (`cmd.exe /d /s /c "<line>"`, the line verbatim), contained
// like any command; the tree it starts is ended whole. Pids come from the
// fixture's output; liveness is process.kill(pid, 0) from here.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertCmdTreeEndsWhole, cordon, track, treeArgs, within } from './helpers.mjs';

test('shell: true runs a cmd.exe line: &&, quotes kept, the exit code of the line', async (ctx) => {
  track(ctx);
  const r = await within(cordon.run('echo one&& echo "two words"& exit /b 3', [], { shell: true, reject: false }), 20000, 'run(shell)');
  assert.equal(r.stdout, 'one\r\n"two words"\r\n');
  assert.equal(r.exitCode, 3);
  const named = await within(cordon.run('echo %CORDON_SHELL_WORD%', [], { shell: 'cmd.exe', env: { CORDON_SHELL_WORD: 'expanded' } }), 20000, 'run(cmd.exe)');
  assert.equal(named.stdout, 'expanded\r\n');
});

test('a line that starts a tree (cmd -> node -> detached grandchild) is ended whole', async (ctx) => {
  const t = track(ctx);
  const line = `"${process.execPath}" ${treeArgs('--detached', '1').map((a) => `"${a}"`).join(' ')}`;
  await assertCmdTreeEndsWhole(t, t.proc(cordon.spawn(line, [], { shell: true, stdio: ['ignore', 'pipe', 'ignore'] })));
});

test('arguments, CR/LF and shells other than cmd.exe are typed errors before anything runs', () => {
  assert.throws(() => cordon.spawn('echo', ['x'], { shell: true }), (e) => e.code === 'ERR_INVALID_ARG_VALUE' && e.isLaunchFailure);
  assert.throws(() => cordon.spawn('echo a\r\necho b', [], { shell: true }), (e) => e.code === 'ERR_INVALID_ARG_VALUE');
  assert.throws(() => cordon.spawn('Get-Date', [], { shell: 'powershell' }), (e) => e.code === 'ERR_CORDON_UNSUPPORTED');
});
