#!/usr/bin/env node
// Stands in for node-gyp when prebuildify builds with cmake-js
// (`node scripts/prebuild.mjs --backend cmake-js`). prebuildify calls
//   <node-gyp> rebuild --target=<v> --devdir=<d> --arch=<a> --release|--debug
// and then takes the .node from build/Release (or build/Debug); this runs
// `cmake-js rebuild` for the same arch and configuration instead. The target
// version and devdir are not needed: with package.json's binary.napi_versions,
// cmake-js builds against the node-api-headers package.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

const args = process.argv.slice(2);
const option = (name) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
if (args[0] !== 'rebuild') {
  console.error(`cmake-js-shim: only "rebuild" is supported (got: ${args.join(' ')})`);
  process.exit(2);
}

const cmakeJs = createRequire(import.meta.url).resolve('cmake-js/bin/cmake-js');
const cmakeArgs = ['rebuild'];
const arch = option('arch');
if (arch) cmakeArgs.push('--arch', arch);
if (args.includes('--debug')) cmakeArgs.push('--debug');
console.error(`cmake-js-shim: cmake-js ${cmakeArgs.join(' ')}`);
const r = spawnSync(process.execPath, [cmakeJs, ...cmakeArgs], { stdio: 'inherit' });
if (r.error) throw r.error;
process.exit(r.status ?? 1);
