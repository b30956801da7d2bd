// Streams and their descriptors. The streams cordon itself reads and writes
// for a tree (its stdin, stdout and stderr ends) carry a descriptor, so
// spawn() would accept one as another command's stdio, but cordon's own
// reader drains it first and the other command gets nothing: spawn() refuses
// them with a typed error, and `a.pipe(b)` copies between two trees instead.
import type { Stream } from 'node:stream';

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
