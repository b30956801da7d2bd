// cordon/child_process (lib/child_process.ts): the errors node:child_process
// gives, in its shapes, so code written for it reads them unchanged: a failed
// command is a plain Error whose `code` is the exit code (a number, which no
// CordonError code is), as Node's genericNodeError makes it; a launch failure
// says `spawn <file> ENOENT`; an abort is an AbortError; an overflow Node's
// RangeError-like ERR_CHILD_PROCESS_STDIO_MAXBUFFER.
import { CordonError } from './error.js';

/** exec()/execFile(): the command exited nonzero or was ended by a signal (Node's shape: `code`, `killed`, `signal`; the caller adds `cmd`). */
export function childCommandFailed(cmd: string, stderr: string, props: { code: number | string | null; killed: boolean; signal: NodeJS.Signals | null }): Error & { code: number | string | null; killed: boolean; signal: NodeJS.Signals | null } {
  return Object.assign(new Error(`Command failed: ${cmd}\n${stderr}`), props);
}

/**
 * The launch failed (ENOENT, EACCES, ...), or a sync call ended as Node's
 * does with a system error (ETIMEDOUT, ENOBUFS): Node's message
 * `<verb> <file> <code>`, errno, syscall, path and spawnargs.
 */
export function childSpawnFailed(failure: { code: string; errno?: number }, file: string, args: readonly string[], verb: 'spawn' | 'spawnSync' = 'spawn', cause?: unknown): CordonError {
  const error = new CordonError(`${verb} ${file} ${failure.code}`, {
    code: failure.code,
    cause,
    errno: failure.errno,
    syscall: `${verb} ${file}`,
    path: file,
    stage: 'launch',
  });
  return Object.assign(error, { spawnargs: [...args] });
}

/** execSync()/execFileSync(): a nonzero exit (Node's shape: the spawnSync result's fields on a plain Error). */
export function childSyncCommandFailed<T extends object>(message: string, result: T): Error & T {
  return Object.assign(new Error(message), result);
}

/** The AbortSignal given as `signal` was aborted: Node's AbortError (name, code, the signal's reason as cause). */
export function childAborted(reason: unknown): CordonError {
  const error = new CordonError('The operation was aborted', { code: 'ABORT_ERR', cause: reason, stage: 'run' });
  error.name = 'AbortError';
  return error;
}

/** exec()/execFile(): more than maxBuffer bytes on stdout or stderr; the tree was stopped. */
export function childMaxBuffer(stream: 'stdout' | 'stderr'): RangeError & { code: string } {
  return Object.assign(new RangeError(`${stream} maxBuffer length exceeded`), { code: 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER' });
}

/** A node:child_process option or stdio form that cordon/child_process cannot honour: refused before anything runs. */
export function childUnsupported(what: string, why: string): CordonError {
  return new CordonError(`cordon/child_process does not support ${what}: ${why} Nothing ran.`, { code: 'ERR_CORDON_UNSUPPORTED', stage: 'input' });
}
