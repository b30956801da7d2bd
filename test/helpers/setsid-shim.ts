// util-linux's setsid where there is none (macOS): a directory put first on
// the suite's PATH by vitest.config.ts, holding `setsid`, a link to the
// compiled fixture (test/fixtures/cordon-fixture.c), which, run under that
// name, is util-linux's `setsid [-f] <program>`: a new session, forking first
// when asked (-f) or when it leads its process group. So the fixtures' and
// test scripts' plain `setsid` and `setsid -f` run unchanged on macOS, as a
// program of the suite's own (the name shows as `setsid <program>` until its
// exec, as util-linux's does).
//
// Beside it, `sleep`, the same program (run under that name it is sleep(1):
// fractions, suffixes, `infinity`): Apple's /bin/sleep is a platform binary
// whose environment ps -E is not shown, so a leftover `sleep` of the system's
// would carry its tag invisibly; the suite's own shows it, and the leak check
// finds it (docs/macos-suite.md, "The leak check without the environment").
// A script that names /bin/sleep by its path still gets Apple's.
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

/** The programs of the suite's own the shim directory holds, each a link to the compiled fixture. */
export const SHIM_PROGRAMS = ['setsid', 'sleep'] as const;

/** The directory holding the `setsid` and `sleep` links (the fixture built first if it is not): needs a C compiler. */
export function setsidShimDir(): string {
  const program = fixtureProgram();
  const dir = join(dirname(program), 'bin');
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  for (const name of SHIM_PROGRAMS) linkTo(program, join(dir, name));
  return dir;
}

function linkTo(program: string, link: string): void {
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
}
