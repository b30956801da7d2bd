// Issue #48: cordon/child_process proven by Node's own tests. Every
// test/parallel/test-child-process-* file of Node 18.20's source (fetched at
// test time, never in this repository: scripts/node-tests/source.mjs) runs
// twice with this node: as written (the baseline) and with `child_process`
// swapped for cordon/child_process (scripts/node-tests/swap.mjs). Each is a
// test here:
// - it fails with Node's own child_process on this Node: skipped, saying so;
// - it uses what cordon/child_process does not offer (fork() and IPC, the
//   ChildProcess class, Node's internals): skipped, naming what;
// - it is a known difference (DIFFERENCES, each said in docs/child-process.md):
//   asserted to still fail, so the list stays true when one is fixed;
// - else it must pass: a regression fails the lane.
// The table in docs/node-tests.md is printed by `node scripts/node-tests/run.mjs`.
import { describe, expect, it } from 'vitest';
// @ts-expect-error (a plain .mjs of the scripts, no types)
import { NODE_SOURCE, nodeTests, runOne } from '../../scripts/node-tests/source.mjs';
// @ts-expect-error (a plain .mjs of the scripts, no types)
import { DIFFERENCES, notOffered, short } from '../../scripts/node-tests/verdicts.mjs';
import { ensureDist } from '../helpers/host.js';

interface Outcome {
  ok: boolean;
  code: number | null;
  signal: string | null;
  timedOut: boolean;
  stderr: string;
  missing: string[];
  flags: string[];
}

const tail = (text: string) => text.split('\n').slice(-25).join('\n');

// Every file is run here, while the tests are collected (two at a time: a
// few minutes), so that each skip can name its reason in the test's title.
await ensureDist();
const { root, files } = (await nodeTests()) as { root: string; files: string[] };
const runs = new Map<string, { baseline: Outcome; cordon: Outcome | undefined }>();
{
  let next = 0;
  const worker = async () => {
    while (next < files.length) {
      const file = files[next++]!;
      const baseline = (await runOne(root, file, false)) as Outcome;
      runs.set(file, { baseline, cordon: baseline.ok ? ((await runOne(root, file, true)) as Outcome) : undefined });
    }
  };
  await Promise.all([worker(), worker()]);
}

describe(`Node ${NODE_SOURCE.version}'s child_process tests against cordon/child_process (node ${process.version})`, () => {
  for (const file of files) {
    const { baseline, cordon } = runs.get(file)!;
    const name = short(file) as string;
    if (!cordon) {
      it.skip(`${name} [skipped: fails with node:child_process on node ${process.version} too (exit ${baseline.code ?? baseline.signal}): not applicable]`, () => {});
      continue;
    }
    const why = cordon.ok ? undefined : (notOffered(file, cordon) as string | undefined);
    if (why) {
      it.skip(`${name} [skipped: not applicable: ${why}]`, () => {});
      continue;
    }
    const difference = (DIFFERENCES as Record<string, string>)[name];
    if (difference) {
      it(`${name}: a known difference, still failing (${difference})`, () => {
        expect(cordon.ok, `${file} passes now: remove it from DIFFERENCES and docs/child-process.md`).toBe(false);
      });
      continue;
    }
    it(name, () => {
      expect(cordon.ok, `${file} with cordon/child_process (exit ${cordon.code ?? cordon.signal}${cordon.timedOut ? ', timed out' : ''}):\n${tail(cordon.stderr)}`).toBe(true);
    });
  }
});
