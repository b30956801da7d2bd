// The kernel's E2BIG, checked on the host before an anchor is started: what
// one exec can carry (the anchor's exec carries the command's arguments and
// environment, so its limits are the command's). Pure.
import { argsTooLarge, type CordonError } from '../errors.js';

/** What one exec can carry on this host (Linux: the addon's probe; absent elsewhere). */
export interface ExecLimits {
  pageSize?: number | undefined;
  argMax?: number | undefined;
}

/** An environment as one exec carries it: what execSizeError() needs of it. */
export interface EnvSize {
  /** How many strings. */
  count: number;
  /** Their bytes, each with its NUL. */
  bytes: number;
  /** The longest one's bytes, with its NUL. */
  longestBytes: number;
  /** The longest one's name with its '=' (its first 20 characters where it has no name). */
  longestHead: string;
}

/** The size of an environment given as "NAME=value" strings. */
export function envSize(env: readonly string[]): EnvSize {
  const size: EnvSize = { count: env.length, bytes: 0, longestBytes: 0, longestHead: '' };
  let longest = '';
  // (Indexed: an iterator's results are garbage the host's young generation must hold.)
  for (let i = 0; i < env.length; i++) {
    const s = env[i]!;
    const n = Buffer.byteLength(s) + 1;
    size.bytes += n;
    if (n > size.longestBytes) {
      size.longestBytes = n;
      longest = s;
    }
  }
  const eq = longest.indexOf('=');
  size.longestHead = eq > 0 ? longest.slice(0, eq + 1) : longest.slice(0, 20);
  return size;
}

/** The name a message gives the variable whose head is `head` (envSize's longestHead). */
function variableName(head: string): string {
  const eq = head.indexOf('=');
  return eq > 0 && eq === head.length - 1 ? head.slice(0, eq) : JSON.stringify(head.slice(0, 20));
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
export function execSizeError(file: string, argv: readonly string[], env: EnvSize, limits: ExecLimits): CordonError | undefined {
  const { pageSize, argMax } = limits;
  const bytes = (s: string) => Buffer.byteLength(s) + 1; // with its NUL
  if (pageSize !== undefined && pageSize > 0) {
    const max = 32 * pageSize;
    const over = (what: string, n: number) => argsTooLarge(`${what} is ${n - 1} bytes; one string must stay under ${max} (32 pages of ${pageSize} bytes)`);
    if (env.longestBytes > max) return over(`the environment variable ${variableName(env.longestHead)}`, env.longestBytes);
    const dashes = argv.indexOf('--');
    for (let i = 0; i < argv.length; i++) {
      const s = argv[i]!;
      if (bytes(s) <= max) continue;
      const k = dashes < 0 ? 0 : i - dashes;
      return over(k <= 0 ? "an argument of the anchor's (the working directory or a path)" : k === 1 ? "the command's path" : k === 2 ? 'argv0' : `argument ${k - 2}`, bytes(s));
    }
  }
  if (argMax !== undefined && argMax > 0) {
    const pointer = process.arch === 'arm' || process.arch === 'ia32' ? 4 : 8;
    let total = bytes(file) + pointer * (Math.max(argv.length, 1) + env.count) + env.bytes;
    for (let i = 0; i < argv.length; i++) total += bytes(argv[i]!);
    if (total > argMax) {
      return argsTooLarge(`the arguments and environment take ${total} bytes, over the ${argMax} one exec can carry here (ARG_MAX)`);
    }
  }
  return undefined;
}
