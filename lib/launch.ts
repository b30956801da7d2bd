// Launch planning: everything decided from the options before anything runs
// (the anchor's arguments, the command's argv, environment, working directory
// and stdio, where the output goes on the host's side). Pure: what it needs
// from the host (the resolved executable, the tier, the anchor's path, whether
// a log is open, CORDON_TRACE) is passed in, so a plan can be checked without
// starting anything.
import type { AnchorSpawn } from './anchor.js';
import { invalidArg } from './errors.js';
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
    ...(opts.containment === 'best-effort' ? ['--best-effort'] : []),
    // The default tier (not one the caller or CORDON_TIER asked for): a
    // cgroup that was writable when the host probed it and cannot be made
    // or entered now (permissions, cgroup.max.descendants) falls back to
    // the subreaper tier, reported in proc.tier and result.tier. A tier
    // asked for stays strict.
    ...(opts.tier === undefined && tier === 'cgroup' ? ['--fallback'] : []),
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
