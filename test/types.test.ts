// The package's types as an importer gets them: a file that imports cordon
// compiles under `tsc --strict` with no tsconfig and no `--types`, with the
// TypeScript this repository builds with (5.x) and with what `npm i
// typescript` installs now (7.x, whose default `types` is empty, so every
// Node type the declarations use must come with them: lib/index.ts refers to
// Node's types itself). The compilers run on the built declarations (dist/),
// reached as node_modules/cordon in a scratch project, as an installed
// package is; checking the declarations is part of it (no --skipLibCheck).
import { describe, expect, it } from 'vitest';
import { COMPILERS, compileStrict, useImporterProject } from './helpers/importer.js';
import { watchdog } from './helpers/time.js';

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
  const project = useImporterProject('cordon-types-', IMPORTER);
  for (const [name, pkg] of COMPILERS) {
    // proves nothing of the contract: the types compile
    it(`${name}: tsc --strict compiles a file that imports cordon`, () => {
      const r = compileStrict(pkg, project());
      expect(r.version).toMatch(name === 'TypeScript 5' ? /^Version 5\./ : /^Version 7\./);
      expect(r.output, `${r.version}: tsc --strict use.mts`).toBe('');
      expect(r.status).toBe(0);
    }, watchdog(90_000));
  }
});
