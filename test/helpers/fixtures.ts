import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { pollUntil } from './common.mjs';
import { parsePids } from './procs.js';
import { watchdog } from './time.js';

export const fixturesDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures');
export const fixture = (name: string) => join(fixturesDir, name);
export const repoRoot = join(fixturesDir, '..', '..');

/** Accumulates a stream's text; `until` waits (bounded) for a pattern. */
export function capture(stream: Readable | null | undefined) {
  let text = '';
  stream?.setEncoding('utf8');
  stream?.on('data', (chunk: string) => {
    text += chunk;
  });
  return {
    get text() {
      return text;
    },
    pids() {
      return parsePids(text);
    },
    async until(pattern: RegExp, timeout = watchdog(10_000)): Promise<string> {
      if (!(await pollUntil(() => pattern.test(text), timeout, 10))) {
        throw new Error(`watchdog: output did not match ${pattern} within ${timeout} ms; got:\n${text}`);
      }
      return text;
    },
  };
}
