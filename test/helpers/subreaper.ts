// Whether this host lets a process become a child subreaper, measured without
// cordon: the tiers that reap orphans (subreaper, cgroup) need it. A kernel
// since 3.4 allows it; an emulator may not (Debian's qemu-user 7.2 answers
// EINVAL). .ci/arm64.sh measures it with a probe built for the emulated
// architecture and says so in CORDON_TEST_SUBREAPER (1 or 0); elsewhere the
// kernel is asked directly through python3's ctypes (PR_SET_CHILD_SUBREAPER
// in a short-lived process of its own). Without either, the run cannot tell:
// subreaperUnknown() says why, and a test that needs the answer is skipped.
import { execFileSync } from 'node:child_process';
import { missing } from './requirements.js';

const PROBE = [
  'import ctypes, sys',
  'libc = ctypes.CDLL(None, use_errno=True)',
  'sys.stdout.write("1" if libc.prctl(36, 1, 0, 0, 0) == 0 else "0")', // PR_SET_CHILD_SUBREAPER
].join('\n');

let measured: boolean | undefined;

/** Why this run cannot tell whether the host allows a subreaper, or undefined where it can. */
export function subreaperUnknown(): string | undefined {
  return process.env.CORDON_TEST_SUBREAPER === undefined ? missing('python3') : undefined;
}

/** Whether the host allows a subreaper; throws where subreaperUnknown() says why it cannot tell. */
export function subreaperAvailable(): boolean {
  if (measured !== undefined) return measured;
  const told = process.env.CORDON_TEST_SUBREAPER;
  if (told === '0' || told === '1') return (measured = told === '1');
  if (told !== undefined) throw new Error(`CORDON_TEST_SUBREAPER must be 0 or 1, not ${JSON.stringify(told)}`);
  const unknown = subreaperUnknown();
  if (unknown) throw new Error(`cannot tell whether this host allows a subreaper: ${unknown}`);
  return (measured = execFileSync('python3', ['-c', PROBE], { encoding: 'utf8', timeout: 30_000 }).trim() === '1');
}
