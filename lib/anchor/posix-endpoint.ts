// A leased anchor's adoption endpoint on Linux and macOS: a Unix socket in
// the per-user lease directory. The addon connects, writes the request line
// and reads the first answer line with the descriptors it carries (SCM_RIGHTS:
// the read ends of the tree's stdout and stderr with ADOPTED), bounded by
// `timeoutMs`. The lines are anchor/protocol.ts's.
import { closeSync, writeSync } from 'node:fs';
import { Socket } from 'node:net';
import { debug } from '../debug.js';
import { adoptRefused, endpointAnswer } from '../errors.js';
import { posixBinding } from '../native.js';
import type { AdoptedAnchor } from './adopted.js';
import { encodeRequest, parseAnswer, type EndpointAnswer, type EndpointRequest } from './protocol.js';

/** What the endpoint answered, with the connection and the descriptors that came with the answer. */
function ask(endpoint: string, request: EndpointRequest, timeoutMs: number): { answer: EndpointAnswer; fd: number; rest: string; fds: number[] } {
  const r = posixBinding().leaseRequest(endpoint, encodeRequest(request), timeoutMs);
  const nl = r.received.indexOf('\n');
  const line = r.received.slice(0, nl < 0 ? undefined : nl);
  const answer = parseAnswer(line);
  if (answer.type === 'unknown' || answer.type === 'malformed' || nl < 0) {
    closeAll(r.fd, r.fds);
    throw endpointAnswer(endpoint, request.type, line);
  }
  return { answer, fd: r.fd, rest: r.received.slice(nl + 1), fds: r.fds };
}

function closeAll(fd: number, fds: number[]): void {
  for (const d of fds) closeSync(d);
  if (fd >= 0) closeSync(fd);
}

/** INFO: the lease left (null while a host is attached) and whether the root runs. */
export async function posixLeaseInfo(endpoint: string, timeoutMs: number): Promise<{ leftMs: number | null; rootRunning: boolean }> {
  const { answer, fd, fds } = ask(endpoint, { type: 'info' }, timeoutMs);
  closeAll(fd, fds);
  if (answer.type !== 'lease') throw endpointAnswer(endpoint, 'info', answer.type);
  return { leftMs: answer.leftMs, rootRunning: answer.rootRunning };
}

/** ADOPT <token>: the connection and the tree's output pipes, or ERR_CORDON_ADOPT_DENIED (with the anchor's `why`). */
export async function posixAdopt(endpoint: string, token: string, timeoutMs: number): Promise<AdoptedAnchor> {
  const { answer, fd, rest, fds } = ask(endpoint, { type: 'adopt', token }, timeoutMs);
  if (answer.type === 'denied') {
    closeAll(fd, fds);
    throw adoptRefused(endpoint, answer.why);
  }
  if (answer.type !== 'adopted' || fd < 0) {
    closeAll(fd, fds);
    throw endpointAnswer(endpoint, 'adopt', answer.type);
  }
  const left = [...fds];
  const stdoutFd = answer.streams.stdout ? (left.shift() ?? -1) : -1;
  const stderrFd = answer.streams.stderr ? (left.shift() ?? -1) : -1;
  const stdinFd = answer.terminal ? (left.shift() ?? -1) : -1;
  for (const d of left) closeSync(d);
  const socket = new Socket({ fd, readable: true, writable: true });
  return {
    socket,
    pending: rest,
    // Written directly, so that a write failing as the anchor exits cannot
    // make the socket destroy itself before the last lines (QUIET) are read.
    write: (line) => {
      try {
        writeSync(fd, line);
      } catch (err) {
        debug('control write to adopted anchor failed (it is exiting): %s', (err as Error).message);
      }
    },
    logPath: answer.logPath,
    stdout: stdoutFd >= 0 ? new Socket({ fd: stdoutFd, readable: true, writable: false }) : null,
    stderr: stderrFd >= 0 ? new Socket({ fd: stderrFd, readable: true, writable: false }) : null,
    stdin: stdinFd >= 0 ? new Socket({ fd: stdinFd, readable: false, writable: true }) : null,
    hostWritesLog: true,
  };
}
