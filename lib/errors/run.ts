// run(): its own options, and the rejection of a failed result with the
// command line and the tail of its stderr.
import { CordonError, type CordonErrorCode } from './error.js';

/** run(): `stdio` and one of `stdin`, `stdout`, `stderr` together (as execa refuses them). */
export function stdioConflict(name: 'stdin' | 'stdout' | 'stderr'): CordonError {
  return new CordonError(`The options "stdio" and "${name}" cannot be given together: "stdio" sets all three. Give "stdio", or "stdin", "stdout" and "stderr"; nothing ran.`, {
    code: 'ERR_INVALID_ARG_VALUE',
    stage: 'input',
  });
}

/** run(): two sources of stdin (`input` and `inputFile`), or one with stdin not 'pipe'. */
export function inputConflict(first: string, second: string): CordonError {
  return new CordonError(`The options "${first}" and "${second}" cannot be given together: the command has one stdin. Leave one of them out; nothing ran.`, {
    code: 'ERR_INVALID_ARG_VALUE',
    stage: 'input',
  });
}

/** run(): an `inputFile` that cannot be opened for reading (its errno name is the code). */
export function inputFileUnreadable(path: string, cause: unknown): CordonError {
  const code = (cause as NodeJS.ErrnoException).code ?? 'EIO';
  return new CordonError(`The option "inputFile" names ${JSON.stringify(path)}, which cannot be read (${code}); nothing ran. Pass the path of a readable file.`, {
    code,
    cause,
    path,
    syscall: (cause as NodeJS.ErrnoException).syscall ?? 'open',
    stage: 'input',
  });
}

/** run(): the `input` stream or the `inputFile` failed while it was read into the command's stdin. */
export function inputFailed(source: 'input' | 'inputFile', cause: unknown): CordonError {
  const why = (cause as Error)?.message ?? String(cause);
  return new CordonError(`Reading the option "${source}" into the command's stdin failed (${why}); the command got part of its input and was terminated. See the cause; fix the stream or file and run it again.`, {
    code: 'ERR_CORDON_INPUT',
    cause,
    stage: 'run',
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
