// Directories of this user's alone, for what other users must not read or
// plant into: the lease directory (anchor/lease-dir.ts) and the log directory
// (log-file.ts). A directory is made 0700 where it is missing, then checked
// with lstat(): this user's own, a directory and not a symlink, no group or
// other permission bit. POSIX only (Windows: the callers' own means).
import { lstatSync, mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** Why a directory is not this user's private one; `foreign`: another user holds it (made it first, or planted a link). */
export interface NotPrivate {
  why: string;
  foreign: boolean;
}

function uid(): number {
  return process.getuid?.() ?? 0;
}

/** Makes `dir` (mode 0700, its parent must exist) unless it is there, then checks it: undefined when it is this user's private directory. */
export function makePrivateDir(dir: string): NotPrivate | undefined {
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EEXIST') return { why: `cannot be made (${code})`, foreign: false };
  }
  let st;
  try {
    st = lstatSync(dir);
  } catch (err) {
    return { why: `cannot be read (${(err as NodeJS.ErrnoException).code})`, foreign: false };
  }
  if (st.uid !== uid()) return { why: `belongs to uid ${st.uid}`, foreign: true };
  if (st.isSymbolicLink() || !st.isDirectory()) return { why: 'is not a directory', foreign: false };
  if ((st.mode & 0o077) !== 0) return { why: `has mode ${(st.mode & 0o777).toString(8)}`, foreign: false };
  return undefined;
}

/**
 * Where a private directory goes when the usual place is held by another
 * user: `<home>/.cordon/<name>`, in this user's home directory ($HOME, else
 * the account's) with `.cordon` made 0700 in it, provided that home
 * directory is this user's own (a root process whose $HOME is another
 * user's has none). undefined when there is no such place.
 */
export function homeFallback(name: string): string | undefined {
  const home = homedir();
  if (!home) return undefined;
  try {
    const st = lstatSync(home);
    if (!st.isDirectory() || st.uid !== uid()) return undefined;
  } catch {
    return undefined;
  }
  const base = join(home, '.cordon');
  if (makePrivateDir(base) !== undefined) return undefined;
  return join(base, name);
}

/**
 * `primary` made private and checked; when another user holds it (it made
 * it first, or planted something there), `fallback` instead, made and
 * checked the same way. Anything else that is wrong (this user's own
 * directory left open to others, a link of this user's) is not bypassed:
 * `refuse` builds the error, with why.
 */
export function privateDir(primary: string, fallback: () => string | undefined, refuse: (dir: string, why: string) => Error): string {
  const problem = makePrivateDir(primary);
  if (problem === undefined) return primary;
  if (!problem.foreign) throw refuse(primary, problem.why);
  const other = fallback();
  if (other === undefined) throw refuse(primary, `${problem.why}, and there is no private fallback (this user's home directory is not its own, or cannot hold .cordon)`);
  const again = makePrivateDir(other);
  if (again !== undefined) throw refuse(primary, `${problem.why}, and the fallback ${other} ${again.why}`);
  return other;
}
