// cordon/child_process's arguments: Node's spawn()/exec()/execFile() options
// read and checked as Node reads them, and turned into cordon's spawn options
// (lib/child_process.ts, lib/child-process-sync.ts).
/// <reference types="node" preserve="true" />
import { constants as osConstants } from 'node:os';
import * as errors from './errors.js';
import type { StdioOption } from './options.js';
import type { SpawnOptions as CordonSpawnOptions } from './process.js';
import { DEFAULT_SHELL } from './shell.js';
import { NOT_POLITE } from './stopping.js';
import { defaultTier } from './capabilities.js';

/**
 * cordon's own options, taken beside Node's by every function here
 * (`waitDelay` bounds 'close' after the root exits: default 2000 ms).
 */
export type CordonExtras = Pick<CordonSpawnOptions, 'waitDelay' | 'grace' | 'interruptGrace' | 'leftovers' | 'containment' | 'tier' | 'log' | 'limits'>;
export const CORDON_EXTRAS = ['waitDelay', 'grace', 'interruptGrace', 'leftovers', 'containment', 'tier', 'log', 'limits'] as const;

/**
 * An options object's own properties, in an object with no prototype: a
 * property set on Object.prototype (prototype pollution: `Object.prototype.cwd
 * = ...`, `.shell`, `.uid`) is never read as an option, as in Node.
 */
export function own(value: object): Record<string, unknown> {
  return Object.assign(Object.create(null) as Record<string, unknown>, value);
}

export function optionsObject(value: unknown, name = 'options'): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw errors.invalidArg(name, value, 'an object', 'ERR_INVALID_ARG_TYPE');
  return own(value);
}

/** A signal as Node's kill() takes it: a name (any case) or a number (ERR_UNKNOWN_SIGNAL otherwise), anything else ERR_INVALID_ARG_TYPE. */
export function signalName(value: unknown, name: string): NodeJS.Signals | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' && typeof value !== 'number') throw errors.nodeArgType(name, ['string', 'number'], value);
  const signals = osConstants.signals as Record<string, number>;
  const found =
    typeof value === 'number' ? Object.keys(signals).find((k) => signals[k] === value) : Object.hasOwn(signals, value.toUpperCase()) ? value.toUpperCase() : undefined;
  if (!found) throw errors.nodeUnknownSignal(value);
  return found as NodeJS.Signals;
}

/** Node's killSignal: a signal name or number (ERR_UNKNOWN_SIGNAL otherwise), anything else ERR_INVALID_ARG_TYPE. */
export function killSignalOf(value: unknown): NodeJS.Signals | undefined {
  if (value === undefined || value === null) return undefined;
  return signalName(value, 'options.killSignal');
}

/**
 * How a tree ends on a timeout, an abort or a maxBuffer overrun, given Node's
 * killSignal: that signal to every member, SIGKILL after the interrupt grace.
 * A signal that cannot end a process (SIGKILL itself, SIGSTOP, SIGCONT, the
 * terminal stops), which Node accepts, is the forced kill at once; on
 * Windows, where Node's kill of any signal ends the root, cordon's own stop.
 */
function politeStop(killSignal: NodeJS.Signals): Pick<CordonSpawnOptions, 'killSignal' | 'interruptGrace'> {
  if (NOT_POLITE.has(killSignal)) return { interruptGrace: 0 };
  if (process.platform === 'win32') return {};
  return { killSignal };
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
  if (!Array.isArray(value)) throw errors.nodeArgValue('stdio', value);
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

// Node's check for NUL in a string argument (a non-string is stringified later, as Node does).
function noNul(value: unknown, name: string): void {
  if (typeof value === 'string' && value.includes('\u0000')) throw errors.nodeArgValue(name, value, 'must be a string without null bytes');
}

// Node's environment as a spawn gets it: every key whose value is not
// undefined, the value stringified (null is "null"), NUL refused.
function envOf(env: Record<string, unknown>): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const key in env) {
    const value = env[key];
    if (value === undefined) continue;
    noNul(key, `options.env['${key}']`);
    noNul(value, `options.env['${key}']`);
    out[key] = `${value as string}`;
  }
  return out;
}

/** Node's spawn() arguments (args optional, options in second place) read and checked as Node checks them, as cordon's spawn options. */
export function launchOf(file: unknown, argsIn: unknown, optionsIn: unknown): Launch {
  if (typeof file !== 'string') throw errors.nodeArgType('file', 'string', file);
  if (file.length === 0) throw errors.nodeArgValue('file', file, 'cannot be empty');
  let args: unknown = argsIn;
  let raw: unknown = optionsIn;
  if (args !== undefined && args !== null && !Array.isArray(args)) {
    if (typeof args !== 'object') throw errors.nodeArgType('args', 'object', args);
    raw = args;
    args = [];
  }
  if (raw !== undefined && (raw === null || typeof raw !== 'object' || Array.isArray(raw))) throw errors.nodeArgType('options', 'object', raw);
  const o = own(raw ?? {});
  const given = (name: string) => o[name] !== undefined && o[name] !== null;
  if (given('cwd') && typeof o.cwd !== 'string' && !(o.cwd instanceof URL) && !Buffer.isBuffer(o.cwd)) throw errors.nodeArgType('options.cwd', ['string', 'Buffer', 'URL'], o.cwd);
  if (typeof o.cwd === 'string') noNul(o.cwd, 'options.cwd');
  if (given('detached') && typeof o.detached !== 'boolean') throw errors.nodeArgType('options.detached', 'boolean', o.detached);
  for (const id of ['uid', 'gid'] as const) {
    if (given(id) && !((o[id] as number) === ((o[id] as number) | 0))) throw errors.nodeArgType(`options.${id}`, 'int32', o[id]);
  }
  if (given('shell') && typeof o.shell !== 'boolean' && typeof o.shell !== 'string') throw errors.nodeArgType('options.shell', ['boolean', 'string'], o.shell);
  if (given('argv0')) {
    if (typeof o.argv0 !== 'string') throw errors.nodeArgType('options.argv0', 'string', o.argv0);
    noNul(o.argv0, 'options.argv0');
  }
  for (const name of ['windowsHide', 'windowsVerbatimArguments'] as const) {
    if (given(name) && typeof o[name] !== 'boolean') throw errors.nodeArgType(`options.${name}`, 'boolean', o[name]);
  }
  const list = [...((args ?? []) as unknown[])];
  for (let i = 0; i < list.length; i++) noNul(list[i], `args[${i}]`);
  const env = envOf((o.env ?? process.env) as Record<string, unknown>);
  if (o.windowsVerbatimArguments === true && process.platform === 'win32') {
    throw errors.childUnsupported('windowsVerbatimArguments: true', 'cordon quotes each argument for the command itself on Windows.');
  }
  if (o.serialization !== undefined && o.serialization !== 'json' && o.serialization !== 'advanced') {
    throw errors.nodeArgValue('options.serialization', o.serialization, "must be one of: undefined, 'json', 'advanced'");
  }
  if (given('timeout') && !(Number.isInteger(o.timeout) && (o.timeout as number) >= 0)) throw errors.nodeOutOfRange('timeout', 'an unsigned integer', o.timeout);
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw errors.nodeArgType('options.signal', 'AbortSignal', o.signal);
  const killSignal = killSignalOf(o.killSignal) ?? 'SIGTERM';
  const shell = o.shell === null ? undefined : o.shell;
  // Node stringifies every argument (a number is its digits).
  const strings = list.map((a) => `${a as string}`);
  let command = file;
  let commandArgs = strings;
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
    cwd: !given('cwd') ? undefined : Buffer.isBuffer(o.cwd) ? o.cwd.toString() : (o.cwd as string | URL),
    // Node's env is the whole environment, not laid over process.env.
    env,
    extendEnv: false,
    argv0: given('argv0') ? (o.argv0 as string) : undefined,
    stdio: stdioOption(o.stdio),
    uid: given('uid') ? (o.uid as number) : undefined,
    gid: given('gid') ? (o.gid as number) : undefined,
    shell: shell === undefined || shell === false ? undefined : (shell as boolean | string),
    timeout: given('timeout') ? (o.timeout as number) : undefined,
    ...politeStop(killSignal),
    // detached: true, as Node's: the root leads a session and group of its own,
    // except in the process-group tier, whose group is the tree's containment
    // (docs/child-process.md says so).
    ...(o.detached === true && process.platform !== 'win32' && ((o.tier as string | undefined) ?? defaultTier()) !== 'process-group' ? { newSession: true } : {}),
  };
  // The AbortSignal is the ChildProcess's to listen to (one listener, as Node's): lib/child_process.ts.
  for (const name of CORDON_EXTRAS) if (o[name] !== undefined) (options as Record<string, unknown>)[name] = o[name];
  return { stdio: options.stdio, file: command, args: commandArgs, spawnfile, spawnargs, options, killSignal, signal: o.signal as AbortSignal | undefined, timeout: given('timeout') ? (o.timeout as number) : 0 };
}

