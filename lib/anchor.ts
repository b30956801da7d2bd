// The host side of one anchor: spawns the helper with the command's stdio and
// a control channel on fd 3, parses what the anchor reports, and carries the
// few commands the host may give (TERM with a grace, KILL). The host never
// signals a tree pid itself: only the anchor does, through pinned identities.
import { spawn as spawnChild, type ChildProcess, type IOType } from 'node:child_process';
import type { Readable, Stream, Writable } from 'node:stream';
import { existsSync, readdirSync, readFileSync, rmdirSync, writeFileSync, writeSync } from 'node:fs';
import { Socket } from 'node:net';
import { constants as osConstants } from 'node:os';
import { debug } from './debug.js';
import { CordonError, invalidArg } from './errors.js';
import { binding } from './native.js';
import { streamFd } from './options.js';
import { encodeCommand, parseLine, splitLines, STUCK_REPORT_MS } from './anchor/protocol.js';

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

export interface AnchorHandlers {
  ready(pid: number, tier: string, pidfd: boolean): void;
  noContain(errno: number, what: string): void;
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
  stuck(pids: number[]): void;
  quiet(): void;
  /**
   * The anchor did not finish within the grace asked for plus
   * ANCHOR_WAIT_SLACK_MS (stopped, or stuck): quiescence cannot be proven.
   */
  unresponsive(waitedMs: number): void;
  anchorExit(code: number | null, signal: NodeJS.Signals | null, error?: Error): void;
}

export interface AnchorSpawn {
  helper: string;
  args: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  stdio: Array<IOType | number | Stream>;
  /** Teardown grace the host asks for if it exits while the tree lives. */
  exitGrace: number;
}

/** The helper process as the host sees it (a ChildProcess on Windows). */
export interface HelperProcess {
  readonly pid?: number | undefined;
  readonly stdin: Writable | null;
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  ref(): void;
  unref(): void;
}

const live = new Set<AnchorChannel>();
let exitHookInstalled = false;

// Where the host can still act (normal exit, uncaught exception), it tells
// every anchor at once, synchronously; the anchors carry out the escalation
// after the host is gone. A SIGKILLed host reaches the same end through EOF.
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.prependListener('exit', () => {
    for (const channel of live) channel.terminateSync();
  });
}

function helperFailure(cause: unknown, helper: string): CordonError {
  const code = (cause as NodeJS.ErrnoException).code ?? 'ERR_CORDON_HELPER_MISSING';
  if (code === 'E2BIG') {
    // The kernel's limit on what one exec carries (every argument and
    // environment string together, and 128 KiB for any single one): the
    // helper's exec carries the command's, so this is about the command.
    return new CordonError(
      "The command's arguments and environment are too large for one exec (E2BIG: the total, or a single string over 128 KiB); nothing ran. " +
        'Pass large data through a file or stdin instead.',
      { code, cause, syscall: 'spawn', path: helper, stage: 'launch' },
    );
  }
  return new CordonError(`The anchor helper could not be started (${code}); nothing ran.`, {
    code,
    cause,
    syscall: 'spawn',
    path: helper,
    stage: 'launch',
  });
}

/** POSIX: what spawnHelper() takes for one stdio entry (-1 a pipe, -2 /dev/null, else a descriptor). */
function stdioFd(entry: IOType | number | Stream, index: number): number {
  if (entry === 'pipe') return -1;
  if (entry === 'ignore') return -2;
  if (entry === 'inherit') return index;
  if (typeof entry === 'number') return entry;
  const fd = streamFd(entry as Stream);
  if (fd === undefined) throw invalidArg(`stdio[${index}]`, entry, 'a stream with an open file descriptor');
  return fd;
}

const signalNames = new Map<number, NodeJS.Signals>(
  Object.entries(osConstants.signals).map(([name, n]) => [n, name as NodeJS.Signals]),
);

// POSIX: the helpers are children of the host that libuv does not know
// about, so they are reaped here, by pid (an unreaped child's pid is pinned):
// when its end of the channel closes (it exits), and on every SIGCHLD (in
// case a stray copy of that end delays the EOF).
type ExitListener = (code: number | null, signal: NodeJS.Signals | null) => void;
const unreaped = new Map<number, ExitListener>();

function reap(pid: number): boolean {
  const listener = unreaped.get(pid);
  if (!listener) return true;
  const r = binding().reapHelper!(pid);
  if (r === null) return false;
  unreaped.delete(pid);
  if (unreaped.size === 0) process.off('SIGCHLD', reapAll);
  listener(r.code >= 0 ? r.code : null, r.signal > 0 ? (signalNames.get(r.signal) ?? null) : null);
  return true;
}

function reapAll(): void {
  for (const pid of [...unreaped.keys()]) reap(pid);
}

/**
 * POSIX: a signal to one of our helpers, only while it is in the unreaped set
 * (its pid pinned: the addon checks again that it is an unreaped child).
 */
function signalHelper(pid: number, signal: NodeJS.Signals): boolean {
  if (!unreaped.has(pid)) return false;
  try {
    binding().signalHelper!(pid, osConstants.signals[signal]);
    return true;
  } catch (err) {
    debug('%s to anchor %d failed: %s', signal, pid, (err as Error).message);
    return false;
  }
}

function watchExit(pid: number, listener: ExitListener): void {
  if (unreaped.size === 0) process.on('SIGCHLD', reapAll);
  unreaped.set(pid, listener);
}

/** A tree's cgroup and any sub-cgroups (nested cordon trees), bottom-up; the kernel refuses any with a process in it. */
function removeCgroupDir(dir: string, depth: number): void {
  try {
    if (depth < 32) {
      for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) removeCgroupDir(`${dir}/${e.name}`, depth + 1);
    }
    rmdirSync(dir);
  } catch (err) {
    debug('removing the cgroup %s: %s', dir, (err as Error).message);
  }
}

export class AnchorChannel {
  readonly child: HelperProcess;
  private readonly socket: Socket;
  /** POSIX: retries of reaping the helper after its end of the channel closed. */
  private reapTimer: NodeJS.Timeout | undefined;
  private reapRef = true;
  private readonly hostFd: number;
  private readonly exitGrace: number;
  /** Windows: the host's handle on the tree's Job Object (closed when the anchor is gone). */
  private job: number | undefined;
  /** Windows: the host -> anchor pipe (POSIX writes on `socket`). */
  private writer: Socket | undefined;
  private inbox = '';
  private open = true;
  /** The cgroup tier: the tree's cgroup, as READY named it. */
  private cgroup: string | undefined;
  private quietSeen = false;
  /** The helper exited (POSIX: reaped; its pid may be reused from now on). */
  private helperGone = false;
  /** POSIX, while the host waits on the anchor: SIGCONT every CONTINUE_EVERY_MS. */
  private continueTimer: NodeJS.Timeout | undefined;
  /** POSIX: when the host stops waiting on the anchor (grace + ANCHOR_WAIT_SLACK_MS), and its timer. */
  private waitDeadline = Infinity;
  private waitTimer: NodeJS.Timeout | undefined;
  private waitStartedAt = 0;

  constructor(spec: AnchorSpawn, private readonly on: AnchorHandlers) {
    this.exitGrace = spec.exitGrace;
    let winChild: ChildProcess | undefined;
    if (process.platform === 'win32') {
      // Windows: no socketpair to hand down. The control channel is two
      // overlapped pipes Node creates at stdio indexes 3 (anchor -> host) and
      // 4 (host -> anchor); libuv passes them in the CRT's lpReserved2 block.
      // Two pipes, so that a write failing as the anchor exits (Node then
      // destroys that socket) cannot discard lines not yet read. The tree's Job
      // Object is created here first, unnamed, so the host holds a handle on
      // it before anything runs and nothing can open it by name; the host
      // duplicates it into the helper and sends the value as the first
      // control line (`JOB <value>`; 0 if that failed: the helper then
      // reports NOCONTAIN, or runs with the weaker tier under best-effort).
      this.hostFd = -1;
      const b = binding();
      const job = b.jobCreate!();
      this.job = job.handle;
      try {
        this.child = winChild = spawnChild(spec.helper, ['--job-from-host', ...spec.args], {
          cwd: spec.cwd,
          env: spec.env,
          stdio: [...spec.stdio, 'overlapped', 'overlapped'],
          windowsHide: true,
        });
      } catch (cause) {
        this.closeJob();
        throw helperFailure(cause, spec.helper);
      }
      // (Node sets up the pipe's socket even when the spawn fails; 'error' follows.)
      this.socket = (winChild.stdio[3] as Socket | null) ?? new Socket();
      this.writer = (winChild.stdio[4] as Socket | null) ?? undefined;
      this.writer?.on('error', (err) => debug('control channel write error: %s', err.message));
      if (this.child.pid !== undefined) {
        let remote = 0;
        try {
          // The helper is the host's unreaped child: its pid is pinned.
          remote = b.jobAttach!(job.handle, this.child.pid);
        } catch (err) {
          debug('job handle not duplicated into the helper: %s', (err as Error).message);
        }
        this.writer?.write(encodeCommand({ type: 'job', handle: remote }));
      }
    } else {
      // POSIX: the helper is started with posix_spawn (no copy of the host's
      // address space, unlike child_process's fork), with the command's stdio
      // on fds 0-2 and its end of a socket pair on fd 3.
      const b = binding();
      const stdio = spec.stdio.map(stdioFd);
      const env: string[] = [];
      for (const [name, value] of Object.entries(spec.env)) if (value !== undefined) env.push(`${name}=${value}`);
      let started: { pid: number; control: number; fds: number[] };
      try {
        // The anchor enters the command's working directory itself (glibc's
        // posix_spawn can do it only from 2.29 on).
        started = b.spawnHelper!(spec.helper, [spec.helper, '--cwd', spec.cwd, ...spec.args], env, stdio);
      } catch (cause) {
        throw helperFailure(cause, spec.helper);
      }
      this.hostFd = started.control;
      const [inFd, outFd, errFd] = started.fds;
      this.child = {
        pid: started.pid,
        stdin: inFd >= 0 ? new Socket({ fd: inFd, readable: false, writable: true }) : null,
        stdout: outFd >= 0 ? new Socket({ fd: outFd, readable: true, writable: false }) : null,
        stderr: errFd >= 0 ? new Socket({ fd: errFd, readable: true, writable: false }) : null,
        ref: () => {
          this.reapRef = true;
          this.reapTimer?.ref();
        },
        unref: () => {
          this.reapRef = false;
          this.reapTimer?.unref();
        },
      };
      this.socket = new Socket({ fd: started.control, readable: true, writable: true });
    }
    this.socket.setEncoding('utf8');
    this.socket.on('data', (chunk: string) => this.receive(chunk));
    this.socket.on('error', (err) => debug('control channel error: %s', err.message));
    let exited = false;
    let exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    let channelClosed = false;
    const report = () => {
      if (exited || !exitInfo || !channelClosed) return;
      exited = true;
      const info = exitInfo;
      const done = () => {
        this.close();
        this.on.anchorExit(info.code, info.signal);
      };
      if (this.cgroup !== undefined && !this.quietSeen) void this.killCgroup(this.cgroup).then(done);
      else done();
    };
    const helperExit = (code: number | null, signal: NodeJS.Signals | null) => {
      debug('anchor %d exited code=%s signal=%s', this.child.pid, code, signal);
      clearTimeout(this.reapTimer);
      this.helperGone = true;
      this.stopWaiting();
      exitInfo = { code, signal };
      // As child_process does at exit: nobody is left to read stdin.
      if (!winChild) this.child.stdin?.destroy();
      // Everything the anchor wrote is read before its exit is reported: its
      // end of the channel closes as it exits. Bounded in case a stray copy
      // of that end lives on somewhere.
      // setImmediate: a stalled event loop must first get to read what is
      // already waiting on the channel (QUIET) before this verdict.
      setTimeout(() => {
        setImmediate(() => {
          channelClosed = true;
          report();
        });
      }, 1000).unref();
      report();
    };
    this.socket.on('close', () => {
      this.open = false;
      channelClosed = true;
      if (!winChild && !exitInfo) this.reapSoon(this.child.pid!, 0);
      report();
    });
    if (winChild) {
      winChild.on('error', (err) => {
        if (exited) return;
        exited = true;
        this.close();
        this.on.anchorExit(null, null, err);
      });
      winChild.on('exit', helperExit);
    } else {
      watchExit(this.child.pid!, helperExit);
      // The host waits for the anchor's READY (spawn's `started`): the command
      // may already run and stop it (kill -STOP $PPID) before it reports.
      this.continueEvery(this.child.pid!);
    }
    live.add(this);
    installExitHook();
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** The helper has exited and was reaped: its pid is free and may be anyone's now. */
  get exited(): boolean {
    return this.helperGone;
  }

  /**
   * POSIX: the helper closed its end of the channel, so it is exiting; it
   * becomes reapable a moment later (SIGCHLD usually gets there first).
   */
  private reapSoon(pid: number, attempt: number): void {
    this.reapTimer = undefined;
    if (reap(pid)) return;
    const delay = Math.min(2 ** attempt, 100);
    this.reapTimer = setTimeout(() => this.reapSoon(pid, attempt + 1), delay);
    if (!this.reapRef) this.reapTimer.unref();
  }

  private receive(chunk: string): void {
    const { lines, rest } = splitLines(this.inbox + chunk);
    this.inbox = rest;
    for (const line of lines) this.dispatch(line);
  }

  private dispatch(line: string): void {
    debug('anchor %d: %s', this.child.pid, line.length > 200 ? line.slice(0, 200) + '...' : line);
    const event = parseLine(line);
    switch (event.type) {
      case 'ready':
        if (event.cgroup !== undefined) this.cgroup = event.cgroup;
        this.launchSettled();
        return this.on.ready(event.pid, event.tier, event.pidfd);
      case 'noContain':
        this.launchSettled();
        return this.on.noContain(event.errno, event.what);
      case 'execFail':
        this.launchSettled();
        return this.on.execFail(event.errno);
      case 'noCwd':
        this.launchSettled();
        return this.on.noCwd(event.errno);
      case 'exit':
        return this.on.rootExit(event.code, event.signal);
      case 'left':
        return this.on.left(event.pid, event.heldOutput, event.command);
      case 'group':
        return this.on.group(event.pgid);
      case 'leftGroup':
        return this.on.leftGroup(event.pid, event.command);
      case 'leftEnd':
        return this.on.leftEnd();
      case 'released':
        return this.on.released();
      case 'stuck':
        return this.on.stuck(event.pids);
      case 'quiet':
        this.quietSeen = true;
        return this.on.quiet();
      case 'unknown':
        return debug('unknown anchor line: %s', line);
      case 'malformed':
        return debug('malformed anchor line: %s', event.reason);
    }
  }

  /**
   * The cgroup tier, the anchor gone before its tree was quiescent: SIGKILL
   * to everything in the tree's cgroup (a directory that exists until it is
   * removed, so no recycled identity), then, once the kernel says it is
   * empty (bounded), the cgroup goes too.
   */
  private async killCgroup(dir: string): Promise<void> {
    const populated = () => {
      try {
        return /^populated 1$/m.test(readFileSync(`${dir}/cgroup.events`, 'utf8'));
      } catch {
        return false; // gone
      }
    };
    try {
      if (existsSync(`${dir}/cgroup.kill`)) writeFileSync(`${dir}/cgroup.kill`, '1');
      debug('anchor gone with members left: cgroup.kill of %s', dir);
    } catch (err) {
      debug('cgroup.kill of %s failed: %s', dir, (err as Error).message);
    }
    for (const deadline = Date.now() + 2000; populated() && Date.now() < deadline; ) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    removeCgroupDir(dir, 0);
  }

  /** Polite signal to every member now, the forced kill after `graceMs`. */
  terminate(graceMs: number): void {
    this.send(encodeCommand(graceMs <= 0 ? { type: 'kill' } : { type: 'term', graceMs }));
    this.keepRunning(graceMs);
  }

  /**
   * POSIX: the host has asked the anchor to act, so it keeps it running until
   * it exits (a member may have stopped it with SIGSTOP, and may do so again):
   * SIGCONT now and every CONTINUE_EVERY_MS. And the wait is bounded: past
   * `graceMs + ANCHOR_WAIT_SLACK_MS` the host acts without it.
   */
  private keepRunning(graceMs: number): void {
    if (this.writer || this.helperGone || this.child.pid === undefined) return;
    const pid = this.child.pid;
    signalHelper(pid, 'SIGCONT');
    this.continueEvery(pid);
    if (this.waitDeadline === Infinity) this.waitStartedAt = Date.now();
    const deadline = Date.now() + Math.max(0, graceMs) + ANCHOR_WAIT_SLACK_MS;
    if (deadline >= this.waitDeadline) return;
    this.waitDeadline = deadline;
    this.armWaitTimer(pid);
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
    if (this.helperGone) return;
    const waited = Date.now() - this.waitStartedAt;
    const dir = this.cgroup;
    if (dir !== undefined && !this.quietSeen) {
      // The cgroup tier: every member ends now, whoever stopped the anchor
      // included; resumed, the anchor then reaps them and reports QUIET. If
      // it does not within CGROUP_KILL_WAIT_MS, it is killed (and reaped
      // here); the exit path empties and removes the cgroup.
      debug('anchor %d did not finish within %d ms: cgroup.kill of %s', pid, waited, dir);
      try {
        writeFileSync(`${dir}/cgroup.kill`, '1');
      } catch (err) {
        debug('cgroup.kill of %s failed: %s', dir, (err as Error).message);
      }
      signalHelper(pid, 'SIGCONT');
      this.waitTimer = setTimeout(() => {
        if (this.helperGone) return;
        debug('anchor %d still running %d ms after cgroup.kill: SIGKILL', pid, CGROUP_KILL_WAIT_MS);
        this.on.unresponsive(Date.now() - this.waitStartedAt);
        signalHelper(pid, 'SIGKILL');
      }, CGROUP_KILL_WAIT_MS);
      this.waitTimer.unref();
      return;
    }
    // No other means here: the anchor keeps being resumed (it may still finish)
    // but the host cannot prove quiescence.
    debug('anchor %d did not finish within %d ms', pid, waited);
    this.on.unresponsive(waited);
  }

  private continueEvery(pid: number): void {
    if (this.continueTimer) return;
    this.continueTimer = setInterval(() => signalHelper(pid, 'SIGCONT'), CONTINUE_EVERY_MS);
    this.continueTimer.unref();
  }

  /** The anchor reported how the launch went: the host waits on it no more, unless it asked it to act. */
  private launchSettled(): void {
    if (this.waitDeadline !== Infinity) return;
    clearInterval(this.continueTimer);
    this.continueTimer = undefined;
  }

  private stopWaiting(): void {
    clearInterval(this.continueTimer);
    clearTimeout(this.waitTimer);
    this.continueTimer = this.waitTimer = undefined;
  }

  private send(line: string): void {
    if (this.writer) {
      // Windows: the host -> anchor pipe.
      if (this.open && !this.writer.destroyed) this.writer.write(line);
      return;
    }
    if (!this.open || this.socket.destroyed) return;
    // POSIX: written directly, so a write that fails because the anchor has
    // just exited (EPIPE) cannot make the socket destroy itself before the
    // lines the anchor sent last (QUIET) are read.
    try {
      writeSync(this.hostFd, line);
    } catch (err) {
      debug('control write failed (the anchor is exiting): %s', (err as Error).message);
    }
  }

  /** For the host's 'exit' listener: no event loop left, so write directly. */
  terminateSync(): void {
    if (this.job !== undefined) {
      // Windows: a pipe cannot be written synchronously here, and Node's own
      // kill-on-close job ends the helper with the host anyway (so no grace
      // is possible): end the tree now through the host's job handle.
      try {
        binding().jobTerminate!(this.job);
      } catch (err) {
        debug('exit-time TerminateJobObject failed: %s', (err as Error).message);
      }
      return;
    }
    if (!this.open || this.socket.destroyed) return;
    try {
      writeSync(this.hostFd, encodeCommand({ type: 'term', graceMs: this.exitGrace }));
    } catch (err) {
      debug('exit-time TERM failed: %s', (err as Error).message);
    }
    // A stopped anchor could not act on it: the last time the host can resume it.
    if (this.child.pid !== undefined && !this.helperGone) signalHelper(this.child.pid, 'SIGCONT');
  }

  ref(): void {
    this.child.ref();
    this.socket.ref();
    this.writer?.ref();
  }

  unref(): void {
    this.child.unref();
    this.socket.unref();
    this.writer?.unref();
  }

  private close(): void {
    live.delete(this);
    this.stopWaiting();
    this.open = false;
    if (!this.socket.destroyed) this.socket.destroy();
    if (this.writer && !this.writer.destroyed) this.writer.destroy();
    this.closeJob();
  }

  /**
   * Windows: the anchor is gone. If it left members behind (it died before
   * quiescence), the host's handle decides: terminate the job, then close it.
   */
  private closeJob(): void {
    if (this.job === undefined) return;
    const job = this.job;
    this.job = undefined;
    const b = binding();
    try {
      if (b.jobActive!(job) > 0) {
        debug('anchor gone with members left: TerminateJobObject through the host handle');
        b.jobTerminate!(job);
      }
    } catch (err) {
      debug('job cleanup failed: %s', (err as Error).message);
    }
    try {
      b.jobClose!(job);
    } catch (err) {
      debug('job close failed: %s', (err as Error).message);
    }
  }
}
