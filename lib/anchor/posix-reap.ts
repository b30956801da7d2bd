// Reaping the host's anchors (Linux and macOS): each is the host's own child,
// started with posix_spawn, which libuv does not know about. Reaped here by
// pid: when an anchor's end of the channel closes (it exits), and on every
// SIGCHLD (in case a stray copy of that end delays the EOF). Until then its
// pid is pinned, so the host may signal it (signalAnchor).
import { debug } from '../debug.js';
import { posixBinding } from '../native.js';
import { signalName, signalNumber } from '../signals.js';

export type ExitListener = ((code: number | null, signal: NodeJS.Signals | null) => void) | { exited(code: number | null, signal: NodeJS.Signals | null): void };
const unreaped = new Map<number, ExitListener>();
/** Anchors that exited and are kept unreaped (zombies) until releaseAnchor(): see watchExit's `hold`. */
const held = new Set<number>();

/** Anchors whose end of the channel has closed (expectExit): exiting, reaped first at each SIGCHLD. */
const exiting = new Set<number>();
/**
 * How often, at most, a SIGCHLD makes the host try every unreaped anchor
 * (one that exited without its channel closing first: killed while a stray
 * copy of its end was open, or a warm anchor killed while it waited). At
 * every SIGCHLD, a try of each would cost n system calls for each of n
 * anchors ending together (1,000 trees stopped at once).
 */
const FULL_SWEEP_MS = 50;
let fullSweepAt = 0;
let fullSweepTimer: NodeJS.Timeout | undefined;

export function reap(pid: number): boolean {
  const listener = unreaped.get(pid);
  if (!listener) return true;
  const hold = holding.has(pid);
  const r = posixBinding().reapAnchor(pid, hold);
  if (r === null) return false;
  unreaped.delete(pid);
  holding.delete(pid);
  exiting.delete(pid);
  if (hold) held.add(pid);
  if (unreaped.size === 0) {
    process.off('SIGCHLD', onChild);
    clearTimeout(fullSweepTimer);
    fullSweepTimer = undefined;
  }
  const code = r.code >= 0 ? r.code : null;
  const signal = r.signal > 0 ? signalName(r.signal) : null;
  if (typeof listener === 'function') listener(code, signal);
  else listener.exited(code, signal);
  return true;
}

/** The anchor's end of its channel closed: it is exiting (reaped at the next SIGCHLD, before the others). */
export function expectExit(pid: number): void {
  if (unreaped.has(pid)) exiting.add(pid);
}

function reapAll(): void {
  fullSweepAt = Date.now();
  for (const pid of [...unreaped.keys()]) reap(pid);
}

/** SIGCHLD: the exiting anchors now; every other one now or within FULL_SWEEP_MS. */
function onChild(): void {
  for (const pid of [...exiting]) reap(pid);
  if (unreaped.size === 0) return;
  const since = Date.now() - fullSweepAt;
  if (since >= FULL_SWEEP_MS) {
    reapAll();
    return;
  }
  fullSweepTimer ??= setTimeout(() => {
    fullSweepTimer = undefined;
    reapAll();
  }, FULL_SWEEP_MS - since).unref();
}

/**
 * A signal to one of our anchors, only while it is in the unreaped set (its
 * pid pinned: the addon checks again that it is an unreaped child).
 */
export function signalAnchor(pid: number, signal: NodeJS.Signals): boolean {
  if (!unreaped.has(pid)) return false;
  try {
    posixBinding().signalAnchor(pid, signalNumber(signal)!);
    return true;
  } catch (err) {
    debug('%s to anchor %d failed: %s', signal, pid, (err as Error).message);
    return false;
  }
}

const holding = new Set<number>();

/**
 * Calls `listener` once `pid` (the host's anchor) has exited. With `hold`, it
 * is left unreaped, a zombie, until releaseAnchor(pid): its pid, and the ids
 * of the session and process group it leads, stay taken meanwhile, so nobody
 * can make a session or group of that id (lib/anchor/lost.ts sweeps a dead
 * anchor's session by it).
 */
export function watchExit(pid: number, listener: ExitListener, hold = false): void {
  if (unreaped.size === 0) process.on('SIGCHLD', onChild);
  unreaped.set(pid, listener);
  if (hold) holding.add(pid);
}

/** Reaps an anchor watchExit() held: its pid (and session id) may be anyone's from now on. */
export function releaseAnchor(pid: number): void {
  if (!held.delete(pid)) return;
  try {
    posixBinding().reapAnchor(pid);
  } catch (err) {
    debug('reaping anchor %d: %s', pid, (err as Error).message);
  }
}

/** Reaps `pid` once it exits, retrying for a while (a retired warm anchor, its exit not signalled to a worker thread). */
export function reapLater(pid: number, attempt = 0): void {
  if (reap(pid) || attempt >= 12) return;
  setTimeout(() => reapLater(pid, attempt + 1), Math.min(2 ** attempt, 500)).unref();
}
