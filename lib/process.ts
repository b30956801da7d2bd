// A contained process: the facade over one anchored tree. It is given a tree
// (tree.ts) whose anchor was started (launch.ts) or adopted (adopt.ts), and
// does not know which. What the anchor reports becomes facts (facts.ts); the
// result's course from them is settlement.ts's; a polite stop's sequence is
// stopping.ts's; the output pipes, the log and the bounded drain after the
// root exits (C4) are output.ts's; the object that holds those parts and
// hears them for the process is tree-hooks.ts's. Here: the wiring,
// cancellation (C10), and what callers call.
import { EventEmitter } from 'node:events';
import type { Readable, Writable } from 'node:stream';
import type { AnchorChannel } from './anchor.js';
import { coverageOf, type Coverage } from './capabilities.js';
import { debug } from './debug.js';
import { duration, type Duration } from './duration.js';
import * as errors from './errors.js';
import type { CordonError } from './errors.js';
import { TreeFacts, type TreeState } from './facts.js';
import { launchTree } from './launch.js';
import { readLines, type LinesFrom } from './lines.js';
import { binding } from './native.js';
import type { NormalizedOptions, SpawnOptionsBase, StdioOption } from './options.js';
import { TreeOutput } from './output.js';
import type { ContainedResult, MemberInfo } from './result.js';
import { Settlement } from './settlement.js';
import { PoliteStop, rootSignal } from './stopping.js';
import { isOwned, markOwned, pipeline } from './streams.js';
import { windowDimension, type TerminalOption } from './terminal.js';
import { tierSpec, type Tier } from './tiers.js';
import type { AnchoredTree } from './tree.js';
import { TreeHooks, type ContainedProcessEvents } from './tree-hooks.js';

export type { ContainedProcessEvents } from './tree-hooks.js';

export interface SpawnOptions extends SpawnOptionsBase {
  /**
   * Asked first to stop a running root (terminate() with a grace, abort,
   * timeout): e.g. write 'q' to its stdin. The root then has the grace to
   * exit; then killSignal, then the forced kill of what remains.
   */
  stop?: (proc: ContainedProcess) => unknown;
}

let treeCounter = 0;

/** A tree's stdin, stdout and stderr as the host holds them: a stream where the stdio option is 'pipe', else null. */
export interface ProcessStreams {
  stdin: Writable | null;
  stdout: Readable | null;
  stderr: Readable | null;
}

type StdioAt<S, I extends 0 | 1 | 2> = S extends readonly unknown[] ? S[I] : S;
type StreamAt<S, I extends 0 | 1 | 2, T> = [StdioAt<S, I>] extends ['pipe' | undefined] ? T : [StdioAt<S, I>] extends [Exclude<StdioOption, 'pipe'>] ? null : T | null;

/** The `pty` option as the options' type says it (undefined where it is not among them). */
type PtyOf<O> = 'pty' extends keyof O ? O['pty' & keyof O] : undefined;

/**
 * The streams `spawn()` gives for these options: each a stream where its
 * stdio entry is 'pipe' (the default), null where it is 'ignore', 'inherit',
 * a descriptor or a stream of the host's; either where the option is known
 * only at run time.
 */
export type StreamsFor<O> = [PtyOf<O>] extends [true | TerminalOption]
  ? { stdin: Writable; stdout: Readable; stderr: null } // a terminal: its input and output; stderr is the terminal too
  : 'stdio' extends keyof O
  ? { stdin: StreamAt<O['stdio' & keyof O], 0, Writable>; stdout: StreamAt<O['stdio' & keyof O], 1, Readable>; stderr: StreamAt<O['stdio' & keyof O], 2, Readable> }
  : { stdin: Writable; stdout: Readable; stderr: Readable };

/**
 * Internal (cordon/child_process, not exported by the package): called when
 * the timeout or an abort makes cordon stop the tree, before any signal is
 * sent, so `killed` is set by the decision itself rather than by a timer of
 * the caller's racing the root's exit.
 */
export const kOnCancel = Symbol('cordon.onCancel');

export class ContainedProcess<S extends ProcessStreams = ProcessStreams> extends EventEmitter<ContainedProcessEvents> implements AsyncDisposable, AsyncIterable<string> {
  /** @internal cordon/child_process's hook: see kOnCancel. */
  [kOnCancel]?: (reason: 'canceled' | 'timeout') => void;
  /** Unique within this host: how owners and UIs name the tree. */
  readonly id = `t${(++treeCounter).toString(36)}-${process.pid.toString(36)}`;
  readonly command: string;
  readonly args: readonly string[];
  /** The anchor's pid (the tree's identity holder). */
  readonly anchorPid: number | undefined;
  /** The command's stdout: a stream with stdio 'pipe' (the default), else null. */
  readonly stdout: S['stdout'];
  /** The command's stderr: a stream with stdio 'pipe' (the default), else null. */
  readonly stderr: S['stderr'];
  /** Epoch milliseconds (an adopted tree: when its first host started it). */
  readonly startedAt: number;
  /** A leased tree: the lease in ms (the tree outlives its host for that long, adoptable); else undefined. */
  readonly lease: number | undefined;
  /** A leased tree this host started: the token a new host adopts it with (registry.adopt(id, { token })). */
  readonly adoptionToken: string | undefined;
  /** A leased tree: its id in registry.adoptable() (`<anchor pid>-<16 hex>`). */
  readonly leaseId: string | undefined;
  /** This process was adopted (registry.adopt()): its anchor is another host's child; stdin is null (a terminal's: its input). */
  readonly adopted: boolean;

  /** The tree's parts (options, anchor channel, facts, output, settlement) and the hooks they call: one object (tree-hooks.ts). */
  private readonly hooks: TreeHooks;
  /** Made when a stop is first asked for (most trees end on their own): about 1 kB a tree less while they run. */
  private politeStop: PoliteStop | undefined;

  /** @internal spawn() and registry.adopt() make these. */
  constructor(tree: AnchoredTree) {
    super();
    const opts = tree.opts;
    this.command = tree.command;
    this.args = tree.args;
    this.startedAt = tree.startedAt;
    this.adopted = tree.adopted;
    this.lease = tree.lease?.ms;
    this.adoptionToken = tree.lease?.token;
    // One object of prototype methods holds the tree's parts and hears the
    // facts, the output and the settlement for this tree (not a closure per
    // hook: about 1.5 kB a tree).
    const hooks = (this.hooks = new TreeHooks(this, tree));
    const facts = (hooks.facts = new TreeFacts(tree.tier, hooks, hooks));
    const { channel, leaseId } = tree.connect(facts.handlers());
    hooks.anchor = channel;
    this.anchorPid = channel.pid;
    this.leaseId = leaseId;
    const child = channel.child;
    // (POSIX: stdin is made when first asked for; elsewhere it is here already)
    if (!child.stdinOnDemand) void this.stdin;
    const output = (hooks.output = new TreeOutput({ logFd: tree.logFd, targets: tree.outputs }, { stdout: child.stdout, stderr: child.stderr }, hooks));
    this.stdout = output.stdout as S['stdout'];
    this.stderr = output.stderr as S['stderr'];
    for (const stream of [this.stdout, this.stderr, child.stdout, child.stderr]) markOwned(stream);
    hooks.settlement = new Settlement(hooks);
    if (opts.signal) {
      hooks.onAbort = () => this.cancel('canceled');
      opts.signal.addEventListener('abort', hooks.onAbort, { once: true });
    }
    if (opts.timeout > 0) {
      hooks.timeoutTimer = setTimeout(() => this.cancel('timeout'), opts.timeout);
      hooks.timeoutTimer.unref();
    }
  }

  // What this process acts on of the tree's parts, read from the hooks object
  // (getters on the prototype: nothing more per tree). `anchor` is reached
  // from outside too: cordon/child_process's ref() and unref() (anchorOf() in
  // child_process.ts), and tests.
  private get opts(): NormalizedOptions {
    return this.hooks.opts;
  }

  private get anchor(): AnchorChannel {
    return this.hooks.anchor;
  }

  private get facts(): TreeFacts {
    return this.hooks.facts;
  }

  private get settlement(): Settlement {
    return this.hooks.settlement;
  }

  /**
   * The command's stdin: a stream with stdio 'pipe' (the default), else null
   * (and null for an adopted tree). On Linux and macOS the stream is made
   * when first asked for (a tree whose stdin is never written holds only its
   * descriptor until then).
   */
  get stdin(): S['stdin'] {
    const stdin = this.anchor.child.stdin;
    if (stdin && !isOwned(stdin)) {
      markOwned(stdin);
      stdin.on('error', stdinError);
    }
    return stdin as S['stdin'];
  }

  /** Resolves with the root's pid once it runs; rejects with the launch error. (The promise is made when first asked for.) */
  get started(): Promise<number> {
    return this.facts.started;
  }

  /** Settles once the root has exited, output is drained (bounded) and the leftovers policy is applied. (The promise is made when first asked for.) */
  get result(): Promise<ContainedResult> {
    return this.settlement.result;
  }

  private get stopping(): PoliteStop {
    return (this.politeStop ??= this.stopper());
  }

  private stopper(): PoliteStop {
    const { facts, settlement } = this;
    const hook = this.opts.stop as ((proc: ContainedProcess) => unknown) | undefined;
    return new PoliteStop(hook && (() => hook(this)), {
      get anchorGone() {
        return facts.anchorGone;
      },
      get rootRunning() {
        return facts.pid !== undefined && !facts.rootExit;
      },
      get rootStarting() {
        return facts.pid === undefined && !facts.rootExit && !facts.launchError;
      },
      get launchFailed() {
        return facts.launchError !== undefined;
      },
      started: facts.started,
      terminate: (graceMs) => settlement.terminate(graceMs),
      hookAsked: () => settlement.ending(),
      onRootExit: (listener) => {
        this.once('exit', listener);
        return () => this.off('exit', listener);
      },
      hookFailed: (error) => {
        settlement.stopError ??= { error };
        debug('%s: the stop hook failed: %s', this.command, (error as Error)?.message ?? String(error));
        this.emit('stopError', error);
      },
    });
  }

  private cancel(reason: 'canceled' | 'timeout'): void {
    const { settlement, facts } = this;
    if (settlement.decided || settlement.cancelReason || facts.launchError) return;
    if (facts.rootExit) {
      // The root already ended on its own: its result stays what it was; what
      // is left of the tree is stopped all the same.
      debug('%s: %s after the root exited: terminating the rest', this.command, reason);
      settlement.terminate(this.opts.interruptGrace);
      return;
    }
    settlement.cancelReason = reason;
    this[kOnCancel]?.(reason);
    debug('%s: %s, interrupt grace %d ms', this.command, reason, this.opts.interruptGrace);
    this.stopping.stop(this.opts.interruptGrace);
  }

  /** The root's pid, once it runs (see `started`). */
  get pid(): number | undefined {
    return this.facts.pid;
  }

  /** The root's exit code once it exited (null before, or when a signal ended it), as ChildProcess has it. */
  get exitCode(): number | null {
    return this.facts.rootExit?.code ?? null;
  }

  /** The signal that ended the root, once one did (null otherwise), as ChildProcess has it. */
  get signalCode(): NodeJS.Signals | null {
    return this.facts.rootExit?.signal ?? null;
  }

  /** Whether the root has exited ('exit' was emitted). */
  get rootExited(): boolean {
    return this.facts.rootExit !== undefined;
  }

  /** The tier asked for, then the one in force once the root runs (a default spawn may fall back). */
  get tier(): Tier {
    return this.facts.tier;
  }

  /**
   * 'starting' until the root runs; 'running' while it does; 'leftovers' after
   * it exited while members remain; 'ended' at quiescence; 'failed' if it never ran.
   */
  get state(): TreeState {
    return this.facts.state;
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
    return this.facts.isQuiescent;
  }

  /**
   * Polite signal to every member of the tree, the forced kill of what remains
   * after `grace` ms (default: the teardown grace). Resolves at quiescence of
   * the whole tree, once the output its pipes carried has been read (the
   * result is out then); idempotent, safe concurrently and after exit.
   * Rejects only with a cleanup failure.
   */
  terminate(options: { grace?: Duration } = {}): Promise<void> {
    let grace: number;
    try {
      grace = duration('grace', (options ?? {}).grace, this.opts.grace);
    } catch (err) {
      return Promise.reject(err);
    }
    if (this.facts.launchError) return Promise.resolve();
    if (!this.facts.isQuiescent) {
      this.anchor.ref();
      this.stopping.stop(grace);
    }
    return this.facts.quiescent.then(() => this.settlement.afterQuiescence());
  }

  /** The tree runs on a terminal (`pty`; an adopted tree: if its first host spawned it so). */
  get terminal(): boolean {
    return this.opts.pty !== undefined;
  }

  /** A terminal's window size (spawned with `pty`): the kernel tells its foreground job (SIGWINCH). */
  resize(cols: number, rows: number): void {
    if (!this.opts.pty) throw errors.notTerminal();
    this.anchor.resize(windowDimension('cols', cols), windowDimension('rows', rows));
  }

  /**
   * `kill()`: the immediate forced kill of every member; resolves at
   * quiescence. `kill(signal)`: that signal to the root alone, as
   * `ChildProcess.kill(signal)` sends it (a host that forwards Ctrl-C sends
   * 'SIGINT'); the tree is not terminated, and its members keep running
   * unless the signal ends them. True when it was sent: the root has not
   * exited as far as this host knows (the anchor signals it only while it is
   * its own unreaped child, never a recycled pid; one asked before the
   * anchor said the root runs is sent once it does: the anchor reads the
   * request after it started the root); signal 0 sends nothing and says
   * whether it would. On Windows 'SIGTERM', 'SIGKILL' and 'SIGINT' end the
   * root (TerminateProcess, as Node does); other signals are refused.
   */
  kill(): Promise<void>;
  kill(signal: NodeJS.Signals | number): boolean;
  kill(signal?: NodeJS.Signals | number): Promise<void> | boolean {
    if (signal === undefined) return this.terminate({ grace: 0 });
    const signo = rootSignal(signal);
    if (this.rootExited || this.facts.launchError || this.facts.isQuiescent) return false;
    if (signo !== 0) this.anchor.signalRoot(signo);
    return true;
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
   * `for await (const line of proc)`: the same as `proc.lines()`, stdout's
   * lines (as execa iterates a subprocess): '\n' and '\r\n' endings removed,
   * a last line without a newline given at the end. Stdout must be piped
   * (ERR_INVALID_ARG_VALUE otherwise, when the loop starts).
   */
  [Symbol.asyncIterator](): AsyncIterableIterator<string> {
    return this.lines();
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
    pipeline(this[from], from, target.stdin, target.command);
    return target;
  }

  /** Live members as the OS sees them now (pid, parent, command line). Informational; [] once the anchor is gone. */
  members(): MemberInfo[] {
    // Once the anchor is gone (quiescence, or ERR_CORDON_ANCHOR_LOST) its pid
    // is free and may already be another process's: nothing is listed
    // through it, ever.
    if (this.anchorPid === undefined || this.facts.isQuiescent || this.facts.anchorGone || this.anchor.exited) return [];
    return binding()
      .listTree(this.anchorPid, tierSpec(this.tier)?.membersByGroup ? this.facts.group : 0)
      .map((m) => ({ pid: m.pid, ppid: m.ppid, command: m.command }));
  }
}

/** What stdin's errors come to: the command stopped reading (EPIPE); a writer sees it in its own callback. */
function stdinError(err: Error): void {
  debug('stdin: %s', err.message);
}

/**
 * Start `command` contained. Throws a CordonError synchronously on bad input
 * or a known launch failure. The streams' types follow `stdio`.
 */
export function spawn<const O extends SpawnOptions = Record<never, never>>(command: string, args?: readonly string[], options?: O): ContainedProcess<StreamsFor<O>>;
/** Options given in second place (`spawn(file, options)`, as Node's spawn takes them). */
export function spawn<const O extends SpawnOptions>(command: string, options: O): ContainedProcess<StreamsFor<O>>;
export function spawn(command: string, argsOrOptions: readonly string[] | SpawnOptions = [], maybeOptions: SpawnOptions = {}): ContainedProcess {
  const optionsSecond = argsOrOptions !== null && typeof argsOrOptions === 'object' && !Array.isArray(argsOrOptions);
  const args = (optionsSecond ? [] : argsOrOptions) as readonly string[];
  const options = (optionsSecond ? argsOrOptions : maybeOptions) as SpawnOptions;
  return new ContainedProcess(launchTree(command, args, options));
}
