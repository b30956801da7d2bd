// The cgroup v2 "no internal processes" rule, solved the way container
// runtimes do, and only when the host asks (issue #15, docs/contract.md C12):
// a v2 cgroup other than the root cannot enable a controller for its children
// while it holds processes itself. prepareCgroupLimits({ moveHost: true })
// moves every process of the host's cgroup into a leaf of its own
// ("<the host's cgroup>/cordon-host"), then enables the memory, pids and cpu
// controllers in the host's cgroup's cgroup.subtree_control. The trees'
// cgroups are then made beside the leaf, in the host's cgroup (the anchor's
// cgroup_create: native/linux/tree.cc), under those controllers; the leaf
// stays a leaf.
//
// Every process, not only this one: the rule counts all of them (a shell
// that started the host, a sibling in the same systemd scope), so a move of
// this process alone would leave the cgroup unable to delegate. Where it
// cannot apply (no cgroup v2, a controller the cgroup is not given, not
// writable, a threaded cgroup) it throws a typed error before changing
// anything; a process it may not move is refused by name and everything it
// moved goes back. Never implicit: nothing else in cordon calls it.
import { accessSync, constants, existsSync, mkdirSync, readFileSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { forgetLimitSupport } from './anchor/cgroup.js';
import { CordonError, invalidArg } from './errors.js';
import { debug } from './debug.js';

/** The cgroup v2 controllers cordon's limits use. */
export type CgroupController = 'memory' | 'pids' | 'cpu';

/** The name of the leaf the host's processes are moved into, in the host's cgroup. */
export const HOST_LEAF = 'cordon-host';

const ALL: readonly CgroupController[] = ['memory', 'pids', 'cpu'];

export interface PrepareCgroupLimitsOptions {
  /** Must be `true`: consent to move every process of the host's cgroup into its leaf. */
  moveHost: true;
  /** The controllers to enable (default: memory, pids and cpu, what the limits option uses). */
  controllers?: readonly CgroupController[];
}

/** What prepareCgroupLimits() did (or found already done). */
export interface CgroupLimitsPrepared {
  /** 'enabled': this call enabled `enabled`; 'already-delegated': every controller asked for was enabled already, nothing changed. */
  outcome: 'enabled' | 'already-delegated';
  /** The host's cgroup (absolute path): the trees' cgroups are made in it, beside the leaf. */
  cgroup: string;
  /** The leaf the host's processes are in (absolute path), or null where there is none (nothing had to move: the root cgroup, or one already delegated). */
  leaf: string | null;
  /** The pids this call moved into the leaf (the host's own among them where it was not in the leaf yet). */
  moved: number[];
  /** The controllers this call enabled in the host's cgroup.subtree_control. */
  enabled: CgroupController[];
  /** The controllers asked for that were enabled before the call. */
  alreadyEnabled: CgroupController[];
}

/** Why prepareCgroupLimits() refused: `reason` on its ERR_CORDON_CGROUP_LEAF error. */
export type CgroupLeafRefusal =
  | 'not-linux'
  | 'no-cgroup-v2'
  | 'controllers-unavailable'
  | 'not-domain'
  | 'not-writable'
  | 'unmovable'
  | 'busy'
  | 'enable-failed';

/** The error prepareCgroupLimits() throws where it cannot apply; `pids` names the processes it could not move ('unmovable', 'busy'). */
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

/** What a plan will do, decided from the cgroup's files alone (nothing written). */
export interface CgroupLeafPlan {
  cgroup: string;
  leaf: string;
  /** Whether the processes must move: the cgroup is not the root (the rule does not bind the root) and holds some. */
  move: boolean;
  /** The pids in the cgroup when it was read (the move re-reads until none is left). */
  procs: number[];
  enable: CgroupController[];
  alreadyEnabled: CgroupController[];
}

function words(text: string): string[] {
  return text.split(/\s+/).filter((w) => w !== '');
}

function pidsIn(file: string): number[] {
  return words(readFileSync(file, 'utf8')).map(Number).filter((n) => Number.isInteger(n) && n > 0);
}

function writable(path: string): boolean {
  try {
    accessSync(path, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The decision, from the files of the cgroup v2 directory `cgroup` (the
 * host's): which controllers to enable, whether its processes must move into
 * `cgroup/cordon-host`, or the typed refusal. Reads, never writes.
 */
export function planCgroupLeaf(cgroup: string, controllers: readonly CgroupController[] = ALL): CgroupLeafPlan {
  let available: string[];
  try {
    available = words(readFileSync(`${cgroup}/cgroup.controllers`, 'utf8'));
  } catch (cause) {
    throw refused('no-cgroup-v2', `${cgroup} is not a cgroup v2 directory (no cgroup.controllers): limits through cgroup v2 need this host in a cgroup v2 hierarchy; nothing was changed.`, { path: cgroup, cause });
  }
  const missing = controllers.filter((c) => !available.includes(c));
  if (missing.length > 0) {
    // The root cgroup has no cgroup.type: there, a controller missing is one the v2 hierarchy lacks (bound to a v1 hierarchy).
    const where = existsSync(`${cgroup}/cgroup.type`)
      ? "a controller must be enabled in the parent cgroup's cgroup.subtree_control first (e.g. systemd's Delegate=yes, or a container runtime's cgroup)"
      : 'this is the root of the cgroup v2 hierarchy, which has no such controller (a hybrid host binds it to a cgroup v1 hierarchy, where the limits use it without a move)';
    throw refused(
      'controllers-unavailable',
      `The host's cgroup ${cgroup} is not given the ${missing.join(', ')} controller${missing.length > 1 ? 's' : ''} (its cgroup.controllers lists: ${available.join(' ') || 'none'}); ${where}. Nothing was changed.`,
      { path: cgroup },
    );
  }
  const enabledNow = words(readFileSync(`${cgroup}/cgroup.subtree_control`, 'utf8'));
  const alreadyEnabled = controllers.filter((c) => enabledNow.includes(c));
  const enable = controllers.filter((c) => !enabledNow.includes(c));
  const leaf = `${cgroup}/${HOST_LEAF}`;
  // The root cgroup has no cgroup.type (and the rule does not bind it).
  const isRoot = !existsSync(`${cgroup}/cgroup.type`);
  if (!isRoot) {
    const type = readFileSync(`${cgroup}/cgroup.type`, 'utf8').trim();
    if (type !== 'domain') {
      throw refused('not-domain', `The host's cgroup ${cgroup} is of type "${type}", not "domain": its controllers cannot be delegated to new cgroups this way. Nothing was changed.`, { path: cgroup });
    }
  }
  const procs = pidsIn(`${cgroup}/cgroup.procs`);
  const move = enable.length > 0 && !isRoot && procs.length > 0;
  if (enable.length > 0) {
    const need = [`${cgroup}/cgroup.subtree_control`, ...(move ? [cgroup, `${cgroup}/cgroup.procs`] : [])];
    const denied = need.filter((p) => !writable(p));
    if (denied.length > 0) {
      throw refused('not-writable', `This process may not write ${denied.join(', ')}: enabling controllers in the host's cgroup needs it (root, or a cgroup delegated to this user). Nothing was changed.`, { path: denied[0]! });
    }
    if (move && existsSync(leaf) && !statSync(leaf).isDirectory()) {
      throw refused('not-writable', `${leaf} exists and is not a directory. Nothing was changed.`, { path: leaf });
    }
  }
  return { cgroup, leaf, move, procs, enable, alreadyEnabled };
}

/** How many times the cgroup is re-read for processes that arrived during the move (forks of those not moved yet). */
const MOVE_ROUNDS = 16;

/**
 * Carries out a plan: the processes into the leaf (every pid the cgroup
 * lists, re-read until none is left), then the controllers enabled. A pid the
 * kernel refuses is a typed error naming it, after everything moved went back.
 */
export function applyCgroupLeaf(plan: CgroupLeafPlan): CgroupLimitsPrepared {
  const { cgroup, leaf } = plan;
  if (plan.enable.length === 0) {
    return { outcome: 'already-delegated', cgroup, leaf: existsSync(leaf) ? leaf : null, moved: [], enabled: [], alreadyEnabled: plan.alreadyEnabled };
  }
  const moved: number[] = [];
  let made = false;
  // Back into the host's cgroup: what this call moved, and, in a leaf it made, what was born there since.
  const undo = () => {
    let back = moved;
    if (made) {
      try {
        back = [...new Set([...moved, ...pidsIn(`${leaf}/cgroup.procs`)])];
      } catch {
        // the leaf's list unreadable: what was moved
      }
    }
    for (const pid of back) {
      try {
        writeFileSync(`${cgroup}/cgroup.procs`, String(pid));
      } catch (err) {
        debug('cgroup leaf: moving %d back: %s', pid, (err as Error).message);
      }
    }
    if (made) {
      try {
        rmdirSync(leaf);
      } catch (err) {
        debug('cgroup leaf: removing %s: %s', leaf, (err as Error).message);
      }
    }
  };
  if (plan.move) {
    try {
      mkdirSync(leaf);
      made = true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw refused('not-writable', `${leaf} cannot be made (${(err as NodeJS.ErrnoException).code}). Nothing was changed.`, { path: leaf, cause: err });
    }
    let left: number[] = [];
    for (let round = 0; round < MOVE_ROUNDS; round++) {
      left = pidsIn(`${cgroup}/cgroup.procs`);
      if (left.length === 0) break;
      const failed: { pid: number; code: string }[] = [];
      for (const pid of left) {
        try {
          writeFileSync(`${leaf}/cgroup.procs`, String(pid));
          moved.push(pid);
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code ?? 'EIO';
          if (code !== 'ESRCH') failed.push({ pid, code }); // ESRCH: it exited
        }
      }
      if (failed.length > 0) {
        undo();
        throw refused(
          'unmovable',
          `The host's cgroup ${cgroup} holds processes this process may not move into ${leaf}: ${failed.map((f) => `${f.pid} (${f.code})`).join(', ')}. ` +
            'Every process of the cgroup must move for its controllers to be enabled (the cgroup v2 "no internal processes" rule); run the host in a cgroup of its own (e.g. systemd-run --scope -p Delegate=yes). What was moved went back.',
          { path: cgroup, pids: failed.map((f) => f.pid) },
        );
      }
    }
    const still = left.length === 0 ? [] : pidsIn(`${cgroup}/cgroup.procs`);
    if (still.length > 0) {
      undo();
      throw refused('busy', `Processes kept arriving in the host's cgroup ${cgroup} during the move (still there: ${still.join(', ')}). What was moved went back; try again when it is quieter.`, { path: cgroup, pids: still });
    }
  }
  try {
    writeFileSync(`${cgroup}/cgroup.subtree_control`, plan.enable.map((c) => `+${c}`).join(' '));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'EIO';
    undo();
    throw refused('enable-failed', `Enabling ${plan.enable.join(', ')} in ${cgroup}/cgroup.subtree_control failed (${code}). What was moved went back.`, { path: cgroup, cause: err });
  }
  debug('cgroup leaf: moved %o into %s, enabled %o in %s', moved, leaf, plan.enable, cgroup);
  forgetLimitSupport();
  return { outcome: 'enabled', cgroup, leaf: plan.move || existsSync(leaf) ? leaf : null, moved, enabled: plan.enable, alreadyEnabled: plan.alreadyEnabled };
}

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

/**
 * Opt-in (never implicit): makes cgroup v2 limits possible for this host by
 * moving every process of its cgroup into the leaf `cordon-host` and enabling
 * the memory, pids and cpu controllers for the trees' cgroups. Returns what
 * it did; throws ERR_CORDON_CGROUP_LEAF (with `reason`, and `pids` for
 * processes it could not move) before changing anything where it cannot apply.
 * capabilities() reflects the new state after it.
 */
export function prepareCgroupLimits(options: PrepareCgroupLimitsOptions): CgroupLimitsPrepared {
  if (typeof options !== 'object' || options === null || options.moveHost !== true) {
    throw invalidArg(
      'moveHost',
      (options as { moveHost?: unknown } | null)?.moveHost,
      "true: prepareCgroupLimits() moves every process of the host's cgroup into a leaf of it, and does so only when asked",
    );
  }
  const controllers = options.controllers ?? ALL;
  if (!Array.isArray(controllers) || controllers.length === 0 || controllers.some((c) => !ALL.includes(c))) {
    throw invalidArg('controllers', controllers, "a non-empty list of 'memory', 'pids', 'cpu'");
  }
  if (process.platform !== 'linux') {
    throw refused('not-linux', `cgroups are Linux's; on ${process.platform} there is nothing to prepare (capabilities().guarantees.limits says what this host enforces). Nothing was changed.`);
  }
  const cgroup = hostCgroupDir();
  if (cgroup === null) {
    throw refused('no-cgroup-v2', 'This host has no cgroup v2 hierarchy cordon can find (no cgroup2 mount from its root in /proc/self/mountinfo, or no 0:: line in /proc/self/cgroup). Nothing was changed.');
  }
  return applyCgroupLeaf(planCgroupLeaf(cgroup, [...new Set(controllers)]));
}
