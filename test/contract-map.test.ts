// docs/contract-tests.md lists, clause by clause, the tests that prove
// docs/contract.md: generated from the tests' header comments and titles by
// scripts/contract-tests.mjs. This keeps it true: the file must be what the
// tests say now, and every clause must be named by at least one test file
// that has tests. (Reads source files only: nothing runs.)
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script, without types
import { readmeCount, render } from '../scripts/contract-tests.mjs';

interface Rendered {
  text: string;
  clauses: { id: string; title: string }[];
  files: { path: string; clauses: string[]; titles: string[] }[];
  bodies: { all: number; linux: number; model: number; win: number };
}

describe('the contract, clause by clause, names the tests that prove it', () => {
  const rendered = render() as Rendered;

  it('docs/contract-tests.md is what the tests say (run `node scripts/contract-tests.mjs` after changing tests)', () => {
    expect(readFileSync('docs/contract-tests.md', 'utf8')).toBe(rendered.text);
  });

  it('docs/development.md states how many distinct test bodies there are', () => {
    expect(readFileSync('docs/development.md', 'utf8')).toContain((readmeCount as (b: Rendered['bodies']) => string)(rendered.bodies));
  });

  it('every clause of docs/contract.md is named by a test file with tests in it', () => {
    expect(rendered.clauses.map((c) => c.id)).toEqual(Array.from({ length: 13 }, (_, i) => `C${i + 1}`));
    const unproven = rendered.clauses.filter((c) => !rendered.files.some((f) => f.clauses.includes(c.id) && f.titles.length > 0)).map((c) => c.id);
    expect(unproven).toEqual([]);
  });

  it('every test file has tests that the map can read', () => {
    expect(rendered.files.filter((f) => f.titles.length === 0).map((f) => f.path)).toEqual([]);
  });
});
