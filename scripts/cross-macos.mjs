// Cross-compiles cordon for macOS (x86_64 and arm64) on Linux with zig's
// clang, from the sources, defines and flags binding.gyp gives the 'mac' OS,
// so that no change to the darwin sources lands unbuilt:
//
//   node scripts/cross-macos.mjs <zig> <report.json> [<out dir>]
//
// For each architecture: the anchor is compiled and linked into a Mach-O
// executable, the addon's sources are compiled (-Wall -Wextra -Werror) and
// linked into a Mach-O bundle whose Node-API symbols resolve at load time
// (-undefined dynamic_lookup, as node-gyp links it on macOS). Each output's
// Mach-O header is checked (magic, CPU type, file type). Nothing here runs
// the result: macOS behaviour is tested through the process-group tier on
// Linux. Writes a vitest-JSON-compatible report (one "test" per target and
// architecture) to <report.json> and exits nonzero on any failure.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gypTargets } from './build-files.mjs';

const [zig, reportFile, outArg] = process.argv.slice(2);
if (!zig || !reportFile) {
  console.error('usage: node scripts/cross-macos.mjs <zig> <report.json> [<out dir>]');
  process.exit(2);
}
const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = resolve(outArg ?? mkdtempSync(join(tmpdir(), 'cordon-macos-')));
const require = createRequire(join(root, 'package.json'));
// The Node-API headers come from npm (node-api-headers), not from a Node
// download: this lane needs nothing but the package registry.
const napiHeaders = dirname(require.resolve('node-api-headers/include/node_api.h'));

/** Deployment targets: the oldest macOS each architecture is built for (binding.gyp says 11.0). */
const ARCHES = [
  { zig: 'x86_64-macos.11.0', name: 'x64', cpu: 0x01000007 },
  { zig: 'aarch64-macos.11.0', name: 'arm64', cpu: 0x0100000c },
];
const MH_EXECUTE = 2;
const MH_BUNDLE = 8;
const MH_DYLIB = 6;

/** `<!(cmd)` in binding.gyp: the command's output, run in the project root (as gyp does). */
function expand(value) {
  const m = /^<!\((.*)\)$/.exec(value);
  if (!m) return value;
  return execFileSync('sh', ['-c', m[1]], { cwd: root, encoding: 'utf8' }).trim();
}

function zigCxx(args) {
  const r = spawnSync(zig, ['c++', ...args], { cwd: root, encoding: 'utf8' });
  const text = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim();
  if (r.error) return { ok: false, text: String(r.error) };
  return { ok: r.status === 0, text };
}

/**
 * Undefined external symbols that a Mach-O image leaves to be looked up at
 * load time (library ordinal DYNAMIC_LOOKUP_ORDINAL, 0xfe): with
 * `-undefined dynamic_lookup` a missing definition links fine and fails only
 * when macOS loads the addon, so each must be one Node provides (Node-API).
 */
function dynamicLookups(buf) {
  const ncmds = buf.readUInt32LE(16);
  let off = 32; // mach_header_64
  const names = [];
  for (let i = 0; i < ncmds; i++) {
    const cmd = buf.readUInt32LE(off);
    const size = buf.readUInt32LE(off + 4);
    if (cmd === 0x2 /* LC_SYMTAB */) {
      const symoff = buf.readUInt32LE(off + 8);
      const nsyms = buf.readUInt32LE(off + 12);
      const stroff = buf.readUInt32LE(off + 16);
      for (let k = 0; k < nsyms; k++) {
        const e = symoff + k * 16; // nlist_64
        const strx = buf.readUInt32LE(e);
        const type = buf.readUInt8(e + 4);
        const desc = buf.readUInt16LE(e + 6);
        const undefinedExternal = (type & 0xe0) === 0 && (type & 0x0e) === 0 && (type & 0x01) === 1;
        if (!undefinedExternal || (desc >> 8) !== 0xfe) continue;
        const end = buf.indexOf(0, stroff + strx);
        names.push(buf.toString('latin1', stroff + strx, end));
      }
    }
    off += size;
  }
  return names;
}

/** Checks a Mach-O 64-bit header: magic, CPU type, file type (one of `types`). */
function checkMachO(file, arch, types) {
  const head = readFileSync(file).subarray(0, 16);
  const magic = head.readUInt32LE(0);
  const cpu = head.readUInt32LE(4);
  const filetype = head.readUInt32LE(12);
  if (magic !== 0xfeedfacf) return `${basename(file)}: not a 64-bit Mach-O (magic 0x${magic.toString(16)})`;
  if (cpu !== arch.cpu) return `${basename(file)}: CPU type 0x${cpu.toString(16)}, expected 0x${arch.cpu.toString(16)} (${arch.name})`;
  if (!types.includes(filetype)) return `${basename(file)}: Mach-O file type ${filetype}, expected ${types.join(' or ')}`;
  return null;
}

const results = [];
const targets = gypTargets(join(root, 'binding.gyp'), 'mac');
if (targets.size === 0) {
  console.error('binding.gyp builds no target for mac');
  process.exit(1);
}
for (const arch of ARCHES) {
  for (const [name, t] of targets) {
    const title = `${name} for macOS ${arch.name}`;
    const dir = join(out, arch.name, name);
    mkdirSync(dir, { recursive: true });
    const common = [
      '-target', arch.zig, '-std=c++17', '-O2', '-Wall', '-Wextra', '-Werror',
      ...t.cflags.filter((f) => !/^-std=|^-W(all|extra)$/.test(f)),
      ...t.defines.map((d) => `-D${d}`),
      ...t.includeDirs.map((d) => `-I${expand(d)}`),
      `-I${napiHeaders}`,
    ];
    const failures = [];
    const objects = [];
    for (const src of t.sources) {
      const obj = join(dir, `${basename(src)}.o`);
      const r = zigCxx([...common, '-c', src, '-o', obj]);
      if (!r.ok) failures.push(`compile ${src}:\n${r.text}`);
      objects.push(obj);
    }
    let product = null;
    if (failures.length === 0) {
      const executable = t.type === 'executable';
      product = join(dir, executable ? name : `${name}.node`);
      const link = executable
        ? zigCxx(['-target', arch.zig, ...objects, '-o', product])
        : zigCxx(['-target', arch.zig, '-shared', '-Wl,-undefined,dynamic_lookup', ...objects, '-o', product]);
      if (!link.ok) failures.push(`link ${basename(product)}:\n${link.text}`);
      else {
        const bad = checkMachO(product, arch, executable ? [MH_EXECUTE] : [MH_BUNDLE, MH_DYLIB]);
        if (bad) failures.push(bad);
        const lookups = dynamicLookups(readFileSync(product));
        const unknown = lookups.filter((s) => !/^_(napi|node_api)_/.test(s));
        if (unknown.length) failures.push(`${basename(product)}: symbols no library defines (would fail when macOS loads it): ${unknown.join(' ')}`);
        else if (!executable && lookups.length === 0) failures.push(`${basename(product)}: no Node-API symbol left to load time: the dynamic_lookup check sees nothing`);
      }
    }
    const ok = failures.length === 0;
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${title}: ${t.sources.join(' ')}${ok ? ` -> ${product}` : ''}`);
    for (const f of failures) console.log(f.replace(/^/gm, '     '));
    results.push({ title, ok });
  }
}
const passed = results.filter((r) => r.ok).length;
const failed = results.length - passed;
writeFileSync(
  reportFile,
  `${JSON.stringify({
    passed, failed, skipped: 0,
    numPassedTests: passed, numFailedTests: failed, numPendingTests: 0, numTodoTests: 0,
    success: failed === 0 && passed > 0,
    testResults: [],
  })}\n`,
);
console.log(`macos: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
