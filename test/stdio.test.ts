// The command's stdio (design; CONTRACT C1, C10): every stdio form a host can
// pass ('pipe', 'ignore', 'inherit', a descriptor number, a stream with a
// descriptor) reaches the command's fds 0-2 exactly, and the command starts
// with no signal ignored or blocked (Node itself ignores SIGPIPE). Observed
// from outside: the root prints what /proc says about its own descriptors,
// and the test reads the same links for the host (Linux only: elsewhere
// there are no descriptor links to read, and those tests are skipped saying
// so); the signals through the observer (/proc or ps), on every platform.
import { spawnSync } from 'node:child_process';
import { closeSync, createWriteStream, openSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { once } from 'node:events';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { spawn, type SpawnOptions } from '../lib/index.js';
import { capture, repoRoot } from './helpers/fixtures.js';
import { ensureDist } from './helpers/host.js';
import { useTag, waitFor, within } from './helpers/procs.js';
import { observer } from './helpers/observer.js';
import { itWhere } from './helpers/tier.js';
import { tempDir } from './helpers/registry.js';

/** The root prints `FD<n> <link target>` for each of its fds 0-2, then runs `rest`. */
const SHOW_FDS = 'for n in 0 1 2; do echo "FD$n $(readlink /proc/$$/fd/$n)"; done';

/** Why the tests that read descriptor links (/proc/<pid>/fd, fdinfo) cannot run here ('' on Linux, where they can). */
const linksWhy = process.platform === 'linux' ? '' : 'reads descriptor links from /proc/<pid>/fd, which only Linux has';

function fdsIn(text: string): Record<number, string> {
  const out: Record<number, string> = {};
  for (const m of text.matchAll(/^FD(\d) (.*)$/gm)) out[Number(m[1])] = m[2]!;
  return out;
}

async function runShown(options: SpawnOptions, tag: string, script = SHOW_FDS) {
  const proc = spawn('sh', ['-c', script], options);
  const out = capture(proc.stdout);
  const err = capture(proc.stderr);
  const result = await within(proc.result, 10_000, 'the command to finish', tag);
  return { proc, result, out: out.text, err: err.text };
}

describe('stdio reaches the command as asked', () => {
  // proves C10: the output streams are ordinary pipes and Node streams
  itWhere(linksWhy === '', "'pipe': stdin reaches the command, stdout and stderr come back, all three are pipes", linksWhy, async () => {
    const t = useTag();
    // (Printed on stderr, each echo redirected after its readlink ran.)
    const showOnStderr = 'for n in 0 1 2; do echo "FD$n $(readlink /proc/$$/fd/$n)" >&2; done';
    const proc = spawn('sh', ['-c', `${showOnStderr}; read line; echo "got $line"; echo "err $line" >&2`], { env: t.env });
    const out = capture(proc.stdout);
    const err = capture(proc.stderr);
    proc.stdin!.end('hello\n');
    const result = await within(proc.result, 10_000, 'the command to finish', t.tag);
    expect(result.exitCode).toBe(0);
    expect(out.text).toBe('got hello\n');
    expect(err.text).toMatch(/^err hello$/m);
    const fds = fdsIn(err.text);
    for (const n of [0, 1, 2]) expect(fds[n], `fd ${n}: ${err.text}`).toMatch(/^pipe:\[\d+\]$/);
    expect(new Set([fds[0], fds[1], fds[2]]).size, 'three distinct pipes').toBe(3);
  });

  // proves nothing of the contract: the stdio forms, API
  itWhere(linksWhy === '', "'ignore' gives the command /dev/null", linksWhy, async () => {
    const t = useTag();
    const { result, out } = await runShown({ env: t.env, stdio: ['ignore', 'pipe', 'ignore'] }, t.tag);
    expect(result.exitCode).toBe(0);
    const fds = fdsIn(out);
    expect(fds[0]).toBe('/dev/null');
    expect(fds[2]).toBe('/dev/null');
  });

  // proves nothing of the contract: the stdio forms, API
  itWhere(linksWhy === '', "'inherit' gives the command the host's own descriptors", linksWhy, async () => {
    const t = useTag();
    const { result, out } = await runShown({ env: t.env, stdio: ['inherit', 'pipe', 'inherit'] }, t.tag);
    expect(result.exitCode).toBe(0);
    const fds = fdsIn(out);
    expect(fds[0]).toBe(readlinkSync('/proc/self/fd/0'));
    expect(fds[2]).toBe(readlinkSync('/proc/self/fd/2'));
  });

  // proves nothing of the contract: the stdio forms, API
  itWhere(linksWhy === '', "a descriptor number: the command writes into the host's file", linksWhy, async () => {
    const t = useTag();
    const file = join(tempDir('cordon-stdio-'), 'out.txt');
    const fd = openSync(file, 'w');
    try {
      const { result, out } = await runShown({ env: t.env, stdio: ['ignore', 'pipe', fd] }, t.tag, `${SHOW_FDS}; echo to-stderr >&2`);
      expect(result.exitCode).toBe(0);
      expect(fdsIn(out)[2]).toBe(file);
    } finally {
      closeSync(fd);
    }
    expect(readFileSync(file, 'utf8')).toBe('to-stderr\n');
  });

  // proves nothing of the contract: the stdio forms, API
  itWhere(linksWhy === '', "an opened file stream: the command writes into it", linksWhy, async () => {
    const t = useTag();
    const file = join(tempDir('cordon-stdio-'), 'stream.txt');
    const stream = createWriteStream(file);
    await once(stream, 'open');
    try {
      const { result } = await runShown({ env: t.env, stdio: ['ignore', stream, 'pipe'] }, t.tag, `${SHOW_FDS}; echo done`);
      expect(result.exitCode).toBe(0);
    } finally {
      stream.end();
      await once(stream, 'close');
    }
    const text = readFileSync(file, 'utf8');
    expect(fdsIn(text)[1]).toBe(file);
    expect(text).toMatch(/^done$/m);
  });

  // proves nothing of the contract: the stdio forms, API
  it("the host's own fds 1 and 2, swapped: each lands where asked", async () => {
    const t = useTag();
    await ensureDist();
    const dir = tempDir('cordon-stdio-');
    // A host whose stdout is a.txt and stderr b.txt gives the command its fd 2
    // as stdout and its fd 1 as stderr: sources among the target slots 0-3.
    const a = openSync(join(dir, 'a.txt'), 'w');
    const b = openSync(join(dir, 'b.txt'), 'w');
    const index = pathToFileURL(join(repoRoot, 'dist', 'index.js')).href;
    const script = `import(${JSON.stringify(index)}).then(async ({ spawn }) => {
      const r = await spawn('sh', ['-c', 'echo to-stdout; echo to-stderr >&2'], { stdio: ['ignore', 2, 1] }).result;
      process.exitCode = r.exitCode ?? 99;
    });`;
    let status: number | null;
    try {
      status = spawnSync(process.execPath, ['-e', script], { env: t.env, stdio: ['ignore', a, b], timeout: 10_000 }).status;
    } finally {
      closeSync(a);
      closeSync(b);
    }
    const [outA, outB] = [readFileSync(join(dir, 'a.txt'), 'utf8'), readFileSync(join(dir, 'b.txt'), 'utf8')];
    expect(status, `host stdout: ${outA}\nhost stderr: ${outB}`).toBe(0);
    expect(outA).toBe('to-stderr\n');
    expect(outB).toBe('to-stdout\n');
  });

  // proves nothing of the contract: the stdio forms, API
  itWhere(linksWhy === '', "'inherit' of a stdout Node made non-blocking: the command still gets a blocking one", linksWhy, async () => {
    const t = useTag();
    await ensureDist();
    // A host whose stdout is a pipe and who has written to it (Node then puts
    // the pipe in non-blocking mode) passes it on; the command reads the
    // flags of its own fd 1 (octal; O_NONBLOCK is 04000): the shell's, not
    // the command substitution's.
    const index = pathToFileURL(join(repoRoot, 'dist', 'index.js')).href;
    const script = `import(${JSON.stringify(index)}).then(async ({ spawn }) => {
      process.stdout.write('HOST ' + require('node:fs').readFileSync('/proc/self/fdinfo/1', 'utf8').match(/^flags:\\s*(\\d+)/m)[1] + '\\n');
      const r = await spawn('sh', ['-c', 'echo "CMD $(grep ^flags: /proc/$$/fdinfo/1 | tr -s \\"\\t \\" \\" \\" | cut -d\\" \\" -f2)"'], { stdio: ['ignore', 'inherit', 'inherit'] }).result;
      process.exitCode = r.exitCode ?? 99;
    });`;
    const r = spawnSync(process.execPath, ['-e', script], { env: t.env, encoding: 'utf8', timeout: 10_000 });
    expect(r.status, r.stderr).toBe(0);
    const host = /^HOST (\d+)$/m.exec(r.stdout)?.[1];
    const cmd = /^CMD (\d+)$/m.exec(r.stdout)?.[1];
    expect(cmd, r.stdout).toBeDefined();
    // Precondition: the host's stdout really was non-blocking when it was passed on.
    expect(parseInt(host!, 8) & 0o4000, `host flags ${host}`).toBe(0o4000);
    expect(parseInt(cmd!, 8) & 0o4000, `command flags ${cmd}`).toBe(0);
  });

  // proves nothing of the contract: the command's signal mask and dispositions (no clause)
  it('the command starts with no signal ignored or blocked, though the host ignores SIGPIPE', async () => {
    const t = useTag();
    // Read from outside once the root has exec'd sleep: `exec` makes sleep
    // the shell's process, with the mask and dispositions the shell was given
    // (a sleep forked by the shell would race the shell's fork(): glibc blocks
    // every signal in the parent until fork returns).
    const proc = spawn('sh', ['-c', 'echo "PID root $$"; exec sleep 300'], { env: t.env, stdio: ['ignore', 'pipe', 'ignore'] });
    const out = capture(proc.stdout);
    await out.until(/^PID root \d+$/m);
    const root = out.pids().root!;
    await waitFor(() => observer.cmdline(root) === 'sleep 300', { timeout: 10_000, what: 'the root to exec sleep', watch: t.tag });
    const signals = observer.signals(root);
    expect(signals, 'the root is there to be read').toBeDefined();
    expect(signals!.ignored, 'no signal ignored').toBe(0n);
    expect(signals!.blocked, 'no signal blocked').toBe(0n);
    await within(proc.terminate({ grace: 0 }), 10_000, 'terminate', t.tag);
  });
});
