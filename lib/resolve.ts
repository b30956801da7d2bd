// Find the executable the way execvp would, so ENOENT and EACCES are typed
// errors before anything runs (the anchor still reports a late exec failure).
import { accessSync, constants as fsConstants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';
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
