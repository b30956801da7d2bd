// C11: what this host's tier guarantees, reported and never assumed. The
// README's guarantee table is checked against this (test/capabilities.test.ts).
import { readFileSync } from 'node:fs';
import { CordonError } from './errors.js';
import { probe } from './native.js';
import type { Tier } from './options.js';

export type EscapeeCatch = 'always' | 'while-parented' | 'never';

export interface Guarantees {
  /** C1: containment is in place before the command's first instruction. */
  containedBeforeExec: boolean;
  /** C2/C5: descendants that setsid, double-fork or nohup are still caught. */
  catchesEscapees: EscapeeCatch;
  /** C2: nothing is signalled through a number that may have been recycled. */
  pidReuseSafe: boolean;
  /** C8: the tree is terminated when the host is SIGKILLed, with no host code. */
  survivesHostSigkill: boolean;
  /** C2: if the anchor itself dies, the host still ends the tree through a handle it holds (a cgroup, a job). */
  survivesAnchorDeath: boolean;
  /** C3: polite signal, grace, then forced kill, to every member. */
  gracefulStop: boolean;
  /** C4: output reading is bounded after the root exits. */
  waitDelay: boolean;
  /** C9: every orphan of the tree is reaped by the anchor. */
  reapsOrphans: boolean;
  /** Resource limits (memory, pids) on the whole tree. */
  limits: boolean;
  /**
   * The command runs in a cgroup namespace rooted at its tree's cgroup (the
   * cgroup tier, where the host has CAP_SYS_ADMIN): its view of cgroup paths
   * starts at its own cgroup. Not a wall against a privileged member (see
   * docs/contract.md, "What cordon is not").
   */
  cgroupNamespace: boolean;
  /**
   * A member running with the host's privileges cannot leave the tree or stop
   * its anchor. Never given: cordon is not a sandbox (docs/contract.md).
   */
  holdsHostileMembers: false;
}

export interface Capabilities {
  platform: NodeJS.Platform;
  /** The tier spawn() uses by default on this host (or the one asked for). */
  tier: Tier;
  /** Every tier this host can run. */
  tiers: Tier[];
  pidfd: boolean;
  guarantees: Guarantees;
  /** Why a guarantee is weaker than the strongest tier's, in words. */
  notes: string[];
}

function tiersHere(): Tier[] {
  if (process.platform === 'linux') {
    const p = probe();
    if (!p.subreaper) return ['process-group'];
    return p.cgroup ? ['cgroup', 'subreaper', 'process-group'] : ['subreaper', 'process-group'];
  }
  if (process.platform === 'darwin') return ['process-group'];
  if (process.platform === 'win32') return probe().jobObjects ? ['job-object'] : [];
  return [];
}

export function defaultTier(): Tier {
  const env = process.env.CORDON_TIER;
  const tiers = tiersHere();
  if ((env === 'cgroup' || env === 'subreaper' || env === 'process-group' || env === 'job-object') && tiers.includes(env)) return env;
  if (tiers.length === 0) {
    throw new CordonError(`cordon has no containment tier for ${process.platform} in this build.`, {
      code: 'ERR_CORDON_UNSUPPORTED',
      stage: 'launch',
    });
  }
  return tiers[0]!;
}

/**
 * What a tier guarantees on a platform: a pure function, so the README's
 * table is generated from the same source as capabilities().
 */
export function tierGuarantees(
  platform: NodeJS.Platform,
  tier: Tier,
  pidfd: boolean,
  capSysAdmin = true,
): { guarantees: Guarantees; notes: string[] } {
  const notes: string[] = [];
  notes.push(
    'cordon contains careless and daemonizing programs, not hostile ones: a member running as the host\'s user can signal, stop or ptrace the anchor, and one with root privileges can leave the tree\'s cgroup or job. Use a separate user, a container or VM for untrusted code (docs/contract.md).',
  );
  if (tier === 'job-object') {
    notes.push('Each tree runs in its own Job Object with kill-on-close and no breakaway: the command is created suspended and assigned before it runs; every descendant (detached or not) stays in the job.');
    notes.push('Identity is held by handles (the job, the root process), never by a pid number.');
    notes.push('The polite stop is CTRL_BREAK_EVENT to the root\'s console process group (members that left the console or the group are reached only by the forced TerminateJobObject); without a shared console the forced stop follows at once.');
    notes.push('When the host exits, Node\'s own kill-on-close job ends the anchor helper with it, so the tree is ended at once (no grace).');
    notes.push('Windows has no zombies: there are no orphans to reap (reapsOrphans holds trivially).');
    notes.push('Whether anyone still holds the captured output is read from the pipe\'s handle count; which member holds it is not determined (leftovers report heldOutput false).');
    notes.push('No job limits are set: memory and process-count limits are not enforced.');
    return {
      guarantees: {
        containedBeforeExec: true,
        catchesEscapees: 'always',
        pidReuseSafe: true,
        survivesHostSigkill: true,
        survivesAnchorDeath: true,
        gracefulStop: true,
        waitDelay: true,
        reapsOrphans: true,
        limits: false,
        cgroupNamespace: false,
        holdsHostileMembers: false,
      },
      notes,
    };
  }
  if (tier === 'process-handle') {
    notes.push("Best-effort fallback: the job could not be assigned, so only the root (by its handle) is contained; descendants are not (results say coverage: 'partial').");
    return {
      guarantees: {
        containedBeforeExec: false,
        catchesEscapees: 'never',
        pidReuseSafe: true,
        survivesHostSigkill: false,
        survivesAnchorDeath: false,
        gracefulStop: true,
        waitDelay: true,
        reapsOrphans: true,
        limits: false,
        cgroupNamespace: false,
        holdsHostileMembers: false,
      },
      notes,
    };
  }
  if (tier === 'subreaper' || tier === 'cgroup') {
    if (!pidfd) notes.push("This kernel has no pidfd: members that are not the anchor's own children are signalled by a verified pid, with a small reuse window.");
    if (tier === 'cgroup') {
      notes.push("Each tree's command is born in a cgroup of its own (clone3 into the cgroup), below this process's cgroup; the forced stop is cgroup.kill, which reaches every member at once, new forks included.");
      notes.push('If the anchor itself dies, the host kills the tree through its cgroup.');
      notes.push('No cgroup controllers are enabled for the tree: memory and pid limits are not enforced.');
      notes.push(
        capSysAdmin
          ? "The command runs in a cgroup namespace rooted at its tree's cgroup. A member with CAP_SYS_ADMIN can still move itself to an ancestor cgroup through a cgroup2 mount it can reach (unless that mount has nsdelegate) or setns() out of the namespace."
          : 'No cgroup namespace for the command: the host lacks CAP_SYS_ADMIN.',
      );
    } else {
      notes.push('No cgroup is used (none is writable here, or the subreaper tier was asked for): memory and pid limits are not enforced, and a tree whose anchor is killed is not ended.');
    }
    return {
      guarantees: {
        containedBeforeExec: true,
        catchesEscapees: 'always',
        pidReuseSafe: pidfd,
        survivesHostSigkill: true,
        survivesAnchorDeath: tier === 'cgroup',
        gracefulStop: true,
        waitDelay: true,
        reapsOrphans: true,
        limits: false,
        cgroupNamespace: tier === 'cgroup' && capSysAdmin,
        holdsHostileMembers: false,
      },
      notes,
    };
  }
  notes.push("The tree runs in a process group of its own, which the anchor is not in (the anchor is in a session of its own) and which the anchor's unreaped pin child keeps from being recycled: termination signals the whole group at once, and quiescence of the group is the kernel's word, not a scan's.");
  notes.push("A member that leaves the process group (setsid, daemons) is caught only if a snapshot saw it while it was still a descendant; one orphaned before any snapshot escapes. So results say coverage: 'partial' and list in leftGroup the members seen leaving.");
  notes.push('Orphans are reparented to init, not to the anchor: init reaps them.');
  if (!pidfd) {
    notes.push(
      platform === 'darwin'
        ? "macOS has no pidfd: members that left the group are signalled by pid after their start time is verified, with a small reuse window (the group id itself is pinned by the anchor's pin child)."
        : 'Members are signalled by pid after their start time is verified, with a small reuse window.',
    );
  }
  return {
    guarantees: {
      containedBeforeExec: true,
      catchesEscapees: 'while-parented',
      pidReuseSafe: pidfd,
      survivesHostSigkill: true,
      survivesAnchorDeath: false,
      gracefulStop: true,
      waitDelay: true,
      reapsOrphans: false,
      limits: false,
      cgroupNamespace: false,
      holdsHostileMembers: false,
    },
    notes,
  };
}

/** Linux: whether this process has CAP_SYS_ADMIN (bit 21 of CapEff), which a cgroup namespace needs. */
function hasCapSysAdmin(): boolean {
  try {
    const m = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    return m !== null && (BigInt(`0x${m[1]}`) & (1n << 21n)) !== 0n;
  } catch {
    return false;
  }
}

/**
 * What a result can claim about the tree (C11): 'complete' where the tier
 * catches every descendant (cgroup, subreaper, job-object), 'partial' where
 * it cannot see what left its reach (process-group: members that left the
 * process group unseen, e.g. setsid'd daemons; process-handle: every
 * descendant). Derived from the same guarantees capabilities() reports.
 */
export type Coverage = 'complete' | 'partial';

export function coverageOf(tier: Tier): Coverage {
  return tierGuarantees(process.platform, tier, false).guarantees.catchesEscapees === 'always' ? 'complete' : 'partial';
}

export function capabilities(options: { tier?: Tier } = {}): Capabilities {
  const tiers = tiersHere();
  const tier = options.tier ?? defaultTier();
  if (!tiers.includes(tier)) {
    throw new CordonError(`The tier '${tier}' is not available on this host (available: ${tiers.join(', ') || 'none'}).`, {
      code: 'ERR_CORDON_CONTAINMENT',
      stage: 'input',
    });
  }
  const pidfd = process.platform === 'linux' && probe().pidfd;
  const { guarantees, notes } = tierGuarantees(process.platform, tier, pidfd, process.platform === 'linux' && hasCapSysAdmin());
  if (process.platform === 'win32' && probe().ctrlBreak === false) {
    guarantees.gracefulStop = false;
    notes.push(
      probe().wine
        ? 'Under Wine, GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT) is not implemented: terminate() is the forced TerminateJobObject at once.'
        : 'CTRL_BREAK_EVENT cannot be delivered here: terminate() is the forced TerminateJobObject at once.',
    );
  }
  return { platform: process.platform, tier, tiers, pidfd, guarantees, notes };
}
