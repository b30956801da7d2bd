// The kernel's E2BIG, checked on the host before an anchor is started: what
// one exec can carry (the anchor's exec carries the command's arguments and
// environment, so its limits are the command's). Pure.
import { argsTooLarge, type CordonError } from '../errors.js';

/** What one exec can carry on this host (Linux: the addon's probe; absent elsewhere). */
export interface ExecLimits {
  pageSize?: number | undefined;
  argMax?: number | undefined;
}

/**
 * The kernel's E2BIG, checked before anything runs (Linux, fs/exec.c): an
 * exec copies the file name, every environment string and every argument,
 * each with its NUL, and refuses one of MAX_ARG_STRLEN (32 pages) or more
 * bytes, and a total (the strings plus one pointer for each) over its limit,
 * which is never more than sysconf(_SC_ARG_MAX). So this refuses only what
 * the exec would refuse; what it cannot see (a kernel limit below
 * sysconf's) still comes back as the exec's own E2BIG. `argv` is the
 * anchor's: its options, `--`, the command's path, argv0 and arguments.
 */
export function execSizeError(file: string, argv: readonly string[], env: readonly string[], limits: ExecLimits): CordonError | undefined {
  const { pageSize, argMax } = limits;
  const bytes = (s: string) => Buffer.byteLength(s) + 1; // with its NUL
  if (pageSize !== undefined && pageSize > 0) {
    const max = 32 * pageSize;
    const over = (what: string, s: string) =>
      argsTooLarge(`${what} is ${bytes(s) - 1} bytes; one string must stay under ${max} (32 pages of ${pageSize} bytes)`);
    // (Indexed loops: a spawn runs these over every variable, and an
    // iterator's results are garbage the host's young generation must hold.)
    for (let i = 0; i < env.length; i++) {
      const s = env[i]!;
      if (bytes(s) > max) return over(`the environment variable ${s.slice(0, Math.max(0, s.indexOf('='))) || JSON.stringify(s.slice(0, 20))}`, s);
    }
    const dashes = argv.indexOf('--');
    for (let i = 0; i < argv.length; i++) {
      const s = argv[i]!;
      if (bytes(s) <= max) continue;
      const k = dashes < 0 ? 0 : i - dashes;
      return over(k <= 0 ? "an argument of the anchor's (the working directory or a path)" : k === 1 ? "the command's path" : k === 2 ? 'argv0' : `argument ${k - 2}`, s);
    }
  }
  if (argMax !== undefined && argMax > 0) {
    const pointer = process.arch === 'arm' || process.arch === 'ia32' ? 4 : 8;
    let total = bytes(file) + pointer * (Math.max(argv.length, 1) + env.length);
    for (let i = 0; i < env.length; i++) total += bytes(env[i]!);
    for (let i = 0; i < argv.length; i++) total += bytes(argv[i]!);
    if (total > argMax) {
      return argsTooLarge(`the arguments and environment take ${total} bytes, over the ${argMax} one exec can carry here (ARG_MAX)`);
    }
  }
  return undefined;
}
