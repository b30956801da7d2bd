// Where logs go and how cordon opens them. Command output holds tokens and
// secrets: a log cordon names is made private to this user, in a directory
// of this user's alone (lib/private-dir.ts), never in one another user made
// or planted, and is opened without following links and without clobbering
// an existing file. A path the caller names (the `log` option, a Registry's
// `logDir`) is the caller's choice, and its permissions the caller's.
import { randomBytes } from 'node:crypto';
import { constants, mkdirSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { logDirUnsafe } from './errors.js';
import { homeFallback, makePrivateDir, privateDir } from './private-dir.js';

/**
 * This user's log directory, where a leased tree's log goes when none was
 * asked for and a Registry without `logDir` puts `log: true` files (one
 * directory per owner in it). Linux and macOS: <tmpdir>/cordon-logs-<uid>,
 * made 0700; where another user holds that place, <home>/.cordon/logs
 * (lib/private-dir.ts); this user's own directory there left open to others
 * is refused (ERR_CORDON_LOG_DIR). Windows: <tmpdir>\cordon-logs (the
 * temporary directory is the user's own there).
 */
export function defaultLogDir(): string {
  if (process.platform === 'win32') {
    const dir = join(tmpdir(), 'cordon-logs');
    mkdirSync(dir, { recursive: true });
    return dir;
  }
  return privateDir(join(tmpdir(), `cordon-logs-${process.getuid?.() ?? 0}`), () => homeFallback('logs'), logDirUnsafe);
}

/**
 * The directory of one owner's `log: true` files: `<base>/<name>`. `base`
 * is made if it is missing and otherwise taken as it is (a Registry's
 * `logDir` is the host's: its permissions are the host's to choose); the
 * owner's directory in it is cordon's: made 0700 and checked, on Linux and
 * macOS, to be this user's alone (not a link, no group or other bit), and
 * refused with ERR_CORDON_LOG_DIR when it is not: a directory another user
 * made or planted there is never written into.
 */
export function ownerLogDir(base: string, name: string): string {
  const dir = join(base, name);
  mkdirSync(base, { recursive: true });
  if (process.platform === 'win32') {
    mkdirSync(dir, { recursive: true });
    return dir;
  }
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
