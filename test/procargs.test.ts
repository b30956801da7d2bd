// The process-group tier's reading of a process's arguments and environment
// on macOS: sysctl kern.procargs2, parsed by native/posix/procargs.cc (pure,
// compiled on every POSIX host, reached here through the addon's internal
// parseProcargs2). Nothing here runs on a Mac: the buffers are built as XNU's
// source lays them out (bsd/kern/kern_exec.c exec_copyout_strings, and
// bsd/kern/kern_sysctl.c sysctl_procargsx for what it returns and where it
// cuts the buffer when it withholds a cs_restricted process's environment).
// The verdict decides what the tier does with a process: 'present' is read
// for the tree's marker, 'withheld' is unreadable (never claimed as a member,
// not read again while it runs the same program), 'empty' is read again (in
// the middle of an exec).
import { endianness } from 'node:os';
import { describe, expect, it } from 'vitest';
import { posixBinding, type RawProcArgs } from '../lib/native.js';

const TOKEN = '4242.1733000000000000.0123456789abcdef0123456789abcdef';
const MARKER = `CORDON_TREE=${TOKEN}`;
/** The kernel's own strings after the environment (exec_add_apple_strings always adds these three). */
const APPLE = ['stack_guard=0x1122334455667788', 'malloc_entropy=0x1,0x2', 'ptr_munge=0x3'];
const KEY = 'executable_path=';

interface Area {
  path?: string;
  argv: string[];
  env: string[];
  /** argc as the buffer says (default: argv.length). */
  argc?: number;
  /** Replaces the argv area's bytes (a rewritten title), same length. */
  argvArea?: Buffer;
}

/** An int in this host's byte order (as the kernel writes argc). */
function int32(n: number): Buffer {
  const b = Buffer.alloc(4);
  if (endianness() === 'LE') b.writeInt32LE(n);
  else b.writeInt32BE(n);
  return b;
}
const nul = (s: string) => Buffer.from(`${s}\0`, 'latin1');
/** NULs from `length` up to the pointer size (8), counted from the string area's start. */
const pad = (length: number) => Buffer.alloc((8 - (length % 8)) % 8);

/**
 * What kern.procargs2 returns for a 64-bit process, as XNU lays it out: int
 * argc, then the string area without its "executable_path=" prefix: the path,
 * NULs to the pointer size, argv, the environment, NULs to the pointer size,
 * the apple[] strings. `argvEnd` is where argv ends (where XNU cuts the
 * buffer when it withholds the environment of a process whose argv is as it
 * was at exec), `envEnd` where the environment ends.
 */
function procargs2(a: Area): { buffer: Buffer; argvEnd: number; envEnd: number } {
  const head = Buffer.concat([Buffer.from(KEY, 'latin1'), nul(a.path ?? '/usr/local/bin/daemon')]);
  const argvArea = a.argvArea ?? Buffer.concat(a.argv.map(nul));
  let area = Buffer.concat([head, pad(head.length), argvArea]);
  const argvEnd = area.length;
  area = Buffer.concat([area, ...a.env.map(nul)]);
  const envEnd = area.length;
  area = Buffer.concat([area, pad(area.length), ...APPLE.map(nul)]);
  // The buffer: argc, then the area from past its 16-byte key.
  const shift = 4 - KEY.length;
  return { buffer: Buffer.concat([int32(a.argc ?? a.argv.length), area.subarray(KEY.length)]), argvEnd: argvEnd + shift, envEnd: envEnd + shift };
}

/** libuv's uv_set_process_title (process.title =): the title over the argv area, the rest zero-filled, the last NUL kept. */
function retitled(argv: string[], title: string): Buffer {
  const area = Buffer.concat(argv.map(nul));
  const cap = area.length - 1;
  const len = title.length >= cap ? cap - 1 : title.length;
  const out = Buffer.alloc(area.length);
  out.write(title.slice(0, len), 'latin1');
  return out;
}

const parse = (buffer: Buffer, hints?: { pointerSize?: number; self?: boolean; capacity?: number }): RawProcArgs =>
  posixBinding().parseProcargs2(buffer, hints);
/**
 * The environment strings of a parse, without the apple[] strings that follow
 * them where XNU put no NUL in between (the next test shows both layouts).
 */
function ownEnv(p: RawProcArgs): string[] {
  const tail = p.env.slice(-APPLE.length);
  return tail.length === APPLE.length && tail.every((v, i) => v === APPLE[i]) ? p.env.slice(0, -APPLE.length) : p.env;
}
/** Whether an environment carries the tree's token in a CORDON_TREE entry (as native/posix/tree_marker.cc reads it). */
const marked = (env: string[]) => env.some((v) => v.startsWith('CORDON_TREE=') && v.slice('CORDON_TREE='.length).split(':').includes(TOKEN));

const posix = process.platform !== 'win32';

describe.skipIf(!posix)(posix ? 'kern.procargs2 buffers (macOS), parsed' : 'kern.procargs2 buffers [skipped: the parser is built on POSIX hosts only]', () => {
  // proves nothing of the contract: a pure parser of kern.procargs2 buffers, no process
  it('a whole area: the exec path, argv and the environment, with the marker', () => {
    const env = ['HOME=/Users/u', 'PATH=/usr/bin:/bin', MARKER];
    const { buffer } = procargs2({ argv: ['node', 'server.js', '--port', '3000'], env });
    const p = parse(buffer);
    expect(p).toMatchObject({ valid: true, argc: 4, execPath: '/usr/local/bin/daemon', argv: ['node', 'server.js', '--port', '3000'], argvComplete: true, verdict: 'present', cut: false });
    expect(ownEnv(p)).toEqual(env);
    expect(marked(p.env)).toBe(true);
  });

  // proves nothing of the contract: a pure parser of kern.procargs2 buffers, no process
  it('where XNU put no NUL between the environment and the apple[] strings, those follow in env (the kernel\'s key=value strings: no marker)', () => {
    // A filler variable whose length ends the environment on the pointer size: no NUL follows it.
    const layouts = Array.from({ length: 8 }, (_, n) => {
      const env = [`X=${'y'.repeat(n)}`, MARKER];
      return { env, ...procargs2({ argv: ['sleep', '60'], env }) };
    });
    const flush = layouts.find((l) => (l.envEnd + 12) % 8 === 0)!;
    const p = parse(flush.buffer);
    expect(p.env).toEqual([...flush.env, ...APPLE]);
    expect(marked(p.env)).toBe(true);
    expect(p.verdict).toBe('present');
    // With NULs between them, the environment ends there.
    const padded = layouts.find((l) => (l.envEnd + 12) % 8 !== 0)!;
    expect(parse(padded.buffer).env).toEqual(padded.env);
  });

  // proves nothing of the contract: a pure parser of kern.procargs2 buffers, no process
  it('the environment the kernel withholds (a cs_restricted process: the buffer ends with argv) is "withheld", argv intact', () => {
    const { buffer, argvEnd } = procargs2({ path: '/bin/sleep', argv: ['sleep', '60'], env: [MARKER, 'HOME=/Users/u'] });
    const p = parse(buffer.subarray(0, argvEnd));
    expect(p).toMatchObject({ argv: ['sleep', '60'], argvComplete: true, env: [], verdict: 'withheld' });
    expect(marked(p.env)).toBe(false);
    // A process reading its own area is never withheld: the same bytes are then an empty environment.
    expect(parse(buffer.subarray(0, argvEnd), { self: true }).verdict).toBe('empty');
    // A byte short of XNU's cut (the last argument's NUL), or a string past it, is not its shape.
    expect(parse(buffer.subarray(0, argvEnd - 1)).verdict).not.toBe('withheld');
    expect(parse(buffer.subarray(0, argvEnd + MARKER.length + 1)).verdict).toBe('present');
  });

  // proves nothing of the contract: a pure parser of kern.procargs2 buffers, no process
  it('a withheld environment with an empty argv[0]: XNU\'s walk skips it with the exec path\'s padding and returns env[0] too: still "withheld"', () => {
    const { buffer, argvEnd } = procargs2({ path: '/bin/sh', argv: ['', '-c', 'sleep 60'], env: ['A=1', MARKER] });
    const p = parse(buffer.subarray(0, argvEnd + 'A=1'.length + 1));
    expect(p.verdict).toBe('withheld');
    expect(p.argv).toEqual(['', '-c', 'sleep 60']);
  });

  // proves nothing of the contract: a pure parser of kern.procargs2 buffers, no process
  it('a rewritten title (process.title: the argv area zero-filled past it) with the environment after it: the marker is found', () => {
    const argv = ['node', '/srv/app/server.js', '--port', '3000'];
    const env = ['HOME=/Users/u', MARKER, 'TERM=xterm'];
    const { buffer } = procargs2({ argv, env, argvArea: retitled(argv, 'api') });
    const p = parse(buffer);
    expect(p).toMatchObject({ argv: ['api'], argvComplete: true, zeroFilled: true, verdict: 'present' });
    expect(ownEnv(p)).toEqual(env);
    expect(marked(p.env)).toBe(true);
  });

  // proves nothing of the contract: a pure parser of kern.procargs2 buffers, no process
  it('a long rewritten title leaves fewer NULs than argc: argv ends at the run of NULs, and the environment after it is not read as arguments', () => {
    const argv = ['node', 'a.js', '-v', '1'];
    const env = [MARKER, 'HOME=/Users/u'];
    const { buffer } = procargs2({ argv, env, argvArea: retitled(argv, 'a-title-that-fills-the-whole-area') });
    const p = parse(buffer);
    // libuv cut the title to the area less two bytes: one NUL after it, and the area's last.
    const title = 'a-title-that-fills-the-whole-area'.slice(0, Buffer.concat(argv.map(nul)).length - 2);
    expect(p).toMatchObject({ argv: [title], argvComplete: true, zeroFilled: true });
    expect(ownEnv(p)).toEqual(env);
    expect(marked(p.env)).toBe(true);
  });

  // proves nothing of the contract: a pure parser of kern.procargs2 buffers, no process
  it('a withheld environment of a process with a rewritten title (XNU cuts inside the zero-filled area) is "withheld"', () => {
    const argv = ['node', '/srv/app/server.js', '--port', '3000'];
    const { buffer, argvEnd } = procargs2({ argv, env: [MARKER], argvArea: retitled(argv, 'api') });
    // XNU's walk: past the exec path and its NULs, argc strings: "api" and three empty ones.
    const start = argvEnd - Buffer.concat(argv.map(nul)).length;
    const p = parse(buffer.subarray(0, start + 'api'.length + 1 + (argv.length - 1)));
    expect(p).toMatchObject({ argv: ['api'], verdict: 'withheld' });
  });

  // proves nothing of the contract: a pure parser of kern.procargs2 buffers, no process
  it('an empty argv[0] is kept where the exec path\'s padding says where argv starts (a 64-bit process)', () => {
    const env = [MARKER, 'A=1'];
    const { buffer } = procargs2({ path: '/bin/zsh', argv: ['', '-l'], env });
    const p = parse(buffer);
    expect(p.argv).toEqual(['', '-l']);
    expect(ownEnv(p)).toEqual(env);
    expect(marked(p.env)).toBe(true);
    // Without the pointer size, argv[0] is the first string after the path's NULs (as ps reads it):
    // the arguments shift by one and env[0] is taken for the last one.
    expect(parse(buffer, { pointerSize: 0 })).toMatchObject({ argv: ['-l', MARKER], env: ['A=1'] });
  });

  // proves nothing of the contract: a pure parser of kern.procargs2 buffers, no process
  it('empty arguments in the middle of argv are arguments, not a rewritten title', () => {
    const { buffer } = procargs2({ argv: ['ssh', '', 'host', '', 'ls'], env: [MARKER] });
    const p = parse(buffer);
    expect(p).toMatchObject({ argv: ['ssh', '', 'host', '', 'ls'], zeroFilled: false, env: [MARKER] });
    // Trailing empty arguments: the same as a zero-filled area (not listed).
    expect(parse(procargs2({ argv: ['ssh', 'host', '', ''], env: [MARKER] }).buffer)).toMatchObject({ argv: ['ssh', 'host'], argvComplete: true, env: [MARKER] });
  });

  // proves nothing of the contract: a pure parser of kern.procargs2 buffers, no process
  it('argc larger than the strings present: the arguments found, argv incomplete, no environment, "empty" (read again), never "withheld"', () => {
    const { buffer, argvEnd } = procargs2({ argv: ['a', 'b'], env: [], argc: 5 });
    const p = parse(buffer.subarray(0, argvEnd));
    expect(p).toMatchObject({ argc: 5, argv: ['a', 'b'], argvComplete: false, env: [], verdict: 'empty' });
    // A whole area with too large an argc: the environment is read as arguments up to the apple[] strings' NULs.
    const huge = parse(procargs2({ argv: ['a'], env: ['A=1'], argc: 0x7fffffff }).buffer);
    expect(huge.argv).toEqual(['a', 'A=1']);
    expect(huge.verdict).not.toBe('withheld');
    const negative = procargs2({ argv: ['a'], env: ['A=1'], argc: -1 }).buffer;
    expect(parse(negative)).toMatchObject({ argc: -1, argv: [], verdict: 'present' });
  });

  // proves nothing of the contract: a pure parser of kern.procargs2 buffers, no process
  it('a buffer cut inside a string: the unterminated string is left out, what came before it is kept', () => {
    const env = ['A=1', MARKER, 'B=2'];
    const { buffer, argvEnd } = procargs2({ argv: ['sleep', '60'], env });
    // Inside the marker: the marker is not read (a cut token is no token).
    const inMarker = parse(buffer.subarray(0, argvEnd + 4 + 20));
    expect(inMarker.env).toEqual(['A=1']);
    expect(marked(inMarker.env)).toBe(false);
    // Inside argv: argv incomplete, no environment.
    expect(parse(buffer.subarray(0, argvEnd - 2))).toMatchObject({ argv: ['sleep', '6'], argvComplete: false, env: [], verdict: 'empty' });
    // Inside the exec path.
    expect(parse(buffer.subarray(0, 8))).toMatchObject({ valid: true, execPath: '/usr', argv: [], env: [], verdict: 'empty' });
  });

  // proves nothing of the contract: a pure parser of kern.procargs2 buffers, no process
  it('the marker: found only as an exact element of a CORDON_TREE entry', () => {
    const cases: [string[], boolean][] = [
      [[`CORDON_TREE=1.2.${'f'.repeat(32)}:${TOKEN}`, 'A=1'], true], // nested: the outer tree's token first
      [['A=1', `CORDON_TREE=${TOKEN.slice(0, -1)}0`], false], // another secret
      [['A=1', `XCORDON_TREE=${TOKEN}`], false],
      [['A=1'], false],
    ];
    for (const [env, found] of cases) {
      const p = parse(procargs2({ argv: ['sh'], env }).buffer);
      expect(ownEnv(p)).toEqual(env);
      expect(marked(p.env), env.join(' ')).toBe(found);
    }
  });

  // proves nothing of the contract: a pure parser of kern.procargs2 buffers, no process
  it('degenerate buffers: shorter than argc, zeroed (in the middle of an exec), filled to the caller\'s capacity (only the tail)', () => {
    expect(parse(Buffer.alloc(0))).toMatchObject({ valid: false, verdict: 'empty' });
    expect(parse(Buffer.from([1, 0, 0]))).toMatchObject({ valid: false, verdict: 'empty' });
    expect(parse(Buffer.alloc(4096))).toMatchObject({ valid: true, argc: 0, execPath: '', argv: [], env: [], verdict: 'empty' });
    const zeroed = Buffer.concat([int32(3), Buffer.alloc(508)]);
    expect(parse(zeroed)).toMatchObject({ argv: [''], zeroFilled: true, env: [], verdict: 'empty' });
    const { buffer } = procargs2({ argv: ['a'], env: [MARKER] });
    expect(parse(buffer, { capacity: buffer.length })).toMatchObject({ cut: true });
    expect(parse(buffer, { capacity: buffer.length + 1 })).toMatchObject({ cut: false, verdict: 'present' });
  });
});
