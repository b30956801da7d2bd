// What the pid-hopper tests share (coverage.test.ts, process-group-escapes.test.ts,
// leak-check.test.ts): a hopper announces itself by a heartbeat file it keeps
// growing, and stops itself when `<file>.stop` exists. Each test's hopper
// program is its own.
//
// The heartbeat as a proof of life: run with `--every 1`, every generation
// appends one byte, so the file's size is the count of generations. "Alive
// since T" is the count having grown since T (beatsAfter): waited for,
// bounded, never read off one short window, since a loaded machine can leave
// a live hopper silent for a while. "Gone" is never read off the heartbeat
// alone: that is the freeze check's (procs.ts, killTagged), the heartbeat's
// silence only its corollary.
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { describeProcs, killTagged, seenByWalks, sleep, waitFor, type Tagged } from './procs.js';
import { watchdog } from './time.js';

// Where heartbeats go: a memory file system where there is one. On a disk's
// file system (ext4 here) an append can wait in the journal, uninterruptibly
// (state D), for seconds when the disk is busy (CI's lanes build beside the
// suite): a generation SIGKILLed there dies only when the write returns, and
// the forced stop's tests would measure the disk, not the chase.
const HEARTBEAT_BASE = (() => {
  try {
    if (process.platform === 'linux' && statSync('/dev/shm').isDirectory()) {
      const probe = mkdtempSync('/dev/shm/cordon-probe-');
      rmSync(probe, { recursive: true, force: true });
      return '/dev/shm';
    }
  } catch {
    // not writable: the temporary directory
  }
  return tmpdir();
})();

/** A temporary directory of the test's (on a memory file system where there is one), removed when it finishes. */
export function hopperDir(prefix: string): string {
  const dir = mkdtempSync(join(HEARTBEAT_BASE, prefix));
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

/**
 * Every tagged process alive, found by the check a hopper cannot dodge
 * (killTagged: freeze, list, kill, walk until empty), described ('(none)':
 * nothing). What it finds it also kills, so a failed assertion leaves nothing.
 */
export function taggedByWalks(t: Tagged): string {
  return describeProcs(killTagged(t.tag));
}

/** Tagged processes that 20 walks saw, with no signal sent (seenByWalks), described. */
export function taggedSeen(t: Tagged, walks = 20): string {
  return describeProcs(seenByWalks(t.tag, walks));
}

/**
 * Waits until the hopper has made `more` generations since `since` (a size
 * read earlier): it was alive meanwhile. Bounded at `timeout` (30 s by
 * default: a generation is a fork, under 1 ms on an idle machine; a loaded
 * 2-core machine can be a hundred times slower for a while).
 */
export async function beatsAfter(file: string, since: number, more: number, what: string, watch: Tagged, timeout = watchdog(30_000)): Promise<number> {
  await waitFor(() => size(file) >= since + more, { timeout, what: `${what}: the hopper to make ${more} more generation(s) (its heartbeat, ${file})`, watch: watch.tag });
  return size(file);
}

/**
 * The heartbeat did not grow in `ms`: with every generation beating
 * (`--every 1`), a hopper that is alive and runs at all beats within that.
 * A corollary of the freeze check, never a proof on its own.
 */
export async function silentFor(file: string, ms: number): Promise<boolean> {
  const at = size(file);
  await sleep(ms);
  return size(file) === at;
}
