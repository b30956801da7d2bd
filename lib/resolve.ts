// Find the executable the way execvp would (on Windows: PATH only, never the
// current directory, trying the PATHEXT extensions CreateProcessW runs), so ENOENT and EACCES are
// typed errors before anything runs (the anchor still reports a late exec
// failure). A .cmd/.bat found here is run by the Windows anchor through
// `cmd.exe /d /e:ON /v:OFF /s /c` with the arguments checkBatchArgs allows.
import { accessSync, constants as fsConstants, lstatSync, statSync, type Stats } from 'node:fs';
import { delimiter, extname, isAbsolute, join, resolve, win32 } from 'node:path';
import { badCommandName, commandLookupFailed, foundOnlyInCwd, unsafeBatchArg, type CordonError } from './errors.js';

const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';
/** An absolute POSIX directory that path.resolve and path.join leave as it is: no '.' or '..' segment, no '//', no trailing '/'. */
const PLAIN_DIR = /^(?:\/(?!\.\.?(?:\/|$))[^/]+)+$/;

function check(path: string): 'ok' | 'ENOENT' | 'EACCES' {
  let st;
  try {
    // (A missing file is no exception: a PATH search misses in most of its directories.)
    st = statSync(path, { throwIfNoEntry: false });
  } catch {
    return 'ENOENT';
  }
  if (st === undefined) return 'ENOENT';
  if (!st.isFile()) return 'EACCES';
  try {
    accessSync(path, fsConstants.X_OK);
    return 'ok';
  } catch {
    return 'EACCES';
  }
}

/** What the Windows lookup reads of a candidate file (node:fs; replaced in unit tests). */
export interface WindowsFileOps {
  statSync(path: string): Pick<Stats, 'isFile'>;
  lstatSync(path: string): Pick<Stats, 'isFile' | 'isSymbolicLink'>;
}

/**
 * A candidate on Windows: 'ok' for a file (Windows has no execute bit: any
 * file may be tried), 'EACCES' for a directory, 'ENOENT' when nothing is
 * there. An App Execution Alias (the zero-byte `winget.exe`, `wt.exe`,
 * `python.exe` in `%LOCALAPPDATA%\Microsoft\WindowsApps`) is a reparse point
 * only CreateProcessW follows: stat() cannot open it (EACCES, or UNKNOWN in
 * older Node) while lstat() reads it (a link, or a file). Such a name is 'ok',
 * as child_process runs it; a dangling link (stat() ENOENT) stays 'ENOENT'.
 */
export function checkWindowsFile(path: string, fs: WindowsFileOps = { statSync, lstatSync }): 'ok' | 'ENOENT' | 'EACCES' {
  try {
    return fs.statSync(path).isFile() ? 'ok' : 'EACCES';
  } catch (err) {
    const code = (err as NodeJS.ErrnoException | undefined)?.code;
    if (code !== 'EACCES' && code !== 'EPERM' && code !== 'UNKNOWN') return 'ENOENT';
    try {
      const l = fs.lstatSync(path);
      return l.isSymbolicLink() || l.isFile() ? 'ok' : 'ENOENT';
    } catch {
      return 'ENOENT';
    }
  }
}

/**
 * The extensions a bare Windows command name is tried with, in PATHEXT's
 * order: only those CreateProcessW runs (.COM, .EXE, and .BAT/.CMD, which the
 * anchor runs through cmd.exe). `.PY`, `.JS`, `.PS1` and the like are left
 * out, so a `foo.py` earlier in PATH never shadows a `foo.exe`. When PATHEXT
 * names none of the four (or is unset): `.COM;.EXE;.BAT;.CMD`.
 */
export function windowsExtensions(pathext: string | undefined): string[] {
  const runnable = new Set(['.COM', '.EXE', '.BAT', '.CMD']);
  const seen = new Set<string>();
  const exts = (pathext ?? '')
    .split(';')
    .map((e) => e.trim().toUpperCase())
    .filter((e) => runnable.has(e) && !seen.has(e) && seen.add(e));
  return (exts.length > 0 ? exts : ['.COM', '.EXE', '.BAT', '.CMD']).map((e) => e.toLowerCase());
}

/** The value of an environment variable, by case-insensitive name as Windows reads it. */
function winEnv(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const upper = name.toUpperCase();
  for (const [key, value] of Object.entries(env)) {
    if (key.toUpperCase() === upper && value !== undefined) return value;
  }
  return undefined;
}

/** A directory PATH may name: fully qualified (`C:\x`, `\\server\share`), never relative to the cwd. */
function fullyQualified(dir: string): boolean {
  return /^[a-zA-Z]:[\\/]/.test(dir) || /^[\\/]{2}[^\\/]/.test(dir);
}

/**
 * The command's name as Win32 reads it: the last name loses its trailing dots
 * and spaces and a `::$DATA` stream suffix (`foo.bat.`, `foo.bat ` and
 * `foo.bat::$DATA` are the file `foo.bat`, and CreateProcessW runs them as a
 * batch file). Normalised before the lookup and the batch-file check, so the
 * check sees what Windows will run. `\\?\` paths, which Win32 does not
 * normalise, and other streams are refused.
 */
export function windowsCommandName(command: string): string {
  const sep = Math.max(command.lastIndexOf('\\'), command.lastIndexOf('/'));
  const dir = command.slice(0, sep + 1);
  let name = command.slice(sep + 1);
  if (/^[\\/]{2}[?.][\\/]/.test(command)) {
    if (/[. ]$/.test(name) || name.includes(':')) throw badCommandName(command);
    return command;
  }
  // A drive prefix (`C:tool`) is part of the directory, not a stream.
  const drive = sep < 0 && /^[a-zA-Z]:/.test(name) ? name.slice(0, 2) : '';
  name = name.slice(drive.length);
  if (/^\.+$/.test(name)) return command;
  for (let prev = ''; prev !== name; ) {
    prev = name;
    name = name.replace(/::\$DATA$/i, '').replace(/[. ]+$/, '');
  }
  if (name === '' || name.includes(':')) throw badCommandName(command);
  return dir + drive + name;
}

/**
 * The Windows lookup (resolveCommand on win32), with the file check `check`
 * (checkWindowsFile; replaced in unit tests, which run on any platform).
 */
export function resolveWindows(
  command: string,
  cwd: string,
  env: NodeJS.ProcessEnv,
  fail: (code: 'ENOENT' | 'EACCES', path: string) => CordonError,
  check: (path: string) => 'ok' | 'ENOENT' | 'EACCES' = checkWindowsFile,
): string {
  const given = command;
  command = windowsCommandName(command);
  const pathext = windowsExtensions(winEnv(env, 'PATHEXT') ?? winEnv(process.env, 'PATHEXT'));
  // A name with an extension is tried as given first; then with each extension.
  const candidates = (base: string) => [...(extname(base) ? [base] : []), ...pathext.map((e) => base + e)];
  // A path (`.\tool`, `bin\tool`, `C:\x\tool`, `C:tool`) is taken relative to
  // cwd; a bare name is looked up in PATH only (as Go's exec.LookPath since
  // ErrDot): never in cwd, and never through a relative or empty PATH entry.
  const hasDir = command.includes('/') || command.includes('\\') || /^[a-zA-Z]:/.test(command);
  const dirs = hasDir
    ? ['']
    : (winEnv(env, 'PATH') ?? winEnv(process.env, 'PATH') ?? '')
        .split(win32.delimiter)
        .map((d) => d.replace(/^"(.*)"$/, '$1'))
        .filter(fullyQualified);
  let denied: string | undefined;
  for (const dir of dirs) {
    const base = hasDir ? win32.resolve(cwd, command) : win32.join(dir, command);
    for (const path of candidates(base)) {
      const r = check(path);
      if (r === 'ok') return path;
      if (r === 'EACCES' && denied === undefined) denied = path;
    }
  }
  if (denied !== undefined) throw fail('EACCES', denied);
  if (!hasDir) {
    const here = candidates(win32.resolve(cwd, command)).find((p) => check(p) === 'ok');
    if (here !== undefined) {
      throw foundOnlyInCwd(given, here, command);
    }
  }
  throw fail('ENOENT', hasDir ? win32.resolve(cwd, command) : given);
}

const BATCH = /\.(bat|cmd)$/i;
/** Arguments that reach a batch file unquoted: nothing cmd.exe reads specially. */
const BATCH_BARE = /^[A-Za-z0-9#$*+\-./:?@\\_]+$/;
/** Characters no batch argument may hold (see docs/windows.md, "what a .cmd may receive"). */
const BATCH_REFUSED = /["%!\r\n\0]/;

/**
 * Windows: a .bat/.cmd runs through cmd.exe, which re-parses its arguments
 * (and the batch file's own `%*`, `call` and `for` parse them again). Each
 * argument is passed bare or in double quotes (native/win/anchor.cc,
 * batch_command_line); what quoting cannot keep literal under every re-parse
 * is refused here, before anything runs.
 */
export function checkBatchArgs(path: string, args: readonly string[]): void {
  if (process.platform !== 'win32' || !BATCH.test(path)) return;
  const refuse = (what: string, why: string) => unsafeBatchArg(path, what, why);
  if (/[%"]/.test(path)) throw refuse('Its path', 'it contains % (cmd.exe expands it on its command line)');
  args.forEach((arg, i) => {
    const m = BATCH_REFUSED.exec(arg);
    if (m) {
      const name = { '\r': 'CR', '\n': 'LF', '\0': 'NUL' }[m[0]] ?? m[0];
      throw refuse(`Argument ${i + 1} (${JSON.stringify(arg)})`, `it contains ${name}`);
    }
    if (!BATCH_BARE.test(arg) && arg.endsWith('\\')) {
      throw refuse(`Argument ${i + 1} (${JSON.stringify(arg)})`, 'it needs quotes and ends with a backslash');
    }
  });
}

export function resolveCommand(command: string, cwd: string, env: NodeJS.ProcessEnv): string {
  const fail = (code: 'ENOENT' | 'EACCES', path: string) => commandLookupFailed(code, command, path);
  if (process.platform === 'win32') return resolveWindows(command, cwd, env, fail);
  if (command.includes('/')) {
    const path = isAbsolute(command) ? command : resolve(cwd, command);
    const r = check(path);
    if (r !== 'ok') throw fail(r, path);
    return path;
  }
  const searchPath = env.PATH ?? env.Path ?? process.env.PATH ?? DEFAULT_PATH;
  let denied: string | undefined;
  // A plain absolute directory (no '.' or '..' segment, no doubled or
  // trailing slash) is its own resolve() and join(): the PATH search makes
  // no normalized copies of it (two paths a directory, about 10 kB a spawn).
  const plain = command !== '.' && command !== '..';
  for (const dir of searchPath.split(delimiter)) {
    const path = plain && PLAIN_DIR.test(dir) ? `${dir}/${command}` : join(dir === '' ? cwd : resolve(cwd, dir), command);
    const r = check(path);
    if (r === 'ok') return path;
    if (r === 'EACCES' && denied === undefined) denied = path;
  }
  if (denied !== undefined) throw fail('EACCES', denied);
  throw fail('ENOENT', command);
}
