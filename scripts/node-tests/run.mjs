#!/usr/bin/env node
// Node's own child_process tests (test/parallel/test-child-process-*.js of
// Node 18.20's source, from Debian's source package of nodejs), each run
// twice by this node: as written (the baseline: does it pass with Node's own
// child_process here?) and with `child_process` swapped for
// cordon/child_process (swap.mjs). Their code is not ours and never enters
// the repository: it is fetched at test time into the CI cache (source.mjs).
//
//   node scripts/node-tests/run.mjs [--only a,b] [--json out.json] [--markdown]
//
// Prints one line per test and the counts; with --markdown, the table of
// docs/node-tests.md (each test's verdict, read as the vitest project reads it). The vitest project `node-tests`
// (test/node-tests/node-tests.test.ts) is what CI runs.
import { parseArgs } from 'node:util';
import { writeFileSync } from 'node:fs';
import { NODE_SOURCE, nodeTests, runOne } from './source.mjs';
import { DIFFERENCES, notOffered, short } from './verdicts.mjs';

const { values } = parseArgs({ options: { only: { type: 'string' }, json: { type: 'string' }, markdown: { type: 'boolean' }, jobs: { type: 'string', default: '2' } } });
const { root, files } = await nodeTests();
const only = values.only ? new Set(values.only.split(',')) : undefined;
const chosen = files.filter((f) => !only || only.has(f) || only.has(f.replace(/^test-child-process-/, '').replace(/\.m?js$/, '')));
const results = [];
let next = 0;
async function worker() {
  while (next < chosen.length) {
    const file = chosen[next++];
    const baseline = await runOne(root, file, false);
    const cordon = await runOne(root, file, true);
    const r = { file, baseline, cordon };
    results.push(r);
    const tail = cordon.ok ? '' : `  ${(cordon.missing.length ? `missing: ${cordon.missing.join(',')} ` : '') + firstError(cordon.stderr)}`;
    console.log(`${baseline.ok ? 'base ok ' : 'base FAIL'} ${cordon.ok ? 'cordon ok ' : 'cordon FAIL'} ${file}${tail}`);
  }
}
function firstError(stderr) {
  const line = stderr.split('\n').find((l) => /Error|assert|expected|Timed out|Received/i.test(l)) ?? stderr.split('\n').find(Boolean) ?? '';
  return line.trim().slice(0, 160);
}
await Promise.all(Array.from({ length: Number(values.jobs) }, worker));
results.sort((a, b) => a.file.localeCompare(b.file));
const base = results.filter((r) => r.baseline.ok);
console.log(`${results.length} tests; ${base.length} pass with node:child_process here; of those ${base.filter((r) => r.cordon.ok).length} pass with cordon/child_process`);
if (values.json) writeFileSync(values.json, JSON.stringify(results, null, 2));

if (values.markdown) {
  const verdict = (r) => {
    if (!r.baseline.ok) return ['not applicable', `fails with node:child_process on node ${process.version} too`];
    if (r.cordon.ok) return ['passed', ''];
    const why = notOffered(r.file, r.cordon);
    if (why) return ['not applicable', why];
    if (DIFFERENCES[short(r.file)]) return ['differs', DIFFERENCES[short(r.file)]];
    return ['FAILED', firstError(r.cordon.stderr)];
  };
  const rows = results.map((r) => [r.file, ...verdict(r)]);
  const count = (v) => rows.filter((row) => row[1] === v).length;
  const applicable = rows.length - count('not applicable');
  console.log(`\nNode ${NODE_SOURCE.version}'s ${rows.length} test-child-process-* files, node ${process.version}, ${new Date().toISOString().slice(0, 10)}: ` +
    `${count('passed')} passed, ${count('differs')} differ (known), ${count('FAILED')} failed, ${count('not applicable')} not applicable; ` +
    `${count('passed')} of ${applicable} applicable pass (${Math.round((100 * count('passed')) / applicable)}%).\n`);
  console.log('| test | verdict | why |\n| --- | --- | --- |');
  for (const [file, v, why] of rows) console.log(`| ${file} | ${v} | ${why.replace(/\|/g, '\\|')} |`);
}
