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
import { getSystemErrorName, promisify } from 'node:util';
import { DEFAULT_WAIT_DELAY_MS } from './defaults.js';
import { duration } from './duration.js';
import * as errors from './errors.js';
import type { CordonError } from './errors.js';
import { ContainedProcess, kOnCancel, spawn as cordonSpawn } from './process.js';
import { launchOf, own, signalName, type Launch } from './child-process-options.js';

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

// The streams this module hands out (a child's stdin, stdout, stderr): one of
// them given as another child's stdio is relayed by the host (see relayStdio).
const ours = new WeakSet<object>();

/**
 * Node passes a child's pipe to another child as its descriptor. cordon's
 * streams have none of their own (the pipes are the anchor's, and the output
 * is held until 'spawn'), so where the caller gives one of this module's
 * streams as stdio, the command gets a pipe and the host relays: a readable
 * into the command's stdin (until the command exits: the readable is the
 * caller's again then), the command's stdout or stderr into a writable
 * (never ending it: other writers may share it, as they share a pipe).
 */
function relayStdio(launch: Launch): Array<{ index: number; stream: Readable | Writable }> {
  const stdio = launch.options.stdio;
  if (!Array.isArray(stdio)) return [];
  const relays: Array<{ index: number; stream: Readable | Writable }> = [];
  const entries = [...stdio] as unknown[];
  for (let index = 0; index < 3; index++) {
    const entry = entries[index];
    if (entry !== null && typeof entry === 'object' && ours.has(entry)) {
      relays.push({ index, stream: entry as Readable | Writable });
      entries[index] = 'pipe';
    }
  }
  if (relays.length > 0) launch.options.stdio = entries as typeof stdio;
  return relays;
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
      // Node starts it and kills it at once ('error', then 'exit' and 'close'
      // with killSignal); nothing is started here, the events are the same.
      this.killed = true;
      process.nextTick(() => {
        this.emit('error', errors.childAborted(launch.signal!.reason));
        this.signalCode = launch.killSignal;
        this.emit('exit', null, launch.killSignal);
        this.emit('close', null, launch.killSignal);
      });
      return;
    }
    const relays = relayStdio(launch);
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
    for (const relay of relays) {
      if (relay.index === 0) {
        const source = relay.stream as Readable;
        const sink = this.stdin!;
        sink.on('error', () => {}); // the command stopped reading (EPIPE): the relay ends
        source.pipe(sink);
        this.once('exit', () => source.unpipe(sink));
        this.stdin = null;
      } else {
        const from = relay.index === 1 ? this.stdout! : this.stderr!;
        from.pipe(relay.stream as Writable, { end: false });
        if (relay.index === 1) this.stdout = null;
        else this.stderr = null;
      }
    }
    this.stdio = [this.stdin, this.stdout, this.stderr];
    for (const stream of this.stdio) if (stream) ours.add(stream);
    // A timeout stops the tree (cordon's own timer): killed, as Node says it,
    // from the moment cordon decides so, before any signal (a timer of this
    // object's, set after cordon's, fired after the root's exit under qemu).
    proc[kOnCancel] = (reason) => {
      if (reason === 'timeout') this.stoppedByCordon();
    };
    // As Node's: one listener on the signal, gone at the root's exit; an abort
    // after the exit is no error (kill() would send nothing). The abort stops
    // the whole tree as cordon's own signal option does (killSignal, then
    // SIGKILL after the interrupt grace).
    const onAbort = () => {
      if (this.exitCode !== null || this.signalCode !== null) return;
      this.stoppedByCordon();
      (proc as unknown as { cancel(reason: 'canceled'): void }).cancel('canceled');
      this.emit('error', errors.childAborted(launch.signal!.reason));
    };
    launch.signal?.addEventListener('abort', onAbort, { once: true });
    const unlisten = () => launch.signal?.removeEventListener('abort', onAbort);
    this.once('exit', unlisten);
    this.once('close', unlisten);
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
    // Node made the pipes before the launch failed: the caller gets them, empty and ended.
    if (this.stdout === null && this.stderr === null) {
      const piped = (i: number) => {
        const entry = Array.isArray(launch.stdio) ? launch.stdio[i] : launch.stdio;
        return entry === undefined || entry === 'pipe';
      };
      const empty = () => new PassThrough().end();
      if (piped(0)) this.stdin = new PassThrough();
      if (piped(1)) this.stdout = empty();
      if (piped(2)) this.stderr = empty();
      this.stdio = [this.stdin, this.stdout, this.stderr];
    }
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

// execFile()'s arguments as Node reads them: (file, args?, options?, callback?),
// any of the middle ones left out or null.
function execFileArgs(file: unknown, rest: unknown[]): { args: unknown[]; options: Record<string, unknown>; callback: Callback | undefined } {
  let [args, options, callback] = rest;
  if (Array.isArray(args)) args = [...(args as unknown[])];
  else if (args !== null && args !== undefined && typeof args === 'object') [callback, options, args] = [options, args, null];
  else if (typeof args === 'function') [callback, options, args] = [args, null, null];
  if (typeof options === 'function') callback = options;
  else if (options !== null && options !== undefined && (typeof options !== 'object' || Array.isArray(options))) throw errors.nodeArgType('options', 'object', options);
  if (callback !== null && callback !== undefined && typeof callback !== 'function') throw errors.nodeArgType('callback', 'Function', callback);
  const o = typeof options === 'object' && options !== null ? (options as Record<string, unknown>) : {};
  if (typeof file !== 'string') throw errors.nodeArgType('file', 'string', file);
  return { args: (args ?? []) as unknown[], options: o, callback: (callback ?? undefined) as Callback | undefined };
}

/**
 * Node's execFile(): output collected as Node collects it (its encoding set
 * on the streams, so 'data' gives strings; maxBuffer counted in bytes and
 * the overflowing chunk cut at it), the callback at 'close' or at the first
 * 'error'. Where Node kills the root (maxBuffer, a kill that fails), the
 * whole tree is stopped.
 */
function execFileImpl(file: string, ...rest: unknown[]): ContainedChildProcess {
  const { args, options, callback } = execFileArgs(file, rest);
  const o = own({ encoding: 'utf8', maxBuffer: 1024 * 1024, ...options });
  if (o.maxBuffer !== null && o.maxBuffer !== undefined && !(typeof o.maxBuffer === 'number' && o.maxBuffer >= 0)) throw errors.nodeOutOfRange('options.maxBuffer', 'a positive number', o.maxBuffer);
  const maxBuffer = typeof o.maxBuffer === 'number' ? o.maxBuffer : Infinity;
  // An encoding Buffer does not know, like 'buffer', gives Buffers.
  const encoding = typeof o.encoding === 'string' && o.encoding !== 'buffer' && Buffer.isEncoding(o.encoding) ? (o.encoding as BufferEncoding) : null;
  const launch = launchOf(file, args, { ...o, stdio: 'pipe' });
  const child = new ContainedChildProcess(launch);
  const cmd = args.length > 0 ? `${file} ${args.join(' ')}` : file;
  const chunks: { stdout: (string | Buffer)[]; stderr: (string | Buffer)[] } = { stdout: [], stderr: [] };
  const sizes = { stdout: 0, stderr: 0 };
  let failure: Error | undefined;
  let killed = false;
  let called = false;
  const joined = (name: 'stdout' | 'stderr'): string | Buffer => {
    const stream = child[name];
    if (encoding || stream?.readableEncoding) return chunks[name].join('');
    return Buffer.concat(chunks[name] as Buffer[]);
  };
  const finish = (code?: number | null, signal?: NodeJS.Signals | null) => {
    if (called) return;
    called = true;
    if (!callback) return;
    const stdout = joined('stdout');
    const stderr = joined('stderr');
    if (!failure && code === 0 && signal === null) return callback(null, stdout, stderr);
    // A code below 0 is a libuv error: its name, as Node gives it.
    const shown = typeof code === 'number' && code < 0 ? getSystemErrorName(code) : (code ?? null);
    const error = failure ?? errors.childCommandFailed(cmd, String(stderr), { code: shown, killed: child.killed || killed, signal: signal ?? null });
    (error as Error & { cmd: string }).cmd = cmd;
    callback(error, stdout, stderr);
  };
  // As Node's: the streams are destroyed and the root signalled; here the whole tree is stopped too.
  const stop = () => {
    child.stdout?.destroy();
    child.stderr?.destroy();
    killed = true;
    try {
      child.kill(launch.killSignal);
    } catch (e) {
      failure = e as Error;
      finish();
      return;
    }
    void child[kCordon]?.terminate({ grace: launch.options.interruptGrace ?? 500 }).catch(() => {});
  };
  for (const name of ['stdout', 'stderr'] as const) {
    const stream = child[name];
    if (!stream) continue;
    if (encoding) stream.setEncoding(encoding);
    stream.on('data', (chunk: string | Buffer) => {
      if (sizes[name] === Infinity) return;
      const streamEncoding = stream.readableEncoding as BufferEncoding | null;
      const length = typeof chunk === 'string' ? Buffer.byteLength(chunk, streamEncoding ?? 'utf8') : chunk.length;
      sizes[name] += length;
      if (sizes[name] > maxBuffer) {
        const room = maxBuffer - (sizes[name] - length);
        chunks[name].push(chunk.slice(0, room));
        sizes[name] = Infinity;
        failure = errors.childMaxBuffer(name);
        stop();
      } else {
        chunks[name].push(chunk);
      }
    });
  }
  child.on('close', (code: number | null, signal: NodeJS.Signals | null) => finish(code, signal));
  child.on('error', (e: Error) => {
    failure = e;
    child.stdout?.destroy();
    child.stderr?.destroy();
    finish();
  });
  return child;
}

/** Node's exec(): the command line through a shell (/bin/sh, or options.shell). */
function execImpl(command: unknown, ...rest: unknown[]): ContainedChildProcess {
  if (typeof command !== 'string') throw errors.nodeArgType('command', 'string', command);
  if (command.includes('\u0000')) throw errors.nodeArgValue('command', command, 'must be a string without null bytes');
  let [options, callback] = rest;
  if (typeof options === 'function') [callback, options] = [options, undefined];
  const o = own({ ...(options as Record<string, unknown> | undefined) });
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

/**
 * Node's fork() needs an IPC channel to the child (a descriptor past 2),
 * which cordon's anchor does not hand to a command yet: a typed error
 * (ERR_CORDON_UNSUPPORTED) before anything runs, never an uncontained fork.
 */
export const fork = function fork(modulePath: unknown): never {
  throw errors.childUnsupported(
    'fork()',
    `an IPC channel to the child is not provided yet. For a contained Node child without IPC, spawn(process.execPath, [${JSON.stringify(typeof modulePath === 'string' ? modulePath : 'module')}, ...args]).`,
  );
} as unknown as typeof cp.fork;

// The sync variants wait in a helper process: lib/child-process-sync.ts.
export { execFileSync, execSync, spawnSync } from './child-process-sync.js';

import { execFileSync as execFileSyncFn, execSync as execSyncFn, spawnSync as spawnSyncFn } from './child-process-sync.js';
/** As node:child_process's default export (`import cp from 'cordon/child_process'`): the same functions. */
export default { spawn, exec, execFile, fork, spawnSync: spawnSyncFn, execSync: execSyncFn, execFileSync: execFileSyncFn, contained };
