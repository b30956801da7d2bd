// Builds the model of XNU's process table and cordon's darwin build on it,
// on Linux (test/xnu-model, docs/xnu-model.md):
//
//   node test/xnu-model/build.mjs <out dir> [--socket <path>]
//
//   <out>/xnu-kernel     the model's kernel (kernel.cc)
//   <out>/cordon-anchor  the anchor binding.gyp builds for macOS: its sources
//                        and defines, native/darwin/tree.cc unchanged, linked
//                        with the shim (shim.cc) in place of libproc, sysctl and
//                        kqueue, and ld --wrap of fstat and kill
//   <out>/cordon.node    the addon binding.gyp builds for macOS, the same way
//
// Compiled with -DCORDON_XNU_MODEL (native/cordon.h: the posix sources take
// their XNU paths) and the XNU headers of test/xnu-model/include first on
// the include path. `--socket`: where the kernel will listen (compiled in;
// CORDON_XNU_MODEL overrides it at run time). Objects are rebuilt only when
// a source or header is newer. Test code: nothing of it ships.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gypTargets } from '../../scripts/build-files.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../..');
const args = process.argv.slice(2);
const out = args[0] && !args[0].startsWith('--') ? resolve(args[0]) : null;
if (!out) {
  console.error('usage: node test/xnu-model/build.mjs <out dir> [--socket <path>]');
  process.exit(2);
}
const socketAt = args.indexOf('--socket');
const socket = socketAt >= 0 ? args[socketAt + 1] : join(out, 'kernel.sock');
const require = createRequire(join(root, 'package.json'));
const napiHeaders = dirname(require.resolve('node-api-headers/include/node_api.h'));
const addonApi = require('node-addon-api').include_dir.replace(/^"|"$/g, '');

const targets = gypTargets(join(root, 'binding.gyp'), 'mac');
const addon = targets.get('cordon');
const anchor = targets.get('cordon-anchor');
if (!addon || !anchor) throw new Error("binding.gyp has no 'cordon' or 'cordon-anchor' target for mac");

const CXX = process.env.CXX || 'g++';
const common = ['-std=c++17', '-O1', '-g', '-Wall', '-Wextra', '-Werror', '-DCORDON_XNU_MODEL=1', `-DCORDON_XNU_MODEL_SOCKET="${socket}"`, `-I${join(here, 'include')}`];
const shim = 'test/xnu-model/shim.cc';
const wraps = 'test/xnu-model/wraps.cc';

/** The newest mtime of the headers a build depends on (all of native/ and the model's). */
function headersTime() {
  let t = 0;
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.h$/.test(e.name)) t = Math.max(t, statSync(p).mtimeMs);
    }
  };
  walk(join(root, 'native'));
  walk(here);
  return t;
}
const hTime = headersTime();
const mtime = (p) => (existsSync(p) ? statSync(p).mtimeMs : 0);

function run(cmd, argv) {
  return new Promise((done, fail) => {
    const child = spawn(cmd, argv, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', fail);
    child.on('close', (code) => (code === 0 ? done() : fail(new Error(`${cmd} ${argv.join(' ')}: exit ${code}`))));
  });
}

/** Objects of `sources` for one target, compiled two at a time. */
async function compile(name, sources, flags) {
  const dir = join(out, 'obj', name);
  mkdirSync(dir, { recursive: true });
  const objects = sources.map((s) => join(dir, basename(s).replace(/\.cc$/, '.o')));
  const todo = sources.map((s, i) => ({ s, o: objects[i] })).filter(({ s, o }) => mtime(o) < Math.max(mtime(join(root, s)), hTime));
  const workers = Array.from({ length: 2 }, async () => {
    for (let job = todo.shift(); job; job = todo.shift()) await run(CXX, [...common, ...flags, '-c', job.s, '-o', job.o]);
  });
  await Promise.all(workers);
  return objects;
}

async function link(output, objects, flags) {
  if (existsSync(output) && objects.every((o) => mtime(o) <= mtime(output))) return;
  await run(CXX, ['-o', output, ...objects, ...flags]);
}

mkdirSync(out, { recursive: true });
const started = Date.now();
await Promise.all([
  (async () => {
    const kernel = join(out, 'xnu-kernel');
    if (mtime(kernel) < Math.max(mtime(join(here, 'kernel.cc')), mtime(join(root, 'native/linux/proc.cc')), hTime)) {
      await run(CXX, ['-std=c++17', '-O2', '-g', '-Wall', '-Wextra', '-Werror', '-o', kernel, 'test/xnu-model/kernel.cc', 'native/linux/proc.cc']);
    }
  })(),
  (async () => {
    const defines = anchor.defines.map((d) => `-D${d}`);
    const objects = await compile('anchor', [...anchor.sources, shim, wraps], defines);
    await link(join(out, 'cordon-anchor'), objects, ['-Wl,--wrap=fstat,--wrap=kill']);
  })(),
  (async () => {
    const defines = addon.defines.map((d) => `-D${d}`);
    const objects = await compile('addon', [...addon.sources, shim], [...defines, '-fPIC', `-I${napiHeaders}`, `-I${addonApi}`]);
    await link(join(out, 'cordon.node'), objects, ['-shared', '-fPIC']);
  })(),
]);
console.log(`xnu-model: built ${out} (${((Date.now() - started) / 1000).toFixed(1)} s; the kernel's socket: ${socket})`);
