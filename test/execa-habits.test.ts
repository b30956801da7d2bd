// What users coming from execa reach for (issue #44), against real commands,
// each tagged; what a command received is read from outside (what it
// printed, the links of its own /proc/<pid>/fd, files it wrote), never from
// cordon's bookkeeping. CONTRACT C6: run()'s execa-named facets (failed,
// timedOut, isCanceled) follow the result's classification.
import { execFile } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { run, spawn, type CordonError } from '../lib/index.js';
import { repoRoot } from './helpers/fixtures.js';
import { ensureDist } from './helpers/host.js';
import { useTag, waitGone, within } from './helpers/procs.js';
import { tempDir } from './helpers/registry.js';
import { onlyWhere } from './helpers/requirements.js';

/** Two tests read descriptor links (/proc/<pid>/fd), which only Linux has. */
const fdLinks = onlyWhere(process.platform === 'linux', 'reads descriptor links through /proc/<pid>/fd, which only Linux has');

async function rejection(promise: Promise<unknown>, tag: string): Promise<CordonError> {
  const settled = await within(promise.then(() => undefined, (e: unknown) => e), 15_000, 'run() to settle', tag);
  expect(settled, 'run() rejected').toBeDefined();
  return settled as CordonError;
}

async function lines(iterable: AsyncIterable<string>, tag: string): Promise<string[]> {
  const got: string[] = [];
  await within((async () => { for await (const line of iterable) got.push(line); })(), 15_000, 'the lines', tag);
  return got;
}

/** The host's descriptors open on `path` (its own /proc/self/fd links). */
function hostFdsOn(path: string): string[] {
  return readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === path;
    } catch {
      return false;
    }
  });
}

describe('for await (const line of proc)', () => {
  // proves nothing of the contract: proc.lines(), API
  it("iterates stdout's lines, as execa and proc.lines() do (stderr is not in it)", async () => {
    const t = useTag();
    const script = "printf 'one\\ntwo\\r\\n'; echo noise >&2; printf 'three'";
    const proc = spawn('sh', ['-c', script], { env: t.env });
    expect(await lines(proc, t.tag)).toEqual(['one', 'two', 'three']);
    await within(proc.result, 10_000, 'the result', t.tag);
    const same = spawn('sh', ['-c', script], { env: t.env });
    expect(await lines(same.lines(), t.tag)).toEqual(['one', 'two', 'three']);
    await within(same.result, 10_000, 'the result', t.tag);
    await waitGone(t, 5_000);
  });

  // proves nothing of the contract: proc.lines()'s input error
  it('stdout not piped: a typed error when the loop starts', async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', 'exit 0'], { env: t.env, stdio: ['ignore', 'ignore', 'pipe'] });
    const e = await rejection(lines(proc as AsyncIterable<string>, t.tag), t.tag);
    expect(e.code).toBe('ERR_INVALID_ARG_VALUE');
    expect(e.message).toMatch(/stdout piped/);
    await within(proc.result, 10_000, 'the result', t.tag);
  });
});

describe('run(): stripFinalNewline', () => {
  // proves nothing of the contract: the stripFinalNewline option
  it("strips one final '\\n' or '\\r\\n' from stdout, stderr and all (Buffers too); false keeps it", async () => {
    const t = useTag();
    const script = "printf 'a\\n\\n'; printf 'e\\r\\n' >&2";
    const r = await within(run('sh', ['-c', script], { env: t.env }), 15_000, 'run', t.tag);
    expect(r.stdout).toBe('a\n');
    expect(r.stderr).toBe('e');
    const kept = await within(run('sh', ['-c', script], { env: t.env, stripFinalNewline: false }), 15_000, 'run', t.tag);
    expect(kept.stdout).toBe('a\n\n');
    expect(kept.stderr).toBe('e\r\n');
    const bytes = await within(run('sh', ['-c', 'printf "x\\n"'], { env: t.env, encoding: 'buffer' }), 15_000, 'run', t.tag);
    expect(bytes.stdout).toEqual(Buffer.from('x'));
    const none = await within(run('sh', ['-c', 'printf "no newline"'], { env: t.env, all: true }), 15_000, 'run', t.tag);
    expect(none.stdout).toBe('no newline');
    expect(none.all).toBe('no newline');
    const e = await rejection(run('sh', ['-c', 'echo partial; exit 3'], { env: t.env }), t.tag);
    expect(e.stdout).toBe('partial');
  });
});

describe('run(): stdin, stdout, stderr, stdio', () => {
  // proves nothing of the contract: the stdio options
  it.skipIf(fdLinks.skip)(`stdout 'ignore' or a file's descriptor reaches the command's fd 1; the field is undefined, as execa's${fdLinks.note}`, async () => {
    const t = useTag();
    const dir = tempDir('cordon-execa-');
    const file = join(dir, 'out.txt');
    const fd = openSync(file, 'w');
    let closed = false;
    const close = () => { if (!closed) closeSync(fd); closed = true; };
    try {
      const show = 'echo written; echo "$(readlink /proc/$$/fd/1)" >&2';
      const ignored = await within(run('sh', ['-c', show], { env: t.env, stdout: 'ignore' }), 15_000, 'run', t.tag);
      expect(ignored.stdout).toBeUndefined();
      expect(ignored.stderr).toBe('/dev/null');
      const toFile = await within(run('sh', ['-c', show], { env: t.env, stdio: ['ignore', fd, 'pipe'] }), 15_000, 'run', t.tag);
      expect(toFile.stdout).toBeUndefined();
      expect(toFile.stderr).toBe(file);
      close();
      expect(readFileSync(file, 'utf8')).toBe('written\n');
      const quiet = await within(run('sh', ['-c', 'echo o; echo e >&2'], { env: t.env, stdio: 'ignore', all: true }), 15_000, 'run', t.tag);
      expect([quiet.stdout, quiet.stderr, quiet.all]).toEqual([undefined, undefined, undefined]);
    } finally {
      close();
    }
  });

  // proves nothing of the contract: the stdin options and their input errors
  it("stdin 'pipe' without input is ended at once; stdio with stdin/stdout/stderr, or input with stdin not 'pipe', is a typed error before anything runs", async () => {
    const t = useTag();
    const piped = await within(run('sh', ['-c', 'cat; echo eof'], { env: t.env, stdin: 'pipe' }), 15_000, 'run', t.tag);
    expect(piped.stdout).toBe('eof');
    const dir = tempDir('cordon-execa-');
    const marker = join(dir, 'ran');
    for (const options of [{ stdio: 'pipe', stdout: 'pipe' }, { stdio: 'pipe', stdin: 'ignore' }, { input: 'x', stdin: 'ignore' }, { input: 'x', stdio: 'ignore' }]) {
      const e = await rejection(run('sh', ['-c', `touch '${marker}'`], { env: t.env, ...options } as never), t.tag);
      expect(e.code, JSON.stringify(options)).toBe('ERR_INVALID_ARG_VALUE');
      expect(e.stage).toBe('input');
    }
    expect(existsSync(marker), 'a command ran').toBe(false);
  });
});

describe('run(): input as a stream, inputFile', () => {
  // proves nothing of the contract: a Readable as input
  it('a Readable is piped into stdin, then stdin ends', async () => {
    const t = useTag();
    const r = await within(run('sh', ['-c', 'cat; echo "[end]"'], { env: t.env, input: Readable.from(['from ', 'a stream\n']) }), 15_000, 'run', t.tag);
    expect(r.stdout).toBe('from a stream\n[end]');
  });

  // proves C6
  it('an input stream that fails midway stops the tree and rejects with ERR_CORDON_INPUT and the cause', async () => {
    const t = useTag();
    const input = new Readable({ read() {} });
    input.push('part\n');
    setTimeout(() => input.destroy(new Error('the disk went away')), 300);
    // After its stdin ends the command would sleep on: only the stop ends it.
    const e = await rejection(run('sh', ['-c', 'cat; sleep 300'], { env: t.env, input }), t.tag);
    expect(e.code).toBe('ERR_CORDON_INPUT');
    expect((e.cause as Error).message).toBe('the disk went away');
    expect(e.stdout).toBe('part');
    expect(e.failed).toBe(true);
    await waitGone(t, 5_000);
  });

  // proves nothing of the contract: the inputFile option
  it.skipIf(fdLinks.skip)(`inputFile is read into stdin; the host keeps no descriptor of it after${fdLinks.note}`, async () => {
    const t = useTag();
    const dir = tempDir('cordon-execa-');
    const file = join(dir, 'in.txt');
    writeFileSync(file, 'line 1\nline 2\n');
    const r = await within(run('sh', ['-c', 'cat; echo "[end]"'], { env: t.env, inputFile: file }), 15_000, 'run', t.tag);
    expect(r.stdout).toBe('line 1\nline 2\n[end]');
    expect(hostFdsOn(file)).toEqual([]);
  });

  // proves nothing of the contract: the inputFile option's errors
  it('an inputFile that cannot be read is its errno before anything runs; input and inputFile together are refused', async () => {
    const t = useTag();
    const dir = tempDir('cordon-execa-');
    const marker = join(dir, 'ran');
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ inputFile: join(dir, 'missing') }, 'ENOENT'],
      [{ inputFile: dir }, 'EISDIR'],
      [{ input: 'x', inputFile: join(dir, 'missing') }, 'ERR_INVALID_ARG_VALUE'],
    ];
    for (const [options, code] of cases) {
      const e = await rejection(run('sh', ['-c', `touch '${marker}'; cat`], { env: t.env, ...options } as never), t.tag);
      expect(e.code, JSON.stringify(options)).toBe(code);
      expect(e.isCordonError).toBe(true);
      expect(e.stage).toBe('input');
      if (code !== 'ERR_INVALID_ARG_VALUE') {
        expect(e.message).toMatch(/inputFile.*nothing ran/);
        expect((e.cause as NodeJS.ErrnoException).code).toBe(code);
      }
    }
    expect(existsSync(marker), 'a command ran').toBe(false);
    expect(t.procs()).toEqual([]);
  });
});

describe("run(): execa's result fields", () => {
  // proves C6 (own report): execa-named facets of a success
  it('success: failed, timedOut, isCanceled false; durationMs; command and escapedCommand', async () => {
    const t = useTag();
    const before = Date.now();
    const r = await within(run('sh', ['-c', 'echo "$0 $1"', 'a b', 'c'], { env: t.env }), 15_000, 'run', t.tag);
    const after = Date.now();
    expect(r.stdout).toBe('a b c');
    expect([r.failed, r.timedOut, r.isCanceled]).toEqual([false, false, false]);
    expect(r.durationMs).toBe(r.settledAt - r.startedAt);
    expect(r.durationMs).toBeGreaterThanOrEqual(0);
    expect(r.durationMs).toBeLessThanOrEqual(after - before);
    expect(r.command).toBe('sh -c echo "$0 $1" a b c');
    expect(r.escapedCommand).toBe(`sh -c 'echo "$0 $1"' 'a b' c`);
  });

  // proves C6
  it('failures: the error and a reject: false result say failed, and timedOut / isCanceled by reason', async () => {
    const t = useTag();
    const exit = await rejection(run('sh', ['-c', 'exit 3'], { env: t.env }), t.tag);
    expect([exit.code, exit.failed, exit.timedOut, exit.isCanceled]).toEqual(['ERR_CORDON_EXIT', true, false, false]);
    expect(exit.command).toBe('sh -c exit 3');
    expect(exit.escapedCommand).toBe("sh -c 'exit 3'");
    expect(typeof exit.durationMs).toBe('number');

    const loose = await within(run('sh', ['-c', 'exit 3'], { env: t.env, reject: false }), 15_000, 'run', t.tag);
    expect(loose.failed).toBe(true);

    const timedOut = await rejection(run('sh', ['-c', 'sleep 300'], { env: t.env, timeout: 1000 }), t.tag);
    expect([timedOut.code, timedOut.failed, timedOut.timedOut, timedOut.isCanceled]).toEqual(['ERR_CORDON_TIMEOUT', true, true, false]);

    const controller = new AbortController();
    const canceled = run('sh', ['-c', 'sleep 300'], { env: t.env, signal: controller.signal });
    setTimeout(() => controller.abort(), 500);
    const c = await rejection(canceled, t.tag);
    expect([c.code, c.failed, c.timedOut, c.isCanceled]).toEqual(['ERR_CORDON_CANCELED', true, false, true]);
    await waitGone(t, 5_000);
  });

  // proves C6
  it('a command that cannot start: the error says failed, with the command', async () => {
    const t = useTag();
    const e = await rejection(run('/nonexistent/cordon-execa-habits', ['x'], { env: t.env }), t.tag);
    expect(e.code).toBe('ENOENT');
    expect(e.failed).toBe(true);
    expect(e.command).toBe('/nonexistent/cordon-execa-habits x');
  });
});

describe('unknown options name cordon\'s way', () => {
  // proves nothing of the contract: execa's option names, refused with a pointer
  it("execa's names that cordon spells otherwise, or lacks, say what to use; nothing runs", async () => {
    const t = useTag();
    const dir = tempDir('cordon-execa-');
    const marker = join(dir, 'ran');
    const cases: Array<[string, unknown, RegExp]> = [
      ['cancelSignal', new AbortController().signal, /"signal"/],
      ['forceKillAfterDelay', 1000, /"grace".*"interruptGrace"/],
      ['gracefulCancel', true, /"stop" hook/],
      ['buffer', false, /spawn\(\)/],
      ['lines', true, /for await \(const line of proc\)/],
      ['verbose', 'full', /NODE_DEBUG=cordon/],
      ['cleanup', false, /always/],
      ['detached', true, /"lease"/],
      ['node', true, /process\.execPath/],
      ['ipc', true, /no IPC channel/],
      ['windowsVerbatimArguments', true, /quotes each argument/],
    ];
    for (const [name, value, hint] of cases) {
      const e = await rejection(run('sh', ['-c', `touch '${marker}'`], { env: t.env, [name]: value } as never), t.tag);
      expect(e.code, name).toBe('ERR_INVALID_ARG_VALUE');
      expect(e.message, name).toMatch(new RegExp(`^Unknown option "${name}": `));
      expect(e.message, name).toMatch(hint);
      expect(e.message, name).toMatch(/Nothing ran\. Known options: /);
    }
    // spawn() points run()'s options at run().
    for (const name of ['maxBuffer', 'reject', 'input', 'all', 'stripFinalNewline']) {
      let thrown: unknown;
      try {
        spawn('sh', ['-c', `touch '${marker}'`], { env: t.env, [name]: 1 } as never);
      } catch (error) {
        thrown = error;
      }
      expect((thrown as CordonError)?.message, name).toMatch(new RegExp(`^Unknown option "${name}": is an option of run\\(\\)`));
    }
    expect(existsSync(marker), 'a command ran').toBe(false);
  });

  // proves nothing of the contract: execa's option names, accepted
  it("execa's options cordon takes under the same name are accepted by run()", async () => {
    const t = useTag();
    const r = await within(run('sh', ['-c', 'echo "$X"'], {
      env: { ...t.env, X: 'x' }, extendEnv: true, preferLocal: false, timeout: 60_000, killSignal: 'SIGTERM', reject: true,
      all: true, maxBuffer: 1024, encoding: 'utf8', stripFinalNewline: true, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe',
    }), 15_000, 'run', t.tag);
    expect(r.all).toBe('x');
  });
});
