// Every error cordon throws is a CordonError built in one place, with a code
// callers can rely on: each ERR_* / ABORT_ERR code written in lib/ is listed
// in CORDON_ERROR_CODES and each listed code is thrown somewhere; only the
// catalogue (lib/errors/) constructs a CordonError, its files import nothing
// of cordon's but ./error.js, and every other module reaches it through the
// barrel lib/errors.ts; and the public entry points refuse bad input with a
// listed code at stage 'input' before anything runs.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CORDON_ERROR_CODES, isCordonError, spawn, type CordonError } from '../lib/index.js';
import { repoRoot } from './helpers/fixtures.js';
import { rejected } from './helpers/assert.js';
import { useTag } from './helpers/procs.js';
import { newRegistry, tempDir } from './helpers/registry.js';
import { outcome } from './helpers/trees.js';

const libDir = join(repoRoot, 'lib');

/** Every TypeScript source of lib/, as a path relative to lib/ with '/' separators, and its text. */
function libSources(): { file: string; text: string }[] {
  const out: { file: string; text: string }[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts')) out.push({ file: relative(libDir, path).split(sep).join('/'), text: readFileSync(path, 'utf8') });
    }
  };
  walk(libDir);
  expect(out.length, 'lib/ has TypeScript sources').toBeGreaterThan(20);
  return out;
}

const CODE_LITERAL = /(['"`])(ERR_[A-Z0-9_]+|ABORT_ERR)\1/g;
const LIST = /export const CORDON_ERROR_CODES = \[[^\]]*\] as const;/;

/** The sources with the list itself cut out of lib/errors/error.ts (the list must not count as a use). */
function sourcesWithoutTheList(): { file: string; text: string }[] {
  const sources = libSources();
  const error = sources.find((s) => s.file === 'errors/error.ts');
  expect(error, 'lib/errors/error.ts exists').toBeDefined();
  expect(error!.text, 'lib/errors/error.ts holds CORDON_ERROR_CODES').toMatch(LIST);
  error!.text = error!.text.replace(LIST, '');
  return sources;
}

/** The code literals of `text`, each with its line number. */
function codeLiterals(text: string): { code: string; line: number }[] {
  return [...text.matchAll(CODE_LITERAL)].map((m) => ({ code: m[2]!, line: text.slice(0, m.index).split('\n').length }));
}

// Codes of Node's own errors that lib/ only reads, never throws: parseArgs'
// refusals, which lib/cli-args.ts turns into one-line usage errors (exit 2).
const READ_FROM_NODE: Record<string, readonly string[]> = {
  'cli-args.ts': ['ERR_PARSE_ARGS_UNKNOWN_OPTION', 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE', 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL'],
};

describe('error codes: CORDON_ERROR_CODES is the whole list', () => {
  // proves nothing of the contract: the error catalogue's source
  it('every ERR_* / ABORT_ERR code written in lib/ is listed', () => {
    const listed = new Set<string>(CORDON_ERROR_CODES);
    const unlisted: string[] = [];
    let seen = 0;
    for (const { file, text } of sourcesWithoutTheList()) {
      for (const { code, line } of codeLiterals(text)) {
        seen++;
        if (!listed.has(code) && !READ_FROM_NODE[file]?.includes(code)) unlisted.push(`lib/${file}:${line} ${code}`);
      }
    }
    expect(seen, 'code literals found in lib/ (the scan reads the sources)').toBeGreaterThan(20);
    expect(unlisted, 'codes lib/ uses that CORDON_ERROR_CODES (lib/errors/error.ts) does not list').toEqual([]);
  });

  // proves nothing of the contract: the error catalogue's source
  it('every listed code is used in lib/ outside the list, and none is listed twice', () => {
    const used = new Set(sourcesWithoutTheList().flatMap(({ text }) => codeLiterals(text).map((l) => l.code)));
    expect(CORDON_ERROR_CODES.filter((code) => !used.has(code)), 'listed codes nothing in lib/ uses').toEqual([]);
    expect(new Set(CORDON_ERROR_CODES).size, 'codes listed twice').toBe(CORDON_ERROR_CODES.length);
  });
});

describe('errors are built in one place', () => {
  // proves nothing of the contract: the error catalogue's source
  it('no file of lib/ outside lib/errors/ constructs a CordonError', () => {
    const builders = libSources()
      .filter(({ file }) => !file.startsWith('errors/'))
      .flatMap(({ file, text }) => text.split('\n').flatMap((line, i) => (line.includes('new CordonError(') ? [`lib/${file}:${i + 1}`] : [])));
    expect(builders, 'construct the error with a function of lib/errors/ instead').toEqual([]);
  });

  // proves nothing of the contract: the error catalogue's imports
  it("the catalogue's files import only ./error.js of cordon's; the rest of lib/ imports the barrel lib/errors.ts", () => {
    const wrong: string[] = [];
    for (const { file, text } of libSources()) {
      for (const m of text.matchAll(/\bfrom\s+'([^']+)'/g)) {
        const spec = m[1]!;
        if (spec.startsWith('node:') || file === 'errors.ts') continue;
        if (file.startsWith('errors/') ? spec !== './error.js' : /(^|\/)errors\//.test(spec)) wrong.push(`lib/${file} imports ${spec}`);
      }
    }
    expect(wrong).toEqual([]);
  });
});

/** The error `fn` throws synchronously (fails if it returns). */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected a throw, it returned');
}

/** `err` is a CordonError with a listed code, refused at stage 'input'. */
function expectInputRefusal(err: unknown, code: string): void {
  expect(isCordonError(err), `a CordonError (got ${String(err)})`).toBe(true);
  const e = err as CordonError;
  expect(CORDON_ERROR_CODES as readonly string[], `code ${e.code} is listed`).toContain(e.code);
  expect(e.code).toBe(code);
  expect(e.stage).toBe('input');
  expect(e.isLaunchFailure).toBe(true);
}

describe('public entry points refuse bad input with a listed code at stage input', () => {
  const spawnCases: [string, (env: NodeJS.ProcessEnv) => unknown, string][] = [
    ['spawn(): a NUL byte in an argument', (env) => spawn('sh', ['-c', 'sleep 300\0; echo hi'], { env }), 'ERR_INVALID_ARG_VALUE'],
    ['spawn(): a NUL byte in cwd', (env) => spawn('sh', ['-c', 'sleep 300'], { env, cwd: '/tmp\0x' }), 'ERR_INVALID_ARG_VALUE'],
    ['spawn(): cwd not a path', (env) => spawn('sh', ['-c', 'sleep 300'], { env, cwd: 42 as unknown as string }), 'ERR_INVALID_ARG_TYPE'],
    ['spawn(): an unknown option', (env) => spawn('sh', ['-c', 'sleep 300'], { env, gracePeriod: 1000 } as never), 'ERR_INVALID_ARG_VALUE'],
    // eslint-disable-next-line no-sparse-arrays
    ['spawn(): a hole in the arguments (a sparse array)', (env) => spawn('sh', ['-c', , 'sleep 300'] as string[], { env }), 'ERR_INVALID_ARG_TYPE'],
    ['spawn(): an environment value that is a Symbol', (env) => spawn('sh', ['-c', 'sleep 300'], { env: { ...env, A: Symbol('a') as never } }), 'ERR_INVALID_ARG_TYPE'],
    ["spawn(): an environment as an array of 'NAME=value' (a variable named 0)", (env) => spawn('sh', ['-c', 'sleep 300'], { env: Object.assign(['A=1'], env) as never }), 'ERR_INVALID_ARG_TYPE'],
    ["spawn(): a duration with a space (' 1s')", (env) => spawn('sh', ['-c', 'sleep 300'], { env, timeout: ' 1s' as never }), 'ERR_INVALID_ARG_VALUE'],
    // (checked on every platform, as Node's child_process does, though only Windows uses it)
    ["spawn(): windowsHide not a boolean ('yes')", (env) => spawn('sh', ['-c', 'sleep 300'], { env, windowsHide: 'yes' as never }), 'ERR_INVALID_ARG_TYPE'],
  ];
  for (const [name, call, code] of spawnCases) {
    // proves nothing of the contract: an input error (typed, nothing runs), no clause's own
    it(`${name} -> ${code}, nothing runs`, () => {
      // The tag's cleanup kills whatever carries it, should anything have started.
      const t = useTag();
      expectInputRefusal(
        thrown(() => call(t.env)),
        code,
      );
      expect(t.procs()).toEqual([]);
    });
  }

  // proves C6: a launch failure, nothing ran
  it('spawn(): a cwd that does not exist is a launch failure (stage launch, the errno as code), nothing runs', () => {
    const t = useTag();
    const err = thrown(() => spawn('sh', ['-c', 'sleep 300'], { env: t.env, cwd: join(tempDir('cordon-errors-'), 'no-such-dir') }));
    expect(isCordonError(err)).toBe(true);
    expect((err as CordonError).code).toBe('ENOENT');
    expect((err as CordonError).stage).toBe('launch');
    expect((err as CordonError).isLaunchFailure).toBe(true);
    expect(t.procs()).toEqual([]);
  });

  // proves nothing of the contract: the windowsHide option on POSIX
  it('spawn(): windowsHide: true is accepted and ignored on POSIX, as Node does (the command runs, exit 0)', async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', 'exit 0'], { env: t.env, windowsHide: true });
    const result = await outcome(proc.result, 15000, 'the result');
    expect(result.ok ? result.value.exitCode : result.error).toBe(0);
  });

  // proves nothing of the contract: an input error
  it('registry.owner(\'\') -> ERR_INVALID_ARG_VALUE', () => {
    const registry = newRegistry();
    expectInputRefusal(
      thrown(() => registry.owner('')),
      'ERR_INVALID_ARG_VALUE',
    );
  });

  // proves nothing of the contract: an input error
  it('registry.adopt() with a malformed token -> rejects with ERR_INVALID_ARG_VALUE', async () => {
    const registry = newRegistry();
    const how = await outcome(registry.adopt('1-0011223344556677', { token: 'not-a-token' }), 5000, 'adopt() to reject');
    expectInputRefusal(rejected(how, 'adopt() resolved'), 'ERR_INVALID_ARG_VALUE');
  });
});
