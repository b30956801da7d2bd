// The host side of one anchor, what both platforms share: reading the
// anchor's lines off the control channel into events (./protocol.ts) for the
// handlers, reporting the anchor's exit only once everything it wrote was
// read, and the host's exit hook. How the anchor is started, kept running,
// told things and cleaned up after is each platform's (./posix.ts,
// ./windows.ts). The host never signals a tree pid itself: only the anchor
// does, through pinned identities.
import type { IOType } from 'node:child_process';
import type { Socket } from 'node:net';
import type { Readable, Stream, Writable } from 'node:stream';
import { debug } from '../debug.js';
import { anchorSpawnFailed, argsTooLarge, type CordonError } from '../errors.js';
import type { AnchorLostSweep } from '../errors.js';
import { encodeCommand, parseLine, splitLines, type AnchorEvent } from './protocol.js';

/** What an anchor's USAGE line says (null: not measured). */
export type UsageEvent = Omit<Extract<AnchorEvent, { type: 'usage' }>, 'type'>;
/** What an anchor's LIMITS line says. */
export type LimitsEvent = Omit<Extract<AnchorEvent, { type: 'limits' }>, 'type'>;

export interface AnchorHandlers {
  ready(pid: number, tier: string, pidfd: boolean): void;
  /** NOCONTAIN: nothing ran; `detail` as the anchor added it (lease-job: the Job Object's LimitFlags, hex). */
  noContain(errno: number, what: string, detail?: string): void;
  execFail(errno: number): void;
  /** The anchor could not enter the command's working directory (POSIX; nothing ran). */
  noCwd(errno: number): void;
  rootExit(code: number | null, signal: number | null): void;
  left(pid: number, heldOutput: boolean, command: string): void;
  leftEnd(): void;
  /** The process-group tier: the tree's process group (sent before READY). */
  group(pgid: number): void;
  /** The process-group tier: a member the anchor saw outside the tree's process group. */
  leftGroup(pid: number, command: string): void;
  released(): void;
  /** STUCK: members alive 5 s after the forced kill, each with its state letter ('D': waiting in the kernel). */
  stuck(pids: number[], states: string[]): void;
  /**
   * QUIET: the tree is quiescent (every member gone and reaped); the anchor
   * exits. `anchorLetGo`: the anchor holds nothing of the tree's or the
   * command's from its QUIET on (AnchorChannel.letsGoAtQuiet), so nothing
   * waits for its exit.
   */
  quiescent(anchorLetGo: boolean): void;
  /** LIMITS: what the kernel enforces on the tree (before READY). */
  limits(limits: LimitsEvent): void;
  /** USAGE: what the tree used so far. */
  usage(usage: UsageEvent): void;
  /**
   * The anchor did not finish within the grace asked for plus
   * ANCHOR_WAIT_SLACK_MS (stopped, or stuck): quiescence cannot be proven.
   */
  unresponsive(waitedMs: number): void;
  /**
   * The anchor died before its tree was quiescent, and the host swept what it
   * could still tell is the tree's (./lost.ts; the cgroup tier: its cgroup):
   * reported right before anchorExit.
   */
  anchorLost?(sweep: AnchorLostSweep): void;
  anchorExit(code: number | null, signal: NodeJS.Signals | null, error?: Error): void;
}

/**
 * `on` with some of its handlers replaced (each replacement calls `on`'s own
 * as it needs): the rest are `on`'s, found through the prototype, so handlers
 * that are an object's methods keep their `this` (a spread would drop them).
 */
export function overriding(on: AnchorHandlers, own: Partial<AnchorHandlers>): AnchorHandlers {
  return Object.assign(Object.create(on) as AnchorHandlers, own);
}

export interface AnchorSpawn {
  /** The anchor executable (absolute). */
  path: string;
  /**
   * The anchor's arguments as every platform's anchor takes them (launch.ts
   * plans them: --cwd, the tier, the lease, ..., `--`, the command); the
   * platform's channel adds only what its anchor alone takes.
   */
  args: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  stdio: Array<IOType | number | Stream>;
  /** Teardown grace the host asks for if it exits while the tree lives. */
  exitGrace: number;
  /**
   * A launch a warm anchor may take (Linux, ./warm.ts; Windows,
   * ./windows-warm.ts): that anchor's own arguments (its tier and trace;
   * native/posix/warm.h, native/win/warm.h). Absent where the anchor must be
   * started for this launch (a lease, limits, a terminal on Windows, another tier).
   */
  warm?: string[];
  /**
   * A leased tree: the anchor outlives the host for `ms`, adoptable with
   * `token` (sent on the control channel as LEASE <ms> <token>, never in
   * argv). POSIX: its endpoint goes in `dir` (--lease-dir), and it gets an
   * O_APPEND descriptor of `logPath` to append the output to while no host
   * is attached; Windows: --log `logPath` (it opens the log itself).
   */
  lease?: { ms: number; token: string; dir: string; logPath: string };
}

/** The anchor process as the host sees it (a ChildProcess on Windows). */
export interface AnchorProcess {
  readonly pid?: number | undefined;
  readonly stdin: Writable | null;
  /** stdin is made into a stream when `stdin` is first read (POSIX), not before. */
  readonly stdinOnDemand?: boolean;
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  ref(): void;
  unref(): void;
}

const live = new Set<AnchorChannel>();

/** A control socket knows its channel: its listeners are these three functions, shared by every tree (not closures of each). */
const kChannel = Symbol('cordon.channel');
type ControlSocket = Socket & { [kChannel]: AnchorChannel };

function controlData(this: ControlSocket, chunk: Buffer | string): void {
  this[kChannel]['receive'](chunk);
}

function controlError(err: Error): void {
  debug('control channel error: %s', err.message);
}

function controlClose(this: ControlSocket): void {
  this[kChannel]['channelEnded']();
}
let exitHookInstalled = false;

// Where the host can still act (normal exit, uncaught exception), it tells
// every anchor at once, synchronously; the anchors carry out the escalation
// after the host is gone. A SIGKILLed host reaches the same end through EOF.
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.prependListener('exit', () => {
    // A leased tree outlives its host on purpose: its lease clock starts.
    for (const channel of live) if (!channel.leased) channel.terminateSync();
  });
}

/** Starting the anchor failed: nothing ran. */
export function spawnFailure(cause: unknown, path: string): CordonError {
  const code = (cause as NodeJS.ErrnoException).code ?? 'ERR_CORDON_ANCHOR_MISSING';
  if (code === 'E2BIG') {
    // The kernel's limit on what one exec carries: the anchor's exec carries
    // the command's, so this is about the command.
    return argsTooLarge('the total, or a single string of 32 pages or more', { cause, syscall: 'spawn', path });
  }
  return anchorSpawnFailed(code, cause, path);
}

export abstract class AnchorChannel {
  abstract readonly child: AnchorProcess;
  /** The anchor -> host side of the control channel (set by listen()). */
  protected socket!: Socket;
  /** A leased tree: the host's exit does not end it (its lease does). */
  leased = false;
  /** The channel is usable: not closed by the anchor, nor by the host. */
  protected open = true;
  /**
   * From its QUIET on, the anchor holds nothing of the tree's or the
   * command's (POSIX: it let the command's stdio go once the command started;
   * before QUIET it leaves the command's working directory and, a cold one,
   * overwrites the command's arguments and environment in its own exec
   * strings: native/posix/anchor.cc). Its exit, which follows, is then not
   * waited for: it is reaped when it comes. Never for a leased tree.
   */
  protected letsGoAtQuiet = false;
  /** The anchor exited (POSIX: and was reaped; its pid may be reused from now on). */
  protected gone = false;
  private inbox = '';
  /** Bytes read after the last newline (a line's start; not decoded until the line is whole). */
  private partial: Buffer | undefined;
  private exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private channelClosed = false;
  private exitReported = false;

  protected constructor(
    protected readonly on: AnchorHandlers,
    /** The teardown grace the host asks for in its exit hook. */
    protected readonly exitGrace: number,
  ) {}

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** The anchor has exited (POSIX: and was reaped): its pid is free and may be anyone's now. */
  get exited(): boolean {
    return this.gone;
  }

  /** Polite signal to every member now, the forced kill after `graceMs`. */
  terminate(graceMs: number): void {
    this.send(encodeCommand(graceMs <= 0 ? { type: 'kill' } : { type: 'term', graceMs }));
    this.keepRunning(graceMs);
  }

  /** A terminal's window size (the anchor of a tree spawned with a pty). */
  resize(cols: number, rows: number): void {
    this.send(encodeCommand({ type: 'resize', cols, rows }));
  }

  /** `signal` (a number) to the root alone: the anchor sends it while the root is its unreaped child. */
  signalRoot(signal: number): void {
    this.send(encodeCommand({ type: 'signal', signal }));
  }

  /** For the host's 'exit' listener: no event loop left, so it acts synchronously. */
  abstract terminateSync(): void;

  ref(): void {
    this.child.ref();
    this.socket.ref();
  }

  unref(): void {
    this.child.unref();
    this.socket.unref();
  }

  /** Writes one host command line to the anchor (dropped once the channel is closed). */
  protected abstract send(line: string): void;

  /** The host has asked the anchor to act (TERM, KILL) with this grace. */
  protected keepRunning(_graceMs: number): void {}

  /** An event, seen before its handler runs (what a platform's side keeps of it). */
  protected observe(_event: AnchorEvent): void {}

  /** The anchor's end of the channel closed before its exit was known. */
  protected closedBeforeExit(): void {}

  /** The anchor exited: what the platform's side stops doing now. */
  protected exiting(): void {}

  /** Before the anchor's exit is reported: cleanup the host still owes the tree (bounded), if any. */
  protected cleanupAfterExit(): Promise<void> | undefined {
    return undefined;
  }

  /** Reads the anchor's lines off `socket` (`pending`: what was already read of it), and learns from it when the anchor's end closes. */
  protected listen(socket: Socket, pending = ''): void {
    this.socket = socket;
    if (pending) queueMicrotask(() => this.receive(pending));
    // Buffers, split at newlines before they are decoded (a UTF-8 sequence
    // never holds a newline byte): no StringDecoder and its buffer per tree.
    (socket as ControlSocket)[kChannel] = this;
    socket.on('data', controlData);
    socket.on('error', controlError);
    socket.on('close', controlClose);
  }

  /** The anchor's end of the channel closed. */
  private channelEnded(): void {
    this.open = false;
    this.channelClosed = true;
    if (!this.exitInfo) this.closedBeforeExit();
    this.report();
  }

  /** Lets the host's exit hook reach this anchor. */
  protected register(): void {
    live.add(this);
    installExitHook();
  }

  /** The anchor process exited. */
  protected anchorExited(code: number | null, signal: NodeJS.Signals | null): void {
    debug('anchor %d exited code=%s signal=%s', this.child.pid, code, signal);
    this.gone = true;
    this.exitInfo = { code, signal };
    this.exiting();
    // Everything the anchor wrote is read before its exit is reported: its
    // end of the channel closes as it exits. Bounded in case a stray copy
    // of that end lives on somewhere.
    // setImmediate: a stalled event loop must first get to read what is
    // already waiting on the channel (QUIET) before this verdict.
    setTimeout(() => {
      setImmediate(() => {
        this.channelClosed = true;
        this.report();
      });
    }, 1000).unref();
    this.report();
  }

  /** The anchor process could not be started at all (Windows: child_process's 'error'). */
  protected startFailed(err: Error): void {
    if (this.exitReported) return;
    this.exitReported = true;
    this.close();
    this.on.anchorExit(null, null, err);
  }

  protected close(): void {
    live.delete(this);
    this.open = false;
    if (!this.socket.destroyed) this.socket.destroy();
  }

  private report(): void {
    if (this.exitReported || !this.exitInfo || !this.channelClosed) return;
    this.exitReported = true;
    const info = this.exitInfo;
    const done = () => {
      this.close();
      this.on.anchorExit(info.code, info.signal);
    };
    const cleanup = this.cleanupAfterExit();
    if (cleanup) void cleanup.then(done);
    else done();
  }

  private receive(chunk: Buffer | string): void {
    let text: string;
    if (typeof chunk === 'string') {
      text = chunk;
    } else {
      const end = chunk.lastIndexOf(10) + 1;
      if (end === 0) {
        this.partial = this.partial ? Buffer.concat([this.partial, chunk]) : Buffer.from(chunk);
        return;
      }
      const whole = chunk.subarray(0, end);
      text = (this.partial ? Buffer.concat([this.partial, whole]) : whole).toString('utf8');
      this.partial = end < chunk.length ? Buffer.from(chunk.subarray(end)) : undefined;
    }
    const { lines, rest } = splitLines(this.inbox + text);
    this.inbox = rest;
    for (const line of lines) this.dispatch(line);
  }

  private dispatch(line: string): void {
    debug('anchor %d: %s', this.child.pid, line.length > 200 ? line.slice(0, 200) + '...' : line);
    const event = parseLine(line);
    if (event.type === 'unknown' || event.type === 'malformed') {
      debug('%s anchor line: %s', event.type, event.type === 'malformed' ? event.reason : line);
      return;
    }
    this.observe(event);
    const on = this.on;
    switch (event.type) {
      case 'group':
        return on.group(event.pgid);
      case 'ready':
        return on.ready(event.pid, event.tier, event.pidfd);
      case 'noContain':
        return on.noContain(event.errno, event.what, event.detail);
      case 'execFail':
        return on.execFail(event.errno);
      case 'noCwd':
        return on.noCwd(event.errno);
      case 'exit':
        return on.rootExit(event.code, event.signal);
      case 'left':
        return on.left(event.pid, event.heldOutput, event.command);
      case 'leftEnd':
        return on.leftEnd();
      case 'leftGroup':
        return on.leftGroup(event.pid, event.command);
      case 'released':
        return on.released();
      case 'stuck':
        return on.stuck(event.pids, event.states);
      case 'quiescent':
        on.quiescent(this.letsGoAtQuiet && !this.leased);
        // A leased anchor holds the result until the host says it has it
        // (a host that dies before this leaves it to an adopter).
        if (this.leased) this.send(encodeCommand({ type: 'done' }));
        return;
      case 'limits': {
        const { type: _, ...limits } = event;
        return on.limits(limits);
      }
      case 'usage': {
        const { type: _, ...usage } = event;
        return on.usage(usage);
      }
      case 'limitDir':
      case 'marker':
        return; // the channel's own (observe)
    }
  }
}
