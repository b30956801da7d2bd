// Containment refusals: no tier, a tier this host lacks, limits it cannot
// enforce, containment or a privilege drop the anchor could not set up.
// Nothing of the command ran.
import { CordonError, errnoName } from './error.js';

/** This build has no containment tier for the platform (stage 'launch'). */
export function noTier(platform: NodeJS.Platform): CordonError {
  return new CordonError(`cordon has no containment tier for ${platform} in this build.`, {
    code: 'ERR_CORDON_UNSUPPORTED',
    stage: 'launch',
  });
}

/** A tier asked for that this host does not have (stage 'input'). */
export function tierUnavailable(tier: string, tiers: readonly string[]): CordonError {
  return new CordonError(`The tier '${tier}' is not available on this host (available: ${tiers.join(', ') || 'none'}).`, {
    code: 'ERR_CORDON_CONTAINMENT',
    stage: 'input',
  });
}

/** Limits asked for under 'strict' that this host's tier cannot enforce. */
export function limitsUnenforceable(tier: string, which: string[], unclaimed: boolean): CordonError {
  return new CordonError(
    `The ${tier} tier ${unclaimed ? 'does not guarantee' : 'cannot enforce'} the ${which.join(', ')} limit${which.length > 1 ? 's' : ''} on this host (capabilities().guarantees.limits and its notes say where it can). ` +
      (unclaimed
        ? "The job-object tier sets limits on the tree's Job Object, but their enforcement by Windows has not been observed by cordon's tests (Wine, where they run, does not enforce them). Use containment: 'best-effort' to run with them set where the OS takes them (the result says which in limits.accepted, and limits.applied false)."
        : "Use the cgroup tier where the cgroup controllers are delegated or the cgroup v1 hierarchies are writable, or containment: 'best-effort' to run without the limits (the result says limits.applied false)."),
    { code: 'ERR_CORDON_CONTAINMENT', stage: 'input' },
  );
}

/** The anchor's NOCONTAIN: the tier's containment could not be set up; nothing ran. */
export function noContainment(errno: number, what: string): CordonError {
  const code = errnoName(errno);
  if (what === 'handle-list') {
    // Windows: the command would have inherited every inheritable handle of the anchor; in no mode is it run so.
    return new CordonError(
      `The command's inherited handles could not be limited to its stdio (PROC_THREAD_ATTRIBUTE_HANDLE_LIST, ${code}); nothing ran. ` +
        'cordon never starts a command that would inherit the anchor\'s other handles, in any containment mode.',
      { code: 'ERR_CORDON_CONTAINMENT', errno: -Math.abs(errno), syscall: what, stage: 'launch' },
    );
  }
  if (what === 'confine') {
    // The anchor could not build the Landlock ruleset or the Seatbelt profile, or the command's side of its fork could not enter it (or its network namespace).
    return new CordonError(
      `The tree could not be confined as asked (confine: ${code}); nothing ran. ` +
        'Linux: the kernel refused the Landlock ruleset, one of its paths, the network namespace or landlock_restrict_self. ' +
        'macOS: a path holds a control character, which no Seatbelt profile is given, or sandbox_init refused the profile (the host may be in a sandbox already). ' +
        'CORDON_TRACE=<file> has the anchor name the step; see docs/confine.md.',
      { code: 'ERR_CORDON_CONTAINMENT', errno: -Math.abs(errno), syscall: what, stage: 'launch' },
    );
  }
  return new CordonError(
    `Containment (${what}) could not be established on this host (${code}); nothing ran. ` +
      "Use containment: 'best-effort' to run with the strongest tier available, or see capabilities().",
    { code: 'ERR_CORDON_CONTAINMENT', errno: -Math.abs(errno), syscall: what, stage: 'launch' },
  );
}

/** The anchor could not switch the command to uid/gid (NOCONTAIN <errno> setuid); nothing ran. */
export function privilegeDropFailed(errno: number, uid: number | undefined, gid: number | undefined): CordonError {
  const code = errnoName(errno);
  const as = [uid !== undefined ? `uid ${uid}` : '', gid !== undefined ? `gid ${gid}` : ''].filter(Boolean).join(', ');
  return new CordonError(
    `The command could not be started as ${as} (${code}); nothing ran. Changing user or group needs a privileged host ` +
      '(root, or CAP_SETUID/CAP_SETGID); leave uid and gid out to run as the host.',
    { code, errno: -Math.abs(errno), syscall: 'setuid', stage: 'launch' },
  );
}

/** The option "confine" where this build has no confinement (Windows; stage 'input'). */
export function confineUnsupported(platform: NodeJS.Platform): CordonError {
  // Windows: what each mechanism would need (docs/confine.md, "Windows").
  const message =
    platform === 'win32'
      ? 'The option "confine" is not available on Windows: neither of its mechanisms expresses this policy without changing the access lists of your files. ' +
        "An AppContainer reads only what grants it access (not your workspace, unless its files are given to the container's SID) and reaches no loopback address without an administrator's exemption; " +
        'a write-restricted token writes only where its SID is granted (each write path changed for it). cordon changes no access list of yours, so it refuses. Nothing ran. ' +
        'Run without confine, or confine the command at another layer (Windows Sandbox, a virtual machine, a container).'
      : `The option "confine" is for Linux (Landlock and network namespaces) and macOS (a Seatbelt profile); ${platform} has no confinement in this build. Nothing ran.`;
  return new CordonError(message, {
    code: 'ERR_CORDON_UNSUPPORTED',
    stage: 'input',
  });
}

/** The option "confine" where this host cannot enforce it (stage 'input'): never a silent no-op. */
export function confineUnenforceable(why: 'landlock' | 'netns', network?: string): CordonError {
  const message =
    why === 'landlock'
      ? 'The option "confine" needs Landlock, which this kernel does not have (Linux 5.13+, built with CONFIG_SECURITY_LANDLOCK and enabled in the lsm= boot list): the tree cannot be confined. Nothing ran.'
      : `confine.network '${network}' needs a network namespace of the tree's own, which the anchor can make only with CAP_SYS_ADMIN (root); an unprivileged user namespace is not used (it would remap the tree's user ids). Use network: 'all', or a privileged host. Nothing ran.`;
  return new CordonError(message, { code: 'ERR_CORDON_CONTAINMENT', syscall: 'confine', stage: 'input' });
}
