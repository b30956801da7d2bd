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
import { EventEmitter } from 'node:events';
import { PassThrough, type Readable, type Writable } from 'node:stream';
import { promisify } from 'node:util';
import { DEFAULT_WAIT_DELAY_MS } from './defaults.js';
import { duration } from './duration.js';
import * as errors from './errors.js';
import type { CordonError } from './errors.js';
import { ContainedProcess, spawn as cordonSpawn } from './process.js';
import { launchOf, optionsObject, signalName, type Launch } from './child-process-options.js';

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
export type { CordonExtras } from './child-process-options.js';

const kCordon = Symbol('cordon');

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

/**
 * What spawn(), exec() and execFile() return: a ChildProcess-shaped
 * EventEmitter over one contained tree ('spawn', 'exit', 'close', 'error' in
 * Node's order). contained(child) gives cordon's ContainedProcess.
 */
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

// The sync variants wait in a helper process: lib/child-process-sync.ts.
export { execFileSync, execSync, spawnSync } from './child-process-sync.js';
