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
import { spawn as spawnChild, type ChildProcess } from 'node:child_process';
import { Socket } from 'node:net';
import { dirname } from 'node:path';
import { debug } from '../debug.js';
import { windowsBinding } from '../native.js';
import { AnchorChannel, spawnFailure, type AnchorHandlers, type AnchorSpawn } from './channel.js';
import { encodeCommand } from './protocol.js';

export class WindowsAnchorChannel extends AnchorChannel {
  readonly child: ChildProcess;
  /** The host's handle on the tree's Job Object (closed when the anchor is gone). */
  private job: number | undefined;
  /** The host -> anchor pipe. */
  private readonly writer: Socket | undefined;

  constructor(spec: AnchorSpawn, on: AnchorHandlers) {
    super(on, spec.exitGrace);
    const b = windowsBinding();
    this.job = b.jobCreate().handle;
    try {
      // The anchor runs in its own directory and gives the command its
      // working directory itself (--cwd): a process's working directory
      // cannot be removed on Windows, and the anchor must not hold the
      // command's (a caller removing it right after the result, or while a
      // command that changed directory runs).
      this.child = spawnChild(spec.path, ['--job-from-host', '--cwd', spec.cwd, ...spec.args], {
        cwd: dirname(spec.path),
        env: spec.env,
        stdio: [...spec.stdio, 'overlapped', 'overlapped'],
        windowsHide: true,
      });
    } catch (cause) {
      this.closeJob();
      throw spawnFailure(cause, spec.path);
    }
    // (Node sets up the pipe's socket even when the spawn fails; 'error' follows.)
    const socket = (this.child.stdio[3] as Socket | null) ?? new Socket();
    this.writer = (this.child.stdio[4] as Socket | null) ?? undefined;
    this.writer?.on('error', (err) => debug('control channel write error: %s', err.message));
    if (this.child.pid !== undefined) {
      let remote = 0;
      try {
        // The anchor is the host's unreaped child: its pid is pinned.
        remote = b.jobAttach(this.job, this.child.pid);
      } catch (err) {
        debug('job handle not duplicated into the anchor: %s', (err as Error).message);
      }
      this.writer?.write(encodeCommand({ type: 'job', handle: remote }));
    }
    this.listen(socket);
    this.child.on('error', (err) => this.startFailed(err));
    this.child.on('exit', (code, signal) => this.anchorExited(code, signal));
    this.register();
  }

  /**
   * A pipe cannot be written synchronously here, and Node's own kill-on-close
   * job ends the anchor with the host anyway (so no grace is possible): end
   * the tree now through the host's job handle.
   */
  terminateSync(): void {
    if (this.job === undefined) return;
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
