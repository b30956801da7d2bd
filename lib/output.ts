// The captured output of one tree (CONTRACT C4): our ends of the stdout/stderr
// pipes, the copy to a log file and to the caller's streams, and the bounded
// drain after the root exits (Go's WaitDelay): descendants may hold the pipes
// for `waitDelay`; past it our ends are closed, what was read is kept, and the
// result says `waitDelayExceeded`.
import { closeSync, writeSync } from 'node:fs';
import { PassThrough, type Readable } from 'node:stream';
import { debug } from './debug.js';
import { VIEW_BUFFER_LIMIT } from './defaults.js';
import type { StdioOption } from './options.js';

type StreamRole = 'stdout' | 'stderr';

/**
 * Where the drain stands:
 * - 'open': a member may still hold the pipes (the anchor has not said otherwise);
 * - 'released': the anchor said no member it sees holds them (RELEASED or QUIET);
 * - 'due': the wait delay passed after that: readers are no longer waited for;
 * - 'cut': the wait delay passed with the pipes held: our ends were closed.
 */
type Drain = 'open' | 'released' | 'due' | 'cut';

/** Our end of an output pipe that has not seen end-of-file: someone still holds the other end. */
function stillHeld(raw: Readable): boolean {
  const state = (raw as Readable & { _readableState?: { ended?: boolean } })._readableState;
  return !raw.destroyed && !raw.readableEnded && state?.ended !== true;
}

export interface OutputSpec {
  /** An open descriptor of the log file (appended), when there is one. */
  logFd: number | undefined;
  /** Where each stream goes as the caller asked (with a log: a copy of what goes to the log). */
  targets: { stdout: StdioOption; stderr: StdioOption };
}

/** What the output asks of its tree (the facade's object: read when needed, nothing kept per tree). */
export interface OutputHooks {
  /** For debug lines. */
  readonly command: string;
  readonly waitDelay: number;
  /** The log file's path, when there is one. */
  readonly logPath: string | undefined;
  /** Something the result waits on changed (a pipe closed, the wait delay passed). */
  changed(): void;
  /** The tier cannot see every process (a pipe may be held by one it does not know). */
  partial(): boolean;
}

/** Our end of an output pipe knows its tree's output (one listener for every pipe, not a closure each). */
const kOutput = Symbol('cordon.output');

function pipeClosed(this: Readable & { [kOutput]?: TreeOutput }): void {
  this[kOutput]?.pipeClosed();
}

export class TreeOutput {
  /** What the caller reads: our end of the pipe, a view of it (with a log), or null. */
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  /** Our ends of the pipes from the anchor (an array of its own size: one grown by push has room for 17). */
  private readonly raw: readonly Readable[];
  private openPipes = 0;
  /**
   * The log's descriptor while it is open. Written synchronously as each
   * chunk is read: output the host has taken off the pipe is in the log
   * before anything else runs, so a host killed the next moment (a leased
   * tree's, whose anchor appends from then on) loses none of it.
   */
  private log: number | undefined;
  private drain: Drain = 'open';
  /** The result is decided: a deadline passing now closes pipes but is no longer reported. */
  private sealed = false;
  private exceededDelay = false;
  private timer: NodeJS.Timeout | undefined;
  /** The deadline passed: its verdict, after this turn's I/O (see rootExited()). */
  private verdict: NodeJS.Immediate | undefined;
  /** The result is out with a pipe held where coverage is partial: the deadline no longer holds the event loop. */
  private deadlineUnref = false;

  constructor(
    spec: OutputSpec,
    pipes: { stdout: Readable | null; stderr: Readable | null },
    private readonly hooks: OutputHooks,
  ) {
    const { stdout, stderr } = pipes;
    this.raw = stdout ? (stderr ? [stdout, stderr] : [stdout]) : stderr ? [stderr] : [];
    for (const raw of this.raw) this.track(raw);
    if (spec.logFd !== undefined) {
      this.log = spec.logFd;
      // (an adopted tree: a pipe whose writers were all gone before the adoption is not handed over)
      this.stdout = pipes.stdout ? this.tee(pipes.stdout, spec.targets.stdout, 'stdout') : null;
      this.stderr = pipes.stderr ? this.tee(pipes.stderr, spec.targets.stderr, 'stderr') : null;
      if (this.openPipes === 0) this.closeLog();
    } else {
      this.stdout = pipes.stdout;
      this.stderr = pipes.stderr;
    }
  }

  private track(raw: Readable): void {
    this.openPipes++;
    (raw as Readable & { [kOutput]?: TreeOutput })[kOutput] = this;
    raw.on('close', pipeClosed);
  }

  /** @internal One of our ends of the pipes closed ('close' comes once). */
  pipeClosed(): void {
    this.openPipes--;
    if (this.openPipes === 0) this.closeLog();
    this.hooks.changed();
  }

  private tee(raw: Readable, target: StdioOption, role: StreamRole): Readable | null {
    raw.on('data', (chunk: Buffer) => this.writeLog(chunk));
    if (target === 'pipe') {
      // The log is the reader that never stops; this stream is a view of the
      // same output. A view nobody reads must not stall the command through
      // backpressure: past VIEW_BUFFER_LIMIT unread bytes it drops chunks
      // (the log still has everything).
      const pass = new PassThrough();
      let dropped = 0;
      raw.on('data', (chunk: Buffer) => {
        if (pass.readableLength + chunk.length > VIEW_BUFFER_LIMIT) {
          if (dropped++ === 0) debug('%s of %s: unread view over %d bytes, dropping (the log keeps all)', role, this.hooks.command, VIEW_BUFFER_LIMIT);
          return;
        }
        pass.write(chunk);
      });
      raw.once('close', () => pass.end());
      return pass;
    }
    if (target === 'inherit') {
      const out = role === 'stdout' ? process.stdout : process.stderr;
      raw.on('data', (chunk: Buffer) => out.write(chunk));
    }
    return null;
  }

  /** The root exited: the wait delay starts. */
  rootExited(): void {
    this.timer = setTimeout(() => {
      // After a stalled event loop (a long synchronous task, a GC pause, a
      // loaded machine) the deadline's timer runs before the I/O that waited
      // meanwhile: libuv runs timers first. What the anchor has already said
      // (RELEASED, QUIET) is read in this turn's poll phase, so the verdict
      // comes after it (setImmediate), never a cut of pipes nobody held.
      this.verdict = setImmediate(() => {
        this.verdict = undefined;
        this.onDeadline();
      });
      if (this.deadlineUnref) this.verdict.unref();
    }, this.hooks.waitDelay);
  }

  /** The anchor says no member holds the pipes (RELEASED, or QUIET: no member at all). */
  release(): void {
    if (this.drain === 'open') this.drain = 'released';
  }

  /** No member holds the pipes any more, by the anchor's word or because the wait delay closed them. */
  get drained(): boolean {
    return this.drain !== 'open';
  }

  /**
   * No writer is left, so a stream that is being read reaches EOF as soon as
   * its reader has taken everything: the result settles after that, so code
   * that awaits it then looks at what it read sees all of it. A stream nobody
   * reads is not waited for (its data stays readable), and the wait-delay
   * deadline bounds the rest.
   */
  get readersDone(): boolean {
    if (this.drain === 'due' || this.drain === 'cut') return true;
    return !this.raw.some((raw) => !raw.closed && raw.readableFlowing === true);
  }

  /** Descendants held the pipes past the wait delay (while the result was open). */
  get waitDelayExceeded(): boolean {
    return this.exceededDelay;
  }

  /** The result is decided: what the deadline does from now on is not reported in it. */
  seal(): void {
    this.sealed = true;
  }

  private onDeadline(): void {
    this.timer = undefined;
    const released = this.drain !== 'open';
    // Where coverage is partial, the anchor's word that no member holds the
    // pipes (RELEASED, QUIET) covers only the members it can see: one that
    // left the process group unseen (a daemon) may hold them still. A pipe
    // that has not reached end-of-file by now is held by someone.
    const unseenHolder = released && this.hooks.partial() && this.raw.some(stillHeld);
    if (released && !unseenHolder) {
      this.drain = 'due';
      this.hooks.changed();
      return;
    }
    // WaitDelay: descendants still hold our pipes. Close our ends, keep what
    // was read, and say so in the result (if it has not settled yet).
    if (!this.sealed) this.exceededDelay = true;
    this.drain = 'cut';
    for (const raw of this.raw) if (!unseenHolder || stillHeld(raw)) raw.destroy();
    debug('waitDelay %d ms exceeded for %s%s', this.hooks.waitDelay, this.hooks.command, unseenHolder ? ' (by a process outside the tier\'s view)' : '');
    this.hooks.changed();
  }

  /** A chunk into the log, whole; a log that cannot be written (a full disk) is given up, said once. */
  private writeLog(chunk: Buffer): void {
    if (this.log === undefined) return;
    try {
      for (let off = 0; off < chunk.length; ) off += writeSync(this.log, chunk, off, chunk.length - off);
    } catch (err) {
      debug('log %s: %s: no more output is written to it', this.hooks.logPath, (err as Error).message);
      this.closeLog();
    }
  }

  private closeLog(): void {
    if (this.log === undefined) return;
    const fd = this.log;
    this.log = undefined;
    try {
      closeSync(fd);
    } catch {
      // (closed already: nothing left to do)
    }
  }

  /**
   * The result is out. C4 holds after it, too: where coverage is partial, a
   * pipe may be held by a process the tier cannot see; the wait-delay
   * deadline still closes it, so that no reader (and no host event loop)
   * waits on it forever. Otherwise the deadline is dropped.
   */
  resultOut(): void {
    if (this.hooks.partial() && (this.timer !== undefined || this.verdict !== undefined) && this.raw.some(stillHeld)) {
      this.deadlineUnref = true;
      this.timer?.unref();
      this.verdict?.unref();
    } else {
      clearTimeout(this.timer);
      clearImmediate(this.verdict);
      this.verdict = undefined;
    }
  }
}
