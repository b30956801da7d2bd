// The one error class for everything cordon throws or rejects with: a string
// `code` (one of CORDON_ERROR_CODES, or an errno name), the failing `syscall`
// where there is one, the `cause`, a brand and facets, so callers never parse
// messages. The catalogue beside this file (lib/errors/*.ts) builds every
// instance; nothing else in lib/ calls `new CordonError`.
import { constants as osConstants } from 'node:os';

/**
 * Every code cordon's own errors carry besides errno names (ENOENT, EACCES,
 * EPERM, E2BIG, ... as the OS reports them), which pass through as given.
 * test/errors.test.ts checks that each code the facade throws is listed here.
 */
export const CORDON_ERROR_CODES = [
  'ABORT_ERR',
  'ERR_INVALID_ARG_TYPE',
  'ERR_INVALID_ARG_VALUE',
  'ERR_CORDON_CONTAINMENT',
  'ERR_CORDON_ANCHOR_MISSING',
  'ERR_CORDON_ANCHOR_LOST',
  'ERR_CORDON_CLEANUP',
  'ERR_CORDON_EXIT',
  'ERR_CORDON_SIGNAL',
  'ERR_CORDON_CANCELED',
  'ERR_CORDON_TIMEOUT',
  'ERR_CORDON_MAX_BUFFER',
  'ERR_CORDON_INPUT',
  'ERR_CHILD_PROCESS_STDIO_MAXBUFFER',
  'ERR_OUT_OF_RANGE',
  'ERR_UNKNOWN_SIGNAL',
  'ERR_CORDON_UNSUPPORTED',
  'ERR_CORDON_UNSAFE_BATCH_ARG',
  'ERR_CORDON_CWD_LOOKUP',
  'ERR_CORDON_BAD_COMMAND_NAME',
  'ERR_CORDON_STREAM_IN_USE',
  'ERR_CORDON_CGROUP_LEAF',
  'ERR_CORDON_LEASE_DIR',
  'ERR_CORDON_LEASE_JOB',
  'ERR_CORDON_LOG_DIR',
  'ERR_CORDON_ADOPT_DENIED',
  'ERR_CORDON_UNKNOWN_TREE',
  'ERR_CORDON_NOT_OWNER',
  'ERR_CORDON_OWNER_EXISTS',
  'ERR_CORDON_OWNER_RELEASED',
  'ERR_CORDON_TREE_LIVE',
] as const;

/** An error's code: one of CORDON_ERROR_CODES, or an errno name (ENOENT, EACCES, EPERM, E2BIG, ...). */
export type CordonErrorCode =
  | (typeof CORDON_ERROR_CODES)[number]
  | 'ENOENT'
  | 'EACCES'
  | 'ENOTDIR'
  | 'EPERM'
  | 'EAGAIN'
  | 'ENOMEM'
  | 'EMFILE'
  | 'E2BIG'
  | (string & {});

export interface CordonErrorOptions {
  code: CordonErrorCode;
  cause?: unknown;
  errno?: number;
  syscall?: string;
  path?: string;
  /** The stage at which it failed: nothing ran when this is 'launch'. */
  stage?: 'input' | 'launch' | 'run' | 'cleanup';
}

/** What the host did about a tree whose anchor died before it was quiescent (`CordonError.anchorLost`, with ERR_CORDON_ANCHOR_LOST; lib/anchor/lost.ts). */
export interface AnchorLostSweep {
  /**
   * How the host found the tree: `'cgroup'` (cgroup.kill of the tree's
   * cgroup: every member, none named), `'marker'` (a sweep of the user's
   * processes for the tree's marker and, in the process-group tier, its
   * session), `'none'` (nothing to find it by: no marker, or no pidfds).
   */
  by: 'cgroup' | 'marker' | 'none';
  /** The members the host killed (SIGKILL through a pidfd), by pid. */
  swept: number[];
  /** Members found but not ended: the signal refused, or alive after it (uninterruptible sleep). */
  unreached: number[];
  /** How long the sweep took (ms). */
  ms: number;
}

export class CordonError extends Error {
  readonly code: CordonErrorCode;
  readonly errno?: number;
  readonly syscall?: string;
  readonly path?: string;
  readonly stage: 'input' | 'launch' | 'run' | 'cleanup';
  /** Brand that survives duplicate copies of the package. */
  readonly isCordonError = true as const;
  /** Present on errors that carry a (possibly partial) result. */
  result?: unknown;
  /** ERR_CORDON_ANCHOR_LOST: what the host swept of the tree after its anchor died (POSIX). */
  anchorLost?: AnchorLostSweep;
  /** run() rejections: the message without the stderr lines (the command and the reason). */
  shortMessage?: string;
  /** run() rejections once the command was started: the file and its arguments joined by spaces, unquoted (as execa's). */
  command?: string;
  /** run() rejections: the command line as a reader (or a POSIX shell) would take it back (what the message shows). */
  escapedCommand?: string;
  /** run() rejections once the command was started: true (as execa's). */
  failed?: boolean;
  /** run() rejections: the timeout ended it (code ERR_CORDON_TIMEOUT), as execa names it. */
  timedOut?: boolean;
  /** run() rejections: the AbortSignal ended it (code ERR_CORDON_CANCELED), as execa names it. */
  isCanceled?: boolean;
  /** run() rejections: milliseconds from the spawn to the failure. */
  durationMs?: number;
  /** run() rejections after the command ran: what it wrote (strings, or Buffers with encoding 'buffer'). */
  stdout?: string | Buffer;
  stderr?: string | Buffer;
  /** run() rejections with `all: true`: stdout and stderr interleaved. */
  all?: string | Buffer;
  /** run() rejections after the command ran: the root's exit code (null when a signal ended it). */
  exitCode?: number | null;
  /** run() rejections after the command ran: the signal that ended the root, if one did. */
  signal?: NodeJS.Signals | null;

  constructor(message: string, options: CordonErrorOptions) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'CordonError';
    this.code = options.code;
    this.stage = options.stage ?? 'run';
    if (options.errno !== undefined) this.errno = options.errno;
    if (options.syscall !== undefined) this.syscall = options.syscall;
    if (options.path !== undefined) this.path = options.path;
  }

  /** Nothing of the command ran (bad input, ENOENT, EACCES, containment). */
  get isLaunchFailure(): boolean {
    return this.stage === 'input' || this.stage === 'launch';
  }

  /** The tree may not be gone: never treat this as success. */
  get isCleanupFailure(): boolean {
    return this.stage === 'cleanup';
  }
}

export function isCordonError(value: unknown): value is CordonError {
  return typeof value === 'object' && value !== null && (value as { isCordonError?: unknown }).isCordonError === true;
}

const errnoNames = new Map<number, string>();
for (const [name, value] of Object.entries(osConstants.errno)) errnoNames.set(value, name);

export function errnoName(errno: number): string {
  return errnoNames.get(Math.abs(errno)) ?? `E${Math.abs(errno)}`;
}

export function invalidArg(
  name: string,
  value: unknown,
  expected: string,
  code: 'ERR_INVALID_ARG_VALUE' | 'ERR_INVALID_ARG_TYPE' = 'ERR_INVALID_ARG_VALUE',
): CordonError {
  let shown: string;
  try {
    shown = typeof value === 'string' ? JSON.stringify(value) : String(value);
  } catch {
    shown = typeof value;
  }
  if (shown.length > 80) shown = shown.slice(0, 77) + '...';
  return new CordonError(`The option "${name}" must be ${expected}. Received ${shown}.`, {
    code,
    stage: 'input',
  });
}
