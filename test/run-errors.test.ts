// run() rejections people can read (issue #16, as execa): the message says
// the command, the reason and the last lines of stderr; `shortMessage` the
// first two. Against real commands, each tagged; the tree is gone after.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { run, type CordonError } from '../lib/index.js';
import { STDERR_TAIL_LINES } from '../lib/errors.js';
import { useTag, waitGone, within } from './helpers/procs.js';

async function rejection(promise: Promise<unknown>, tag: string): Promise<CordonError> {
  const settled = await within(promise.then(() => undefined, (e: unknown) => e), 15_000, 'run() to settle', tag);
  expect(settled, 'run() rejected').toBeDefined();
  return settled as CordonError;
}

describe('run() rejection messages', () => {
  // proves nothing of the contract: run()'s error message
  it('exit code: the command line, the reason, and only the last lines of stderr (not stdout)', async () => {
    const t = useTag();
    const script = 'echo on-stdout; i=1; while [ $i -le 30 ]; do echo "line $i" >&2; i=$((i+1)); done; exit 3';
    const e = await rejection(run('sh', ['-c', script], { env: t.env }), t.tag);
    expect(e.code).toBe('ERR_CORDON_EXIT');
    expect(e.shortMessage).toBe(`Command failed with exit code 3: sh -c '${script}'`);
    const tail = Array.from({ length: STDERR_TAIL_LINES }, (_, i) => `line ${30 - STDERR_TAIL_LINES + 1 + i}`).join('\n');
    expect(e.message).toBe(`${e.shortMessage}\n\n…\n${tail}`);
    expect(e.message.slice(e.shortMessage!.length), 'stdout is not in the message').not.toContain('on-stdout');
    expect((e as unknown as { stderr: string }).stderr).toContain('line 1\n');
    await waitGone(t, 5_000);
  });

  // proves C10: the tree is gone after a timeout
  it('timeout: says it timed out, with what stderr said so far; the tree is gone', async () => {
    const t = useTag();
    // 3 s, not less: the shell must have written its line before the timeout,
    // and a loaded machine can take a second to get it running.
    const e = await rejection(run('sh', ['-c', 'echo "warming up" >&2; sleep 300 & wait'], { env: t.env, timeout: 3000 }), t.tag);
    expect(e.code).toBe('ERR_CORDON_TIMEOUT');
    expect(e.shortMessage).toBe(`Command timed out: sh -c 'echo "warming up" >&2; sleep 300 & wait'`);
    expect(e.message).toBe(`${e.shortMessage}\n\nwarming up`);
    await waitGone(t, 5_000);
  });

  // proves nothing of the contract: run()'s error message
  it('signal: names the signal; with nothing on stderr the message is the short one', async () => {
    const t = useTag();
    const e = await rejection(run('sh', ['-c', 'kill -USR1 $$'], { env: t.env }), t.tag);
    expect(e.code).toBe('ERR_CORDON_SIGNAL');
    expect(e.shortMessage).toBe(`Command was killed by SIGUSR1: sh -c 'kill -USR1 $$'`);
    expect(e.message).toBe(e.shortMessage);
  });

  // proves nothing of the contract: run()'s error message
  it("shell mode shows the line as given; encoding 'buffer' still shows stderr as text", async () => {
    const t = useTag();
    const e = await rejection(run('echo broken >&2; exit 2', [], { shell: true, env: t.env, encoding: 'buffer' }), t.tag);
    expect(e.shortMessage).toBe('Command failed with exit code 2: echo broken >&2; exit 2');
    expect(e.message).toBe(`${e.shortMessage}\n\nbroken`);
  });

  // proves nothing of the contract: run()'s error message
  it("stderr not collected ('ignore'): the short message only", async () => {
    const t = useTag();
    const e = await rejection(run('sh', ['-c', 'echo hidden >&2; exit 1'], { env: t.env, stderr: 'ignore' }), t.tag);
    expect(e.message).toBe("Command failed with exit code 1: sh -c 'echo hidden >&2; exit 1'");
    expect(e.shortMessage).toBe(e.message);
  });
});

describe('run() options', () => {
  // proves nothing of the contract: run()'s input errors
  it('a bad input, reject or encoding, or an option run() does not take, is a typed error before anything runs (nothing left holding the host)', async () => {
    const t = useTag();
    const dir = mkdtempSync(join(tmpdir(), 'cordon-run-options-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    // The command would leave a marker file (a command that lives milliseconds
    // is easily missed by a process walk; its file is not).
    const marker = join(dir, 'ran');
    const bad: Array<[Record<string, unknown>, string, RegExp]> = [
      [{ input: 42 }, 'ERR_INVALID_ARG_TYPE', /input/],
      [{ input: { text: 'x' } }, 'ERR_INVALID_ARG_TYPE', /input/],
      [{ reject: 'yes' }, 'ERR_INVALID_ARG_TYPE', /reject/],
      [{ encoding: 'nope' }, 'ERR_INVALID_ARG_VALUE', /encoding/],
      // run()'s own list: its options, then spawn()'s.
      [{ maxBufer: 1024 }, 'ERR_INVALID_ARG_VALUE', /^Unknown option "maxBufer" \(did you mean "maxBuffer"\?\)\. Nothing ran\. Known options: input, inputFile, maxBuffer, reject, encoding, stripFinalNewline, stdin, stdout, stderr, all, cwd, env, stdio,/],
    ];
    for (const [options, code, what] of bad) {
      const e = await rejection(run('sh', ['-c', `touch '${marker}'; cat`], { env: t.env, ...options } as never), t.tag);
      expect(e.code, JSON.stringify(options)).toBe(code);
      expect(e.message, JSON.stringify(options)).toMatch(what);
    }
    expect(existsSync(marker), 'a command ran').toBe(false);
    expect(t.procs()).toEqual([]);
  });

  // proves nothing of the contract: run()'s argument order
  it('options in second place, as Node and execa take them: run(file, options)', async () => {
    const t = useTag();
    const r = await within(run('cat', { env: t.env, input: 'fed through stdin' }), 15_000, 'run(file, options)', t.tag);
    expect(r.stdout).toBe('fed through stdin');
    expect(r.exitCode).toBe(0);
    await waitGone(t, 5_000);
  });
});
