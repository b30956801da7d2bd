// The host side of an anchor on Windows. No socketpair to hand down: the
// control channel is two overlapped pipes Node creates at stdio indexes 3
// (anchor -> host) and 4 (host -> anchor); libuv passes them in the CRT's
// lpReserved2 block. Two pipes, so that a write failing as the anchor exits
// (Node then destroys that socket) cannot discard lines not yet read. The
// tree's Job Object is created here first, unnamed, so the host holds a
// handle on it before anything runs and nothing can open it by name; the host
// duplicates it into the anchor and sends the value as the first control
// line (`JOB <value>`; 0 if that failed: the anchor then reports NOCONTAIN,
// or runs with the weaker tier under best-effort).
//
// A leased anchor (spec.lease; the wire: native/protocol.h, "Leases:
// Windows") is spawned detached (Node puts every other child in its own
// kill-on-close job, which would end the anchor with the host), is told the
// log it appends to while no host is attached (--log), and gets
// `LEASE <ms> <token>` as the second control line. Whether the lease can
// outlive this process is the anchor's to say, once started: the job it
// landed in (NOCONTAIN lease-job; native/win/lease.h), never this process's
// own job (Node's first non-detached spawn puts Node into a job of libuv's,
// which the anchor leaves). Its endpoint is a named pipe (./windows-endpoint.ts).
//
// A warm anchor (./windows-warm.ts), started ahead of need with its job and
// JOB line, takes the command if one is ready for this shape: then the
// channel is that anchor's, and the command's pipes are the ones the addon
// made for it (net.Socket over the host's ends); the next one is started
// once this one has launched the command (READY).
import { spawn as spawnChild, type ChildProcess } from 'node:child_process';
import { Socket } from 'node:net';
import { dirname } from 'node:path';
import { debug } from '../debug.js';
import { windowsBinding } from '../native.js';
import { AnchorChannel, spawnFailure, type AnchorHandlers, type AnchorProcess, type AnchorSpawn } from './channel.js';
import { encodeCommand, type AnchorEvent } from './protocol.js';
import { leasedAnchorImage } from './windows-image.js';
import { takeWindowsWarm } from './windows-warm.js';

/**
 * How many times a start that failed with UNKNOWN is made. CreateProcess
 * failing with an error libuv does not map (thrown at once: no process was
 * made, nothing ran) has been seen about once per long run under a loaded
 * Wine, and the next try succeeded; a start that ran nothing can be made
 * again. Every mapped error (ENOENT, EACCES, ...) is reported at once.
 */
const ANCHOR_START_TRIES = 3;

function startAnchor(spawn: () => ChildProcess): ChildProcess {
  for (let attempt = 1; ; attempt++) {
    try {
      return spawn();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'UNKNOWN' || attempt >= ANCHOR_START_TRIES) throw err;
      debug('the anchor could not be started (UNKNOWN, attempt %d): trying again', attempt);
    }
  }
}

export class WindowsAnchorChannel extends AnchorChannel {
  /** The anchor process (a cold one's ChildProcess; a warm one's, with the command's pipes the addon made). */
  readonly child: AnchorProcess;
  /** The host's handle on the tree's Job Object (closed when the anchor is gone). */
  private job: number | undefined;
  /** The host -> anchor pipe. */
  private readonly writer: Socket | undefined;
  /** Starts the next warm anchor (./windows-warm.ts), once this one has launched the command. */
  private warmNext: (() => void) | undefined;

  constructor(spec: AnchorSpawn, on: AnchorHandlers) {
    super(on, spec.exitGrace);
    this.leased = spec.lease !== undefined;
    // What only this platform's anchor takes: the job comes from the host; a
    // leased one appends the output to the log itself while no host is attached.
    const own = ['--job-from-host', ...(spec.lease?.logPath !== undefined ? ['--log', spec.lease.logPath] : [])];
    const b = windowsBinding();
    // A warm anchor, started ahead of need, takes the command if one is
    // ready (./windows-warm.ts); else one is started now.
    const warm = spec.lease ? undefined : takeWindowsWarm(spec.path, spec.warm, [...own, ...spec.args], spec.env, spec.stdio);
    this.warmNext = warm?.next;
    const started = warm?.started;
    if (started) {
      const proc = started.child;
      this.job = started.job;
      this.writer = started.writer;
      this.child = {
        pid: started.pid,
        stdin: started.stdin,
        stdout: started.stdout,
        stderr: started.stderr,
        ref: () => proc.ref(),
        unref: () => proc.unref(),
      };
      // (It waited unreferenced: from here on it is the tree's, as a cold one.)
      proc.ref();
      started.reader.ref();
      started.writer.ref();
      this.listen(started.reader);
      proc.on('error', (err) => this.startFailed(err));
      proc.on('exit', (code, signal) => this.anchorExited(code, signal));
      this.register();
      return;
    }
    this.job = b.jobCreate().handle;
    let child: ChildProcess;
    try {
      // The anchor runs in its own directory and gives the command its
      // working directory itself (--cwd): a process's working directory
      // cannot be removed on Windows, and the anchor must not hold the
      // command's (a caller removing it right after the result, or while a
      // command that changed directory runs).
      // A leased one outlives the host: it runs from a copy of its own
      // (./windows-image.ts), so the package can be replaced meanwhile.
      const start = (image: string) =>
        startAnchor(() =>
          spawnChild(image, [...own, ...spec.args], {
            cwd: dirname(image),
            env: spec.env,
            stdio: [...spec.stdio, 'overlapped', 'overlapped'],
            windowsHide: true,
            // Leased: out of Node's kill-on-close job, so the anchor outlives the host.
            detached: spec.lease !== undefined,
          }),
        );
      const image = spec.lease === undefined ? spec.path : leasedAnchorImage(spec.path);
      child = start(image);
    } catch (cause) {
      this.closeJob();
      throw spawnFailure(cause, spec.path);
    }
    this.child = child;
    // (Node sets up the pipe's socket even when the spawn fails; 'error' follows.)
    const socket = (child.stdio[3] as Socket | null) ?? new Socket();
    this.writer = (child.stdio[4] as Socket | null) ?? undefined;
    this.writer?.on('error', (err) => debug('control channel write error: %s', err.message));
    if (child.pid !== undefined) {
      let remote = 0;
      try {
        // The anchor is the host's unreaped child: its pid is pinned.
        remote = b.jobAttach(this.job, child.pid);
      } catch (err) {
        debug('job handle not duplicated into the anchor: %s', (err as Error).message);
      }
      this.writer?.write(encodeCommand({ type: 'job', handle: remote }));
      if (spec.lease) this.writer?.write(encodeCommand({ type: 'lease', ms: spec.lease.ms, token: spec.lease.token }));
    }
    this.listen(socket);
    child.on('error', (err) => this.startFailed(err));
    child.on('exit', (code, signal) => this.anchorExited(code, signal));
    this.register();
  }

  protected override observe(event: AnchorEvent): void {
    // The anchor reported how the launch went: the next warm anchor may start.
    if (event.type === 'ready' || event.type === 'noContain' || event.type === 'execFail' || event.type === 'noCwd') {
      this.warmNext?.();
      this.warmNext = undefined;
    }
  }

  /**
   * A pipe cannot be written synchronously here, and Node's own kill-on-close
   * job ends the anchor with the host anyway (so no grace is possible): end
   * the tree now through the host's job handle.
   */
  terminateSync(): void {
    // A leased tree outlives its host on purpose: its anchor holds the job.
    if (this.job === undefined || this.leased) return;
    try {
      windowsBinding().jobTerminate(this.job);
    } catch (err) {
      debug('exit-time TerminateJobObject failed: %s', (err as Error).message);
    }
  }

  override ref(): void {
    super.ref();
    this.writer?.ref();
  }

  override unref(): void {
    super.unref();
    this.writer?.unref();
  }

  protected override send(line: string): void {
    if (this.writer && this.open && !this.writer.destroyed) this.writer.write(line);
  }

  protected override close(): void {
    super.close();
    if (this.writer && !this.writer.destroyed) this.writer.destroy();
    this.closeJob();
  }

  /**
   * The anchor is gone. If it left members behind (it died before
   * quiescence), the host's handle decides: terminate the job, then close it.
   */
  private closeJob(): void {
    if (this.job === undefined) return;
    const job = this.job;
    this.job = undefined;
    const b = windowsBinding();
    try {
      if (b.jobActive(job) > 0) {
        debug('anchor gone with members left: TerminateJobObject through the host handle');
        b.jobTerminate(job);
      }
    } catch (err) {
      debug('job cleanup failed: %s', (err as Error).message);
    }
    try {
      b.jobClose(job);
    } catch (err) {
      debug('job close failed: %s', (err as Error).message);
    }
  }
}
