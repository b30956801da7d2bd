// What the pid-hopper tests share (coverage.test.ts, process-group-escapes.test.ts):
// a hopper announces itself by a heartbeat file it keeps growing, and stops
// itself when `<file>.stop` exists. Each test's hopper program is its own.
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { sleep, type Tagged } from './procs.js';

/** A temporary directory of the test's, removed when it finishes. */
export function hopperDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The heartbeat file's size (0 while it does not exist). */
export function size(path: string): number {
  return existsSync(path) ? statSync(path).size : 0;
}

/**
 * A hopper's heartbeat file in `dir`. Its cleanup is registered now, before
 * the hopper starts, and does not depend on cordon: it creates the stop file,
 * then waits (bounded, 10 s) until the heartbeat stops growing.
 */
export function hopperFile(dir: string, name: string): string {
  const file = join(dir, name);
  onTestFinished(async () => {
    mkdirSync(dir, { recursive: true }); // (whichever cleanup runs first)
    writeFileSync(`${file}.stop`, '');
    let last = -1;
    for (let i = 0; i < 50 && size(file) !== last; i++) {
      last = size(file);
      await sleep(200);
    }
  });
  return file;
}

/** Every tagged process, found by several /proc walks (one walk can miss a hopper). */
export function taggedByWalks(t: Tagged, walks = 20): string {
  const seen = new Map<number, string>();
  for (let i = 0; i < walks; i++) for (const p of t.procs()) seen.set(p.pid, `  pid ${p.pid} [${p.state}] ${p.command}`);
  return seen.size === 0 ? '(none)' : [...seen.values()].join('\n');
}
