// How a tree is asked to stop (issue #16): the polite signal (`killSignal`)
// the anchor sends every member before the forced kill, and the `stop` hook
// (Go's Cmd.Cancel) the facade calls first. Validation here; the sequence is
// ContainedProcess.politeStop (process.ts).
import { CordonError, invalidArg } from './errors.js';
import { signalNumber } from './signals.js';

/** Signals that do not ask a process to stop: the forced kill's own, the job-control ones and SIGCONT. */
const NOT_POLITE = new Set(['SIGKILL', 'SIGSTOP', 'SIGTSTP', 'SIGTTIN', 'SIGTTOU', 'SIGCONT']);

export const DEFAULT_KILL_SIGNAL: NodeJS.Signals = 'SIGTERM';

export function killSignalOption(value: unknown, platform: NodeJS.Platform = process.platform): NodeJS.Signals {
  if (value === undefined) return DEFAULT_KILL_SIGNAL;
  if (typeof value !== 'string') throw invalidArg('killSignal', value, "a signal name such as 'SIGINT'", 'ERR_INVALID_ARG_TYPE');
  if (platform === 'win32') {
    if (value === 'SIGTERM') return value;
    throw new CordonError(
      `The option "killSignal" can only be 'SIGTERM' on Windows (the polite stop is CTRL_BREAK to the root's console); received ${JSON.stringify(value)}. ` +
        'Use the stop hook to ask the command another way; nothing ran.',
      { code: 'ERR_CORDON_UNSUPPORTED', stage: 'input' },
    );
  }
  if (NOT_POLITE.has(value)) {
    throw invalidArg('killSignal', value, 'a signal a process can catch to stop (SIGKILL is the forced kill after the grace; use grace: 0 for it)');
  }
  if (signalNumber(value as NodeJS.Signals) === undefined) {
    throw invalidArg('killSignal', value, "a signal name this platform has, such as 'SIGTERM', 'SIGINT' or 'SIGHUP'");
  }
  return value as NodeJS.Signals;
}

export function stopOption<T>(value: unknown): T | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'function') throw invalidArg('stop', value, 'a function (proc) => void | Promise<void>', 'ERR_INVALID_ARG_TYPE');
  return value as T;
}
