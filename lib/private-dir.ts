// Directories of this user's alone, for what other users must not read or
// plant into: the lease directory (anchor/lease-dir.ts) and the log directory
// (log-file.ts). A directory is made 0700 where it is missing, then checked
// with lstat(): this user's own, a directory and not a symlink, no group or
// other permission bit. Windows: made with a DACL of this user alone, then
// checked from its own security descriptor (windowsPrivatePath()).
import { lstatSync, mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { windowsBinding } from './native.js';

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

/** A Windows directory's own security, as the addon reads it (privateDirFacts; its last component never followed). */
export interface WindowsDirFacts {
  directory: boolean;
  /** A junction, a symbolic link or another reparse point. */
  reparse: boolean;
  /** "self" (this process's user), "system", "administrators", "creator-owner", or a SID (S-1-...). */
  owner: string;
  /** Each ACE of the DACL (a deny ACE: allow false); null: no DACL, everyone may do anything. */
  dacl: { allow: boolean; sid: string }[] | null;
}

/** Who may own a private directory: this user; SYSTEM and Administrators, who can take any file on the machine anyway (an elevated administrator's new files are owned by Administrators). */
const TRUSTED_OWNERS = new Set(['self', 'system', 'administrators']);
/** Who may be granted anything in its DACL: the same, and CREATOR OWNER (what is made inside is its maker's: only those above can make anything there). */
const TRUSTED_GRANTEES = new Set([...TRUSTED_OWNERS, 'creator-owner']);

/**
 * Why a Windows directory is not this user's private one, from what the
 * addon read of it; undefined when it is: a plain directory (no junction or
 * other reparse point), owned by this user (or SYSTEM or Administrators), with
 * a DACL whose every allowing ACE (inherit-only ones too: they pass to what
 * is made inside) is for this user, SYSTEM, Administrators or CREATOR OWNER.
 * Deny ACEs grant nothing and are not counted.
 */
export function windowsDirProblem(facts: WindowsDirFacts): string | undefined {
  if (facts.reparse) return 'is a junction, a link or another reparse point, not a plain directory';
  if (!facts.directory) return 'is not a directory';
  if (!TRUSTED_OWNERS.has(facts.owner)) return `is owned by ${facts.owner}, not by this user`;
  if (facts.dacl === null) return 'has no DACL (everyone may use it)';
  const others = [...new Set(facts.dacl.filter((ace) => ace.allow && !TRUSTED_GRANTEES.has(ace.sid)).map((ace) => ace.sid))];
  if (others.length > 0) return `has a DACL that admits ${others.join(', ')} besides this user`;
  return undefined;
}

/**
 * Windows: `dir` (its parent must exist) made with a DACL that admits this
 * user alone (the addon's makePrivateDir: one ACE, protected, inherited by
 * what is made inside) unless it is there, then checked from its own
 * security descriptor (windowsDirProblem()): one that another user made or
 * planted (a junction, a folder of theirs, a DACL open to them) is refused,
 * never used or repaired: `refuse` builds the error, with why.
 */
export function windowsPrivatePath(dir: string, refuse: (dir: string, why: string) => Error): string {
  const b = windowsBinding();
  try {
    b.makePrivateDir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw refuse(dir, `cannot be made (${(err as NodeJS.ErrnoException).code})`);
  }
  let facts: WindowsDirFacts;
  try {
    facts = b.privateDirFacts(dir);
  } catch (err) {
    throw refuse(dir, `cannot be read (${(err as NodeJS.ErrnoException).code})`);
  }
  const why = windowsDirProblem(facts);
  if (why !== undefined) throw refuse(dir, why);
  return dir;
}

/**
 * Windows: %LOCALAPPDATA%\cordon\<name> (<home>\AppData\Local without
 * LOCALAPPDATA), through windowsPrivatePath(); %LOCALAPPDATA%\cordon is made
 * if missing and must not be a junction or link itself. (The user's profile,
 * LocalSystem's too, is not a place other users can write to; %TEMP% can be
 * C:\Windows\Temp, which is.)
 */
export function windowsPrivateDir(name: string, refuse: (dir: string, why: string) => Error): string {
  const base = join(process.env.LOCALAPPDATA || join(homedir(), 'AppData', 'Local'), 'cordon');
  mkdirSync(base, { recursive: true });
  let facts: WindowsDirFacts;
  try {
    facts = windowsBinding().privateDirFacts(base);
  } catch (err) {
    throw refuse(base, `cannot be read (${(err as NodeJS.ErrnoException).code})`);
  }
  if (facts.reparse || !facts.directory) throw refuse(base, windowsDirProblem(facts)!);
  return windowsPrivatePath(join(base, name), refuse);
}
