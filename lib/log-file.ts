// Where logs go and how cordon opens them. Command output holds tokens and
// secrets: a log cordon names is made private to this user, in a directory
// of this user's alone (lib/private-dir.ts), never in one another user made
// or planted, and is opened without following links and without clobbering
// an existing file. A path the caller names (the `log` option, a Registry's
// `logDir`) is the caller's choice, and its permissions the caller's.
import { createHash, randomBytes } from 'node:crypto';
import { constants, mkdirSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { logDirUnsafe } from './errors.js';
import { homeFallback, makePrivateDir, privateDir, windowsPrivateDir, windowsPrivatePath } from './private-dir.js';

/**
 * This user's log directory, where a leased tree's log goes when none was
 * asked for and a Registry without `logDir` puts `log: true` files (one
 * directory per owner in it). Linux and macOS: <tmpdir>/cordon-logs-<uid>,
 * made 0700; where another user holds that place, <home>/.cordon/logs
 * (lib/private-dir.ts); this user's own directory there left open to others
 * is refused (ERR_CORDON_LOG_DIR). Windows: %LOCALAPPDATA%\cordon\logs,
 * made with a DACL of this user alone; one that is a junction or link, or is
 * owned by or open to another user, is refused (ERR_CORDON_LOG_DIR,
 * private-dir.ts's windowsPrivateDir()). Not %TEMP%: a service's can be
 * C:\Windows\Temp, where every user can make folders and junctions.
 */
export function defaultLogDir(): string {
  if (process.platform === 'win32') return windowsPrivateDir('logs', logDirUnsafe);
  return privateDir(join(tmpdir(), `cordon-logs-${process.getuid?.() ?? 0}`), () => homeFallback('logs'), logDirUnsafe);
}

/**
 * The name of an owner's log directory, one per owner id and never anything
 * but a plain name inside the log directory: letters, digits, `_`, `-` and
 * `.` stand for themselves, every other byte of the id's UTF-8 (`/`, `%`,
 * a leading or trailing `.`, a Windows device name's first letter) as `%XX`,
 * so `..`, `.` and `tenant/a` never leave or name the log directory itself,
 * and `tenant/a` and `tenant_a` get a directory each (percent-encoding is
 * undone one way only). Where the file system may fold case (macOS,
 * Windows), capital letters are encoded too: `Alice` and `alice` stay two
 * directories. An encoding longer than 80 bytes keeps its first 60
 * and adds `~` and 16 hex digits of the id's SHA-256 (`~` is encoded
 * elsewhere, so such a name is no short id's).
 */
export function ownerDirName(id: string, platform: NodeJS.Platform = process.platform): string {
  const foldsCase = platform === 'darwin' || platform === 'win32';
  const bytes = Buffer.from(id, 'utf8');
  let out = '';
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    const c = String.fromCharCode(b);
    const edge = i === 0 || i === bytes.length - 1;
    const plain = /[a-z0-9_-]/.test(c) || (!foldsCase && /[A-Z]/.test(c)) || (c === '.' && !edge);
    out += plain ? c : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  if (out === '') out = '%';  // (the empty id: no id encodes to a lone %)
  // Windows device names (CON, NUL, COM1, ...) name a device in any directory, with any extension.
  if (/^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\.|$)/i.test(out)) out = `%${out.charCodeAt(0).toString(16).toUpperCase()}${out.slice(1)}`;
  if (out.length <= 80) return out;
  return `${out.slice(0, 60)}~${createHash('sha256').update(id, 'utf8').digest('hex').slice(0, 16)}`;
}

/**
 * The directory of one owner's `log: true` files: `<base>/<name>`. `base`
 * is made if it is missing and otherwise taken as it is (a Registry's
 * `logDir` is the host's: its permissions are the host's to choose); the
 * owner's directory in it is cordon's: made 0700 and checked, on Linux and
 * macOS, to be this user's alone (not a link, no group or other bit); on
 * Windows made with a DACL of this user alone and checked to be a plain
 * directory owned by and open to no one but this user (SYSTEM and
 * Administrators aside). Refused with ERR_CORDON_LOG_DIR when it is not: a
 * directory another user made or planted there is never written into.
 */
export function ownerLogDir(base: string, name: string): string {
  const dir = join(base, name);
  mkdirSync(base, { recursive: true });
  if (process.platform === 'win32') return windowsPrivatePath(dir, logDirUnsafe);
  const problem = makePrivateDir(dir);
  if (problem !== undefined) throw logDirUnsafe(dir, problem.why);
  return dir;
}

/** A new log file's path in `dir`: `<stem>-<epoch ms>-<8 hex>.log`. */
export function newLogPath(dir: string, stem: string): string {
  return join(dir, `${stem}-${Date.now()}-${randomBytes(4).toString('hex')}.log`);
}

/**
 * Opens a log for appending, and returns its descriptor (or throws the
 * file system's error). `fresh`, a file whose name cordon chose: created
 * here, mode 0600, and never an existing file or a link (O_EXCL,
 * O_NOFOLLOW). Otherwise, a path the caller named (or an adopted tree's
 * log): appended to, and created 0600 if it is missing.
 */
export function openLog(path: string, fresh: boolean): number {
  if (!fresh) return openSync(path, 'a', 0o600);
  const noFollow = constants.O_NOFOLLOW ?? 0;
  return openSync(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_EXCL | noFollow, 0o600);
}
