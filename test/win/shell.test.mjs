// Shell mode on Windows (issue #16): shell: true runs one line through the
// system's cmd.exe (`cmd.exe /d /v:OFF /s /c "<line>"`, the line verbatim), contained
// like any command; the tree it starts is ended whole. Pids come from the
// fixture's output; liveness is alive() from here (pid and creation time).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { assertCmdTreeEndsWhole, cordon, track, treeArgs, within } from './helpers.mjs';

// proves nothing of the contract: the shell option on Windows
test('shell: true runs a cmd.exe line: &&, quotes kept, the exit code of the line', async (ctx) => {
  track(ctx);
  const r = await within(cordon.run('echo one&& echo "two words"& exit /b 3', [], { shell: true, reject: false }), 20000, 'run(shell)');
  assert.equal(r.stdout, 'one\r\n"two words"'); // the final newline stripped (stripFinalNewline)
  assert.equal(r.exitCode, 3);
  const named = await within(cordon.run('echo %CORDON_SHELL_WORD%', [], { shell: 'cmd.exe', env: { CORDON_SHELL_WORD: 'expanded' } }), 20000, 'run(cmd.exe)');
  assert.equal(named.stdout, 'expanded');
});

// proves C3
test('a line that starts a tree (cmd -> node -> detached grandchild) is ended whole', async (ctx) => {
  const t = track(ctx);
  const line = `"${process.execPath}" ${treeArgs('--detached', '1').map((a) => `"${a}"`).join(' ')}`;
  await assertCmdTreeEndsWhole(t, t.proc(cordon.spawn(line, [], { shell: true, stdio: ['ignore', 'pipe', 'ignore'] })));
});

// proves nothing of the contract: the shell option's input errors
test('arguments, CR/LF and shells other than cmd.exe are typed errors before anything runs', () => {
  assert.throws(() => cordon.spawn('echo', ['x'], { shell: true }), (e) => e.code === 'ERR_INVALID_ARG_VALUE' && e.isLaunchFailure);
  assert.throws(() => cordon.spawn('echo a\r\necho b', [], { shell: true }), (e) => e.code === 'ERR_INVALID_ARG_VALUE');
  assert.throws(() => cordon.spawn('Get-Date', [], { shell: 'powershell' }), (e) => e.code === 'ERR_CORDON_UNSUPPORTED');
});

// /v:OFF: with delayed expansion turned on for the user (the registry's
// DelayedExpansion, which cmd.exe reads at start), a plain cmd.exe expands
// !VAR!; the line cordon runs keeps `!` literal. The setting is this test's
// and is removed when it ends (reg.exe, never through cordon).
// proves nothing of the contract: the shell option's delayed expansion
test('shell: true keeps ! literal even where the registry turns delayed expansion on (/v:OFF)', async (ctx) => {
  track(ctx);
  const key = 'HKCU\\Software\\Microsoft\\Command Processor';
  const reg = (...args) => execFileSync(join(process.env.SystemRoot ?? 'C:\\windows', 'System32', 'reg.exe'), args, { stdio: 'ignore' });
  reg('add', key, '/v', 'DelayedExpansion', '/t', 'REG_DWORD', '/d', '1', '/f');
  ctx.after(() => reg('delete', key, '/v', 'DelayedExpansion', '/f'));
  const env = { ...process.env, CORDON_BANG: 'expanded' };
  const plain = execFileSync(join(process.env.SystemRoot ?? 'C:\\windows', 'System32', 'cmd.exe'), ['/d', '/s', '/c', '"echo [!CORDON_BANG!]"'], { env, encoding: 'utf8', windowsVerbatimArguments: true });
  if (plain.trim() !== '[expanded]') {
    ctx.skip(`this cmd.exe does not take DelayedExpansion from the registry (a plain cmd.exe printed ${JSON.stringify(plain.trim())}), so /v:OFF cannot be told apart here`);
    return;
  }
  const r = await within(cordon.run('echo [!CORDON_BANG!]', [], { shell: true, env }), 20000, 'run(shell) with !');
  assert.equal(r.stdout, '[!CORDON_BANG!]');
});
