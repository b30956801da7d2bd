// A leased anchor's adoption endpoint on Windows: a named pipe whose DACL
// admits this user alone, \\.\pipe\cordon-lease-<tree id>. The addon opens
// it (retried while busy, bounded by `timeoutMs`) and reads who serves it:
// a server that is not the tree's anchor (its pid from the lease record) is
// refused before anything is written, the token included, and the
// connection is at identification level, so no server can impersonate the
// host. Then the request line is written and the first answer line read;
// what came after it stays in the socket. The
// tree's output does not come with ADOPTED (no descriptors travel over a
// pipe): the anchor relays each captured stream on an OUTPUT connection of
// its own, and appends it to the tree's log itself. The lines are
// anchor/protocol.ts's.
import { closeSync } from 'node:fs';
import { Socket } from 'node:net';
import { PassThrough, type Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { debug } from '../debug.js';
import { adoptRefused, endpointAnswer, endpointGone, endpointImpostor, endpointTimeout, endpointUnreachable } from '../errors.js';
import { windowsBinding } from '../native.js';
import type { AdoptedAnchor } from './adopted.js';
import { encodeRequest, parseAnswer, type EndpointAnswer, type EndpointRequest } from './protocol.js';

/** The named pipe a leased anchor listens on, from the tree's id (`<anchor pid>-<16 hex>`). */
export function leaseEndpoint(treeId: string): string {
  return `\\\\.\\pipe\\cordon-lease-${treeId}`;
}

/**
 * Connects to a leased anchor's endpoint (bounded: an endpoint whose every
 * instance is busy is retried until `timeoutMs`): the socket, nothing written
 * yet. ERR_CORDON_ADOPT_DENIED (endpointImpostor) when the pipe's server is
 * not the process `anchorPid`: someone took the name, and is told nothing.
 */
async function connectEndpoint(endpoint: string, anchorPid: number, timeoutMs: number): Promise<Socket> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let client: { fd: number; serverPid: number };
    try {
      client = windowsBinding().openPipeClient(endpoint);
    } catch (cause) {
      const code = (cause as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') throw endpointGone(endpoint, cause);
      if (code !== 'EBUSY') throw endpointUnreachable(endpoint, cause as NodeJS.ErrnoException);
      if (Date.now() >= deadline) throw endpointTimeout(endpoint, timeoutMs);
      await sleep(BUSY_RETRY_MS);
      continue;
    }
    if (client.serverPid !== anchorPid) {
      closeSync(client.fd);
      debug('lease endpoint %s: served by pid %d, not the anchor %d: refused', endpoint, client.serverPid, anchorPid);
      throw endpointImpostor(endpoint, anchorPid, client.serverPid);
    }
    return new Socket({ fd: client.fd, readable: true, writable: true });
  }
}

/** How long a busy endpoint (every instance taken: one client's line is read at a time) is left before the next try. */
const BUSY_RETRY_MS = 25;

/** Reads the first line off `socket` (bounded); what came after it is put back, and the socket is left paused. */
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
        if (inbox.length > 8192) done(endpointAnswer(endpoint, 'a request', '(no line)'));
        return;
      }
      socket.pause();
      const rest = inbox.subarray(nl + 1);
      if (rest.length > 0) socket.unshift(rest);
      done(null, inbox.subarray(0, nl).toString('utf8'));
    };
    const onEnd = () => done(endpointAnswer(endpoint, 'a request', '(closed without an answer)'));
    const timer = setTimeout(() => done(endpointTimeout(endpoint, timeoutMs)), timeoutMs);
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.once('error', onEnd);
  });
}

/** Sends one request; the connection and the parsed answer (anything else is ERR_CORDON_ANCHOR_LOST). */
async function ask(endpoint: string, anchorPid: number, request: EndpointRequest, timeoutMs: number): Promise<{ socket: Socket; answer: EndpointAnswer }> {
  const socket = await connectEndpoint(endpoint, anchorPid, timeoutMs);
  socket.write(encodeRequest(request));
  const line = await firstLine(socket, timeoutMs, endpoint);
  const answer = parseAnswer(line);
  if (answer.type === 'unknown' || answer.type === 'malformed') {
    socket.destroy();
    throw endpointAnswer(endpoint, request.type, line);
  }
  return { socket, answer };
}

/**
 * INFO: how long a leased tree's lease has left (null while a host is
 * attached) and whether its root runs. `anchorPid`: the anchor's, from the
 * lease record (here and below: the endpoint must be served by it).
 */
export async function leaseInfo(endpoint: string, anchorPid: number, timeoutMs = 10000): Promise<{ leftMs: number | null; rootRunning: boolean }> {
  const { socket, answer } = await ask(endpoint, anchorPid, { type: 'info' }, timeoutMs);
  socket.destroy();
  if (answer.type !== 'lease') throw endpointAnswer(endpoint, 'info', answer.type);
  return { leftMs: answer.leftMs, rootRunning: answer.rootRunning };
}

/** The control connection of a granted ADOPT, and which streams the anchor relays (connectAdoptionOutput() gets them). */
export interface WindowsAdoption extends AdoptedAnchor {
  relayed: { stdout: boolean; stderr: boolean };
}

/**
 * ADOPT <token>. Resolves once the anchor said ADOPTED: the socket then
 * carries the replay of the tree's life so far and, after it, the tree's
 * events (an AdoptedAnchorChannel reads them). Rejects with
 * ERR_CORDON_ADOPT_DENIED (a wrong token, or another host is attached: of
 * two racing adopters exactly one gets ADOPTED) or ERR_CORDON_UNKNOWN_TREE
 * (no such endpoint: the anchor is gone); ERR_CORDON_ADOPT_DENIED with `why`
 * 'impostor' and nothing sent when another process than `anchorPid` serves
 * the pipe. The output streams are not connected (stdout and stderr null):
 * adoptWindowsTree() connects them.
 */
export async function connectAdoptionEndpoint(endpoint: string, anchorPid: number, token: string, timeoutMs = 10000): Promise<WindowsAdoption> {
  const { socket, answer } = await ask(endpoint, anchorPid, { type: 'adopt', token }, timeoutMs);
  if (answer.type === 'denied') {
    socket.destroy();
    throw adoptRefused(endpoint, answer.why);
  }
  if (answer.type !== 'adopted') {
    socket.destroy();
    throw endpointAnswer(endpoint, 'adopt', answer.type);
  }
  return {
    socket,
    pending: '',
    write: (line) => {
      if (!socket.destroyed) socket.write(line);
    },
    logPath: answer.logPath,
    stdout: null,
    stderr: null,
    hostWritesLog: false,
    relayed: answer.streams,
  };
}

/**
 * An adopter's copy of one captured stream (1: stdout, 2: stderr) of the tree
 * it adopted: the tree's output from now on, raw, until the tree's writers
 * are gone (EOF). Only the host that adopted the tree, while attached, gets
 * it (else ERR_CORDON_ADOPT_DENIED). Returned paused: pipe it, or listen and
 * resume().
 */
export async function connectAdoptionOutput(endpoint: string, anchorPid: number, token: string, fd: 1 | 2, timeoutMs = 10000): Promise<Socket> {
  const { socket, answer } = await ask(endpoint, anchorPid, { type: 'output', token, fd }, timeoutMs);
  if (answer.type === 'output' && answer.fd === fd) return socket;
  socket.destroy();
  throw adoptRefused(endpoint, answer.type === 'denied' ? answer.why : answer.type);
}

/**
 * An OUTPUT connection comes paused (after its first line); proc.stdout and
 * proc.stderr must start as any stream does, flowing once read: a view of it
 * (its EOF, or the connection's loss, ends the view).
 */
function unpaused(socket: Socket | null): Readable | null {
  if (!socket) return null;
  const view = new PassThrough();
  socket.pipe(view);
  socket.once('error', (err) => {
    debug('adopted output stream: %s', err.message);
    view.end();
  });
  socket.once('close', () => view.end());
  return view;
}

/**
 * ADOPT, then OUTPUT for each stream the anchor relays: the adoption with its
 * output streams. (Output written between the ADOPTED line and the OUTPUT
 * connection goes to the log only.)
 */
export async function adoptWindowsTree(endpoint: string, anchorPid: number, token: string, timeoutMs = 10000): Promise<WindowsAdoption> {
  const adoption = await connectAdoptionEndpoint(endpoint, anchorPid, token, timeoutMs);
  try {
    const stdout = adoption.relayed.stdout ? await connectAdoptionOutput(endpoint, anchorPid, token, 1, timeoutMs) : null;
    const stderr = adoption.relayed.stderr ? await connectAdoptionOutput(endpoint, anchorPid, token, 2, timeoutMs) : null;
    return { ...adoption, stdout: unpaused(stdout), stderr: unpaused(stderr) };
  } catch (err) {
    adoption.socket.destroy(); // (the tree goes back to its lease)
    throw err;
  }
}
