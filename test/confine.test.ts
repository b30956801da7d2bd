// The confine option (issue #49, Linux): the tree confined by the kernel on
// top of every Linux tier. Observed from outside: which files exist (stat
// from the test), how many connections the test's own server accepted, what
// a read of a denied file says. A setsid daemon the tree starts is confined
// the same way: it writes after the root exited, when the test lets it
// through a FIFO.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createSocket } from 'node:dgram';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { run, spawn, type CordonError } from '../lib/index.js';
import { probe } from '../lib/native.js';
import { hasCapSysAdmin } from '../lib/capabilities.js';
import { confineRefusal } from '../lib/confine.js';
import { useTag, waitFor, within } from './helpers/procs.js';
import { onlyWhere } from './helpers/requirements.js';
import { caps, xnu } from './helpers/tier.js';
import { repoRoot } from './helpers/fixtures.js';
import { watchdog } from './helpers/time.js';

// (On the model of XNU the darwin build confines with a Seatbelt profile the
// model records and does not enforce: test/xnu-model/seatbelt.test.ts.)
const linux = onlyWhere(process.platform === 'linux' && !xnu && caps.guarantees.confine, 'Landlock is Linux\'s (the darwin build, on the model of XNU too, has Seatbelt), and needs a kernel with Landlock');
const netns = onlyWhere(process.platform === 'linux' && !xnu && caps.guarantees.confine && hasCapSysAdmin(), "network 'none' and 'loopback' need a network namespace: CAP_SYS_ADMIN");

/** A fresh directory, removed after the test. */
function scratch(name: string): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), `cordon-confine-test-${name}-`)));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A TCP server of the test's own on 127.0.0.1 that counts what it accepts. */
async function countingServer(): Promise<{ port: number; accepts: () => number }> {
  let n = 0;
  const server: Server = createServer((s) => {
    n++;
    s.destroy();
  });
  onTestFinished(() => void server.close());
  await within(new Promise<void>((r) => server.listen(0, '127.0.0.1', r)), 5000, 'the test server listening');
  return { port: (server.address() as { port: number }).port, accepts: () => n };
}

/** A UDP socket of the test's own on 127.0.0.1 that counts the datagrams it gets. */
async function countingUdp(): Promise<{ port: number; received: () => number }> {
  let n = 0;
  const sock = createSocket('udp4', () => n++);
  onTestFinished(() => void sock.close());
  await within(new Promise<void>((r) => sock.bind(0, '127.0.0.1', r)), 5000, 'the test UDP socket bound');
  return { port: sock.address().port, received: () => n };
}

// node -e: send one datagram to a port, print 'sent' or the error code.
const sendTo = (port: number) =>
  `const s=require('dgram').createSocket('udp4');s.send('x',${port},'127.0.0.1',e=>{console.log(e?'error '+e.code:'sent');s.close()})`;

// node -e: connect to a port, print 'connected' or the error code, exit.
const connectTo = (port: number) =>
  `const s=require('net').connect(${port},'127.0.0.1');s.on('connect',()=>{console.log('connected');process.exit(0)});s.on('error',e=>{console.log('error '+e.code);process.exit(0)});setTimeout(()=>{console.log('timeout');process.exit(0)},3000)`;

describe.skipIf(linux.skip)(`confine: the tree confined by the kernel${linux.note}`, () => {
  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it('writes only below its write paths: a file is created inside, not outside (stat from the test)', async () => {
    const t = useTag();
    const allowed = scratch('w');
    const outside = scratch('out');
    const r = await run('sh', ['-c', 'echo in > "$1/in"; echo out > "$2/out"; echo done', 'sh', allowed, outside], { env: t.env, confine: { write: [allowed] }, reject: false });
    expect(existsSync(join(allowed, 'in'))).toBe(true);
    expect(existsSync(join(outside, 'out'))).toBe(false);
    expect(r.stdout).toContain('done');
    expect(r.stderr).toMatch(/Permission denied/);
    expect(r.confined).toMatchObject({ mechanism: 'landlock', network: 'all', denyRead: [], landlockAbi: probe().landlock });
    expect(r.confined!.write).toContain(allowed);
  });

  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it('has a private TMPDIR of its own, writable, removed when the tree has ended', async () => {
    const t = useTag();
    const r = await run('sh', ['-c', 'touch "$TMPDIR/x" && echo "$TMPDIR"'], { env: t.env, confine: { write: [] } });
    expect(r.stdout.trim()).toBe(r.confined!.tmpdir);
    await waitFor(() => !existsSync(r.confined!.tmpdir), { timeout: 5000, what: 'the confined temp dir removed' });
  });

  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it('a setsid daemon it starts is confined the same way, after the root exited', async () => {
    const t = useTag();
    const allowed = scratch('w');
    const outside = scratch('out');
    const fifo = join(allowed, 'go');
    execFileSync('mkfifo', [fifo]);
    // The daemon waits on the FIFO, then tries both writes and says it is done.
    const script = `setsid sh -c 'read x < "$1/go"; echo d > "$2/daemon-out"; echo d > "$1/daemon-in"; echo > "$1/daemon-done"' sh "$1" "$2" </dev/null >/dev/null 2>&1 &`;
    const proc = spawn('sh', ['-c', script, 'sh', allowed, outside], { env: t.env, confine: { write: [allowed] }, leftovers: 'keep', stdio: 'ignore' });
    // The kept tree is ended by the test, whatever happens below.
    onTestFinished(() => within(proc.terminate({ grace: 1000 }), watchdog(5000), 'terminate() of the kept tree', t.tag));
    const result = await within(proc.result, watchdog(10_000), 'the root exits', t);
    expect(result.leftoversKept).toBe(true);
    expect(result.leftovers.length).toBeGreaterThan(0);
    // The root is gone; the daemon writes now.
    await within(writeFile(fifo, 'go\n'), watchdog(10_000), 'the daemon opens its FIFO', t);
    await waitFor(() => existsSync(join(allowed, 'daemon-done')), { timeout: watchdog(10_000), what: 'the daemon done', watch: t });
    expect(existsSync(join(allowed, 'daemon-in'))).toBe(true);
    expect(existsSync(join(outside, 'daemon-out'))).toBe(false);
    await within(proc.terminate({ grace: 1000 }), watchdog(5000), 'terminate() of the kept tree', t.tag);
  }, watchdog(30_000));

  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it('denyRead: a file below it reads EACCES, a sibling reads', async () => {
    const t = useTag();
    const home = scratch('home');
    execFileSync('mkdir', ['-p', join(home, '.ssh'), join(home, 'proj')]);
    writeFileSync(join(home, '.ssh', 'id'), 'secret\n');
    writeFileSync(join(home, 'proj', 'f'), 'public\n');
    const r = await run('sh', ['-c', 'cat "$1/.ssh/id"; cat "$1/proj/f"', 'sh', home], { env: t.env, confine: { write: [], denyRead: [join(home, '.ssh')] }, reject: false });
    expect(r.stdout).not.toContain('secret');
    expect(r.stdout).toContain('public');
    expect(r.stderr).toMatch(/\.ssh\/id: Permission denied/);
  });

  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it('on a terminal of its own (pty): the terminal and /dev/tty stay usable', async () => {
    const t = useTag();
    const r = await run('sh', ['-c', 'echo via-tty > /dev/tty; stty size; echo x > /dev/null && echo null-ok'], { env: t.env, pty: true, confine: { write: [] } });
    expect(r.stdout).toContain('via-tty');
    expect(r.stdout).toMatch(/24 80/);
    expect(r.stdout).toContain('null-ok');
  });

  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it('cordon run --confine-write (relative, from the current directory): writes there, not beside it; a bad --network is a usage error', () => {
    const t = useTag();
    const dir = scratch('cli');
    execFileSync('mkdir', [join(dir, 'out')]);
    const cli = join(repoRoot, 'dist', 'cli.js');
    const r = spawnSync(process.execPath, [cli, 'run', '--confine-write', 'out', '--', 'sh', '-c', 'echo a > out/a; echo b > b'], { cwd: dir, env: t.env, encoding: 'utf8', timeout: watchdog(20_000) });
    expect(existsSync(join(dir, 'out', 'a'))).toBe(true);
    expect(existsSync(join(dir, 'b'))).toBe(false);
    expect(r.stderr).toMatch(/Permission denied/);
    const bad = spawnSync(process.execPath, [cli, 'run', '--network', 'lan', '--', 'true'], { env: t.env, encoding: 'utf8', timeout: watchdog(20_000) });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--network takes none, loopback or all/);
  });

  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it.skipIf(process.getuid?.() !== 0)(`with uid/gid: the command, another user, writes its TMPDIR and its write path, not elsewhere${process.getuid?.() !== 0 ? ' [skipped: switching users needs root]' : ''}`, async () => {
    const t = useTag();
    const allowed = scratch('w');
    execFileSync('chmod', ['0777', allowed]);
    const r = await run('sh', ['-c', 'id -u; touch "$TMPDIR/x" && echo tmp-ok; touch "$1/x" && echo write-ok; touch /var/tmp/cordon-confine-uid-test 2>/dev/null || echo elsewhere-denied', 'sh', allowed], { env: t.env, uid: 65534, gid: 65534, confine: { write: [allowed] } });
    expect(r.stdout.trim().split('\n')).toEqual(['65534', 'tmp-ok', 'write-ok', 'elsewhere-denied']);
  });

  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it('refuses what it cannot honour before anything runs (typed errors)', async () => {
    const dir = scratch('v');
    const bad = async (confine: unknown, code: string, message: RegExp) => {
      const err = (await run('true', [], { confine: confine as never }).catch((e: CordonError) => e)) as CordonError;
      expect(err.code).toBe(code);
      expect(err.message).toMatch(message);
    };
    await bad({ write: ['relative'] }, 'ERR_INVALID_ARG_VALUE', /confine\.write\[0\].*absolute/);
    await bad({ write: [join(dir, 'missing')] }, 'ERR_INVALID_ARG_VALUE', /exists/);
    await bad({ write: [dir], denyRead: [join(dir)] }, 'ERR_INVALID_ARG_VALUE', /outside every write path/);
    await bad({ write: [dir], network: 'lan' }, 'ERR_INVALID_ARG_VALUE', /'none', 'loopback', 'all'/);
    await bad({ write: [dir], other: 1 }, 'ERR_INVALID_ARG_VALUE', /confine\.other/);
    await bad('yes', 'ERR_INVALID_ARG_TYPE', /confine/);
  });

  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it("network 'all' (the control): the tree connects to the test's server", async () => {
    const t = useTag();
    const server = await countingServer();
    const udp = await countingUdp();
    const r = await run('sh', ['-c', '"$1" -e "$2"; "$1" -e "$3"', 'sh', process.execPath, connectTo(server.port), sendTo(udp.port)], { env: t.env, confine: { write: [] } });
    expect(r.stdout).toMatch(/^connected\nsent$/);
    await waitFor(() => server.accepts() === 1, { timeout: 5000, what: 'the accept' });
    await waitFor(() => udp.received() === 1, { timeout: 5000, what: 'the datagram' });
  });

  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it.skipIf(netns.skip)(`network 'none': the test's TCP server accepts nothing from the tree, its UDP socket gets nothing${netns.note}`, async () => {
    const t = useTag();
    const server = await countingServer();
    const udp = await countingUdp();
    const r = await run('sh', ['-c', '"$1" -e "$2"; "$1" -e "$3"', 'sh', process.execPath, connectTo(server.port), sendTo(udp.port)], { env: t.env, confine: { write: [], network: 'none' } });
    // TCP: Landlock refuses the connect (EACCES) before the empty namespace would (ENETUNREACH); UDP: no route in the tree's namespace.
    expect(r.stdout).toMatch(/^error (EACCES|ENETUNREACH)\nerror ENETUNREACH$/);
    // (A datagram on loopback is queued by the time send() calls back: the control test's arrived at once.)
    await new Promise((r) => setTimeout(r, 200));
    expect(server.accepts()).toBe(0);
    expect(udp.received()).toBe(0);
    expect(r.confined!.network).toBe('none');
  });

  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it.skipIf(netns.skip)(`network 'loopback': the tree reaches its own listener, not the test's${netns.note}`, async () => {
    const t = useTag();
    const server = await countingServer();
    const own = `const n=require('net');const sv=n.createServer(c=>c.end()).listen(0,'127.0.0.1',()=>{const s=n.connect(sv.address().port,'127.0.0.1',()=>{console.log('own connected');process.exit(0)});s.on('error',e=>{console.log('own error '+e.code);process.exit(0)})})`;
    const r = await run('sh', ['-c', `"$1" -e "$2"; "$1" -e "$3"`, 'sh', process.execPath, own, connectTo(server.port)], { env: t.env, confine: { write: [], network: 'loopback' } });
    expect(r.stdout).toContain('own connected');
    expect(r.stdout).toMatch(/error ECONNREFUSED/);
    expect(server.accepts()).toBe(0);
  });
});

describe.skipIf(netns.skip || (probe().landlock ?? 0) > 7)(`confine: what it does not cover, as docs/confine.md says${netns.skip ? netns.note : (probe().landlock ?? 0) > 7 ? ' [skipped: a Landlock ABI newer than 7 may cover it: check docs/confine.md]' : ''}`, () => {
  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it("a pathname Unix socket stays reachable by path, with network 'none' and its directory in denyRead", async () => {
    const t = useTag();
    const dir = scratch('sock');
    const path = join(dir, 's.sock');
    let n = 0;
    const server = createServer((s) => {
      n++;
      s.destroy();
    });
    onTestFinished(() => void server.close());
    await within(new Promise<void>((r) => server.listen(path, r)), 5000, 'the test socket listening');
    const script = `const s=require('net').connect(${JSON.stringify(path)});s.on('connect',()=>{console.log('connected');process.exit(0)});s.on('error',e=>{console.log('error '+e.code);process.exit(0)})`;
    const r = await run(process.execPath, ['-e', script], { env: t.env, confine: { write: [], network: 'none', denyRead: [dir] } });
    expect(r.stdout.trim()).toBe('connected');
    await waitFor(() => n === 1, { timeout: 5000, what: 'the accept' });
  });
});

// What a Mac would show: written from Apple's documented behaviour, never run
// by this project (no Mac runs its suite; docs/confine.md, "macOS"). On the
// model of XNU the profile is recorded, not enforced: test/xnu-model/seatbelt.test.ts.
describe.skipIf(process.platform !== 'darwin')(`confine on macOS: the Seatbelt profile, observed from outside${process.platform !== 'darwin' ? ' [skipped: a Mac only; on the model of XNU the profile is recorded, not enforced]' : ''}`, () => {
  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it('writes only below its write paths and its TMPDIR; denyRead unreadable; network none reaches no server of the test', async () => {
    const t = useTag();
    const allowed = scratch('w');
    const outside = scratch('out');
    const home = scratch('home');
    execFileSync('mkdir', ['-p', join(home, '.ssh')]);
    writeFileSync(join(home, '.ssh', 'id'), 'secret\n');
    const server = await countingServer();
    const script = 'echo in > "$1/in"; echo out > "$2/out"; touch "$TMPDIR/t" && echo tmp-ok; cat "$3/.ssh/id"; "$4" -e "$5"';
    const r = await run('sh', ['-c', script, 'sh', allowed, outside, home, process.execPath, connectTo(server.port)], { env: t.env, confine: { write: [allowed], denyRead: [join(home, '.ssh')], network: 'none' }, reject: false });
    expect(existsSync(join(allowed, 'in'))).toBe(true);
    expect(existsSync(join(outside, 'out'))).toBe(false);
    expect(r.stdout).toContain('tmp-ok');
    expect(r.stdout).not.toContain('secret');
    expect(r.stdout).toMatch(/^error /m);
    await new Promise((done) => setTimeout(done, 200));
    expect(server.accepts()).toBe(0);
    expect(r.confined).toMatchObject({ mechanism: 'seatbelt', landlockAbi: 0, network: 'none' });
  });
});

// The refusal a Windows host gets, read here on any platform: what each
// mechanism would need (docs/confine.md, "Windows: why it is refused").
describe('confine on Windows: the refusal says what is missing', () => {
  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it('ERR_CORDON_UNSUPPORTED naming the AppContainer and the restricted token, what stops each, and that nothing ran', () => {
    const err = confineRefusal({ write: [tmpdir()], denyRead: [], network: 'loopback' }, 'win32', 0, false);
    expect(err?.code).toBe('ERR_CORDON_UNSUPPORTED');
    expect(err?.message).toMatch(/AppContainer/);
    expect(err?.message).toMatch(/loopback/);
    expect(err?.message).toMatch(/write-restricted token/);
    expect(err?.message).toMatch(/Nothing ran/);
    expect(confineRefusal({ write: [tmpdir()], denyRead: [], network: 'all' }, 'darwin', 0, false)).toBeUndefined();
  });
});

describe.skipIf(process.platform !== 'win32')(`confine on Windows${process.platform !== 'win32' ? ' [skipped: Windows only]' : ''}`, () => {
  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it('is refused with ERR_CORDON_UNSUPPORTED before anything runs', async () => {
    const err = (await run('true', [], { confine: { write: [tmpdir()] } }).catch((e: CordonError) => e)) as CordonError;
    expect(err.code).toBe('ERR_CORDON_UNSUPPORTED');
    expect(caps.guarantees.confine).toBe(false);
  });
});
