// cordon/child_process's types are node:child_process's (issue #48): a file
// written for Node's module, its import swapped, compiles unchanged under
// `tsc --strict` with no tsconfig, against the built declarations reached as
// an installed package's subpath export (node_modules/cordon), with
// TypeScript 5 and 7. The @ts-expect-error lines prove the types are Node's
// and not `any`: tsc fails on one that is no error.
import { describe, expect, it } from 'vitest';
import { COMPILERS, compileStrict, useImporterProject } from './helpers/importer.js';
import { watchdog } from './helpers/time.js';

const IMPORTER = `import { spawn, exec, execFile, spawnSync, execSync, execFileSync, contained, type ChildProcess, type ExecException, type SpawnOptions } from 'cordon/child_process';
import { promisify } from 'node:util';
const options: SpawnOptions = { detached: true, timeout: 1000, killSignal: 'SIGINT', windowsHide: true };
const child = spawn('sh', ['-c', 'echo hi'], { stdio: 'pipe' });
child.stdout.on('data', (chunk: Buffer) => process.stdout.write(chunk));
child.on('close', (code: number | null, signal: NodeJS.Signals | null) => console.log(code, signal));
const other: ChildProcess = spawn('ls', options);
other.kill('SIGINT');
other.unref();
exec('echo hi', (error: ExecException | null, stdout: string, stderr: string) => console.log(error?.code, stdout, stderr));
execFile('echo', ['hi'], { encoding: 'buffer' }, (error, stdout: Buffer) => console.log(error?.killed, stdout.length));
const { stdout } = await promisify(execFile)('echo', ['hi']);
const text: string = stdout;
const buffers = await promisify(exec)('echo hi', { encoding: 'buffer' });
const bytes: Buffer = buffers.stdout;
const result = await contained(child)?.result;
console.log(text, bytes, result?.exitCode);
const sync = spawnSync('echo', ['hi'], { encoding: 'utf8' });
const syncText: string = sync.stdout;
const lines: string = execSync('echo hi', { encoding: 'utf8' });
const raw: Buffer = execFileSync('echo', ['hi']);
console.log(syncText, lines, raw, sync.status, sync.error?.message);
// @ts-expect-error: Node's spawn takes no number for a command
spawn(42);
// @ts-expect-error: exec's stdout is a string with the default encoding
const wrong: Buffer = (await promisify(exec)('echo hi')).stdout;
console.log(wrong);
`;

describe("cordon/child_process's types are node:child_process's", () => {
  const project = useImporterProject('cordon-cp-types-', IMPORTER);
  for (const [name, pkg] of COMPILERS) {
    // proves nothing of the contract: the types compile
    it(`${name}: tsc --strict compiles a file that imports spawn, exec, execFile and the sync variants from 'cordon/child_process'`, () => {
      const r = compileStrict(pkg, project());
      expect(r.version).toMatch(name === 'TypeScript 5' ? /^Version 5\./ : /^Version 7\./);
      expect(r.output, `${r.version}: tsc --strict use.mts`).toBe('');
      expect(r.status).toBe(0);
    }, watchdog(90_000));
  }
});
