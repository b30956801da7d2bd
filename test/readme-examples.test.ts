// The README's code examples are what a new user copies first: every ```js
// block must parse on the Node this suite runs on (lane 1: Node 20, lane 2:
// Node 24; `await using` is a SyntaxError before Node 24, which is why the
// quick start keeps it in a comment) and type-check under `tsc --strict`
// against this checkout's types (an example that uses a stream the types say
// may be null, or an option that does not exist, fails here). They are not
// run: they start dev servers in directories of their own.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot } from './helpers/fixtures.js';
import { readmeBlocks, typeCheckBlocks } from './helpers/readme.js';
import { watchdog } from './helpers/time.js';

const blocks = readmeBlocks();
const dir = mkdtempSync(join(tmpdir(), 'cordon-readme-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the README's examples", () => {
  it('there are examples to check', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(2);
  });

  for (const b of blocks) {
    it(`example ${b.n} (README.md line ${b.line}) parses as an ES module on this Node`, () => {
      const file = join(dir, `example-${b.n}.mjs`);
      writeFileSync(file, b.code);
      // node --check: the syntax only; nothing runs.
      execFileSync(process.execPath, ['--check', file], { stdio: 'pipe', timeout: 30_000 });
    });
  }

  it("require() from CommonJS gives the same API (Node's require of ES modules, 20.19+: package.json's engines)", () => {
    const file = join(dir, 'require.cjs');
    writeFileSync(file, `const c = require(${JSON.stringify(join(repoRoot, 'dist', 'index.js'))});\nconsole.log(['spawn', 'run', 'capabilities', 'Registry'].map((k) => typeof c[k]).join(' '));\n`);
    const out = execFileSync(process.execPath, [file], { encoding: 'utf8', timeout: 30_000 });
    expect(out.trim()).toBe('function function function function');
    const engines = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
    expect(engines).toBe('>=20.19');
  });

  it('every example type-checks under --strict against these types', () => {
    // The package's name resolves to this checkout's sources.
    expect(typeCheckBlocks(blocks, dir, join(repoRoot, 'lib', 'index.js'))).toEqual([]);
  }, watchdog(120_000));
});
