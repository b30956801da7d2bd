// The code blocks of README.md and docs/*.md, what a new user copies first,
// and a `tsc --strict` over them: run by doc-examples.test.ts (against this
// checkout, or the packed tarball in the package lane) and type-checked
// against the installed package by package.test.ts.
//
// Each fenced block in js, ts, sh or console is either run or says why not:
// the first non-blank line after its closing fence is
//   <!-- not runnable: <the reason> -->       it is not run, and the reason is listed
//   <!-- expect: <a regular expression> -->   its output must match (js, ts)
// A line `<!-- needs: confine -->` right above the fence names what the block needs
// of this host (capabilities().guarantees.<need>); where it lacks it the block is
// skipped, saying so.
// Or, without either, a js/ts block whose every `console.log(...); // <what it prints>`
// says what it prints (a parenthesis after it is a remark) must print those lines.
// A console block is run line by line (`$ command`) and its output compared with the
// block's, numbers and leftover command lines aside.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { repoRoot } from './fixtures.js';

export interface ReadmeBlock {
  /** 1-based, in README order. */
  n: number;
  /** README.md line of the block's first line of code. */
  line: number;
  code: string;
}

export function readmeBlocks(): ReadmeBlock[] {
  return docBlocks()
    .filter((b) => b.file === 'README.md' && b.lang === 'js')
    .map((b, i) => ({ n: i + 1, line: b.line, code: b.code }));
}

export const RUNNABLE_LANGS = ['js', 'ts', 'sh', 'console'] as const;
export type Lang = (typeof RUNNABLE_LANGS)[number];

export interface DocBlock {
  /** Repository-relative path. */
  file: string;
  /** Line of the block's first line of code. */
  line: number;
  lang: Lang;
  code: string;
  /** Why the block is not run (undefined: it is run). */
  notRunnable?: string;
  /** What its output must match. */
  expect?: RegExp;
  /** What it needs of this host (a guarantee of capabilities() that must be true), from `<!-- needs: … -->` above it. */
  needs?: string;
  /** What its `console.log(...); // …` comments say it prints, line by line ([] when none do). */
  said: string[];
}

/** Every js/ts/sh/console block of README.md and docs/*.md, in file order. */
export function docBlocks(): DocBlock[] {
  const files = ['README.md', ...readdirSync(join(repoRoot, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
  const blocks: DocBlock[] = [];
  for (const file of files) {
    const text = readFileSync(join(repoRoot, file), 'utf8');
    for (const m of text.matchAll(/^```([\w-]*)[^\n]*\n([\s\S]*?)^```[ \t]*$/gm)) {
      const lang = m[1] as Lang;
      if (!RUNNABLE_LANGS.includes(lang)) continue;
      const after = text.slice(m.index + m[0].length).match(/^\s*<!--\s*(not runnable|expect):\s*([\s\S]*?)\s*-->/);
      blocks.push({
        file,
        line: text.slice(0, m.index).split('\n').length + 1,
        lang,
        code: m[2]!,
        notRunnable: after?.[1] === 'not runnable' ? after[2] : undefined,
        expect: after?.[1] === 'expect' ? new RegExp(after[2]!) : undefined,
        needs: text.slice(0, m.index).match(/<!--\s*needs:\s*(\w+)\s*-->\s*$/)?.[1],
        said: [...m[2]!.matchAll(/console\.log\(.*\); \/\/ (.*?)(?: \(.*\))?$/gm)].map((s) => s[1]!),
      });
    }
  }
  return blocks;
}

/** `README.md:72`, for titles and messages. */
export const where = (b: { file: string; line: number }): string => `${b.file}:${b.line}`;

/**
 * Writes each block to `dir` as an ES module (`from 'cordon'` replaced by
 * `cordonFrom` when given; else 'cordon' resolves from `dir`'s node_modules) and
 * type-checks them all under --strict with Node's module resolution; returns
 * the diagnostics, each prefixed by where.
 */
export function typeCheckBlocks(blocks: ReadmeBlock[], dir: string, cordonFrom?: string): string[] {
  return typeCheck(
    blocks.map((b) => ({ name: `example-${b.n}.mts`, code: b.code, label: `README:${b.line}` })),
    dir,
    cordonFrom,
  );
}

export function typeCheck(sources: { name: string; code: string; label: string }[], dir: string, cordonFrom?: string): string[] {
  const labels = new Map<string, string>();
  const files = sources.map((s) => {
    const file = join(dir, s.name);
    const code = cordonFrom === undefined ? s.code : s.code.replace(/from 'cordon'/g, `from ${JSON.stringify(cordonFrom)}`);
    writeFileSync(file, `${code}\nexport {};\n`);
    labels.set(file, s.label);
    return file;
  });
  const program = ts.createProgram(files, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ['lib.es2022.d.ts', 'lib.esnext.disposable.d.ts'],
    types: ['node'],
    typeRoots: [join(repoRoot, 'node_modules', '@types')],
    strict: true,
    noEmit: true,
    skipLibCheck: true,
  });
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const at = d.file && d.start !== undefined ? `${labels.get(d.file.fileName) ?? d.file.fileName}+${d.file.getLineAndCharacterOfPosition(d.start).line}: ` : '';
    return at + ts.flattenDiagnosticMessageText(d.messageText, '\n');
  });
}

/** A TypeScript block as the ES module Node runs. */
export function transpile(code: string): string {
  return ts.transpileModule(code, { compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext } }).outputText;
}
