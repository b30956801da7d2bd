// Launch planning: everything decided from the options before anything runs
// (the anchor's arguments, the command's argv, environment, working directory
// and stdio, where the output goes on the host's side). Pure: what it needs
// from the host (the resolved executable, the tier, the anchor's path, whether
// a log is open, CORDON_TRACE) is passed in, so a plan can be checked without
// starting anything.
import type { AnchorSpawn } from './anchor.js';
import { argsTooLarge, invalidArg, type CordonError } from './errors.js';
import { anchorLimitArgs, hasLimits, type Limits } from './limits.js';
import { signalNumber } from './signals.js';
import type { NormalizedOptions, StdioOption, Tier } from './options.js';

export interface LaunchInput {
  /** The command as given (argv[0] unless `argv0` is set). */
  command: string;
  args: readonly string[];
  /** The executable the command resolved to (resolve.ts). */
  path: string;
  opts: NormalizedOptions;
  /** The tier to ask the anchor for: the one asked for, or this host's default. */
  tier: Tier;
  /** The anchor executable. */
  anchor: string;
  /** A log file is open: stdout and stderr are piped to the host, which copies them to it. */
  log: boolean;
  /** CORDON_TRACE: the anchor's trace destination, if any. */
  trace: string | undefined;
  /** The limits to ask the anchor for (none where best-effort runs without them). */
  limits: Limits | undefined;
}

export interface LaunchPlan {
  /** How the anchor is started: it establishes containment, then starts the command. */
  anchor: AnchorSpawn;
  /** The tier asked for (the anchor's READY may name another: a fallback). */
  tier: Tier;
  /**
   * Where the command's stdout and stderr go as the caller asked. With a log,
   * the anchor gets pipes (see `anchor.stdio`) and the host copies each to the
   * log and to this target.
   */
  outputs: { stdout: StdioOption; stderr: StdioOption };
  /** The host copies stdout and stderr to the log file. */
  teeToLog: boolean;
}

/** With a log, stdout and stderr must be something the host can copy from a pipe. */
export function checkLogStdio(opts: NormalizedOptions): void {
  if (opts.log === undefined) return;
  for (const [i, name] of [[1, 'stdout'], [2, 'stderr']] as const) {
    const s = opts.stdio[i];
    if (s !== 'pipe' && s !== 'inherit' && s !== 'ignore') {
      throw invalidArg(`stdio[${i}]`, s, `'pipe', 'inherit' or 'ignore' when log is set (the ${name} is copied to the log)`);
    }
  }
}

export function planLaunch(input: LaunchInput): LaunchPlan {
  const { opts, tier } = input;
  // What the anchor (and so the command) gets on fds 0-2.
  const stdio: StdioOption[] = opts.stdio.map((s, i) => (i > 0 && input.log ? 'pipe' : s));
  const watch: string[] = [];
  if (stdio[1] === 'pipe') watch.push('--watch-fd', '1');
  if (stdio[2] === 'pipe') watch.push('--watch-fd', '2');
  const args = [
    '--tier', tier,
    '--grace', String(opts.grace),
    // killSignal (issue #16): the anchor's polite signal, when not its own SIGTERM.
    ...(opts.killSignal !== 'SIGTERM' ? ['--polite-signal', String(signalNumber(opts.killSignal))] : []),
    // uid/gid (issue #16): the command's, never the anchor's.
    ...(opts.uid !== undefined ? ['--uid', String(opts.uid)] : []),
    ...(opts.gid !== undefined ? ['--gid', String(opts.gid)] : []),
    // shell: cmd.exe (issue #16): the Windows anchor runs the line verbatim through the system's cmd.exe.
    ...(opts.shell?.kind === 'cmd' ? ['--cmd-shell'] : []),
    ...watch,
    ...anchorLimitArgs(input.limits),
    ...(opts.containment === 'best-effort' ? ['--best-effort'] : []),
    // The default tier (not one the caller or CORDON_TIER asked for): a
    // cgroup that was writable when the host probed it and cannot be made
    // or entered now (permissions, cgroup.max.descendants) falls back to
    // the subreaper tier, reported in proc.tier and result.tier. A tier
    // asked for stays strict, and so does a strict spawn with limits (the
    // subreaper tier has none).
    ...(opts.tier === undefined && tier === 'cgroup' && !hasLimits(input.limits) ? ['--fallback'] : []),
    ...(input.trace ? ['--trace', input.trace] : []),
    '--',
    input.path,
    opts.argv0 ?? input.command,
    ...input.args,
  ];
  return {
    anchor: { path: input.anchor, args, cwd: opts.cwd, env: opts.env, stdio, exitGrace: opts.grace },
    tier,
    outputs: { stdout: opts.stdio[1], stderr: opts.stdio[2] },
    teeToLog: input.log,
  };
}

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
    for (const s of env) {
      if (bytes(s) > max) return over(`the environment variable ${s.slice(0, Math.max(0, s.indexOf('='))) || JSON.stringify(s.slice(0, 20))}`, s);
    }
    const dashes = argv.indexOf('--');
    for (const [i, s] of argv.entries()) {
      if (bytes(s) <= max) continue;
      const k = dashes < 0 ? 0 : i - dashes;
      return over(k <= 0 ? "an argument of the anchor's (the working directory or a path)" : k === 1 ? "the command's path" : k === 2 ? 'argv0' : `argument ${k - 2}`, s);
    }
  }
  if (argMax !== undefined && argMax > 0) {
    const pointer = process.arch === 'arm' || process.arch === 'ia32' ? 4 : 8;
    let total = bytes(file) + pointer * (Math.max(argv.length, 1) + env.length);
    for (const s of env) total += bytes(s);
    for (const s of argv) total += bytes(s);
    if (total > argMax) {
      return argsTooLarge(`the arguments and environment take ${total} bytes, over the ${argMax} one exec can carry here (ARG_MAX)`);
    }
  }
  return undefined;
}
