#!/usr/bin/env node
// Builds this machine's prebuild with its own compiler (prebuildify):
//
//   npm run prebuild [-- --backend node-gyp|cmake-js] [-- --arch <arch>] [other prebuildify options]
//
// It loads where this machine's C library does (a Linux build needs this
// machine's glibc or newer). The prebuilds the package ships, portable ones for
// every platform, come from `npm run prebuild:all` (scripts/prebuild-all.mjs).
//
// 1. `prebuildify --napi --strip` (through `npm exec`, so npm's node-gyp and
//    npm config such as nodedir apply) builds the addon and moves it to
//    prebuilds/<platform>-<arch>/cordon.node. With --backend cmake-js,
//    prebuildify runs scripts/cmake-js-shim.mjs in place of node-gyp.
// 2. prebuildify moves only .node files, so the anchor built beside the
//    addon (build/Release/cordon-anchor, cordon-anchor.exe on Windows if that
//    platform builds one) is copied next to it here, mode 0755, stripped too.
// 3. Both files are verified; when building for this machine, the prebuild is
//    also loaded the way node-gyp-build finds it and the anchor is run.
//    prebuildify moved the addon out of build/Release; a copy is put back.
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const fail = (message) => {
  console.error(`prebuild: ${message}`);
  process.exit(1);
};

// --backend is ours; --arch is read and passed on; everything else goes to prebuildify.
const args = process.argv.slice(2);
const take = (name) => {
  const i = args.findIndex((a) => a === `--${name}` || a.startsWith(`--${name}=`));
  if (i < 0) return undefined;
  const [arg] = args.splice(i, 1);
  return arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : args.splice(i, 1)[0];
};
const backend = take('backend') ?? 'node-gyp';
if (backend !== 'node-gyp' && backend !== 'cmake-js') fail(`unknown --backend ${backend} (node-gyp or cmake-js)`);
const arch = take('arch') ?? process.env.PREBUILD_ARCH ?? process.arch;
const platform = process.env.PREBUILD_PLATFORM ?? process.platform;
const outDir = join(root, 'prebuilds', `${platform}-${arch}`);
const anchorName = platform === 'win32' ? 'cordon-anchor.exe' : 'cordon-anchor';
const win = process.platform === 'win32';

// ---- 1. prebuildify ---------------------------------------------------------
rmSync(outDir, { recursive: true, force: true }); // no stale files from an earlier run
const env = { ...process.env };
if (backend === 'cmake-js') {
  const shim = join(root, 'scripts', 'cmake-js-shim.mjs');
  // prebuildify spawns PREBUILD_NODE_GYP directly on POSIX (so the shim must be
  // executable) and through cmd.exe on Windows (so a command line works there).
  if (win) env.PREBUILD_NODE_GYP = `"${process.execPath}" "${shim}"`;
  else {
    chmodSync(shim, 0o755);
    env.PREBUILD_NODE_GYP = shim;
  }
}
// On Linux the addon's name carries its C library (cordon.glibc.node), as prebuild:all names it.
const prebuildifyArgs = ['--napi', '--strip', `--arch=${arch}`, ...(platform === 'linux' ? ['--tag-libc'] : []), ...args];
console.error(`prebuild: prebuildify ${prebuildifyArgs.join(' ')} (backend ${backend})`);
const r = spawnSync('npm', ['exec', '--no', '--', 'prebuildify', ...prebuildifyArgs], {
  cwd: root,
  env,
  stdio: 'inherit',
  shell: win, // npm is npm.cmd there
});
if (r.error) fail(`could not run npm exec prebuildify: ${r.error.message}`);
if (r.status !== 0) fail(`prebuildify failed (${r.signal ?? `exit ${r.status}`})`);

// ---- 2. the anchor ---------------------------------------------------
const builtAnchor = join(root, 'build', 'Release', anchorName);
const anchor = join(outDir, anchorName);
if (existsSync(builtAnchor)) {
  copyFileSync(builtAnchor, anchor);
  chmodSync(anchor, 0o755);
  if (process.platform === 'linux' || process.platform === 'darwin') {
    const stripBin = process.env.PREBUILD_STRIP_BIN ?? 'strip';
    const s = spawnSync(stripBin, process.platform === 'darwin' ? [anchor, '-Sx'] : [anchor, '--strip-all'], { stdio: 'inherit' });
    if (s.error || s.status !== 0) fail(`${stripBin} ${anchor} failed`);
  }
} else if (platform !== 'win32') {
  fail(`${builtAnchor} was not built`);
}

// ---- 3. verify ---------------------------------------------------------------
const addons = readdirSync(outDir).filter((f) => f.endsWith('.node'));
if (addons.length !== 1) fail(`expected one .node in ${outDir}, found: ${addons.join(', ') || 'none'}`);
const addon = join(outDir, addons[0]);
const hasAnchor = existsSync(anchor);
if (hasAnchor && !win && (statSync(anchor).mode & 0o777) !== 0o755) fail(`${anchor} is not mode 0755`);

if (platform === process.platform && arch === process.arch) {
  // What an installed package does: node-gyp-build with no build/ dir, then the anchor beside the addon.
  const check = `
    const path = require('node-gyp-build').resolve(${JSON.stringify(root)});
    if (path !== ${JSON.stringify(addon)}) throw new Error('node-gyp-build resolves ' + path);
    const probe = require(path).probe();
    console.error('prebuild: loaded ' + path + ', probe() = ' + JSON.stringify(probe));`;
  const load = spawnSync(process.execPath, ['-e', check], { cwd: root, env: { ...process.env, PREBUILDS_ONLY: '1' }, stdio: 'inherit' });
  if (load.status !== 0) fail(`${addon} does not load through node-gyp-build`);
  if (hasAnchor) {
    const run = spawnSync(anchor, ['--no-such-option'], { encoding: 'utf8' });
    if (run.status !== 64 || !/usage: cordon-anchor/.test(run.stderr)) {
      fail(`${anchor} --no-such-option: expected exit 64 with usage, got ${run.error?.message ?? run.status}\n${run.stderr}`);
    }
  }
}

// prebuildify moved the addon out of build/Release: put a copy back so a
// checkout keeps a complete build there (node-gyp-build prefers it).
const builtAddon = join(root, 'build', 'Release', 'cordon.node');
if (existsSync(dirname(builtAddon)) && !existsSync(builtAddon)) copyFileSync(addon, builtAddon);

for (const f of readdirSync(outDir)) {
  const st = statSync(join(outDir, f));
  console.log(`prebuilds/${platform}-${arch}/${f}  ${(st.mode & 0o777).toString(8)}  ${st.size} bytes`);
}
