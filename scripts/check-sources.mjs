#!/usr/bin/env node
// binding.gyp (node-gyp) and CMakeLists.txt (cmake-js) must compile the same
// sources into the same targets on every platform. For each OS and each target
// this collects the source list each build file would use and fails, listing
// every difference, when they disagree.
//
//   node scripts/check-sources.mjs [--verbose] [dir]   (dir: the package root by default)
//
// gyp: a target's `sources` plus those of every `conditions` entry whose
// condition holds for the OS (nested conditions and top-level conditional
// `targets` included). CMake: the arguments of `add_library(<target> …)` /
// `add_executable(<target> …)` with `${VAR}` expanded, where `set(VAR …)` and
// `list(APPEND VAR …)` are followed through `if()/elseif()/else()` blocks on
// CMAKE_SYSTEM_NAME, APPLE, WIN32, UNIX, MSVC.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OSES, cmakeSources, gypSources } from './build-files.mjs';

const TARGETS = ['cordon', 'cordon-anchor'];

const args = process.argv.slice(2);
const verbose = args.includes('--verbose');
const root = args.find((a) => !a.startsWith('--')) ?? join(dirname(fileURLToPath(import.meta.url)), '..');
const fail = (message) => {
  console.error(`check-sources: ${message}`);
  process.exit(1);
};
process.on('uncaughtException', (err) => fail(err.message));

const problems = [];
const missing = new Set(); // a warning only: another platform's sources may still be in progress
const show = (list) => (list.length ? list.join(', ') : '(none)');
for (const os of OSES) {
  const gyp = gypSources(join(root, 'binding.gyp'), os);
  const cmake = cmakeSources(join(root, 'CMakeLists.txt'), os);
  for (const target of TARGETS) {
    const g = gyp.get(target);
    const c = cmake.get(target);
    if (verbose) console.log(`${os} ${target}: binding.gyp [${show(g ?? [])}] CMakeLists.txt [${show(c ?? [])}]`);
    if (!g && !c) continue; // neither builds the target on this OS
    if (!g || !c) {
      problems.push(`${os} ${target}: built only by ${g ? 'binding.gyp' : 'CMakeLists.txt'} (${show(g ?? c)})`);
      continue;
    }
    const onlyGyp = g.filter((s) => !c.includes(s));
    const onlyCmake = c.filter((s) => !g.includes(s));
    if (onlyGyp.length) problems.push(`${os} ${target}: only in binding.gyp: ${show(onlyGyp)}`);
    if (onlyCmake.length) problems.push(`${os} ${target}: only in CMakeLists.txt: ${show(onlyCmake)}`);
    for (const s of new Set([...g, ...c])) if (!existsSync(join(root, s))) missing.add(s);
  }
}

for (const s of missing) console.warn(`check-sources: warning: ${s} is listed but does not exist (yet)`);
if (problems.length) fail(`binding.gyp and CMakeLists.txt disagree:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
console.log(`check-sources: binding.gyp and CMakeLists.txt build the same sources on ${OSES.join(', ')}`);
