// Where Node's child_process tests come from, and how one is run
// (scripts/node-tests/run.mjs, test/node-tests/node-tests.test.ts).
//
// The source: Debian 12's source package of nodejs (a package registry both
// a developer's machine and CI reach), its upstream tarball pinned by
// version and SHA-256, downloaded once into the CI cache
// ($CORDON_CI_CACHE, default ~/.cache/cordon-ci) by the pool's URL, or by
// `apt-get source --download-only` with a deb-src list of this script's own
// (nothing of the system's apt configuration changes). Only test/common,
// test/fixtures and test/parallel/test-child-process-* are extracted.
import { spawnSync } from 'node:child_process';
import { runInGroup } from '../lib/run-group.mjs';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const NODE_SOURCE = {
  version: '18.20.4',
  debian: '18.20.4+dfsg-1~deb12u3',
  file: 'nodejs_18.20.4+dfsg.orig.tar.xz',
  sha256: '6ce58062c71eae37d9c5ac31eeaeff9c2d48561d21c2849179d056c9c1bd9ebc',
  url: 'http://deb.debian.org/debian-security/pool/updates/main/n/nodejs/nodejs_18.20.4%2bdfsg.orig.tar.xz',
};

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, '..', '..');
const TIMEOUT_MS = 60_000;

function cacheDir() {
  return join(process.env.CORDON_CI_CACHE || join(homedir(), '.cache', 'cordon-ci'), 'nodejs-src');
}

function sha256(path) {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

// The pinned tarball in the cache: downloaded if missing; a wrong checksum is an error, never used.
function tarball() {
  const dir = cacheDir();
  mkdirSync(dir, { recursive: true });
  const path = join(dir, NODE_SOURCE.file);
  if (existsSync(path) && sha256(path) === NODE_SOURCE.sha256) return path;
  const partial = `${path}.${process.pid}`;
  const tries = [];
  const curl = spawnSync('curl', ['-fsSL', '--retry', '3', '-o', partial, NODE_SOURCE.url], { encoding: 'utf8', timeout: 300_000 });
  tries.push(`curl ${NODE_SOURCE.url}: ${curl.error?.message ?? (curl.status === 0 ? 'ok' : curl.stderr.trim())}`);
  if (curl.status !== 0 || sha256(partial) !== NODE_SOURCE.sha256) {
    rmSync(partial, { force: true });
    // apt-get source, with a sources list and state of its own.
    const apt = mkdtempSync(join(tmpdir(), 'cordon-node-src-'));
    try {
      mkdirSync(join(apt, 'lists', 'partial'), { recursive: true });
      writeFileSync(
        join(apt, 'sources.list'),
        ['http://deb.debian.org/debian bookworm', 'http://deb.debian.org/debian-security bookworm-security']
          .map((s) => `deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${s} main\n`)
          .join(''),
      );
      const o = ['-o', `Dir::Etc::SourceList=${join(apt, 'sources.list')}`, '-o', 'Dir::Etc::SourceParts=/dev/null', '-o', `Dir::State::Lists=${join(apt, 'lists')}`];
      const up = spawnSync('apt-get', [...o, 'update'], { encoding: 'utf8', timeout: 300_000 });
      const get = spawnSync('apt-get', [...o, 'source', '--download-only', `nodejs=${NODE_SOURCE.debian}`], { cwd: apt, encoding: 'utf8', timeout: 600_000 });
      tries.push(`apt-get source nodejs=${NODE_SOURCE.debian}: ${up.error?.message ?? get.error?.message ?? (get.stderr.trim().split('\n').pop() || 'ok')}`);
      const got = join(apt, NODE_SOURCE.file);
      if (existsSync(got) && sha256(got) === NODE_SOURCE.sha256) renameSync(got, partial);
    } finally {
      rmSync(apt, { recursive: true, force: true });
    }
  }
  if (!existsSync(partial)) throw new Error(`Node ${NODE_SOURCE.version}'s source (${NODE_SOURCE.file}, sha256 ${NODE_SOURCE.sha256}) could not be had:\n  ${tries.join('\n  ')}`);
  renameSync(partial, path);
  return path;
}

/** The extracted tests: `root` (a copy of node-v<version>'s test/common, test/fixtures and the child_process tests) and the test files' names. */
export async function nodeTests() {
  const root = join(cacheDir(), `node-v${NODE_SOURCE.version}`);
  const marker = join(root, '.extracted');
  if (!existsSync(marker)) {
    const tgz = tarball();
    const top = `node-v${NODE_SOURCE.version}`;
    const into = mkdtempSync(join(cacheDir(), 'extract-'));
    const r = spawnSync('tar', ['-xJf', tgz, '-C', into, '--wildcards', `${top}/test/common/*`, `${top}/test/fixtures/*`, `${top}/test/parallel/test-child-process-*`], { encoding: 'utf8', timeout: 300_000 });
    if (r.status !== 0) throw new Error(`tar could not extract ${tgz}: ${r.error?.message ?? r.stderr}`);
    rmSync(root, { recursive: true, force: true });
    renameSync(join(into, top), root);
    rmSync(into, { recursive: true, force: true });
    writeFileSync(marker, `${NODE_SOURCE.file} ${NODE_SOURCE.sha256}\n`);
  }
  const files = readdirSync(join(root, 'test', 'parallel'))
    .filter((f) => /^test-child-process-.*\.m?js$/.test(f))
    .sort();
  return { root, files };
}

// `// Flags: --a --b` in a test's first lines: what Node's test runner passes to node.
function flags(source) {
  const m = /^\/\/ Flags: (.*)$/m.exec(source.split('\n').slice(0, 40).join('\n'));
  return m ? m[1].trim().split(/\s+/) : [];
}

/**
 * Runs one test file with this node, with `child_process` swapped for cordon's
 * or not. It runs in a process group of its own, which is SIGKILLed when it
 * ends (or after 60 s): what it leaves is ended with it (scripts/lib/run-group.mjs). Every process it
 * starts carries CORDON_TEST_TAG (the suite's leak checks see them).
 */
export async function runOne(root, file, swapped, tag = `node-tests-${process.pid}`) {
  const path = join(root, 'test', 'parallel', file);
  const missing = join(tmpdir(), `cordon-node-tests-missing-${process.pid}-${Math.random().toString(36).slice(2)}`);
  const args = [...flags(readFileSync(path, 'utf8'))];
  if (swapped) args.unshift('--import', join(here, 'swap.mjs'));
  args.push(path);
  const testDir = mkdtempSync(join(tmpdir(), 'cordon-node-test-'));
  const env = {
    ...process.env,
    CORDON_TEST_TAG: process.env.CORDON_TEST_TAG ?? tag,
    CORDON_NODE_TESTS_MODULE: join(repo, 'dist', 'child_process.js'),
    CORDON_NODE_TESTS_MISSING: missing,
    NODE_TEST_DIR: testDir,
  };
  const r = await runInGroup(process.execPath, args, { cwd: root, env, timeoutMs: TIMEOUT_MS, endGroup: true, keepChars: 20_000 });
  const asked = existsSync(missing) ? [...new Set(readFileSync(missing, 'utf8').split('\n').filter(Boolean))] : [];
  rmSync(missing, { force: true });
  rmSync(testDir, { recursive: true, force: true });
  return { ok: r.code === 0 && !r.timedOut, code: r.code, signal: r.signal, timedOut: r.timedOut, ms: r.ms, stdout: r.stdout, stderr: r.stderr, missing: asked, flags: args.filter((a) => a.startsWith('--') && a !== '--import') };
}
