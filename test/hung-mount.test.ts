// Every wait of the anchor stays bounded: a member that holds a file on a
// hung mount (a FUSE or NFS server that stopped answering) does not hold the
// anchor. The anchor asks which members hold the captured output by reading
// their descriptors' links, never by stat() through /proc/<pid>/fd, which
// would wait on the hung file system (uninterruptibly, SIGKILL included).
// The hung mount is a real FUSE file system (test/fixtures/fuse-hang.py)
// whose file stops answering GETATTR; the tree is observed from outside by
// its tag and the pids it prints.
import { spawn as spawnChild, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, onTestFinished } from 'vitest';
import { spawn } from '../lib/index.js';
import { capture, fixture } from './helpers/fixtures.js';
import { alive, sleep, useTag, waitGone, within } from './helpers/procs.js';
import { missing } from './helpers/requirements.js';
import { itWhere, xnu } from './helpers/tier.js';
import { watchdog } from './helpers/time.js';

const isRoot = process.getuid?.() === 0;
// The FUSE fixture is python3 (ctypes).
const why = !isRoot ? 'mounting a FUSE file system needs root' : !existsSync('/dev/fuse') ? 'this machine has no /dev/fuse' : (missing('python3') ?? '');

// The hung mount: a FUSE server (test/fixtures/fuse-hang.py) mounted in a
// private directory, ended, unmounted and removed by the test's cleanup
// (registered before it starts), which runs before the tag's: ending the
// server fails every request it left waiting (ENOTCONN), so nothing stays
// stuck in the mount; then the mount goes (lazily), then the directory.
async function hungMount() {
  const dir = mkdtempSync(join(tmpdir(), 'cordon-hung-mount-'));
  chmodSync(dir, 0o700);
  const mnt = join(dir, 'mnt');
  mkdirSync(mnt);
  // The server is not the tree's: untagged, ended by this cleanup.
  const fuse = spawnChild('python3', [fixture('fuse-hang.py'), mnt], { stdio: ['ignore', 'pipe', 'pipe'] });
  const said = capture(fuse.stdout);
  const err = capture(fuse.stderr);
  const probes: ReturnType<typeof spawnChild>[] = [];
  onTestFinished(() => {
    if (fuse.exitCode === null && fuse.signalCode === null) fuse.kill('SIGKILL');
    for (const p of probes) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    spawnSync('umount', ['-l', mnt], { stdio: 'ignore', timeout: 10_000 });
    rmSync(dir, { recursive: true, force: true });
  });
  await said.until(/^MOUNTED$/m, watchdog(20_000)).catch((e: Error) => {
    throw new Error(`${e.message}\nstderr:\n${err.text}`);
  });
  return { mnt, gate: join(dir, 'gate'), fuse, said, probes };
}

describe('a hung mount does not hold the anchor', () => {
  // proves C3, C5
  itWhere(why === '', "a member holding a file whose stat() hangs: the root's exit is still reported, the member ended, the result settles", why, async () => {
    const t = useTag();
    const { mnt, gate, fuse, said, probes } = await hungMount();

    // The child holds the FUSE file as its stdin (fd 0, the first a walk of
    // /proc/<pid>/fd meets) and the captured stdout; the root waits for the gate.
    const proc = spawn('sh', ['-c', 'sleep 300 <"$MNT/f" & echo "PID child $!"; echo READY; while [ ! -e "$GATE" ]; do sleep 0.05; done; exit 0'], {
      env: { ...t.env, MNT: mnt, GATE: gate },
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const out = capture(proc.stdout);
    await within(out.until(/^READY$/m), watchdog(10_000), 'the tree to start', t.tag);
    const child = out.pids().child!;
    expect(alive(child)).toBe(true);

    fuse.kill('SIGUSR1');
    await said.until(/^HANGING$/m, watchdog(5000));
    // Proof that the mount hangs: stat() through the member's descriptor has not returned a second later.
    const probe = spawnChild('stat', ['-L', `/proc/${child}/fd/0`], { stdio: 'ignore' });
    probes.push(probe);
    const probeExit = new Promise<void>((resolve) => probe.once('exit', () => resolve()));
    expect(await Promise.race([probeExit.then(() => 'returned'), sleep(1000).then(() => 'waiting')]), "stat() of the member's file").toBe('waiting');

    // The root exits: the anchor lists the member and which members hold the output.
    writeFileSync(gate, '');
    const result = await within(proc.result, watchdog(15_000), 'the result with a member holding a file of a hung mount', t.tag);
    expect(result.exitCode).toBe(0);
    expect(result.leftovers.map((l) => l.pid)).toContain(child);
    expect(result.leftovers.find((l) => l.pid === child)?.heldOutput, 'the member still holding the output pipe is seen as such').toBe(true);
    await waitGone(t, watchdog(5000), 'the tree and its anchor');
  });

  // A member whose stat() the server received and never answered is, once
  // SIGKILLed, in the kernel's uninterruptible wait for the answer (state D):
  // no signal ends it until the request ends. kill() cannot prove quiescence
  // then; it says so after 5 s, naming the member and its state, and the tree
  // ends once the server goes (the kernel fails the request).
  // proves C3, C6
  itWhere(why === '', 'a member SIGKILL cannot end (state D, waiting on the hung mount): kill() rejects after 5 s naming it and its state; the tree ends once the server goes', why, async () => {
    const t = useTag();
    const { mnt, gate, fuse, said } = await hungMount();
    const proc = spawn('sh', ['-c', 'echo READY; while [ ! -e "$GATE" ]; do sleep 0.05; done; stat -L "$MNT/f" & echo "PID child $!"; wait'], {
      env: { ...t.env, MNT: mnt, GATE: gate },
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    proc.result.catch(() => undefined);
    const out = capture(proc.stdout);
    await within(out.until(/^READY$/m), watchdog(10_000), 'the tree to start', t.tag);
    fuse.kill('SIGUSR1');
    await said.until(/^HANGING$/m, watchdog(5000));
    writeFileSync(gate, '');
    await within(out.until(/^PID child \d+$/m), watchdog(10_000), 'the stat() to start', t.tag);
    const child = out.pids().child!;
    // Its GETATTR is with the server: waiting (S) a second later, not returned.
    await sleep(1000);
    expect(alive(child), 'the stat() returned: the mount does not hang').toBe(true);
    const error = await within(proc.kill().then(() => undefined, (e: unknown) => e), watchdog(20_000), 'kill() to settle', t.tag);
    expect(error, 'kill() resolved with a member SIGKILL could not end').toBeInstanceOf(Error);
    expect((error as { code?: string }).code).toBe('ERR_CORDON_CLEANUP');
    // Linux's listing tells an uninterruptible wait; XNU's p_stat does not (docs/xnu-model.md), so there the state is not read.
    expect((error as Error).message).toContain(`${child} (${xnu ? 'state not read' : 'uninterruptible sleep'})`);
    expect(alive(child), 'the member the error names').toBe(true);
    // The server goes: the kernel fails the request, the member dies, the tree ends.
    fuse.kill('SIGKILL');
    await waitGone(t, watchdog(10_000), 'the tree and its anchor once the server is gone');
  });
});
