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
import type { AnchorLostSweep } from './errors.js';
import type { GroupLeaver, Leftover } from './result.js';
import { signalName } from './signals.js';
import type { Tier } from './tiers.js';

function ignore(): void {}

/**
 * A promise's outcome, and the promise made when first asked for: a tree
 * nobody awaits holds no promise (a promise, its resolving functions and the
 * handler that keeps an unobserved rejection from crashing the host are about
 * 0.4 kB a tree each). Settled once; an unobserved rejection never crashes
 * the host (awaiting it still throws).
 */
export class Deferred<T> {
  private made: Promise<T> | undefined;
  private settleMade: { resolve(value: T): void; reject(error: unknown): void } | undefined;
  /** 0 pending, 1 resolved, 2 rejected. */
  private state: 0 | 1 | 2 = 0;
  private outcome: unknown;

  get promise(): Promise<T> {
    if (!this.made) {
      if (this.state === 1) this.made = Promise.resolve(this.outcome as T);
      else if (this.state === 2) this.made = Promise.reject(this.outcome);
      else this.made = new Promise<T>((resolve, reject) => (this.settleMade = { resolve, reject }));
      this.made.catch(ignore);
    }
    return this.made;
  }

  resolve(value: T): void {
    this.settle(1, value);
  }

  reject(error: unknown): void {
    this.settle(2, error);
  }

  private settle(state: 1 | 2, outcome: unknown): void {
    if (this.state !== 0) return;
    this.state = state;
    this.outcome = outcome;
    const made = this.settleMade;
    this.settleMade = undefined;
    if (state === 1) made?.resolve(outcome as T);
    else made?.reject(outcome);
  }
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
  /** The anchor is gone, or let go of the tree at QUIET (TreeFacts.anchorLetGo): emitted once the facts are all in. */
  anchorGone(): void;
  /** A fact the result may wait on changed. */
  changed(): void;
  /** The anchor's pid (an unresponsive anchor's error names it). */
  anchorPid(): number | undefined;
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
  /**
   * QUIET came from an anchor that holds nothing of the command's once it
   * sends it (a POSIX one, not leased: not the command's environment nor
   * arguments, not its working directory nor its stdio): its own exit, which
   * follows, is not waited for (AnchorHandlers.quiescent).
   */
  anchorLetGo = false;
  /** Nothing of the command ran; set once. */
  launchError: CordonError | undefined;
  /** The anchor died before quiescence: what the host swept of the tree then. */
  lostSweep: AnchorLostSweep | undefined;
  /** Quiescence cannot be proven (STUCK, an unresponsive or lost anchor); set once. */
  cleanupError: CordonError | undefined;

  /** @internal (FactReports) */
  readonly startedD = new Deferred<number>();
  private readonly quiescentD = new Deferred<void>();

  constructor(
    tier: Tier,
    /** @internal (FactReports) */
    readonly launch: LaunchContext,
    /** @internal (FactReports) */
    readonly events: FactEvents,
  ) {
    this.tier = tier;
  }

  /** Resolves with the root's pid once it runs; rejects with the launch error (or the anchor's loss before it ran). */
  get started(): Promise<number> {
    return this.startedD.promise;
  }

  /** Resolves at quiescence (or once a launch failure's anchor is gone); rejects with a cleanup failure. */
  get quiescent(): Promise<void> {
    return this.quiescentD.promise;
  }

  /** 'starting' until the root runs; 'running' while it does; 'leftovers' after it exited while members remain; 'ended' at quiescence; 'failed' if it never ran. */
  get state(): TreeState {
    if (this.launchError) return 'failed';
    if (this.anchorDone) return 'ended';
    if (this.pid === undefined) return 'starting';
    return this.rootExit ? 'leftovers' : 'running';
  }

  /** The anchor is gone, or holds nothing of the tree's or the command's any more (anchorLetGo). */
  get anchorDone(): boolean {
    return this.anchorGone || this.anchorLetGo;
  }

  /** Every member gone and reaped (or nothing ever ran), and the anchor done. */
  get isQuiescent(): boolean {
    return this.anchorDone && (this.quiescentSeen || this.launchError !== undefined);
  }

  /** The anchor's reports, as they set the facts (one object of prototype methods: no closures kept per tree). */
  handlers(): AnchorHandlers {
    return new FactReports(this);
  }

  /** @internal (FactReports) */
  launchFailed(error: CordonError): void {
    this.launchError ??= error;
    this.startedD.reject(error);
    this.events.changed();
  }

  /** @internal (FactReports) */
  cleanupFailed(error: CordonError): void {
    this.cleanupError ??= error;
    this.quiescentD.reject(this.cleanupError);
    this.events.changed();
  }

  /** @internal (FactReports) QUIET from an anchor that let go of everything of the tree's: the facts are all in. */
  quiescentLetGo(): void {
    queueMicrotask(() => this.events.anchorGone());
    this.quiescentD.resolve();
  }

  /** @internal (FactReports) */
  anchorExited(code: number | null, signal: NodeJS.Signals | null, error?: Error): void {
    if (error && this.pid === undefined && !this.launchError) {
      // The anchor itself could not be started (removed or broken install): nothing ran.
      this.launchError = errors.anchorNotStarted(error);
      this.startedD.reject(this.launchError);
    }
    this.anchorGone = true;
    if (!this.anchorLetGo) queueMicrotask(() => this.events.anchorGone());
    if (!this.quiescentSeen && !this.launchError) {
      this.cleanupError ??= errors.anchorLost(code, signal, error, this.lostSweep);
      if (!this.rootExit) this.startedD.reject(this.cleanupError);
      this.quiescentD.reject(this.cleanupError);
    } else {
      this.quiescentD.resolve();
    }
    this.events.changed();
  }
}

/** The anchor's reports, each setting a fact of `f` once the anchor says it. */
class FactReports implements AnchorHandlers {
  constructor(private readonly f: TreeFacts) {}

  ready(pid: number, tier: string): void {
    const f = this.f;
    f.pid = pid;
    f.tier = tier as Tier;
    f.startedD.resolve(pid);
    f.events.spawn(pid);
  }

  noContain(errno: number, what: string, detail?: string): void {
    const { launch } = this.f;
    if (what === 'lease-job') return this.f.launchFailed(errors.leaseJobBound(Number.parseInt(detail ?? '', 16)));
    this.f.launchFailed(what === 'setuid' ? errors.privilegeDropFailed(errno, launch.uid, launch.gid) : errors.noContainment(errno, what));
  }

  execFail(errno: number): void {
    this.f.launchFailed(errors.execFailed(errno, this.f.launch.executable, this.f.launch.command));
  }

  noCwd(errno: number): void {
    this.f.launchFailed(errors.anchorNoCwd(this.f.launch.cwd, errno));
  }

  rootExit(code: number | null, signal: number | null): void {
    const f = this.f;
    f.rootExit = { code, signal: signal === null ? null : signalName(signal), at: Date.now() };
    f.events.exit(f.rootExit.code, f.rootExit.signal);
    f.events.changed();
  }

  // The list at the root's exit, then what the anchor killed after it: a
  // member it lacked, or one that runs another program now (named as it
  // was when killed; whether it held the output stays as first seen).
  left(pid: number, heldOutput: boolean, command: string): void {
    const known = this.f.leftovers.find((l) => l.pid === pid);
    if (known) {
      known.command = command;
      known.heldOutput ||= heldOutput;
    } else {
      this.f.leftovers.push({ pid, command, heldOutput });
    }
  }

  group(pgid: number): void {
    this.f.group = pgid;
  }

  leftGroup(pid: number, command: string): void {
    const leaver = { pid, command };
    this.f.leavers.push(leaver);
    this.f.events.leftGroup(leaver);
  }

  leftEnd(): void {
    this.f.leftoversListed = true;
    this.f.events.changed();
  }

  released(): void {
    this.f.released = true;
    this.f.events.changed();
  }

  stuck(pids: number[], states: string[]): void {
    this.f.cleanupFailed(errors.cleanupStuck(pids, states));
  }

  unresponsive(waitedMs: number): void {
    const f = this.f;
    if (f.quiescentSeen || f.anchorGone) return;
    f.cleanupFailed(errors.anchorUnresponsive(f.events.anchorPid(), waitedMs));
  }

  quiescent(anchorLetGo: boolean): void {
    const f = this.f;
    f.quiescentSeen = true;
    if (anchorLetGo && !f.anchorGone && !f.cleanupError) {
      f.anchorLetGo = true;
      f.quiescentLetGo();
    }
    f.events.changed();
  }

  limits(limits: LimitsEvent): void {
    this.f.limitsInForce = limits;
  }

  usage(usage: UsageEvent): void {
    this.f.usage = usage;
  }

  anchorLost(sweep: AnchorLostSweep): void {
    this.f.lostSweep = sweep;
  }

  anchorExit(code: number | null, signal: NodeJS.Signals | null, error?: Error): void {
    this.f.anchorExited(code, signal, error);
  }
}
