// The containment tiers, one row each: where a tier runs, whether a caller may
// ask for it, how a host is probed for it, what it guarantees and why (its
// notes), how its members are listed, what a report says it cannot see,
// which tier a default spawn falls back to, and whether it takes limits.
// Everything in the facade that depends on the tier reads it here, and no
// other file compares tier names: the `tier` option and CORDON_TIER
// (options.ts), capabilities() and coverage (capabilities.ts), the README's
// guarantee table (guarantee-table.ts), the launch's --fallback and limits
// (launch.ts, limits.ts), members() (process.ts), the CLI's usage and
// reports (cli.ts), and the test projects (vitest.config.ts). How a tier
// contains a tree is its anchor's (native/); the host side of an anchor is
// the same for every tier, but for the cgroup tier's fallback
// (anchor/cgroup.ts).
//
// Pure: no I/O here (the probe is passed in), so build tooling can read it.
import type { RawProbe } from './native.js';

/** Windows: whether a terminal (pty) can be given here: ConPTY, and not Wine's (pty.h in native/win says what Wine 8 lacks). */
export function windowsTerminal(probe: RawProbe): boolean {
  return probe.pseudoConsole === true && probe.wine !== true;
}

/**
 * Which descendants that leave the tree's reach (setsid, double fork, nohup,
 * daemons) are still caught: 'always'; 'marked': those that keep the tree's
 * marker (CORDON_TREE) in an environment the host's user can read, and any
 * that a snapshot saw while still a descendant: a program started with a
 * scrubbed environment (env -i) escapes; 'never'.
 */
export type EscapeeCatch = 'always' | 'marked' | 'never';

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
  /**
   * C2: what the host ends of a tree whose anchor died before it was
   * quiescent (ERR_CORDON_ANCHOR_LOST, whose `anchorLost` says what it did):
   * 'always' every member (the cgroup tier's cgroup.kill, the job);
   * 'marked' every member it can still tell is the tree's, by the tree's
   * marker (CORDON_TREE) in an environment the host's user can read, and in
   * the process-group tier by the session its anchor led (pinned by the dead
   * anchor, kept an unreaped zombie of the host meanwhile), each killed
   * through a pidfd: a member that left that session and scrubbed the marker
   * (env -i) is not found and may run on (lib/anchor/lost.ts); 'never'.
   */
  anchorLossSwept: EscapeeCatch;
  /** C3: polite signal, grace, then forced kill, to every member. */
  gracefulStop: boolean;
  /**
   * C3: stopping a tree reads the tree alone (its cgroup, its descendants,
   * its job), never every process of the host: its cost does not grow with
   * the host's other processes.
   */
  stopCostIsTheTree: boolean;
  /** C4: output reading is bounded after the root exits. */
  waitDelay: boolean;
  /** C9: every orphan of the tree is reaped by the anchor. */
  reapsOrphans: boolean;
  /**
   * Resource limits on the whole tree (memory, processes, CPU: the `limits`
   * option), enforced by the kernel before the command runs. Where this is
   * false, `containment: 'strict'` refuses a spawn with limits.
   */
  limits: boolean;
  /**
   * The command runs in a cgroup namespace rooted at its tree's cgroup (the
   * cgroup tier, where the host has CAP_SYS_ADMIN): its view of cgroup paths
   * starts at its own cgroup. Not a wall against a privileged member (see
   * docs/contract.md, "What cordon is not").
   */
  cgroupNamespace: boolean;
  /**
   * The `pty` option: the command runs on a pseudo-terminal of its own that
   * its anchor opens and relays, with every other guarantee of the tier
   * unchanged (lib/terminal.ts). Where false, spawn() refuses the option.
   */
  terminal: boolean;
  /**
   * C13: a terminal's last output is kept for the host as a pipe's is, however
   * long its event loop stalls as the tree ends: the anchor hands it to the
   * host's pipe, grown to hold it (Linux, F_SETPIPE_SZ; unless the user's
   * pipes are over fs.pipe-user-pages-soft). Where false (macOS:
   * a pipe cannot grow; no terminal at all) the anchor holds it, and drops
   * what the host has not taken 2 s after the tree's end.
   */
  terminalOutputKept: boolean;
  /**
   * The `confine` option: the tree confined by the kernel from its first
   * instruction, every descendant included (Linux: Landlock for the
   * filesystem, a network namespace of its own for network 'none' and
   * 'loopback', which needs CAP_SYS_ADMIN; macOS: a Seatbelt profile applied
   * before exec, which cordon's tests never observed on a Mac: the notes say
   * so). Where false, spawn() refuses the option (docs/confine.md).
   */
  confine: boolean;
  /**
   * A member running with the host's privileges cannot leave the tree or stop
   * its anchor. Never given: cordon is not a sandbox (docs/contract.md).
   */
  holdsHostileMembers: false;
}

/** What a tier's guarantees and notes depend on besides the tier. */
export interface TierContext {
  platform: NodeJS.Platform;
  /** Members that are not the anchor's children are signalled through pidfds. */
  pidfd: boolean;
  /** Linux: the host has CAP_SYS_ADMIN (a cgroup namespace needs it). */
  capSysAdmin: boolean;
  /**
   * Linux: where the cgroup tier can enforce each limit on this host (a
   * controller delegated to this process's v2 cgroup, or a writable v1
   * hierarchy), null where it cannot. The README's table assumes all three.
   */
  limitSupport: { memory: string | null; processes: string | null; cpu: string | null };
  /** Linux: the newest Landlock ABI the kernel has (0: none). The README's table assumes one. */
  landlock: number;
}

export interface TierSpec {
  readonly name: string;
  /** The platforms whose anchor implements the tier, in the README's column order. */
  readonly platforms: readonly NodeJS.Platform[];
  /** A caller may ask for it (the `tier` option, CORDON_TIER); else it is only ever reported (a best-effort fallback). */
  readonly selectable: boolean;
  /** Whether a host of one of its platforms can run it, from the addon's probe (called only when needed). */
  available(probe: () => RawProbe): boolean;
  guarantees(ctx: TierContext): Guarantees;
  /** Why its guarantees are what they are, in words (after the note every tier has). */
  notes(ctx: TierContext): string[];
  /** Host-specific amendments capabilities() makes from the probe (Windows without CTRL_BREAK). */
  amend?(result: { guarantees: Guarantees; notes: string[] }, probe: RawProbe): void;
  /** members(): listed as the tree's process group (its id, from GROUP), not as the anchor's descendants. */
  readonly membersByGroup: boolean;
  /**
   * Where a default (not asked-for) spawn falls back when the tier was
   * available at the host's probe but cannot be set up at spawn time
   * (native/posix/tier.cc's falls_back_to): the anchor is told so (--fallback)
   * and READY names the tier in force. Undefined: it stays strict.
   */
  readonly fallsBackTo?: string;
  /**
   * Resource limits in this tier: 'enforced' (the kernel enforces each one
   * the host has the controller for: capabilities().guarantees.limits),
   * 'set-unclaimed' (set on the tree where the OS takes them, with
   * 'best-effort' only: enforcement not observed, so not claimed), 'none'.
   */
  readonly limits: 'enforced' | 'set-unclaimed' | 'none';
  /** Where coverage is partial, the reports' words: where the tier looked, and what it cannot see (C11). */
  readonly partialView?: { readonly seenIn: string; readonly unseen: string };
  /** The README's guarantee table: the tier's name in a column title, and when it is the default. */
  readonly readme?: { readonly label?: string; readonly defaultWhen?: string };
}

/** The cgroup tier's note on limits: where each is enforced on this host. */
function limitsNote(support: TierContext['limitSupport']): string {
  const where = (name: string, at: string | null) =>
    at === 'v2' ? `${name} in the tree's cgroup (v2, delegated)` : at === 'v1' ? `${name} in a cgroup of the tree's own in the v1 hierarchy, which the command joins before it execs` : `${name}: not enforceable here`;
  const parts = [where('memory', support.memory), where('processes', support.processes), where('cpu', support.cpu)];
  return `Limits (the limits option): ${parts.join('; ')}. The anchor stays outside them, so it always ends the tree. cordon enables a v2 controller only when asked: prepareCgroupLimits({ moveHost: true }) moves this host's own process, and no other, into a leaf of its cgroup (the "no internal processes" rule; a cgroup that holds any other process is refused, naming it) and enables the controllers there (docs/contract.md, C12).`;
}

const noPidfdLinux = "This kernel has no pidfd: members that are not the anchor's own children are signalled by a verified pid, with a small reuse window.";

/** The tiers, strongest first: a host's default is the first it can run. */
export const TIERS = [
  {
    name: 'cgroup',
    platforms: ['linux'],
    selectable: true,
    // (a cgroup tier's anchor is a subreaper too)
    available: (probe) => probe().subreaper && !!probe().cgroup,
    guarantees: ({ pidfd, capSysAdmin, limitSupport, landlock }) => ({
      containedBeforeExec: true,
      catchesEscapees: 'always',
      pidReuseSafe: pidfd,
      survivesHostSigkill: true,
      survivesAnchorDeath: true,
      anchorLossSwept: 'always',
      gracefulStop: true,
      stopCostIsTheTree: true,
      waitDelay: true,
      reapsOrphans: true,
      limits: limitSupport.memory !== null && limitSupport.processes !== null && limitSupport.cpu !== null,
      cgroupNamespace: capSysAdmin,
      terminal: true,
      terminalOutputKept: true,
      confine: landlock >= 1,
      holdsHostileMembers: false,
    }),
    notes: ({ pidfd, capSysAdmin, limitSupport }) => [
      ...(pidfd ? [] : [noPidfdLinux]),
      "Each tree's command is born in a cgroup of its own (clone3 into the cgroup), below this process's cgroup; the forced stop is cgroup.kill, which reaches every member at once, new forks included.",
      'If the anchor itself dies, the host kills the tree through its cgroup.',
      limitsNote(limitSupport),
      capSysAdmin
        ? "The command runs in a cgroup namespace rooted at its tree's cgroup. A member with CAP_SYS_ADMIN can still move itself to an ancestor cgroup through a cgroup2 mount it can reach (unless that mount has nsdelegate) or setns() out of the namespace."
        : 'No cgroup namespace for the command: the host lacks CAP_SYS_ADMIN.',
    ],
    membersByGroup: false,
    fallsBackTo: 'subreaper',
    limits: 'enforced',
    readme: { defaultWhen: 'default where a cgroup is writable' },
  },
  {
    name: 'subreaper',
    platforms: ['linux'],
    selectable: true,
    available: (probe) => probe().subreaper,
    guarantees: ({ pidfd, landlock }) => ({
      containedBeforeExec: true,
      catchesEscapees: 'always',
      pidReuseSafe: pidfd,
      survivesHostSigkill: true,
      survivesAnchorDeath: false,
      anchorLossSwept: pidfd ? 'marked' : 'never',
      gracefulStop: true,
      stopCostIsTheTree: true,
      waitDelay: true,
      reapsOrphans: true,
      limits: false,
      cgroupNamespace: false,
      terminal: true,
      terminalOutputKept: true,
      confine: landlock >= 1,
      holdsHostileMembers: false,
    }),
    notes: ({ pidfd }) => [
      ...(pidfd ? [] : [noPidfdLinux]),
      'No cgroup is used (none is writable here, or the subreaper tier was asked for): resource limits are not enforced.',
      pidfd
        ? "Every member inherits the tree's marker in its environment (CORDON_TREE, with a per-tree 128-bit secret), which the anchor itself never needs (every orphan is its child): if the anchor is killed, its orphans go to init, and the host sweeps this user's processes for the marker and kills every one it finds through a pidfd, again until a sweep finds none new (ERR_CORDON_ANCHOR_LOST's anchorLost lists them). A member that scrubbed its environment (env -i), made itself non-dumpable or runs as another user is not found then and may run on."
        : 'A tree whose anchor is killed is not ended: this kernel has no pidfd to sweep it with.',
    ],
    membersByGroup: false,
    limits: 'none',
    readme: { defaultWhen: 'default otherwise' },
  },
  {
    name: 'process-group',
    platforms: ['linux', 'darwin'],
    selectable: true,
    available: () => true,
    guarantees: ({ platform, pidfd, landlock }) => ({
      containedBeforeExec: true,
      catchesEscapees: 'marked',
      pidReuseSafe: pidfd,
      survivesHostSigkill: true,
      survivesAnchorDeath: false,
      anchorLossSwept: platform === 'linux' && pidfd ? 'marked' : 'never',
      gracefulStop: true,
      stopCostIsTheTree: false,
      waitDelay: true,
      reapsOrphans: false,
      limits: false,
      cgroupNamespace: false,
      terminal: true,
      terminalOutputKept: platform !== 'darwin',
      confine: platform === 'darwin' || (platform === 'linux' && landlock >= 1),
      holdsHostileMembers: false,
    }),
    notes: ({ platform, pidfd }) => [
      platform === 'darwin' ? 'macOS has no per-tree kernel limits: resource limits are not enforced.' : 'No cgroup is used: resource limits are not enforced.',
      "The tree runs in a process group of its own, which the anchor is not in (the anchor is in a session of its own) and which the anchor's unreaped pin child keeps from being recycled: termination signals the whole group at once, and quiescence of the group is the kernel's word, not a scan's.",
      "Every member inherits the tree's marker in its environment (CORDON_TREE, with a per-tree 128-bit secret): a member that leaves the process group (setsid, double fork, daemons such as tmux or a detached node child) is found by the anchor's sweep of this user's processes (every user's when the anchor runs as root) for it, when the tree is terminated (with the polite signal, in the grace, at the forced stop), when the root exits, and before the tree is declared quiescent; each is verified by pid and start time right before every signal. The forced stop is freeze first: what a walk finds outside the group is stopped as it is found, and killed once a walk finds nothing new, so a member that forks and setsid()s every few milliseconds is not chased.",
      platform === 'darwin'
        ? "Every process of the tree's session (the anchor's: no process can join it) is a member to the sweeps too, so one that leaves the group but not the session (setpgid, as a shell's job control moves each job) is caught whatever its environment. Third-party programs are read like the user's others (another user's too when the anchor runs as root). What the marker cannot catch: a member that leaves the session (setsid) and starts a program with a scrubbed environment (env -i), runs as another user while the anchor is not root, or runs a cs_restricted program (Apple's system binaries that SIP protects, /bin/sh, /bin/sleep, /usr/bin/perl, and setuid programs): macOS withholds its environment, and that of every process it forks until one execs another program, from every other process, root's too (XNU's kern_sysctl.c, kern_fork.c). Such a member is caught all the same once a snapshot saw it while still a descendant, and when it was forked by a process the anchor knew as a member: since macOS 15.4 the kernel keeps the pid version of the process that forked it across exec and reparenting; before 15.4 only its unique id, which an exec resets to its parent's at that moment since macOS 13 (launchd's for an orphan). One forked by a process that exited before any walk saw it (a double fork: `(setsid /bin/sleep &)`, daemon(3) in an Apple binary) is not caught. These are XNU's rules as its source gives them, run on a model of its process table (docs/xnu-model.md); nothing here ran on a Mac. So results say coverage: 'partial' and list in leftGroup the members found outside the group."
        : "Every process of the tree's session (the anchor's: no process can join it) is a member to the sweeps too, so one that leaves the group but not the session (setpgid, as a shell's job control moves each job) is caught whatever its environment. What neither catches: a member that leaves the session (setsid) and starts a program with a scrubbed environment (env -i), runs as another user while the anchor is not root, or makes itself non-dumpable (ssh-agent, gpg-agent: its environment is unreadable without CAP_SYS_PTRACE); one a snapshot saw while still a descendant is caught all the same, and so is a child of a member the anchor knew, while that member lives (the forced stop SIGSTOPs such members before it kills them, so their children keep them as parent until a walk sees them); one whose parent exited before any walk saw it (a double fork) is not. So results say coverage: 'partial' and list in leftGroup the members found outside the group.",
      'Orphans are reparented to init, not to the anchor: init reaps them.',
      platform === 'linux' && pidfd
        ? "If the anchor is killed, the host sweeps what it can still tell is the tree's: every process of the session the anchor led (the dead anchor is kept an unreaped zombie of the host until the sweep is done, so no other session can have its id) and every process carrying the tree's marker, each killed through a pidfd after it is checked again through it, again until a sweep finds none new (ERR_CORDON_ANCHOR_LOST's anchorLost lists them). A member that left the session and scrubbed the marker (env -i), made itself non-dumpable or runs as another user is not found then and may run on."
        : 'If the anchor is killed, the tree is not ended: ' + (platform === 'darwin' ? 'the host does not sweep for it on macOS.' : 'this kernel has no pidfd to sweep it with.'),
      "With a terminal (pty) the anchor leads the tree's session and holds the terminal as its controlling terminal, with the tree's group in the foreground, so the command stays in the tree's pinned group; a shell's job control moves jobs (and the shell) into groups of their own, which the tier then knows from its snapshots and the marker as it knows any member outside the group" + (platform === 'darwin' ? ' (macOS: built from the same sources as on Linux, the pty master polled through its kqueue filter per XNU\'s source; nothing here ran it on a Mac).' : '.'),
      ...(pidfd
        ? []
        : [
            platform === 'darwin'
              ? "macOS has no pidfd: members that left the group are signalled by pid after their start time is verified, with a small reuse window (the group id itself is pinned by the anchor's pin child)."
              : 'Members are signalled by pid after their start time is verified, with a small reuse window.',
          ]),
    ],
    membersByGroup: true,
    limits: 'none',
    partialView: { seenIn: 'in the process group', unseen: 'this tier cannot see processes that left its session with a scrubbed (env -i) or unreadable environment' },
  },
  {
    name: 'job-object',
    platforms: ['win32'],
    selectable: true,
    available: (probe) => !!probe().jobObjects,
    guarantees: () => ({
      containedBeforeExec: true,
      catchesEscapees: 'always',
      pidReuseSafe: true,
      survivesHostSigkill: true,
      survivesAnchorDeath: true,
      anchorLossSwept: 'always',
      gracefulStop: true,
      stopCostIsTheTree: false, // not measured on Windows: not claimed
      waitDelay: true,
      reapsOrphans: true,
      limits: false,
      cgroupNamespace: false,
      terminal: false, // where the probe finds ConPTY (not under Wine): amend() below
      terminalOutputKept: false,
      confine: false,
      holdsHostileMembers: false,
    }),
    notes: () => [
      'Each tree runs in its own Job Object with kill-on-close and no breakaway: the command is created suspended and assigned before it runs; every descendant (detached or not) stays in the job. Processes a broker starts on a member\'s behalf are not its descendants and are not in the job: WMI (Win32_Process.Create), the task scheduler, services, out-of-process COM servers, WSL and Docker workloads, and one created with PROC_THREAD_ATTRIBUTE_PARENT_PROCESS naming an outside parent.',
      'Identity is held by handles (the job, the root process), never by a pid number.',
      "The polite stop is CTRL_BREAK_EVENT to the root's console process group and WM_CLOSE to every top-level window of the job's members (a program with windows gets no CTRL_BREAK); console members that left the console or the group and have no window are reached only by the forced TerminateJobObject. Where neither reaches anyone (no shared console, no window) the forced stop follows at once.",
      "When the host exits, Node's own kill-on-close job ends the anchor with it, so the tree is ended at once (no grace).",
      'Windows has no zombies: there are no orphans to reap (reapsOrphans holds trivially).',
      "Whether anyone still holds the captured output is read from the pipe's handle count; which member holds it is not determined (leftovers report heldOutput false).",
      "Limits (the limits option) are set on the tree's Job Object before the command runs, with containment 'best-effort' only: JOB_OBJECT_LIMIT_JOB_MEMORY (the committed memory of all members together), JOB_OBJECT_LIMIT_ACTIVE_PROCESS (the anchor is outside the job, so only the tree counts) and hard-capped CPU rate control (a share of the whole machine: cores / processors; Windows 8 and later). Windows documents that it enforces them (an allocation or a process creation over the limit fails), but cordon's tests have never observed that: its Windows lane runs under Wine, which takes the memory and process limits without enforcing them. So resource limits are not claimed (guarantees.limits false): 'strict' refuses a spawn with limits, and with 'best-effort' the result says which limits the OS took on the job (result.limits.accepted) and limits.applied false.",
    ],
    amend: (result, probe) => {
      if (windowsTerminal(probe)) {
        result.guarantees.terminal = true;
        result.notes.push(
          "A terminal (pty) is a pseudo console (ConPTY) the anchor creates before the command exists; its console host (conhost.exe, the anchor's child) is put in the tree's Job Object at once, so it ends with the tree, and is not reported as a member. The command's standard handles are the console's; what the host writes is the console's input (0x03 is Ctrl-C), what it reads the console's VT output; resize() is ResizePseudoConsole. The output ends when every member is gone and the anchor has closed the console (read to its end before QUIET). The polite stop closes the terminal (CTRL_CLOSE_EVENT to its processes) and posts WM_CLOSE. A leased tree gets no terminal on Windows. Proven only by the GitHub Windows job (test/win/pty.test.mjs there): cordon's Windows lane runs under Wine, where the terminal is refused.",
        );
      } else if (probe.wine && probe.pseudoConsole) {
        result.notes.push(
          "Under Wine there is no terminal (pty is refused): Wine 8 has CreatePseudoConsole, and the command attaches to the console, but Wine gives it no standard handles on it (a program's ordinary output never reaches the console's output) and ResizePseudoConsole is not implemented (measured by the Windows lane, test/win/pty.test.mjs).",
        );
      } else {
        result.notes.push('No terminal (pty is refused): this Windows has no ConPTY (CreatePseudoConsole, Windows 10 1809 and later).');
      }
      if (probe.wine) {
        result.notes.push(
          "Under Wine, resource limits are not enforced (observed by the Windows lane: a tree commits memory and starts processes past the limits Wine took): Wine 8 takes JOB_OBJECT_LIMIT_JOB_MEMORY and JOB_OBJECT_LIMIT_ACTIVE_PROCESS without enforcing either, refuses CPU rate control, answers a query for a job's limits with zeros and keeps no CPU times for a job.",
        );
      }
      if (probe.ctrlBreak !== false) return;
      result.guarantees.gracefulStop = false;
      result.notes.push(
        probe.wine
          ? 'Under Wine, GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT) is not implemented: terminate() is the forced TerminateJobObject at once, unless a member has a window (WM_CLOSE, then the grace).'
          : 'CTRL_BREAK_EVENT cannot be delivered here: terminate() is the forced TerminateJobObject at once, unless a member has a window (WM_CLOSE, then the grace).',
      );
    },
    membersByGroup: false,
    limits: 'set-unclaimed',
    readme: { label: 'Job Object' },
  },
  {
    name: 'process-handle',
    platforms: ['win32'],
    selectable: false,
    available: () => false,
    guarantees: () => ({
      containedBeforeExec: false,
      catchesEscapees: 'never',
      pidReuseSafe: true,
      survivesHostSigkill: false,
      survivesAnchorDeath: false,
      anchorLossSwept: 'never',
      gracefulStop: true,
      stopCostIsTheTree: false, // not measured on Windows: not claimed
      waitDelay: true,
      reapsOrphans: true,
      limits: false,
      cgroupNamespace: false,
      terminal: false,
      terminalOutputKept: false,
      confine: false,
      holdsHostileMembers: false,
    }),
    notes: () => [
      "Best-effort fallback: the job could not be assigned, so only the root (by its handle) is contained; descendants are not (results say coverage: 'partial').",
    ],
    membersByGroup: false,
    limits: 'none',
    partialView: { seenIn: 'of the root', unseen: "the process-handle tier cannot see the root's descendants" },
  },
] as const satisfies readonly TierSpec[];

/**
 * Containment tiers. 'cgroup' and 'subreaper' are Linux ('cgroup' where a
 * cgroup v2 directory is writable); 'process-group' is the macOS strategy
 * (available on Linux too); 'job-object' is Windows; 'process-handle' is only ever
 * reported (Windows best-effort when the job could not be assigned: the root's
 * handle is the only identity, descendants are not contained).
 */
export type Tier = (typeof TIERS)[number]['name'];

const byName = new Map<string, TierSpec>(TIERS.map((t) => [t.name, t]));

/** A tier's row (undefined for a name that is no tier). */
export function tierSpec(name: string): TierSpec | undefined {
  return byName.get(name);
}

/** The tiers a caller may ask for on a platform (its anchor implements them), strongest first. */
export function selectableTiers(platform: NodeJS.Platform = process.platform): Tier[] {
  return TIERS.filter((t) => t.selectable && (t.platforms as readonly string[]).includes(platform)).map((t) => t.name);
}

/** The tiers this host can run, strongest first. */
export function availableTiers(probe: () => RawProbe, platform: NodeJS.Platform = process.platform): Tier[] {
  return selectableTiers(platform).filter((name) => byName.get(name)!.available(probe));
}

/** The note every tier's capabilities() begins with. */
const NOT_A_SANDBOX =
  "cordon contains careless and daemonizing programs, not hostile ones: a member running as the host's user can signal, stop or ptrace the anchor, and one with root privileges can leave the tree's cgroup or job. Use a separate user, a container or VM for untrusted code (docs/contract.md).";

/** The `confine` option's note: what the kernel enforces here, or why it cannot (docs/confine.md). */
function confineNotes(ctx: TierContext, confine: boolean): string[] {
  if (ctx.platform === 'darwin') {
    return [
      "The confine option (a Seatbelt profile): the anchor builds a profile from the policy and the command's own process applies it with sandbox_init right before exec, so the tree, every descendant included, is to write only below its write paths, its own TMPDIR and the usual devices, read and execute nothing below its denyRead paths, and with network 'none' bind or connect no socket (Unix-domain path sockets included), with 'loopback' only to and from the loopback addresses (the host's listeners there included: there is no network namespace). No privilege is needed. This was never observed on a Mac by cordon's tests: the profile is built from Apple's documented behaviour and the rules the coding agents' Seatbelt profiles (OpenAI Codex CLI's, Anthropic's sandbox-runtime) run on, compiled for macOS with zig, and run only on the model of XNU, which checks that the profile is applied in the command's process before exec, not what Seatbelt then enforces (docs/confine.md, docs/xnu-model.md). Writes done on the tree's behalf by Mach and XPC services (cfprefsd for defaults write, LaunchServices for open) are not confined.",
    ];
  }
  if (ctx.platform !== 'linux') return [`The confine option is not available on ${ctx.platform === 'win32' ? 'Windows' : ctx.platform} (no AppContainer or restricted token confinement yet): spawn() refuses it with ERR_CORDON_UNSUPPORTED.`];
  if (!confine) return ["The confine option is refused here (ERR_CORDON_CONTAINMENT): this kernel has no Landlock (Linux 5.13+, enabled in the lsm= boot list)."];
  return [
    `The confine option (Landlock ABI ${ctx.landlock}): the tree, every descendant included, may write only below its write paths, its own TMPDIR and the usual devices, and read everything but its denyRead paths, from its first instruction; network 'none' and 'loopback' put it in a network namespace of its own (no interface up, or only lo), which needs CAP_SYS_ADMIN${ctx.capSysAdmin ? '' : ' (this host lacks it: only network \'all\' is accepted)'}; 'none' also handles TCP bind and connect through Landlock${ctx.landlock >= 4 ? '' : ' (not on this ABI: 4+)'}. Pathname Unix sockets (a docker.sock) stay reachable by path whatever the confinement, denyRead included: Landlock up to ABI 7 does not control connect() to them (docs/confine.md).`,
  ];
}

/** What a tier guarantees in a context, and why, in words. */
export function describeTier(tier: Tier, ctx: TierContext): { guarantees: Guarantees; notes: string[] } {
  const spec = byName.get(tier)!;
  const guarantees = spec.guarantees(ctx);
  return { guarantees, notes: [NOT_A_SANDBOX, ...spec.notes(ctx), ...confineNotes(ctx, guarantees.confine)] };
}

/** The platforms' names in the README, and whether they have pidfds at best. */
export const PLATFORMS: Partial<Record<NodeJS.Platform, { name: string; pidfd: boolean }>> = {
  linux: { name: 'Linux', pidfd: true },
  darwin: { name: 'macOS', pidfd: false },
  win32: { name: 'Windows', pidfd: false },
};

let envTier: { value: string | undefined } | undefined;

/**
 * CORDON_TIER: the tier the environment asks for, as given (undefined when
 * unset or empty). Read once, here, the first time it is needed.
 */
export function requestedTier(): string | undefined {
  envTier ??= { value: process.env.CORDON_TIER || undefined };
  return envTier.value;
}
