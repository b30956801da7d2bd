// Reads binding.gyp and CMakeLists.txt: which sources each target is built
// from on each OS (check-sources.mjs, cross-macos.mjs, prebuild-all.mjs), and
// which prebuilds the package ships (prebuild-all.mjs, verify-prebuilds.mjs,
// test/package.test.ts).
import { readFileSync } from 'node:fs';
import { posix } from 'node:path';

export const OSES = ['linux', 'mac', 'win'];
const norm = (p) => posix.normalize(p.replace(/\\/g, '/'));

// ---- binding.gyp -----------------------------------------------------------

function readGyp(file) {
  // A python literal; in practice JSON plus `#` comments and trailing commas.
  const text = readFileSync(file, 'utf8')
    .replace(/^\s*#.*$/gm, '')
    .replace(/,(\s*[\]}])/g, '$1');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new Error(`${file}: not parseable as JSON (${err.message}); keep it JSON-compatible`);
  }
}

/** Evaluates a gyp condition such as "OS=='linux'" or "OS!='win' and OS!='mac'". */
function gypCondition(cond, os) {
  const js = cond
    .replace(/\bOS\b/g, JSON.stringify(os))
    .replace(/\band\b/g, '&&')
    .replace(/\bor\b/g, '||')
    .replace(/\bnot\b/g, '!');
  if (!/^(\s|"[a-z]+"|'[a-z]+'|==|!=|&&|\|\||!|\(|\))*$/.test(js)) {
    throw new Error(`binding.gyp: unsupported condition ${JSON.stringify(cond)} (only OS comparisons with and/or/not)`);
  }
  return Boolean(Function(`"use strict"; return (${js});`)());
}

/** Applies `dict` and its conditions for `os`, calling visit(dict) on every part that applies. */
function gypWalk(dict, os, visit) {
  visit(dict);
  for (const [cond, then, otherwise] of dict.conditions ?? []) {
    const branch = gypCondition(cond, os) ? then : otherwise;
    if (branch) gypWalk(branch, os, visit);
  }
}

/** Map of target name -> sources that binding.gyp builds on `os` (linux, mac, win). */
export function gypSources(file, os) {
  const targets = [];
  gypWalk(readGyp(file), os, (part) => targets.push(...(part.targets ?? [])));
  const out = new Map();
  for (const target of targets) {
    const sources = [];
    gypWalk(target, os, (part) => sources.push(...(part.sources ?? [])));
    out.set(target.target_name, sources.map(norm));
  }
  return out;
}

// ---- CMakeLists.txt --------------------------------------------------------

function cmakeCommands(file) {
  const text = readFileSync(file, 'utf8').replace(/#[^\n]*/g, '');
  const commands = [];
  for (const m of text.matchAll(/\b([A-Za-z_]\w*)\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)/g)) {
    const args = [...m[2].matchAll(/"([^"]*)"|(\S+)/g)].map((a) => a[1] ?? a[2]);
    commands.push({ name: m[1].toLowerCase(), args, line: text.slice(0, m.index).split('\n').length });
  }
  return commands;
}

const and3 = (xs) => (xs.includes(false) ? false : xs.includes(null) ? null : true);
const or3 = (xs) => (xs.includes(true) ? true : xs.includes(null) ? null : false);

/** Three-valued (true/false/null = unknown) evaluation of an if() condition for `os`. */
function cmakeCondition(args, os) {
  const atoms = {
    APPLE: os === 'mac',
    WIN32: os === 'win',
    MSVC: os === 'win' ? null : false,
    UNIX: os !== 'win',
  };
  const systemName = { linux: 'Linux', mac: 'Darwin', win: 'Windows' }[os];
  const values = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === 'NOT' || a === 'AND' || a === 'OR') values.push(a);
    else if (/^\$?\{?CMAKE_SYSTEM_NAME\}?$/.test(a) && args[i + 1] === 'STREQUAL') {
      values.push(args[i + 2] === systemName);
      i += 2;
    } else values.push(a in atoms ? atoms[a] : null);
  }
  // NOT binds tighter than AND, AND tighter than OR (no parentheses here).
  const not = (v) => (v === null ? null : !v);
  const folded = [];
  for (let i = 0; i < values.length; i++) folded.push(values[i] === 'NOT' ? not(values[++i]) : values[i]);
  const terms = [[]];
  for (const v of folded) {
    if (v === 'OR') terms.push([]);
    else if (v !== 'AND') terms.at(-1).push(v);
  }
  return or3(terms.map(and3));
}

/** Map of target name -> sources that CMakeLists.txt builds on `os`. */
export function cmakeSources(file, os) {
  const vars = new Map();
  const out = new Map();
  // Each frame: is the current branch active (true/false/null), has an earlier branch been taken.
  const stack = [];
  const active = () => and3(stack.map((f) => f.active));
  const expand = (args) =>
    args.flatMap((a) => a.replace(/\$\{(\w+)\}/g, (_, v) => (vars.get(v) ?? []).join(';')).split(';')).filter(Boolean);

  for (const { name, args, line } of cmakeCommands(file)) {
    if (name === 'if') {
      const c = cmakeCondition(args, os);
      stack.push({ active: c, taken: c });
      continue;
    }
    if (name === 'elseif' || name === 'else') {
      const f = stack.at(-1);
      const c = name === 'else' ? true : cmakeCondition(args, os);
      f.active = f.taken === true ? false : f.taken === false ? c : c === false ? false : null;
      f.taken = f.taken === true || c === true ? true : f.taken === false && c === false ? false : null;
      continue;
    }
    if (name === 'endif') {
      stack.pop();
      continue;
    }
    const relevant = name === 'set' || (name === 'list' && args[0] === 'APPEND') || name === 'add_library' || name === 'add_executable';
    if (!relevant) continue;
    const on = active();
    if (on === false) continue;
    if (on === null) throw new Error(`CMakeLists.txt:${line}: cannot tell whether ${name}(${args.join(' ')}) applies on ${os}`);
    if (name === 'set') vars.set(args[0], expand(args.slice(1)));
    else if (name === 'list') vars.set(args[1], [...(vars.get(args[1]) ?? []), ...expand(args.slice(2))]);
    else {
      const keywords = new Set(['STATIC', 'SHARED', 'MODULE', 'OBJECT', 'WIN32', 'MACOSX_BUNDLE', 'EXCLUDE_FROM_ALL']);
      out.set(args[0], expand(args.slice(1)).filter((a) => !keywords.has(a)).map(norm));
    }
  }
  return out;
}

/**
 * Map of target name -> { type, sources, defines, cflags, includeDirs } that
 * binding.gyp builds on `os`; include dirs and flags as written (a `<!(cmd)`
 * expansion is left to the caller). Used by the macOS cross-compile lane.
 */
export function gypTargets(file, os) {
  const targets = [];
  gypWalk(readGyp(file), os, (part) => targets.push(...(part.targets ?? [])));
  const out = new Map();
  for (const target of targets) {
    const t = { type: target.type ?? 'loadable_module', sources: [], defines: [], cflags: [], includeDirs: [] };
    gypWalk(target, os, (part) => {
      t.sources.push(...(part.sources ?? []).map(norm));
      t.defines.push(...(part.defines ?? []));
      t.cflags.push(...(part.cflags_cc ?? []));
      t.includeDirs.push(...(part.include_dirs ?? []));
    });
    out.set(target.target_name, t);
  }
  return out;
}

// ---- prebuilds ---------------------------------------------------------------

/** Every <platform>-<arch> the package ships a prebuild for (scripts/prebuild-all.mjs). */
export const PREBUILD_TUPLES = ['linux-x64', 'linux-arm64', 'darwin-x64', 'darwin-arm64', 'win32-x64'];

/**
 * What `file -b` says of each prebuild: the addon(s) and the anchor of each
 * tuple. Linux ships an addon per C library (glibc, musl: node-gyp-build picks
 * by the tag in the name) and one static anchor for both. zig links a macOS
 * addon as a dylib, which Node loads as it loads a bundle (dlopen).
 */
export const PREBUILD_FILES = {
  'linux-x64': { 'cordon.glibc.node': /^ELF 64-bit LSB shared object, x86-64/, 'cordon.musl.node': /^ELF 64-bit LSB shared object, x86-64/, 'cordon-anchor': /^ELF 64-bit LSB executable, x86-64.*statically linked/ },
  'linux-arm64': { 'cordon.glibc.node': /^ELF 64-bit LSB shared object, ARM aarch64/, 'cordon.musl.node': /^ELF 64-bit LSB shared object, ARM aarch64/, 'cordon-anchor': /^ELF 64-bit LSB executable, ARM aarch64.*statically linked/ },
  'darwin-x64': { 'cordon.node': /^Mach-O 64-bit (x86_64 )?(bundle|dynamically linked shared library)/, 'cordon-anchor': /^Mach-O 64-bit (x86_64 )?executable/ },
  'darwin-arm64': { 'cordon.node': /^Mach-O 64-bit (arm64 )?(bundle|dynamically linked shared library)/, 'cordon-anchor': /^Mach-O 64-bit (arm64 )?executable/ },
  'win32-x64': { 'cordon.node': /^PE32\+ executable \(DLL\).*x86-64/, 'cordon-anchor.exe': /^PE32\+ executable \(console\) x86-64/ },
};
