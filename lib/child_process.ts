// cordon/child_process (issue #48): node:child_process's launching functions
// with its exports, signatures, events and error shapes, every tree
// contained: a host swaps one import and nothing it starts outlives it (the
// root's end, the host's exit or death end the whole tree: docs/contract.md
// C5, C8). Each call is a cordon spawn() (lib/process.ts) behind an
// EventEmitter shaped as Node's ChildProcess; exec()/execFile() collect its
// output as Node's do. What differs from Node, and what is not here yet (the
// fork): docs/child-process.md. The sync variants wait in a helper process
// (lib/sync-helper.ts).
/// <reference types="node" preserve="true" />
import type * as cp from 'node:child_process';
import { spawnSync as nodeSpawnSync } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { PassThrough, type Readable, type Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { DEFAULT_WAIT_DELAY_MS } from './defaults.js';
import { duration } from './duration.js';
import * as errors from './errors.js';
import type { CordonError } from './errors.js';
import { normalizeOptions, validateCommand, type StdioOption } from './options.js';
import { ContainedProcess, spawn as cordonSpawn, type SpawnOptions as CordonSpawnOptions } from './process.js';
import { DEFAULT_SHELL } from './shell.js';

export type {
  ChildProcess,
  ChildProcessByStdio,
  ChildProcessWithoutNullStreams,
  CommonOptions,
  ExecException,
  ExecFileException,
  ExecFileOptions,
  ExecFileOptionsWithBufferEncoding,
  ExecFileOptionsWithStringEncoding,
  ExecOptions,
  ExecOptionsWithBufferEncoding,
  ExecOptionsWithStringEncoding,
  IOType,
  ProcessEnvOptions,
  SpawnOptions,
  SpawnOptionsWithStdioTuple,
  SpawnOptionsWithoutStdio,
  StdioNull,
  StdioOptions,
  StdioPipe,
  StdioPipeNamed,
} from 'node:child_process';
export type { ContainedProcess } from './process.js';

/**
 * cordon's own options, taken beside Node's by every function here
 * (`waitDelay` bounds 'close' after the root exits: default 2000 ms).
 */
export type CordonExtras = Pick<CordonSpawnOptions, 'waitDelay' | 'grace' | 'interruptGrace' | 'leftovers' | 'containment' | 'tier' | 'log' | 'limits'>;
const CORDON_EXTRAS = ['waitDelay', 'grace', 'interruptGrace', 'leftovers', 'containment', 'tier', 'log', 'limits'] as const;

const kCordon = Symbol('cordon');

/** A Node-shaped option object: anything but an object is Node's ERR_INVALID_ARG_TYPE. */
function optionsObject(value: unknown, name = 'options'): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw errors.invalidArg(name, value, 'an object', 'ERR_INVALID_ARG_TYPE');
  return value as Record<string, unknown>;
}

function signalName(value: unknown, name: string): NodeJS.Signals | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number') {
    const found = Object.entries(osConstants.signals).find(([, n]) => n === value)?.[0];
    if (found) return found as NodeJS.Signals;
  } else if (typeof value === 'string' && value in osConstants.signals) {
    return value as NodeJS.Signals;
  }
  throw errors.invalidArg(name, value, "a signal name such as 'SIGTERM', or its number", typeof value === 'string' || typeof value === 'number' ? 'ERR_INVALID_ARG_VALUE' : 'ERR_INVALID_ARG_TYPE');
}

/** Node's stdio forms as cordon's three entries; what has no equal is refused before anything runs. */
function stdioOption(value: unknown): StdioOption | [StdioOption, StdioOption, StdioOption] | undefined {
  if (value === undefined) return undefined;
  const entry = (v: unknown, i: number): StdioOption => {
    if (v === null || v === undefined || v === 'overlapped') return 'pipe';
    if (v === 'ipc') throw errors.childUnsupported("stdio 'ipc'", 'an IPC channel (send(), fork()) is not provided yet.');
    return v as StdioOption;
  };
  if (typeof value === 'string') return entry(value, 0);
  if (!Array.isArray(value)) throw errors.invalidArg('stdio', value, 'a string or an array', 'ERR_INVALID_ARG_TYPE');
  const three = [0, 1, 2].map((i) => entry(value[i], i)) as [StdioOption, StdioOption, StdioOption];
  for (let i = 3; i < value.length; i++) {
    const extra: unknown = value[i];
    if (extra === 'ipc') entry(extra, i);
    if (extra !== null && extra !== undefined && extra !== 'ignore') {
      throw errors.childUnsupported(`stdio[${i}] (${typeof extra === 'string' ? `'${extra}'` : typeof extra})`, 'a command gets stdin, stdout and stderr only; descriptors past 2 can only be \'ignore\'.');
    }
  }
  return three;
}

interface Launch {
  /** The stdio entries as cordon takes them (undefined: all 'pipe'). */
  stdio: StdioOption | [StdioOption, StdioOption, StdioOption] | undefined;
  file: string;
  args: string[];
  /** What Node reports: spawnfile and spawnargs. */
  spawnfile: string;
  spawnargs: string[];
  options: CordonSpawnOptions;
  killSignal: NodeJS.Signals;
  signal: AbortSignal | undefined;
  timeout: number;
}

/** Node's spawn() arguments (args optional, options in second place) read and checked, as cordon's spawn options. */
function launchOf(file: unknown, argsIn: unknown, optionsIn: unknown): Launch {
  if (typeof file !== 'string') throw errors.invalidArg('file', file, 'a string', 'ERR_INVALID_ARG_TYPE');
  if (file.length === 0) throw errors.invalidArg('file', file, 'a non-empty string');
  let args: unknown = argsIn;
  let raw: unknown = optionsIn;
  if (args !== undefined && args !== null && !Array.isArray(args)) {
    if (typeof args !== 'object') throw errors.invalidArg('args', args, 'an array of strings', 'ERR_INVALID_ARG_TYPE');
    raw = args;
    args = [];
  }
  const list = (args ?? []) as unknown[];
  for (let i = 0; i < list.length; i++) if (typeof list[i] !== 'string') throw errors.invalidArg(`args[${i}]`, list[i], 'a string', 'ERR_INVALID_ARG_TYPE');
  const o = optionsObject(raw);
  if (o.detached !== undefined && typeof o.detached !== 'boolean') throw errors.invalidArg('detached', o.detached, 'a boolean', 'ERR_INVALID_ARG_TYPE');
  for (const name of ['windowsHide', 'windowsVerbatimArguments'] as const) {
    if (o[name] !== undefined && typeof o[name] !== 'boolean') throw errors.invalidArg(name, o[name], 'a boolean', 'ERR_INVALID_ARG_TYPE');
  }
  if (o.windowsVerbatimArguments === true && process.platform === 'win32') {
    throw errors.childUnsupported('windowsVerbatimArguments: true', 'cordon quotes each argument for the command itself on Windows.');
  }
  if (o.serialization !== undefined && o.serialization !== 'json' && o.serialization !== 'advanced') {
    throw errors.invalidArg('serialization', o.serialization, "'json' or 'advanced'");
  }
  if (o.timeout !== undefined && (typeof o.timeout !== 'number' || !Number.isInteger(o.timeout) || o.timeout < 0)) {
    throw errors.invalidArg('timeout', o.timeout, 'a whole number of milliseconds, 0 or more', typeof o.timeout === 'number' ? 'ERR_INVALID_ARG_VALUE' : 'ERR_INVALID_ARG_TYPE');
  }
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw errors.invalidArg('signal', o.signal, 'an AbortSignal', 'ERR_INVALID_ARG_TYPE');
  const killSignal = signalName(o.killSignal, 'killSignal') ?? 'SIGTERM';
  const shell = o.shell;
  if (shell !== undefined && typeof shell !== 'boolean' && typeof shell !== 'string') throw errors.invalidArg('shell', shell, 'a boolean or a string', 'ERR_INVALID_ARG_TYPE');
  let command = file;
  let commandArgs = list as string[];
  let spawnfile = file;
  let spawnargs = [typeof o.argv0 === 'string' ? o.argv0 : file, ...commandArgs];
  if (shell) {
    // Node joins the file and its arguments with spaces: one line for the shell.
    command = [file, ...commandArgs].join(' ');
    commandArgs = [];
    spawnfile = typeof shell === 'string' ? shell : process.platform === 'win32' ? process.env.comspec || 'cmd.exe' : DEFAULT_SHELL;
    spawnargs = process.platform === 'win32' ? [spawnfile, '/d', '/s', '/c', `"${command}"`] : [spawnfile, '-c', command];
  }
  const options: CordonSpawnOptions = {
    cwd: o.cwd as string | URL | undefined,
    // Node's env is the whole environment, not laid over process.env.
    env: (o.env ?? process.env) as NodeJS.ProcessEnv,
    extendEnv: false,
    argv0: o.argv0 as string | undefined,
    stdio: stdioOption(o.stdio),
    uid: o.uid as number | undefined,
    gid: o.gid as number | undefined,
    shell: shell === undefined || shell === false ? undefined : (shell as boolean | string),
    timeout: o.timeout as number | undefined,
    // SIGKILL is no polite signal: the forced kill at once.
    ...(killSignal === 'SIGKILL' ? { interruptGrace: 0 } : { killSignal }),
  };
  if (o.signal && !(o.signal as AbortSignal).aborted) options.signal = o.signal as AbortSignal;
  for (const name of CORDON_EXTRAS) if (o[name] !== undefined) (options as Record<string, unknown>)[name] = o[name];
  return { stdio: options.stdio, file: command, args: commandArgs, spawnfile, spawnargs, options, killSignal, signal: o.signal as AbortSignal | undefined, timeout: (o.timeout as number | undefined) ?? 0 };
}

/**
 * What spawn(), exec() and execFile() return: a ChildProcess-shaped
 * EventEmitter over one contained tree ('spawn', 'exit', 'close', 'error' in
 * Node's order). contained(child) gives cordon's ContainedProcess.
 */
let failedOutputSeen: { value: null | undefined } | undefined;
/**
 * What this Node's own spawnSync gives as stdout/stderr when the command
 * cannot start: null up to Node 22, undefined since. Asked of Node once, the
 * first time it is needed (a path that cannot exist: nothing runs).
 */
function failedOutput(): null | undefined {
  failedOutputSeen ??= { value: (nodeSpawnSync('/nonexistent/cordon-spawnsync-probe').stdout as unknown) === undefined ? undefined : null };
  return failedOutputSeen.value;
}

/**
 * A readable the caller gets for `pipe`, fed by it only after release(): the
 * pipe keeps its data (the kernel's buffer, then backpressure) until then.
 * Destroying the caller's stream destroys the pipe.
 */
function holdUntilSpawn(pipe: Readable): { stream: Readable; release(): void } {
  const stream = new PassThrough();
  let released = false;
  stream.once('close', () => {
    if (!pipe.destroyed) pipe.destroy();
  });
  return {
    stream,
    release() {
      if (released) return;
      released = true;
      pipe.on('error', (error) => stream.destroy(error));
      // A pipe cordon closes at the wait delay ends without 'end': the caller's ends too.
      pipe.on('close', () => {
        if (!stream.writableEnded) stream.end();
      });
      pipe.pipe(stream);
    },
  };
}

class ContainedChildProcess extends EventEmitter {
  pid: number | undefined = undefined;
  stdin: Writable | null = null;
  stdout: Readable | null = null;
  stderr: Readable | null = null;
  stdio: [Writable | null, Readable | null, Readable | null] = [null, null, null];
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  killed = false;
  readonly connected = false;
  readonly spawnfile: string;
  readonly spawnargs: string[];
  [kCordon]: ContainedProcess | undefined;
  private waitDelay = DEFAULT_WAIT_DELAY_MS;

  constructor(launch: Launch) {
    super();
    this.spawnfile = launch.spawnfile;
    this.spawnargs = launch.spawnargs;
    if (launch.signal?.aborted) {
      // Node starts it and kills it at once; nothing is started here.
      process.nextTick(() => {
        this.emit('error', errors.childAborted(launch.signal!.reason));
        this.emit('close', null, launch.killSignal);
      });
      return;
    }
    let proc: ContainedProcess;
    try {
      proc = cordonSpawn(launch.file, launch.args, launch.options);
    } catch (error) {
      const e = error as CordonError;
      // Bad input throws, as Node's spawn does; a launch failure is 'error' then 'close', as Node's.
      if (e.stage !== 'launch') throw e;
      this.launchFailed(e, launch);
      return;
    }
    this[kCordon] = proc;
    this.waitDelay = duration('waitDelay', launch.options.waitDelay, DEFAULT_WAIT_DELAY_MS);
    this.stdin = proc.stdin;
    // Node emits 'spawn' before any output (it knows the pid at once); cordon
    // learns the pid from the anchor, which may report it after the command's
    // first bytes reached the pipe. So the caller reads each output through a
    // stream that the pipe starts to feed only once 'spawn' was emitted (or the
    // launch failed): until then the pipe is not read, and nothing is lost.
    const held = [proc.stdout, proc.stderr].map((pipe) => (pipe ? holdUntilSpawn(pipe) : null));
    this.stdout = held[0]?.stream ?? null;
    this.stderr = held[1]?.stream ?? null;
    const release = () => {
      for (const h of held) h?.release();
    };
    this.once('spawn', release);
    this.once('error', release);
    this.once('close', release);
    this.stdio = [this.stdin, this.stdout, this.stderr];
    // A timeout or an abort stops the tree (cordon's timers, set first, fire first): killed, as Node says it.
    const timer = launch.timeout > 0 ? setTimeout(() => this.stoppedByCordon(), launch.timeout).unref() : undefined;
    const onAbort = () => {
      this.stoppedByCordon();
      this.emit('error', errors.childAborted(launch.signal!.reason));
    };
    launch.signal?.addEventListener('abort', onAbort, { once: true });
    this.once('close', () => {
      clearTimeout(timer);
      launch.signal?.removeEventListener('abort', onAbort);
    });
    proc.on('spawn', (pid) => {
      this.pid = pid;
      this.emit('spawn');
    });
    proc.on('exit', (code, signal) => {
      this.exitCode = code;
      this.signalCode = signal;
      this.emit('exit', code, signal);
      // As Node's flushStdio: output nobody reads flows away, so 'close' comes.
      for (const stream of [this.stdout, this.stderr]) {
        if (stream && stream.listenerCount('data') === 0 && stream.listenerCount('readable') === 0) stream.resume();
      }
    });
    proc.result.then(
      () => this.closeAfterStreams(),
      (error: CordonError) => {
        if (error.stage === 'launch' && this.exitCode === null && this.signalCode === null) {
          this.launchFailed(error, launch, true);
          return;
        }
        // A cleanup failure is never swallowed: 'error', then 'close'.
        this.emit('error', error);
        this.closeAfterStreams();
      },
    );
  }

  private stoppedByCordon(): void {
    if (this.exitCode === null && this.signalCode === null) this.killed = true;
  }

  private launchFailed(cause: CordonError, launch: Launch, now = false): void {
    const error = errors.childSpawnFailed({ code: String(cause.code), errno: cause.errno }, launch.spawnfile, launch.spawnargs.slice(1), 'spawn', cause);
    const fire = () => {
      this.emit('error', error);
      this.emit('close', cause.errno ?? -1, null);
    };
    if (now) fire();
    else process.nextTick(fire);
  }

  /** 'close' once the result settled and the output streams closed (bounded: the wait delay). */
  private closeAfterStreams(): void {
    const open = [this.stdout, this.stderr].filter((s): s is Readable => s !== null && !s.closed && !s.destroyed);
    let done = false;
    const close = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      this.emit('close', this.exitCode, this.signalCode);
    };
    const timer = setTimeout(close, this.waitDelay);
    if (open.length === 0) return close();
    let left = open.length;
    for (const s of open) s.once('close', () => --left === 0 && close());
  }

  /** As Node's: the signal (default SIGTERM) to the root alone; true when sent. */
  kill(signal?: NodeJS.Signals | number): boolean {
    const proc = this[kCordon];
    const sig = signal === undefined ? 'SIGTERM' : signal === 0 ? 0 : signalName(signal, 'signal')!;
    if (!proc) return false;
    const sent = proc.kill(sig);
    if (sent && sig !== 0) this.killed = true;
    return sent;
  }

  /** The host's event loop no longer waits for this tree (its end still ends the tree). */
  unref(): void {
    anchorOf(this[kCordon])?.unref();
  }

  ref(): void {
    anchorOf(this[kCordon])?.ref();
  }

  [Symbol.dispose](): void {
    if (this.exitCode === null && this.signalCode === null) this.kill();
  }
}

/** The anchor channel of a tree (private to ContainedProcess: ref/unref is all this reaches of it). */
function anchorOf(proc: ContainedProcess | undefined): { ref(): void; unref(): void } | undefined {
  return (proc as unknown as { anchor?: { ref(): void; unref(): void } } | undefined)?.anchor;
}

/** Node's spawn(): the tree contained. */
export const spawn = function spawn(file: string, args?: unknown, options?: unknown): ContainedChildProcess {
  return new ContainedChildProcess(launchOf(file, args, options));
} as unknown as typeof cp.spawn;

type Callback = (error: Error | null, stdout: string | Buffer, stderr: string | Buffer) => void;

/** Node's execFile(): output collected (maxBuffer, encoding); the callback at 'close' or at the first 'error'. */
function execFileImpl(file: string, ...rest: unknown[]): ContainedChildProcess {
  let args: unknown = undefined;
  let options: unknown = undefined;
  let callback: Callback | undefined;
  let i = 0;
  if (Array.isArray(rest[i]) || rest[i] === null) args = rest[i++];
  if (rest[i] !== undefined && rest[i] !== null && typeof rest[i] === 'object') options = rest[i++];
  else if (rest[i] === null || (rest[i] === undefined && i < rest.length - 1)) i++;
  if (typeof rest[i] === 'function') callback = rest[i++] as Callback;
  if (i < rest.length && rest[i] !== undefined) throw errors.invalidArg('args', rest[i], 'an array, an options object or a callback', 'ERR_INVALID_ARG_TYPE');
  const o = { ...optionsObject(options) };
  const maxBuffer = o.maxBuffer === undefined ? 1024 * 1024 : o.maxBuffer;
  if (typeof maxBuffer !== 'number' || Number.isNaN(maxBuffer) || maxBuffer < 0) {
    throw errors.invalidArg('maxBuffer', maxBuffer, 'a number, 0 or more (Infinity allowed)', typeof maxBuffer === 'number' ? 'ERR_INVALID_ARG_VALUE' : 'ERR_INVALID_ARG_TYPE');
  }
  const encoding = o.encoding === undefined ? 'utf8' : o.encoding;
  if (encoding !== null && encoding !== 'buffer' && (typeof encoding !== 'string' || !Buffer.isEncoding(encoding))) {
    throw errors.invalidArg('encoding', encoding, "a text encoding, 'buffer' or null");
  }
  const launch = launchOf(file, args ?? [], { ...o, stdio: 'pipe' });
  const child = new ContainedChildProcess(launch);
  let cmd = file;
  if (Array.isArray(args) && args.length) cmd += ` ${args.join(' ')}`;
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  const sizes = { stdout: 0, stderr: 0 };
  let failure: Error | undefined;
  let called = false;
  const decode = (chunks: Buffer[]): string | Buffer => (encoding === null || encoding === 'buffer' ? Buffer.concat(chunks) : Buffer.concat(chunks).toString(encoding as BufferEncoding));
  const finish = (code?: number | null, signal?: NodeJS.Signals | null) => {
    if (called) return;
    called = true;
    if (!callback) return;
    const stdout = decode(out);
    const stderr = decode(err);
    if (!failure && code === 0 && signal === null) return callback(null, stdout, stderr);
    const error = failure ?? errors.childCommandFailed(cmd, String(stderr), { code: code ?? null, killed: child.killed, signal: signal ?? null });
    (error as Error & { cmd: string }).cmd = cmd;
    callback(error, stdout, stderr);
  };
  const collect = (name: 'stdout' | 'stderr', chunks: Buffer[]) => (chunk: Buffer) => {
    if (failure) return;
    const room = maxBuffer - sizes[name];
    if (chunk.length > room) {
      chunks.push(chunk.subarray(0, Math.max(0, room)));
      sizes[name] = maxBuffer;
      failure = errors.childMaxBuffer(name);
      // The whole tree stops (killSignal, then SIGKILL after the interrupt grace), as a timeout stops it.
      child.killed = true;
      void child[kCordon]?.terminate({ grace: launch.options.interruptGrace ?? 500 }).catch(() => {});
      return;
    }
    chunks.push(chunk);
    sizes[name] += chunk.length;
  };
  child.stdout?.on('data', collect('stdout', out));
  child.stderr?.on('data', collect('stderr', err));
  child.on('close', (code: number | null, signal: NodeJS.Signals | null) => finish(code, signal));
  child.on('error', (e: Error) => {
    failure = e;
    finish();
  });
  return child;
}

/** Node's exec(): the command line through a shell (/bin/sh, or options.shell). */
function execImpl(command: string, ...rest: unknown[]): ContainedChildProcess {
  let options: unknown = undefined;
  let callback: unknown = undefined;
  if (typeof rest[0] === 'function') callback = rest[0];
  else [options, callback] = rest;
  const o = { ...optionsObject(options) };
  o.shell = typeof o.shell === 'string' ? o.shell : true;
  return execFileImpl(command, o, callback as Callback | undefined);
}

/** As Node's util.promisify.custom on exec/execFile: resolves { stdout, stderr }; rejects with the error, stdout and stderr on it; `.child` is the process. */
function promised(orig: (...args: unknown[]) => ContainedChildProcess) {
  return (...args: unknown[]) => {
    let settle!: { resolve: (v: { stdout: string | Buffer; stderr: string | Buffer }) => void; reject: (e: unknown) => void };
    const promise = new Promise<{ stdout: string | Buffer; stderr: string | Buffer }>((resolve, reject) => (settle = { resolve, reject })) as Promise<{ stdout: string | Buffer; stderr: string | Buffer }> & { child: ContainedChildProcess };
    promise.child = orig(...args, (error: Error | null, stdout: string | Buffer, stderr: string | Buffer) => {
      if (error !== null) settle.reject(Object.assign(error, { stdout, stderr }));
      else settle.resolve({ stdout, stderr });
    });
    return promise;
  };
}

Object.defineProperty(execFileImpl, promisify.custom, { value: promised(execFileImpl as (...args: unknown[]) => ContainedChildProcess), enumerable: false });
Object.defineProperty(execImpl, promisify.custom, { value: promised(execImpl as (...args: unknown[]) => ContainedChildProcess), enumerable: false });

/** Node's execFile(): the tree contained. */
export const execFile = execFileImpl as unknown as typeof cp.execFile;
/** Node's exec(): the tree contained. */
export const exec = execImpl as unknown as typeof cp.exec;

/**
 * cordon's ContainedProcess behind a process this module started: its
 * `result` (the tree's fate, leftovers, coverage), `terminate()`,
 * `members()`. Undefined for one whose launch failed (nothing ran);
 * ERR_INVALID_ARG_VALUE for anything else.
 */
export function contained(child: cp.ChildProcess): ContainedProcess | undefined {
  if (!(child instanceof ContainedChildProcess)) throw errors.invalidArg('child', typeof child, 'a process cordon/child_process started');
  return child[kCordon];
}

// The sync variants: Node's spawnSync runs lib/sync-helper.ts, which runs the
// command contained (see there). Built, it sits beside this file; run from
// the TypeScript sources (the tests), it is the built one in dist/.
const HELPER = ((built: string) => (existsSync(built) ? built : fileURLToPath(new URL('../dist/sync-helper.js', import.meta.url))))(fileURLToPath(new URL('./sync-helper.js', import.meta.url)));

interface SyncResult {
  pid: number;
  output: Array<string | Buffer | null> | null;
  stdout: string | Buffer | null | undefined;
  stderr: string | Buffer | null | undefined;
  status: number | null;
  signal: NodeJS.Signals | null;
  error?: Error;
}

function spawnSyncImpl(file: string, argsIn?: unknown, optionsIn?: unknown): SyncResult {
  let args = argsIn;
  let raw = optionsIn;
  if (args !== undefined && args !== null && !Array.isArray(args)) {
    raw = args;
    args = [];
  }
  const o = optionsObject(raw);
  const launch = launchOf(file, args ?? [], o);
  const maxBuffer = o.maxBuffer === undefined ? 1024 * 1024 : o.maxBuffer;
  if (typeof maxBuffer !== 'number' || Number.isNaN(maxBuffer) || maxBuffer < 0) {
    throw errors.invalidArg('maxBuffer', maxBuffer, 'a number, 0 or more (Infinity allowed)', typeof maxBuffer === 'number' ? 'ERR_INVALID_ARG_VALUE' : 'ERR_INVALID_ARG_TYPE');
  }
  const encoding = o.encoding === undefined || o.encoding === null ? 'buffer' : o.encoding;
  if (encoding !== 'buffer' && (typeof encoding !== 'string' || !Buffer.isEncoding(encoding))) throw errors.invalidArg('encoding', encoding, "a text encoding or 'buffer'");
  const { stdio, signal: _signal, ...options } = launch.options;
  if (options.cwd instanceof URL) options.cwd = fileURLToPath(options.cwd);
  const failure = (code: string, errno: number | undefined, cause?: unknown): SyncResult => ({
    error: errors.childSpawnFailed({ code, errno }, launch.spawnfile, launch.spawnargs.slice(1), 'spawnSync', cause),
    status: null,
    signal: null,
    output: null,
    pid: 0,
    stdout: failedOutput(),
    stderr: failedOutput(),
  });
  // What cordon refuses is refused here, before the helper runs: bad input
  // throws; a launch failure known now (a missing cwd) is the result's error.
  try {
    validateCommand(launch.file, launch.args);
    normalizeOptions(options);
  } catch (error) {
    const e = error as CordonError;
    if (e.stage !== 'launch') throw e;
    return failure(String(e.code), e.errno, e);
  }
  const three = Array.isArray(launch.stdio) ? launch.stdio : [launch.stdio ?? 'pipe', launch.stdio ?? 'pipe', launch.stdio ?? 'pipe'];
  const ran = nodeSpawnSync(process.execPath, ['--no-warnings', HELPER], {
    stdio: [...three, 'pipe'] as cp.StdioOptions,
    env: { ...process.env, CORDON_SYNC_REQUEST: JSON.stringify({ file: launch.file, args: launch.args, options }) },
    input: o.input as string | NodeJS.ArrayBufferView | undefined,
    maxBuffer,
    killSignal: 'SIGTERM',
    windowsHide: true,
  });
  let pid = 0;
  let exit: { code: number | null; signal: NodeJS.Signals | null; reason: string } | undefined;
  let launchError: { code: string; errno?: number; stage?: string; message: string } | undefined;
  for (const line of (ran.output?.[3]?.toString() ?? '').split('\n')) {
    if (!line) continue;
    const m = JSON.parse(line) as { pid?: number; exit?: typeof exit; error?: typeof launchError };
    if (m.pid !== undefined) pid = m.pid;
    if (m.exit) exit = m.exit;
    if (m.error) launchError = m.error;
  }
  if (launchError && pid === 0) return failure(launchError.code, launchError.errno);
  const decode = (b: Buffer | string | null | undefined): string | Buffer | null => (b === null || b === undefined ? null : encoding === 'buffer' ? (b as Buffer) : b.toString(encoding as BufferEncoding));
  const stdout = decode(ran.output?.[1]);
  const stderr = decode(ran.output?.[2]);
  const result: SyncResult = { status: exit?.code ?? null, signal: exit?.signal ?? null, output: [null, stdout, stderr], pid, stdout, stderr };
  const code = (ran.error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENOBUFS') {
    // spawnSync stopped the helper (maxBuffer): the tree ended with it.
    Object.assign(result, { status: null, signal: launch.killSignal, error: errors.childSpawnFailed({ code, errno: -(osConstants.errno.ENOBUFS ?? 105) }, launch.spawnfile, launch.spawnargs.slice(1), 'spawnSync') });
  } else if (ran.error) {
    throw ran.error;
  } else if (exit?.reason === 'timeout') {
    Object.assign(result, { status: null, signal: exit.signal ?? launch.killSignal, error: errors.childSpawnFailed({ code: 'ETIMEDOUT', errno: -(osConstants.errno.ETIMEDOUT ?? 110) }, launch.spawnfile, launch.spawnargs.slice(1), 'spawnSync') });
  } else if (launchError) {
    // The tree ran and its cleanup failed: never taken for success.
    result.error = errors.childSpawnFailed({ code: launchError.code, errno: launchError.errno }, launch.spawnfile, launch.spawnargs.slice(1), 'spawnSync');
  } else if (!exit) {
    result.error = errors.childSpawnFailed({ code: 'ERR_CORDON_ANCHOR_LOST' }, launch.spawnfile, launch.spawnargs.slice(1), 'spawnSync');
  }
  return result;
}

/** As Node's checkExecSyncError: the spawnSync error with the result on it, or a nonzero exit as an Error. */
function execSyncError(ret: SyncResult, cmd: string): Error | undefined {
  if (ret.error) return Object.assign(ret.error, ret);
  if (ret.status === 0) return undefined;
  let message = `Command failed: ${cmd}`;
  if (ret.stderr && ret.stderr.length > 0) message += `\n${ret.stderr.toString()}`;
  return errors.childSyncCommandFailed(message, ret);
}

function execFileSyncImpl(file: string, argsIn?: unknown, optionsIn?: unknown): string | Buffer | null {
  let args = argsIn;
  let raw = optionsIn;
  if (args !== undefined && args !== null && !Array.isArray(args)) {
    raw = args;
    args = [];
  }
  const o = optionsObject(raw);
  const inheritStderr = !o.stdio;
  const ret = spawnSyncImpl(file, args ?? [], o);
  if (inheritStderr && ret.stderr) process.stderr.write(ret.stderr);
  const error = execSyncError(ret, [file, ...((args ?? []) as string[])].join(' '));
  if (error) throw error;
  return ret.stdout ?? null;
}

function execSyncImpl(command: string, optionsIn?: unknown): string | Buffer | null {
  const o = { ...optionsObject(optionsIn) };
  o.shell = typeof o.shell === 'string' ? o.shell : true;
  const inheritStderr = !o.stdio;
  const ret = spawnSyncImpl(command, [], o);
  if (inheritStderr && ret.stderr) process.stderr.write(ret.stderr);
  const error = execSyncError(ret, command);
  if (error) throw error;
  return ret.stdout ?? null;
}

/** Node's spawnSync(): the tree contained (it runs in a helper process the call waits for). */
export const spawnSync = spawnSyncImpl as unknown as typeof cp.spawnSync;
/** Node's execFileSync(): the tree contained. */
export const execFileSync = execFileSyncImpl as unknown as typeof cp.execFileSync;
/** Node's execSync(): the tree contained. */
export const execSync = execSyncImpl as unknown as typeof cp.execSync;
