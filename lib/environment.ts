// The command's environment (as execa): `env` extends the host's own
// environment unless `extendEnv: false`, and `preferLocal` puts the
// `node_modules/.bin` of a directory and of each of its parents first on PATH.
// Pure apart from reading which of those directories exist.
import { statSync } from 'node:fs';
import { delimiter, dirname, join, resolve as resolvePath } from 'node:path';

/** The key a variable is spelled under in `env` (Windows names are case-insensitive: `Path` is PATH). */
function keyOf(env: NodeJS.ProcessEnv, name: string): string | undefined {
  if (process.platform !== 'win32') return Object.hasOwn(env, name) ? name : undefined;
  const upper = name.toUpperCase();
  return Object.keys(env).find((k) => k.toUpperCase() === upper);
}

/**
 * The environment the command gets: the host's (`base`) with the caller's
 * `env` laid over it, or the caller's alone when `extend` is false. A
 * variable the caller sets to `undefined` is left out (unset).
 */
export function commandEnv(base: NodeJS.ProcessEnv, env: NodeJS.ProcessEnv | undefined, extend: boolean): NodeJS.ProcessEnv {
  if (env === undefined) return extend ? base : {};
  if (!extend) return env;
  if (process.platform !== 'win32') {
    // The same variables in the same order as the loop below gives them (the
    // host's not set by the caller, then the caller's in its order), without
    // its deletes, which turn the copy into a dictionary (about 15 kB
    // allocated a spawn with 36 variables, instead of about 3).
    const out: NodeJS.ProcessEnv = {};
    const hostKeys = Object.keys(base);
    for (let i = 0; i < hostKeys.length; i++) {
      const key = hostKeys[i]!;
      if (!Object.hasOwn(env, key)) out[key] = base[key];
    }
    const keys = Object.keys(env);
    for (let i = 0; i < keys.length; i++) {
      const value = env[keys[i]!];
      if (value !== undefined) out[keys[i]!] = value;
    }
    return out;
  }
  const out: NodeJS.ProcessEnv = { ...base };
  for (const [key, value] of Object.entries(env)) {
    // Windows: the caller's PATH replaces the host's Path, not a second entry beside it.
    const existing = keyOf(out, key);
    if (existing !== undefined) delete out[existing];
    if (value !== undefined) out[key] = value;
  }
  return out;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** `<dir>/node_modules/.bin` for `from` and each of its parents, nearest first, where it exists. */
export function localBins(from: string): string[] {
  const bins: string[] = [];
  for (let dir = resolvePath(from); ; dir = dirname(dir)) {
    const bin = join(dir, 'node_modules', '.bin');
    if (isDirectory(bin)) bins.push(bin);
    if (dirname(dir) === dir) break;
  }
  return bins;
}

/** `env` with `dirs` first on its PATH (under the key it already uses; a copy). */
export function prependPath(env: NodeJS.ProcessEnv, dirs: string[]): NodeJS.ProcessEnv {
  if (dirs.length === 0) return env;
  const key = keyOf(env, 'PATH') ?? 'PATH';
  const current = env[key];
  return { ...env, [key]: [...dirs, ...(current ? [current] : [])].join(delimiter) };
}
