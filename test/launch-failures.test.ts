// CONTRACT C1 (nothing runs outside containment; a launch that cannot happen
// is a typed error before anything ran) and C6 (launch failures are
// classified): bad commands, bad working directories, NUL bytes and invalid
// option values are thrown synchronously by spawn() as CordonErrors with the
// right code and a message saying what to do, rejected (asynchronously) by
// run() with the same code, and leave nothing running. A failure the
// pre-check cannot see (exec of a script whose interpreter is missing) rejects
// `started` and `result`.
import { spawn as spawnChild } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { join } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { describe, expect, it, onTestFinished } from 'vitest';
import { run, spawn, type CordonError, type SpawnOptions } from '../lib/index.js';
import { anchorPath } from '../lib/native.js';
import { expectCordonError, rejected } from './helpers/assert.js';
import { useTag, within, type Tagged } from './helpers/procs.js';
import { tempDir } from './helpers/registry.js';
import { outcome } from './helpers/trees.js';
import { onlyWhere } from './helpers/requirements.js';

interface Case {
  name: string;
  /** The command, args and options, built with this test's tag env. */
  make: (t: Tagged, dir: string) => { command: string; args: string[]; options: SpawnOptions };
  code: string;
  /** Where run() rejects with another code than spawn() throws. */
  runCode?: string;
  syscall?: string;
  /** The message says what to do. */
  message: RegExp;
}

const cases: Case[] = [
  {
    name: 'missing command',
    make: (t) => ({ command: 'cordon-no-such-command-here', args: [], options: { env: t.env } }),
    code: 'ENOENT',
    message: /not found.*(check|pass)/i,
  },
  {
    name: 'missing command by path',
    make: (t, dir) => ({ command: join(dir, 'missing'), args: [], options: { env: t.env } }),
    code: 'ENOENT',
    message: /not found.*(check|pass)/i,
  },
  {
    name: 'non-executable file (mode 0644)',
    make: (t, dir) => {
      const path = join(dir, 'not-executable.sh');
      writeFileSync(path, '#!/bin/sh\nsleep 300\n');
      chmodSync(path, 0o644);
      return { command: path, args: [], options: { env: t.env } };
    },
    code: 'EACCES',
    message: /not executable.*(chmod|permission)/i,
  },
  {
    name: 'a directory as the command',
    make: (t, dir) => {
      const path = join(dir, 'a-directory');
      mkdirSync(path, { recursive: true });
      return { command: path, args: [], options: { env: t.env } };
    },
    code: 'EACCES',
    message: /(directory|permission)/i,
  },
  {
    name: 'missing cwd',
    make: (t, dir) => ({ command: 'sh', args: ['-c', 'sleep 300'], options: { env: t.env, cwd: join(dir, 'no-such-dir') } }),
    code: 'ENOENT',
    syscall: 'chdir',
    message: /pass an existing directory/i,
  },
  {
    name: 'cwd that is a file',
    make: (t, dir) => {
      const path = join(dir, 'a-file');
      writeFileSync(path, 'x');
      return { command: 'sh', args: ['-c', 'sleep 300'], options: { env: t.env, cwd: path } };
    },
    code: 'ENOTDIR',
    syscall: 'chdir',
    message: /pass an existing directory/i,
  },
  {
    name: 'NUL byte in an argument',
    make: (t) => ({ command: 'sh', args: ['-c', 'sleep 300\0; echo hi'], options: { env: t.env } }),
    code: 'ERR_INVALID_ARG_VALUE',
    message: /NUL/,
  },
  {
    name: 'NUL byte in the command',
    make: (t) => ({ command: 'sh\0x', args: ['-c', 'sleep 300'], options: { env: t.env } }),
    code: 'ERR_INVALID_ARG_VALUE',
    message: /NUL/,
  },
  {
    name: 'NUL byte in an env value',
    make: (t) => ({ command: 'sh', args: ['-c', 'sleep 300'], options: { env: { ...t.env, BAD: 'a\0b' } } }),
    code: 'ERR_INVALID_ARG_VALUE',
    message: /NUL/,
  },
  {
    name: "an env key holding '=' (it would set another variable: PATH)",
    make: (t) => ({ command: 'sh', args: ['-c', 'sleep 300'], options: { env: { ...t.env, 'PATH=/nonexistent:/usr/bin:/bin;': '1' } } }),
    code: 'ERR_INVALID_ARG_VALUE',
    message: /"env" must be names without '='/,
  },
  {
    name: 'an empty env key',
    make: (t) => ({ command: 'sh', args: ['-c', 'sleep 300'], options: { env: { ...t.env, '': 'x' } } }),
    code: 'ERR_INVALID_ARG_VALUE',
    message: /"env" must be names without '='/,
  },
  ...(
    [
      ['grace: -1', { grace: -1 }, 'ERR_INVALID_ARG_VALUE', /"grace" must be/],
      ["grace: 'x'", { grace: 'x' }, 'ERR_INVALID_ARG_VALUE', /grace takes a duration with its unit/],
      ['grace: true', { grace: true }, 'ERR_INVALID_ARG_TYPE', /"grace" must be/],
      ["leftovers: 'maybe'", { leftovers: 'maybe' }, 'ERR_INVALID_ARG_VALUE', /"leftovers" must be one of/],
      ['waitDelay: NaN', { waitDelay: NaN }, 'ERR_INVALID_ARG_VALUE', /"waitDelay" must be/],
      ['timeout: Infinity', { timeout: Infinity }, 'ERR_INVALID_ARG_VALUE', /"timeout" must be/],
      ["stdio: 'bogus'", { stdio: 'bogus' }, 'ERR_INVALID_ARG_VALUE', /"stdio" must be/],
      ['a stream without a descriptor in stdio', { stdio: ['pipe', new PassThrough(), 'pipe'] }, 'ERR_INVALID_ARG_VALUE', /"stdio\[1\]" must be a stream with an open file descriptor/],
      ['an unknown option', { gracePeriod: 1000 }, 'ERR_INVALID_ARG_VALUE', /unknown option.*gracePeriod.*known options/i],
      ['a misspelt option', { timout: 1000 }, 'ERR_INVALID_ARG_VALUE', /Unknown option "timout" \(did you mean "timeout"\?\)/],
      ['an option in the wrong case', { WaitDelay: 1000 }, 'ERR_INVALID_ARG_VALUE', /\(did you mean "waitDelay"\?\)/],
      ["containment: 'sometimes'", { containment: 'sometimes' }, 'ERR_INVALID_ARG_VALUE', /"containment" must be one of/],
      ["tier: 'cgroup-x'", { tier: 'cgroup-x' }, 'ERR_INVALID_ARG_VALUE', /"tier" must be one of/],
    ] as const
  ).map(([name, bad, code, message]) => ({
    name,
    make: (t: Tagged) => ({ command: 'sh', args: ['-c', 'sleep 300'], options: { env: t.env, ...bad } as unknown as SpawnOptions }),
    code,
    message,
  })),
  {
    name: 'a closed descriptor in stdio',
    make: (t) => ({ command: 'sh', args: ['-c', 'sleep 300'], options: { env: t.env, stdio: ['pipe', 'pipe', 987654] } }),
    code: 'EBADF',
    message: /"stdio\[2\]" is 987654, which is not an open file descriptor.*Pass an open descriptor/,
  },
];

function expectLaunchFailure(err: unknown, c: Case, code = c.code): void {
  const e = err as CordonError;
  expect(e, 'a CordonError').toBeDefined();
  expectCordonError(e, code);
  expect(e.name).toBe('CordonError');
  expect(e.isLaunchFailure).toBe(true);
  expect(e.isCleanupFailure).toBe(false);
  if (c.syscall) expect(e.syscall).toBe(c.syscall);
  expect(e.message).toMatch(c.message);
}

describe('C1/C6: launch failures before anything runs', () => {
  for (const c of cases) {
    // proves C1, C6
    it(`spawn(): ${c.name} -> ${c.code}, thrown synchronously, nothing runs`, () => {
      const t = useTag();
      const { command, args, options } = c.make(t, tempDir('cordon-launch-'));
      let caught: unknown;
      let proc: unknown;
      try {
        proc = spawn(command, args, options);
      } catch (err) {
        caught = err;
      }
      expect(proc, 'spawn() returned a process instead of throwing').toBeUndefined();
      expectLaunchFailure(caught, c);
      expect(t.procs()).toEqual([]);
    });

    // proves C1, C6
    it(`run(): ${c.name} -> rejects with ${c.runCode ?? c.code}, nothing runs`, async () => {
      const t = useTag();
      const { command, args, options } = c.make(t, tempDir('cordon-launch-'));
      let promise: Promise<unknown> | undefined;
      expect(() => {
        promise = run(command, args, options as Parameters<typeof run>[2]);
      }, 'run() threw synchronously instead of rejecting').not.toThrow();
      // It fails before anything runs: the rejection is immediate.
      const how = await outcome(promise!, 5000, 'run() to reject', t.tag);
      expectLaunchFailure(rejected(how, 'run() resolved'), c, c.runCode ?? c.code);
      expect(t.procs()).toEqual([]);
    });
  }
});

describe('C1/C6: a late exec failure (the anchor reports EXECFAIL)', () => {
  function missingInterpreterScript(dir: string): string {
    // Passes the pre-check (an executable file), but execve() fails with
    // ENOENT: the interpreter named on the #! line does not exist.
    const path = join(dir, 'bad-interpreter.sh');
    writeFileSync(path, '#!/nonexistent/interp\nsleep 300\n');
    chmodSync(path, 0o755);
    return path;
  }

  // proves C1, C6
  it('spawn(): `started` and `result` reject with ENOENT, a launch failure; nothing runs', async () => {
    const t = useTag();
    const path = missingInterpreterScript(tempDir('cordon-launch-'));
    const proc = spawn(path, [], { env: t.env });
    const started = await outcome(proc.started, 10_000, '`started` to settle', t.tag);
    const result = await outcome(proc.result, 10_000, '`result` to settle', t.tag);
    const errors = [rejected<CordonError>(started, '`started` resolved'), rejected<CordonError>(result, '`result` resolved')];
    for (const e of errors) {
      expectCordonError(e, 'ENOENT');
      expect(e.isLaunchFailure).toBe(true);
      expect(e.isCleanupFailure).toBe(false);
      expect(e.message).toMatch(/check/i);
    }
    expect(proc.pid).toBeUndefined();
    // Nothing is left: no anchor, no command.
    expect(t.procs()).toEqual([]);
    // terminate() after a launch failure resolves at once.
    await within(proc.terminate(), 2000, 'terminate() after the launch failure', t.tag);
  });

  // proves C1, C6
  it('run(): rejects with ENOENT, a launch failure; nothing runs', async () => {
    const t = useTag();
    const path = missingInterpreterScript(tempDir('cordon-launch-'));
    const how = await outcome(run(path, [], { env: t.env }), 10_000, 'run() to settle', t.tag);
    const e = rejected<CordonError>(how, 'run() resolved');
    expectCordonError(e, 'ENOENT');
    expect(e.isLaunchFailure).toBe(true);
    expect(t.procs()).toEqual([]);
  });
});

// The library checks cwd before anything runs; the anchor enters it itself
// (POSIX), so a directory removed in between is still a launch failure,
// reported on the control channel before the command could run.
const posixAnchor = onlyWhere(process.platform !== 'win32', 'the POSIX anchor; Windows has test/win');
describe.skipIf(posixAnchor.skip)(`C1: the anchor cannot enter the working directory${posixAnchor.note}`, () => {
  // proves C1, C6
  it('it reports NOCWD with the errno and runs nothing', async () => {
    const t = useTag();
    const dir = tempDir('cordon-launch-');
    const marker = join(dir, 'ran');
    const child = spawnChild(anchorPath(), ['--cwd', join(dir, 'gone'), '--', '/bin/sh', 'sh', '-c', `echo ran > ${marker}`], {
      env: t.env,
      stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
    });
    onTestFinished(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    let control = '';
    (child.stdio[3] as Readable).setEncoding('utf8').on('data', (chunk: string) => (control += chunk));
    const [code] = (await within(once(child, 'close'), 10_000, 'the anchor to exit', t.tag)) as [number | null];
    expect(control).toBe(`NOCWD ${osConstants.errno.ENOENT}\n`);
    expect(code).toBe(0);
    expect(existsSync(marker), 'the command ran').toBe(false);
    expect(t.procs()).toEqual([]);
  });
});
