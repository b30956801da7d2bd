// run()'s types follow `encoding` (issue #16): strings for text encodings,
// Buffers for 'buffer', the union only when the encoding is known at run time.
// Checked by compiling test/types/run-encoding.ts with the TypeScript
// compiler: its @ts-expect-error lines must be errors, nothing else may be.
import { join } from 'node:path';
import ts from 'typescript';
import { expect, it } from 'vitest';
import { repoRoot } from './helpers/fixtures.js';
import { watchdog } from './helpers/time.js';

// proves nothing of the contract: the types compile
it('run() result types follow encoding; a contained process\'s events are typed', () => {
  const file = join(repoRoot, 'test', 'types', 'run-encoding.ts');
  const program = ts.createProgram([file], {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ['lib.es2022.d.ts', 'lib.esnext.disposable.d.ts'],
    types: ['node'],
    strict: true,
    noEmit: true,
    skipLibCheck: true,
  });
  const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  expect(diagnostics).toEqual([]);
}, watchdog(120_000));
