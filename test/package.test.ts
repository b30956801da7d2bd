// The package as a user gets it: the packed tarball (npm pack, after
// `npm run prebuild:all`) installed into a fresh project with no compiler on
// PATH. Nothing may compile; the main job, `require` from CommonJS and the
// README's examples under `tsc --strict` must work from what was installed;
// the tarball must carry every platform's prebuild, and the arm64 and Windows
// ones must load (under qemu-user and Wine) from that same install.
//
// Runs where CORDON_PACKAGE_TGZ names the tarball (.ci/package.sh, the
// package lane of .ci/run); elsewhere it is skipped, saying so. The lane
// also names, where it has them, an arm64 node (CORDON_PACKAGE_NODE_ARM64, run
// with qemu-aarch64-static) and a Windows node.exe with its Wine prefix
// (CORDON_PACKAGE_NODE_WIN, WINEPREFIX).
import { execFileSync, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PREBUILD_FILES } from '../scripts/build-files.mjs';
import { repoRoot } from './helpers/fixtures.js';
import { describeProcs, useTag } from './helpers/procs.js';
import { readmeBlocks, typeCheckBlocks } from './helpers/readme.js';
import { watchdog } from './helpers/time.js';

const tgz = process.env.CORDON_PACKAGE_TGZ;
const why = tgz ? undefined : 'no packed tarball: the package lane (.ci/package.sh) packs one with every prebuild and names it in CORDON_PACKAGE_TGZ';
if (why) console.warn(`package: skipping: ${why}`);
const files = PREBUILD_FILES as Record<string, Record<string, RegExp>>;
const version = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
/** What a build would call: each exits 127 saying so, so an install that compiles fails. */
const COMPILERS = ['cc', 'gcc', 'g++', 'c++', 'clang', 'clang++', 'make', 'cmake', 'ninja', 'python', 'python3'];
const INSTALL_TIMEOUT = watchdog(300_000);

describe.skipIf(!tgz)(`the packed tarball, installed in a fresh project${why ? ` [skipped: ${why}]` : ''}`, () => {
  let project = '';
  let pkg = '';
  let env: NodeJS.ProcessEnv = {};
  let install: SpawnSyncReturns<string>;
  let installSeconds = 0;
  const inProject = (command: string, args: string[], extraEnv: NodeJS.ProcessEnv = {}, timeout = watchdog(60_000)) =>
    spawnSync(command, args, { cwd: project, env: { ...env, ...extraEnv }, encoding: 'utf8', timeout });
  const said = (r: SpawnSyncReturns<string>) => `exit ${r.status ?? r.signal}${r.error ? ` (${r.error.message})` : ''}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;

  beforeAll(() => {
    project = mkdtempSync(join(tmpdir(), 'cordon-fresh-'));
    pkg = join(project, 'node_modules', 'cordon');
    const shims = join(project, '.no-compiler');
    mkdirSync(shims);
    for (const c of COMPILERS) {
      writeFileSync(join(shims, c), `#!/bin/sh\necho "$0: there is no compiler here: installing cordon must not build anything" >&2\nexit 127\n`);
      chmodSync(join(shims, c), 0o755);
    }
    env = { ...process.env, PATH: `${shims}:${process.env.PATH}`, npm_config_build_from_source: '' };
    // Install scripts allowed by allowScripts (npm 11.16+ runs a dependency's unlisted ones with a
    // warning; npm 12 blocks them), so that cordon's own (node-gyp-build) runs, and must find a
    // prebuild instead of compiling.
    writeFileSync(join(project, 'package.json'), `${JSON.stringify({ name: 'fresh', version: '1.0.0', private: true, allowScripts: { [`file:${tgz}`]: true } })}\n`);
    const t0 = Date.now();
    install = inProject('npm', ['install', '--no-audit', '--no-fund', '--foreground-scripts', tgz!], {}, INSTALL_TIMEOUT);
    installSeconds = (Date.now() - t0) / 1000;
    console.log(`package: npm install of ${tgz} took ${installSeconds.toFixed(1)} s`);
  }, INSTALL_TIMEOUT + 10_000);
  afterAll(() => {
    if (project) rmSync(project, { recursive: true, force: true });
  });

  // proves nothing of the contract: the package's install
  it('installs with no compiler on PATH, building nothing', () => {
    expect(install.status, said(install)).toBe(0);
    expect(existsSync(join(pkg, 'build')), 'node_modules/cordon/build exists: the install compiled').toBe(false);
    expect(`${install.stdout}${install.stderr}`).not.toMatch(/gyp info|no compiler here/);
  });

  // proves nothing of the contract: the package's contents
  it('holds the five platform directories, and `file` agrees with every name', () => {
    for (const [tuple, want] of Object.entries(files)) {
      for (const [name, says] of Object.entries(want)) {
        const path = join(pkg, 'prebuilds', tuple, name);
        expect(existsSync(path), `prebuilds/${tuple}/${name} is not in the package`).toBe(true);
        expect(execFileSync('file', ['-b', path], { encoding: 'utf8' }).trim(), `prebuilds/${tuple}/${name}`).toMatch(says);
        if (/cordon-anchor$/.test(name)) expect((statSync(path).mode & 0o777).toString(8), `prebuilds/${tuple}/${name} mode`).toBe('755');
      }
    }
  });

  // proves nothing of the contract: the package's prebuild
  it("node-gyp-build loads this machine's prebuild", () => {
    const r = inProject(process.execPath, ['-e', "const d = require('path').dirname(require.resolve('cordon/package.json')); const p = require('node-gyp-build').resolve(d); require(p).probe(); console.log(p)"]);
    expect(r.status, said(r)).toBe(0);
    expect(r.stdout.trim()).toBe(join(pkg, 'prebuilds', `${process.platform}-${process.arch}`, 'cordon.glibc.node'));
  });

  // proves nothing of the contract: the package's CLI version
  it('npx cordon --version prints the package version', () => {
    const r = inProject('npx', ['cordon', '--version']);
    expect(r.status, said(r)).toBe(0);
    expect(r.stdout.trim()).toBe(`cordon ${version}`);
  });

  // proves nothing of the contract: the package's install scripts
  it("the tarball's only install-time script is node-gyp-build (install), the one run above; it ships no build/ to shadow the prebuilds", () => {
    // What npm (11: advisory; 12: blocked unless allowScripts names it) and
    // pnpm 10 gate is preinstall, install and postinstall (and prepare for a
    // non-registry source, which npm lists but runs only for git and
    // directory installs: a tarball's never, approved or not).
    const listed = execFileSync('tar', ['-tzf', tgz!], { encoding: 'utf8' }).split('\n').filter(Boolean);
    expect(listed.filter((f) => /^package\/build\//.test(f)), 'a build/ in the package: node-gyp-build would load it before the prebuilds').toEqual([]);
    expect(listed.filter((f) => /(^|\/)\.npmrc$|(^|\/)\.yarnrc|(^|\/)pnpm-workspace\.yaml$/.test(f))).toEqual([]);
    expect(listed.filter((f) => f.endsWith('/package.json')), 'one package.json (a nested one could carry scripts of its own)').toEqual(['package/package.json']);
    const shipped = JSON.parse(execFileSync('tar', ['-xzOf', tgz!, 'package/package.json'], { encoding: 'utf8' })) as { scripts?: Record<string, string> };
    const atInstall = Object.entries(shipped.scripts ?? {}).filter(([name]) => /^(pre|post)?install$/.test(name));
    expect(atInstall).toEqual([['install', 'node-gyp-build']]);
    // The install above allowed scripts (--foreground-scripts shows each one run): cordon's install, nothing else of cordon's.
    const out = `${install.stdout}${install.stderr}`;
    expect(out).toMatch(/> cordon@\S+ install\n> node-gyp-build\n/);
    expect(out).not.toMatch(/> cordon@\S+ (preinstall|postinstall|preprepare|prepare|postprepare)\n/);
    expect(existsSync(join(pkg, 'tsconfig.json')), 'a prepare (tsc) could not even run from the package').toBe(false);
  });

  // proves nothing of the contract: the package's install with scripts blocked
  it('installed with every install script blocked (npm 12 by default, pnpm 10, --ignore-scripts), it works all the same: the prebuild loads at require time, run() and the CLI contain', () => {
    const other = join(project, 'blocked');
    mkdirSync(other);
    writeFileSync(join(other, 'package.json'), `${JSON.stringify({ name: 'blocked', version: '1.0.0', private: true })}\n`);
    const i = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts', tgz!], { cwd: other, env, encoding: 'utf8', timeout: INSTALL_TIMEOUT });
    expect(i.status, said(i)).toBe(0);
    const installed = join(other, 'node_modules', 'cordon');
    expect(existsSync(join(installed, 'build')), 'nothing was built').toBe(false);
    // node-gyp-build finds the prebuild itself when the package is loaded; no script put it anywhere.
    const inBlocked = (args: string[], extraEnv: NodeJS.ProcessEnv = {}) =>
      spawnSync(args[0]!, args.slice(1), { cwd: other, env: { ...env, ...extraEnv, PATH: env.PATH }, encoding: 'utf8', timeout: watchdog(60_000) });
    const found = inBlocked([process.execPath, '-e', "const d = require('path').dirname(require.resolve('cordon/package.json')); console.log(require('node-gyp-build').resolve(d))"]);
    expect(found.status, said(found)).toBe(0);
    expect(found.stdout.trim()).toBe(join(installed, 'prebuilds', `${process.platform}-${process.arch}`, 'cordon.glibc.node'));
    // The contained commands carry the test's tag: its cleanup SIGKILLs, and fails on, anything left.
    const t = useTag();
    const r = inBlocked([process.execPath, '-e', "require('cordon').run('sh', ['-c', 'sleep 100 >/dev/null 2>&1 & echo ran']).then((r) => console.log(r.stdout.trim(), r.exitCode))"], t.env);
    expect(r.status, said(r)).toBe(0);
    expect(r.stdout).toBe('ran 0\n');
    expect(describeProcs(t.procs()), 'the background sleep outlived run()').toBe(describeProcs([]));
    const c = inBlocked(['npx', '--no', 'cordon', 'run', '--', 'sh', '-c', 'setsid sleep 100 >/dev/null 2>&1 & echo started'], t.env);
    expect(c.status, `${said(c)}\nstill running: ${describeProcs(t.procs())}`).toBe(0);
    expect(c.stdout).toBe('started\n');
    expect(describeProcs(t.procs()), 'the setsid sleep outlived cordon run').toBe(describeProcs([]));
  }, INSTALL_TIMEOUT + 130_000);

  // proves C5: an escapee of the installed CLI is ended
  it("npx cordon run -- sh -c 'setsid sleep 100 &' leaves nothing", () => {
    const t = useTag();
    const r = inProject('npx', ['--no', 'cordon', 'run', '--', 'sh', '-c', 'setsid sleep 100 & echo started'], t.env);
    expect(r.status, `${said(r)}\nstill running: ${describeProcs(t.procs())}`).toBe(0);
    expect(r.stdout).toContain('started');
    expect(describeProcs(t.procs())).toBe(describeProcs([]));
  });

  // proves nothing of the contract: the package's CommonJS entry
  it("require('cordon') from CommonJS", () => {
    writeFileSync(join(project, 'use.cjs'), "const c = require('cordon');\nconsole.log(['spawn', 'run', 'capabilities', 'Registry'].map((k) => typeof c[k]).join(' '), c.capabilities().tier);\n");
    const r = inProject(process.execPath, ['use.cjs']);
    expect(r.status, said(r)).toBe(0);
    expect(r.stdout).toMatch(/^function function function function (cgroup|subreaper|process-group)\n$/);
  });

  // proves nothing of the contract: the package's types
  it("the README's examples type-check under tsc --strict against the installed package", () => {
    const dir = join(project, 'examples');
    mkdirSync(dir);
    expect(typeCheckBlocks(readmeBlocks(), dir)).toEqual([]);
  }, watchdog(60_000));

  const arm64Node = process.env.CORDON_PACKAGE_NODE_ARM64;
  const qemu = '/usr/bin/qemu-aarch64-static';
  const noArm64 = !arm64Node ? 'no arm64 node (CORDON_PACKAGE_NODE_ARM64; .ci/arm64.sh fetches one)' : !existsSync(qemu) ? `no ${qemu} (apt: qemu-user-static)` : undefined;
  if (noArm64) console.warn(`package: skipping the arm64 prebuild: ${noArm64}`);
  // proves nothing of the contract: the arm64 prebuild loads
  it.skipIf(!!noArm64)(`the linux-arm64 prebuild loads under qemu-user, and its anchor runs${noArm64 ? ` [skipped: ${noArm64}]` : ''}`, () => {
    const r = inProject(qemu, ['-L', '/usr/aarch64-linux-gnu', arm64Node!, '-e', "const d = require('path').dirname(require.resolve('cordon/package.json')); const p = require('node-gyp-build').resolve(d); console.log(p, JSON.stringify(require(p).probe()))"], {}, watchdog(120_000));
    expect(r.status, said(r)).toBe(0);
    expect(r.stdout).toContain(join(pkg, 'prebuilds', 'linux-arm64', 'cordon.glibc.node'));
    const a = inProject(qemu, [join(pkg, 'prebuilds', 'linux-arm64', 'cordon-anchor'), '--no-such-option']);
    expect(a.status, said(a)).toBe(64);
    expect(a.stderr).toMatch(/usage: cordon-anchor/);
  }, watchdog(180_000));

  const nodeExe = process.env.CORDON_PACKAGE_NODE_WIN;
  const noWine = !nodeExe ? 'no Windows node (CORDON_PACKAGE_NODE_WIN; .ci/windows.sh fetches one)' : !process.env.WINEPREFIX ? 'no Wine prefix (WINEPREFIX)' : undefined;
  if (noWine) console.warn(`package: skipping the win32 prebuild: ${noWine}`);
  // proves nothing of the contract: the Windows prebuild runs
  it.skipIf(!!noWine)(`the win32-x64 prebuild runs a contained command under Wine${noWine ? ` [skipped: ${noWine}]` : ''}`, () => {
    // Under Wine node.exe's stdio must be files (windows-under-wine.md).
    const out = join(project, 'wine.out');
    const err = join(project, 'wine.err');
    const script = join(project, 'wine-check.cjs');
    writeFileSync(
      script,
      [
        "const dir = require('path').dirname(require.resolve('cordon/package.json'));",
        "console.log('addon ' + require('node-gyp-build').resolve(dir));",
        "const cordon = require('cordon');",
        "cordon.run('cmd', ['/c', 'echo contained-on-windows']).then((r) => console.log('tier ' + r.tier + ' exit ' + r.exitCode + ' out ' + r.stdout.trim()));",
      ].join('\n'),
    );
    const r = spawnSync('sh', ['-c', 'exec wine "$@" >"$OUT" 2>"$ERR" </dev/null', 'sh', nodeExe!, execFileSync('winepath', ['-w', script], { encoding: 'utf8', env }).trim()], {
      cwd: project,
      env: { ...env, OUT: out, ERR: err, WINEDEBUG: '-all' },
      encoding: 'utf8',
      timeout: watchdog(180_000),
    });
    const text = `${readFileSync(out, 'utf8')}${readFileSync(err, 'utf8')}`;
    expect(r.status, `${said(r)}\n${text}`).toBe(0);
    expect(text).toMatch(/^addon .*\\node_modules\\cordon\\prebuilds\\win32-x64\\cordon\.node\r?$/m);
    expect(text).toMatch(/^tier job-object exit 0 out contained-on-windows\r?$/m);
  }, watchdog(240_000));
});
