// Compiled (never run) by test/run-types.test.ts: run()'s result types follow
// `encoding`, with no union for the caller to narrow. Each @ts-expect-error
// must be an error, and nothing else may be.
import { run } from '../../lib/index.js';

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

  void [s, e, a, notBuffer, l, b, be, notString, narrowed, u];
}
