#!/usr/bin/env node
// Which tests prove each clause of docs/contract.md, read from the tests
// themselves, test by test. The tests are the `it(…)`, `itWhere(cond, …)` and
// `test(…)` calls at the start of a line in test/*.test.ts, test/xnu-model/*.test.ts
// and test/win/*.test.mjs (with modifiers too: `it.skip(…)`, `it.skipIf(c)(…)`,
// `it.each(rows)(…)`; and a file's own wrapper `function itSomething(title, …)`),
// by title as written in the source (a template's `${…}` kept as is: the tier or
// the case fills it in at run time; a title held in a variable: the literal it
// was given). The line directly above each test says what it proves:
//
//   // proves C3, C4                 it observes C3 and C4 from outside: real
//                                    processes (the observer, /proc, ps), files
//                                    and signals they leave, exit statuses
//   // proves C3, C6 (own report)    C6 only through what cordon itself returns
//                                    (a result field, an error, capabilities()),
//                                    with nothing observed to hold it against
//   // proves nothing of the contract: <why>
//                                    a helper's unit test, a doc check, the
//                                    package, an option no clause covers
//
// Anything after the clause list's first ': ' is a note for the reader. A file's
// header comment (`// CONTRACT C3, C4: …`) is a summary for its reader; this
// script no longer reads it. Writes docs/contract-tests.md (each clause, its tests
// from outside and, apart, those through cordon's own report, grouped by file);
// with --check, exits 1 when that file is not what the tests say, a test has no
// readable annotation or names a clause docs/contract.md lacks, or a clause has
// no test from outside (test/contract-map.test.ts checks the same, so the list
// cannot drift from the suite). Writing prints the sentence docs/development.md
// must state.
//
//   node scripts/contract-tests.mjs [--check]
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = 'docs/contract-tests.md';

/** The clause titles of docs/contract.md: C1 … C12, in order. */
export function clauses(contract) {
  return [...contract.matchAll(/^## (C\d+) (.+)$/gm)].map((m) => ({ id: m[1], title: m[2].trim() }));
}

/** Reads one JS string literal at `i` (a quote); returns its text as written and the index after it. */
function literal(src, i) {
  const q = src[i];
  let j = i + 1;
  let depth = 0;
  while (j < src.length) {
    const c = src[j];
    if (c === '\\') {
      j += 2;
      continue;
    }
    if (q === '`' && c === '$' && src[j + 1] === '{') {
      depth++;
      j += 2;
      continue;
    }
    if (q === '`' && depth > 0 && c === '}') {
      depth--;
      j++;
      continue;
    }
    if (c === q && depth === 0) return { text: src.slice(i + 1, j), end: j + 1 };
    j++;
  }
  return { text: src.slice(i + 1), end: src.length };
}

/** Skips one argument expression from `i`; returns the index of the comma or closing parenthesis that ends it. */
function skipArgument(src, i) {
  let depth = 0;
  for (let j = i; j < src.length; j++) {
    const c = src[j];
    if (c === "'" || c === '"' || c === '`') {
      j = literal(src, j).end - 1;
      continue;
    }
    if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') {
      if (depth === 0) return j;
      depth--;
    } else if (c === ',' && depth === 0) return j;
  }
  return src.length;
}

/** Skips `.name` and `.name(…)` modifiers of a test call (`.skip`, `.skipIf(c)`, `.each(rows)`…) from `i`; returns the index of its `(`, or -1. */
function skipModifiers(src, i) {
  for (;;) {
    const m = /^\.(\w+)/.exec(src.slice(i, i + 40));
    if (!m) return src[i] === '(' ? i : -1;
    i += m[0].length;
    if (src[i] === '(' && m[1] !== 'skip' && m[1] !== 'only' && m[1] !== 'concurrent' && m[1] !== 'sequential' && m[1] !== 'fails') {
      i = skipArgument(src, i + 1);
      while (src[i] === ',') i = skipArgument(src, i + 1);
      if (src[i] !== ')') return -1;
      i++;
    }
  }
}

/**
 * A test's annotation, the line comment directly above its call:
 *   // proves C3, C4                 each clause observed from outside (real processes)
 *   // proves C3, C6 (own report)    C6 only through what cordon itself returns
 *   // proves nothing of the contract: <why>
 * Anything after the clause list's first ': ' is a note. Returns null where the line is not
 * an annotation, { error } where it is one that cannot be read.
 */
export function annotation(line) {
  const m = /^\s*\/\/\s*proves\b\s*(.*)$/.exec(line ?? '');
  if (!m) return null;
  const rest = m[1].trim();
  const nothing = /^nothing of the contract:\s*(\S.*)$/.exec(rest);
  if (nothing) return { outside: [], report: [], nothing: nothing[1] };
  const list = rest.split(/:\s/)[0].trim();
  const outside = [];
  const report = [];
  for (const item of list.split(/\s*,\s*/)) {
    const c = /^(C\d{1,2})( \(own report\))?$/.exec(item);
    if (!c) return { error: `cannot read "${item}" in "${line.trim()}" (want C<n>, C<n> (own report), or "nothing of the contract: <why>")` };
    (c[2] ? report : outside).push(c[1]);
  }
  return { outside: [...new Set(outside)], report: [...new Set(report.filter((c) => !outside.includes(c)))], nothing: null };
}

/**
 * A file's tests, in source order: every `it(…)`, `test(…)` and `itWhere(cond, …)` call at
 * the start of a line, with modifiers (`it.skip(…)`, `it.skipIf(c)(…)`, `it.each(rows)(…)`),
 * by title as written (a title that is not a literal: its expression), with the line it
 * starts on and its annotation.
 */
export function tests(source) {
  const found = [];
  const lines = source.split('\n');
  // A file's own wrapper, `function itWithRealMove(title, …)`: its calls are tests, the call
  // inside it (titled by its parameter) is not.
  const wrappers = [...source.matchAll(/^function (it[A-Z]\w*)\(\s*title\b/gm)].map((m) => m[1]);
  const names = new RegExp(`^([ \\t]*)(${['it', 'test', 'itWhere', ...wrappers].join('|')})\\b(?=[.(])`, 'gm');
  for (const m of source.matchAll(names)) {
    let i = skipModifiers(source, m.index + m[0].length);
    if (i < 0) continue;
    i++;
    if (m[2] === 'itWhere') i = skipArgument(source, i) + 1;
    while (/\s/.test(source[i])) i++;
    const q = source[i];
    let title;
    if (q === "'" || q === '"' || q === '`') {
      const lit = literal(source, i);
      const after = source.slice(lit.end).trimStart()[0];
      title = after === ',' || after === ')' ? lit.text.replace(/\\(['"`])/g, '$1') : source.slice(i, skipArgument(source, i)).trim();
    } else title = source.slice(i, skipArgument(source, i)).trim();
    if (wrappers.length > 0 && title === 'title') continue;
    // A title held in a variable: the literal it was last given before the call.
    if (/^[A-Za-z_]\w*$/.test(title)) {
      const given = [...source.slice(0, m.index).matchAll(new RegExp(`\\b(?:const|let) ${title} = (['"\`])`, 'g'))].pop();
      if (given) title = literal(source, given.index + given[0].length - 1).text;
    }
    const line = source.slice(0, m.index).split('\n').length;
    found.push({ line, title: title.replace(/\s+/g, ' '), annotation: annotation(lines[line - 2]) });
  }
  return found;
}

/** The sentence docs/development.md states (test/contract-map.test.ts checks it). */
export function readmeCount(bodies) {
  return `${bodies.all} distinct test bodies (${bodies.linux} in \`test/*.test.ts\`, ${bodies.model} in \`test/xnu-model/\`, ${bodies.win} in \`test/win/\`): ${bodies.outside} prove a clause of the contract from outside, ${bodies.report} only through cordon's own report, ${bodies.nothing} nothing of it`;
}

function testFiles() {
  const files = [];
  for (const dir of ['test', 'test/xnu-model', 'test/win']) {
    for (const name of readdirSync(join(root, dir)).sort()) {
      if (/\.test\.(ts|mjs)$/.test(name)) files.push(`${dir}/${name}`);
    }
  }
  return files;
}

const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** Lines listing tests grouped by file: `- file` then `  - title`. */
function byFile(list, note) {
  const out = [];
  let path = null;
  for (const t of list) {
    if (t.path !== path) {
      path = t.path;
      const n = list.filter((u) => u.path === path).length;
      out.push(`- \`${path}\` (${plural(n, 'test')})`);
    }
    out.push(`  - ${t.title}${note ? note(t) : ''}`);
  }
  return out;
}

/** docs/contract-tests.md as the tests say it, and what the map test checks. */
export function render() {
  const contract = readFileSync(join(root, 'docs/contract.md'), 'utf8');
  const cls = clauses(contract);
  const known = new Set(cls.map((c) => c.id));
  const files = testFiles().map((path) => ({ path, tests: tests(readFileSync(join(root, path), 'utf8')) }));
  const all = files.flatMap((f) => f.tests.map((t) => ({ path: f.path, ...t })));
  const problems = [];
  for (const t of all) {
    const where = `${t.path}:${t.line} "${t.title}"`;
    if (!t.annotation) problems.push(`${where}: no \`// proves …\` line directly above it`);
    else if (t.annotation.error) problems.push(`${where}: ${t.annotation.error}`);
    else for (const c of [...t.annotation.outside, ...t.annotation.report]) if (!known.has(c)) problems.push(`${where}: names ${c}, which docs/contract.md does not have`);
  }
  const ok = all.filter((t) => t.annotation && !t.annotation.error);
  const outsideOf = (id) => ok.filter((t) => t.annotation.outside.includes(id));
  const reportOf = (id) => ok.filter((t) => t.annotation.report.includes(id));
  const nothing = ok.filter((t) => t.annotation.nothing);
  const count = (dir) => all.filter((t) => t.path.startsWith(dir)).length;
  const bodies = {
    all: all.length,
    linux: all.length - count('test/win/') - count('test/xnu-model/'),
    model: count('test/xnu-model/'),
    win: count('test/win/'),
    outside: ok.filter((t) => t.annotation.outside.length > 0).length,
    report: ok.filter((t) => t.annotation.outside.length === 0 && t.annotation.report.length > 0).length,
    nothing: nothing.length,
  };
  const lines = [
    '# Which tests prove each clause',
    '',
    '<!-- Generated by `node scripts/contract-tests.mjs` from the `// proves …` line above',
    '     each test and its title; test/contract-map.test.ts fails when it is stale. -->',
    '',
    'Each clause of [the contract](contract.md), with the tests that say they prove it: the',
    'line comment directly above each test (`// proves C3, C4`; `C6 (own report)` where the',
    "test reads only what cordon itself returns; `// proves nothing of the contract: <why>`),",
    "grouped by file, by title as written (`${…}` is filled in per tier or case at run time).",
    'A test *from outside* observes real processes (the observer, `/proc`, `ps`, files and',
    "signals the tree's processes leave), which is what the contract asks of its evidence;",
    "one through *cordon's own report* checks a field, an error or an answer cordon gives,",
    'and is listed apart, as support, never as evidence. The Linux files run once per tier',
    '(cgroup, subreaper, process-group) unless they are tier-independent; `test/xnu-model/`',
    "runs on the darwin build, on a model of XNU's process table (`.ci/darwin-model.sh`,",
    '[xnu-model.md](xnu-model.md)); `test/win/` runs under Wine (`.ci/windows.sh`). A file\'s',
    'header comment (`// CONTRACT C…`) is a summary for its reader; the map does not read it.',
    '',
    `In all: ${plural(bodies.all, 'test')} as written (one written in a loop counts once) in ${files.length} files (${bodies.win} of them in test/win/, ${bodies.model} in test/xnu-model/): ${bodies.outside} prove a clause from outside, ${bodies.report} only through cordon's own report, ${bodies.nothing} nothing of the contract.`,
    '',
    '| clause | from outside | own report only |',
    '| --- | --- | --- |',
    ...cls.map((c) => `| ${c.id} ${c.title} | ${outsideOf(c.id).length} | ${reportOf(c.id).length} |`),
    '',
  ];
  for (const c of cls) {
    const outside = outsideOf(c.id);
    const report = reportOf(c.id);
    lines.push(`## ${c.id} ${c.title}`, '');
    if (outside.length === 0) lines.push('No test observes this clause from outside.', '');
    else lines.push(`From outside (${plural(outside.length, 'test')}):`, '', ...byFile(outside), '');
    if (report.length > 0) lines.push(`Through cordon's own report only (${plural(report.length, 'test')}):`, '', ...byFile(report), '');
  }
  lines.push('## Tests that prove nothing of the contract', '', `${plural(nothing.length, 'test')}, each with the reason its annotation gives:`, '', ...byFile(nothing, (t) => ` (${t.annotation.nothing})`), '');
  if (problems.length > 0) lines.push('## Tests the map cannot place', '', ...problems.map((p) => `- ${p}`), '');
  return { text: lines.join('\n'), clauses: cls, files, tests: all, problems, evidence: Object.fromEntries(cls.map((c) => [c.id, { outside: outsideOf(c.id).length, report: reportOf(c.id).length }])), bodies };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { text, bodies, problems, evidence } = render();
  for (const p of problems) console.error(p);
  if (process.argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(join(root, OUT), 'utf8');
    } catch {}
    if (current !== text) {
      console.error(`${OUT} is stale: run \`node scripts/contract-tests.mjs\` and commit it`);
      process.exit(1);
    }
    const bare = Object.entries(evidence).filter(([, e]) => e.outside === 0).map(([id]) => id);
    if (problems.length > 0 || bare.length > 0) {
      if (bare.length > 0) console.error(`no test observes ${bare.join(', ')} from outside`);
      process.exit(1);
    }
    console.log(`${OUT} is what the tests say`);
  } else {
    writeFileSync(join(root, OUT), text);
    console.log(`wrote ${OUT}`);
    console.log(`docs/development.md must say: ${readmeCount(bodies)}`);
  }
}
