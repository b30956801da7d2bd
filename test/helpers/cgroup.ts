// cgroup v2 as /proc shows it, read without cordon (tests check cordon's
// choice of tier and where its trees live against this).
import { accessSync, constants, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
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

/**
 * Freezes a process (cgroup v2 freezer) by moving it into a new cgroup beside
 * this process's own: a frozen process does not run, whatever SIGCONT it gets,
 * until thawed; SIGKILL still ends it. `release()` thaws it and removes the
 * cgroup once the process is gone (bounded). Needs cgroupWritable().
 */
export function freeze(pid: number): { dir: string; release(): Promise<void> } {
  const own = cgroupOf('self')!;
  const dir = `${own === '/' ? cgroupMount()! : cgroupMount()! + own}/test-freeze-${pid}`;
  mkdirSync(dir);
  writeFileSync(`${dir}/cgroup.procs`, String(pid));
  writeFileSync(`${dir}/cgroup.freeze`, '1');
  return {
    dir,
    async release() {
      try {
        writeFileSync(`${dir}/cgroup.freeze`, '0');
      } catch {
        // gone
      }
      for (const deadline = Date.now() + 5000; Date.now() < deadline; ) {
        try {
          rmdirSync(dir);
          return;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
          await new Promise((r) => setTimeout(r, 20)); // EBUSY: the process is still in it
        }
      }
      throw new Error(`the test cgroup ${dir} still had a process after 5 s`);
    },
  };
}

/** Whether the process is frozen by its cgroup (cgroup.events says frozen 1). */
export function frozen(pid: number): boolean {
  const dir = cgroupDirOf(pid);
  if (!dir) return false;
  try {
    return /^frozen 1$/m.test(readFileSync(`${dir}/cgroup.events`, 'utf8'));
  } catch {
    return false;
  }
}
