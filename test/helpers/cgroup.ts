// cgroup v2 as /proc shows it, read without cordon (tests check cordon's
// choice of tier and where its trees live against this).
import { accessSync, constants, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
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

/**
 * Limits, read without cordon: this process's own cgroup directory in the
 * cgroup v1 hierarchy of `controller` (mounted from its root), if there is
 * one. A tree's v1 cgroups for its limits are made below it.
 */
export function v1OwnDir(controller: 'memory' | 'pids' | 'cpu'): string | undefined {
  const mount = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' '))
    .find((f) => f.includes('-') && f[f.indexOf('-') + 1] === 'cgroup' && (f[f.indexOf('-') + 3] ?? '').split(',').includes(controller));
  if (!mount || mount[3] !== '/') return undefined;
  const line = readFileSync('/proc/self/cgroup', 'utf8')
    .split('\n')
    .find((l) => (l.split(':')[1] ?? '').split(',').includes(controller));
  const rel = line?.split(':').slice(2).join(':');
  if (!rel?.startsWith('/')) return undefined;
  return rel === '/' ? mount[4] : mount[4] + rel;
}

/** Whether `controller` is enabled for this process's cgroup v2 children (delegated). */
export function v2Delegated(controller: 'memory' | 'pids' | 'cpu'): boolean {
  const mount = cgroupMount();
  const own = cgroupOf('self');
  if (!mount || !own) return false;
  try {
    return readFileSync(`${own === '/' ? mount : mount + own}/cgroup.subtree_control`, 'utf8').split(/\s+/).includes(controller);
  } catch {
    return false;
  }
}

/** Whether the cgroup tier can enforce a limit on `controller` here: delegated in v2, or a writable v1 hierarchy. */
export function limitControllerHere(controller: 'memory' | 'pids' | 'cpu'): boolean {
  if (v2Delegated(controller)) return true;
  const dir = v1OwnDir(controller);
  if (!dir) return false;
  try {
    accessSync(dir, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** The per-tree cgroups (`cordon-*`) below this process's own, in v2 and each v1 hierarchy a limit uses: what a tree may leave behind. */
export function treeCgroupDirs(): string[] {
  const out: string[] = [];
  const mount = cgroupMount();
  const own = cgroupOf('self');
  const parents = [mount && own ? (own === '/' ? mount : mount + own) : undefined, v1OwnDir('memory'), v1OwnDir('pids'), v1OwnDir('cpu')];
  for (const parent of parents) {
    if (!parent) continue;
    try {
      for (const e of readdirSync(parent, { withFileTypes: true })) if (e.isDirectory() && e.name.startsWith('cordon-')) out.push(`${parent}/${e.name}`);
    } catch {
      // not readable: nothing of ours there
    }
  }
  return out;
}
