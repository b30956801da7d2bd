// The README's ```js blocks, and a `tsc --strict` over them: what a new user
// copies first, checked against this checkout's sources
// (readme-examples.test.ts) and against the installed package
// (package.test.ts).
import { readFileSync, writeFileSync } from 'node:fs';
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
  const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
  return [...readme.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m, i) => ({
    n: i + 1,
    line: readme.slice(0, m.index).split('\n').length + 1,
    code: m[1]!,
  }));
}

/**
 * Writes each block to `dir` as an ES module (`from 'cordon'` replaced by
 * `cordonFrom` when given) and type-checks them all under --strict with
 * Node's module resolution; returns the diagnostics, each prefixed by where.
 */
export function typeCheckBlocks(blocks: ReadmeBlock[], dir: string, cordonFrom?: string): string[] {
  const files = blocks.map((b) => {
    const file = join(dir, `example-${b.n}.mts`);
    const code = cordonFrom === undefined ? b.code : b.code.replace(/from 'cordon'/g, `from ${JSON.stringify(cordonFrom)}`);
    writeFileSync(file, `${code}\nexport {};\n`);
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
    const where = d.file && d.start !== undefined ? `${d.file.fileName.replace(dir, 'README')}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: ` : '';
    return where + ts.flattenDiagnosticMessageText(d.messageText, '\n');
  });
}
