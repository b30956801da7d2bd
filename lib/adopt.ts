// Adopting a leased tree whose host is gone, the second way to get an anchor:
// the tree's record (lease.ts) and its anchor's answer to ADOPT become an
// AnchoredTree whose connect() binds the adopted anchor; the facade then
// drives it as any other. Listing the adoptable trees is here too: every live
// record, with what its anchor answers to INFO. Every request to an anchor is
// bounded (REQUEST_TIMEOUT_MS); an anchor that is alive but does not answer
// in time is listed as such, never dropped.
import { closeSync } from 'node:fs';
import { adoptAnchor, anchors, overriding, type AnchorHandlers, type LeaseInfo } from './anchor.js';
import { LEASE_ID_PATTERN } from './anchor/protocol.js';
import { debug } from './debug.js';
import { adoptDenied, anchorNotAnswering, logUnopenable, unknownLease, type CordonError } from './errors.js';
import { anchorAlive, liveRecords, readRecord, removeRecord, removeStale, type LeaseRecord } from './lease.js';
import { openLog } from './log-file.js';
import { normalizeOptions } from './options.js';
import type { Tier } from './tiers.js';
import type { AnchoredTree } from './tree.js';

/** How long a request to an anchor's endpoint may take. */
const REQUEST_TIMEOUT_MS = 5000;

/** One tree `registry.adoptable()` lists: its record, less the anchor's identity, plus what the anchor says now. */
export type AdoptableTree = Pick<LeaseRecord, 'id' | 'owner' | 'kind' | 'label' | 'command' | 'args' | 'cwd' | 'logPath' | 'started' | 'tier'> & {
  /**
   * Whether the anchor answered (INFO, within 5 s). false: it is alive (the
   * same process, by pid and start time) but said nothing in time: stopped,
   * or the machine is overloaded. Then leaseLeftMs and rootRunning are null:
   * unknown, not guessed.
   */
  answered: boolean;
  /** Milliseconds until the tree is terminated; null while a host is attached (the lease clock is not running), or when the anchor did not answer. */
  leaseLeftMs: number | null;
  /** Whether the root still runs (false: its result waits for the adopter); null when the anchor did not answer. */
  rootRunning: boolean | null;
};

/** `answer` undefined: the anchor is alive but did not answer. */
function listed(record: LeaseRecord, answer: LeaseInfo | undefined): AdoptableTree {
  return {
    id: record.id,
    owner: record.owner,
    kind: record.kind,
    label: record.label,
    command: record.command,
    args: record.args,
    cwd: record.cwd,
    logPath: record.logPath,
    started: record.started,
    answered: answer !== undefined,
    leaseLeftMs: answer?.leftMs ?? null,
    rootRunning: answer?.rootRunning ?? null,
    tier: record.tier,
  };
}

/**
 * The live leased trees of this user, oldest first: each record whose anchor
 * is still that process (pid and start time) is asked INFO; stale records
 * (and POSIX endpoints) are removed on the way, and so is one whose endpoint
 * is gone or whose anchor exited meanwhile.
 */
export async function listAdoptable(): Promise<AdoptableTree[]> {
  const dir = anchors.leaseDir();
  const out: AdoptableTree[] = [];
  for (const record of liveRecords(dir)) {
    try {
      out.push(listed(record, await anchors.leaseInfo(anchors.endpoint(dir, record.id), record.anchorPid, REQUEST_TIMEOUT_MS)));
    } catch (err) {
      debug('lease %s: INFO failed: %s', record.id, (err as Error).message);
      if ((err as CordonError).code === 'ERR_CORDON_UNKNOWN_TREE' || !anchorAlive(record)) removeStale(dir, record.id);
      else out.push(listed(record, undefined));
    }
  }
  return out.sort((a, b) => a.started - b.started);
}

/** The record of the live leased tree `id`, or ERR_CORDON_UNKNOWN_TREE (a stale one is removed). */
function liveRecord(dir: string, id: string): LeaseRecord {
  if (!LEASE_ID_PATTERN.test(id)) throw unknownLease(id);
  const record = readRecord(dir, id);
  if (!record) throw unknownLease(id);
  if (!anchorAlive(record)) {
    removeStale(dir, id);
    throw unknownLease(id);
  }
  return record;
}

/** An adopted tree, and when its replay has told what the tree is. */
export interface AdoptedTree extends AnchoredTree {
  /**
   * Resolves once the replay's READY was read (the root's pid known, and the
   * tree's state with it: the lines the anchor sent together with READY
   * have been read too), within REQUEST_TIMEOUT_MS of connect(). Rejects
   * when the anchor went away first (ERR_CORDON_UNKNOWN_TREE) or is silent
   * (ERR_CORDON_TIMEOUT); then the connection is closed, which hands the
   * tree back to its lease.
   */
  replayed: Promise<void>;
}

/**
 * ADOPT on the leased tree `id`: the tree, ready for the facade. `authorize`
 * sees the record first and returns the token to present (or throws: then
 * nothing is asked of the anchor). Errors: ERR_CORDON_UNKNOWN_TREE (no such
 * live tree, or its anchor closed the request unanswered),
 * ERR_CORDON_ADOPT_DENIED (a wrong token, another host holds it, or on
 * Windows the endpoint's server is not the record's anchor: `why` 'impostor'),
 * ERR_CORDON_TIMEOUT (its anchor is alive but did not answer in time).
 */
export async function adoptTree(id: string, authorize: (record: LeaseRecord) => string, grace: number): Promise<AdoptedTree> {
  const dir = anchors.leaseDir();
  const record = liveRecord(dir, id);
  const token = authorize(record);
  let adopted;
  try {
    adopted = await anchors.adopt(anchors.endpoint(dir, id), record.anchorPid, token, REQUEST_TIMEOUT_MS);
  } catch (cause) {
    const err = cause as CordonError & { why?: string };
    if (err.code === 'ERR_CORDON_ADOPT_DENIED' && err.why === 'impostor') throw err; // (its message says what to do)
    if (err.code === 'ERR_CORDON_ADOPT_DENIED') throw adoptDenied(id, err.why ?? 'refused', cause);
    if (err.code !== 'ERR_CORDON_ANCHOR_LOST' && anchorAlive(record)) throw anchorNotAnswering(id, record.anchorPid, REQUEST_TIMEOUT_MS, cause);
    throw unknownLease(id, cause);
  }
  const opts = normalizeOptions({ grace });
  opts.cwd = record.cwd;
  opts.log = record.logPath ?? undefined;
  // A terminal's tree: resize() works, its stdin is the terminal's input (ADOPTED gave a pipe into it).
  if (record.terminal) opts.pty = { cols: record.terminal.cols, rows: record.terminal.rows, term: undefined };
  let logFd: number | undefined;
  // Where the anchor appends the output to the log itself (Windows), the adopter writing it too would double every line.
  if (opts.log !== undefined && adopted.hostWritesLog) {
    try {
      logFd = openLog(opts.log, false);
    } catch (cause) {
      adopted.socket.destroy(); // (the tree goes back to its lease)
      throw logUnopenable(opts.log, cause);
    }
  }
  let settle!: { resolve: () => void; reject: (err: unknown) => void };
  const replayed = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
  replayed.catch(() => {}); // (awaited by registry.adopt(); never an unhandled rejection)
  let timer: NodeJS.Timeout | undefined;
  let givenBack = false;
  const replay = (on: AnchorHandlers): AnchorHandlers => overriding(on, {
    ready: (pid, tier, pidfd) => {
      on.ready(pid, tier, pidfd);
      clearTimeout(timer);
      settle.resolve();
    },
    anchorExit: (code, signal, error) => {
      clearTimeout(timer);
      settle.reject(unknownLease(id, error));
      // The adopter holds the tree: its record goes when the anchor is gone
      // (the anchor removes its own; this covers one that died), unless the
      // tree went back to its lease.
      if (!givenBack) removeRecord(dir, id);
      on.anchorExit(code, signal, error);
    },
  });
  return {
    replayed,
    command: record.command,
    args: record.args,
    executable: record.command,
    opts,
    tier: record.tier as Tier,
    outputs: { stdout: 'pipe', stderr: 'pipe' },
    logFd,
    limits: undefined,
    lease: { ms: record.lease, token: undefined },
    startedAt: record.started,
    adopted: true,
    connect: (on) => {
      try {
        const channel = adoptAnchor(adopted, record.anchorPid, replay(on), grace);
        timer = setTimeout(() => {
          givenBack = true;
          settle.reject(anchorNotAnswering(id, record.anchorPid, REQUEST_TIMEOUT_MS, new Error('the replay said no READY')));
          adopted.socket.destroy(); // (the tree goes back to its lease)
        }, REQUEST_TIMEOUT_MS);
        return { channel, leaseId: id };
      } catch (err) {
        if (logFd !== undefined) closeSync(logFd);
        throw err;
      }
    },
  };
}
