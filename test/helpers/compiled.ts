// The suite's compiled fixture (test/fixtures/cordon-fixture.c: a pid hopper,
// a setsid, a sleep and a getsid of its own), built with the machine's cc
// once per version of its source and shared by every worker: a program of the
// suite's own, never one of the system's, whose environment macOS withholds
// from every other process (Apple's sh, sleep, perl), so a member running it
// keeps the tree's marker readable as any third-party program does, on every
// platform. Callers check missing('cc') first (requirements.ts).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// Node's modules only: the observer (observer.ts) asks this program for
// sessions on macOS, and fixtures.ts imports the observer through procs.ts.
const SOURCE = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'cordon-fixture.c');

let built: string | undefined;

/** A directory of this user's alone to build in (world-readable: a member running as nobody execs from it). */
function buildDir(hash: string): string {
  const dir = join(tmpdir(), `cordon-fixture-${process.getuid?.() ?? 'u'}-${hash}`);
  try {
    mkdirSync(dir, { mode: 0o755 });
  } catch {
    // Made by an earlier worker, unless another user made it (or a link): then a fresh one.
    const st = lstatSync(dir);
    if (!st.isDirectory() || st.uid !== process.getuid?.() || (st.mode & 0o022) !== 0) return chmodded(mkdtempSync(join(tmpdir(), 'cordon-fixture-')));
  }
  return chmodded(dir);
}

function chmodded(dir: string): string {
  chmodSync(dir, 0o755);
  return dir;
}

/** The path of the compiled fixture, built now if this version of its source has not been. */
export function fixtureProgram(): string {
  if (built) return built;
  const source = SOURCE;
  const hash = createHash('sha256').update(readFileSync(source)).digest('hex').slice(0, 12);
  const dir = buildDir(hash);
  const program = join(dir, 'cordon-fixture');
  if (!existsSync(program)) {
    // Built under a name of this worker's, then renamed: another worker never runs a half-written file.
    const partial = `${program}.${process.pid}`;
    const r = spawnSync('cc', ['-O2', '-o', partial, source], { encoding: 'utf8', timeout: 60_000 });
    if (r.status !== 0) throw new Error(`cc could not build ${source}: ${r.error ?? r.stderr}`);
    chmodSync(partial, 0o755);
    renameSync(partial, program);
  }
  built = program;
  return program;
}
