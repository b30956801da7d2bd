// The cgroup tier, on the host's side: the tree's cgroup is a second handle on
// the tree that the host holds too (READY names it). Where the anchor cannot
// finish (stopped, stuck, dead), the host ends the tree through it. A
// directory exists until it is removed, so there is no recycled identity.
import { existsSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
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
