// The package's types as an importer gets them: a file that imports cordon
// compiles under `tsc --strict` with no tsconfig and no `--types`, with the
// TypeScript this repository builds with (5.x) and with what `npm i
// typescript` installs now (7.x, whose default `types` is empty, so every
// Node type the declarations use must come with them: lib/index.ts refers to
// Node's types itself). The compilers run on the built declarations (dist/),
// reached as node_modules/cordon in a scratch project, as an installed
// package is; checking the declarations is part of it (no --skipLibCheck).
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from './helpers/fixtures.js';
import { ensureDist } from './helpers/host.js';
import { watchdog } from './helpers/time.js';

const require = createRequire(join(repoRoot, 'package.json'));

const IMPORTER = `import { spawn, run, capabilities, Registry, type ContainedResult, type SpawnOptions } from 'cordon';
const options: SpawnOptions = { timeout: '10s', leftovers: 'kill' };
const proc = spawn('sh', ['-c', 'echo hi'], options);
proc.stdout?.on('data', (chunk: Buffer) => process.stdout.write(chunk));
const result: ContainedResult = await proc.result;
const { stdout } = await run('echo', ['hi']);
const owner = new Registry().owner('types');
console.log(result.exitCode, stdout, capabilities().tier, owner.id);
`;

describe("an importer's types, without a tsconfig or --types", () => {
  let project: string;
  beforeAll(async () => {
    await ensureDist();
    project = mkdtempSync(join(tmpdir(), 'cordon-types-'));
    mkdirSync(join(project, 'node_modules', '@types'), { recursive: true });
    symlinkSync(repoRoot, join(project, 'node_modules', 'cordon'));
    symlinkSync(dirname(require.resolve('@types/node/package.json')), join(project, 'node_modules', '@types', 'node'));
    writeFileSync(join(project, 'use.mts'), IMPORTER);
  });
  afterAll(() => rmSync(project, { recursive: true, force: true }));

  for (const [name, pkg] of [
    ['TypeScript 5', 'typescript'],
    ['TypeScript 7', 'typescript7'],
  ] as const) {
    it(`${name}: tsc --strict compiles a file that imports cordon`, () => {
      const tsc = join(dirname(require.resolve(`${pkg}/package.json`)), 'bin', 'tsc');
      const version = spawnSync(process.execPath, [tsc, '--version'], { encoding: 'utf8' }).stdout.trim();
      expect(version).toMatch(name === 'TypeScript 5' ? /^Version 5\./ : /^Version 7\./);
      const r = spawnSync(process.execPath, [tsc, '--strict', '--noEmit', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', 'use.mts'], {
        cwd: project,
        encoding: 'utf8',
        timeout: watchdog(60_000),
      });
      expect(`${r.stdout}${r.stderr}`, `${version}: tsc --strict use.mts`).toBe('');
      expect(r.status).toBe(0);
    }, watchdog(90_000));
  }
});
