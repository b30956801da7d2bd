// Both build backends must turn the same sources into a working addon and a
// working anchor: node-gyp (binding.gyp) and cmake-js (CMakeLists.txt).
// Each builds a private copy of the package in a temp dir; then the addon is
// loaded and probed, and the anchor is run with bad arguments (usage on
// stderr, exit 64). With CORDON_CHECK_BUILD_DIR=<dir> the same checks also run
// on an existing output dir (a cmake-js build in CI, an unpacked prebuild).
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { setPriority, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from './helpers/fixtures.js';
import { missing } from './helpers/requirements.js';

const require = createRequire(import.meta.url);
const anchorName = process.platform === 'win32' ? 'cordon-anchor.exe' : 'cordon-anchor';
// About 10 s a build on a quiet 2-core machine; minutes on a loaded one.
const BUILD_TIMEOUT = 600_000;
// A little below the tests beside it, never starved: at nice 19 two busy
// loops of normal priority left the builds about 1.5% of a core (ci12 here:
// both hooks timed out after 300 s).
const BUILD_NICE = 5;

/** node-gyp's entry script: npm's (npm run / npx set npm_config_node_gyp), a local one, or npm's bundled one. */
function findNodeGyp(): string | undefined {
  const candidates = [process.env.npm_config_node_gyp];
  try {
    candidates.push(require.resolve('node-gyp/bin/node-gyp.js', { paths: [repoRoot] }));
  } catch {
    // not a local dependency
  }
  if (process.env.npm_execpath) candidates.push(join(dirname(process.env.npm_execpath), '..', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'));
  return candidates.find((c): c is string => !!c && existsSync(c));
}

function findCmakeJs(): string | undefined {
  try {
    return require.resolve('cmake-js/bin/cmake-js', { paths: [repoRoot] });
  } catch {
    return undefined;
  }
}

const noCmake = missing('cmake');
const nodeGyp = findNodeGyp();
const cmakeJs = findCmakeJs();

interface Backend {
  name: string;
  /** Why the backend cannot run here, if it cannot. */
  missing?: string;
  /** [script, args]: run with this node from the package copy. */
  command: (dir: string) => [string, string[]];
}

const backends: Backend[] = [
  {
    name: 'node-gyp',
    missing: nodeGyp ? undefined : 'node-gyp not found (not run through npm, no local or npm-bundled node-gyp)',
    command: () => [
      nodeGyp!,
      ['rebuild', '--jobs=max', ...(process.env.npm_config_nodedir ? [`--nodedir=${process.env.npm_config_nodedir}`] : [])],
    ],
  },
  {
    name: 'cmake-js',
    missing: !cmakeJs ? 'cmake-js is not installed' : noCmake,
    command: () => [cmakeJs!, ['rebuild', '--log-level', 'warn']],
  },
];

/** Runs a build at a slightly lower CPU priority (other tests run beside it); rejects with its output on failure. */
function build(script: string, args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      setPriority(child.pid!, BUILD_NICE);
    } catch {
      // not permitted here: build at normal priority
    }
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`${script} ${args.join(' ')} failed (${signal ?? `exit ${code}`}):\n${output.slice(-8000)}`));
    });
  });
}

/** The checks every build output dir must pass. */
function checkOutput(outDir: () => string) {
  // proves nothing of the contract: the build backends' output (an addon that loads), not a tree's behaviour
  it('the addon loads and probe() answers', () => {
    const addon = require(join(outDir(), 'cordon.node')) as { probe(): Record<string, unknown> };
    const probe = addon.probe();
    // The binding may report more than these; these three are on every platform.
    expect(probe).toMatchObject({ pidfd: expect.any(Boolean), subreaper: expect.any(Boolean), procScan: expect.any(Boolean) });
  });

  // proves nothing of the contract: the built anchor's usage error, not a tree's behaviour
  it('the anchor is executable and rejects bad arguments with usage and exit 64', (ctx) => {
    const anchor = join(outDir(), anchorName);
    if (process.platform === 'win32' && !existsSync(anchor)) ctx.skip('no anchor target in this build on Windows'); // its Windows anchor is built by scripts/build-win-mingw.sh
    accessSync(anchor, constants.X_OK);
    const r = spawnSync(anchor, ['--no-such-option'], { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'pipe'] });
    expect(r.error).toBeUndefined();
    expect(r.status).toBe(64);
    expect(r.stderr).toMatch(/usage: cordon-anchor/);
  });
}

for (const backend of backends) {
  if (backend.missing) console.warn(`build-backends: skipping ${backend.name}: ${backend.missing}`);

  describe.skipIf(backend.missing !== undefined)(`build with ${backend.name}${backend.missing ? ` [skipped: ${backend.missing}]` : ''}`, () => {
    let dir = '';

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), `cordon-${backend.name}-`));
      for (const entry of ['native', 'binding.gyp', 'CMakeLists.txt', 'package.json']) {
        cpSync(join(repoRoot, entry), join(dir, entry), { recursive: true });
      }
      symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'), 'junction');
      const [script, args] = backend.command(dir);
      await build(script, args, dir);
    }, BUILD_TIMEOUT);

    afterAll(() => {
      try {
        if (dir) rmSync(dir, { recursive: true, force: true });
      } catch (err) {
        // Windows cannot delete a DLL this process has loaded; the temp dir stays.
        if (process.platform !== 'win32') throw err;
        console.warn(`build-backends: could not remove ${dir}: ${(err as Error).message}`);
      }
    });

    checkOutput(() => join(dir, 'build', 'Release'));
  });
}

// CMakeLists.txt configured as cmake-js configures it on each platform
// (cmake-js 8, lib/cMake.js: on Windows only CMAKE_RUNTIME_OUTPUT_DIRECTORY=
// build, elsewhere CMAKE_LIBRARY_OUTPUT_DIRECTORY=build/Release), under a
// single-config and a multi-config generator. Configure only (no compiler
// run beyond CMake's own probe): the addon and the anchor must land in the
// one directory <out>/Release, read from CMake's file API (codemodel-v2).
const noNinja = missing('ninja');

/** The directory of each target's artifact, as CMake's file API reports it after a configure with `defines`. */
function configuredOutputs(buildDir: string, generatorArgs: string[], defines: Record<string, string>): Record<string, string> {
  const query = join(buildDir, '.cmake', 'api', 'v1', 'query');
  mkdirSync(query, { recursive: true });
  writeFileSync(join(query, 'codemodel-v2'), '');
  const args = ['-S', repoRoot, '-B', buildDir, '--no-warn-unused-cli', ...generatorArgs, ...Object.entries(defines).map(([k, v]) => `-D${k}=${v}`)];
  const r = spawnSync('cmake', args, { encoding: 'utf8', timeout: 120_000 });
  expect(r.error).toBeUndefined();
  expect(r.status, `cmake ${args.join(' ')}:\n${r.stdout}\n${r.stderr}`).toBe(0);
  const reply = join(buildDir, '.cmake', 'api', 'v1', 'reply');
  const read = (f: string) => JSON.parse(readFileSync(join(reply, f), 'utf8'));
  const index = read(readdirSync(reply).find((f) => f.startsWith('index-'))!);
  const codemodel = read(index.reply['codemodel-v2'].jsonFile);
  const out: Record<string, string> = {};
  for (const config of codemodel.configurations) {
    for (const target of config.targets) {
      const t = read(target.jsonFile);
      for (const a of t.artifacts ?? []) if (/cordon(\.node|-anchor(\.exe)?)$/.test(a.path)) out[`${config.name} ${t.name}`] = dirname(resolve(buildDir, a.path));
    }
  }
  return out;
}

describe.skipIf(noCmake !== undefined)(`CMakeLists.txt as cmake-js configures it${noCmake ? ` [skipped: ${noCmake}]` : ''}`, () => {
  const cases: { name: string; generator: string[]; defines: (out: string) => Record<string, string>; skip?: string }[] = [
    { name: 'Windows style (only CMAKE_RUNTIME_OUTPUT_DIRECTORY), single-config', generator: [], defines: (out) => ({ CMAKE_BUILD_TYPE: 'Release', CMAKE_RUNTIME_OUTPUT_DIRECTORY: out }) },
    {
      name: 'Windows style, multi-config (as Visual Studio)',
      generator: ['-G', 'Ninja Multi-Config', '-DCMAKE_CONFIGURATION_TYPES=Release'],
      defines: (out) => ({ CMAKE_BUILD_TYPE: 'Release', CMAKE_RUNTIME_OUTPUT_DIRECTORY: out }),
      skip: noNinja && `${noNinja} (the Ninja Multi-Config generator stands in for Visual Studio)`,
    },
    { name: 'Linux and macOS style (CMAKE_LIBRARY_OUTPUT_DIRECTORY=build/Release)', generator: [], defines: (out) => ({ CMAKE_BUILD_TYPE: 'Release', CMAKE_LIBRARY_OUTPUT_DIRECTORY: join(out, 'Release') }) },
  ];
  for (const c of cases) {
    if (c.skip) console.warn(`build-backends: skipping "${c.name}": ${c.skip}`);
    // proves nothing of the contract: where a build puts its files
    it.skipIf(!!c.skip)(`${c.name}: the addon and the anchor land in <out>/Release${c.skip ? ` [skipped: ${c.skip}]` : ''}`, () => {
      const dir = mkdtempSync(join(tmpdir(), 'cordon-cmake-configure-'));
      try {
        const out = join(dir, 'out');
        const dirs = configuredOutputs(join(dir, 'build'), c.generator, c.defines(out));
        expect(dirs).toEqual({ 'Release cordon': join(out, 'Release'), 'Release cordon-anchor': join(out, 'Release') });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }, 150_000);
  }
});

const checkDir = process.env.CORDON_CHECK_BUILD_DIR;
if (checkDir) {
  describe(`existing build output in ${checkDir}`, () => {
    checkOutput(() => checkDir);
  });
}

// `npm run prebuild:all` checks every tool it will need before it builds
// anything (it once ran 28 minutes of zig builds, then failed on a missing
// mingw dlltool). The dlltool it uses is named by CORDON_MINGW_DLLTOOL:
// pointed at one that does not exist, it must fail at once, saying which
// tool and which package has it.
describe('prebuild:all checks its tools first', () => {
  // proves nothing of the contract: the Windows cross-build's missing tool message
  it('a missing mingw dlltool: exit 1 within 10 s, naming it and its Debian package, nothing built', () => {
    const began = Date.now();
    const r = spawnSync(process.execPath, [join(repoRoot, 'scripts', 'prebuild-all.mjs'), 'win32-x64', 'linux-x64'], {
      env: { ...process.env, CORDON_MINGW_DLLTOOL: 'cordon-no-such-dlltool', ZIG: '/nonexistent/zig' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.status, `${r.stdout}${r.stderr}`).toBe(1);
    expect(Date.now() - began).toBeLessThan(10_000);
    // (Named among the missing: on a machine without the mingw compilers,
    // before .ci/run's Windows lane installs them, those are named too.)
    expect(r.stderr).toMatch(/missing [^;\n]*\bcordon-no-such-dlltool\b[^;\n]*; nothing was built/);
    expect(r.stderr).toContain('binutils-mingw-w64-x86-64');
  });
});
