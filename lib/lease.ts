// Leases, what the host keeps of them: the `lease` option, the adoption token
// and the tree's id, and the record (<id>.json) the creating host writes
// beside each endpoint in the per-user lease directory
// (anchor/lease-dir.ts). Starting a leased anchor is
// launch.ts's; listing and adopting leased trees is adopt.ts's; the anchor's
// side is native/posix/lease.{h,cc} and native/win/lease.cc; the wire is
// native/protocol.h (and lib/anchor/protocol.ts on the host's side).
import { createHmac, randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { TOKEN_PATTERN } from './anchor/protocol.js';
import { debug } from './debug.js';
import { duration } from './duration.js';
import { binding } from './native.js';

/** What `<id>.json` holds (version 1). */
export interface LeaseRecord {
  version: 1;
  id: string;
  anchorPid: number;
  /** The anchor's start stamp (its pid is its identity only with it). */
  anchorStart: string;
  /** Informational: an adopter derives the endpoint from the directory and the id, never from here. */
  endpoint: string;
  owner: string | null;
  kind: string;
  label: string;
  command: string;
  args: string[];
  cwd: string;
  logPath: string | null;
  /** Epoch milliseconds. */
  started: number;
  /** The lease in milliseconds. */
  lease: number;
  tier: string;
  /** A tree with a terminal (pty): its size when spawned. Absent: none (and in records from before terminals). */
  terminal?: { cols: number; rows: number };
}

/** The `lease` option: milliseconds, or a string with its unit ('30s', '10m', '1h'). undefined or 0: no lease. */
export function leaseOption(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const ms = duration('lease', value);
  return ms === 0 ? undefined : ms;
}

/** 128 random bits, as the anchor takes them (32 lowercase hex characters). */
export function newToken(): string {
  return randomBytes(16).toString('hex');
}

/** The token of every leased tree of `owner` under a Registry's `secret`: HMAC-SHA256, truncated to 128 bits. */
export function ownerToken(secret: string, owner: string): string {
  return createHmac('sha256', secret).update(owner).digest('hex').slice(0, 32);
}

export function isToken(value: unknown): value is string {
  return typeof value === 'string' && TOKEN_PATTERN.test(value);
}

/** The part of a tree's lease id the host chooses (16 lowercase hex); the anchor's pid is the rest. */
export function newLeaseId(): string {
  return randomBytes(8).toString('hex');
}

/** Written atomically (a temporary file, then rename), 0600. */
export function writeRecord(dir: string, record: LeaseRecord): void {
  const file = join(dir, `${record.id}.json`);
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, JSON.stringify(record));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
}

export function removeRecord(dir: string, id: string): void {
  rmSync(join(dir, `${id}.json`), { force: true });
}

export function readRecord(dir: string, id: string): LeaseRecord | undefined {
  try {
    const r = JSON.parse(readFileSync(join(dir, `${id}.json`), 'utf8')) as LeaseRecord;
    return r.version === 1 && r.id === id && typeof r.anchorPid === 'number' ? r : undefined;
  } catch {
    return undefined;
  }
}

/** Whether the record's anchor is still the process it names (pid and start stamp). */
export function anchorAlive(record: LeaseRecord): boolean {
  return binding().processStart(record.anchorPid) === record.anchorStart && record.anchorStart !== '0';
}

/** A record (and POSIX endpoint) whose anchor is gone. */
export function removeStale(dir: string, id: string): void {
  debug('lease %s: stale (its anchor is gone): removed', id);
  rmSync(join(dir, `${id}.json`), { force: true });
  rmSync(join(dir, `${id}.sock`), { force: true });
}

/** The records of this user's leased trees whose anchors are still those processes; stale ones are removed on the way. */
export function liveRecords(dir: string): LeaseRecord[] {
  const out: LeaseRecord[] = [];
  for (const name of readdirSync(dir)) {
    if (!name.endsWith('.json')) continue;
    const id = name.slice(0, -5);
    const record = readRecord(dir, id);
    if (!record || !anchorAlive(record)) {
      removeStale(dir, id);
      continue;
    }
    out.push(record);
  }
  return out;
}
