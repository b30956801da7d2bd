// cgroup v2 as /proc shows it, read without cordon (tests check cordon's
// choice of tier and where its trees live against this).
import { accessSync, constants, readFileSync } from 'node:fs';
import { release } from 'node:os';

/** Where cgroup v2 is mounted, if it is. */
export function cgroupMount(): string | undefined {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .find((line) => / - cgroup2 /.test(line))
    ?.split(' ')[4];
}

/** The cgroup v2 path of a process (the `0::` line of /proc/<pid>/cgroup). */
export function cgroupOf(pid: number | 'self'): string | undefined {
  return /^0::(\/.*)$/m.exec(readFileSync(`/proc/${pid}/cgroup`, 'utf8'))?.[1];
}

/**
 * Where cordon offers the cgroup tier: cgroup v2 is mounted, the kernel is
 * 5.14+ (clone3 into a cgroup, cgroup.kill) and this process's own cgroup
 * directory is writable.
 */
export function cgroupWritable(): boolean {
  const [major = 0, minor = 0] = release().split('.').map((n) => parseInt(n, 10));
  if (major < 5 || (major === 5 && minor < 14)) return false;
  try {
    const mount = cgroupMount();
    const own = cgroupOf('self');
    if (!mount || !own) return false;
    accessSync(own === '/' ? mount : mount + own, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** The cgroup v2 directory of a process, as an absolute path (undefined without cgroup v2). */
export function cgroupDirOf(pid: number): string | undefined {
  const mount = cgroupMount();
  let path: string | undefined;
  try {
    path = cgroupOf(pid);
  } catch {
    return undefined; // gone
  }
  if (!mount || !path) return undefined;
  return path === '/' ? mount : mount + path;
}
