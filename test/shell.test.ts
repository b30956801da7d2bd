// Shell mode (issue #16): one command string run through a shell, contained
// like any command. Observed from outside: what the command printed, the
// shell's own /proc/<pid>/cmdline, and that a terminated shell line leaves no
// tagged process.
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { run, spawn } from '../lib/index.js';
import { shellLaunch, shellOption } from '../lib/shell.js';
import { capture } from './helpers/fixtures.js';
import { alive, useTag, waitGone, within } from './helpers/procs.js';
import { itWhere } from './helpers/tier.js';

describe('shell: true runs a command string through /bin/sh -c', () => {
  // proves nothing of the contract: the shell option
  it('the root is /bin/sh -c <the string>, as the kernel has it', async () => {
    const t = useTag();
    // ps, not /proc: the same on Linux and macOS (the kernel's arguments, blank-joined).
    const line = 'ps -ww -o args= -p $$';
    const result = await within(run(line, [], { shell: true, env: t.env }), 10_000, 'run', t.tag);
    expect(result.stdout.trimEnd()).toBe(`/bin/sh -c ${line}`);
  });

  // proves nothing of the contract: the shell option
  it('&&, pipes, variables and redirections work; the root is the shell', async () => {
    const t = useTag({ WORD: 'contained' });
    const proc = spawn('echo "PID root $$"; echo one && echo "$WORD" | tr a-z A-Z; echo err >&2', [], { shell: true, env: t.env });
    const out = capture(proc.stdout);
    const err = capture(proc.stderr);
    const pid = await within(proc.started, 10_000, 'the shell to start', t.tag);
    const result = await within(proc.result, 10_000, 'the shell line to finish', t.tag);
    expect(result.exitCode).toBe(0);
    expect(out.text).toBe(`PID root ${pid}\none\nCONTAINED\n`);
    expect(err.text).toBe('err\n');
    expect(result.command).toBe('echo "PID root $$"; echo one && echo "$WORD" | tr a-z A-Z; echo err >&2');
  });

  // proves nothing of the contract: the shell option's arguments
  it('arguments reach the shell as "$@": each one literal word, never parsed', async () => {
    const t = useTag();
    const args = ['a b', '$HOME', "it's", '; touch /tmp/cordon-shell-injected', '*'];
    const result = await within(run('printf "[%s]\\n"', args, { shell: true, env: t.env }), 10_000, 'run', t.tag);
    expect(result.stdout).toBe(args.map((a) => `[${a}]`).join('\n'));
    expect(existsSync('/tmp/cordon-shell-injected')).toBe(false);
  });

  // proves C3
  it('a background job started by the shell line is contained: terminate() ends the whole tree', async () => {
    const t = useTag();
    const proc = spawn('sleep 300 & echo "PID child $!"; echo "PID root $$"; wait', [], { shell: true, env: t.env, stdio: ['ignore', 'pipe', 'ignore'] });
    const out = capture(proc.stdout);
    await out.until(/PID root \d+/);
    const pids = out.pids();
    expect(alive(pids.child!)).toBe(true);
    await within(proc.terminate({ grace: 1000 }), 10_000, 'terminate', t.tag);
    expect(alive(pids.child!)).toBe(false);
    expect(alive(pids.root!)).toBe(false);
    await waitGone(t, 5_000);
  });

  // proves C6
  it("a nonzero exit of the line is the result's exit code", async () => {
    const t = useTag();
    const result = await within(run('exit 7', [], { shell: true, env: t.env, reject: false }), 10_000, 'run', t.tag);
    expect(result.exitCode).toBe(7);
  });
});

describe('shell: a named shell', () => {
  // proves nothing of the contract: the shell option
  itWhere(existsSync('/bin/bash'), "shell: '/bin/bash' runs the line with bash", 'no /bin/bash on this machine', async () => {
    const t = useTag();
    const result = await within(run('echo "${BASH_VERSION:+bash}" $((6*7))', [], { shell: '/bin/bash', env: t.env }), 10_000, 'run', t.tag);
    expect(result.stdout).toBe('bash 42');
  });

  // proves nothing of the contract: the shell option's input errors
  it('a shell that does not exist is ENOENT before anything runs; bad values are typed errors', () => {
    const t = useTag();
    expect(() => spawn('echo hi', [], { shell: 'no-such-shell-cordon', env: t.env })).toThrow(expect.objectContaining({ code: 'ENOENT', stage: 'launch' }));
    expect(() => spawn('echo hi', [], { shell: 1 as never, env: t.env })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
    expect(() => spawn('echo hi', [], { shell: '', env: t.env })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }));
    expect(t.procs()).toEqual([]);
  });

  // proves nothing of the contract: the shell option on Windows, decided before anything runs
  it('Windows (decided before anything runs; run under Wine by test/win/shell.test.mjs): cmd.exe only, one line, no args', () => {
    for (const value of [true, 'cmd', 'cmd.exe', 'C:\\Windows\\System32\\CMD.EXE']) expect(shellOption(value, 'win32')).toEqual({ kind: 'cmd', path: 'cmd.exe' });
    for (const value of ['powershell', 'pwsh.exe', 'bash']) {
      expect(() => shellOption(value, 'win32')).toThrow(expect.objectContaining({ code: 'ERR_CORDON_UNSUPPORTED', stage: 'input' }));
    }
    expect(shellOption(false, 'win32')).toBeUndefined();
    const cmd = shellOption(true, 'win32')!;
    expect(shellLaunch(cmd, 'echo a && echo b', [])).toEqual({ command: 'cmd.exe', args: ['echo a && echo b'] });
    expect(() => shellLaunch(cmd, 'echo', ['x'])).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }));
    expect(() => shellLaunch(cmd, 'echo a\r\necho b', [])).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }));
  });
});
