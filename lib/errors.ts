// One error class for everything cordon throws or rejects with: a string
// `code` (ERR_CORDON_* or an errno name), the failing `syscall` where there is
// one, the `cause`, a brand and facets, so callers never parse messages. Below
// the class, the catalogue: one function per error, so every message and code
// is written here once.
import { constants as osConstants } from 'node:os';

export type CordonErrorCode =
  | 'ENOENT'
  | 'EACCES'
  | 'ENOTDIR'
  | 'EPERM'
  | 'EAGAIN'
  | 'ENOMEM'
  | 'EMFILE'
  | 'ABORT_ERR'
  | 'ERR_INVALID_ARG_TYPE'
  | 'ERR_INVALID_ARG_VALUE'
  | 'ERR_CORDON_CONTAINMENT'
  | 'ERR_CORDON_HELPER_MISSING'
  | 'ERR_CORDON_ANCHOR_LOST'
  | 'ERR_CORDON_CLEANUP'
  | 'ERR_CORDON_EXIT'
  | 'ERR_CORDON_SIGNAL'
  | 'ERR_CORDON_CANCELED'
  | 'ERR_CORDON_TIMEOUT'
  | 'ERR_CORDON_MAX_BUFFER'
  | 'ERR_CORDON_UNSUPPORTED'
  | 'ERR_CORDON_UNSAFE_BATCH_ARG'
  | 'ERR_CORDON_CWD_LOOKUP'
  | 'ERR_CORDON_BAD_COMMAND_NAME'
  | 'ERR_CORDON_STREAM_IN_USE'
  | 'ERR_CORDON_CGROUP_LEAF'
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
  /** run() rejections: the message without the stderr lines (the command and the reason). */
  shortMessage?: string;

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

// ---------------------------------------------------------------------------
// The catalogue: every error the facade builds, one function each, so that
// messages and codes live here and nowhere else. A message says what happened
// and what to do; tests match some of them, so change them with care.
//
// Still built elsewhere (files owned by other parts of the code): the anchor
// anchor's spawn failure (anchor.ts), the addon and anchor checks (native.ts),
// tier availability (capabilities.ts), duration parsing (duration.ts),
// command lookup (resolve.ts) and prepareCgroupLimits()'s refusals
// (cgroup-leaf.ts, which carry a reason and pids).
// ---------------------------------------------------------------------------

/** Limits asked for under 'strict' that this host's tier cannot enforce. */
export function limitsUnenforceable(tier: string, which: string[]): CordonError {
  return new CordonError(
    `The ${tier} tier ${tier === 'job-object' ? 'does not guarantee' : 'cannot enforce'} the ${which.join(', ')} limit${which.length > 1 ? 's' : ''} on this host (capabilities().guarantees.limits and its notes say where it can). ` +
      (tier === 'job-object'
        ? "The job-object tier sets limits on the tree's Job Object, but their enforcement by Windows has not been observed by cordon's tests (Wine, where they run, does not enforce them). Use containment: 'best-effort' to run with them set where the OS takes them (the result says which in limits.accepted, and limits.applied false)."
        : "Use the cgroup tier where the cgroup controllers are delegated or the cgroup v1 hierarchies are writable, or containment: 'best-effort' to run without the limits (the result says limits.applied false)."),
    { code: 'ERR_CORDON_CONTAINMENT', stage: 'input' },
  );
}

/** Options: a string the OS would cut short at a NUL byte. */
export function nulByte(name: string): CordonError {
  return new CordonError(`${name} must not contain a NUL byte; it would be cut short where the OS reads it.`, {
    code: 'ERR_INVALID_ARG_VALUE',
    stage: 'input',
  });
}

/** Options: a key spawn() does not know. */
export function unknownOption(key: string, known: Iterable<string>): CordonError {
  return new CordonError(`Unknown option "${key}". Known options: ${[...known].join(', ')}.`, {
    code: 'ERR_INVALID_ARG_VALUE',
    stage: 'input',
  });
}

/** Options: a stdio entry that is a number but no open descriptor. */
export function stdioFdNotOpen(name: string, fd: number, cause: unknown): CordonError {
  const code = (cause as NodeJS.ErrnoException).code ?? 'EBADF';
  return new CordonError(`The option "${name}" is ${fd}, which is not an open file descriptor (${code}); nothing ran. Pass an open descriptor, 'pipe', 'ignore' or 'inherit'.`, {
    code,
    cause,
    stage: 'input',
  });
}

/** A working directory that cannot be used: checked before the launch, and by the anchor as it enters it. */
export function cwdUnusable(cwd: string, code: string, extra: { cause?: unknown; errno?: number } = {}): CordonError {
  return new CordonError(`The working directory ${cwd} cannot be used (${code}). Pass an existing directory as cwd.`, {
    code,
    ...extra,
    syscall: 'chdir',
    path: cwd,
    stage: 'launch',
  });
}

/** The working directory exists but is a file. */
export function cwdNotDirectory(cwd: string): CordonError {
  return new CordonError(`The working directory ${cwd} is not a directory. Pass an existing directory as cwd.`, {
    code: 'ENOTDIR',
    errno: -20,
    syscall: 'chdir',
    path: cwd,
    stage: 'launch',
  });
}

/** The host's own working directory, which the command would inherit, is gone. */
export function hostCwdUnreadable(cause: unknown): CordonError {
  const code = (cause as NodeJS.ErrnoException).code ?? 'ENOENT';
  return new CordonError(
    `The host's own working directory cannot be read (${code}: it was probably deleted), and the command would inherit it; nothing ran. ` +
      'Pass an existing directory as cwd, or process.chdir() the host to one.',
    { code, cause, syscall: 'uv_cwd', stage: 'launch' },
  );
}

/**
 * The command's arguments and environment are more than one exec can carry
 * (E2BIG): found by the host's own check before the launch (`detail` says
 * which string or total), or reported by the exec that failed (`cause`).
 */
export function argsTooLarge(detail: string, extra: { cause?: unknown; syscall?: string; path?: string } = {}): CordonError {
  return new CordonError(
    `The command's arguments and environment are too large for one exec (E2BIG: ${detail}); nothing ran. ` +
      'Pass large data through a file or stdin instead.',
    { code: 'E2BIG', errno: -(osConstants.errno.E2BIG ?? 7), ...extra, stage: 'launch' },
  );
}

/** spawn(): the AbortSignal given was aborted before the call. */
export function alreadyAborted(reason: unknown): CordonError {
  return new CordonError('The AbortSignal was already aborted; nothing ran.', {
    code: 'ABORT_ERR',
    cause: reason,
    stage: 'input',
  });
}

/** spawn(): the log file cannot be opened for appending. */
export function logUnopenable(path: string, cause: unknown): CordonError {
  const code = (cause as NodeJS.ErrnoException).code ?? 'EIO';
  return new CordonError(`The log file ${path} cannot be opened (${code}). Pass a writable path.`, {
    code,
    cause,
    syscall: 'open',
    path,
    stage: 'launch',
  });
}

/** The anchor's NOCONTAIN: the tier's containment could not be set up; nothing ran. */
export function noContainment(errno: number, what: string): CordonError {
  const code = errnoName(errno);
  return new CordonError(
    `Containment (${what}) could not be established on this host (${code}); nothing ran. ` +
      "Use containment: 'best-effort' to run with the strongest tier available, or see capabilities().",
    { code: 'ERR_CORDON_CONTAINMENT', errno: -Math.abs(errno), syscall: what, stage: 'launch' },
  );
}

/** The anchor's EXECFAIL: the command could not be executed; nothing ran. */
export function execFailed(errno: number, path: string, command: string): CordonError {
  const code = errnoName(errno);
  return new CordonError(`Could not run ${path} (${code}); nothing ran. Check that it exists and is executable.`, {
    code,
    errno: -Math.abs(errno),
    syscall: `spawn ${command}`,
    path,
    stage: 'launch',
  });
}

/** The anchor's NOCWD: it could not enter the working directory; nothing ran. */
export function anchorNoCwd(cwd: string, errno: number): CordonError {
  return cwdUnusable(cwd, errnoName(errno), { errno: -Math.abs(errno) });
}

/** The anchor process itself could not be started (removed or broken install); nothing ran. */
export function anchorNotStarted(error: Error): CordonError {
  return new CordonError(
    `cordon's anchor helper could not be started (${(error as NodeJS.ErrnoException).code ?? error.message}); nothing ran. ` +
      'Reinstall or rebuild cordon (`npm rebuild cordon`).',
    { code: 'ERR_CORDON_HELPER_MISSING', cause: error, stage: 'launch' },
  );
}

/**
 * The anchor's STUCK: members survived SIGKILL for the anchor's stuck delay
 * (5 s: kStuckReportMs in native/protocol.h).
 */
export function cleanupStuck(pids: number[]): CordonError {
  return new CordonError(
    `Tree members survived SIGKILL for 5 s (pids ${pids.join(', ')}); they may be in uninterruptible sleep. ` +
      'The anchor keeps trying; inspect them with ps.',
    { code: 'ERR_CORDON_CLEANUP', stage: 'cleanup' },
  );
}

/**
 * The anchor did not finish stopping the tree within the grace plus
 * ANCHOR_WAIT_SLACK_MS (7 s, lib/anchor.ts).
 */
export function anchorUnresponsive(anchorPid: number | undefined, waitedMs: number): CordonError {
  return new CordonError(
    `The anchor of this tree (pid ${anchorPid}) did not finish stopping it within ${waitedMs} ms ` +
      '(the grace plus 7 s; a member may have stopped it with SIGSTOP, or it is stuck): quiescence cannot be proven ' +
      `and members may still run. cordon keeps resuming the anchor; inspect the tree with ps.`,
    { code: 'ERR_CORDON_CLEANUP', stage: 'cleanup' },
  );
}

/** The anchor ended before it reported quiescence. */
export function anchorLost(code: number | null, signal: NodeJS.Signals | null, error?: Error): CordonError {
  const how = error ? error.message : signal ? `signal ${signal}` : `code ${code}`;
  return new CordonError(
    `The anchor of this tree ended unexpectedly (${how}) before the tree was quiescent; its members may still run.`,
    { code: 'ERR_CORDON_ANCHOR_LOST', cause: error, stage: 'cleanup' },
  );
}

/** Options: a stdio entry that is a stream cordon itself reads or writes for another tree. */
export function ownedStream(name: string): CordonError {
  return new CordonError(
    `The option "${name}" is a stream of another cordon process (its stdin, stdout or stderr). cordon reads that stream itself, ` +
      'so this command would get nothing of it; nothing ran. Start this command with stdin \'pipe\' and use a.pipe(b), or pipe the stream yourself.',
    { code: 'ERR_CORDON_STREAM_IN_USE', stage: 'input' },
  );
}

/** A reader of a stream (lines(), pipe()) that the command's stdio did not pipe to the host. */
export function notPiped(name: 'stdin' | 'stdout' | 'stderr', by: string): CordonError {
  return new CordonError(`${by} needs the command's ${name} piped to the host, and it is not: pass stdio '${'pipe'}' for it.`, {
    code: 'ERR_INVALID_ARG_VALUE',
    stage: 'input',
  });
}

/** run(): `stdio` is run()'s own business. */
export function runStdio(): CordonError {
  return new CordonError('The option "stdio" must be left out of run(): it collects stdout and stderr itself. Use "input" for stdin and "stderr" for where stderr goes, or spawn() for full control.', {
    code: 'ERR_INVALID_ARG_VALUE',
    stage: 'input',
  });
}

/** run(): a maxBuffer that is not a positive number. */
export function badMaxBuffer(maxBuffer: unknown): CordonError {
  return new CordonError(`The option "maxBuffer" must be a positive number. Received ${String(maxBuffer)}.`, {
    code: 'ERR_INVALID_ARG_VALUE',
    stage: 'input',
  });
}

/** Why run() rejects a result (with `reject: true`), first match wins. */
export type RunFailure =
  | { kind: 'maxBuffer'; maxBuffer: number }
  | { kind: 'timeout' }
  | { kind: 'canceled' }
  | { kind: 'signal'; signal: NodeJS.Signals; limit?: string }
  | { kind: 'exit'; exitCode: number | null; limit?: string };

/** How many of stderr's last lines a run() rejection's message shows, and at most how many characters of them. */
export const STDERR_TAIL_LINES = 20;
export const STDERR_TAIL_CHARS = 4000;

/** The last lines of what a command wrote on stderr, for a message (empty when it wrote nothing). */
export function stderrTail(stderr: string): string {
  const lines = stderr.replace(/\s+$/, '').split('\n');
  let tail = lines.slice(-STDERR_TAIL_LINES).join('\n');
  if (tail.length > STDERR_TAIL_CHARS) tail = '…' + tail.slice(-STDERR_TAIL_CHARS);
  else if (lines.length > STDERR_TAIL_LINES) tail = '…\n' + tail;
  return tail;
}

/** A command line as a reader (or a POSIX shell) would take it back: words quoted only where needed. */
export function showCommand(command: string, args: readonly string[], shellLine = false): string {
  const word = (w: string) => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`);
  // A shell's line is shown as given: it is already what a shell reads.
  return [shellLine ? command : word(command), ...args.map(word)].join(' ');
}

/**
 * run(): the command's result is a failure. The message says the command,
 * the reason and the last lines of its stderr (`stderr`, when it was
 * collected); `shortMessage` the first two only (as execa).
 */
export function commandFailed(failure: RunFailure, shown: string, cause: unknown, stderr = ''): CordonError {
  let code: CordonErrorCode;
  let why: string;
  switch (failure.kind) {
    case 'maxBuffer':
      code = 'ERR_CORDON_MAX_BUFFER';
      why = `produced more than maxBuffer (${failure.maxBuffer} bytes) and was terminated`;
      break;
    case 'timeout':
      code = 'ERR_CORDON_TIMEOUT';
      why = 'timed out';
      break;
    case 'canceled':
      code = 'ERR_CORDON_CANCELED';
      why = 'was canceled';
      break;
    case 'signal':
      code = 'ERR_CORDON_SIGNAL';
      why = `was killed by ${failure.signal}`;
      break;
    case 'exit':
      code = 'ERR_CORDON_EXIT';
      why = `failed with exit code ${failure.exitCode}`;
      break;
  }
  if ((failure.kind === 'signal' || failure.kind === 'exit') && failure.limit) why += ` (the tree ran into its ${failure.limit} limit)`;
  const shortMessage = `Command ${why}: ${shown}`;
  const tail = stderrTail(stderr);
  const error = new CordonError(tail ? `${shortMessage}\n\n${tail}` : shortMessage, { code, stage: 'run', cause });
  return Object.assign(error, { shortMessage });
}

// The registry (owners and kinds): misuse is a typed error before anything runs or stops.
function registryError(message: string, code: CordonErrorCode): CordonError {
  return new CordonError(message, { code, stage: 'input' });
}

export function ownerReleased(owner: string): CordonError {
  return registryError(`Owner "${owner}" was released; get a new handle with registry.owner(id).`, 'ERR_CORDON_OWNER_RELEASED');
}

export function ownerLogOption(): CordonError {
  return registryError(`The option "log" must be true, false or a file path.`, 'ERR_INVALID_ARG_VALUE');
}

export function ownerLabelOption(): CordonError {
  return registryError(`The option "label" must be a string.`, 'ERR_INVALID_ARG_TYPE');
}

export function treeStillLive(id: string): CordonError {
  return registryError(`Tree ${id} is still live; stop it first.`, 'ERR_CORDON_TREE_LIVE');
}

export function treeNotOwned(id: string, owner: string): CordonError {
  return registryError(`Tree ${id} belongs to another owner; owner "${owner}" cannot reach it.`, 'ERR_CORDON_NOT_OWNER');
}

export function unknownTree(owner: string, id: string): CordonError {
  return registryError(`Owner "${owner}" has no tree ${id}.`, 'ERR_CORDON_UNKNOWN_TREE');
}

export function stopTarget(): CordonError {
  return registryError('stop() takes a tree id or { kinds }.', 'ERR_INVALID_ARG_TYPE');
}

export function ownerIdInvalid(): CordonError {
  return registryError('An owner id is a non-empty string.', 'ERR_INVALID_ARG_VALUE');
}

export function ownerExists(owner: string): CordonError {
  return registryError(`Owner "${owner}" already exists.`, 'ERR_CORDON_OWNER_EXISTS');
}

export function kindNameInvalid(): CordonError {
  return registryError('A kind name is a non-empty string.', 'ERR_INVALID_ARG_VALUE');
}

export function kindSpecInvalid(): CordonError {
  return registryError('defineKind(name, { unfinishedWork: boolean })', 'ERR_INVALID_ARG_TYPE');
}

export function kindBuiltIn(name: string): CordonError {
  return registryError(`The kind "${name}" is built in and cannot be redefined.`, 'ERR_INVALID_ARG_VALUE');
}

export function unknownKind(name: string, known: Iterable<string>): CordonError {
  return registryError(`Unknown kind "${name}". Known: ${[...known].join(', ')}; add one with registry.defineKind().`, 'ERR_INVALID_ARG_VALUE');
}

// ---- Leases and adoption (issue #17: lib/lease.ts) ----

export function leaseDirUnsafe(dir: string, why: string): CordonError {
  const what =
    process.platform === 'win32'
      ? 'cordon keeps lease records only in a directory there (made with a DACL for this user alone). Remove what is in the way, or set LOCALAPPDATA to a directory of yours.'
      : "cordon keeps adoption endpoints only in a directory that is this user's alone (0700, not a symlink). Remove it or set XDG_RUNTIME_DIR to a private directory.";
  return new CordonError(`The lease directory ${dir} ${why}; ${what}`, { code: 'ERR_CORDON_LEASE_DIR', path: dir, stage: 'input' });
}

export function adoptDenied(id: string, why: string): CordonError {
  const reason =
    why === 'token'
      ? 'the token is wrong'
      : why === 'attached'
        ? 'another host holds it (it was adopted first, or its host is alive)'
        : why === 'expired'
          ? 'its lease ran out and it is being terminated'
          : why === 'notoken'
            ? 'its host never sent a token'
            : why === 'hello'
              ? 'the anchor heard no request in time (try again)'
              : why === 'stream'
                ? 'its anchor does not relay that output stream'
                : why === 'busy'
                  ? 'an earlier reader of its output is still attached'
                  : why;
  return registryError(`Tree ${id} cannot be adopted: ${reason}. Adopt with the token the creating host had (proc.adoptionToken), or the owner's id and the registry's secret.`, 'ERR_CORDON_ADOPT_DENIED');
}

export function unknownLease(id: string, cause?: unknown): CordonError {
  const err = registryError(`No adoptable tree ${id} (it ended, its lease ran out, or it belongs to another user); list them with registry.adoptable().`, 'ERR_CORDON_UNKNOWN_TREE');
  if (cause !== undefined) Object.defineProperty(err, 'cause', { value: cause });
  return err;
}

export function anchorNotAnswering(id: string, anchorPid: number, ms: number, cause: unknown): CordonError {
  return new CordonError(
    `The anchor of leased tree ${id} (pid ${anchorPid}) is alive but did not answer within ${ms} ms (it is stopped, or the machine is overloaded); nothing was adopted: try again.`,
    { code: 'ERR_CORDON_TIMEOUT', cause },
  );
}

export function adoptToken(): CordonError {
  return registryError('adopt(id, { token }) takes the tree\'s adoption token (32 hex characters), or a Registry with a `secret`.', 'ERR_INVALID_ARG_VALUE');
}
