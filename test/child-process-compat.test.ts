// CONTRACT C5, C8: cordon/child_process (issue #48), node:child_process's
// spawn, exec and execFile with every tree contained: a command's escapee
// (setsid) is gone once exec()'s callback ran; a host that unrefs a detached
// child and exits takes the tree with it. Node's shapes all the same: events
// spawn -> exit -> close ('error' then 'close' for ENOENT, compared with
// node:child_process itself), kill(signal) to the root alone, promisify's
// { stdout, stderr }, a failure's code, killed, signal and cmd; and the entry
// point imports from ESM and from CommonJS. Observed from outside by tag.
import * as node from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it, onTestFinished } from 'vitest';
import { contained, exec, execFile, execFileSync, execSync, fork, spawn, spawnSync } from '../lib/child_process.js';
import { repoRoot } from './helpers/fixtures.js';
import { ensureDist } from './helpers/host.js';
import { killPids, useTag, waitFor, waitGone, within } from './helpers/procs.js';
import { escapePromised, tier } from './helpers/tier.js';
import { observer } from './helpers/observer.js';
import { watchdog } from './helpers/time.js';

const sleepers = (t: ReturnType<typeof useTag>) => t.procs().filter((p) => p.command === 'sleep 600' && p.state !== 'Z');

/**
 * `sh -c "setsid sleep 600 &"` under exec()'s own shell: the sleep is forked by
 * the inner sh, which may exit before any walk saw it. On XNU (the model of it
 * here) `sleep` is an Apple program whose environment the kernel withholds, so
 * that escapee is not promised there (capabilities' notes say so: escapePromised
 * asserts it); elsewhere it is. Where it is not, what is left is excused.
 */
function noSleeperLeft(t: ReturnType<typeof useTag>, alive: number, when: string): void {
  if (escapePromised({ program: 'sleep', forkedBy: 'unseen' })) {
    expect(alive, `sleep 600 processes carrying the tag ${when}`).toBe(0);
    return;
  }
  for (const p of sleepers(t)) t.notPromised(p.pid);
}

function scratch(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The events of a child, in order, with their arguments. */
function record(child: NodeJS.EventEmitter): { events: string[]; done: Promise<void> } {
  const events: string[] = [];
  for (const name of ['spawn', 'exit', 'close', 'error']) {
    child.on(name, (...args: unknown[]) => events.push(`${name}(${args.map((a) => (a instanceof Error ? (a as NodeJS.ErrnoException).code : String(a))).join(',')})`));
  }
  return { events, done: new Promise((resolve) => child.once('close', () => resolve())) };
}

describe('cordon/child_process: containment', () => {
  // proves C5
  it('exec(\'sh -c "setsid sleep 600 & echo hi"\') calls back with hi, and no sleep 600 of the test is alive once it did', async () => {
    const t = useTag();
    const seen = await within(new Promise<{ error: Error | null; stdout: string; alive: number }>((resolve) => {
      exec('sh -c "setsid sleep 600 & echo hi"', { env: t.env }, (error, stdout) => resolve({ error, stdout: String(stdout), alive: sleepers(t).length }));
    }), 20_000, 'exec() to call back', t.tag);
    expect(seen.error).toBeNull();
    expect(seen.stdout).toBe('hi\n');
    noSleeperLeft(t, seen.alive, 'when the callback ran');
  });

  // proves C5
  it('an escapee that lets go of the output (setsid, >/dev/null) is gone once the callback ran, though the callback comes at once', async () => {
    const t = useTag();
    const seen = await within(new Promise<{ stdout: string; alive: number }>((resolve) => {
      exec('setsid sleep 600 >/dev/null 2>&1 & echo started', { env: t.env }, (_error, stdout) => resolve({ stdout: String(stdout), alive: sleepers(t).length }));
    }), 20_000, 'exec() to call back', t.tag);
    expect(seen.stdout).toBe('started\n');
    expect(seen.alive, 'sleep 600 processes carrying the tag when the callback ran').toBe(0);
    // (An escapee still between its fork and its exec then would be sleep 600 a moment later.)
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(sleepers(t), 'sleep 600 processes carrying the tag 500 ms after the callback').toEqual([]);
  });

  // proves C8
  it('a host that spawns a detached child, unref()s it and ends: the host exits, and the tree ends with it', async () => {
    const t = useTag();
    const dir = scratch('cordon-cp-unref-');
    await ensureDist();
    mkdirSync(join(dir, 'node_modules'));
    symlinkSync(repoRoot, join(dir, 'node_modules', 'cordon'));
    writeFileSync(join(dir, 'host.mjs'), [
      "import { spawn } from 'cordon/child_process';",
      "const child = spawn('sh', ['-c', 'setsid sleep 600 & exec sleep 600'], { detached: true, stdio: 'ignore' });",
      "child.on('spawn', () => { console.log('spawned', child.pid); child.unref(); });",
      // Its stdin holds the host until the test saw the tree; then nothing does but the unref()ed child.
      "process.stdin.once('data', () => process.stdin.destroy());",
      '',
    ].join('\n'));
    const host = node.spawn(process.execPath, ['host.mjs'], { cwd: dir, env: t.env, stdio: ['pipe', 'pipe', 'inherit'] });
    onTestFinished(() => void host.kill('SIGKILL'));
    let out = '';
    host.stdout!.on('data', (d: Buffer) => (out += d));
    await waitFor(() => out.includes('spawned') && sleepers(t).length === 2, { timeout: 20_000, what: 'the host to start the tree (two sleep 600)', watch: t.tag });
    const exited = new Promise((resolve) => host.once('exit', resolve));
    host.stdin!.write('go\n');
    const code = await within(exited, 15_000, 'the host to exit with the child unref()ed', t.tag);
    expect(code).toBe(0);
    await waitGone(t, 5_000);
  });
});

describe('cordon/child_process: Node\'s shapes', () => {
  // proves nothing of the contract: node:child_process's event shapes
  it('events come as Node emits them: spawn, exit, close; pid, exitCode, spawnfile, spawnargs', async () => {
    const t = useTag();
    const child = spawn('sh', ['-c', 'echo out; exit 3'], { env: t.env });
    const { events, done } = record(child);
    expect(child.spawnfile).toBe('sh');
    expect(child.spawnargs).toEqual(['sh', '-c', 'echo out; exit 3']);
    expect(child.connected).toBe(false);
    expect(child.stdio).toEqual([child.stdin, child.stdout, child.stderr]);
    await within(done, 15_000, "'close'", t.tag);
    expect(events).toEqual(['spawn()', 'exit(3,null)', 'close(3,null)']);
    expect(child.pid).toBeGreaterThan(0);
    expect(child.exitCode).toBe(3);
    expect(child.signalCode).toBeNull();
    expect(contained(child)?.pid).toBe(child.pid);
    expect((await contained(child)!.result).exitCode).toBe(3);
  });

  // proves nothing of the contract: node:child_process's event order
  it("'spawn' comes before the first output, as Node's does, however fast the command writes (20 rounds)", async () => {
    const t = useTag();
    for (let round = 0; round < 20; round++) {
      const child = spawn('sh', ['-c', 'echo out; echo err >&2'], { env: t.env });
      const { events, done } = record(child);
      child.stdout!.on('data', () => events.push('data(stdout)'));
      child.stderr!.on('data', () => events.push('data(stderr)'));
      await within(done, 15_000, "'close'", t.tag);
      expect(events[0], `round ${round}: ${events.join(' ')}`).toBe('spawn()');
      expect(events.filter((e) => e.startsWith('data')).sort(), `round ${round}`).toEqual(['data(stderr)', 'data(stdout)']);
    }
  });

  // proves nothing of the contract: node:child_process's events for ENOENT
  it('ENOENT: \'error\' then \'close\', no \'spawn\', as node:child_process emits them', async () => {
    const t = useTag();
    const name = 'cordon-no-such-command-48';
    const ours = spawn(name, ['a'], { env: t.env });
    const theirs = node.spawn(name, ['a'], { env: t.env });
    const errors: NodeJS.ErrnoException[] = [];
    ours.on('error', (e) => errors.push(e));
    theirs.on('error', (e) => errors.push(e));
    const a = record(ours);
    const b = record(theirs);
    await within(Promise.all([a.done, b.done]), 15_000, "both 'close' events", t.tag);
    expect(a.events).toEqual(b.events);
    expect(a.events).toEqual(['error(ENOENT)', 'close(-2,null)']);
    const shape = (e: NodeJS.ErrnoException) => ({ message: e.message, code: e.code, errno: e.errno, syscall: e.syscall, path: e.path, spawnargs: (e as { spawnargs?: string[] }).spawnargs });
    expect(shape(errors[0]!)).toEqual(shape(errors[1]!));
    expect(ours.pid).toBeUndefined();
    expect(contained(ours)).toBeUndefined();
  });

  // proves C3: kill(signal) reaches the root alone
  it("kill('SIGINT') reaches the root's trap alone; the tree keeps running until the root ends", async () => {
    const t = useTag();
    const dir = scratch('cordon-cp-kill-');
    const stop = join(dir, 'stop');
    const script = `trap 'echo trapped' INT; sleep 600 & echo ready; while [ ! -f '${stop}' ]; do sleep 0.1; done; echo done`;
    const child = spawn('sh', ['-c', script], { env: t.env });
    const { events, done } = record(child);
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d));
    await waitFor(() => out.includes('ready'), { timeout: 20_000, what: 'the root to trap INT', watch: t.tag });
    expect(child.kill('SIGINT')).toBe(true);
    expect(child.killed).toBe(true);
    await waitFor(() => out.includes('trapped'), { timeout: 10_000, what: "the root's trap to run", watch: t.tag });
    // The signal went to the root alone: the root and its sleep 600 run on.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(child.exitCode).toBeNull();
    expect(sleepers(t).length, 'the sleep 600 of the tree').toBe(1);
    writeFileSync(stop, '');
    await within(done, 15_000, "'close'", t.tag);
    expect(out).toBe('ready\ntrapped\ndone\n');
    expect(events).toEqual(['spawn()', 'exit(0,null)', 'close(0,null)']);
    expect(sleepers(t), 'the tree ended with its root').toEqual([]);
  });

  // proves nothing of the contract: node:child_process's promisified shapes
  it('promisify(execFile) resolves { stdout, stderr }; promisify(exec) too', async () => {
    const t = useTag();
    const result = await within(promisify(execFile)('sh', ['-c', 'echo out; echo err >&2'], { env: t.env }), 15_000, 'execFile', t.tag);
    expect(result).toEqual({ stdout: 'out\n', stderr: 'err\n' });
    const buffers = await within(promisify(exec)('printf x', { env: t.env, encoding: 'buffer' }), 15_000, 'exec', t.tag);
    expect(buffers.stdout).toEqual(Buffer.from('x'));
  });

  // proves nothing of the contract: node:child_process's error shape
  it('exit 3: the error has code 3, killed false, signal null, cmd, and (promisified) stdout and stderr, as Node\'s', async () => {
    const t = useTag();
    const args = ['-c', 'echo out; echo oops >&2; exit 3'];
    const ours = await within(new Promise<[Error | null, unknown, unknown]>((resolve) => execFile('sh', args, { env: t.env }, (...r) => resolve(r))), 15_000, 'execFile', t.tag);
    const theirs = await new Promise<[Error | null, unknown, unknown]>((resolve) => node.execFile('sh', args, { env: t.env }, (...r) => resolve(r)));
    const fields = (e: Error | null) => ({ ...e, message: e?.message });
    expect(fields(ours[0])).toEqual(fields(theirs[0]));
    expect(fields(ours[0])).toEqual({ code: 3, killed: false, signal: null, cmd: "sh -c echo out; echo oops >&2; exit 3", message: 'Command failed: sh -c echo out; echo oops >&2; exit 3\noops\n' });
    expect([ours[1], ours[2]]).toEqual(['out\n', 'oops\n']);
    const rejected = (await promisify(execFile)('sh', args, { env: t.env }).catch((e: unknown) => e)) as Record<string, unknown>;
    expect([rejected.code, rejected.stdout, rejected.stderr]).toEqual([3, 'out\n', 'oops\n']);
  });

  // proves C10 (own report): Node's fields after a timeout
  it('a timeout stops the tree: killed true, signal SIGTERM, code null', async () => {
    const t = useTag();
    const e = await within(promisify(execFile)('sh', ['-c', 'sleep 600 & wait'], { env: t.env, timeout: 300 }).catch((err: unknown) => err), 15_000, 'execFile', t.tag) as Record<string, unknown>;
    expect([e.code, e.killed, e.signal]).toEqual([null, true, 'SIGTERM']);
    expect(sleepers(t)).toEqual([]);
  });

  // proves C10
  it('an abort: the callback gets an AbortError (as Node\'s), killed is true, and the tree is gone', async () => {
    const t = useTag();
    const controller = new AbortController();
    const child = spawn('sh', ['-c', 'sleep 600 & echo ready; wait'], { env: t.env, signal: controller.signal });
    const { events, done } = record(child);
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d));
    await waitFor(() => out.includes('ready'), { timeout: 20_000, what: 'the tree to start', watch: t.tag });
    controller.abort();
    await within(done, 15_000, "'close'", t.tag);
    expect(events[0]).toBe('spawn()');
    expect(events.slice(1).filter((e) => !e.startsWith('exit')), "'error' (AbortError) before 'close'").toEqual(['error(ABORT_ERR)', 'close(null,SIGTERM)']);
    expect(child.killed).toBe(true);
    expect(sleepers(t)).toEqual([]);
  });

  // proves nothing of the contract: node:child_process's input errors
  it("an unsupported stdio form and fork() are ERR_CORDON_UNSUPPORTED, a bad type Node's own TypeError, before anything runs", () => {
    const t = useTag();
    expect(() => fork('child.js', [], { env: t.env })).toThrow(expect.objectContaining({ code: 'ERR_CORDON_UNSUPPORTED' }));
    // Node's class, code and message, compared with node:child_process itself.
    const nodeError = (() => {
      try {
        node.spawn('sh', { argv0: ['x'] as unknown as string });
      } catch (e) {
        return e as Error & { code: string };
      }
    })();
    expect(() => spawn('sh', { argv0: ['x'] as unknown as string })).toThrow(expect.objectContaining({ name: 'TypeError', code: nodeError?.code, message: nodeError?.message }));
    expect(() => spawn('sh', ['-c', 'sleep 600'], { env: t.env, stdio: ['pipe', 'pipe', 'pipe', 'ipc'] })).toThrow(expect.objectContaining({ code: 'ERR_CORDON_UNSUPPORTED' }));
    expect(() => spawn('sh', ['-c', 'sleep 600'], { env: t.env, stdio: ['pipe', 'pipe', 'pipe', 'pipe'] })).toThrow(expect.objectContaining({ code: 'ERR_CORDON_UNSUPPORTED' }));
    expect(() => spawn(42 as unknown as string)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
    expect(() => spawn('sh', 'nope' as unknown as string[])).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
    expect(t.procs()).toEqual([]);
  });
});

// detached: true makes the root a process group (and session) leader, as
// Node's does, so a caller's process.kill(-pid) reaches it; the tree stays
// contained. The process-group tier keeps the root in the tree's own group
// (its containment), as docs/child-process.md says.
describe('cordon/child_process: detached: true', () => {
  const groupTier = tier === 'process-group';
  // proves nothing of the contract: node:child_process's process-group convention
  it("the root leads its own process group and process.kill(-pid) reaches it, as under Node (the process-group tier: it stays in the tree's group)", async () => {
    const t = useTag();
    const child = spawn('sh', ['-c', 'echo ready; exec sleep 600'], { env: { ...process.env, ...t.env }, detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
    const exited = new Promise<[number | null, string | null]>((r) => child.once('exit', (code, signal) => r([code, signal])));
    const ready = new Promise((r) => child.stdout!.once('data', r));
    await within(ready, 10_000, 'the root to start', t.tag);
    const root = observer.stat(child.pid!);
    expect(root, 'the root, seen by the observer').toBeDefined();
    if (groupTier) {
      expect(root!.pgid).not.toBe(child.pid);
      child.kill('SIGKILL');
    } else {
      expect(root!.pgid, "the root's process group").toBe(child.pid);
      process.kill(-child.pid!, 'SIGTERM');
    }
    expect(await within(exited, 10_000, 'the root to exit', t.tag)).toEqual([null, groupTier ? 'SIGKILL' : 'SIGTERM']);
    await waitGone(t, 10_000, 'the tree');
  });
});

describe('cordon/child_process: another child\'s stream as stdio (relayed by the host)', () => {
  // proves nothing of the contract: node:child_process's pipes
  it("cat | head -n1 | ... and two writers into one cat's stdin give what Node's pipes give", async () => {
    const t = useTag();
    const env = { ...process.env, ...t.env };
    // A readable as stdin: p1's output feeds p2 until p2 exits; then it is the caller's to read.
    const p1 = spawn('cat', { env, stdio: ['pipe', 'pipe', 'inherit'] });
    const p2 = spawn('head', ['-n1'], { env, stdio: [p1.stdout!, 'pipe', 'inherit'] });
    expect(p2.stdin, "stdin given as a stream: the child's stdin is null, as in Node").toBeNull();
    let headOut = '';
    p2.stdout!.on('data', (c: Buffer) => (headOut += c));
    p1.stdin!.write('hello\n');
    await within(new Promise((r) => p2.once('close', r)), 10_000, 'head to exit', t.tag);
    p1.stdin!.end('world\n');
    let catOut = '';
    p1.stdout!.on('data', (c: Buffer) => (catOut += c));
    p1.stdout!.resume(); // (unpiped streams stay paused, as Node's)
    await within(new Promise((r) => p1.once('close', r)), 10_000, 'cat to exit', t.tag);
    expect([headOut, catOut]).toEqual(['hello\n', 'world\n']);
    // A writable as stdout, shared by two writers, ended by its owner only.
    const p3 = spawn('cat', { env, stdio: ['pipe', 'pipe', 'inherit'] });
    const w1 = spawn('cat', { env, stdio: ['pipe', p3.stdin!, 'inherit'] });
    const w2 = spawn('cat', { env, stdio: ['pipe', p3.stdin!, 'inherit'] });
    expect(w1.stdout).toBeNull();
    let merged = '';
    p3.stdout!.on('data', (c: Buffer) => (merged += c));
    w1.stdin!.end('one\n');
    await within(new Promise((r) => w1.once('close', r)), 10_000, 'the first writer to exit', t.tag);
    w2.stdin!.end('two\n');
    await within(new Promise((r) => w2.once('close', r)), 10_000, 'the second writer to exit', t.tag);
    p3.stdin!.end('three\n');
    await within(new Promise((r) => p3.once('close', r)), 10_000, 'the reader to exit', t.tag);
    expect(merged).toBe('one\ntwo\nthree\n');
    await waitGone(t, 10_000, 'the five trees');
  });
});

describe('cordon/child_process: the sync variants (a helper process waits)', () => {
  // proves C5
  it('execSync(\'sh -c "setsid sleep 600 & echo hi"\') returns hi, and no sleep 600 of the test is alive once it did', async () => {
    const t = useTag();
    await ensureDist();
    const stdout = execSync('sh -c "setsid sleep 600 & echo hi"', { env: t.env, encoding: 'utf8', timeout: 20_000 });
    const alive = sleepers(t).length;
    expect(stdout).toBe('hi\n');
    noSleeperLeft(t, alive, 'when execSync returned');
  });

  // The synchronous call is bounded by the wait delay, not by a descendant
  // that keeps its stdout: one the tier cannot see (the process-group tier:
  // env -i scrubs the marker and the tag, setsid leaves the group; the other
  // tiers end it with the tree) holds cordon's pipe, which the wait delay
  // closes, never spawnSync's (the helper relays the output). With the pipe
  // inherited instead, the call waits the escapee's 600 s in that tier.
  // proves C4
  it('execSync returns at the wait delay when a descendant the tier cannot end keeps its stdout (the process-group tier: env -i, setsid), with the output written before', async () => {
    const t = useTag();
    await ensureDist();
    const escapees: number[] = [];
    // Untagged (env -i): ended by pid, by this test's own cleanup.
    onTestFinished(() => killPids(escapees));
    const began = Date.now();
    const stdout = execSync('env -i setsid sleep 600 & echo "PID $!"; echo hi', { env: t.env, encoding: 'utf8', waitDelay: 1000 } as never) as unknown as string;
    const took = Date.now() - began;
    const pid = Number(/^PID (\d+)$/m.exec(stdout)?.[1]);
    if (pid > 0) escapees.push(pid);
    expect(stdout).toMatch(/\nhi\n$/);
    // Held by the escapee, the call would take its 600 s; released at the wait
    // delay (1 s) after the root's exit, it takes that plus a helper's and an
    // anchor's start, which under emulation (qemu) is seconds: the bound is
    // the watchdog's, far below 600 s, not a timing of the call.
    expect(took, 'execSync took').toBeLessThan(watchdog(30_000));
  });

  // maxBuffer counts the command's output only: a command that prints
  // nothing is no overflow, one that prints past it is ENOBUFS with what was
  // read, as node:child_process's (the helper's own report is no pipe).
  // proves nothing of the contract: node:child_process's maxBuffer
  it('maxBuffer: 1 is no overflow for a silent command, and ENOBUFS with the output read for one that prints, as node:child_process', async () => {
    const t = useTag();
    await ensureDist();
    const env = { ...process.env, ...t.env };
    const silent = spawnSync('true', [], { env, maxBuffer: 1 });
    const nodeSilent = node.spawnSync('true', [], { env, maxBuffer: 1 });
    expect([silent.status, silent.error?.message]).toEqual([nodeSilent.status, nodeSilent.error?.message]);
    const loud = spawnSync('sh', ['-c', 'echo this is stdout'], { env, maxBuffer: 1 });
    expect((loud.error as NodeJS.ErrnoException | undefined)?.code).toBe('ENOBUFS');
    expect(String(loud.stdout)).toBe('this is stdout\n');
    await waitGone(t, 10_000, 'the trees');
  });

  // proves nothing of the contract: node:child_process's sync variants' results
  it("spawnSync, execFileSync and execSync give what node:child_process's give: exit 2, ENOENT, input, a timeout", async () => {
    const t = useTag();
    await ensureDist();
    const args = ['-c', 'cat; echo e >&2; exit 2'];
    const pick = (r: ReturnType<typeof node.spawnSync>) => ({ status: r.status, signal: r.signal, output: r.output, stdout: r.stdout, stderr: r.stderr, error: r.error && (({ message, code, errno, syscall, path, spawnargs }) => ({ message, code, errno, syscall, path, spawnargs }))(r.error as NodeJS.ErrnoException & { spawnargs?: string[] }) });
    const ours = spawnSync('sh', args, { env: t.env, input: 'in' });
    expect(ours.pid).toBeGreaterThan(0);
    expect(pick(ours)).toEqual(pick(node.spawnSync('sh', args, { env: t.env, input: 'in' })));
    const missing = (fn: typeof node.spawnSync) => fn('cordon-no-such-command-48', ['a'], { env: t.env });
    expect(pick(missing(spawnSync))).toEqual(pick(missing(node.spawnSync)));
    const thrown = (fn: () => unknown) => {
      try {
        fn();
      } catch (e) {
        const { message, status, signal, stdout, stderr } = e as Error & Record<string, unknown>;
        return { message, status, signal, stdout, stderr };
      }
      throw new Error('expected a throw');
    };
    expect(thrown(() => execFileSync('sh', args, { env: t.env, stdio: 'pipe', encoding: 'utf8' }))).toEqual(thrown(() => node.execFileSync('sh', args, { env: t.env, stdio: 'pipe', encoding: 'utf8' })));
    expect(thrown(() => execSync('exit 4', { env: t.env, stdio: 'pipe' }))).toEqual(thrown(() => node.execSync('exit 4', { env: t.env, stdio: 'pipe' })));
    const late = spawnSync('sh', ['-c', 'sleep 600 & wait'], { env: t.env, timeout: 300 });
    expect([late.status, late.signal, (late.error as NodeJS.ErrnoException | undefined)?.code]).toEqual([null, 'SIGTERM', 'ETIMEDOUT']);
    expect(sleepers(t)).toEqual([]);
  });

  // proves C8
  it('a host SIGKILLed while it waits in execSync: the tree ends all the same', async () => {
    const t = useTag();
    await ensureDist();
    const dir = scratch('cordon-cp-sync-host-');
    mkdirSync(join(dir, 'node_modules'));
    symlinkSync(repoRoot, join(dir, 'node_modules', 'cordon'));
    writeFileSync(join(dir, 'host.mjs'), "import { execSync } from 'cordon/child_process';\nexecSync('setsid sleep 600 & exec sleep 600', { stdio: 'ignore' });\n");
    const host = node.spawn(process.execPath, ['host.mjs'], { cwd: dir, env: t.env, stdio: 'ignore' });
    onTestFinished(() => void host.kill('SIGKILL'));
    await waitFor(() => sleepers(t).length === 2, { timeout: 20_000, what: 'the host to start the tree (two sleep 600)', watch: t.tag });
    host.kill('SIGKILL');
    await waitGone(t, 5_000);
  });
});

describe('cordon/child_process: the entry point', () => {
  for (const kind of ['ESM import', 'CommonJS require'] as const) {
    // proves nothing of the contract: the package's subpath export
    it(`${kind} of 'cordon/child_process' from an installed package`, async () => {
      const t = useTag();
      await ensureDist();
      const dir = scratch('cordon-cp-entry-');
      mkdirSync(join(dir, 'node_modules'));
      symlinkSync(repoRoot, join(dir, 'node_modules', 'cordon'));
      const body = [
        "execFile('sh', ['-c', 'echo from-$0'], (error, stdout) => {",
        "  promisify(exec)('echo promised').then(({ stdout: again }) => console.log(error, stdout.trim(), again.trim(), typeof spawn));",
        '});',
        '',
      ].join('\n');
      const file = kind === 'ESM import' ? 'use.mjs' : 'use.cjs';
      writeFileSync(join(dir, file), kind === 'ESM import'
        ? `import { spawn, exec, execFile } from 'cordon/child_process';\nimport { promisify } from 'node:util';\n${body}`
        : `const { spawn, exec, execFile } = require('cordon/child_process');\nconst { promisify } = require('node:util');\n${body}`);
      expect(existsSync(join(dir, 'node_modules', 'cordon', 'dist', 'child_process.js'))).toBe(true);
      const r = node.spawnSync(process.execPath, [file], { cwd: dir, env: t.env, encoding: 'utf8', timeout: 30_000 });
      expect(`${r.stdout}${r.stderr.replace(/^.*ExperimentalWarning.*\n|^\(Use `node --trace-warnings.*\n/gm, '')}`).toBe('null from-sh promised function\n');
      expect(r.status).toBe(0);
    });
  }
});

// Prototype pollution (Node's test-child-process-prototype-tampering, and the
// same for cordon's own spawn() and run()): a property set on Object.prototype
// is never read as an option. The pollution is there only while the calls read
// their options (synchronously), then removed before anything is awaited.
describe('options are own properties only (prototype pollution)', () => {
  // proves nothing of the contract: options read from Object.prototype (input hardening)
  it('Object.prototype.cwd, .shell, .uid, .env, .input and .argv0 change nothing of spawn(), run(), exec() and execFileSync()', async () => {
    const t = useTag();
    const { spawn: cordonSpawn, run } = await import('../lib/index.js');
    const polluted = { cwd: '/nonexistent/polluted', shell: '/nonexistent/shell', uid: 12345, env: { POLLUTED: '1' }, input: 'polluted input', argv0: 'polluted' };
    const proto = Object.prototype as Record<string, unknown>;
    onTestFinished(() => {
      for (const key of Object.keys(polluted)) delete proto[key];
    });
    const script = 'echo "$PWD|$(id -u)|${POLLUTED:-none}|$0"; cat';
    let calls: Promise<string>[];
    Object.assign(proto, polluted);
    try {
      const viaSpawn = cordonSpawn('sh', ['-c', script], { env: t.env, stdio: ['ignore', 'pipe', 'ignore'] });
      const viaRun = run('sh', ['-c', script], { env: t.env });
      const viaExec = promisify(execFile)('sh', ['-c', script], { env: { ...process.env, ...t.env } });
      viaExec.child.stdin?.end();
      const sync = execFileSync('sh', ['-c', script], { env: { ...process.env, ...t.env }, stdio: ['ignore', 'pipe', 'ignore'] }).toString();
      calls = [
        (async () => {
          let out = '';
          for await (const chunk of viaSpawn.stdout!) out += chunk;
          return out;
        })(),
        viaRun.then((r) => `${r.stdout}\n`),
        viaExec.then((r) => r.stdout),
        Promise.resolve(sync),
      ];
    } finally {
      for (const key of Object.keys(polluted)) delete proto[key];
    }
    const outs = await within(Promise.all(calls), 20_000, 'the four calls', t.tag);
    const expected = `${process.cwd()}|${process.getuid!()}|none|sh\n`;
    expect(outs).toEqual([expected, expected, expected, expected]);
    await waitGone(t, 10_000, 'the four trees');
  });
});
