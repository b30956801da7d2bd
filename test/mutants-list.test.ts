// scripts/mutants.mjs (docs/mutants.md) breaks one behaviour at a time and
// runs the tests the contract names for it. A mutant whose text is no longer
// in its file does nothing: the script reports it "stale", but only when
// someone runs the script (minutes a mutant). This keeps the list true at
// every run of the suite: each edit's text is in its file exactly once, the
// tests it names exist, and a mutant marked guarded names the mutant that
// removes both guards, which is itself in the default list. (Reads source
// files only: nothing runs.)
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script, without types
import { MUTANTS } from '../scripts/mutants.mjs';
import { repoRoot } from './helpers/fixtures.js';

interface Edit {
  file: string;
  search: string;
  replace: string;
}
interface Mutant extends Edit {
  id: string;
  what: string;
  tests: string[];
  project: string;
  model?: boolean;
  also?: Edit[];
  guarded?: { by: string; why: string };
}

const mutants = MUTANTS as Mutant[];

describe('the mutation check (scripts/mutants.mjs) applies to the code as it is', () => {
  // proves nothing of the contract: the mutation tool's list is current
  it('every edit of every mutant finds its text exactly once, and changes it', () => {
    const problems: string[] = [];
    for (const m of mutants) {
      for (const e of [m, ...(m.also ?? [])]) {
        const path = join(repoRoot, e.file);
        if (!existsSync(path)) {
          problems.push(`${m.id}: ${e.file} does not exist`);
          continue;
        }
        const count = readFileSync(path, 'utf8').split(e.search).length - 1;
        if (count !== 1) problems.push(`${m.id}: its text is found ${count} times in ${e.file}: ${JSON.stringify(e.search.slice(0, 80))}`);
        if (e.search === e.replace) problems.push(`${m.id}: an edit of ${e.file} changes nothing`);
      }
    }
    expect(problems, 'fix scripts/mutants.mjs (and rerun the mutants changed)').toEqual([]);
  });

  // proves nothing of the contract: the mutation tool's list is current
  it('ids are unique, named tests exist, and a guarded mutant names a mutant of the default list that removes both guards', () => {
    const ids = mutants.map((m) => m.id);
    expect(ids.filter((id, i) => ids.indexOf(id) !== i), 'duplicate ids').toEqual([]);
    const problems: string[] = [];
    for (const m of mutants) {
      for (const t of m.tests) if (!existsSync(join(repoRoot, t))) problems.push(`${m.id}: no test file ${t}`);
      if (m.guarded) {
        const by = mutants.find((x) => x.id === m.guarded!.by);
        if (!by) problems.push(`${m.id}: guarded by ${m.guarded.by}, which is not in the list`);
        else if (by.guarded) problems.push(`${m.id}: guarded by ${by.id}, itself guarded (not in the default list)`);
        else if (!([by, ...(by.also ?? [])] as Edit[]).some((e) => e.file === m.file)) problems.push(`${m.id}: ${by.id} edits none of ${m.file}`);
        if (m.guarded.why.length < 40) problems.push(`${m.id}: say why the guard left holds`);
      }
    }
    expect(problems).toEqual([]);
    expect(mutants.filter((m) => !m.guarded).length, 'the default list').toBeGreaterThan(20);
  });
});
