// The cgroup v2 "no internal processes" rule, solved the way container
// runtimes do, and only when the host asks (docs/contract.md C12):
// a v2 cgroup other than the root cannot enable a controller for its children
// while it holds processes itself. prepareCgroupLimits({ moveHost: true })
// moves the host's own process into a leaf of its cgroup
// ("<the host's cgroup>/cordon-host"), then enables the memory, pids and cpu
// controllers in the host's cgroup's cgroup.subtree_control. The trees'
// cgroups are then made beside the leaf, in the host's cgroup (the anchor's
// cgroup_create: native/linux/cgroup.cc), under those controllers; the leaf
// stays a leaf.
//
// The host's own process and no other: a process the host did not start (a
// shell that started it, a sibling in the same systemd scope, PID 1 of a
// root host in init.scope) is never moved. Since the rule counts every
// process, a cgroup that holds any other is refused by pid ('not-alone')
// before anything changes: such a host belongs in a cgroup of its own. Where
// it cannot apply (no cgroup v2, a controller the cgroup is not given, not
// writable, a threaded cgroup) it throws a typed error before changing
// anything; a move the kernel refuses, or a process that arrives during the
// move, puts the host back. Never implicit: nothing else in cordon calls it.
import { accessSync, constants, existsSync, mkdirSync, readFileSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { forgetLimitSupport, HOST_LEAF, hostCgroupDir } from './anchor/cgroup.js';
import { retireWarmNow } from './anchor/warm.js';

export { HOST_LEAF, hostCgroupDir };
import * as errors from './errors.js';
import { invalidArg } from './errors.js';
import { debug } from './debug.js';

/** The cgroup v2 controllers cordon's limits use. */
export type CgroupController = 'memory' | 'pids' | 'cpu';


const ALL: readonly CgroupController[] = ['memory', 'pids', 'cpu'];

/** Why prepareCgroupLimits() refused, and the error it throws (built in lib/errors/cgroup.ts). */
export type { CgroupLeafError, CgroupLeafRefusal } from './errors.js';

export interface PrepareCgroupLimitsOptions {
  /** Must be `true`: consent to move the host's own process into a leaf of its cgroup. */
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
  /** The pids this call moved into the leaf: the host's own, where it was not in the leaf yet; never another. */
  moved: number[];
  /** The controllers this call enabled in the host's cgroup.subtree_control. */
  enabled: CgroupController[];
  /** The controllers asked for that were enabled before the call. */
  alreadyEnabled: CgroupController[];
}

/** What a plan will do, decided from the cgroup's files alone (nothing written). */
export interface CgroupLeafPlan {
  cgroup: string;
  leaf: string;
  /** Whether the host must move: the cgroup is not the root (the rule does not bind the root) and holds it. */
  move: boolean;
  /** The pids in the cgroup when it was read: the host's alone where it must move. */
  procs: number[];
  /** The host's pid: the one process the move may move. */
  self: number;
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
 * host's, whose process is `self`): which controllers to enable, whether the
 * host must move into `cgroup/cordon-host`, or the typed refusal, 'not-alone'
 * with the pids of every other process the cgroup holds where the host would
 * have to move. Reads, never writes.
 */
export function planCgroupLeaf(cgroup: string, controllers: readonly CgroupController[] = ALL, self = process.pid): CgroupLeafPlan {
  let available: string[];
  try {
    available = words(readFileSync(`${cgroup}/cgroup.controllers`, 'utf8'));
  } catch (cause) {
    throw errors.notCgroupV2Dir(cgroup, cause);
  }
  const missing = controllers.filter((c) => !available.includes(c));
  if (missing.length > 0) {
    // The root cgroup has no cgroup.type.
    throw errors.controllersUnavailable(cgroup, missing, available, !existsSync(`${cgroup}/cgroup.type`));
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
      throw errors.cgroupNotDomain(cgroup, type);
    }
  }
  const procs = pidsIn(`${cgroup}/cgroup.procs`);
  const move = enable.length > 0 && !isRoot && procs.length > 0;
  const others = procs.filter((pid) => pid !== self);
  if (move && others.length > 0) throw errors.cgroupNotAlone(cgroup, others);
  if (enable.length > 0) {
    const need = [`${cgroup}/cgroup.subtree_control`, ...(move ? [cgroup, `${cgroup}/cgroup.procs`] : [])];
    const denied = need.filter((p) => !writable(p));
    if (denied.length > 0) throw errors.cgroupNotWritable(denied);
    if (move && existsSync(leaf) && !statSync(leaf).isDirectory()) throw errors.leafNotDirectory(leaf);
  }
  return { cgroup, leaf, move, procs, self, enable, alreadyEnabled };
}

/**
 * Carries out a plan: the host's own process into the leaf (no other is
 * ever written to a cgroup.procs), then the controllers enabled. A move the
 * kernel refuses is a typed error naming the pid ('unmovable'); a process
 * found in the cgroup after the move (it arrived meanwhile) is 'busy'; both
 * after the host went back.
 */
export function applyCgroupLeaf(plan: CgroupLeafPlan): CgroupLimitsPrepared {
  const { cgroup, leaf, self } = plan;
  if (plan.enable.length === 0) {
    return { outcome: 'already-delegated', cgroup, leaf: existsSync(leaf) ? leaf : null, moved: [], enabled: [], alreadyEnabled: plan.alreadyEnabled };
  }
  const moved: number[] = [];
  let made = false;
  // Back into the host's cgroup: the host, if this call moved it; the leaf, if this call made it.
  const undo = () => {
    for (const pid of moved) {
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
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw errors.leafUnmakeable(leaf, err as NodeJS.ErrnoException);
    }
    try {
      writeFileSync(`${leaf}/cgroup.procs`, String(self));
      moved.push(self);
    } catch (err) {
      undo();
      throw errors.cgroupUnmovable(cgroup, leaf, [{ pid: self, code: (err as NodeJS.ErrnoException).code ?? 'EIO' }]);
    }
    const still = pidsIn(`${cgroup}/cgroup.procs`).filter((pid) => pid !== self);
    if (still.length > 0) {
      undo();
      throw errors.cgroupBusy(cgroup, still);
    }
  }
  try {
    writeFileSync(`${cgroup}/cgroup.subtree_control`, plan.enable.map((c) => `+${c}`).join(' '));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'EIO';
    undo();
    throw errors.enableFailed(cgroup, plan.enable, code, err);
  }
  debug('cgroup leaf: moved %o into %s, enabled %o in %s', moved, leaf, plan.enable, cgroup);
  forgetLimitSupport();
  return { outcome: 'enabled', cgroup, leaf: plan.move || existsSync(leaf) ? leaf : null, moved, enabled: plan.enable, alreadyEnabled: plan.alreadyEnabled };
}


/**
 * Opt-in (never implicit): makes cgroup v2 limits possible for this host by
 * moving its own process (and no other) into the leaf `cordon-host` and
 * enabling the memory, pids and cpu controllers for the trees' cgroups.
 * Returns what it did; throws ERR_CORDON_CGROUP_LEAF (with `reason`, and
 * `pids`: the other processes the cgroup holds, or the one it could not
 * move) before changing anything where it cannot apply, or after putting the
 * host back. capabilities() reflects the new state after it.
 */
export function prepareCgroupLimits(options: PrepareCgroupLimitsOptions): CgroupLimitsPrepared {
  if (typeof options !== 'object' || options === null || options.moveHost !== true) {
    throw invalidArg(
      'moveHost',
      (options as { moveHost?: unknown } | null)?.moveHost,
      "true: prepareCgroupLimits() moves the host's own process into a leaf of its cgroup, and does so only when asked",
    );
  }
  const controllers = options.controllers ?? ALL;
  if (!Array.isArray(controllers) || controllers.length === 0 || controllers.some((c) => !ALL.includes(c))) {
    throw invalidArg('controllers', controllers, "a non-empty list of 'memory', 'pids', 'cpu'");
  }
  if (process.platform !== 'linux') {
    throw errors.cgroupNotLinux(process.platform);
  }
  const cgroup = hostCgroupDir();
  if (cgroup === null) throw errors.noCgroupV2();
  // The host's own warm anchors (anchor/warm.ts) wait in its cgroup: they
  // exit first (they would be processes it does not move), and the next
  // ones start in the leaf.
  retireWarmNow();
  return applyCgroupLeaf(planCgroupLeaf(cgroup, [...new Set(controllers)]));
}
