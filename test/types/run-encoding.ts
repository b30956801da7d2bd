// Compiled (never run) by test/run-types.test.ts: run()'s result types follow
// `encoding`, with no union for the caller to narrow; a process's events are typed. Each @ts-expect-error
// must be an error, and nothing else may be.
import { isCordonError, Registry, run, spawn, type RunOptions, type SpawnOptions } from '../../lib/index.js';

export async function types(): Promise<void> {
  const text = await run('echo', ['hi']);
  const s: string = text.stdout;
  const e: string = text.stderr;
  const a: string | undefined = text.all;
  // @ts-expect-error a string result is not a Buffer
  const notBuffer: Buffer = text.stdout;

  const latin = await run('echo', [], { encoding: 'latin1', all: true });
  const l: string = latin.stdout;

  const bytes = await run('echo', [], { encoding: 'buffer' });
  const b: Buffer = bytes.stdout;
  const be: Buffer = bytes.stderr;
  // @ts-expect-error a Buffer result is not a string
  const notString: string = bytes.stdout;

  const chosen = (process.env.RAW ? 'buffer' : 'utf8') as BufferEncoding | 'buffer';
  const either = await run('echo', [], { encoding: chosen });
  // @ts-expect-error an encoding known only at run time gives the union
  const narrowed: string = either.stdout;
  const u: string | Buffer = either.stdout;

  // all: true makes `all` present, of the same type as stdout.
  const both = await run('echo', ['hi'], { all: true });
  const all: string = both.all;
  const bothBytes = await run('echo', { all: true, encoding: 'buffer' });
  const allBytes: Buffer = bothBytes.all;
  // @ts-expect-error without all: true, `all` may be missing
  const maybe: string = text.all;

  // Options in second place, and readonly arguments.
  const args: readonly string[] = ['a', 'b'];
  const second = await run('echo', { encoding: 'latin1' });
  const s2: string = second.stdout;
  const ro = await run('echo', args);
  const s3: string = ro.stdout;

  // Options known only by their type: the union where the encoding may be 'buffer'.
  const opts: RunOptions = {};
  const loose = await run('echo', [], opts);
  // @ts-expect-error RunOptions may ask for Buffers
  const looseString: string = loose.stdout;

  // A rejection carries the command's output and exit status in its type.
  try {
    await run('false');
  } catch (err) {
    if (isCordonError(err)) {
      const code: number | null | undefined = err.exitCode;
      const out: string | Buffer | undefined = err.stderr;
      const sig: NodeJS.Signals | null | undefined = err.signal;
      void [code, out, sig, err.shortMessage, err.command];
    }
  }

  // The stdio options: a stream not piped is not collected (undefined, as execa).
  const ignored = await run('echo', [], { stdout: 'ignore' });
  const noOut: undefined = ignored.stdout;
  const stillErr: string = ignored.stderr;
  const viaStdio = await run('echo', [], { stdio: ['ignore', 'pipe', 'inherit'] });
  const viaOut: string = viaStdio.stdout;
  const viaErr: undefined = viaStdio.stderr;
  // @ts-expect-error stdout given as a value known only at run time may be undefined
  const unknownOut: string = (await run('echo', [], { stdout: (process.env.Q ? 'ignore' : 'pipe') as 'ignore' | 'pipe' })).stdout;

  // execa's names for the result's facets, on the result and on a rejection.
  const facets: [boolean, boolean, boolean, number, string, string] = [text.failed, text.timedOut, text.isCanceled, text.durationMs, text.command, text.escapedCommand];
  try {
    await run('false', [], { input: process.stdin, inputFile: undefined, stripFinalNewline: false });
  } catch (err) {
    if (isCordonError(err)) {
      const f: [boolean | undefined, boolean | undefined, boolean | undefined, number | undefined, string | undefined] = [err.failed, err.timedOut, err.isCanceled, err.durationMs, err.escapedCommand];
      void f;
    }
  }

  void [s, e, a, notBuffer, l, b, be, notString, narrowed, u, all, allBytes, maybe, s2, s3, looseString, noOut, stillErr, viaOut, viaErr, unknownOut, facets];
}

// A contained process iterates its stdout's lines (as execa's subprocess).
export async function iterate(): Promise<string[]> {
  const got: string[] = [];
  for await (const line of spawn('echo', ['hi'])) got.push(line);
  return got;
}

// spawn()'s streams follow stdio: a stream where it is 'pipe' (the default),
// null where it is not; `proc.stdout.pipe(...)` compiles under --strict
// without a non-null assertion exactly where the stream exists.
export function streams(): void {
  const piped = spawn('cat');
  piped.stdout.pipe(process.stdout);
  piped.stdin.end('x');
  const quiet = spawn('cat', [], { stdio: 'ignore' });
  const none: null = quiet.stdout;
  const mixed = spawn('cat', [], { stdio: ['ignore', 'pipe', 'inherit'] });
  mixed.stdout.pipe(process.stdout);
  // @ts-expect-error stdin is 'ignore': there is no stream
  mixed.stdin.end('x');
  // @ts-expect-error stderr is inherited: there is no stream
  mixed.stderr.pipe(process.stderr);
  const second = spawn('cat', { stdio: 'pipe' });
  second.stdout.resume();
  const loose: SpawnOptions = {};
  // @ts-expect-error options known only by their type: the stream may be null
  spawn('cat', [], loose).stdout.resume();
  // A terminal: its input and output are streams, and there is no stderr.
  const term = spawn('bash', ['-i'], { pty: { cols: 100, rows: 30 } });
  term.stdout.resume();
  term.stdin.write('exit\n');
  // @ts-expect-error a terminal's tree has no stderr stream
  term.stderr.resume();
  spawn('bash', [], { pty: true }).stdout.resume();
  // An owner's spawn follows stdio the same way.
  const owned = new Registry().owner('types').spawn('cat', [], { stdio: ['pipe', 'pipe', 'ignore'], kind: 'command' });
  owned.stdout.resume();
  // @ts-expect-error stderr is 'ignore'
  owned.stderr.resume();
  void none;
}

// A contained process's events are typed: a misspelled name or a wrong
// listener is an error.
export function events(): void {
  const proc = spawn('true');
  proc.on('exit', (code: number | null, signal: NodeJS.Signals | null) => void [code, signal]);
  proc.once('spawn', (pid: number) => void pid);
  proc.on('settled', (result) => void result.exitCode);
  // @ts-expect-error there is no 'exitt' event
  proc.on('exitt', () => {});
  // @ts-expect-error the pid is a number
  proc.on('spawn', (pid: string) => void pid);
}
