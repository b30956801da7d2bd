// Streams and their descriptors. The streams cordon itself reads and writes
// for a tree (its stdin, stdout and stderr ends) carry a descriptor, so
// spawn() would accept one as another command's stdio, but cordon's own
// reader drains it first and the other command gets nothing: spawn() refuses
// them with a typed error, and `a.pipe(b)` copies between two trees instead.
import type { Readable, Stream, Writable } from 'node:stream';
import { notPiped } from './errors.js';

const owned = new WeakSet<Stream>();

export function markOwned(stream: Stream | null): void {
  if (stream) owned.add(stream);
}

export function isOwned(stream: Stream): boolean {
  return owned.has(stream);
}

/** The descriptor under a stream (a file stream's fd, a socket's or TTY's handle), if it has one. */
export function streamFd(stream: Stream): number | undefined {
  const s = stream as Stream & { fd?: unknown; _handle?: { fd?: unknown } | null };
  const fd = typeof s.fd === 'number' ? s.fd : s._handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : undefined;
}

/**
 * One tree's output into another's stdin, as a shell pipeline: the sink ends
 * with the source; once the sink is gone (its reader exited), the source is
 * closed, so its writer gets EPIPE or SIGPIPE as in a shell.
 */
export function pipeline(source: Readable | null, from: 'stdout' | 'stderr', sink: Writable | null, sinkCommand: string): void {
  if (!source) throw notPiped(from, 'pipe()');
  if (!sink) throw notPiped('stdin', `pipe() into ${sinkCommand}`);
  source.pipe(sink);
  const stop = () => {
    if (!source.readableEnded && !source.destroyed) source.destroy();
  };
  sink.once('close', stop);
  sink.once('error', stop);
}
