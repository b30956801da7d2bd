// The host side of an anchor on Linux and macOS: the anchor is posix_spawned
// with the command's stdio on fds 0-2 and its end of a socket pair on fd 3
// (the control channel, both ways). It is the host's own child, which libuv
// does not know about: reaped here by pid (an unreaped child's pid is pinned,
// so the host may signal it: SIGCONT, to keep a stopped anchor running while
// the host waits on it), and the host's wait on it is bounded.
import { closeSync, openSync, readlinkSync, realpathSync, writeSync } from 'node:fs';
import { Socket } from 'node:net';
import type { IOType } from 'node:child_process';
import type { Stream } from 'node:stream';
import { isMainThread } from 'node:worker_threads';
import { debug } from '../debug.js';
import { invalidArg } from '../errors.js';
import { posixBinding, probe } from '../native.js';
import { streamFd } from '../streams.js';
import { envSize, execSizeError, type EnvSize } from './exec-size.js';
import { endCgroup, killCgroup, removeLimitDirs } from './cgroup.js';
import { AnchorChannel, spawnFailure, type AnchorHandlers, type AnchorProcess, type AnchorSpawn } from './channel.js';
import { encodeCommand, STUCK_REPORT_MS, type AnchorEvent } from './protocol.js';
import { sweepLostTree, type TreeMarker } from './lost.js';
import { expectExit, reap, releaseAnchor, signalAnchor, watchExit } from './posix-reap.js';
import { takeWarm } from './warm.js';

/**
 * How long the host waits on an anchor beyond the grace it asked for before it
 * acts without it: the anchor's own STUCK report comes STUCK_REPORT_MS (5 s)
 * after its forced kill, plus 2 s of margin. Past
 * `grace + ANCHOR_WAIT_SLACK_MS` the host ends the tree by the means it still
 * has (the cgroup tier: cgroup.kill, then, 2 s later, SIGKILL of the anchor)
 * and reports a cleanup failure wherever quiescence is not proven.
 */
export const ANCHOR_WAIT_SLACK_MS = STUCK_REPORT_MS + 2000;
/** The longest delay a Node timer takes. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** The cgroup tier: how long after its cgroup.kill the anchor gets to report quiescence itself. */
const CGROUP_KILL_WAIT_MS = 2000;
/** While the host waits on an anchor, it resumes it this often (a member may stop it, and again). */
const CONTINUE_EVERY_MS = 200;

/**
 * The command's environment as the addon takes it: "NAME=value" strings, or
 * null for the host's own, which the addon copies from the C library where
 * that is what process.env is (Node's main thread; a worker's process.env is
 * its own copy). Object.entries(process.env) asks the C library for each
 * variable in turn: about 2 us a variable on every spawn.
 */
function envStrings(env: NodeJS.ProcessEnv): string[] | null {
  if (env === process.env && isMainThread) return null;
  const out: string[] = [];
  const names = Object.keys(env);
  for (let i = 0; i < names.length; i++) {
    const value = env[names[i]!];
    if (value !== undefined) out.push(`${names[i]}=${value}`);
  }
  return out;
}

/** Whether the strings the kernel shows of an anchor's exec are its own memory: read once (execStringsOwn). */
let ownStrings: boolean | undefined;

/**
 * Whether what the kernel shows of a started anchor's exec (Linux:
 * /proc/<pid>/cmdline and environ; macOS: kern.procargs2) is in its own
 * memory, where it can overwrite the command's before its QUIET. Not where a
 * user-mode emulator runs it (qemu-user through binfmt_misc: the process is
 * the emulator, /proc/<pid>/exe names it, and the strings shown are the
 * emulator's, out of the anchor's reach). Read once, off the first anchor;
 * an anchor that cannot be read (gone already) counts as not, uncached.
 */
function execStringsOwn(pid: number, path: string): boolean {
  if (ownStrings !== undefined) return ownStrings;
  if (process.platform !== 'linux') return (ownStrings = true);
  try {
    ownStrings = readlinkSync(`/proc/${pid}/exe`) === realpathSync(path);
  } catch (err) {
    debug('anchor %d: its executable cannot be read (%s): its exit is waited for', pid, (err as Error).message);
    return false;
  }
  if (!ownStrings) debug('anchor %d runs under an emulator: the exit of each cold anchor is waited for', pid);
  return ownStrings;
}

/** The host's own environment's size, as the addon reads it (envStrings()'s null). */
function hostEnvSize(): EnvSize {
  const [count, bytes, longestBytes, longestHead] = posixBinding().environSize();
  return { count, bytes, longestBytes, longestHead };
}

/** What the addon's spawnAnchor() takes for one stdio entry (-1 a pipe, -2 /dev/null, else a descriptor). */
function stdioFd(entry: IOType | number | Stream, index: number): number {
  if (entry === 'pipe') return -1;
  if (entry === 'ignore') return -2;
  if (entry === 'inherit') return index;
  if (typeof entry === 'number') return entry;
  const fd = streamFd(entry as Stream);
  if (fd === undefined) throw invalidArg(`stdio[${index}]`, entry, 'a stream with an open file descriptor');
  return fd;
}

// The anchors the host is waiting on (for READY, or to act on TERM or KILL)
// are resumed together, every CONTINUE_EVERY_MS, by one timer for any number
// of them (a member may stop its anchor with SIGSTOP, and again): nothing per
// tree on a timer. Keyed by channel, not pid: a reaped anchor's pid may be
// the next anchor's.
const continuing = new Set<PosixAnchorChannel>();
let continueTimer: NodeJS.Timeout | undefined;

function continueAll(): void {
  for (const channel of continuing) channel.resume();
}

function keepContinuing(channel: PosixAnchorChannel): void {
  continuing.add(channel);
  if (continueTimer) return;
  continueTimer = setInterval(continueAll, CONTINUE_EVERY_MS);
  continueTimer.unref();
}

function stopContinuing(channel: PosixAnchorChannel): void {
  continuing.delete(channel);
  if (continuing.size > 0 || !continueTimer) return;
  clearInterval(continueTimer);
  continueTimer = undefined;
}

/**
 * The anchor process as the host holds it: its pid, our ends of the
 * command's stdio, and its reaping (one object of prototype methods per tree).
 * stdin is made into a stream when first asked for: a tree whose stdin is
 * never written holds only its descriptor (about 0.8 kB of heap and a libuv
 * handle less a tree); at the anchor's exit it is made and closed if it was
 * not, as child_process closes a child's stdin.
 */
class PosixAnchorProcess implements AnchorProcess {
  /** Our end of stdin as a stream, once made (undefined: not yet). */
  private stdinStream: Socket | null | undefined;

  constructor(
    private readonly channel: PosixAnchorChannel,
    readonly pid: number,
    private readonly stdinFd: number,
    readonly stdout: Socket | null,
    readonly stderr: Socket | null,
  ) {}

  get stdinOnDemand(): boolean {
    return true;
  }

  get stdin(): Socket | null {
    if (this.stdinStream === undefined) this.stdinStream = this.stdinFd >= 0 ? new Socket({ fd: this.stdinFd, readable: false, writable: true }) : null;
    return this.stdinStream;
  }

  ref(): void {
    this.channel.reapRef = true;
    this.channel.reapTimer?.ref();
  }

  unref(): void {
    this.channel.reapRef = false;
    this.channel.reapTimer?.unref();
  }

  /** watchExit's listener: the anchor exited and was reaped. */
  exited(code: number | null, signal: NodeJS.Signals | null): void {
    this.channel['anchorExited'](code, signal);
  }
}

export class PosixAnchorChannel extends AnchorChannel {
  readonly child: PosixAnchorProcess;
  /** The host's end of the control socket pair (written directly, see send()). */
  private readonly hostFd: number;
  /** @internal Retries of reaping the anchor after its end of the channel closed (PosixAnchorProcess refs and unrefs it). */
  reapTimer: NodeJS.Timeout | undefined;
  /** @internal */
  reapRef = true;
  /** The cgroup tier: the tree's cgroup, as READY named it. */
  private cgroup: string | undefined;
  /** The v1 cgroups the anchor made for the tree's limits (LIMITDIR); made at the first. */
  private limitDirs: string[] | undefined;
  private quiescentSeen = false;
  private readySeen = false;
  /** The subreaper and process-group tiers: the tree's marker and session (MARKER), for the sweep if the anchor dies. */
  private marker: TreeMarker | undefined;
  /** Starts the next warm anchor (./warm.ts), once this one has launched the command. */
  private warmNext: (() => void) | undefined;
  /** When the host stops waiting on the anchor (grace + ANCHOR_WAIT_SLACK_MS), and its timer. */
  private waitDeadline = Infinity;
  private waitTimer: NodeJS.Timeout | undefined;
  private waitStartedAt = 0;

  constructor(spec: AnchorSpawn, on: AnchorHandlers) {
    super(on, spec.exitGrace);
    // posix_spawn: no copy of the host's address space, unlike child_process's fork.
    const b = posixBinding();
    const stdio = spec.stdio.map(stdioFd);
    const env = envStrings(spec.env);
    const lease = spec.lease;
    // What only this platform's anchor takes: where a leased one makes its endpoint.
    const argv = [spec.path, ...(lease ? ['--lease-dir', lease.dir] : []), ...spec.args];
    // Linux: what the exec would refuse with E2BIG is refused here, before
    // anything runs (qemu-user, for one, cannot report a failed exec of
    // posix_spawn's child synchronously).
    const limits = probe();
    if (limits.pageSize !== undefined || limits.argMax !== undefined) {
      const tooLarge = execSizeError(spec.path, argv, env ? envSize(env) : hostEnvSize(), limits);
      if (tooLarge) throw tooLarge;
    }
    // A warm anchor, started ahead of need, takes the command if one is
    // ready (./warm.ts); else one is started now.
    const warm = lease ? undefined : takeWarm(spec.path, spec.warm, spec.args, env, stdio);
    this.warmNext = warm?.next;
    let started = warm?.started;
    if (!started) {
      // A leased anchor's own descriptor of the log: it appends the output there while no host is attached.
      const logFd = lease ? openSync(lease.logPath, 'a') : -1;
      try {
        // The anchor enters the command's working directory itself (glibc's
        // posix_spawn can do it only from 2.29 on).
        started = lease ? b.spawnAnchor(spec.path, argv, env, stdio, logFd) : b.spawnAnchor(spec.path, argv, env, stdio);
      } catch (cause) {
        throw spawnFailure(cause, spec.path);
      } finally {
        if (logFd >= 0) closeSync(logFd);
      }
    }
    this.hostFd = started.control;
    // By its QUIET it has left the command's directory and overwritten the
    // command's arguments and environment in its own exec strings (a cold
    // one; a warm one's never were the command's): its exit is not waited for
    // (AnchorChannel.letsGoAtQuiet; not a leased one's).
    this.letsGoAtQuiet = warm?.started !== undefined || execStringsOwn(started.pid, spec.path);
    const [inFd, outFd, errFd] = started.fds as [number, number, number];
    this.child = new PosixAnchorProcess(
      this,
      started.pid,
      inFd,
      outFd >= 0 ? new Socket({ fd: outFd, readable: true, writable: false }) : null,
      errFd >= 0 ? new Socket({ fd: errFd, readable: true, writable: false }) : null,
    );
    this.listen(new Socket({ fd: started.control, readable: true, writable: true }));
    if (lease) {
      this.leased = true;
      this.send(encodeCommand({ type: 'lease', ms: lease.ms, token: lease.token }));
    }
    // Held unreaped once it exits until its exit is reported (close()): the
    // session and group ids it leads stay the tree's for the sweep (./lost.ts).
    watchExit(started.pid, this.child, true);
    // The host waits for the anchor's READY (spawn's `started`): the command
    // may already run and stop it (kill -STOP $PPID) before it reports.
    keepContinuing(this);
    this.register();
  }

  terminateSync(): void {
    if (!this.open || this.socket.destroyed) return;
    try {
      writeSync(this.hostFd, encodeCommand({ type: 'term', graceMs: this.exitGrace }));
    } catch (err) {
      debug('exit-time TERM failed: %s', (err as Error).message);
    }
    // A stopped anchor could not act on it: the last time the host can resume it.
    if (!this.gone) signalAnchor(this.child.pid, 'SIGCONT');
  }

  protected override send(line: string): void {
    if (!this.open || this.socket.destroyed) return;
    // Written directly, so a write that fails because the anchor has just
    // exited (EPIPE) cannot make the socket destroy itself before the lines
    // the anchor sent last (QUIET) are read.
    try {
      writeSync(this.hostFd, line);
    } catch (err) {
      debug('control write failed (the anchor is exiting): %s', (err as Error).message);
    }
  }

  protected override observe(event: AnchorEvent): void {
    switch (event.type) {
      case 'ready':
        this.readySeen = true;
        if (event.cgroup !== undefined) this.cgroup = event.cgroup;
        this.launchSettled();
        break;
      case 'noContain':
      case 'execFail':
      case 'noCwd':
        this.launchSettled();
        break;
      case 'quiescent':
        this.quiescentSeen = true;
        break;
      case 'marker':
        this.marker = { token: event.token, session: event.session };
        break;
      case 'limitDir':
        (this.limitDirs ??= []).push(event.dir);
        break;
    }
  }

  /**
   * The anchor closed its end of the channel, so it is exiting; it becomes
   * reapable a moment later (SIGCHLD usually gets there first).
   */
  protected override closedBeforeExit(): void {
    expectExit(this.child.pid);
    this.reapSoon(this.child.pid, 0);
  }

  protected override exiting(): void {
    clearTimeout(this.reapTimer);
    this.stopWaiting();
    // As child_process does at exit: nobody is left to read stdin.
    this.child.stdin?.destroy();
  }

  /**
   * The anchor gone before its tree was quiescent: the host ends the tree
   * through its cgroup (the cgroup tier), else by its marker and session
   * (./lost.ts), and says what it did (AnchorHandlers.anchorLost).
   */
  protected override cleanupAfterExit(): Promise<void> | undefined {
    if (this.quiescentSeen) return undefined;
    if (this.cgroup !== undefined) {
      // Emptied with the tree's cgroup (every member is in both): then removed too.
      const dirs = this.limitDirs ?? [];
      const started = Date.now();
      return endCgroup(this.cgroup).then(() => {
        removeLimitDirs(dirs);
        this.on.anchorLost?.({ by: 'cgroup', swept: [], unreached: [], ms: Date.now() - started });
      });
    }
    if (!this.readySeen) return undefined; // nothing ran
    return new Promise((resolve) => {
      this.on.anchorLost?.(sweepLostTree(this.marker));
      resolve();
    });
  }

  protected override close(): void {
    this.stopWaiting();
    super.close();
    // Its exit is reported: the host lets the anchor's zombie go.
    releaseAnchor(this.child.pid);
  }

  /**
   * The host has asked the anchor to act, so it keeps it running until it
   * exits (a member may have stopped it with SIGSTOP, and may do so again):
   * SIGCONT now and every CONTINUE_EVERY_MS. And the wait is bounded: past
   * `graceMs + ANCHOR_WAIT_SLACK_MS` the host acts without it.
   */
  protected override keepRunning(graceMs: number): void {
    if (this.gone) return;
    const pid = this.child.pid;
    this.resume();
    keepContinuing(this);
    if (this.waitDeadline === Infinity) this.waitStartedAt = Date.now();
    const deadline = Date.now() + Math.max(0, graceMs) + ANCHOR_WAIT_SLACK_MS;
    if (deadline >= this.waitDeadline) return;
    this.waitDeadline = deadline;
    this.armWaitTimer(pid);
  }

  private reapSoon(pid: number, attempt: number): void {
    this.reapTimer = undefined;
    if (reap(pid)) return;
    const delay = Math.min(2 ** attempt, 100);
    this.reapTimer = setTimeout(() => this.reapSoon(pid, attempt + 1), delay);
    if (!this.reapRef) this.reapTimer.unref();
  }

  /**
   * Node's timers take at most 2^31-1 ms (a longer delay fires after 1 ms), and
   * a grace may be that long on its own: re-armed until the deadline is reached.
   */
  private armWaitTimer(pid: number): void {
    clearTimeout(this.waitTimer);
    const left = this.waitDeadline - Date.now();
    this.waitTimer = setTimeout(() => {
      if (Date.now() < this.waitDeadline) this.armWaitTimer(pid);
      else this.onWaitOver(pid);
    }, Math.max(0, Math.min(left, MAX_TIMER_MS)));
    this.waitTimer.unref();
  }

  private onWaitOver(pid: number): void {
    if (this.gone) return;
    const waited = Date.now() - this.waitStartedAt;
    const dir = this.cgroup;
    if (dir !== undefined && !this.quiescentSeen) {
      // The cgroup tier: every member ends now, whoever stopped the anchor
      // included; resumed, the anchor then reaps them and reports QUIET. If
      // it does not within CGROUP_KILL_WAIT_MS, it is killed (and reaped
      // here); the exit path empties and removes the cgroup.
      debug('anchor %d did not finish within %d ms: cgroup.kill of %s', pid, waited, dir);
      killCgroup(dir);
      signalAnchor(pid, 'SIGCONT');
      this.waitTimer = setTimeout(() => {
        if (this.gone) return;
        debug('anchor %d still running %d ms after cgroup.kill: SIGKILL', pid, CGROUP_KILL_WAIT_MS);
        this.on.unresponsive(Date.now() - this.waitStartedAt);
        signalAnchor(pid, 'SIGKILL');
      }, CGROUP_KILL_WAIT_MS);
      this.waitTimer.unref();
      return;
    }
    // No other means here: the anchor keeps being resumed (it may still finish)
    // but the host cannot prove quiescence.
    debug('anchor %d did not finish within %d ms', pid, waited);
    this.on.unresponsive(waited);
  }

  /** SIGCONT to the anchor, while it is the host's unreaped child (see continueAll()). */
  resume(): void {
    if (!this.gone) signalAnchor(this.child.pid, 'SIGCONT');
  }

  /** The anchor reported how the launch went: the host waits on it no more, unless it asked it to act. */
  private launchSettled(): void {
    this.warmNext?.();
    this.warmNext = undefined;
    if (this.waitDeadline !== Infinity) return;
    stopContinuing(this);
  }

  private stopWaiting(): void {
    stopContinuing(this);
    clearTimeout(this.waitTimer);
    this.waitTimer = undefined;
  }
}
