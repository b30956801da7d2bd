// cordon/child_process's arguments: Node's spawn()/exec()/execFile() options
// read and checked as Node reads them, and turned into cordon's spawn options
// (lib/child_process.ts, lib/child-process-sync.ts).
/// <reference types="node" preserve="true" />
import { constants as osConstants } from 'node:os';
import * as errors from './errors.js';
import type { StdioOption } from './options.js';
import type { SpawnOptions as CordonSpawnOptions } from './process.js';
import { DEFAULT_SHELL } from './shell.js';

/**
 * cordon's own options, taken beside Node's by every function here
 * (`waitDelay` bounds 'close' after the root exits: default 2000 ms).
 */
export type CordonExtras = Pick<CordonSpawnOptions, 'waitDelay' | 'grace' | 'interruptGrace' | 'leftovers' | 'containment' | 'tier' | 'log' | 'limits'>;
export const CORDON_EXTRAS = ['waitDelay', 'grace', 'interruptGrace', 'leftovers', 'containment', 'tier', 'log', 'limits'] as const;

export function optionsObject(value: unknown, name = 'options'): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw errors.invalidArg(name, value, 'an object', 'ERR_INVALID_ARG_TYPE');
  return value as Record<string, unknown>;
}

export function signalName(value: unknown, name: string): NodeJS.Signals | undefined {
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
export function stdioOption(value: unknown): StdioOption | [StdioOption, StdioOption, StdioOption] | undefined {
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

export interface Launch {
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
export function launchOf(file: unknown, argsIn: unknown, optionsIn: unknown): Launch {
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

