// The streams cordon itself reads and writes for a tree (its stdin, stdout
// and stderr ends). They carry a descriptor, so spawn() would accept one as
// another command's stdio, but cordon's own reader drains it first and the
// other command gets nothing (issue #16): spawn() refuses them with a typed
// error, and `a.pipe(b)` copies between two trees instead.
import type { Stream } from 'node:stream';

const owned = new WeakSet<Stream>();

export function markOwned(stream: Stream | null): void {
  if (stream) owned.add(stream);
}

export function isOwned(stream: Stream): boolean {
  return owned.has(stream);
}
