// What a tree's anchor has reported, as facts the facade acts on: the root's
// pid and exit, the tier in force, the leftovers and group leavers it listed,
// the limits and usage, whether the output is released, whether the tree is
// quiescent, and the two failures (the launch's, nothing ran; the cleanup's,
// the tree may live on). Each fact is set once, by the anchor's report of it
// (handlers()), never by a guess. `started` and `quiescent` are the promises
// the facade hands out; what the result does with the facts is
// settlement.ts's.
import type { AnchorHandlers, LimitsEvent, UsageEvent } from './anchor.js';
import * as errors from './errors.js';
import type { CordonError } from './errors.js';
import type { GroupLeaver, Leftover } from './result.js';
import { signalName } from './signals.js';
import type { Tier } from './tiers.js';

/** A promise with its settle functions; an unobserved rejection never crashes the host (awaiting it still throws). */
export function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => {});
  return { promise, resolve, reject };
}

/** Where a tree stands, as callers see it (`proc.state`, `TreeInfo.state`). */
export type TreeState = 'starting' | 'running' | 'leftovers' | 'ended' | 'failed';

/** What the facade learns from the facts as they come. */
export interface FactEvents {
  /** The root runs (READY). */
  spawn(pid: number): void;
  /** The root exited. */
  exit(code: number | null, signal: NodeJS.Signals | null): void;
  /** The process-group tier: a member seen outside the tree's group. */
  leftGroup(leaver: GroupLeaver): void;
  /** The anchor is gone (emitted once the facts are all in). */
  anchorGone(): void;
  /** A fact the result may wait on changed. */
  changed(): void;
}

/** What a launch failure's message names. */
export interface LaunchContext {
  command: string;
  executable: string;
  cwd: string;
  uid: number | undefined;
  gid: number | undefined;
}

export class TreeFacts {
  /** The root's pid, once it runs. */
  pid: number | undefined;
  /** The tier asked for, then the one READY names. */
  tier: Tier;
  /** The process-group tier: the tree's process group (not the anchor's). */
  group = 0;
  rootExit: { code: number | null; signal: NodeJS.Signals | null; at: number } | undefined;
  /** Members alive when the root exited (LEFT). */
  readonly leftovers: Leftover[] = [];
  /** LEFTEND: the leftovers list is complete. */
  leftoversListed = false;
  readonly leavers: GroupLeaver[] = [];
  /** What the anchor says the OS took of the limits (LIMITS), and the latest USAGE. */
  limitsInForce: LimitsEvent | undefined;
  usage: UsageEvent | undefined;
  /** RELEASED: no member the anchor sees holds the captured output. */
  released = false;
  /** QUIET: every member is gone and reaped (the tree's fact: a kept tree becomes quiescent after its result). */
  quiescentSeen = false;
  /** The anchor process has exited (POSIX: and was reaped): its pid is free from now on. */
  anchorGone = false;
  /** Nothing of the command ran; set once. */
  launchError: CordonError | undefined;
  /** Quiescence cannot be proven (STUCK, an unresponsive or lost anchor); set once. */
  cleanupError: CordonError | undefined;

  private readonly startedD = deferred<number>();
  private readonly quiescentD = deferred<void>();
  /** Resolves with the root's pid once it runs; rejects with the launch error (or the anchor's loss before it ran). */
  readonly started = this.startedD.promise;
  /** Resolves at quiescence (or once a launch failure's anchor is gone); rejects with a cleanup failure. */
  readonly quiescent = this.quiescentD.promise;

  constructor(
    tier: Tier,
    private readonly launch: LaunchContext,
    private readonly events: FactEvents,
    private readonly anchorPid: () => number | undefined,
  ) {
    this.tier = tier;
  }

  /** 'starting' until the root runs; 'running' while it does; 'leftovers' after it exited while members remain; 'ended' at quiescence; 'failed' if it never ran. */
  get state(): TreeState {
    if (this.launchError) return 'failed';
    if (this.anchorGone) return 'ended';
    if (this.pid === undefined) return 'starting';
    return this.rootExit ? 'leftovers' : 'running';
  }

  /** Every member gone and reaped (or nothing ever ran), and the anchor gone. */
  get isQuiescent(): boolean {
    return this.anchorGone && (this.quiescentSeen || this.launchError !== undefined);
  }

  /** The anchor's reports, as they set the facts. */
  handlers(): AnchorHandlers {
    const { launch, events } = this;
    return {
      ready: (pid, tier) => {
        this.pid = pid;
        this.tier = tier as Tier;
        this.startedD.resolve(pid);
        events.spawn(pid);
      },
      noContain: (errno, what) =>
        this.launchFailed(what === 'setuid' ? errors.privilegeDropFailed(errno, launch.uid, launch.gid) : errors.noContainment(errno, what)),
      execFail: (errno) => this.launchFailed(errors.execFailed(errno, launch.executable, launch.command)),
      noCwd: (errno) => this.launchFailed(errors.anchorNoCwd(launch.cwd, errno)),
      rootExit: (code, signal) => {
        this.rootExit = { code, signal: signal === null ? null : signalName(signal), at: Date.now() };
        events.exit(this.rootExit.code, this.rootExit.signal);
        events.changed();
      },
      // The list at the root's exit, then what the anchor killed after it: a
      // member it lacked, or one that runs another program now (named as it
      // was when killed; whether it held the output stays as first seen).
      left: (pid, heldOutput, command) => {
        const known = this.leftovers.find((l) => l.pid === pid);
        if (known) {
          known.command = command;
          known.heldOutput ||= heldOutput;
        } else {
          this.leftovers.push({ pid, command, heldOutput });
        }
      },
      group: (pgid) => {
        this.group = pgid;
      },
      leftGroup: (pid, command) => {
        const leaver = { pid, command };
        this.leavers.push(leaver);
        events.leftGroup(leaver);
      },
      leftEnd: () => {
        this.leftoversListed = true;
        events.changed();
      },
      released: () => {
        this.released = true;
        events.changed();
      },
      stuck: (pids) => this.cleanupFailed(errors.cleanupStuck(pids)),
      unresponsive: (waitedMs) => {
        if (this.quiescentSeen || this.anchorGone) return;
        this.cleanupFailed(errors.anchorUnresponsive(this.anchorPid(), waitedMs));
      },
      quiescent: () => {
        this.quiescentSeen = true;
        events.changed();
      },
      limits: (limits) => {
        this.limitsInForce = limits;
      },
      usage: (usage) => {
        this.usage = usage;
      },
      anchorExit: (code, signal, error) => this.anchorExited(code, signal, error),
    };
  }

  private launchFailed(error: CordonError): void {
    this.launchError ??= error;
    this.startedD.reject(error);
    this.events.changed();
  }

  private cleanupFailed(error: CordonError): void {
    this.cleanupError ??= error;
    this.quiescentD.reject(this.cleanupError);
    this.events.changed();
  }

  private anchorExited(code: number | null, signal: NodeJS.Signals | null, error?: Error): void {
    if (error && this.pid === undefined && !this.launchError) {
      // The anchor itself could not be started (removed or broken install): nothing ran.
      this.launchError = errors.anchorNotStarted(error);
      this.startedD.reject(this.launchError);
    }
    this.anchorGone = true;
    queueMicrotask(() => this.events.anchorGone());
    if (!this.quiescentSeen && !this.launchError) {
      this.cleanupError ??= errors.anchorLost(code, signal, error);
      if (!this.rootExit) this.startedD.reject(this.cleanupError);
      this.quiescentD.reject(this.cleanupError);
    } else {
      this.quiescentD.resolve();
    }
    this.events.changed();
  }
}
