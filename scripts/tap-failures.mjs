#!/usr/bin/env node
// The failed tests of a `node --test` TAP report, as vitest JSON report
// entries (`testResults`), so that scripts/summary.mjs names them and their
// errors for the Windows lane as for the others:
//
//   node scripts/tap-failures.mjs <tap.txt>   prints the JSON array
//
// A failed test is a `not ok N - <name>` line (at any depth: subtests are
// indented); its message is the YAML block's `error` (single-quoted or a
// `|-` block), then its `location`.
import { readFileSync } from 'node:fs';

export function tapFailures(text) {
  const lines = text.split('\n');
  const failed = [];
  for (let i = 0; i < lines.length; i++) {
    const m = /^(\s*)not ok \d+ - (.*?)(?: # .*)?$/.exec(lines[i]);
    if (!m) continue;
    const keyIndent = m[1].length + 2;
    const message = [];
    let location = '';
    for (let j = i + 1; j < lines.length; j++) {
      const l = lines[j];
      if (l.trim() === '...' || /^\s*(not )?ok \d+ /.test(l) || /^\s*# Subtest:/.test(l)) break;
      const key = new RegExp(`^ {${keyIndent}}(\\w+): ?(.*)$`).exec(l);
      if (!key) continue;
      if (key[1] === 'location') location = key[2].replace(/^'|'$/g, '');
      if (key[1] !== 'error') continue;
      if (key[2] === '|-' || key[2] === '|' || key[2] === '>-') {
        for (let k = j + 1; k < lines.length && (lines[k].startsWith(' '.repeat(keyIndent + 2)) || lines[k].trim() === ''); k++) {
          message.push(lines[k].slice(keyIndent + 2));
        }
      } else {
        message.push(key[2].replace(/^'|'$/g, '').replace(/''/g, "'"));
      }
    }
    if (location) message.push(`at ${location}`);
    failed.push({ status: 'failed', title: m[2], fullName: m[2], failureMessages: [message.join('\n')] });
  }
  return failed.length ? [{ name: 'test/win', status: 'failed', assertionResults: failed }] : [];
}

if (import.meta.url === `file://${process.argv[1]}`) {
  let text = '';
  try {
    text = readFileSync(process.argv[2], 'utf8');
  } catch {}
  process.stdout.write(JSON.stringify(tapFailures(text)));
}
