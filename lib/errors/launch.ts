// Launch failures (stage 'launch' unless said): the command could not be
// found, its working directory or log file used, its arguments carried, the
// anchor started or the command executed. Nothing of the command ran.
import { constants as osConstants } from 'node:os';
import { CordonError, errnoName } from './error.js';

/** What a broken install is told to do. */
const REBUILD_HINT =
  'Reinstall or rebuild cordon (`npm rebuild cordon`, or `npm run build:native` in a checkout); a C++ compiler is needed when no prebuild matches this platform, ' +
  'and its install script must be allowed where the package manager blocks it (npm 12: `npm install-scripts approve cordon`, then `npm rebuild cordon`; pnpm: `pnpm approve-builds`).';

/** Command lookup: no such command (ENOENT), or one that is not executable (EACCES, `path` the first such). */
export function commandLookupFailed(code: 'ENOENT' | 'EACCES', command: string, path: string): CordonError {
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
}

/** Windows command lookup: a bare name found only in the current directory, which a bare name never runs. */
export function foundOnlyInCwd(given: string, here: string, command: string): CordonError {
  return new CordonError(
    `Command ${given} was found only in the current directory (${here}), which a bare name never runs ` +
      `(a directory you run in may be untrusted). To run it, pass .\\${command} or its full path.`,
    { code: 'ERR_CORDON_CWD_LOOKUP', syscall: `spawn ${given}`, path: here, stage: 'launch' },
  );
}

/** Windows: a command name Win32 would rewrite (a trailing dot or space, an alternate data stream); stage 'input'. */
export function badCommandName(command: string): CordonError {
  return new CordonError(
    `Command name ${JSON.stringify(command)} names an alternate data stream or a name Win32 would rewrite. ` +
      'Pass the file name itself (no trailing dot or space, no ":stream").',
    { code: 'ERR_CORDON_BAD_COMMAND_NAME', syscall: `spawn ${command}`, path: command, stage: 'input' },
  );
}

/** Windows: `what` (the batch file's path, or one argument) cannot reach the batch file `path` literally; stage 'input'. */
export function unsafeBatchArg(path: string, what: string, why: string): CordonError {
  return new CordonError(
    `${what} cannot be passed to the batch file ${path} safely: ${why}. cmd.exe would read it as commands or ` +
      'variables. Run the program the batch file wraps directly (for an npm shim: node and its .js file), ' +
      "or pass the value another way (a file, an environment variable).",
    { code: 'ERR_CORDON_UNSAFE_BATCH_ARG', syscall: `spawn ${path}`, path, stage: 'input' },
  );
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

/** A log directory cordon makes is not this user's alone (or is in the way); `why` says how. Nothing ran. */
export function logDirUnsafe(dir: string, why: string): CordonError {
  return new CordonError(
    process.platform === 'win32'
      ? `The log directory ${dir} ${why}; cordon writes logs only into a directory that is this user's alone (owned by this user, a DACL that admits no one else but SYSTEM and Administrators, not a junction or link), since command output may hold secrets. Remove it (cordon makes it again, private), or give the Registry a logDir of yours.`
      : `The log directory ${dir} ${why}; cordon writes logs only into a directory that is this user's alone (0700, not a symlink), since command output may hold secrets. Remove it, or give the Registry a logDir of yours.`,
    { code: 'ERR_CORDON_LOG_DIR', path: dir, stage: 'launch' },
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

/** The native addon could not be loaded (a broken install, or no build for this platform). */
export function addonNotLoaded(cause: unknown): CordonError {
  return new CordonError(`cordon's native addon could not be loaded. ${REBUILD_HINT}`, {
    code: 'ERR_CORDON_ANCHOR_MISSING',
    cause,
    stage: 'launch',
  });
}

/** The anchor executable beside the addon is missing or not executable. */
export function anchorMissing(path: string, cause: unknown): CordonError {
  return new CordonError(`cordon's anchor executable is missing or not executable at ${path}. ${REBUILD_HINT}`, {
    code: 'ERR_CORDON_ANCHOR_MISSING',
    cause,
    path,
    stage: 'launch',
  });
}

/** A host side of the anchor (POSIX or Windows) used with the other platform's addon: a bug in cordon. */
export function wrongBinding(wanted: string, os: string): CordonError {
  return new CordonError(`cordon's ${wanted} anchor host was used with the ${os} addon; this is a bug in cordon.`, {
    code: 'ERR_CORDON_UNSUPPORTED',
    stage: 'launch',
  });
}

/**
 * The anchor's spawn failed at once with `code` (ERR_CORDON_ANCHOR_MISSING
 * when the failure has none). The Wine suite's retry of a transient start
 * failure matches this message's wording.
 */
export function anchorSpawnFailed(code: string, cause: unknown, path: string): CordonError {
  return new CordonError(`The anchor could not be started (${code}); nothing ran.`, {
    code,
    cause,
    syscall: 'spawn',
    path,
    stage: 'launch',
  });
}

/** The anchor process itself could not be started (removed or broken install); nothing ran. */
export function anchorNotStarted(error: Error): CordonError {
  return new CordonError(
    `cordon's anchor could not be started (${(error as NodeJS.ErrnoException).code ?? error.message}); nothing ran. ` +
      'Reinstall or rebuild cordon (`npm rebuild cordon`).',
    { code: 'ERR_CORDON_ANCHOR_MISSING', cause: error, stage: 'launch' },
  );
}
