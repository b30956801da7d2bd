// A scratch project that imports the built package as an installed one
// (node_modules/cordon -> this checkout, @types/node beside it), and
// `tsc --strict` over one file of it with TypeScript 5 or 7, no tsconfig and
// no --types: how types.test.ts and child-process-types.test.ts see the
// declarations an importer gets.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { repoRoot } from './fixtures.js';
import { ensureDist } from './host.js';
import { watchdog } from './time.js';

const require = createRequire(join(repoRoot, 'package.json'));

/** The compilers these tests run: the one this repository builds with, and what `npm i typescript` gives now. */
export const COMPILERS = [
  ['TypeScript 5', 'typescript'],
  ['TypeScript 7', 'typescript7'],
] as const;

/** Makes the project (before the file's tests, removed after them) with `code` as use.mts; returns its path, once made. */
export function useImporterProject(prefix: string, code: string): () => string {
  let project = '';
  beforeAll(async () => {
    await ensureDist();
    project = mkdtempSync(join(tmpdir(), prefix));
    mkdirSync(join(project, 'node_modules', '@types'), { recursive: true });
    symlinkSync(repoRoot, join(project, 'node_modules', 'cordon'));
    symlinkSync(dirname(require.resolve('@types/node/package.json')), join(project, 'node_modules', '@types', 'node'));
    writeFileSync(join(project, 'use.mts'), code);
  });
  afterAll(() => {
    if (project) rmSync(project, { recursive: true, force: true });
  });
  return () => project;
}

/** `tsc --strict --noEmit` of use.mts with the compiler package `pkg`: its version line, what it printed, its status. */
export function compileStrict(pkg: string, project: string): { version: string; output: string; status: number | null } {
  const tsc = join(dirname(require.resolve(`${pkg}/package.json`)), 'bin', 'tsc');
  const version = spawnSync(process.execPath, [tsc, '--version'], { encoding: 'utf8' }).stdout.trim();
  const r = spawnSync(process.execPath, [tsc, '--strict', '--noEmit', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', 'use.mts'], {
    cwd: project,
    encoding: 'utf8',
    timeout: watchdog(60_000),
  });
  return { version, output: `${r.stdout}${r.stderr}`, status: r.status };
}
