// run()'s stdio, as execa and child_process take it: `stdio`, or `stdin`,
// `stdout` and `stderr` one by one, and what goes into stdin (`input`: text,
// bytes or a Readable; `inputFile`: a path). Checked, and an input file
// opened, before anything runs; spawn() validates each stdio entry itself.
import { closeSync, createReadStream, fstatSync, openSync } from 'node:fs';
import { Readable, type Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { debug } from './debug.js';
import * as errors from './errors.js';
import { noNul, type StdioOption } from './options.js';

/** What run() writes to the command's stdin. */
export type RunInput = string | Buffer | Uint8Array | Readable;

export interface RunStdioOptions {
  stdio?: StdioOption | readonly [StdioOption, StdioOption, StdioOption];
  stdin?: StdioOption;
  stdout?: StdioOption;
  stderr?: StdioOption;
  input?: RunInput;
  inputFile?: string | URL;
  pty?: unknown;
}

export interface RunStdio {
  /** What spawn() gets as `stdio` (undefined with a terminal, which is the stdio). */
  stdio: StdioOption | [StdioOption, StdioOption, StdioOption] | undefined;
  /**
   * Starts writing the input into the command's stdin (ends it, but on a
   * terminal, whose input has no end). `failed`: the input stream or file
   * failed while it was read (stdin is ended; the caller decides the rest).
   */
  /**
   * Starts feeding stdin; the returned function, called once the tree has
   * settled, closes the input file cordon opened (if the command has not read
   * it to its end) and resolves once its descriptor is closed: run() resolves
   * only then, so the host keeps no descriptor of it after.
   */
  feed(stdin: Writable | null, terminal: boolean, failed: (source: 'input' | 'inputFile', error: unknown) => void): () => Promise<void>;
  /** The command never ran: close what was opened for it. */
  abandon(): void;
}

const STREAM_NAMES = ['stdin', 'stdout', 'stderr'] as const;

/**
 * The stdio run() spawns with. Defaults: stdin 'ignore' (a 'pipe' when there
 * is input), stdout and stderr 'pipe' (collected). A stdin 'pipe' without
 * input is ended at once: run() gives no stream to write to.
 */
export function runStdio(options: RunStdioOptions): RunStdio {
  const { input, inputFile, pty } = options;
  if (input !== undefined && typeof input !== 'string' && !(input instanceof Uint8Array) && !(input instanceof Readable)) {
    throw errors.invalidArg('input', input, 'a string, a Buffer, a Uint8Array or a Readable stream', 'ERR_INVALID_ARG_TYPE');
  }
  if (inputFile !== undefined && !(inputFile instanceof URL) && (typeof inputFile !== 'string' || inputFile === '')) {
    throw errors.invalidArg('inputFile', inputFile, 'a path string or a file URL', inputFile === '' ? 'ERR_INVALID_ARG_VALUE' : 'ERR_INVALID_ARG_TYPE');
  }
  if (input !== undefined && inputFile !== undefined) throw errors.inputConflict('input', 'inputFile');
  const source = input !== undefined ? 'input' : inputFile !== undefined ? 'inputFile' : undefined;

  let stdio: [StdioOption, StdioOption, StdioOption] | undefined;
  /** As given where the caller gave `stdio` (spawn()'s refusal then names it as given). */
  let spawnStdio: StdioOption | [StdioOption, StdioOption, StdioOption] | undefined;
  if (pty) {
    if (options.stdio !== undefined) throw errors.terminalConflict('stdio');
    for (const name of STREAM_NAMES) if (options[name] !== undefined) throw errors.terminalConflict(name);
  } else if (options.stdio !== undefined) {
    for (const name of STREAM_NAMES) if (options[name] !== undefined) throw errors.stdioConflict(name);
    // (An array that is not three entries long is spawn()'s to refuse.)
    stdio = (Array.isArray(options.stdio) ? [...options.stdio] : [options.stdio, options.stdio, options.stdio]) as [StdioOption, StdioOption, StdioOption];
    spawnStdio = options.stdio as StdioOption | [StdioOption, StdioOption, StdioOption];
  } else {
    stdio = [options.stdin ?? (source ? 'pipe' : 'ignore'), options.stdout ?? 'pipe', options.stderr ?? 'pipe'];
  }
  if (source && stdio && stdio[0] !== 'pipe') throw errors.inputConflict(source, options.stdio !== undefined ? 'stdio' : 'stdin');

  // Opened now, so a path that cannot be read is refused before anything runs.
  let fileFd: number | undefined;
  if (inputFile !== undefined) {
    const path = inputFile instanceof URL ? fileURLToPath(inputFile) : inputFile;
    noNul('inputFile', path);
    try {
      fileFd = openSync(path, 'r');
      if (fstatSync(fileFd).isDirectory()) throw Object.assign(new Error(`EISDIR: illegal operation on a directory, read '${path}'`), { code: 'EISDIR', syscall: 'read' });
    } catch (cause) {
      if (fileFd !== undefined) closeSync(fileFd);
      throw errors.inputFileUnreadable(path, cause);
    }
  }

  return {
    stdio: spawnStdio ?? stdio,
    feed(stdin, terminal, failed) {
      const none = () => Promise.resolve();
      if (!stdin) {
        this.abandon();
        return none;
      }
      const stream = fileFd !== undefined ? createReadStream('', { fd: fileFd }) : input instanceof Readable ? input : undefined;
      if (!stream) {
        if (input === undefined) stdin.end();
        else if (terminal) stdin.write(input as string | Uint8Array);
        else stdin.end(input as string | Uint8Array);
        return none;
      }
      // The file's descriptor is closed when its stream closes (after its end, or destroyed).
      const fileClosed = fileFd !== undefined ? new Promise<void>((resolve) => stream.once('close', () => resolve())) : undefined;
      stream.pipe(stdin, { end: !terminal });
      // The command stopped reading (it exited, or closed its stdin): the file
      // cordon opened is closed; a caller's stream is let go, not destroyed.
      stdin.once('close', () => {
        stream.unpipe(stdin);
        if (fileFd !== undefined && !stream.destroyed) stream.destroy();
      });
      stream.once('error', (error: Error) => {
        debug('%s: reading stdin\'s input failed: %s', source, error.message);
        stream.unpipe(stdin);
        if (!terminal) stdin.end();
        failed(source!, error);
      });
      if (!fileClosed) return none;
      return () => {
        if (!stream.destroyed && !stream.closed) stream.destroy();
        return fileClosed;
      };
    },
    abandon() {
      if (fileFd !== undefined) closeSync(fileFd);
      fileFd = undefined;
    },
  };
}
