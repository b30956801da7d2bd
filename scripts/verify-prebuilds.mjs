#!/usr/bin/env node
// Checks that prebuilds/ holds every prebuild the package must ship before it
// is published:
//
//   node scripts/verify-prebuilds.mjs [<platform>-<arch>...]
//   (default: linux-x64 linux-arm64 darwin-arm64 darwin-x64 win32-x64)
//
// For each tuple: the addon cordon.node, and the anchor
// (cordon-anchor, cordon-anchor.exe on win32) when binding.gyp builds the
// cordon-anchor target for that platform; on POSIX the anchor must be
// executable. Exits 1 listing whatever is missing.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OS_OF_PLATFORM, gypSources } from './build-files.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const tuples = process.argv.length > 2 ? process.argv.slice(2) : ['linux-x64', 'linux-arm64', 'darwin-arm64', 'darwin-x64', 'win32-x64'];
const problems = [];

for (const tuple of tuples) {
  const platform = tuple.split('-')[0];
  const os = OS_OF_PLATFORM[platform];
  if (!os) {
    problems.push(`${tuple}: unknown platform ${platform}`);
    continue;
  }
  const targets = gypSources(join(root, 'binding.gyp'), os);
  const expected = [];
  if (targets.has('cordon')) expected.push({ file: 'cordon.node' });
  if (targets.has('cordon-anchor')) expected.push({ file: platform === 'win32' ? 'cordon-anchor.exe' : 'cordon-anchor', exec: platform !== 'win32' });
  for (const { file, exec } of expected) {
    const path = join(root, 'prebuilds', tuple, file);
    if (!existsSync(path)) problems.push(`prebuilds/${tuple}/${file} is missing`);
    else if (exec && (statSync(path).mode & 0o111) === 0) problems.push(`prebuilds/${tuple}/${file} is not executable`);
    else console.log(`ok  prebuilds/${tuple}/${file}`);
  }
}

const present = existsSync(join(root, 'prebuilds')) ? readdirSync(join(root, 'prebuilds')) : [];
for (const extra of present.filter((t) => !tuples.includes(t))) console.log(`note: prebuilds/${extra} is present but not checked`);

if (problems.length) {
  console.error(`verify-prebuilds: ${problems.length} problem(s):\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  process.exit(1);
}
console.log(`verify-prebuilds: all ${tuples.length} platform(s) complete`);
