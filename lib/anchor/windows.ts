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
// Leases (issue #17; the wire: native/protocol.h, its header and "Leases:
// Windows"): a leased anchor is spawned detached (Node puts every other
// child in its own kill-on-close job, which would end the anchor with the
// host) with `--lease MS --lease-id ID [--log PATH]`, and the second control
// line is `LEASE <ms> <token>`. Its endpoint is
// the named pipe leaseEndpoint(anchor pid, id). An adopting host connects
// with connectAdoptionEndpoint() and drives the tree through a
// WindowsAdoptedChannel; leaseInfo() asks an endpoint INFO.
import { spawn as spawnChild, type ChildProcess } from 'node:child_process';
import { connect, Socket } from 'node:net';
import { dirname } from 'node:path';
import type { Readable } from 'node:stream';
import { debug } from '../debug.js';
import { CordonError } from '../errors.js';
import { windowsBinding } from '../native.js';
import { AnchorChannel, spawnFailure, type AnchorHandlers, type AnchorProcess, type AnchorSpawn } from './channel.js';
import { type AnchorEvent, encodeCommand } from './protocol.js';

/** A tree's lease, as the host that creates it passes it to the anchor. */
export interface WindowsLease {
  /** How long the tree outlives its host when nobody adopts it (ms, 1 .. 2^31-1). */
  ms: number;
  /** The adoption token: 32 lowercase hex digits (128 bits). Sent on the control channel only. */
  token: string;
  /** 16 lowercase hex digits: with the anchor's pid, the tree's id and its endpoint's name. */
  id: string;
  /** The tree's log file: the anchor appends the captured output to it while no host is attached. */
  logPath?: string | undefined;
}

/** The named pipe a leased anchor listens on. */
export function leaseEndpoint(anchorPid: number, id: string): string {
  return `\\\\.\\pipe\\cordon-lease-${anchorPid}-${id}`;
}

function checkLease(lease: WindowsLease): void {
  if (!Number.isInteger(lease.ms) || lease.ms < 1 || lease.ms > 2 ** 31 - 1) {
    throw new CordonError(`The lease must be whole milliseconds from 1 to ${2 ** 31 - 1}; got ${lease.ms}.`, {
      code: 'ERR_INVALID_ARG_VALUE',
      stage: 'input',
    });
  }
  if (!/^[0-9a-f]{32}$/.test(lease.token) || !/^[0-9a-f]{16}$/.test(lease.id)) {
    throw new CordonError('A lease token is 32 and a lease id 16 lowercase hex digits.', {
      code: 'ERR_INVALID_ARG_VALUE',
      stage: 'input',
    });
  }
}

export class WindowsAnchorChannel extends AnchorChannel {
  readonly child: ChildProcess;
  /** The host's handle on the tree's Job Object (closed when the anchor is gone). */
  private job: number | undefined;
  /** The host -> anchor pipe. */
  private readonly writer: Socket | undefined;

  /** The tree's lease, if any. */
  readonly lease: WindowsLease | undefined;

  constructor(spec: AnchorSpawn & { lease?: WindowsLease | undefined }, on: AnchorHandlers) {
    super(on, spec.exitGrace);
    if (spec.lease) checkLease(spec.lease);
    this.lease = spec.lease;
    this.leased = spec.lease !== undefined;
    const leaseArgs = spec.lease ? ['--lease', String(spec.lease.ms), '--lease-id', spec.lease.id] : [];
    if (spec.lease?.logPath !== undefined) leaseArgs.push('--log', spec.lease.logPath);
    const b = windowsBinding();
    this.job = b.jobCreate().handle;
    try {
      // The anchor runs in its own directory and gives the command its
      // working directory itself (--cwd): a process's working directory
      // cannot be removed on Windows, and the anchor must not hold the
      // command's (a caller removing it right after the result, or while a
      // command that changed directory runs).
      this.child = spawnChild(spec.path, ['--job-from-host', ...leaseArgs, '--cwd', spec.cwd, ...spec.args], {
        cwd: dirname(spec.path),
        env: spec.env,
        stdio: [...spec.stdio, 'overlapped', 'overlapped'],
        windowsHide: true,
        // Leased: out of Node's kill-on-close job, so the anchor outlives the host.
        detached: spec.lease !== undefined,
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
      if (spec.lease) this.writer?.write(`LEASE ${spec.lease.ms} ${spec.lease.token}\n`);
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
    // A leased tree outlives its host on purpose: its anchor holds the job.
    if (this.job === undefined || this.lease) return;
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

/** What an endpoint answers to INFO. */
export interface LeaseInfo {
  /** How long the lease has left (ms), or null while a host is attached. */
  leaseLeftMs: number | null;
  /** Whether the tree's root still runs. */
  rootRunning: boolean;
}

/** Connects to a leased anchor's endpoint (bounded): the socket once connected. */
function connectEndpoint(endpoint: string, timeoutMs: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(endpoint);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new CordonError(`No answer from the lease endpoint ${endpoint} within ${timeoutMs} ms; try again.`, { code: 'ERR_CORDON_TIMEOUT' }));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.removeAllListeners('error');
      resolve(socket);
    });
    socket.once('error', (cause: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      const gone = cause.code === 'ENOENT';
      reject(
        new CordonError(
          gone
            ? `No leased tree listens on ${endpoint} (its anchor is gone): list the adoptable trees again.`
            : `The lease endpoint ${endpoint} could not be reached (${cause.code ?? cause.message}).`,
          { code: gone ? 'ERR_CORDON_UNKNOWN_TREE' : (cause.code ?? 'ERR_CORDON_UNKNOWN_TREE'), cause, path: endpoint },
        ),
      );
    });
  });
}

/** Reads the first line off `socket` (bounded); what came after it is put back. */
function firstLine(socket: Socket, timeoutMs: number, endpoint: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let inbox = Buffer.alloc(0);
    const done = (err: Error | null, line?: string) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('error', onEnd);
      if (err) {
        socket.destroy();
        reject(err);
      } else resolve(line!);
    };
    const onData = (chunk: Buffer) => {
      inbox = Buffer.concat([inbox, chunk]);
      const nl = inbox.indexOf(10);
      if (nl < 0) {
        if (inbox.length > 8192) done(new CordonError(`The lease endpoint ${endpoint} sent no line.`, { code: 'ERR_CORDON_ANCHOR_LOST' }));
        return;
      }
      socket.pause();
      const rest = inbox.subarray(nl + 1);
      if (rest.length > 0) socket.unshift(rest);
      done(null, inbox.subarray(0, nl).toString('utf8').replace(/\r$/, ''));
    };
    const onEnd = () =>
      done(new CordonError(`The lease endpoint ${endpoint} closed without an answer.`, { code: 'ERR_CORDON_ANCHOR_LOST', path: endpoint }));
    const timer = setTimeout(
      () => done(new CordonError(`No answer from the lease endpoint ${endpoint} within ${timeoutMs} ms; try again.`, { code: 'ERR_CORDON_TIMEOUT' })),
      timeoutMs,
    );
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.once('error', onEnd);
  });
}

/** INFO: how long a leased tree's lease has left and whether its root runs (no token needed). */
export async function leaseInfo(endpoint: string, timeoutMs = 10000): Promise<LeaseInfo> {
  const socket = await connectEndpoint(endpoint, timeoutMs);
  socket.write('INFO\n');
  const line = await firstLine(socket, timeoutMs, endpoint);
  socket.destroy();
  const m = /^LEASE (-1|\d+) ([01])$/.exec(line);
  if (!m) throw new CordonError(`The lease endpoint ${endpoint} answered INFO with ${JSON.stringify(line)}.`, { code: 'ERR_CORDON_ANCHOR_LOST' });
  const left = Number(m[1]);
  return { leaseLeftMs: left < 0 ? null : left, rootRunning: m[2] === '1' };
}

/** ERR_CORDON_ADOPT_DENIED, with the anchor's word for why (`why`: token, attached, hello, stream, busy, ...). */
function refused(message: string, endpoint: string, why: string): CordonError & { why: string } {
  const err = new CordonError(message, { code: 'ERR_CORDON_ADOPT_DENIED', path: endpoint });
  return Object.assign(err, { why });
}

/** A granted adoption: the connection (now the tree's control channel) and the tree's log. */
export interface Adoption {
  socket: Socket;
  /** The log file the anchor names (null: none). */
  logPath: string | null;
  /** Which captured streams the anchor relays (connectAdoptionOutput() gets them). */
  relayed: { stdout: boolean; stderr: boolean };
}

/**
 * ADOPT <token> on a leased anchor's endpoint. Resolves once the anchor said
 * ADOPTED: the socket then carries the replay of the tree's life so far and,
 * after it, the tree's events; wrap it in a WindowsAdoptedChannel. Rejects
 * with ERR_CORDON_ADOPT_DENIED (wrong token, or another host is attached:
 * of two racing adopters exactly one gets ADOPTED) or
 * ERR_CORDON_UNKNOWN_TREE (no such endpoint: the anchor is gone).
 */
export async function connectAdoptionEndpoint(endpoint: string, token: string, timeoutMs = 10000): Promise<Adoption> {
  if (!/^[0-9a-f]{32}$/.test(token)) {
    throw new CordonError('An adoption token is 32 lowercase hex digits.', { code: 'ERR_INVALID_ARG_VALUE', stage: 'input' });
  }
  const socket = await connectEndpoint(endpoint, timeoutMs);
  socket.write(`ADOPT ${token}\n`);
  const line = await firstLine(socket, timeoutMs, endpoint);
  const denied = /^DENIED (\S+)$/.exec(line);
  if (denied) {
    socket.destroy();
    const why = denied[1] === 'attached' ? 'another host has adopted it' : denied[1] === 'token' ? 'the token is not this tree\'s' : denied[1]!;
    throw refused(`Adoption refused by the tree's anchor: ${why}.`, endpoint, denied[1]!);
  }
  const adopted = /^ADOPTED (.+) ([01]) ([01])$/.exec(line);
  if (!adopted) {
    socket.destroy();
    throw new CordonError(`The lease endpoint ${endpoint} answered ADOPT with ${JSON.stringify(line)}.`, { code: 'ERR_CORDON_ANCHOR_LOST' });
  }
  const path = adopted[1]!;
  return {
    socket,
    logPath: path === '-' ? null : path.replace(/\\(\\|n|r)/g, (_, c: string) => (c === 'n' ? '\n' : c === 'r' ? '\r' : '\\')),
    relayed: { stdout: adopted[2] === '1', stderr: adopted[3] === '1' },
  };
}

/**
 * An adopter's copy of one captured stream (1: stdout, 2: stderr) of the tree
 * it adopted: the tree's output from now on, raw, until the tree's writers
 * are gone (EOF). The anchor relays it (a leased tree's output always goes
 * through its anchor); only the host that adopted the tree, while attached,
 * gets it (else ERR_CORDON_ADOPT_DENIED). Returned paused: pipe it, or
 * listen and resume().
 */
export async function connectAdoptionOutput(endpoint: string, token: string, fd: 1 | 2, timeoutMs = 10000): Promise<Socket> {
  const socket = await connectEndpoint(endpoint, timeoutMs);
  socket.write(`OUTPUT ${token} ${fd}\n`);
  const line = await firstLine(socket, timeoutMs, endpoint);
  if (line !== `OUTPUT ${fd}`) {
    socket.destroy();
    throw refused(`The tree's anchor refused its output stream ${fd} (${line}): adopt the tree first.`, endpoint, /^DENIED (\S+)$/.exec(line)?.[1] ?? line);
  }
  return socket;
}

/** An adoption with the tree's relayed output streams (null: not relayed). */
export interface WindowsAdoption extends Adoption {
  stdout: Socket | null;
  stderr: Socket | null;
}

/**
 * ADOPT, then OUTPUT for each stream the anchor relays: what
 * WindowsAdoptedChannel takes. (Output written between the ADOPTED line and
 * the OUTPUT connection goes to the log only.) The output sockets are paused
 * until read.
 */
export async function adoptWindowsTree(endpoint: string, token: string, timeoutMs = 10000): Promise<WindowsAdoption> {
  const adoption = await connectAdoptionEndpoint(endpoint, token, timeoutMs);
  try {
    const stdout = adoption.relayed.stdout ? await connectAdoptionOutput(endpoint, token, 1, timeoutMs) : null;
    const stderr = adoption.relayed.stderr ? await connectAdoptionOutput(endpoint, token, 2, timeoutMs) : null;
    return { ...adoption, stdout, stderr };
  } catch (err) {
    adoption.socket.destroy(); // (the tree goes back to its lease)
    throw err;
  }
}

/**
 * The host side of an adopted leased anchor: the endpoint connection is the
 * control channel (both ways). The anchor is not this host's child: its exit
 * is known by the connection's close (it closes as the anchor exits, after
 * QUIET, or at lease end). The host's exit leaves the tree to its lease again.
 */
export class WindowsAdoptedChannel extends AnchorChannel {
  readonly child: AnchorProcess;
  private quiescentSeen = false;

  /** `adoption`: connectAdoptionEndpoint()'s, or adoptWindowsTree()'s with the output streams. */
  constructor(
    adoption: Adoption & { stdout?: Readable | null; stderr?: Readable | null },
    anchorPid: number,
    on: AnchorHandlers,
    exitGrace: number,
  ) {
    super(on, exitGrace);
    this.leased = true;
    const socket = adoption.socket;
    this.child = {
      pid: anchorPid,
      stdin: null,
      stdout: adoption.stdout ?? null,
      stderr: adoption.stderr ?? null,
      ref: () => socket.ref(),
      unref: () => socket.unref(),
    };
    this.listen(socket);
    socket.resume(); // (paused by connectAdoptionEndpoint after the ADOPTED line)
    this.register();
  }

  /** The host's exit: the connection closes with it and the anchor's lease clock starts again. */
  terminateSync(): void {}

  protected override send(line: string): void {
    if (this.open && !this.socket.destroyed) this.socket.write(line);
  }

  protected override observe(event: AnchorEvent): void {
    if (event.type === 'quiescent') this.quiescentSeen = true;
  }

  protected override closedBeforeExit(): void {
    // The anchor's only channel to us closed: it exited (after QUIET: cleanly), or died.
    this.anchorExited(this.quiescentSeen ? 0 : null, null);
  }
}
