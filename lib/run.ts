// run(): the execFile/execa shape. Collects stdout/stderr (bounded by
// maxBuffer) and rejects on a nonzero exit unless `reject: false`.
import { once } from 'node:events';
import type { Readable } from 'node:stream';
import { DEFAULT_INTERRUPT_GRACE_MS, DEFAULT_MAX_BUFFER, DEFAULT_WAIT_DELAY_MS } from './defaults.js';
import * as errors from './errors.js';
import type { CordonError, RunFailure } from './errors.js';
import type { SpawnOptions } from './options.js';
import { spawn, type ContainedResult } from './process.js';

export interface RunOptions extends Omit<SpawnOptions, 'stdio'> {
  /** Text written to the command's stdin (then closed). Default: stdin is ignored. */
  input?: string | Buffer;
  /** Bytes kept per stream; past it the tree is terminated and run() rejects. Default 10 MiB. */
  maxBuffer?: number;
  /** Reject on a nonzero exit, a signal, a cancellation or a timeout. Default true. */
  reject?: boolean;
  /** Output encoding; 'buffer' returns Buffers. Default 'utf8'. */
  encoding?: BufferEncoding | 'buffer';
  /** Where stderr goes; default 'pipe' (collected). */
  stderr?: 'pipe' | 'inherit' | 'ignore';
  /** Also collect stdout and stderr interleaved in arrival order, as `all`. Default false. */
  all?: boolean;
}

export interface RunResult<T = string> extends ContainedResult {
  stdout: T;
  stderr: T;
  /** With `all: true`: stdout and stderr interleaved, chunk by chunk, in the order they arrived. */
  all?: T;
}

function collect(stream: Readable | null, max: number, onOverflow: () => void, both?: Buffer[]) {
  const chunks: Buffer[] = [];
  let size = 0;
  let overflowed = false;
  const done = stream ? once(stream, 'close').then(() => undefined, () => undefined) : Promise.resolve();
  stream?.on('data', (chunk: Buffer) => {
    if (overflowed) return;
    // (What each stream keeps is bounded by max, so `all` is by twice that.)
    both?.push(size + chunk.length > max ? chunk.subarray(0, max - size) : chunk);
    if (size + chunk.length > max) {
      chunks.push(chunk.subarray(0, max - size));
      size = max;
      overflowed = true;
      onOverflow();
      return;
    }
    chunks.push(chunk);
    size += chunk.length;
  });
  return { done, get value() { return Buffer.concat(chunks); }, get overflowed() { return overflowed; } };
}

/** Text output (the default encoding, or a text encoding such as 'latin1'): strings. */
export function run(command: string, args?: string[], options?: RunOptions & { encoding?: BufferEncoding }): Promise<RunResult<string>>;
/** encoding: 'buffer': Buffers. */
export function run(command: string, args: string[], options: RunOptions & { encoding: 'buffer' }): Promise<RunResult<Buffer>>;
/** An encoding only known at run time. */
export function run(command: string, args?: string[], options?: RunOptions): Promise<RunResult<string | Buffer>>;
export async function run(command: string, args: string[] = [], options: RunOptions = {}): Promise<RunResult<string | Buffer>> {
  if (options !== null && typeof options === 'object' && 'stdio' in options && (options as { stdio?: unknown }).stdio !== undefined) {
    throw errors.runStdio();
  }
  const { input, maxBuffer = DEFAULT_MAX_BUFFER, reject = true, encoding = 'utf8', stderr = 'pipe', all = false, ...spawnOptions } = options;
  if (typeof maxBuffer !== 'number' || !(maxBuffer > 0)) throw errors.badMaxBuffer(maxBuffer);
  if (typeof all !== 'boolean') throw errors.invalidArg('all', all, 'true or false', 'ERR_INVALID_ARG_TYPE');
  const proc = spawn(command, args, {
    ...spawnOptions,
    stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', stderr],
  });
  let overflow = false;
  const onOverflow = () => {
    if (overflow) return;
    overflow = true;
    void proc.terminate({ grace: spawnOptions.interruptGrace ?? DEFAULT_INTERRUPT_GRACE_MS }).catch(() => {});
  };
  const both: Buffer[] | undefined = all ? [] : undefined;
  const out = collect(proc.stdout, maxBuffer, onOverflow, both);
  const err = collect(proc.stderr, maxBuffer, onOverflow, both);
  const withAll = <T extends object>(target: T): T => (both ? Object.assign(target, { all: decode(Buffer.concat(both)) }) : target);
  if (input !== undefined) proc.stdin?.end(input);

  let result: ContainedResult;
  try {
    result = await proc.result;
  } catch (error) {
    const e = error as CordonError;
    if (e.result) withAll(Object.assign(e, { stdout: decode(out.value), stderr: decode(err.value) }));
    throw e;
  }
  // The streams are ended, released by every writer, or destroyed at the
  // wait delay: their close is near. Bounded all the same.
  const bound = new Promise<void>((resolve) => setTimeout(resolve, spawnOptions.waitDelay ?? DEFAULT_WAIT_DELAY_MS).unref());
  await Promise.race([Promise.all([out.done, err.done]), bound]);

  function decode(b: Buffer): string | Buffer {
    return encoding === 'buffer' ? b : b.toString(encoding);
  }
  const full: RunResult<string | Buffer> = withAll({ ...result, stdout: decode(out.value), stderr: decode(err.value) });
  if (!reject) return full;
  let failure: RunFailure | undefined;
  if (overflow) failure = { kind: 'maxBuffer', maxBuffer };
  else if (result.reason === 'timeout') failure = { kind: 'timeout' };
  else if (result.reason === 'canceled') failure = { kind: 'canceled' };
  else if (result.signal) failure = { kind: 'signal', signal: result.signal, ...(result.limit ? { limit: result.limit } : {}) };
  else if (result.exitCode !== 0) failure = { kind: 'exit', exitCode: result.exitCode, ...(result.limit ? { limit: result.limit } : {}) };
  if (failure) {
    const shown = errors.showCommand(command, args, Boolean(spawnOptions.shell));
    const stderrText = typeof full.stderr === 'string' ? full.stderr : err.value.toString('utf8');
    const error = errors.commandFailed(failure, shown, spawnOptions.signal?.aborted ? spawnOptions.signal.reason : undefined, stderrText);
    Object.assign(error, { command: shown, result: full, stdout: full.stdout, stderr: full.stderr, exitCode: result.exitCode, signal: result.signal });
    if (both) Object.assign(error, { all: full.all });
    throw error;
  }
  return full;
}
