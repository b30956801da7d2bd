#!/usr/bin/env node
// Checks that prebuilds/ holds every prebuild the package must ship before it
// is packed:
//
//   node scripts/verify-prebuilds.mjs [<platform>-<arch>...]
//   (default: every tuple of PREBUILD_TUPLES in scripts/build-files.mjs)
//
// For each tuple, every file PREBUILD_FILES names (the addon, one per C
// library on Linux, and the anchor): present, the anchor executable, and what
// `file` says of it matching the platform and architecture. Exits 1 listing
// whatever is wrong.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PREBUILD_FILES, PREBUILD_TUPLES } from './build-files.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const tuples = process.argv.length > 2 ? process.argv.slice(2) : PREBUILD_TUPLES;
const problems = [];

for (const tuple of tuples) {
  const files = PREBUILD_FILES[tuple];
  if (!files) {
    problems.push(`${tuple}: not a tuple the package ships (${PREBUILD_TUPLES.join(', ')})`);
    continue;
  }
  for (const [file, says] of Object.entries(files)) {
    const path = join(root, 'prebuilds', tuple, file);
    if (!existsSync(path)) {
      problems.push(`prebuilds/${tuple}/${file} is missing`);
      continue;
    }
    if (/cordon-anchor$/.test(file) && (statSync(path).mode & 0o111) === 0) problems.push(`prebuilds/${tuple}/${file} is not executable`);
    const what = execFileSync('file', ['-b', path], { encoding: 'utf8' }).trim();
    if (!says.test(what)) problems.push(`prebuilds/${tuple}/${file}: file says "${what}", expected ${says}`);
    else console.log(`ok  prebuilds/${tuple}/${file}: ${what.split(',').slice(0, 2).join(',')}`);
  }
  const extra = readdirSync(join(root, 'prebuilds', tuple)).filter((f) => !(f in files));
  if (extra.length) problems.push(`prebuilds/${tuple} holds files the package does not name: ${extra.join(' ')}`);
}

if (problems.length) {
  console.error(`verify-prebuilds: ${problems.length} problem(s):\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  process.exit(1);
}
console.log(`verify-prebuilds: all ${tuples.length} platform(s) complete`);
