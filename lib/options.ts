// Validation and defaults: bad input is a typed error before anything runs.
import { fstatSync, statSync } from 'node:fs';
import { isAbsolute, resolve as resolvePath } from 'node:path';
import { Stream } from 'node:stream';
import { fileURLToPath } from 'node:url';
import * as defaults from './defaults.js';
import { duration, type Duration } from './duration.js';
import { commandEnv, localBins, prependPath } from './environment.js';
import { shellOption, type ShellSpec } from './shell.js';
import { killSignalOption, stopOption } from './stopping.js';
import { isOwned, streamFd } from './streams.js';
import { credentialOption } from './credentials.js';
import { cwdNotDirectory, cwdUnusable, errnoName, hostCwdUnreadable, invalidArg, newSessionProcessGroup, nulByte, ownedStream, stdioFdNotOpen, terminalConflict, terminalUnsupported, unknownOption } from './errors.js';
import { requestedTier, selectableTiers, type Tier } from './tiers.js';
import { parseLimits, type Limits, type LimitsOption } from './limits.js';
import { leaseOption } from './lease.js';
import { optionHint } from './option-hints.js';
import { confineOption, type Confine, type ConfineOption } from './confine.js';
import { terminalEnv, terminalOption, type Terminal, type TerminalOption } from './terminal.js';

export type { Tier } from './tiers.js';
export type LeftoversPolicy = 'kill' | 'kill-on-failure' | 'keep';
export type StdioOption = 'pipe' | 'ignore' | 'inherit' | number | Stream;

/** Defaults seen in production hosts (CONTRACT C3, C4): lib/defaults.ts. */
export { DEFAULT_GRACE_MS, DEFAULT_INTERRUPT_GRACE_MS, DEFAULT_WAIT_DELAY_MS } from './defaults.js';

/**
 * spawn()'s options but the `stop` hook, whose type names the process
 * (SpawnOptions, process.ts, adds it).
 */
export interface SpawnOptionsBase {
  /** Working directory of the command (must exist). */
  cwd?: string | URL;
  /** Variables laid over process.env (with `extendEnv: false`: the whole environment). `undefined` unsets one. */
  env?: NodeJS.ProcessEnv;
  /** As in child_process: one value for all three, or [stdin, stdout, stderr]. */
  stdio?: StdioOption | [StdioOption, StdioOption, StdioOption];
  /** Aborting terminates the tree with the interrupt grace; reason 'canceled'. */
  signal?: AbortSignal;
  /** How long until the tree is terminated with the interrupt grace; reason 'timeout'. 0 = none. Milliseconds, or a string with its unit ('30s'); a fraction of a millisecond rounds up (0.5 -> 1). */
  timeout?: Duration;
  /** Teardown grace: SIGTERM, then SIGKILL after this long (ms, or '3s'). Default 3000 ms. */
  grace?: Duration;
  /** Grace used on abort and timeout (ms, or '500ms'). Default 500 ms. */
  interruptGrace?: Duration;
  /** After the root exits, how long descendants may hold the captured output pipes (ms, or '2s'). Default 2000 ms. */
  waitDelay?: Duration;
  /** What happens to descendants still alive when the root exits. Default 'kill'. */
  leftovers?: LeftoversPolicy;
  /** 'strict' (default) refuses to run uncontained; 'best-effort' runs with the strongest tier available. */
  containment?: 'strict' | 'best-effort';
  /** Containment tier; default the strongest this host has (env CORDON_TIER overrides the default). */
  tier?: Tier;
  /**
   * A file that receives stdout and stderr (appended) and is kept after the
   * process ends. The caller's path, taken as given (links followed); made
   * 0600 when it does not exist yet.
   */
  log?: string;
  /** argv[0] for the command (default: the command as given). */
  argv0?: string;
  /** Resource limits on the whole tree, enforced by the kernel (lib/limits.ts; capabilities().guarantees.limits). */
  limits?: LimitsOption;
  /**
   * The tree outlives the host for this long (ms, or '30s', '10m'),
   * adoptable by a new host (registry.adoptable(), registry.adopt()); then it
   * is terminated with the grace. Implies a log (default a new 0600 file in
   * this user's private log directory, <tmpdir>/cordon-logs-<uid>;
   * Windows: %LOCALAPPDATA%\cordon\logs). Without
   * it, host death ends the tree (C8).
   */
  lease?: Duration;
  /**
   * POSIX: run the command on a terminal of its own (a pseudo-terminal its
   * anchor opens): it leads a new session with the terminal as its
   * controlling terminal; stdin is the terminal's input, stdout its output
   * (stderr too: proc.stderr is null); proc.resize() sets the window size.
   * `true` is 80x24 with TERM=xterm-256color (unless `env` sets TERM). Not
   * with `stdio`; on Windows only where capabilities().terminal (ConPTY; not with `lease`). Leased, the
   * terminal is kept for an adopter (its input and resize()).
   */
  pty?: boolean | TerminalOption;

  /** Lay `env` over process.env (default true); false: `env` is the whole environment. */
  extendEnv?: boolean;
  /** Put `node_modules/.bin` of `localDir` and each of its parents first on PATH. Default false. */
  preferLocal?: boolean;
  /** Where `preferLocal` starts looking. Default `cwd`. */
  localDir?: string | URL;
  /** Run `command` as one string through a shell: true = /bin/sh (`-c`), or a shell's path or name; Windows: cmd.exe only. */
  shell?: boolean | string;
  /** The polite signal of every stop (terminate, abort, timeout, leftovers, host exit). Default 'SIGTERM'; 'SIGHUP' for a tree on a terminal (`pty`), as a terminal that closes sends. POSIX; Windows: 'SIGTERM' only. */
  killSignal?: NodeJS.Signals;
  /** POSIX: the user id the command runs as (the anchor keeps the host's; needs the privilege to change it). */
  uid?: number;
  /** POSIX: the group id the command runs as (supplementary groups are dropped with uid or gid). */
  gid?: number;
  /**
   * Windows: start the command's windows hidden (its STARTUPINFO gets
   * STARTF_USESHOWWINDOW with SW_HIDE), as child_process.spawn's option.
   * Default false: the command shows its windows as it would by itself.
   * POSIX: accepted and ignored, as Node does.
   */
  windowsHide?: boolean;
  /**
   * POSIX: the root leads a session and process group of its own (setsid()
   * before exec), as child_process's `detached: true` makes it: the
   * terminal's job control and Ctrl-C no longer reach it, and
   * `process.kill(-pid, signal)` signals its group. The tree stays contained
   * all the same. The process-group tier (macOS) keeps the root in the
   * tree's own group, which is its containment: there it is not done (asked
   * for with `tier: 'process-group'`, ERR_CORDON_UNSUPPORTED). Windows:
   * ignored. Default false.
   */
  newSession?: boolean;
  /**
   * Linux and macOS: the tree confined by the kernel from its first
   * instruction, every descendant included (Linux: Landlock, a network
   * namespace; macOS: a Seatbelt profile, never observed on a Mac by
   * cordon's tests): it may write only below `write` (and its own TMPDIR and
   * the usual devices), read everything but `denyRead`, and reach the
   * `network` asked for (docs/confine.md). Refused (a CordonError) before
   * anything runs where it cannot be enforced (Windows); result.confined
   * says how it was.
   */
  confine?: ConfineOption;
}

/** The `stop` hook as the facade calls it (process.ts types its argument). */
export type StopHook = (proc: never) => unknown;

export interface NormalizedOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  stdio: [StdioOption, StdioOption, StdioOption];
  signal: AbortSignal | undefined;
  timeout: number;
  grace: number;
  interruptGrace: number;
  waitDelay: number;
  leftovers: LeftoversPolicy;
  containment: 'strict' | 'best-effort';
  tier: Tier | undefined;
  log: string | undefined;
  argv0: string | undefined;
  limits: Limits | undefined;
  /** The lease in ms, or undefined. */
  lease: number | undefined;
  /** The terminal (`pty`), or undefined. */
  pty: Terminal | undefined;
  /** The shell to run the command string with (shell mode), if any. */
  shell: ShellSpec | undefined;
  killSignal: NodeJS.Signals;
  stop: StopHook | undefined;
  uid: number | undefined;
  gid: number | undefined;
  /** Windows: the command starts with SW_HIDE (ignored elsewhere). */
  windowsHide: boolean;
  newSession: boolean;
  confine: Confine | undefined;
}

/** spawn()'s option names (run() takes these but stdio, and its own: RUN_OPTION_NAMES in run.ts). */
export const SPAWN_OPTION_NAMES: ReadonlySet<string> = new Set([
  'cwd', 'env', 'stdio', 'signal', 'timeout', 'grace', 'interruptGrace', 'waitDelay', 'leftovers',
  'containment', 'tier', 'log', 'argv0',
  'limits', 'lease', 'pty',
  'extendEnv', 'preferLocal', 'localDir', 'shell', 'killSignal', 'stop', 'uid', 'gid',
  'windowsHide', 'newSession', 'confine',
]);

// newSession: a boolean; the process-group tier asked for by name cannot give it.
function newSessionOption(value: unknown, tier: Tier | undefined): boolean {
  const on = flag('newSession', value, false);
  if (on && tier === 'process-group') throw newSessionProcessGroup();
  return on;
}

function flag(name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw invalidArg(name, value, 'true or false', 'ERR_INVALID_ARG_TYPE');
  return value;
}

function oneOf<T extends string>(name: string, value: unknown, allowed: readonly T[], fallback: T | undefined): T | undefined {
  if (value === undefined) return fallback;
  if (typeof value !== 'string') {
    throw invalidArg(name, value, `one of ${allowed.map((a) => `'${a}'`).join(', ')}`, 'ERR_INVALID_ARG_TYPE');
  }
  if (!(allowed as readonly string[]).includes(value)) {
    throw invalidArg(name, value, `one of ${allowed.map((a) => `'${a}'`).join(', ')}`);
  }
  return value as T;
}

export function noNul(name: string, value: string): void {
  if (value.includes('\0')) throw nulByte(name);
}

function stdioEntry(name: string, value: unknown): StdioOption {
  if (value === 'pipe' || value === 'ignore' || value === 'inherit') return value;
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0) {
    try {
      fstatSync(value);
    } catch (cause) {
      throw stdioFdNotOpen(name, value, cause);
    }
    return value;
  }
  if (value instanceof Stream) {
    // Another tree's own stream: its reader would drain it first.
    if (isOwned(value)) throw ownedStream(name);
    if (streamFd(value) === undefined) {
      throw invalidArg(name, value, "a stream with an open file descriptor (an opened file stream, a socket, process.stdout), a descriptor number or 'pipe'");
    }
    return value;
  }
  throw invalidArg(name, value, "'pipe', 'ignore', 'inherit', a file descriptor or a stream with a descriptor", typeof value === 'string' || typeof value === 'number' ? 'ERR_INVALID_ARG_VALUE' : 'ERR_INVALID_ARG_TYPE');
}

/**
 * The host's own working directory, which the command inherits when no cwd is
 * given. It can have been deleted under the host (process.cwd() then fails
 * with a bare "ENOENT uv_cwd").
 */
function hostCwd(): string {
  try {
    const cwd = process.cwd();
    // (Node caches the path: a directory deleted since is not noticed there.)
    statSync(cwd);
    return cwd;
  } catch (cause) {
    throw hostCwdUnreadable(cause);
  }
}

export function validateCommand(command: unknown, args: unknown): { command: string; args: string[] } {
  if (typeof command !== 'string' || command.length === 0) {
    throw invalidArg('command', command, 'a non-empty string', typeof command === 'string' ? 'ERR_INVALID_ARG_VALUE' : 'ERR_INVALID_ARG_TYPE');
  }
  noNul('The command', command);
  if (args === undefined) args = [];
  if (!Array.isArray(args)) throw invalidArg('args', args, 'an array of strings', 'ERR_INVALID_ARG_TYPE');
  // Every index, holes included (a sparse array's hole is no argument: refused as undefined).
  for (let i = 0; i < args.length; i++) {
    const arg: unknown = args[i];
    if (typeof arg !== 'string') throw invalidArg(`args[${i}]`, arg, 'a string', 'ERR_INVALID_ARG_TYPE');
    noNul(`args[${i}]`, arg);
  }
  return { command, args: args as string[] };
}

export function normalizeOptions(options: unknown): NormalizedOptions {
  if (options === undefined || options === null) options = {};
  if (typeof options !== 'object') throw invalidArg('options', options, 'an object', 'ERR_INVALID_ARG_TYPE');
  // Own properties only: what is set on Object.prototype is never an option (prototype pollution).
  const o = Object.assign(Object.create(null) as Record<string, unknown>, options);
  for (const key of Object.keys(o)) {
    if (!SPAWN_OPTION_NAMES.has(key) && o[key] !== undefined) throw unknownOption(key, SPAWN_OPTION_NAMES, optionHint(key, 'spawn'));
  }

  let cwd: string;
  if (o.cwd === undefined) {
    cwd = hostCwd();
  } else {
    if (o.cwd instanceof URL) cwd = fileURLToPath(o.cwd);
    else if (typeof o.cwd === 'string' && o.cwd.length > 0) cwd = o.cwd;
    else throw invalidArg('cwd', o.cwd, 'a non-empty path string or file URL', o.cwd === '' ? 'ERR_INVALID_ARG_VALUE' : 'ERR_INVALID_ARG_TYPE');
    noNul('cwd', cwd);
    // (resolving a relative path reads the host's working directory)
    cwd = isAbsolute(cwd) ? resolvePath(cwd) : resolvePath(hostCwd(), cwd);
    let isDir: boolean;
    try {
      isDir = statSync(cwd).isDirectory();
    } catch (cause) {
      throw cwdUnusable(cwd, (cause as NodeJS.ErrnoException).code ?? 'ENOENT', { cause });
    }
    if (!isDir) throw cwdNotDirectory(cwd);
  }

  // The environment (environment.ts).
  if (o.env !== undefined && (typeof o.env !== 'object' || o.env === null || Array.isArray(o.env))) {
    throw invalidArg('env', o.env, "an object of strings ({ NAME: 'value' }; not an array of 'NAME=value')", 'ERR_INVALID_ARG_TYPE');
  }
  // process.env comes from the OS environment (no NUL can be in it); a
  // caller's own object is checked here, before anything runs.
  // A key with '=' would be split at it by the OS (`PATH=/evil:...;=1` sets
  // PATH), and an empty key is no variable: both refused, whatever the value.
  // (Each variable's name for a message is made only when one is refused:
  // a spawn checks every variable of a copy of the host's environment.)
  if (o.env !== undefined) {
    const given = o.env as Record<string, unknown>;
    const keys = Object.keys(given);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      const value = given[key];
      if (key === '' || key.includes('=')) throw invalidArg('env', key, "names without '=' and not empty (a key is one variable's name)");
      if (value === undefined) continue;
      // What child_process turns into a string (a number, a boolean); anything else is no value.
      if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean' && typeof value !== 'bigint') {
        throw invalidArg(`env.${key}`, value, 'a string (or undefined to unset it)', 'ERR_INVALID_ARG_TYPE');
      }
      if (key.includes('\0') || String(value).includes('\0')) throw nulByte(`env.${key}`);
    }
  }
  const extendEnv = flag('extendEnv', o.extendEnv, true);
  let env = commandEnv(process.env, o.env as NodeJS.ProcessEnv | undefined, extendEnv);
  if (flag('preferLocal', o.preferLocal, false)) {
    let localDir = cwd;
    if (o.localDir instanceof URL) localDir = fileURLToPath(o.localDir);
    else if (typeof o.localDir === 'string' && o.localDir.length > 0) localDir = resolvePath(cwd, o.localDir);
    else if (o.localDir !== undefined) throw invalidArg('localDir', o.localDir, 'a non-empty path string or file URL', o.localDir === '' ? 'ERR_INVALID_ARG_VALUE' : 'ERR_INVALID_ARG_TYPE');
    noNul('localDir', localDir);
    env = prependPath(env, localBins(localDir));
  } else if (o.localDir !== undefined) {
    throw invalidArg('localDir', o.localDir, 'left out unless preferLocal is true');
  }

  let stdio: [StdioOption, StdioOption, StdioOption] = ['pipe', 'pipe', 'pipe'];
  if (Array.isArray(o.stdio)) {
    if (o.stdio.length !== 3) throw invalidArg('stdio', o.stdio, 'an array of three entries');
    stdio = [stdioEntry('stdio[0]', o.stdio[0]), stdioEntry('stdio[1]', o.stdio[1]), stdioEntry('stdio[2]', o.stdio[2])];
  } else if (o.stdio !== undefined) {
    const one = stdioEntry('stdio', o.stdio);
    stdio = [one, one, one];
  }

  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) {
    throw invalidArg('signal', o.signal, 'an AbortSignal', 'ERR_INVALID_ARG_TYPE');
  }
  if (o.log !== undefined && (typeof o.log !== 'string' || o.log.length === 0)) {
    throw invalidArg('log', o.log, 'a file path', o.log === '' ? 'ERR_INVALID_ARG_VALUE' : 'ERR_INVALID_ARG_TYPE');
  }
  if (typeof o.log === 'string') noNul('log', o.log);
  if (o.argv0 !== undefined && typeof o.argv0 !== 'string') throw invalidArg('argv0', o.argv0, 'a string', 'ERR_INVALID_ARG_TYPE');
  if (typeof o.argv0 === 'string') noNul('argv0', o.argv0);

  // A terminal is the command's stdio: stdin and stdout the host's pipes to
  // it (relayed by the anchor), stderr the terminal too (none for the host).
  const pty = terminalOption(o.pty);
  // (A terminal that outlives its host is POSIX's: the Windows anchor refuses it too.)
  if (pty && process.platform === 'win32' && o.lease !== undefined) throw terminalUnsupported('lease');
  if (pty) {
    if (o.stdio !== undefined) throw terminalConflict('stdio');
    stdio = ['pipe', 'pipe', 'ignore'];
    env = terminalEnv(env, o.env as NodeJS.ProcessEnv | undefined, pty);
  }

  // The tiers this platform's anchor implements (availability on this host is capabilities()' business).
  const selectable = selectableTiers();
  let tier = oneOf<Tier>('tier', o.tier, selectable, undefined);
  if (tier === undefined && requestedTier() !== undefined) tier = oneOf<Tier>('CORDON_TIER', requestedTier(), selectable, undefined);

  return {
    cwd,
    env,
    stdio,
    signal: o.signal as AbortSignal | undefined,
    timeout: duration('timeout', o.timeout, defaults.DEFAULT_TIMEOUT_MS),
    grace: duration('grace', o.grace, defaults.DEFAULT_GRACE_MS),
    interruptGrace: duration('interruptGrace', o.interruptGrace, defaults.DEFAULT_INTERRUPT_GRACE_MS),
    waitDelay: duration('waitDelay', o.waitDelay, defaults.DEFAULT_WAIT_DELAY_MS),
    leftovers: oneOf<LeftoversPolicy>('leftovers', o.leftovers, ['kill', 'kill-on-failure', 'keep'], defaults.DEFAULT_LEFTOVERS)!,
    containment: oneOf('containment', o.containment, ['strict', 'best-effort'] as const, defaults.DEFAULT_CONTAINMENT)!,
    tier,
    log: o.log === undefined ? undefined : resolvePath(o.log as string),
    argv0: o.argv0 as string | undefined,
    limits: parseLimits('limits', o.limits),
    lease: leaseOption(o.lease),
    pty,
    shell: shellOption(o.shell),
    killSignal: killSignalOption(o.killSignal, process.platform, pty !== undefined),
    stop: stopOption<StopHook>(o.stop),
    uid: credentialOption('uid', o.uid),
    gid: credentialOption('gid', o.gid),
    windowsHide: flag('windowsHide', o.windowsHide, false),
    newSession: newSessionOption(o.newSession, tier),
    confine: confineOption(o.confine),
  };
}

export { errnoName };
