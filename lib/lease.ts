// Leases and adoption (issue #17), the host's side: the `lease` option, the
// per-user runtime directory where leased anchors listen, the adoption token,
// the record (<id>.json) the creating host writes beside each endpoint, and
// the requests a new host makes there (INFO, ADOPT). The anchor's side is
// native/posix/lease.{h,cc} and native/win/lease.cc + anchor.cc; the wire is
// native/protocol.h. POSIX asks the anchor synchronously (the addon's
// leaseRequest, which also receives the stdout/stderr read ends); Windows
// connects to the anchor's named pipe with Node (lib/anchor/windows.ts), which
// is asynchronous: listAdoptableWindows() and requestWindowsAdoption().
import { createHmac, randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import type { Socket } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { PassThrough, type Readable } from 'node:stream';
import { join } from 'node:path';
import { debug } from './debug.js';
import { duration, parseDuration } from './duration.js';
import * as errors from './errors.js';
import { invalidArg } from './errors.js';
import { adoptWindowsTree, leaseEndpoint, leaseInfo, type WindowsAdoption } from './anchor/windows.js';
import { binding, posixBinding, windowsBinding } from './native.js';

/** What `<id>.json` holds (version 1). */
export interface LeaseRecord {
  version: 1;
  id: string;
  anchorPid: number;
  /** The anchor's start stamp (its pid is its identity only with it). */
  anchorStart: string;
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
}

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

/** The `lease` option: milliseconds, or a duration string ('30s', '10m', '1h'). undefined or 0: no lease. */
export function leaseOption(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  let ms: number;
  if (typeof value === 'string') ms = parseDuration('lease', value);
  else if (typeof value === 'number') ms = duration('lease', value);
  else throw invalidArg('lease', value, "a number of milliseconds or a duration such as '30s' or '10m'", 'ERR_INVALID_ARG_TYPE');
  return ms === 0 ? undefined : ms;
}

/** A leased tree's log when none was asked for: under `dir` (an owner's log directory), else <tmpdir>/cordon-logs. */
export function defaultLeaseLog(dir = join(tmpdir(), 'cordon-logs')): string {
  mkdirSync(dir, { recursive: true });
  return join(dir, `lease-${Date.now()}-${randomBytes(4).toString('hex')}.log`);
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
  return typeof value === 'string' && /^[0-9a-f]{32}$/.test(value);
}

/**
 * The per-user runtime directory: $XDG_RUNTIME_DIR/cordon when that is the
 * user's, else <tmpdir>/cordon-<uid>; made 0700. One that exists as anything
 * but this user's own private directory (a symlink, another owner, group or
 * other permission bits) is refused: another user must not list or reach an
 * endpoint.
 */
export function leaseDir(): string {
  if (process.platform === 'win32') return windowsLeaseDir();
  const uid = process.getuid?.() ?? 0;
  const xdg = process.env.XDG_RUNTIME_DIR;
  let base: string | undefined;
  if (xdg) {
    try {
      const st = lstatSync(xdg);
      if (st.isDirectory() && st.uid === uid) base = join(xdg, 'cordon');
    } catch {
      // not there: the fallback
    }
  }
  const dir = base ?? join(tmpdir(), `cordon-${uid}`);
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw errors.leaseDirUnsafe(dir, `cannot be made (${(err as NodeJS.ErrnoException).code})`);
  }
  const st = lstatSync(dir);
  if (st.isSymbolicLink() || !st.isDirectory()) throw errors.leaseDirUnsafe(dir, 'is not a directory');
  if (st.uid !== uid) throw errors.leaseDirUnsafe(dir, `belongs to uid ${st.uid}`);
  if ((st.mode & 0o077) !== 0) throw errors.leaseDirUnsafe(dir, `has mode ${(st.mode & 0o777).toString(8)}`);
  return dir;
}

/**
 * Windows: %LOCALAPPDATA%\cordon\leases (the records only; the endpoints are
 * named pipes). The last level is made with a DACL that admits this user
 * alone (the addon's makePrivateDir); an existing one that is not a plain
 * directory (a link, a file) is refused.
 */
function windowsLeaseDir(): string {
  const base = process.env.LOCALAPPDATA || join(homedir(), 'AppData', 'Local');
  const dir = join(base, 'cordon', 'leases');
  mkdirSync(join(base, 'cordon'), { recursive: true });
  try {
    windowsBinding().makePrivateDir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw errors.leaseDirUnsafe(dir, `cannot be made (${(err as NodeJS.ErrnoException).code})`);
  }
  const st = lstatSync(dir);
  if (st.isSymbolicLink() || !st.isDirectory()) throw errors.leaseDirUnsafe(dir, 'is not a directory');
  return dir;
}

/** The endpoint of a leased anchor: POSIX its socket beside the record, Windows its named pipe. */
export function endpointOf(dir: string, anchorPid: number, id: string): string {
  return process.platform === 'win32' ? leaseEndpoint(anchorPid, id.slice(id.indexOf('-') + 1)) : join(dir, `${id}.sock`);
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

function readRecord(dir: string, id: string): LeaseRecord | undefined {
  try {
    const r = JSON.parse(readFileSync(join(dir, `${id}.json`), 'utf8')) as LeaseRecord;
    return r.version === 1 && r.id === id && typeof r.endpoint === 'string' && typeof r.anchorPid === 'number' ? r : undefined;
  } catch {
    return undefined;
  }
}

/** Whether the record's anchor is still the process it names (pid and start stamp). */
function anchorAlive(record: LeaseRecord): boolean {
  return binding().processStart(record.anchorPid) === record.anchorStart && record.anchorStart !== '0';
}

function removeStale(dir: string, id: string): void {
  debug('lease %s: stale (its anchor is gone): removed', id);
  rmSync(join(dir, `${id}.json`), { force: true });
  rmSync(join(dir, `${id}.sock`), { force: true });
}

/** How long a request to an anchor's endpoint may take. */
const REQUEST_TIMEOUT_MS = 5000;

/** INFO: the lease left (-1 while attached) and whether the root runs; undefined when the anchor does not answer. */
function info(record: LeaseRecord): { leftMs: number; rootRunning: boolean } | undefined {
  try {
    const r = posixBinding().leaseRequest(record.endpoint, 'INFO\n', REQUEST_TIMEOUT_MS);
    for (const fd of r.fds) closeSync(fd);
    if (r.fd >= 0) closeSync(r.fd);
    const m = /^LEASE (-?\d+) ([01])\n/.exec(r.received);
    return m ? { leftMs: Number(m[1]), rootRunning: m[2] === '1' } : undefined;
  } catch (err) {
    debug('lease %s: INFO failed: %s', record.id, (err as Error).message);
    return undefined;
  }
}

/** The records of this user's leased trees whose anchors are still those processes; stale ones are removed on the way. */
function liveRecords(dir: string): LeaseRecord[] {
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

/** `answer` undefined: the anchor is alive but did not answer. */
function listed(record: LeaseRecord, answer: { leftMs: number; rootRunning: boolean } | undefined): AdoptableTree {
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
    leaseLeftMs: answer === undefined || answer.leftMs < 0 ? null : answer.leftMs,
    rootRunning: answer === undefined ? null : answer.rootRunning,
    tier: record.tier,
  };
}

/** The live leased trees of this user (POSIX); stale records and endpoints are removed on the way. */
export function listAdoptable(): AdoptableTree[] {
  if (process.platform === 'win32') return [];
  const out: AdoptableTree[] = [];
  const dir = leaseDir();
  for (const record of liveRecords(dir)) {
    const answer = info(record);
    // Not answering: listed as such if the anchor is still that process
    // (stopped, or too slow), dropped if it has just exited.
    if (answer || anchorAlive(record)) out.push(listed(record, answer));
    else removeStale(dir, record.id);
  }
  return out.sort((a, b) => a.started - b.started);
}

/**
 * The live leased trees of this user (Windows): each record whose anchor is
 * still that process (pid and creation time) is asked INFO on its named
 * pipe; a record whose pipe is gone (the anchor is exiting) is removed.
 */
export async function listAdoptableWindows(): Promise<AdoptableTree[]> {
  const dir = leaseDir();
  const out: AdoptableTree[] = [];
  for (const record of liveRecords(dir)) {
    try {
      const answer = await leaseInfo(record.endpoint, REQUEST_TIMEOUT_MS);
      out.push(listed(record, { leftMs: answer.leaseLeftMs ?? -1, rootRunning: answer.rootRunning }));
    } catch (err) {
      debug('lease %s: INFO failed: %s', record.id, (err as Error).message);
      if ((err as errors.CordonError).code === 'ERR_CORDON_UNKNOWN_TREE' || !anchorAlive(record)) removeStale(dir, record.id);
      else out.push(listed(record, undefined));
    }
  }
  return out.sort((a, b) => a.started - b.started);
}

/** The owner a live leased tree's record names (null: none); ERR_CORDON_UNKNOWN_TREE when there is no such live tree. */
export function leaseOwner(id: string): string | null {
  return liveRecord(id).owner;
}

/** What a successful ADOPT hands over. */
export interface Adoption {
  record: LeaseRecord;
  /** The connection, now the tree's control channel. */
  fd: number;
  /** What followed the ADOPTED line (the start of the replay). */
  rest: string;
  stdoutFd: number;
  stderrFd: number;
}

/** The record of the live leased tree `id`, or ERR_CORDON_UNKNOWN_TREE (a stale one is removed). */
function liveRecord(id: string): LeaseRecord {
  const dir = leaseDir();
  if (!/^[0-9]+-[0-9a-f]{16}$/.test(id)) throw errors.unknownLease(id);
  const record = readRecord(dir, id);
  if (!record) throw errors.unknownLease(id);
  if (!anchorAlive(record)) {
    removeStale(dir, id);
    throw errors.unknownLease(id);
  }
  return record;
}

/**
 * ADOPT <token> on the tree's endpoint: the connection, or a typed error.
 * `check` sees the record first (and may throw): nothing is asked of the
 * anchor when it does.
 */
export function requestAdoption(id: string, token: string, check: (record: LeaseRecord) => void): Adoption {
  if (process.platform === 'win32') throw errors.unknownLease(id);
  const record = liveRecord(id);
  check(record);
  let r: { fd: number; received: string; fds: number[] };
  try {
    r = posixBinding().leaseRequest(record.endpoint, `ADOPT ${token}\n`, REQUEST_TIMEOUT_MS);
  } catch (cause) {
    if (anchorAlive(record)) throw errors.anchorNotAnswering(id, record.anchorPid, REQUEST_TIMEOUT_MS, cause);
    throw errors.unknownLease(id, cause);
  }
  const nl = r.received.indexOf('\n');
  const line = r.received.slice(0, nl < 0 ? undefined : nl);
  const closeAll = () => {
    for (const fd of r.fds) closeSync(fd);
    if (r.fd >= 0) closeSync(r.fd);
  };
  const denied = /^DENIED (\S+)/.exec(line);
  if (denied) {
    closeAll();
    throw errors.adoptDenied(id, denied[1]!);
  }
  const adopted = /^ADOPTED .* ([01]) ([01])$/.exec(line);
  if (!adopted || r.fd < 0) {
    closeAll();
    throw errors.unknownLease(id, new Error(`unexpected answer: ${JSON.stringify(line)}`));
  }
  const fds = [...r.fds];
  const stdoutFd = adopted[1] === '1' ? (fds.shift() ?? -1) : -1;
  const stderrFd = adopted[2] === '1' ? (fds.shift() ?? -1) : -1;
  for (const fd of fds) closeSync(fd);
  return { record, fd: r.fd, rest: r.received.slice(nl + 1), stdoutFd, stderrFd };
}

/**
 * An OUTPUT connection comes paused (after its first line); proc.stdout and
 * proc.stderr must start as any stream does, flowing once read: a view of it
 * (its EOF, or the connection's loss, ends the view).
 */
function unpaused(socket: Socket | null): Readable | null {
  if (!socket) return null;
  const view = new PassThrough();
  socket.pipe(view);
  socket.once('error', (err) => {
    debug('adopted output stream: %s', err.message);
    view.end();
  });
  socket.once('close', () => view.end());
  return view;
}

/** What a successful ADOPT hands over on Windows: the connection and the relayed output streams. */
export interface WindowsTreeAdoption {
  record: LeaseRecord;
  windows: Omit<WindowsAdoption, 'stdout' | 'stderr'> & { stdout: Readable | null; stderr: Readable | null };
}

/**
 * Windows: ADOPT <token> on the tree's named pipe, then OUTPUT for each
 * relayed stream (adoptWindowsTree()). `check` sees the record first, as
 * requestAdoption()'s does.
 */
export async function requestWindowsAdoption(id: string, token: string, check: (record: LeaseRecord) => void): Promise<WindowsTreeAdoption> {
  const record = liveRecord(id);
  check(record);
  try {
    const w = await adoptWindowsTree(record.endpoint, token, REQUEST_TIMEOUT_MS);
    return { record, windows: { ...w, stdout: unpaused(w.stdout), stderr: unpaused(w.stderr) } };
  } catch (cause) {
    const err = cause as errors.CordonError & { why?: string };
    if (err.code === 'ERR_CORDON_ADOPT_DENIED') {
      const denied = errors.adoptDenied(id, err.why ?? 'refused');
      Object.defineProperty(denied, 'cause', { value: cause });
      throw denied;
    }
    if (anchorAlive(record)) throw errors.anchorNotAnswering(id, record.anchorPid, REQUEST_TIMEOUT_MS, cause);
    throw errors.unknownLease(id, cause);
  }
}
