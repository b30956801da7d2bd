// Line-by-line reading of a tree's captured output:
// `for await (const line of proc.lines({ from: 'all' }))`. Lines come in the
// order they were completed across the streams read; a final line without a
// newline is given at its stream's end; '\r\n' endings lose their '\r'.
// Backpressure: past HIGH_WATER unread lines the streams are paused, so a
// slow loop slows the command instead of filling the host's memory.
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';

export type LinesFrom = 'stdout' | 'stderr' | 'all';

const HIGH_WATER = 1000;

export function readLines(streams: Readable[], encoding: BufferEncoding = 'utf8'): AsyncIterableIterator<string> {
  const queue: string[] = [];
  let open = streams.length;
  let failure: { error: unknown } | undefined;
  let wake: (() => void) | undefined;
  const cleanups: (() => void)[] = [];
  const notify = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  const push = (line: string) => {
    queue.push(line.endsWith('\r') ? line.slice(0, -1) : line);
    if (queue.length >= HIGH_WATER) for (const s of streams) s.pause();
  };

  for (const stream of streams) {
    const decoder = new StringDecoder(encoding);
    let partial = '';
    let ended = false;
    const onData = (chunk: Buffer | string) => {
      const text = partial + (typeof chunk === 'string' ? chunk : decoder.write(chunk));
      const parts = text.split('\n');
      partial = parts.pop()!;
      for (const line of parts) push(line);
      notify();
    };
    const onEnd = () => {
      if (ended) return;
      ended = true;
      const rest = partial + decoder.end();
      partial = '';
      if (rest !== '') push(rest);
      open--;
      notify();
    };
    const onError = (error: unknown) => {
      failure ??= { error };
      onEnd();
    };
    stream.on('data', onData);
    stream.once('end', onEnd);
    // (A stream destroyed at the wait delay closes without 'end': what was read is kept.)
    stream.once('close', onEnd);
    stream.once('error', onError);
    if (stream.readableEnded || stream.closed) onEnd();
    cleanups.push(() => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('close', onEnd);
      stream.off('error', onError);
    });
  }

  const finish = () => {
    for (const c of cleanups.splice(0)) c();
    // Nobody reads on: the rest flows away rather than stalling the command.
    for (const s of streams) if (!s.destroyed) s.resume();
  };

  const iterator: AsyncIterableIterator<string> = {
    async next(): Promise<IteratorResult<string>> {
      for (;;) {
        if (queue.length > 0) {
          const value = queue.shift()!;
          if (queue.length < HIGH_WATER / 2) for (const s of streams) if (s.isPaused() && !s.destroyed) s.resume();
          return { value, done: false };
        }
        if (open === 0) {
          finish();
          if (failure) {
            const { error } = failure;
            failure = undefined;
            throw error;
          }
          return { value: undefined, done: true };
        }
        await new Promise<void>((resolve) => (wake = resolve));
      }
    },
    async return(): Promise<IteratorResult<string>> {
      open = 0;
      queue.length = 0;
      finish();
      return { value: undefined, done: true };
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };
  return iterator;
}
