#!/usr/bin/env node
// node scripts/guarantee-table.mjs [--check]
// Writes README.md's guarantee table (between the guarantee-table markers)
// from the tier table, as dist/guarantee-table.js renders it (run `npx tsc`
// first). --check: exits 1 if README.md differs, writes nothing.
// test/capabilities.test.ts makes the same comparison.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { guaranteeTable } = await import(pathToFileURL(join(root, 'dist', 'guarantee-table.js')).href);
const readmePath = join(root, 'README.md');
const readme = readFileSync(readmePath, 'utf8');
const markers = /(<!-- guarantee-table:start -->\n)[\s\S]*?(\n<!-- guarantee-table:end -->)/;
if (!markers.test(readme)) {
  console.error('README.md has no guarantee-table markers');
  process.exit(1);
}
const updated = readme.replace(markers, (_, start, end) => `${start}${guaranteeTable()}${end}`);
if (process.argv.includes('--check')) {
  if (updated !== readme) {
    console.error('README.md: the guarantee table differs from the tier table (run node scripts/guarantee-table.mjs)');
    process.exit(1);
  }
  console.log('README.md: the guarantee table is up to date');
} else if (updated !== readme) {
  writeFileSync(readmePath, updated);
  console.log('README.md: guarantee table rewritten');
} else {
  console.log('README.md: the guarantee table is up to date');
}
