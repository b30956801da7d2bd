// Input refused before anything runs (stage 'input'): options and arguments
// with their own wording. invalidArg() (./error.ts) builds the common
// "The option X must be ..." refusal.
import { CordonError } from './error.js';

/** Options: a string the OS would cut short at a NUL byte. */
export function nulByte(name: string): CordonError {
  return new CordonError(`${name} must not contain a NUL byte; it would be cut short where the OS reads it.`, {
    code: 'ERR_INVALID_ARG_VALUE',
    stage: 'input',
  });
}

/** Edit distance (insertions, deletions, substitutions) between two short names. */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
}

/** The known name a misspelt `key` most likely meant: same letters but case, or at most 2 edits (1 for short names) away. */
function nearest(key: string, known: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const name of known) {
    const d = name.toLowerCase() === key.toLowerCase() ? 0 : distance(key, name);
    if (d < bestDistance) {
      best = name;
      bestDistance = d;
    }
  }
  return best !== undefined && bestDistance <= (key.length <= 4 ? 1 : 2) ? best : undefined;
}

/**
 * Options: a key spawn() or run() does not take. `hint`: what to use instead,
 * for a name cordon knows from execa or child_process (lib/option-hints.ts).
 */
export function unknownOption(key: string, known: Iterable<string>, hint?: string): CordonError {
  const names = [...known];
  const guess = hint === undefined ? nearest(key, names) : undefined;
  const why = hint !== undefined ? `: ${hint}` : guess ? ` (did you mean "${guess}"?)` : '';
  return new CordonError(`Unknown option "${key}"${why}. Nothing ran. Known options: ${names.join(', ')}.`, {
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

/** spawn(): the AbortSignal given was aborted before the call. */
export function alreadyAborted(reason: unknown): CordonError {
  return new CordonError('The AbortSignal was already aborted; nothing ran.', {
    code: 'ABORT_ERR',
    cause: reason,
    stage: 'input',
  });
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

/** The option "shell" on Windows: only cmd.exe is supported. */
export function shellUnsupported(what: string): CordonError {
  return new CordonError(
    `The option "shell" on Windows supports only cmd.exe (true, 'cmd' or 'cmd.exe') for now; received ${what}. Nothing ran. ` +
      'Run the shell itself as the command with its arguments instead (e.g. powershell.exe -NoProfile -Command ...).',
    { code: 'ERR_CORDON_UNSUPPORTED', stage: 'input' },
  );
}

/** The options "uid" and "gid" on Windows, which has no user and group ids. */
export function posixOnly(name: 'uid' | 'gid'): CordonError {
  return new CordonError(`The option "${name}" is POSIX only; Windows has no user and group ids. Nothing ran.`, {
    code: 'ERR_CORDON_UNSUPPORTED',
    stage: 'input',
  });
}

/** The option "killSignal" on Windows, where the polite stop is CTRL_BREAK (SIGTERM) only. */
export function killSignalWindows(value: string): CordonError {
  return new CordonError(
    `The option "killSignal" can only be 'SIGTERM' on Windows (the polite stop is CTRL_BREAK to the root's console); received ${JSON.stringify(value)}. ` +
      'Use the stop hook to ask the command another way; nothing ran.',
    { code: 'ERR_CORDON_UNSUPPORTED', stage: 'input' },
  );
}

/** A duration flag (the CLI's) that is no number with an optional unit. */
export function durationUnparsable(flag: string, text: string): CordonError {
  const hint = /^\s*\d+(\.\d+)?\s*$/.test(text) ? ` A duration written as text carries its unit: "${text.trim()}ms" or "${text.trim()}s".` : '';
  return new CordonError(`${flag} takes a duration with its unit, such as 500ms, 3s or 2m; got "${text}".${hint}`, {
    code: 'ERR_INVALID_ARG_VALUE',
    stage: 'input',
  });
}

/** A duration flag over `maxMs` (the longest timer Node.js keeps). */
export function durationTooLong(flag: string, text: string, maxMs: number): CordonError {
  return new CordonError(`${flag} takes a duration of at most ${maxMs}ms (about 24.8 days); got "${text}".`, {
    code: 'ERR_INVALID_ARG_VALUE',
    stage: 'input',
  });
}

/** The option "pty" on a Windows without a usable pseudo console (none before Windows 10 1809; Wine's), or with a lease. */
export function terminalUnsupported(why: 'none' | 'wine' | 'lease' = 'none'): CordonError {
  const reason = {
    none: 'this Windows has no pseudo console (ConPTY: Windows 10 1809 and later), so capabilities().terminal is false',
    wine: "Wine's pseudo console gives the command no standard handles on it, so capabilities().terminal is false under Wine",
    lease: 'a leased tree gets no terminal on Windows (give one of "pty" and "lease")',
  }[why];
  return new CordonError(
    `The option "pty" is not supported here: ${reason}. Nothing ran. ` +
      'Run the command with pipes (the default stdio) instead.',
    { code: 'ERR_CORDON_UNSUPPORTED', stage: 'input' },
  );
}

/** An option that cannot go with "pty": stdio or run()'s stdin, stdout, stderr (the terminal is the stdio). */
export function terminalConflict(option: 'stdio' | 'stdin' | 'stdout' | 'stderr'): CordonError {
  const why = 'the terminal is the command\'s stdin, stdout and stderr (proc.stdin and proc.stdout; proc.stderr is null)';
  return new CordonError(`The option "${option}" cannot be given with "pty": ${why}. Leave one of them out; nothing ran.`, {
    code: 'ERR_INVALID_ARG_VALUE',
    stage: 'input',
  });
}

/** resize() on a process without a terminal. */
export function notTerminal(): CordonError {
  return new CordonError('resize() needs a terminal: spawn the command with the option pty: true (or { cols, rows }).', {
    code: 'ERR_INVALID_ARG_VALUE',
    stage: 'input',
  });
}

/** The option "newSession" in the process-group tier, whose group is the tree's containment. */
export function newSessionProcessGroup(): CordonError {
  return new CordonError(
    "The option \"newSession\" cannot be given in the process-group tier: the tree's process group is its containment there, and the root stays in it. Nothing ran. " +
      'Use the default tier (or cgroup, subreaper), or leave newSession out.',
    { code: 'ERR_CORDON_UNSUPPORTED', stage: 'input' },
  );
}
