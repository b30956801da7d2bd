// Find the executable the way execvp would (on Windows: the current directory,
// then PATH, trying PATHEXT's extensions, as cross-spawn and `where` do), so
// ENOENT and EACCES are typed errors before anything runs (the anchor still
// reports a late exec failure). A .cmd/.bat found here is run by the Windows
// anchor through `cmd.exe /d /s /c` with cross-spawn's escaping.
import { accessSync, constants as fsConstants, statSync } from 'node:fs';
import { delimiter, extname, isAbsolute, join, resolve, win32 } from 'node:path';
import { CordonError } from './errors.js';

const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';

function check(path: string): 'ok' | 'ENOENT' | 'EACCES' {
  let st;
  try {
    st = statSync(path);
  } catch {
    return 'ENOENT';
  }
  if (!st.isFile()) return 'EACCES';
  try {
    accessSync(path, fsConstants.X_OK);
    return 'ok';
  } catch {
    return 'EACCES';
  }
}

/** The value of an environment variable, by case-insensitive name as Windows reads it. */
function winEnv(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const upper = name.toUpperCase();
  for (const [key, value] of Object.entries(env)) {
    if (key.toUpperCase() === upper && value !== undefined) return value;
  }
  return undefined;
}

function resolveWindows(command: string, cwd: string, env: NodeJS.ProcessEnv, fail: (code: 'ENOENT' | 'EACCES', path: string) => CordonError): string {
  const pathext = (winEnv(env, 'PATHEXT') ?? winEnv(process.env, 'PATHEXT') ?? '.COM;.EXE;.BAT;.CMD')
    .split(';')
    .filter((e) => e.startsWith('.'));
  // A name with an extension is tried as given first; then with each PATHEXT extension.
  const candidates = (base: string) => [...(extname(base) ? [base] : []), ...pathext.map((e) => base + e.toLowerCase())];
  const hasDir = command.includes('/') || command.includes('\\') || win32.isAbsolute(command);
  const dirs = hasDir ? [''] : [cwd, ...(winEnv(env, 'PATH') ?? winEnv(process.env, 'PATH') ?? '').split(delimiter).filter(Boolean)];
  let denied: string | undefined;
  for (const dir of dirs) {
    const base = hasDir ? win32.resolve(cwd, command) : win32.resolve(cwd, dir.replace(/^"(.*)"$/, '$1'), command);
    for (const path of candidates(base)) {
      const r = check(path);
      if (r === 'ok') return path;
      if (r === 'EACCES' && denied === undefined) denied = path;
    }
  }
  if (denied !== undefined) throw fail('EACCES', denied);
  throw fail('ENOENT', hasDir ? win32.resolve(cwd, command) : command);
}

export function resolveCommand(command: string, cwd: string, env: NodeJS.ProcessEnv): string {
  const fail = (code: 'ENOENT' | 'EACCES', path: string) => {
    const what =
      code === 'ENOENT'
        ? `Command not found: ${command}. Check the name, or pass an absolute path or a PATH in env.`
        : `Command is not executable: ${path}. Check its permissions (chmod +x) or that it is a file, not a directory.`;
    return new CordonError(what, {
      code,
      errno: code === 'ENOENT' ? -2 : -13,
      syscall: `spawn ${command}`,
      path,
      stage: 'launch',
    });
  };
  if (process.platform === 'win32') return resolveWindows(command, cwd, env, fail);
  if (command.includes('/')) {
    const path = isAbsolute(command) ? command : resolve(cwd, command);
    const r = check(path);
    if (r !== 'ok') throw fail(r, path);
    return path;
  }
  const searchPath = env.PATH ?? env.Path ?? process.env.PATH ?? DEFAULT_PATH;
  let denied: string | undefined;
  for (const dir of searchPath.split(delimiter)) {
    const base = dir === '' ? cwd : resolve(cwd, dir);
    const path = join(base, command);
    const r = check(path);
    if (r === 'ok') return path;
    if (r === 'EACCES' && denied === undefined) denied = path;
  }
  if (denied !== undefined) throw fail('EACCES', denied);
  throw fail('ENOENT', command);
}
