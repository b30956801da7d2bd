// run(): the execFile/execa shape. Collects stdout/stderr (bounded by
// maxBuffer) and rejects on a nonzero exit unless `reject: false`.
import { once } from 'node:events';
import type { Readable } from 'node:stream';
import { DEFAULT_INTERRUPT_GRACE_MS, DEFAULT_MAX_BUFFER, DEFAULT_WAIT_DELAY_MS } from './defaults.js';
import { duration } from './duration.js';
import * as errors from './errors.js';
import type { CordonError, RunFailure } from './errors.js';
import { SPAWN_OPTION_NAMES } from './options.js';
import { spawn, type SpawnOptions } from './process.js';
import type { ContainedResult } from './result.js';

export interface RunOptions extends Omit<SpawnOptions, 'stdio'> {
  /** Text written to the command's stdin (then closed). Default: stdin is ignored. */
  input?: string | Buffer | Uint8Array;
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

/** run()'s own option names, then spawn()'s but stdio (run() pipes the command itself): what an unknown-option error lists. */
const RUN_OPTION_NAMES: ReadonlySet<string> = new Set([
  'input', 'maxBuffer', 'reject', 'encoding', 'stderr', 'all',
  ...[...SPAWN_OPTION_NAMES].filter((name) => name !== 'stdio'),
]);

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

/**
 * What run() collects, as the options say: Buffers with `encoding: 'buffer'`,
 * strings with a text encoding or none, the union only where the encoding is
 * known at run time (options typed as RunOptions).
 */
export type RunOutput<O> = 'encoding' extends keyof O
  ? O extends { encoding: 'buffer' }
    ? Buffer
    : O extends { encoding?: BufferEncoding | undefined }
      ? string
      : string | Buffer
  : string;

/** run()'s result for these options: `all` is there (not optional) with `all: true`. */
export type RunResultFor<O> = RunResult<RunOutput<O>> & (O extends { all: true } ? { all: RunOutput<O> } : unknown);

/** The result's types follow the options: `encoding` (strings or Buffers) and `all`. */
export function run<const O extends RunOptions = Record<never, never>>(command: string, args?: readonly string[], options?: O): Promise<RunResultFor<O>>;
/** Options given in second place (`run(file, options)`, as Node's spawn and execa take them). */
export function run<const O extends RunOptions>(command: string, options: O): Promise<RunResultFor<O>>;
export async function run(command: string, argsOrOptions: readonly string[] | RunOptions = [], maybeOptions: RunOptions = {}): Promise<RunResult<string | Buffer>> {
  const optionsSecond = argsOrOptions !== null && typeof argsOrOptions === 'object' && !Array.isArray(argsOrOptions);
  const args = (optionsSecond ? [] : argsOrOptions) as string[];
  const options = (optionsSecond ? argsOrOptions : maybeOptions) as RunOptions;
  if (options !== null && typeof options === 'object' && 'stdio' in options && (options as { stdio?: unknown }).stdio !== undefined) {
    throw errors.runStdio();
  }
  if (options !== null && typeof options === 'object') {
    for (const [key, value] of Object.entries(options)) {
      if (!RUN_OPTION_NAMES.has(key) && value !== undefined) throw errors.unknownOption(key, RUN_OPTION_NAMES);
    }
  }
  const { input, maxBuffer = DEFAULT_MAX_BUFFER, reject = true, encoding = 'utf8', stderr = 'pipe', all = false, ...spawnOptions } = options ?? {};
  // Every run() option is checked before anything runs: a bad one found after
  // the spawn would leave a tree waiting on its stdin.
  if (typeof maxBuffer !== 'number' || !(maxBuffer > 0)) throw errors.badMaxBuffer(maxBuffer);
  if (typeof all !== 'boolean') throw errors.invalidArg('all', all, 'true or false', 'ERR_INVALID_ARG_TYPE');
  if (typeof reject !== 'boolean') throw errors.invalidArg('reject', reject, 'true or false', 'ERR_INVALID_ARG_TYPE');
  if (input !== undefined && typeof input !== 'string' && !(input instanceof Uint8Array)) {
    throw errors.invalidArg('input', input, 'a string, a Buffer or a Uint8Array', 'ERR_INVALID_ARG_TYPE');
  }
  if (encoding !== 'buffer' && (typeof encoding !== 'string' || !Buffer.isEncoding(encoding))) {
    throw errors.invalidArg('encoding', encoding, "'buffer' or a text encoding Buffer knows ('utf8', 'latin1', …)", 'ERR_INVALID_ARG_VALUE');
  }
  // With a terminal its input and output are the stdio (input is typed into it).
  if (spawnOptions.pty && (options ?? {}).stderr !== undefined) throw errors.terminalConflict('stderr');
  const proc = spawn(command, args, {
    ...spawnOptions,
    ...(spawnOptions.pty ? {} : { stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', stderr] as const }),
  });
  let overflow = false;
  const onOverflow = () => {
    if (overflow) return;
    overflow = true;
    void proc.terminate({ grace: duration('interruptGrace', spawnOptions.interruptGrace, DEFAULT_INTERRUPT_GRACE_MS) }).catch(() => {});
  };
  const both: Buffer[] | undefined = all ? [] : undefined;
  const out = collect(proc.stdout, maxBuffer, onOverflow, both);
  const err = collect(proc.stderr, maxBuffer, onOverflow, both);
  const withAll = <T extends object>(target: T): T => (both ? Object.assign(target, { all: decode(Buffer.concat(both)) }) : target);
  if (input !== undefined && spawnOptions.pty) proc.stdin?.write(input);  // (a terminal's input has no end)
  else if (input !== undefined) proc.stdin?.end(input);

  let result: ContainedResult;
  try {
    result = await proc.result;
  } catch (error) {
    const e = error as CordonError;
    if (e.result) {
      const r = e.result as ContainedResult;
      withAll(Object.assign(e, { stdout: decode(out.value), stderr: decode(err.value), exitCode: r.exitCode, signal: r.signal }));
    }
    throw e;
  }
  // The streams are ended, released by every writer, or destroyed at the
  // wait delay: their close is near. Bounded all the same.
  const bound = new Promise<void>((resolve) => setTimeout(resolve, duration('waitDelay', spawnOptions.waitDelay, DEFAULT_WAIT_DELAY_MS)).unref());
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
