// A contained process: the facade over one anchored tree. Result
// classification (C6), leftovers policy (C5), cancellation (C10) and
// whole-tree termination that resolves at quiescence (C3), as one state
// machine (`phase`) over what the anchor reports. What runs is planned in
// launch.ts; the output pipes, the log and the bounded drain after the root
// exits (C4, WaitDelay) are output.ts; every error comes from errors.ts.
import { EventEmitter } from 'node:events';
import { closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { AnchorChannel } from './anchor.js';
import { coverageOf, defaultTier, type Coverage } from './capabilities.js';
import { debug } from './debug.js';
import { duration } from './duration.js';
import * as errors from './errors.js';
import type { CordonError } from './errors.js';
import { checkLogStdio, planLaunch } from './launch.js';
import { binding, helperPath } from './native.js';
import { tierSpec } from './tiers.js';
import { tierLimitSupport } from './capabilities.js';
import { hasLimits, type Limits } from './limits.js';
import type { LimitsEvent, UsageEvent } from './anchor/channel.js';
import {
  normalizeOptions,
  validateCommand,
  type LeftoversPolicy,
  type NormalizedOptions,
  type SpawnOptions,
  type StdioOption,
  type Tier,
} from './options.js';
import { TreeOutput } from './output.js';
import { checkBatchArgs, resolveCommand } from './resolve.js';
import { shellLaunch } from './shell.js';
import { readLines, type LinesFrom } from './lines.js';
import { markOwned } from './streams.js';
import { privilegeDropFailed } from './credentials.js';
import { signalName } from './signals.js';
import { AdoptedAnchorChannel } from './anchor/adopted.js';
import { WindowsAdoptedChannel } from './anchor/windows.js';
import type { AnchorHandlers } from './anchor/channel.js';
import { defaultLeaseLog, endpointOf, leaseDir, newLeaseId, newToken, removeRecord, writeRecord, type Adoption, type WindowsTreeAdoption } from './lease.js';

/**
 * @internal What an owner (lib/registry.ts) adds to a spawn for its lease
 * record and token, and how registry.adopt() makes a process of an adoption.
 */
export const LEASE_CONTEXT = Symbol('cordon.leaseContext');
export const ADOPTION = Symbol('cordon.adoption');
export interface LeaseContext {
  owner: string | null;
  kind: string;
  label: string;
  /** The token (a Registry's secret makes it per owner); default a random one. */
  token?: string | undefined;
  /** Where a leased tree's default log goes. */
  logDir?: string | undefined;
}
type InternalOptions = SpawnOptions & { [LEASE_CONTEXT]?: LeaseContext; [ADOPTION]?: Adoption | WindowsTreeAdoption };

/** Why the root ended; 'limit': a resource limit of the tree ended it (see `limit`). */
export type Reason = 'exit' | 'signal' | 'canceled' | 'timeout' | 'limit';

/** A limit that can end a tree: the memory limit's OOM kill, or the process limit's refused forks. */
export type LimitName = 'memory' | 'processes';

/** What the tree used, as the kernel accounted it; null where this tier or host does not measure it (never 0 for "unknown"). */
export interface TreeUsage {
  /** CPU time of every member together, user and system, in milliseconds (the cgroup tier; the job-object tier, not under Wine). */
  cpuMs: number | null;
  /** The highest memory charge of the tree, in bytes (the cgroup tier with a memory limit; the job-object tier: the job's peak committed memory, not under Wine). */
  peakMemory: number | null;
  /** The most processes (tasks) the tree had at once (the cgroup tier with a process limit; the job-object tier: processes, from the job's notifications). */
  peakProcesses: number | null;
}

/** A resource limit by name. */
export type LimitKind = 'memory' | 'processes' | 'cpu';

/** The `limits` of a spawn, as they went. */
export interface LimitsResult {
  /** The limits asked for (an owner's default under the spawn's own): memory in bytes, processes, cpu in cores. */
  requested: Limits;
  /**
   * The kernel enforced every limit asked for from before the command ran.
   * false: 'best-effort' ran without them, or with some the OS did not take,
   * or in a tier whose enforcement is not claimed (the job-object tier:
   * capabilities().guarantees.limits false).
   */
  applied: boolean;
  /**
   * The limits asked for that the OS took on the tree before the command ran
   * (its cgroup's files, its Job Object), in the order memory, processes,
   * cpu. Taken is not enforced where the tier does not claim them: Wine
   * takes the Job Object's memory and process limits and enforces neither,
   * and enforcement by Windows has not been observed by cordon's tests
   * (capabilities().guarantees.limits says where they are enforced).
   */
  accepted: LimitKind[];
  /** The limits the tree ran into: 'memory' (the OOM killer ended a member), 'processes' (a fork was refused). */
  hit: LimitName[];
}

export interface Leftover {
  pid: number;
  /** Command line as the anchor saw it. */
  command: string;
  /** Whether it still held the captured stdout/stderr when the root exited. */
  heldOutput: boolean;
}

/** A member the anchor saw outside the tree's process group (process-group tier). */
export interface GroupLeaver {
  pid: number;
  /** Command line as the anchor saw it. */
  command: string;
}

export interface ContainedResult {
  command: string;
  args: string[];
  /** The root's pid. */
  pid: number;
  tier: Tier;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** Why the root ended: its own exit, a signal, a cancellation, the timeout, or a resource limit ('limit'). */
  reason: Reason;
  /** With reason 'limit': which limit ended it. */
  limit?: LimitName;
  /** Present when limits were asked for: what was enforced and what the tree ran into. */
  limits?: LimitsResult;
  /** What the tree used, measured by the kernel where the tier can (null: not measured). Taken when the tree ended (when the root exited, if leftovers were kept). */
  usage: TreeUsage;
  /** Descendants held the captured output past `waitDelay` after the root exited; our ends were closed. */
  waitDelayExceeded: boolean;
  /** Descendants alive when the root exited (a leak report). */
  leftovers: Leftover[];
  /** Whether leftovers were left running (policy 'keep', or 'kill-on-failure' after a clean exit). */
  leftoversKept: boolean;
  /**
   * What cordon could see of the tree (C11). 'complete': every descendant was
   * contained (cgroup, subreaper, job-object tiers), so an empty `leftovers`
   * means nothing outlived the root. 'partial': the tier cannot see every
   * descendant (process-group: a member that left the process group before
   * a snapshot saw it and does not carry the tree's marker in a readable
   * environment, such as a daemon started with `env -i`;
   * process-handle: any descendant), so an empty `leftovers` means only
   * that none was seen, and quiescence is that of what the tier can see.
   */
  coverage: Coverage;
  /**
   * The process-group tier: members the anchor found outside the tree's
   * process group (setsid, setpgid, daemons), by a snapshot or by the tree's
   * marker (CORDON_TREE) in their environment. They are
   * terminated with the tree if still alive; any that left unseen are not
   * listed here (see `coverage`). Empty in the other tiers.
   */
  leftGroup: GroupLeaver[];
  /** Epoch milliseconds. */
  startedAt: number;
  rootExitedAt: number;
  settledAt: number;
  logPath?: string;
  /** The `stop` hook threw or rejected with this (the teardown went on: killSignal, then the forced kill). */
  stopError?: unknown;
}

export interface MemberInfo {
  pid: number;
  ppid: number;
  command: string;
}

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // Awaiting still throws; an unobserved rejection must not crash the host.
  promise.catch(() => {});
  return { promise, resolve, reject };
}

export type TreeState = 'starting' | 'running' | 'leftovers' | 'ended' | 'failed';

/**
 * How far the result has come. The anchor's protocol orders the steps: READY
 * (or a launch failure), then EXIT, its LEFT lines and LEFTEND, in that order;
 * RELEASED and QUIET come only after LEFTEND.
 * - 'starting': the anchor sets up containment and starts the root (until READY or a launch failure);
 * - 'running': the root runs;
 * - 'exited': the root exited; the anchor lists the leftovers (until LEFTEND);
 * - 'draining': waiting for the captured output to be released (or the wait
 *   delay) and its readers to take it; then the leftovers policy is applied;
 * - 'stopping': the policy let nothing run on: waiting for quiescence (QUIET
 *   and the anchor's exit);
 * - 'settling': the outcome is decided; the log is flushed (bounded);
 * - 'settled': `result` has resolved or rejected.
 * A launch failure or a cleanup failure goes to 'settling' from where it is.
 * The tree's own state for callers is `state` (TreeState): the tree may live
 * on after the result (kept leftovers).
 */
type Phase = 'starting' | 'running' | 'exited' | 'draining' | 'stopping' | 'settling' | 'settled';

let treeCounter = 0;

export class ContainedProcess extends EventEmitter implements AsyncDisposable {
  /** Unique within this host: how owners and UIs name the tree. */
  readonly id = `t${(++treeCounter).toString(36)}-${process.pid.toString(36)}`;
  readonly command: string;
  readonly args: readonly string[];
  /** The root's pid, once it runs (see `started`). */
  pid: number | undefined;
  /** The anchor's pid (the tree's identity holder). */
  readonly anchorPid: number | undefined;
  tier: Tier;
  readonly stdin: Writable | null;
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  /** Resolves with the root's pid once it runs; rejects with the launch error. */
  readonly started: Promise<number>;
  /** Settles once the root has exited, output is drained (bounded) and the leftovers policy is applied. */
  readonly result: Promise<ContainedResult>;

  private readonly opts: NormalizedOptions;
  private readonly anchor: AnchorChannel;
  private readonly startedD = deferred<number>();
  private readonly resultD = deferred<ContainedResult>();
  private readonly quiescentD = deferred<void>();
  /** Epoch milliseconds. */
  readonly startedAt: number = Date.now();
  /** issue #17: the lease in ms (the tree outlives its host for that long, adoptable), or undefined. */
  readonly lease: number | undefined;
  /** A leased tree: the token a new host adopts it with (registry.adopt(id, { token })). */
  readonly adoptionToken: string | undefined;
  /** A leased tree: its id in registry.adoptable() (`<anchor pid>-<16 hex>`). */
  readonly leaseId: string | undefined;
  /** This process was adopted (registry.adopt()): its anchor is another host's child; stdin is null. */
  readonly adopted: boolean;
  private leaseRecord: { dir: string; id: string } | undefined;
  private readonly output: TreeOutput;
  private phase: Phase = 'starting';

  private rootExit: { code: number | null; signal: NodeJS.Signals | null; at: number } | undefined;
  private leftovers: Leftover[] = [];
  private readonly leavers: GroupLeaver[] = [];
  /** The limits asked for (undefined: none), what the anchor says is enforced, and the latest USAGE. */
  private readonly limitsAsked: Limits | undefined;
  private limitsInForce: LimitsEvent | undefined;
  /** The tier enforces every limit asked for on this host (tierLimitSupport). */
  private limitsEnforced = false;
  private usageSeen: UsageEvent | undefined;
  /** The process-group tier: the tree's process group (not the anchor's). */
  private group = 0;
  // Facts that do not follow from the phase, each set once:
  /**
   * The anchor said RELEASED: no member it sees holds the captured output.
   * Reported once the root has exited; the drain takes it in 'draining'.
   */
  private released = false;
  /**
   * The anchor said QUIET: every member is gone and reaped. The tree's fact,
   * not the result's: a kept tree becomes quiet after its result settled.
   */
  private quiet = false;
  /**
   * The anchor process has exited (and, on POSIX, was reaped): its pid is
   * free. Independent of the phase: it ends a launch failure's wait, and a
   * cleanup failure can come before or after the result.
   */
  private anchorGone = false;
  /**
   * The host asked the anchor to end the tree (terminate(), kill(), a
   * cancellation, the leftovers policy): the policy then neither runs again
   * nor reports leftovers as 'kept'. Can happen in any phase.
   */
  private terminateSent = false;
  /** The leftovers policy kept them running: the result's `leftoversKept`. */
  private kept = false;
  /** The stop hook was called (once per tree); `stopping` while its wait runs. */
  private stopHookCalled = false;
  private stopping: (() => void) | undefined;
  /** A polite stop asked for before the root was reported running: its grace, until it is. */
  private stopBeforeStart: number | undefined;
  private stopError: { error: unknown } | undefined;
  private cancelReason: 'canceled' | 'timeout' | undefined;
  private launchError: CordonError | undefined;
  private cleanupError: CordonError | undefined;
  private timeoutTimer: NodeJS.Timeout | undefined;
  private readonly onAbort = () => this.cancel('canceled');

  constructor(command: string, args: string[], options: SpawnOptions = {}) {
    super();
    ({ command, args } = validateCommand(command, args));
    const internal = options as InternalOptions;
    const adoption = internal[ADOPTION];
    const context = internal[LEASE_CONTEXT];
    const opts = normalizeOptions(options);
    this.command = command;
    this.args = args;
    this.opts = opts;
    this.adopted = adoption !== undefined;
    if (opts.signal?.aborted) throw errors.alreadyAborted(opts.signal.reason);
    this.limitsAsked = hasLimits(opts.limits) ? opts.limits : undefined;
    if (adoption) {
      const r = adoption.record;
      this.lease = r.lease;
      this.adoptionToken = undefined;
      this.leaseId = r.id;
      this.startedAt = r.started;
      opts.cwd = r.cwd;
      opts.log = r.logPath ?? undefined;
      // Windows: the adopter's record to remove when the anchor is gone (its
      // anchor does not know the record; POSIX's removes its own).
      if ('windows' in adoption) this.leaseRecord = { dir: leaseDir(), id: r.id };
    } else {
      this.lease = opts.lease;
      this.adoptionToken = opts.lease === undefined ? undefined : (context?.token ?? newToken());
      // A leased tree always has a log: what it writes while no host is attached goes there.
      if (opts.lease !== undefined && opts.log === undefined) opts.log = defaultLeaseLog(context?.logDir);
    }
    checkLogStdio(opts);

    let logFd: number | undefined;
    // (Windows: an adopted tree's anchor keeps appending its relayed output to
    // the log itself; the adopter writing it too would double every line.)
    if (opts.log !== undefined && !(adoption && 'windows' in adoption)) {
      try {
        logFd = openSync(opts.log, 'a');
      } catch (cause) {
        throw errors.logUnopenable(opts.log, cause);
      }
    }
    const handlers: AnchorHandlers = {
      ready: (pid, tier) => this.onReady(pid, tier),
      noContain: (errno, what) =>
        this.onLaunchFailure(what === 'setuid' ? privilegeDropFailed(errno, opts.uid, opts.gid) : errors.noContainment(errno, what)),
      execFail: (errno) => this.onLaunchFailure(errors.execFailed(errno, command, this.command)),
      noCwd: (errno) => this.onLaunchFailure(errors.anchorNoCwd(opts.cwd, errno)),
      rootExit: (code, signal) => this.onRootExit(code, signal),
      left: (pid, heldOutput, cmd) => this.leftovers.push({ pid, command: cmd, heldOutput }),
      group: (pgid) => {
        this.group = pgid;
      },
      leftGroup: (pid, cmd) => {
        this.leavers.push({ pid, command: cmd });
        this.emit('leftGroup', { pid, command: cmd });
      },
      leftEnd: () => {
        if (this.phase === 'exited') this.phase = 'draining';
        this.advance();
      },
      released: () => {
        this.released = true;
        this.advance();
      },
      stuck: (pids) => this.onStuck(pids),
      unresponsive: (waited) => this.onUnresponsive(waited),
      quiet: () => {
        this.quiet = true;
        this.advance();
      },
      limits: (l) => {
        this.limitsInForce = l;
      },
      usage: (u) => {
        this.usageSeen = u;
      },
      anchorExit: (code, signal, error) => this.onAnchorExit(code, signal, error),
    };

    let outputs: { stdout: StdioOption; stderr: StdioOption };
    if (adoption) {
      this.tier = adoption.record.tier as Tier;
      outputs = { stdout: 'pipe', stderr: 'pipe' };
      this.anchor =
        'windows' in adoption
          ? new WindowsAdoptedChannel(adoption.windows, adoption.record.anchorPid, handlers, opts.grace)
          : new AdoptedAnchorChannel(adoption, handlers, opts.grace);
    } else {
      // Shell mode: the shell runs the command string (lib/shell.ts).
      const launch = opts.shell === undefined ? { command, args } : shellLaunch(opts.shell, command, args);
      let anchorLogFd: number | undefined;
      try {
        const path = resolveCommand(launch.command, opts.cwd, opts.env);
        checkBatchArgs(path, launch.args);
        handlers.execFail = (errno) => this.onLaunchFailure(errors.execFailed(errno, path, this.command));
        const tier = opts.tier ?? defaultTier();
        const anchor = helperPath();
        const limitPlan = this.limitsAsked && limitsFor(tier, this.limitsAsked, opts.containment);
        const limits = limitPlan?.send;
        this.limitsEnforced = limitPlan?.enforced ?? false;
        // (Windows: the anchor takes no directory; the record goes there all the same.)
        const recordDir = opts.lease === undefined ? undefined : leaseDir();
        const lease = opts.lease === undefined ? undefined : { ms: opts.lease, id: newLeaseId(), dir: process.platform === 'win32' ? undefined : recordDir };
        const plan = planLaunch({ command: launch.command, args: launch.args, path, opts, tier, anchor, log: logFd !== undefined, trace: process.env.CORDON_TRACE, limits });
        this.tier = plan.tier;
        outputs = plan.outputs;
        if (lease) {
          // The anchor's own descriptor of the log (it appends while no host is attached).
          anchorLogFd = process.platform === 'win32' ? -1 : openSync(opts.log!, 'a');
          plan.anchor.lease = { ms: lease.ms, token: this.adoptionToken!, id: lease.id, dir: lease.dir, logFd: anchorLogFd, logPath: opts.log };
        }
        this.anchor = new AnchorChannel(plan.anchor, handlers);
        if (lease && this.anchor.pid !== undefined) {
          this.leaseId = `${this.anchor.pid}-${lease.id}`;
          this.writeLeaseRecord(recordDir!, this.leaseId, context);
        }
      } catch (err) {
        if (logFd !== undefined) closeSync(logFd);
        throw err;
      } finally {
        if (anchorLogFd !== undefined && anchorLogFd >= 0) closeSync(anchorLogFd);
      }
    }
    this.anchorPid = this.anchor.pid;
    const child = this.anchor.child;
    this.stdin = child.stdin;
    this.stdin?.on('error', (err) => debug('stdin: %s', err.message));

    this.output = new TreeOutput(
      { command, waitDelay: opts.waitDelay, logFd, logPath: opts.log, targets: outputs },
      { stdout: child.stdout, stderr: child.stderr },
      { changed: () => this.advance(), partial: () => this.coverage === 'partial' },
    );
    this.stdout = this.output.stdout;
    this.stderr = this.output.stderr;
    for (const stream of [this.stdin, this.stdout, this.stderr, child.stdout, child.stderr]) markOwned(stream);

    this.started = this.startedD.promise;
    this.result = this.resultD.promise;
    if (opts.signal) opts.signal.addEventListener('abort', this.onAbort, { once: true });
    if (opts.timeout > 0) {
      this.timeoutTimer = setTimeout(() => this.cancel('timeout'), opts.timeout);
      this.timeoutTimer.unref();
    }
  }

  /**
   * The record a new host finds a leased tree by (lib/lease.ts), beside the
   * endpoint the anchor makes (POSIX: its socket there; Windows: its named pipe).
   */
  private writeLeaseRecord(dir: string, id: string, context: LeaseContext | undefined): void {
    const anchorPid = this.anchor.pid!;
    try {
      writeRecord(dir, {
        version: 1,
        id,
        anchorPid,
        anchorStart: binding().processStart(anchorPid),
        endpoint: endpointOf(dir, anchorPid, id),
        owner: context?.owner ?? null,
        kind: context?.kind ?? 'command',
        label: context?.label ?? [this.command, ...this.args].join(' '),
        command: this.command,
        args: [...this.args],
        cwd: this.opts.cwd,
        logPath: this.opts.log ?? null,
        started: this.startedAt,
        lease: this.lease!,
        tier: this.tier,
      });
      this.leaseRecord = { dir, id };
    } catch (err) {
      debug('lease record for %s not written: %s', id, (err as Error).message);
    }
  }

  private onReady(pid: number, tier: string): void {
    if (this.phase === 'starting') this.phase = 'running';
    this.pid = pid;
    this.tier = tier as Tier;
    this.startedD.resolve(pid);
    this.emit('spawn', pid);
  }

  private onLaunchFailure(error: CordonError): void {
    this.launchError ??= error;
    this.startedD.reject(error);
    this.advance();
  }

  private onRootExit(code: number | null, signal: number | null): void {
    this.rootExit = { code, signal: signal === null ? null : signalName(signal), at: Date.now() };
    this.emit('exit', this.rootExit.code, this.rootExit.signal);
    if (this.phase === 'running') this.phase = 'exited';
    // The timeout bounds the command's run; after it, waitDelay bounds the drain.
    clearTimeout(this.timeoutTimer);
    this.output.rootExited();
    this.advance();
  }

  private onStuck(pids: number[]): void {
    this.cleanupError ??= errors.cleanupStuck(pids);
    this.quiescentD.reject(this.cleanupError);
    this.advance();
  }

  private onUnresponsive(waitedMs: number): void {
    if (this.quiet || this.anchorGone) return;
    this.cleanupError ??= errors.anchorUnresponsive(this.anchorPid, waitedMs);
    this.quiescentD.reject(this.cleanupError);
    this.advance();
  }

  private onAnchorExit(code: number | null, signal: NodeJS.Signals | null, error?: Error): void {
    if (error && this.pid === undefined && !this.launchError) {
      // The anchor itself could not be started (removed or broken install): nothing ran.
      this.launchError = errors.anchorNotStarted(error);
      this.startedD.reject(this.launchError);
    }
    this.anchorGone = true;
    // (the anchor removes its endpoint and record itself; this covers an anchor that died)
    if (this.leaseRecord) removeRecord(this.leaseRecord.dir, this.leaseRecord.id);
    queueMicrotask(() => this.emit('quiescent'));
    if (!this.quiet && !this.launchError) {
      this.cleanupError ??= errors.anchorLost(code, signal, error);
      if (!this.rootExit) this.startedD.reject(this.cleanupError);
      this.quiescentD.reject(this.cleanupError);
    } else {
      this.quiescentD.resolve();
    }
    this.advance();
  }

  private failed(): boolean {
    const r = this.rootExit!;
    return r.code !== 0 || r.signal !== null || this.cancelReason !== undefined || this.output.waitDelayExceeded;
  }

  private sendTerminate(graceMs: number): void {
    if (this.anchorGone) return;
    this.terminateSent = true;
    this.anchor.terminate(graceMs);
  }

  /**
   * A stop asked for while the root runs (terminate() with a grace, abort,
   * timeout). With a `stop` hook: the hook first (once per tree), then up
   * to `graceMs` for the root to exit; when it exits, the grace passes or
   * the hook throws, the anchor's TERM: killSignal to every member, the
   * forced kill of what remains after `graceMs`. Without a hook, or with
   * grace 0 (kill()), or once the root has exited: the anchor's TERM now.
   */
  private politeStop(graceMs: number): void {
    if (this.anchorGone) return;
    const hook = this.opts.stop;
    if (this.stopping) {
      // The hook's wait runs: a forced kill cuts it short; another polite stop waits with it.
      if (graceMs === 0) this.stopping();
      return;
    }
    if (hook && graceMs > 0 && !this.stopHookCalled && this.pid === undefined && !this.rootExit && !this.launchError) {
      // The root is being started (its output can arrive before the anchor's
      // report of it): the hook is asked once the root runs, as Go asks
      // Cmd.Cancel only after Start; a launch failure leaves nothing to ask.
      if (this.stopBeforeStart === undefined) {
        this.stopBeforeStart = graceMs;
        this.startedD.promise.then(
          () => this.stopAfterStart(),
          () => this.stopAfterStart(),
        );
      }
      return;
    }
    if (graceMs === 0) this.stopBeforeStart = undefined;
    if (!hook || graceMs === 0 || this.stopHookCalled || this.pid === undefined || this.rootExit) {
      this.sendTerminate(graceMs);
      return;
    }
    this.stopHookCalled = true;
    // Asked to end: the leftovers policy must not keep what remains.
    this.terminateSent = true;
    let timer: NodeJS.Timeout | undefined;
    let waiting = true;
    const next = (graceNow: number) => {
      if (!waiting) return;
      waiting = false;
      this.stopping = undefined;
      clearTimeout(timer);
      this.off('exit', onExit);
      this.sendTerminate(graceNow);
    };
    const onExit = () => next(graceMs);
    const failed = (error: unknown) => {
      this.stopError ??= { error };
      debug('%s: the stop hook failed: %s', this.command, (error as Error)?.message ?? String(error));
      this.emit('stopError', error);
      next(graceMs);
    };
    this.stopping = () => next(0);
    timer = setTimeout(() => next(graceMs), graceMs);
    this.once('exit', onExit);
    try {
      Promise.resolve(hook(this)).catch(failed);
    } catch (error) {
      failed(error);
    }
  }

  /** A polite stop that waited for the root to start goes on (unless a forced kill came meanwhile). */
  private stopAfterStart(): void {
    const grace = this.stopBeforeStart;
    this.stopBeforeStart = undefined;
    if (grace === undefined || this.launchError) return;
    this.politeStop(grace);
  }

  /** The result's outcome is fixed (it may still be flushing the log). */
  private get decided(): boolean {
    return this.phase === 'settling' || this.phase === 'settled';
  }

  /** Takes the result as far as the facts allow; called on every fact that may move it. */
  private advance(): void {
    if (this.decided) return;
    if (this.launchError) {
      if (this.anchorGone) this.settle(this.launchError);
      return;
    }
    if (this.cleanupError) {
      this.settle(this.cleanupError);
      return;
    }
    if (this.phase !== 'draining' && this.phase !== 'stopping') return;
    if (!this.output.drained) {
      if (!this.released && !this.quiet) return;
      this.output.release();
    }
    if (!this.output.readersDone) return;
    if (this.phase === 'draining') {
      this.applyLeftoversPolicy();
      if (this.kept) {
        // Kept trees stay under this handle (terminate() still reaches them)
        // but no longer hold the host's event loop open; host exit ends them.
        this.anchor.unref();
        this.settle();
        return;
      }
      this.phase = 'stopping';
    }
    if (this.quiet && this.anchorGone) this.settle();
  }

  /** C5: what happens to what is left of the tree; nothing to decide once it is quiet or already being ended. */
  private applyLeftoversPolicy(): void {
    if (this.quiet || this.terminateSent) return;
    const policy: LeftoversPolicy = this.opts.leftovers;
    const kill = policy === 'kill' || (policy === 'kill-on-failure' && this.failed());
    if (kill) this.sendTerminate(this.opts.grace);
    else this.kept = true;
    if (this.leftovers.length > 0) this.emit('leftovers', this.leftovers, kill ? 'killing' : 'kept');
  }

  private settle(error?: CordonError): void {
    this.phase = 'settling';
    this.output.seal();
    if (this.kept) this.finish(error);
    else this.output.flushLog(() => this.finish(error));
  }

  private finish(error?: CordonError): void {
    this.phase = 'settled';
    this.output.resultOut();
    clearTimeout(this.timeoutTimer);
    this.opts.signal?.removeEventListener('abort', this.onAbort);
    if (error) {
      if (this.rootExit) error.result = this.buildResult();
      this.resultD.reject(error);
      if (error === this.launchError) this.quiescentD.resolve();
      return;
    }
    const result = this.buildResult();
    this.resultD.resolve(result);
    this.emit('settled', result);
  }

  private buildResult(): ContainedResult {
    const root = this.rootExit!;
    let reason: Reason = root.signal !== null ? 'signal' : 'exit';
    const hit = this.limitsHit();
    // A limit ended the tree when the root failed and the kernel says the
    // tree ran into it: the memory limit's OOM kill first (it kills), then
    // refused forks (which the root may have failed on).
    let limit: LimitName | undefined;
    if (root.signal !== null || root.code !== 0) {
      if (hit.includes('memory') && root.signal === 'SIGKILL') limit = 'memory';
      else if (hit.includes('processes')) limit = 'processes';
      else if (hit.includes('memory')) limit = 'memory';
    }
    if (limit) reason = 'limit';
    if (this.cancelReason) reason = this.cancelReason;
    const result: ContainedResult = {
      command: this.command,
      args: [...this.args],
      pid: this.pid ?? 0,
      tier: this.tier,
      exitCode: root.code,
      signal: root.signal,
      reason,
      ...(reason === 'limit' ? { limit } : {}),
      ...(this.limitsAsked ? { limits: { requested: { ...this.limitsAsked }, applied: this.limitsApplied(), accepted: this.limitsAccepted(), hit } } : {}),
      usage: {
        cpuMs: this.usageSeen?.cpuUs != null ? this.usageSeen.cpuUs / 1000 : null,
        peakMemory: this.usageSeen?.memoryPeak ?? null,
        peakProcesses: this.usageSeen?.processesPeak ?? null,
      },
      waitDelayExceeded: this.output.waitDelayExceeded,
      leftovers: this.leftovers,
      leftoversKept: this.kept,
      coverage: this.coverage,
      leftGroup: [...this.leavers],
      startedAt: this.startedAt,
      rootExitedAt: root.at,
      settledAt: Date.now(),
    };
    if (this.opts.log !== undefined) result.logPath = this.opts.log;
    if (this.stopError) result.stopError = this.stopError.error;
    return result;
  }

  /** Whether the tier enforces the limits here and the anchor reported every one asked for as taken. */
  private limitsApplied(): boolean {
    const asked = this.limitsAsked;
    if (!asked || !this.limitsEnforced) return false;
    return this.limitsAccepted().length === (['memory', 'processes', 'cpu'] as const).filter((k) => asked[k] !== undefined).length;
  }

  /** The limits asked for that the anchor's LIMITS line reports as taken by the OS. */
  private limitsAccepted(): LimitKind[] {
    const asked = this.limitsAsked;
    const got = this.limitsInForce;
    if (!asked || !got) return [];
    const out: LimitKind[] = [];
    if (asked.memory !== undefined && got.memory > 0) out.push('memory');
    if (asked.processes !== undefined && got.processes > 0) out.push('processes');
    if (asked.cpu !== undefined && got.cpuQuotaUs > 0) out.push('cpu');
    return out;
  }

  /** The limits the kernel says the tree ran into. */
  private limitsHit(): LimitName[] {
    const u = this.usageSeen;
    const hit: LimitName[] = [];
    if ((u?.oomKills ?? 0) > 0) hit.push('memory');
    if ((u?.pidsMaxHits ?? 0) > 0) hit.push('processes');
    return hit;
  }

  private cancel(reason: 'canceled' | 'timeout'): void {
    if (this.decided || this.cancelReason || this.launchError) return;
    if (this.rootExit) {
      // The root already ended on its own: its result stays what it was; what
      // is left of the tree is stopped all the same.
      debug('%s: %s after the root exited: terminating the rest', this.command, reason);
      this.sendTerminate(this.opts.interruptGrace);
      return;
    }
    this.cancelReason = reason;
    debug('%s: %s, interrupt grace %d ms', this.command, reason, this.opts.interruptGrace);
    this.politeStop(this.opts.interruptGrace);
  }

  /**
   * 'starting' until the root runs; 'running' while it does; 'leftovers' after
   * it exited while members remain; 'ended' at quiescence; 'failed' if it never ran.
   */
  get state(): TreeState {
    if (this.launchError) return 'failed';
    if (this.anchorGone) return 'ended';
    if (this.pid === undefined) return 'starting';
    return this.rootExit ? 'leftovers' : 'running';
  }

  /** What cordon can see of this tree: see ContainedResult.coverage. */
  get coverage(): Coverage {
    return coverageOf(this.tier);
  }

  /** The working directory the command runs in. */
  get cwd(): string {
    return this.opts.cwd;
  }

  /** The log file, when one was asked for. */
  get logPath(): string | undefined {
    return this.opts.log;
  }

  /** Whether the tree has reached quiescence (every member gone and reaped). */
  get quiescent(): boolean {
    return this.anchorGone && (this.quiet || this.launchError !== undefined);
  }

  /**
   * Polite signal to every member of the tree, the forced kill of what remains
   * after `grace` ms (default: the teardown grace). Resolves at quiescence of
   * the whole tree; idempotent, safe concurrently and after exit. Rejects only
   * with a cleanup failure.
   */
  terminate(options: { grace?: number } = {}): Promise<void> {
    let grace: number;
    try {
      grace = duration('grace', (options ?? {}).grace, this.opts.grace);
    } catch (err) {
      return Promise.reject(err);
    }
    if (this.launchError) return Promise.resolve();
    if (!this.quiescent) {
      this.anchor.ref();
      this.politeStop(grace);
    }
    return this.quiescentD.promise;
  }

  /** The immediate forced kill of every member; resolves at quiescence. */
  kill(): Promise<void> {
    return this.terminate({ grace: 0 });
  }

  /** `await using proc = spawn(...)`: terminates the tree at scope exit. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.terminate();
    await this.result.then(
      () => undefined,
      (err: unknown) => {
        if ((err as CordonError).isCleanupFailure) throw err;
      },
    );
  }

  /**
   * The captured output line by line: `for await (const line of proc.lines())`.
   * `from`: 'stdout' (default), 'stderr' or 'all' (both, in the order their
   * lines were completed). The streams asked for must be piped. The loop
   * reads them (a slow loop pauses them); breaking out lets the rest flow away.
   */
  lines(options: { from?: LinesFrom; encoding?: BufferEncoding } = {}): AsyncIterableIterator<string> {
    const from = (options ?? {}).from ?? 'stdout';
    if (from !== 'stdout' && from !== 'stderr' && from !== 'all') {
      throw errors.invalidArg('from', from, "'stdout', 'stderr' or 'all'");
    }
    const wanted = from === 'all' ? (['stdout', 'stderr'] as const) : [from];
    const streams = wanted.map((name) => {
      const stream = this[name];
      if (!stream) throw errors.notPiped(name, 'lines()');
      return stream;
    });
    return readLines(streams, options.encoding);
  }

  /**
   * Copies this tree's stdout (or stderr: `from`) into `target`'s stdin, as a
   * shell pipeline: `target`'s stdin ends when this output ends; if `target`
   * stops reading (it exited), this output is closed, so a writer gets EPIPE
   * or SIGPIPE as in a shell. Each tree stays contained and has its own
   * result. Returns `target`.
   */
  pipe(target: ContainedProcess, options: { from?: 'stdout' | 'stderr' } = {}): ContainedProcess {
    if (!(target instanceof ContainedProcess)) throw errors.invalidArg('target', target, 'a process spawn() returned', 'ERR_INVALID_ARG_TYPE');
    if (target === this) throw errors.invalidArg('target', 'itself', 'another process');
    const from = (options ?? {}).from ?? 'stdout';
    if (from !== 'stdout' && from !== 'stderr') throw errors.invalidArg('from', from, "'stdout' or 'stderr'");
    const source = this[from];
    if (!source) throw errors.notPiped(from, 'pipe()');
    const sink = target.stdin;
    if (!sink) throw errors.notPiped('stdin', `pipe() into ${target.command}`);
    source.pipe(sink);
    const stop = () => {
      // The reader is gone: close this output, as a shell pipeline would.
      if (!source.readableEnded && !source.destroyed) source.destroy();
    };
    sink.once('close', stop);
    sink.once('error', stop);
    return target;
  }

  /** Live members as the OS sees them now (pid, parent, command line). Informational; [] once the anchor is gone. */
  members(): MemberInfo[] {
    // Once the anchor is gone (quiescence, or ERR_CORDON_ANCHOR_LOST) its pid
    // is free and may already be another process's: nothing is listed
    // through it, ever.
    if (this.anchorPid === undefined || this.quiescent || this.anchorGone || this.anchor.exited) return [];
    return binding()
      .listTree(this.anchorPid, tierSpec(this.tier)?.membersByGroup ? this.group : 0)
      .map((m) => ({ pid: m.pid, ppid: m.ppid, command: m.command }));
  }
}

/**
 * The limits to ask the anchor for (`send`) and whether the tier enforces
 * them here: all of them where it enforces each; where it does not, 'strict'
 * refuses (a typed error before anything runs) and 'best-effort' runs
 * without any (the result says limits.applied false), except in the
 * job-object tier, whose job takes them all the same where the OS accepts
 * them (enforcement not claimed: Windows' was never observed by cordon's
 * tests, and Wine takes some without enforcing them; the result says which
 * in limits.accepted, and applied false).
 */
function limitsFor(tier: Tier, limits: Limits, containment: 'strict' | 'best-effort'): { send: Limits | undefined; enforced: boolean } {
  const support = tierLimitSupport(tier);
  const missing: string[] = [];
  if (limits.memory !== undefined && support.memory === null) missing.push('memory');
  if (limits.processes !== undefined && support.processes === null) missing.push('processes');
  if (limits.cpu !== undefined && support.cpu === null) missing.push('cpu');
  if (missing.length === 0) return { send: limits, enforced: true };
  if (containment === 'strict') throw errors.limitsUnenforceable(tier, missing);
  if (tier === 'job-object') {
    debug('limits %o not claimed in the job-object tier: set on the job where the OS takes them', missing);
    return { send: limits, enforced: false };
  }
  debug('limits %o not enforceable in the %s tier here: running without them', missing, tier);
  return { send: undefined, enforced: false };
}

/** Start `command` contained. Throws a CordonError synchronously on bad input or a known launch failure. */
export function spawn(command: string, args: string[] = [], options: SpawnOptions = {}): ContainedProcess {
  return new ContainedProcess(command, args, options);
}
