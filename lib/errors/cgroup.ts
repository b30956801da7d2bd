// prepareCgroupLimits()'s refusals (lib/cgroup-leaf.ts): each carries the
// code ERR_CORDON_CGROUP_LEAF, a `reason` and the `pids` it names (the other
// processes of the host's cgroup, or the host's own where it could not
// move), and is thrown before anything is changed, or after the host went
// back.
import { CordonError } from './error.js';

/** Why prepareCgroupLimits() refused: `reason` on its ERR_CORDON_CGROUP_LEAF error. */
export type CgroupLeafRefusal =
  | 'not-linux'
  | 'no-cgroup-v2'
  | 'controllers-unavailable'
  | 'not-domain'
  | 'not-writable'
  | 'not-alone'
  | 'unmovable'
  | 'busy'
  | 'enable-failed';

/** The error prepareCgroupLimits() throws where it cannot apply; `pids` names the other processes of the host's cgroup ('not-alone', 'busy') or the one it could not move ('unmovable'). */
export interface CgroupLeafError extends CordonError {
  code: 'ERR_CORDON_CGROUP_LEAF';
  reason: CgroupLeafRefusal;
  pids: number[];
}

function refused(reason: CgroupLeafRefusal, message: string, extra: { path?: string; pids?: number[]; cause?: unknown } = {}): CgroupLeafError {
  const err = new CordonError(message, {
    code: 'ERR_CORDON_CGROUP_LEAF',
    stage: 'input',
    ...(extra.path === undefined ? {} : { path: extra.path }),
    ...(extra.cause === undefined ? {} : { cause: extra.cause }),
  });
  return Object.assign(err, { reason, pids: extra.pids ?? [] }) as CgroupLeafError;
}

/** Not Linux: there are no cgroups to prepare. */
export function cgroupNotLinux(platform: NodeJS.Platform): CgroupLeafError {
  return refused('not-linux', `cgroups are Linux's; on ${platform} there is nothing to prepare (capabilities().guarantees.limits says what this host enforces). Nothing was changed.`);
}

/** No cgroup v2 hierarchy holds this host. */
export function noCgroupV2(): CgroupLeafError {
  return refused('no-cgroup-v2', 'This host has no cgroup v2 hierarchy cordon can find (no cgroup2 mount from its root in /proc/self/mountinfo, or no 0:: line in /proc/self/cgroup). Nothing was changed.');
}

/** The host's cgroup directory has no cgroup.controllers. */
export function notCgroupV2Dir(cgroup: string, cause: unknown): CgroupLeafError {
  return refused('no-cgroup-v2', `${cgroup} is not a cgroup v2 directory (no cgroup.controllers): limits through cgroup v2 need this host in a cgroup v2 hierarchy; nothing was changed.`, { path: cgroup, cause });
}

/** Controllers the host's cgroup is not given; `root`: the cgroup is the root of the v2 hierarchy. */
export function controllersUnavailable(cgroup: string, missing: readonly string[], available: readonly string[], root: boolean): CgroupLeafError {
  // At the root, a controller missing is one the v2 hierarchy lacks (bound to a v1 hierarchy).
  const where = root
    ? 'this is the root of the cgroup v2 hierarchy, which has no such controller (a hybrid host binds it to a cgroup v1 hierarchy, where the limits use it without a move)'
    : "a controller must be enabled in the parent cgroup's cgroup.subtree_control first (e.g. systemd's Delegate=yes, or a container runtime's cgroup)";
  return refused(
    'controllers-unavailable',
    `The host's cgroup ${cgroup} is not given the ${missing.join(', ')} controller${missing.length > 1 ? 's' : ''} (its cgroup.controllers lists: ${available.join(' ') || 'none'}); ${where}. Nothing was changed.`,
    { path: cgroup },
  );
}

/** The host's cgroup is threaded (or another type than "domain"). */
export function cgroupNotDomain(cgroup: string, type: string): CgroupLeafError {
  return refused('not-domain', `The host's cgroup ${cgroup} is of type "${type}", not "domain": its controllers cannot be delegated to new cgroups this way. Nothing was changed.`, { path: cgroup });
}

/** Files this process may not write (`denied`, at least one). */
export function cgroupNotWritable(denied: readonly string[]): CgroupLeafError {
  return refused('not-writable', `This process may not write ${denied.join(', ')}: enabling controllers in the host's cgroup needs it (root, or a cgroup delegated to this user). Nothing was changed.`, { path: denied[0]! });
}

/** The leaf's path is taken by something else than a directory. */
export function leafNotDirectory(leaf: string): CgroupLeafError {
  return refused('not-writable', `${leaf} exists and is not a directory. Nothing was changed.`, { path: leaf });
}

/** The leaf could not be made. */
export function leafUnmakeable(leaf: string, cause: NodeJS.ErrnoException): CgroupLeafError {
  return refused('not-writable', `${leaf} cannot be made (${cause.code}). Nothing was changed.`, { path: leaf, cause });
}

/** The host's cgroup holds other processes than the host's (`others`): they are not the host's to move. */
export function cgroupNotAlone(cgroup: string, others: readonly number[]): CgroupLeafError {
  return refused(
    'not-alone',
    `The host's cgroup ${cgroup} holds other processes than this one (${others.join(', ')}). prepareCgroupLimits() moves only the host's own process, never one it did not start, ` +
      'and the cgroup v2 "no internal processes" rule lets a cgroup enable controllers only once no process is left in it; run the host in a cgroup of its own (e.g. systemd-run --scope -p Delegate=yes, or a container). Nothing was changed.',
    { path: cgroup, pids: [...others] },
  );
}

/** The kernel refused to move the host's process into the leaf (the leaf made by this call went again). */
export function cgroupUnmovable(cgroup: string, leaf: string, failed: readonly { pid: number; code: string }[]): CgroupLeafError {
  return refused(
    'unmovable',
    `The host's process could not be moved from ${cgroup} into ${leaf}: ${failed.map((f) => `${f.pid} (${f.code})`).join(', ')}. ` +
      'Run the host in a cgroup of its own that it may write (e.g. systemd-run --scope -p Delegate=yes). Nothing was changed.',
    { path: cgroup, pids: failed.map((f) => f.pid) },
  );
}

/** Other processes arrived in the host's cgroup during the move (the host went back). */
export function cgroupBusy(cgroup: string, still: number[]): CgroupLeafError {
  return refused('busy', `Other processes arrived in the host's cgroup ${cgroup} during the move (${still.join(', ')}); they are not the host's to move. The host went back; run it in a cgroup of its own.`, { path: cgroup, pids: still });
}

/** Writing cgroup.subtree_control failed with `code` (the host went back). */
export function enableFailed(cgroup: string, enable: readonly string[], code: string, cause: unknown): CgroupLeafError {
  return refused('enable-failed', `Enabling ${enable.join(', ')} in ${cgroup}/cgroup.subtree_control failed (${code}). The host went back.`, { path: cgroup, cause });
}
