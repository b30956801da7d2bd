// util-linux's setsid where there is none (macOS): a directory put first on
// the suite's PATH by vitest.config.ts, holding `setsid`, a link to the
// compiled fixture (test/fixtures/cordon-fixture.c), which, run under that
// name, is util-linux's `setsid [-f] <program>`: a new session, forking first
// when asked (-f) or when it leads its process group. So the fixtures' and
// test scripts' plain `setsid` and `setsid -f` run unchanged on macOS, as a
// program of the suite's own (the name shows as `setsid <program>` until its
// exec, as util-linux's does).
//
// On Linux the shim is used only when CORDON_TEST_SETSID_SHIM=1 (how it is
// proven here: the process-group project with it, and the ps observer).
import { mkdirSync, readlinkSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fixtureProgram } from './compiled.js';

export const SETSID_SHIM_VAR = 'CORDON_TEST_SETSID_SHIM';

/** Whether this run takes setsid from the shim: where util-linux is not the platform's (everything but Linux), or when asked. */
export function wantSetsidShim(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): boolean {
  return platform !== 'linux' || env[SETSID_SHIM_VAR] === '1';
}

/** The directory holding the `setsid` link (the fixture built first if it is not): needs a C compiler. */
export function setsidShimDir(): string {
  const program = fixtureProgram();
  const dir = join(dirname(program), 'bin');
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  const link = join(dir, 'setsid');
  let current: string | undefined;
  try {
    current = readlinkSync(link);
  } catch {
    current = undefined;
  }
  if (current !== program) {
    // Made under a name of this process's, then renamed over: never a missing or half-made link.
    const partial = `${link}.${process.pid}`;
    rmSync(partial, { force: true });
    symlinkSync(program, partial);
    renameSync(partial, link);
  }
  return dir;
}
