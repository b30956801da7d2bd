// How a tree is asked to stop: the polite signal (`killSignal`) the anchor
// sends every member before the forced kill, and the `stop` hook (Go's
// Cmd.Cancel) the facade asks first; their validation, and the sequence of a
// polite stop (PoliteStop); kill(signal)'s signal for the root alone (rootSignal).
import { invalidArg, killSignalWindows } from './errors.js';
import { signalName, signalNumber } from './signals.js';

/** Signals that do not ask a process to stop: the forced kill's own, the job-control ones and SIGCONT. */
export const NOT_POLITE: ReadonlySet<string> = new Set(['SIGKILL', 'SIGSTOP', 'SIGTSTP', 'SIGTTIN', 'SIGTTOU', 'SIGCONT']);

export const DEFAULT_KILL_SIGNAL: NodeJS.Signals = 'SIGTERM';

/**
 * The polite signal: `value` checked, or the default: SIGTERM, and SIGHUP
 * for a tree on a terminal (`terminal`), as a terminal that closes sends it,
 * so an interactive shell (which ignores SIGTERM) and what it runs stop as
 * they would when their window closes, not at the forced kill.
 */
export function killSignalOption(value: unknown, platform: NodeJS.Platform = process.platform, terminal = false): NodeJS.Signals {
  if (value === undefined) return terminal ? 'SIGHUP' : DEFAULT_KILL_SIGNAL;
  if (typeof value !== 'string') throw invalidArg('killSignal', value, "a signal name such as 'SIGINT'", 'ERR_INVALID_ARG_TYPE');
  if (platform === 'win32') {
    if (value === 'SIGTERM') return value;
    throw killSignalWindows(value);
  }
  if (NOT_POLITE.has(value)) {
    throw invalidArg('killSignal', value, 'a signal a process can catch to stop (SIGKILL is the forced kill after the grace; use grace: 0 for it)');
  }
  if (signalNumber(value as NodeJS.Signals) === undefined) {
    throw invalidArg('killSignal', value, "a signal name this platform has, such as 'SIGTERM', 'SIGINT' or 'SIGHUP'");
  }
  return value as NodeJS.Signals;
}

/**
 * kill(signal)'s signal, as a number: a name this platform has ('SIGINT'), or
 * a number from 0 to 64 that names one (0: none sent, only whether it would
 * be); a typed error before anything is sent otherwise. Windows takes what
 * Node's ChildProcess.kill takes there: 'SIGTERM', 'SIGKILL', 'SIGINT' (each
 * ends the root) and 0.
 */
export function rootSignal(value: unknown, platform: NodeJS.Platform = process.platform): number {
  const signo = typeof value === 'string' ? signalNumber(value as NodeJS.Signals) : typeof value === 'number' ? value : undefined;
  if (typeof value !== 'string' && typeof value !== 'number') {
    throw invalidArg('signal', value, "a signal name such as 'SIGINT', or its number", 'ERR_INVALID_ARG_TYPE');
  }
  if (signo === undefined || !Number.isInteger(signo) || signo < 0 || signo > 64 || (signo !== 0 && signalName(signo) === null)) {
    throw invalidArg('signal', value, "a signal this platform has, such as 'SIGINT', 'SIGTERM' or 'SIGHUP', or its number");
  }
  if (platform === 'win32' && signo !== 0 && !['SIGTERM', 'SIGKILL', 'SIGINT'].includes(signalName(signo)!)) {
    throw invalidArg('signal', value, "on Windows 'SIGTERM', 'SIGKILL' or 'SIGINT' (each ends the root, as Node's ChildProcess.kill does there)");
  }
  return signo;
}

export function stopOption<T>(value: unknown): T | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'function') throw invalidArg('stop', value, 'a function (proc) => void | Promise<void>', 'ERR_INVALID_ARG_TYPE');
  return value as T;
}

/** What a polite stop acts on: one tree, as the facade sees it. */
export interface StopSubject {
  /** The anchor is gone: nothing is left to stop. */
  readonly anchorGone: boolean;
  /** The root was reported running and has not exited. */
  readonly rootRunning: boolean;
  /** The root is being started: not yet reported running, not exited, no launch failure. */
  readonly rootStarting: boolean;
  readonly launchFailed: boolean;
  /** Settles once the root runs, or its launch failed. */
  readonly started: Promise<unknown>;
  /** The anchor's TERM with this grace: the polite signal to every member now, the forced kill after it (0: at once). */
  terminate(graceMs: number): void;
  /** The stop hook is being asked: what remains of the tree must not be kept. */
  hookAsked(): void;
  /** Calls `listener` once when the root exits; returns how to stop listening. */
  onRootExit(listener: () => void): () => void;
  /** The hook threw or rejected: the stop goes on. */
  hookFailed(error: unknown): void;
}

/**
 * A stop asked for while the root runs (terminate() with a grace, abort,
 * timeout). With a `stop` hook: the hook first (once per tree), then up to
 * `graceMs` for the root to exit; when it exits, the grace passes or the hook
 * throws, the anchor's TERM: the polite signal to every member, the forced
 * kill of what remains after `graceMs`. Without a hook, with grace 0 (kill()),
 * or once the root has exited: the anchor's TERM now. A stop asked for while
 * the root is being started waits for it to run (its output can arrive
 * before the anchor's report of it), as Go asks Cmd.Cancel only after Start;
 * a launch failure leaves nothing to ask. A forced kill cuts every wait
 * short; another polite stop during the hook's wait waits with it.
 */
export class PoliteStop {
  private hookCalled = false;
  /** While the hook's wait runs: ends it now. */
  private cutShort: (() => void) | undefined;
  /** A polite stop asked for before the root was reported running: its grace, until it is. */
  private beforeStart: number | undefined;

  constructor(
    private readonly hook: (() => unknown) | undefined,
    private readonly subject: StopSubject,
  ) {}

  stop(graceMs: number): void {
    const s = this.subject;
    if (s.anchorGone) return;
    if (this.cutShort) {
      if (graceMs === 0) this.cutShort();
      return;
    }
    if (this.hook && graceMs > 0 && !this.hookCalled && s.rootStarting) {
      if (this.beforeStart === undefined) {
        this.beforeStart = graceMs;
        const goOn = () => this.afterStart();
        s.started.then(goOn, goOn);
      }
      return;
    }
    if (graceMs === 0) this.beforeStart = undefined;
    if (!this.hook || graceMs === 0 || this.hookCalled || !s.rootRunning) {
      s.terminate(graceMs);
      return;
    }
    this.askHook(this.hook, graceMs);
  }

  private askHook(hook: () => unknown, graceMs: number): void {
    const s = this.subject;
    this.hookCalled = true;
    s.hookAsked();
    let timer: NodeJS.Timeout | undefined;
    let waiting = true;
    const next = (graceNow: number) => {
      if (!waiting) return;
      waiting = false;
      this.cutShort = undefined;
      clearTimeout(timer);
      unlisten();
      s.terminate(graceNow);
    };
    const failed = (error: unknown) => {
      s.hookFailed(error);
      next(graceMs);
    };
    this.cutShort = () => next(0);
    timer = setTimeout(() => next(graceMs), graceMs);
    const unlisten = s.onRootExit(() => next(graceMs));
    try {
      Promise.resolve(hook()).catch(failed);
    } catch (error) {
      failed(error);
    }
  }

  /** A polite stop that waited for the root to start goes on (unless a forced kill came meanwhile). */
  private afterStart(): void {
    const grace = this.beforeStart;
    this.beforeStart = undefined;
    if (grace === undefined || this.subject.launchFailed) return;
    this.stop(grace);
  }
}
