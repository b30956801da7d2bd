#!/usr/bin/env node
// Prints the closing line of a test run from vitest JSON reports
// (`--reporter=json --outputFile=<file>`):
//
//   node scripts/summary.mjs [--exited-nonzero=<report>]... [--failed-step=<name>]... <report.json>...
//
// One label line per report when there are several, then exactly one final
// line `N passed, N failed` (`, N skipped` when any were skipped), summed over
// all reports; under each label, every skipped test by name (names carry the
// reason). Each of these counts as one failed too, so that the final line
// never reads "0 failed" for a run that failed:
//   - a missing or unreadable report (the lane died before vitest wrote it),
//   - a file that failed outside any test (it did not load),
//   - --exited-nonzero=<report>: that lane's command failed although its report
//     shows no failed test (e.g. vitest's global teardown found a leak),
//   - --failed-step=<name>: a check outside any lane (e.g. the leak check).
// Right before the final line, every failed test by lane and name with the
// first lines of its error, so that the tail of a run's output names what
// failed and why.
// Exits 1 when anything failed or when a report ran no test.
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

const option = (name) => process.argv.slice(2).filter((a) => a.startsWith(`--${name}=`)).map((a) => a.slice(name.length + 3));
const exitedNonzero = new Set(option('exited-nonzero'));
const failedSteps = option('failed-step');
const files = process.argv.slice(2).filter((a) => !a.startsWith('--'));
if (files.length === 0) {
  console.error('usage: node scripts/summary.mjs [--exited-nonzero=<report>]... [--failed-step=<name>]... <vitest-report.json>...');
  process.exit(2);
}

const plain = (text) => String(text ?? '').replace(/\u001b\[[0-9;]*m/g, '');
const failures = [];

const line = ({ passed, failed, skipped }) => `${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`;
const total = { passed: 0, failed: 0, skipped: 0 };
let emptyLane = false;

for (const file of files) {
  const label = basename(file).replace(/\.json$/, '');
  let report;
  try {
    report = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    // The lane died before vitest wrote its report: count it as one failure.
    console.log(`${label}: no usable report (${err.code ?? err.message}), counted as 1 failed`);
    total.failed += 1;
    continue;
  }
  const counts = {
    passed: report.numPassedTests ?? 0,
    failed: report.numFailedTests ?? 0,
    skipped: (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0),
  };
  const notes = [];
  if (counts.passed + counts.failed === 0) {
    notes.push('no test ran');
    emptyLane = true;
  }
  // A file that fails to load is a failed suite with no failed test: count each as one failure.
  const loadErrors = (report.testResults ?? []).filter((r) => r.status === 'failed' && !(r.assertionResults ?? []).some((a) => a.status === 'failed'));
  if (loadErrors.length) {
    counts.failed += loadErrors.length;
    notes.push(`${loadErrors.length} file(s) failed outside any test`);
  } else if (counts.failed === 0 && (report.success === false || exitedNonzero.has(file))) {
    counts.failed += 1;
    notes.push(report.success === false ? 'vitest reported a failure outside any test' : 'exited nonzero with no failed test');
  }
  for (const key of Object.keys(total)) total[key] += counts[key];
  if (files.length > 1 || notes.length) console.log(`${label}: ${line(counts)}${notes.length ? ` (${notes.join('; ')})` : ''}`);
  for (const r of loadErrors) console.log(`  ${r.name}: ${String(r.message ?? '').split('\n')[0]}`);
  for (const r of loadErrors) failures.push({ label, name: `${r.name} (did not load)`, message: r.message });
  for (const r of report.testResults ?? []) {
    for (const a of r.assertionResults ?? []) {
      if (a.status === 'failed') failures.push({ label, name: a.fullName ?? a.title, message: (a.failureMessages ?? [])[0] });
    }
  }
  // Every skip by name (the names carry the reason), once per distinct name.
  const skips = new Map();
  for (const r of report.testResults ?? []) {
    for (const a of r.assertionResults ?? []) {
      if (a.status !== 'pending' && a.status !== 'skipped' && a.status !== 'todo') continue;
      const name = a.fullName ?? a.title;
      skips.set(name, (skips.get(name) ?? 0) + 1);
    }
  }
  for (const [name, n] of skips) console.log(`  skipped${n > 1 ? ` (${n}x)` : ''}: ${name}`);
}

for (const step of failedSteps) {
  console.log(`${step}: failed, counted as 1 failed`);
  total.failed += 1;
}

if (failures.length) {
  console.log('failed tests:');
  for (const f of failures.slice(0, 20)) {
    console.log(`  ${f.label}: ${f.name}`);
    const lines = plain(f.message).split('\n').map((l) => l.trimEnd()).filter(Boolean).slice(0, 6);
    for (const l of lines) console.log(`    ${l.length > 300 ? l.slice(0, 300) + '…' : l}`);
  }
  if (failures.length > 20) console.log(`  (${failures.length - 20} more)`);
}
console.log(line(total));
process.exit(total.failed > 0 || emptyLane || total.passed === 0 ? 1 : 0);
