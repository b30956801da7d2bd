// What lies behind one ContainedProcess (process.ts): the parts of its tree
// (the options it acts on, the anchor channel, the facts, the output, the
// settlement) and the hooks through which those parts tell the process what
// happened, in one object a tree. It knows the process only by the small
// interface below (its public face), so this file does not import process.ts.
import { removeConfineTmpdir, type ConfinedResult } from './confine.js';
import type { AnchorChannel } from './anchor.js';
import type { Coverage } from './capabilities.js';
import type { FactEvents, LaunchContext, TreeFacts } from './facts.js';
import type { LimitsPlan } from './limits.js';
import type { LeftoversPolicy, NormalizedOptions } from './options.js';
import type { OutputHooks, TreeOutput } from './output.js';
import type { ContainedResult, GroupLeaver, Leftover } from './result.js';
import type { Settlement, SettlementParts } from './settlement.js';
import type { AnchoredTree } from './tree.js';

/** The events of a ContainedProcess and their arguments (`on('exitt', …)` is a type error). */
export interface ContainedProcessEvents {
  /** The root runs: its pid. */
  spawn: [pid: number];
  /** The root exited (the tree may live on): its code, or the signal that ended it. */
  exit: [code: number | null, signal: NodeJS.Signals | null];
  /** A member was seen outside the tree's process group (process-group tier). */
  leftGroup: [leaver: GroupLeaver];
  /** The anchor is gone: nothing of the tree is left. */
  quiescent: [];
  /** Members outlived the root: being killed, or kept (the leftovers policy). */
  leftovers: [leftovers: Leftover[], fate: 'killing' | 'kept'];
  /** The result settled. */
  settled: [result: ContainedResult];
  /** The stop that the host's exit hook started failed (what it threw). */
  stopError: [error: unknown];
}

/** What the hooks read of their process and tell it: ContainedProcess's public face, no more. */
export interface HookedProcess {
  readonly command: string;
  readonly args: readonly string[];
  readonly startedAt: number;
  readonly lease: number | undefined;
  readonly anchorPid: number | undefined;
  readonly coverage: Coverage;
  emit<K extends keyof ContainedProcessEvents>(event: K, ...args: ContainedProcessEvents[K]): boolean;
}

/**
 * A tree's facts, output and settlement tell their ContainedProcess through
 * this one object, which also holds them (its methods are the prototype's:
 * nothing is made per tree but the object itself). The process makes it and
 * wires the parts into it (process.ts); it reads the process's public state
 * (HookedProcess) when asked.
 */
export class TreeHooks implements FactEvents, LaunchContext, OutputHooks, SettlementParts {
  /** The options the facade acts on (the tree's). */
  readonly opts: NormalizedOptions;
  /** What a launch failure names, and what the result says besides the facts (kept from the tree, which is not kept). */
  readonly executable: string;
  private readonly limits: LimitsPlan | undefined;
  private readonly confined: ConfinedResult | undefined;
  // Each set once by the process as it wires the tree (process.ts): the parts
  // (the facts, the output and the settlement are made with this object as
  // their hooks; the anchor channel is the tree's, connected), then the
  // timeout's timer and the abort listener, which the hooks clear (the timer
  // at the root's exit; both once the result is out).
  facts!: TreeFacts;
  anchor!: AnchorChannel;
  output!: TreeOutput;
  settlement!: Settlement;
  timeoutTimer: NodeJS.Timeout | undefined;
  /** Made only with a `signal`. */
  onAbort: (() => void) | undefined;

  constructor(
    private readonly p: HookedProcess,
    tree: AnchoredTree,
  ) {
    this.opts = tree.opts;
    this.executable = tree.executable;
    this.limits = tree.limits;
    this.confined = tree.confined;
  }

  // FactEvents
  spawn(pid: number): void {
    this.p.emit('spawn', pid);
  }

  exit(code: number | null, signal: NodeJS.Signals | null): void {
    this.p.emit('exit', code, signal);
    // The timeout bounds the command's run; after it, waitDelay bounds the drain.
    clearTimeout(this.timeoutTimer);
    this.output.rootExited();
  }

  leftGroup(leaver: GroupLeaver): void {
    this.p.emit('leftGroup', leaver);
  }

  anchorGone(): void {
    // The tree is gone: its confined temp dir goes with it (a leased tree's outlives this host's anchor channel).
    if (this.confined && this.p.lease === undefined) removeConfineTmpdir(this.confined.tmpdir);
    this.p.emit('quiescent');
  }

  /** (FactEvents and OutputHooks) Something the result may wait on changed. */
  changed(): void {
    // (not set yet while the process wires the facts and the output)
    this.settlement?.advance();
  }

  anchorPid(): number | undefined {
    return this.p.anchorPid;
  }

  // LaunchContext (and executable, above)
  get command(): string {
    return this.p.command;
  }

  get cwd(): string {
    return this.opts.cwd;
  }

  get uid(): number | undefined {
    return this.opts.uid;
  }

  get gid(): number | undefined {
    return this.opts.gid;
  }

  // OutputHooks
  get waitDelay(): number {
    return this.opts.waitDelay;
  }

  get logPath(): string | undefined {
    return this.opts.log;
  }

  partial(): boolean {
    return this.p.coverage === 'partial';
  }

  // SettlementParts (and facts, output, anchor, above)
  get leftovers(): LeftoversPolicy {
    return this.opts.leftovers;
  }

  get grace(): number {
    return this.opts.grace;
  }

  get describe(): SettlementParts['describe'] {
    const p = this.p;
    return { command: p.command, args: p.args, limits: this.limits, confined: this.confined, startedAt: p.startedAt, logPath: this.opts.log, coverage: () => p.coverage };
  }

  onLeftovers(leftovers: Leftover[], fate: 'killing' | 'kept'): void {
    this.p.emit('leftovers', leftovers, fate);
  }

  onSettled(result: ContainedResult): void {
    this.p.emit('settled', result);
  }

  onDone(): void {
    clearTimeout(this.timeoutTimer);
    if (this.onAbort) this.opts.signal?.removeEventListener('abort', this.onAbort);
  }
}
