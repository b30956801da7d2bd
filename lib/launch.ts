// Launching a tree, the first way to get an anchor: spawn()'s arguments
// become an AnchoredTree whose connect() starts the anchor. Everything that
// can be refused is refused before anything runs, in this order: bad input
// (options.ts), an aborted signal, a log that cannot be opened or used, a
// command that cannot be found or a batch argument cmd.exe would mangle
// (resolve.ts), limits the tier cannot enforce under 'strict' (limits.ts), a
// lease directory that is not private (lease.ts). What the anchor is told is
// planned by planLaunch, which is pure.
import { closeSync } from 'node:fs';
import { anchors, overriding, startAnchor, type AnchorHandlers, type AnchorSpawn } from './anchor.js';
import { defaultTier, hasCapSysAdmin, processTablePlatform, tierLimitSupport } from './capabilities.js';
import { anchorConfineArgs, confineRefusal, makeConfineTmpdir, removeConfineTmpdir, type ConfinedResult } from './confine.js';
import { debug } from './debug.js';
import { alreadyAborted, invalidArg, logUnopenable } from './errors.js';
import { anchorLimitArgs, hasLimits, planLimits, type Limits } from './limits.js';
import { newLeaseId, newToken, removeRecord, writeRecord } from './lease.js';
import { defaultLogDir, newLogPath, openLog } from './log-file.js';
import { anchorPath, binding, probe } from './native.js';
import { normalizeOptions, validateCommand, type NormalizedOptions, type SpawnOptionsBase, type StdioOption } from './options.js';
import { checkBatchArgs, resolveCommand } from './resolve.js';
import { shellLaunch } from './shell.js';
import { signalNumber } from './signals.js';
import { tierSpec, type Tier } from './tiers.js';
import type { AnchoredTree, ConnectedAnchor } from './tree.js';

/** A launched tree's environment, once the anchor has it (launchTree's connect). */
const RELEASED_ENV: NodeJS.ProcessEnv = Object.freeze({});

/** What an owner (registry.ts) adds to a spawn: who the tree is for, for its lease record and token, and its log. */
export interface LeaseContext {
  owner: string | null;
  kind: string;
  label: string;
  /** The adoption token (a Registry's secret makes it per owner); default a random one. */
  token?: string | undefined;
  /** `log: true`: the name stem of the new log file (in `logDir`). */
  logStem?: string | undefined;
  /** The owner's log directory, made and checked when called (log-file.ts): where `log: true` files and a leased tree's default log go. */
  logDir?: (() => string) | undefined;
}

/** A leased launch: how long, the token, the host's part of the tree's id, where it is recorded, its log. */
export interface LeasePlan {
  ms: number;
  token: string;
  id: string;
  dir: string;
  logPath: string;
}

export interface LaunchInput {
  /** The command as given (argv[0] unless `argv0` is set). */
  command: string;
  args: readonly string[];
  /** The executable the command resolved to (resolve.ts). */
  path: string;
  opts: NormalizedOptions;
  /** The tier to ask the anchor for: the one asked for, or this host's default. */
  tier: Tier;
  /** The anchor executable. */
  anchor: string;
  /** A log file is open: stdout and stderr are piped to the host, which copies them to it. */
  log: boolean;
  /** CORDON_TRACE: the anchor's trace destination, if any. */
  trace: string | undefined;
  /** The limits to ask the anchor for (none where best-effort runs without them). */
  limits: Limits | undefined;
  lease: LeasePlan | undefined;
  /** With `confine`: the tree's own temp dir (its TMPDIR), one more path it may write below. */
  confineTmpdir?: string | undefined;
}

export interface LaunchPlan {
  /** How the anchor is started: it establishes containment, then starts the command. */
  anchor: AnchorSpawn;
  /** The tier asked for (the anchor's READY may name another: a fallback). */
  tier: Tier;
  /**
   * Where the command's stdout and stderr go as the caller asked. With a log,
   * the anchor gets pipes (see `anchor.stdio`) and the host copies each to the
   * log and to this target.
   */
  outputs: { stdout: StdioOption; stderr: StdioOption };
}

/** With a log, stdout and stderr must be something the host can copy from a pipe. */
export function checkLogStdio(opts: NormalizedOptions): void {
  if (opts.log === undefined) return;
  for (const [i, name] of [[1, 'stdout'], [2, 'stderr']] as const) {
    const s = opts.stdio[i];
    if (s !== 'pipe' && s !== 'inherit' && s !== 'ignore') {
      throw invalidArg(`stdio[${i}]`, s, `'pipe', 'inherit' or 'ignore' when log is set (the ${name} is copied to the log)`);
    }
  }
}

/** What the anchor is told, from the options (pure: what it needs from the host is in `input`). */
export function planLaunch(input: LaunchInput): LaunchPlan {
  const { opts, tier, lease } = input;
  // What the anchor (and so the command) gets on fds 0-2.
  const stdio: StdioOption[] = opts.stdio.map((s, i) => (i > 0 && input.log ? 'pipe' : s));
  // Who holds the output pipes tells the anchor when output is over; with a
  // terminal the pipes are the anchor's alone and the terminal says it.
  const watch: string[] = [];
  if (stdio[1] === 'pipe' && !opts.pty) watch.push('--watch-fd', '1');
  if (stdio[2] === 'pipe' && !opts.pty) watch.push('--watch-fd', '2');
  // The default tier (not one the caller or CORDON_TIER asked for) that
  // cannot be set up now although the host's probe found it (a cgroup no
  // longer writable, cgroup.max.descendants) falls back to the next tier,
  // reported in proc.tier and result.tier. A tier asked for stays strict,
  // and so does a spawn with limits (the fallback has none).
  const fallback = opts.tier === undefined && tierSpec(tier)?.fallsBackTo !== undefined && !hasLimits(input.limits);
  const args = [
    // The anchor enters the command's working directory itself.
    '--cwd', opts.cwd,
    '--tier', tier,
    '--grace', String(opts.grace),
    // The polite signal, when not the anchor's own SIGTERM.
    ...(opts.killSignal !== 'SIGTERM' ? ['--polite-signal', String(signalNumber(opts.killSignal))] : []),
    // The command's user and group, never the anchor's.
    ...(opts.uid !== undefined ? ['--uid', String(opts.uid)] : []),
    ...(opts.gid !== undefined ? ['--gid', String(opts.gid)] : []),
    // Shell mode on Windows: the anchor runs the line verbatim through the system's cmd.exe.
    ...(opts.shell?.kind === 'cmd' ? ['--cmd-shell'] : []),
    // Windows: the command's STARTUPINFO says SW_HIDE (else it gets no show
    // state from the anchor, which itself always starts hidden).
    ...(opts.windowsHide && process.platform === 'win32' ? ['--hide-window'] : []),
    // POSIX: the root leads a session of its own (detached: true); the anchor skips it where the tier groups the tree.
    ...(opts.newSession && process.platform !== 'win32' ? ['--new-session'] : []),
    ...watch,
    ...anchorLimitArgs(input.limits),
    ...(opts.containment === 'best-effort' ? ['--best-effort'] : []),
    ...(fallback ? ['--fallback'] : []),
    // A leased tree: the lease and the host's part of its id (the token goes on the control channel).
    ...(lease ? ['--lease', String(lease.ms), '--lease-id', lease.id] : []),
    // A terminal: the anchor opens it, the command's stdio is its slave.
    ...(opts.pty ? ['--pty', String(opts.pty.cols), String(opts.pty.rows)] : []),
    // Confined by the kernel: the anchor builds the Landlock ruleset, the command enters it before exec.
    ...anchorConfineArgs(opts.confine, input.confineTmpdir),
    ...(input.trace ? ['--trace', input.trace] : []),
    '--',
    input.path,
    opts.argv0 ?? input.command,
    ...input.args,
  ];
  // What a warm anchor started ahead of need is told (anchor/warm.ts): the
  // tiers whose containment is the anchor's own, without limits or a lease.
  // Windows: the job-object tier, without a terminal either (anchor/windows-warm.ts),
  // and not traced (a waiting anchor would hold the trace file open, and
  // Windows removes no open file).
  const warmable = !lease && !hasLimits(input.limits) && !opts.confine && (tier === 'cgroup' || tier === 'subreaper' || tier === 'process-group' || (tier === 'job-object' && !opts.pty && !input.trace));
  const warm = warmable
    ? [
        // (Windows: the job comes from the host, as to every anchor there.)
        ...(tier === 'job-object' ? ['--job-from-host'] : []),
        '--tier', tier, ...(fallback ? ['--fallback'] : []), ...(opts.containment === 'best-effort' ? ['--best-effort'] : []), ...(input.trace ? ['--trace', input.trace] : []),
      ]
    : undefined;
  return {
    anchor: {
      path: input.anchor,
      args,
      cwd: opts.cwd,
      env: opts.env,
      stdio,
      exitGrace: opts.grace,
      ...(warm ? { warm } : {}),
      ...(lease ? { lease: { ms: lease.ms, token: lease.token, dir: lease.dir, logPath: lease.logPath } } : {}),
    },
    tier,
    outputs: { stdout: opts.stdio[1], stderr: opts.stdio[2] },
  };
}

/**
 * spawn()'s arguments as a tree to launch (nothing runs until its connect()).
 * Throws a CordonError on bad input or a launch failure known beforehand.
 */
export function launchTree(command: string, args: readonly string[] | undefined, options: SpawnOptionsBase | undefined, context?: LeaseContext): AnchoredTree {
  const checked = validateCommand(command, args);
  const opts = normalizeOptions(options);
  if (opts.signal?.aborted) throw alreadyAborted(opts.signal.reason);
  // (A confinement this host cannot enforce runs nothing: never a silent no-op.)
  if (opts.confine) {
    const platform = processTablePlatform();
    const refusal = confineRefusal(opts.confine, platform, platform === 'linux' ? (probe().landlock ?? 0) : 0, platform === 'linux' && hasCapSysAdmin());
    if (refusal) throw refusal;
  }
  const token = opts.lease === undefined ? undefined : (context?.token ?? newToken());
  // A log cordon names: `log: true` under an owner, or a leased tree's (it
  // always has a log: what it writes while no host is attached goes there).
  const fresh = opts.log === undefined && (context?.logStem !== undefined || opts.lease !== undefined);
  if (fresh) opts.log = newLogPath(context?.logDir?.() ?? defaultLogDir(), context?.logStem ?? 'lease');
  checkLogStdio(opts);
  let logFd: number | undefined;
  let confined: ConfinedResult | undefined;
  if (opts.log !== undefined) {
    try {
      logFd = openLog(opts.log, fresh);
    } catch (cause) {
      throw logUnopenable(opts.log, cause);
    }
  }
  try {
    // Shell mode: the shell runs the command string (shell.ts).
    const launch = opts.shell === undefined ? checked : shellLaunch(opts.shell, checked.command, checked.args);
    const path = resolveCommand(launch.command, opts.cwd, opts.env);
    checkBatchArgs(path, launch.args);
    const tier = opts.tier ?? defaultTier();
    const limits = hasLimits(opts.limits) ? planLimits(tier, tierSpec(tier)!.limits, tierLimitSupport(tier), opts.limits, opts.containment) : undefined;
    if (limits && !limits.enforced) debug('limits not enforced in the %s tier here: %s', tier, limits.send ? 'set where the OS takes them' : 'running without them');
    const lease = opts.lease === undefined ? undefined : { ms: opts.lease, token: token!, id: newLeaseId(), dir: anchors.leaseDir(), logPath: opts.log! };
    if (opts.confine) {
      // The tree's own temp dir, as its TMPDIR: the one place it may write besides `write`.
      const dir = makeConfineTmpdir(opts.uid, opts.gid);
      const seatbelt = processTablePlatform() === 'darwin';
      confined = { mechanism: seatbelt ? 'seatbelt' : 'landlock', landlockAbi: seatbelt ? 0 : (probe().landlock ?? 0), write: [...opts.confine.write, dir], denyRead: [...opts.confine.denyRead], network: opts.confine.network, tmpdir: dir };
      opts.env = { ...opts.env, TMPDIR: dir };
    }
    const plan = planLaunch({ command: launch.command, args: launch.args, path, opts, tier, anchor: anchorPath(), log: logFd !== undefined, trace: process.env.CORDON_TRACE, limits: limits?.send, lease, confineTmpdir: confined?.tmpdir });
    const tree: AnchoredTree = {
      ...checked,
      executable: path,
      opts,
      tier,
      outputs: plan.outputs,
      logFd,
      limits,
      lease: lease && { ms: lease.ms, token: lease.token },
      confined,
      startedAt: Date.now(),
      adopted: false,
      connect: (on) => {
        try {
          return connect(plan.anchor, on, lease && { plan: lease, record: { tree, context } });
        } catch (err) {
          if (logFd !== undefined) closeSync(logFd);
          throw err;
        } finally {
          // The anchor has the environment now (it went in the spawn or the
          // warm anchor's LAUNCH, synchronously), or nothing ran: a live tree
          // keeps no copy of it (a copy of the host's, 1.5 kB a tree with 45 variables).
          opts.env = plan.anchor.env = RELEASED_ENV;
        }
      },
    };
    return tree;
  } catch (err) {
    if (logFd !== undefined) closeSync(logFd);
    if (confined) removeConfineTmpdir(confined.tmpdir);
    throw err;
  }
}

/**
 * Starts the anchor. A leased tree is recorded beside its endpoint once the
 * anchor runs (its pid is half of the tree's id), and the record goes when
 * the anchor is gone (the anchor removes its own; this covers one that died).
 */
function connect(spec: AnchorSpawn, on: AnchorHandlers, leased?: { plan: LeasePlan; record: { tree: AnchoredTree; context: LeaseContext | undefined } }): ConnectedAnchor {
  if (!leased) return { channel: startAnchor(spec, on), leaseId: undefined };
  let recorded: string | undefined;
  const channel = startAnchor(spec, overriding(on, {
    anchorExit: (code, signal, error) => {
      if (recorded !== undefined) removeRecord(leased.plan.dir, recorded);
      on.anchorExit(code, signal, error);
    },
  }));
  const anchorPid = channel.pid;
  if (anchorPid === undefined) return { channel, leaseId: undefined };
  const id = `${anchorPid}-${leased.plan.id}`;
  const { tree, context } = leased.record;
  try {
    writeRecord(leased.plan.dir, {
      version: 1,
      id,
      anchorPid,
      anchorStart: binding().processStart(anchorPid),
      endpoint: anchors.endpoint(leased.plan.dir, id),
      owner: context?.owner ?? null,
      kind: context?.kind ?? 'command',
      label: context?.label ?? [tree.command, ...tree.args].join(' '),
      command: tree.command,
      args: [...tree.args],
      cwd: tree.opts.cwd,
      logPath: tree.opts.log ?? null,
      started: tree.startedAt,
      lease: leased.plan.ms,
      tier: tree.tier,
      ...(tree.opts.pty ? { terminal: { cols: tree.opts.pty.cols, rows: tree.opts.pty.rows } } : {}),
    });
    recorded = id;
  } catch (err) {
    debug('lease record for %s not written: %s', id, (err as Error).message);
  }
  return { channel, leaseId: id };
}
