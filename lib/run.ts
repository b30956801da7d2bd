// run(): the execFile/execa shape. Collects stdout/stderr (bounded by
// maxBuffer) and rejects on a nonzero exit unless `reject: false`.
import { once } from 'node:events';
import type { Readable } from 'node:stream';
import { DEFAULT_INTERRUPT_GRACE_MS, DEFAULT_MAX_BUFFER, DEFAULT_WAIT_DELAY_MS } from './defaults.js';
import { duration } from './duration.js';
import * as errors from './errors.js';
import type { CordonError, RunFailure } from './errors.js';
import { optionHint } from './option-hints.js';
import { SPAWN_OPTION_NAMES, type StdioOption } from './options.js';
import { spawn, type SpawnOptions } from './process.js';
import type { ContainedResult } from './result.js';
import { runStdio, type RunInput } from './run-stdio.js';

export interface RunOptions extends Omit<SpawnOptions, 'stdio'> {
  /** Written to the command's stdin, then stdin is ended: text, bytes, or a Readable piped in (one that fails midway stops the tree: ERR_CORDON_INPUT, whatever `reject` says). Default: stdin is ignored. Not with `inputFile`. */
  input?: RunInput;
  /** A file piped into the command's stdin (a path or file URL), opened before anything runs (a path that cannot be read is its errno, e.g. ENOENT). Not with `input`. */
  inputFile?: string | URL;
  /** Bytes kept per stream; past it the tree is terminated and run() rejects. Default 10 MiB. */
  maxBuffer?: number;
  /** Reject on a nonzero exit, a signal, a cancellation or a timeout. Default true. */
  reject?: boolean;
  /** Output encoding; 'buffer' returns Buffers. Default 'utf8'. */
  encoding?: BufferEncoding | 'buffer';
  /** Remove one final newline ('\n' or '\r\n') from `stdout`, `stderr` and `all`, Buffers too (as execa). Default true. */
  stripFinalNewline?: boolean;
  /** As child_process: one value for all three, or [stdin, stdout, stderr]. Not with `stdin`, `stdout` or `stderr`. */
  stdio?: StdioOption | readonly [StdioOption, StdioOption, StdioOption];
  /** The command's stdin. Default 'ignore' ('pipe' with `input` or `inputFile`; a 'pipe' without them is ended at once). */
  stdin?: StdioOption;
  /** The command's stdout. Default 'pipe' (collected); anything else: `result.stdout` is undefined. */
  stdout?: StdioOption;
  /** The command's stderr. Default 'pipe' (collected); anything else: `result.stderr` is undefined. */
  stderr?: StdioOption;
  /** Also collect stdout and stderr interleaved in arrival order, as `all`. Default false. */
  all?: boolean;
}

/**
 * What run() resolves with: the tree's result, what the command wrote, and
 * execa's names for what the result says (each beside cordon's own field).
 */
export interface RunResult<T = string> extends ContainedResult {
  /** What the command wrote on stdout; undefined when stdout was not 'pipe' (not collected). */
  stdout: T;
  /** What the command wrote on stderr; undefined when stderr was not 'pipe' (with `pty`: '', the terminal carries it in stdout). */
  stderr: T;
  /** With `all: true`: stdout and stderr interleaved, chunk by chunk, in the order they arrived (undefined when neither was collected). */
  all?: T;
  /** As execa's: the file and its arguments joined by spaces, unquoted (spawn()'s result.command is the file alone). */
  command: string;
  /** The same, quoted where a POSIX shell needs it (what a rejection's message shows). */
  escapedCommand: string;
  /** The command failed: it would reject with `reject: true` (a nonzero exit, a signal, a cancellation, a timeout, maxBuffer). */
  failed: boolean;
  /** `reason === 'timeout'`, as execa names it. */
  timedOut: boolean;
  /** `reason === 'canceled'` (the `signal` option was aborted), as execa names it. */
  isCanceled: boolean;
  /** `settledAt - startedAt`: from the spawn to the settled result, in milliseconds. */
  durationMs: number;
}

/** run()'s own option names, then spawn()'s (stdio here is run()'s own): what an unknown-option error lists. */
const RUN_OPTION_NAMES: ReadonlySet<string> = new Set([
  'input', 'inputFile', 'maxBuffer', 'reject', 'encoding', 'stripFinalNewline', 'stdin', 'stdout', 'stderr', 'all',
  ...SPAWN_OPTION_NAMES,
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
  return { done, get value() { return stream ? Buffer.concat(chunks) : undefined; }, get overflowed() { return overflowed; } };
}

/** `bytes` without one final '\n' or '\r\n' (the same bytes when it has none). */
function stripNewline(bytes: Buffer): Buffer {
  const n = bytes.length;
  if (n > 0 && bytes[n - 1] === 0x0a) return bytes.subarray(0, n > 1 && bytes[n - 2] === 0x0d ? n - 2 : n - 1);
  return bytes;
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

/** The stdio entry of stdout (1) or stderr (2) as the options' type says it: its own option, else `stdio`'s, else 'pipe'. */
type OutputOption<O, K extends 'stdout' | 'stderr', I extends 1 | 2> = K extends keyof O
  ? O[K]
  : 'stdio' extends keyof O
    ? O['stdio' & keyof O] extends infer S ? (S extends readonly unknown[] ? S[I] : S) : never
    : 'pipe';

/** A stream's field: the output where it is piped, undefined where it is not, either where that is known only at run time. */
type Collected<E, T> = [E] extends ['pipe' | undefined] ? T : [E] extends [Exclude<StdioOption, 'pipe'>] ? undefined : T | undefined;

/** run()'s result for these options: `stdout`/`stderr` follow `encoding` and the stdio options; `all` is there (not optional) with `all: true`. */
export type RunResultFor<O> = Omit<RunResult<RunOutput<O>>, 'stdout' | 'stderr'> & {
  stdout: Collected<OutputOption<O, 'stdout', 1>, RunOutput<O>>;
  stderr: Collected<OutputOption<O, 'stderr', 2>, RunOutput<O>>;
} & (O extends { all: true } ? { all: RunOutput<O> } : unknown);

/** Why a result is a failure for run() (first match wins), or undefined. */
function failureOf(result: ContainedResult, overflow: boolean, maxBuffer: number): RunFailure | undefined {
  if (overflow) return { kind: 'maxBuffer', maxBuffer };
  if (result.reason === 'timeout') return { kind: 'timeout' };
  if (result.reason === 'canceled') return { kind: 'canceled' };
  if (result.signal) return { kind: 'signal', signal: result.signal, ...(result.limit ? { limit: result.limit } : {}) };
  if (result.exitCode !== 0) return { kind: 'exit', exitCode: result.exitCode, ...(result.limit ? { limit: result.limit } : {}) };
  return undefined;
}

/** The result's facets under execa's names (each beside cordon's own field). */
function execaFacets(result: ContainedResult | undefined, failed: boolean, startedAt: number) {
  return {
    failed,
    timedOut: result?.reason === 'timeout',
    isCanceled: result?.reason === 'canceled',
    durationMs: result ? result.settledAt - result.startedAt : Date.now() - startedAt,
  };
}

/** The result's types follow the options: `encoding` (strings or Buffers), the stdio options and `all`. */
export function run<const O extends RunOptions = Record<never, never>>(command: string, args?: readonly string[], options?: O): Promise<RunResultFor<O>>;
/** Options given in second place (`run(file, options)`, as Node's spawn and execa take them). */
export function run<const O extends RunOptions>(command: string, options: O): Promise<RunResultFor<O>>;
export async function run(command: string, argsOrOptions: readonly string[] | RunOptions = [], maybeOptions: RunOptions = {}): Promise<RunResult<string | Buffer | undefined>> {
  const optionsSecond = argsOrOptions !== null && typeof argsOrOptions === 'object' && !Array.isArray(argsOrOptions);
  const args = (optionsSecond ? [] : argsOrOptions) as string[];
  const options = (optionsSecond ? argsOrOptions : maybeOptions) as RunOptions;
  if (options !== null && typeof options === 'object') {
    for (const [key, value] of Object.entries(options)) {
      if (!RUN_OPTION_NAMES.has(key) && value !== undefined) throw errors.unknownOption(key, RUN_OPTION_NAMES, optionHint(key, 'run'));
    }
  }
  const {
    input, inputFile, maxBuffer = DEFAULT_MAX_BUFFER, reject = true, encoding = 'utf8', stripFinalNewline = true,
    stdio: stdioOption, stdin, stdout, stderr, all = false, ...spawnOptions
    // Own properties only: what is set on Object.prototype is never an option (prototype pollution).
  } = (options ? Object.assign(Object.create(null), options) : {}) as RunOptions;
  // Every run() option is checked before anything runs: a bad one found after
  // the spawn would leave a tree waiting on its stdin.
  if (typeof maxBuffer !== 'number' || !(maxBuffer > 0)) throw errors.badMaxBuffer(maxBuffer);
  if (typeof all !== 'boolean') throw errors.invalidArg('all', all, 'true or false', 'ERR_INVALID_ARG_TYPE');
  if (typeof reject !== 'boolean') throw errors.invalidArg('reject', reject, 'true or false', 'ERR_INVALID_ARG_TYPE');
  if (typeof stripFinalNewline !== 'boolean') throw errors.invalidArg('stripFinalNewline', stripFinalNewline, 'true or false', 'ERR_INVALID_ARG_TYPE');
  if (encoding !== 'buffer' && (typeof encoding !== 'string' || !Buffer.isEncoding(encoding))) {
    throw errors.invalidArg('encoding', encoding, "'buffer' or a text encoding Buffer knows ('utf8', 'latin1', …)", 'ERR_INVALID_ARG_VALUE');
  }
  // Last: it opens the input file.
  const io = runStdio({ stdio: stdioOption, stdin, stdout, stderr, input, inputFile, pty: spawnOptions.pty });
  const execaCommand = [command, ...args].join(' ');
  const escapedCommand = errors.showCommand(command, args, Boolean(spawnOptions.shell));
  const startedAt = Date.now();
  /** An error of the command's run gets execa's fields too; one of the input's does not (nothing ran). */
  const describe = (error: unknown, result: ContainedResult | undefined) => {
    const e = error as CordonError;
    if (e && typeof e === 'object' && e.stage !== 'input') Object.assign(e, { command: execaCommand, escapedCommand, ...execaFacets(result, true, startedAt) });
    return e;
  };
  let proc: ReturnType<typeof spawn>;
  try {
    proc = spawn(command, args, { ...spawnOptions, ...(io.stdio ? { stdio: io.stdio } : {}) });
  } catch (error) {
    io.abandon();
    throw describe(error, undefined);
  }
  let overflow = false;
  const onOverflow = () => {
    if (overflow) return;
    overflow = true;
    void proc.terminate({ grace: duration('interruptGrace', spawnOptions.interruptGrace, DEFAULT_INTERRUPT_GRACE_MS) }).catch(() => {});
  };
  const both: Buffer[] | undefined = all ? [] : undefined;
  const out = collect(proc.stdout, maxBuffer, onOverflow, both);
  const err = collect(proc.stderr, maxBuffer, onOverflow, both);
  const terminal = Boolean(spawnOptions.pty);
  // An input that fails midway leaves the command with part of it: the tree
  // is stopped, and run() rejects with ERR_CORDON_INPUT (never a result that
  // looks whole).
  let inputFailure: CordonError | undefined;
  const inputClosed = io.feed(proc.stdin, terminal, (source, cause) => {
    inputFailure ??= errors.inputFailed(source, cause);
    void proc.terminate({ grace: duration('interruptGrace', spawnOptions.interruptGrace, DEFAULT_INTERRUPT_GRACE_MS) }).catch(() => {});
  });

  function decode(b: Buffer | undefined): string | Buffer | undefined {
    if (b === undefined) return undefined;
    const kept = stripFinalNewline ? stripNewline(b) : b;
    return encoding === 'buffer' ? kept : kept.toString(encoding);
  }
  const output = () => {
    // A terminal's stderr is the terminal: what it wrote is in stdout.
    const fields: { stdout: string | Buffer | undefined; stderr: string | Buffer | undefined; all?: string | Buffer | undefined } = {
      stdout: decode(out.value),
      stderr: decode(err.value ?? (terminal ? Buffer.alloc(0) : undefined)),
    };
    if (both) fields.all = proc.stdout || proc.stderr ? decode(Buffer.concat(both)) : undefined;
    return fields;
  };

  let result: ContainedResult;
  try {
    result = await proc.result;
  } catch (error) {
    void inputClosed();
    const e = error as CordonError;
    const r = e.result as ContainedResult | undefined;
    if (r) Object.assign(e, output(), { exitCode: r.exitCode, signal: r.signal });
    throw describe(e, r);
  }
  if (inputFailure) {
    void inputClosed();
    Object.assign(inputFailure, output(), { result, exitCode: result.exitCode, signal: result.signal });
    throw describe(inputFailure, result);
  }
  // The streams are ended, released by every writer, or destroyed at the
  // wait delay: their close is near. Bounded all the same.
  const bound = new Promise<void>((resolve) => setTimeout(resolve, duration('waitDelay', spawnOptions.waitDelay, DEFAULT_WAIT_DELAY_MS)).unref());
  // The input file cordon opened is closed too (the host keeps no descriptor of it).
  await Promise.race([Promise.all([out.done, err.done, inputClosed()]), bound]);

  const failure = failureOf(result, overflow, maxBuffer);
  const full: RunResult<string | Buffer | undefined> = {
    ...result,
    ...output(),
    command: execaCommand,
    escapedCommand,
    ...execaFacets(result, failure !== undefined, startedAt),
  };
  if (!reject || !failure) return full;
  const stderrText = typeof full.stderr === 'string' ? full.stderr : (err.value ?? Buffer.alloc(0)).toString('utf8');
  const error = errors.commandFailed(failure, escapedCommand, spawnOptions.signal?.aborted ? spawnOptions.signal.reason : undefined, stderrText);
  Object.assign(error, {
    command: execaCommand, escapedCommand, result: full, stdout: full.stdout, stderr: full.stderr, exitCode: result.exitCode, signal: result.signal,
    failed: true, timedOut: full.timedOut, isCanceled: full.isCanceled, durationMs: full.durationMs,
  });
  if (both) Object.assign(error, { all: full.all });
  throw error;
}
