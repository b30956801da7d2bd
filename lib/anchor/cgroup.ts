// The cgroup tier, on the host's side: the tree's cgroup is a second handle on
// the tree that the host holds too (READY names it). Where the anchor cannot
// finish (stopped, stuck, dead), the host ends the tree through it. A
// directory exists until it is removed, so there is no recycled identity.
import { accessSync, constants, existsSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { debug } from '../debug.js';

/** How long the host waits for a killed cgroup to be empty before it removes it. */
const EMPTY_WAIT_MS = 2000;

/** cgroup.kill: SIGKILL to every process in the cgroup and below, new forks included. */
export function killCgroup(dir: string): void {
  try {
    writeFileSync(`${dir}/cgroup.kill`, '1');
  } catch (err) {
    debug('cgroup.kill of %s failed: %s', dir, (err as Error).message);
  }
}

/**
 * The anchor gone before its tree was quiescent: SIGKILL to everything in the
 * tree's cgroup, then, once the kernel says it is empty (bounded), the cgroup
 * goes too.
 */
export async function endCgroup(dir: string): Promise<void> {
  const populated = () => {
    try {
      return /^populated 1$/m.test(readFileSync(`${dir}/cgroup.events`, 'utf8'));
    } catch {
      return false; // gone
    }
  };
  try {
    if (existsSync(`${dir}/cgroup.kill`)) writeFileSync(`${dir}/cgroup.kill`, '1');
    debug('anchor gone with members left: cgroup.kill of %s', dir);
  } catch (err) {
    debug('cgroup.kill of %s failed: %s', dir, (err as Error).message);
  }
  for (const deadline = Date.now() + EMPTY_WAIT_MS; populated() && Date.now() < deadline; ) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  removeCgroupDir(dir, 0);
}

/** A tree's cgroup and any sub-cgroups (nested cordon trees), bottom-up; the kernel refuses any with a process in it. */
function removeCgroupDir(dir: string, depth: number): void {
  try {
    if (depth < 32) {
      for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) removeCgroupDir(`${dir}/${e.name}`, depth + 1);
    }
    rmdirSync(dir);
  } catch (err) {
    debug('removing the cgroup %s: %s', dir, (err as Error).message);
  }
}

/**
 * The v1 cgroups an anchor made for its tree's limits (LIMITDIR), once the
 * tree is gone: every member was in the tree's v2 cgroup too, which
 * endCgroup() has emptied. A cgroup that still holds a process is refused by
 * the kernel and left (traced).
 */
export function removeLimitDirs(dirs: readonly string[]): void {
  for (const dir of dirs) removeCgroupDir(dir, 0);
}

/** Where the cgroup tier can enforce each limit on this host: 'v2', 'v1', or null (not at all). */
export interface LimitSupport {
  memory: 'v2' | 'v1' | null;
  processes: 'v2' | 'v1' | null;
  cpu: 'v2' | 'v1' | null;
}

function readOr(path: string, fallback: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return fallback;
  }
}

let support: LimitSupport | undefined;

/** The next limitSupport() probes again (after prepareCgroupLimits() enabled controllers). */
export function forgetLimitSupport(): void {
  support = undefined;
}

/**
 * Probed once (again after forgetLimitSupport()), as the anchor will find it
 * (native/posix/cgroup_limits.cc): a controller enabled in this process's v2
 * cgroup's cgroup.subtree_control (its trees' cgroups are made below it; in
 * the "cordon-host" leaf, the cgroup that holds the leaf's), else a v1 hierarchy of the
 * controller mounted from its root whose cgroup of this process is writable.
 */
export function limitSupport(): LimitSupport {
  if (support) return support;
  const mountinfo = readOr('/proc/self/mountinfo', '').split('\n');
  const own = readOr('/proc/self/cgroup', '').split('\n');
  let delegated: string[] = [];
  const v2 = mountinfo.find((l) => l.includes(' - cgroup2 '));
  const v2Rel = own.find((l) => l.startsWith('0::'))?.slice(3);
  if (v2 !== undefined && v2Rel !== undefined) {
    const [, , , root, point] = v2.split(' ');
    // In the leaf prepareCgroupLimits() moved the host into, the trees are made beside it (cgroup_create).
    const rel = v2Rel.endsWith('/cordon-host') ? v2Rel.slice(0, -'/cordon-host'.length) : v2Rel;
    if (root === '/' && point) delegated = readOr(`${point}${rel === '/' ? '' : rel}/cgroup.subtree_control`, '').trim().split(/\s+/);
  }
  const v1 = (controller: string): boolean => {
    const mount = mountinfo.find((l) => {
      const after = l.split(' - cgroup ')[1];
      return after !== undefined && (after.split(' ')[1] ?? '').split(',').includes(controller);
    });
    const line = own.find((l) => (l.split(':')[1] ?? '').split(',').includes(controller));
    if (mount === undefined || line === undefined) return false;
    const [, , , root, point] = mount.split(' ');
    const rel = line.slice(line.indexOf(':', line.indexOf(':') + 1) + 1);
    if (root !== '/' || !point || !rel.startsWith('/')) return false;
    try {
      accessSync(rel === '/' ? point : `${point}${rel}`, constants.W_OK);
      return true;
    } catch {
      return false;
    }
  };
  const where = (controller: string) => (delegated.includes(controller) ? 'v2' : v1(controller) ? 'v1' : null);
  support = { memory: where('memory'), processes: where('pids'), cpu: where('cpu') };
  debug('limits: %o', support);
  return support;
}

/** The name of the leaf the host's processes are moved into, in the host's cgroup (prepareCgroupLimits). */
export const HOST_LEAF = 'cordon-host';

/**
 * This process's cgroup v2 directory as the trees see it: its own cgroup, or
 * the cgroup holding the leaf it was moved into. Null without cgroup v2 (or a
 * cgroup2 mount of a subtree, inside a cgroup namespace: not handled).
 */
export function hostCgroupDir(): string | null {
  let mountinfo: string;
  let own: string;
  try {
    mountinfo = readFileSync('/proc/self/mountinfo', 'utf8');
    own = readFileSync('/proc/self/cgroup', 'utf8');
  } catch {
    return null;
  }
  const mount = mountinfo.split('\n').find((l) => l.includes(' - cgroup2 '))?.split(' ');
  const rel = /^0::(\/.*)$/m.exec(own)?.[1];
  if (!mount || mount[3] !== '/' || !mount[4] || rel === undefined) return null;
  let dir = rel === '/' ? mount[4] : `${mount[4]}${rel}`;
  if (dir.endsWith(`/${HOST_LEAF}`)) dir = dir.slice(0, -HOST_LEAF.length - 1);
  return dir;
}
