// Output as hosts read it (issue #16): proc.lines() async iteration (stdout,
// stderr or both in arrival order) and run()'s interleaved `all`. The
// interleaving fixture (fixtures/interleave.py) writes its next line only
// after the host has taken the previous one out of the pipe, so the arrival
// order is the fixture's order on any load.
import { describe, expect, it } from 'vitest';
import { run, spawn } from '../lib/index.js';
import { fixture } from './helpers/fixtures.js';
import { useTag, waitGone, within } from './helpers/procs.js';
import { missing } from './helpers/requirements.js';
import { itWhere } from './helpers/tier.js';

const INTERLEAVE = ['out:o1', 'err:e1', 'err:e2', 'out:o2', 'err:e3', 'out:o3'];
/** The interleaving fixture is python3. */
const noPython = missing('python3') ?? '';

async function collectLines(iterable: AsyncIterable<string>, tag: string, max = Infinity): Promise<string[]> {
  const got: string[] = [];
  await within(
    (async () => {
      for await (const line of iterable) {
        got.push(line);
        if (got.length >= max) break;
      }
    })(),
    15_000,
    'the lines',
    tag,
  );
  return got;
}

describe('proc.lines()', () => {
  // proves nothing of the contract: proc.lines(), API
  it("stdout by default: '\\n' and '\\r\\n' endings, a last line without a newline, a character split across writes", async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', "printf 'a\\nb\\r\\n'; printf '\\303'; sleep 0.1; printf '\\251t\\n\\nlast'; echo ignored >&2"], { env: t.env });
    const lines = await collectLines(proc.lines(), t.tag);
    expect(lines).toEqual(['a', 'b', 'ét', '', 'last']);
    expect((await within(proc.result, 10_000, 'the result', t.tag)).exitCode).toBe(0);
  });

  // proves nothing of the contract: proc.lines(), API
  itWhere(noPython === '', "from: 'stderr', and from: 'all' in the order the lines arrived", noPython, async () => {
    const t = useTag();
    const err = spawn(fixture('interleave.py'), INTERLEAVE, { env: t.env });
    expect(await collectLines(err.lines({ from: 'stderr' }), t.tag)).toEqual(['e1', 'e2', 'e3']);
    await within(err.result, 10_000, 'the result', t.tag);

    const all = spawn(fixture('interleave.py'), INTERLEAVE, { env: t.env });
    expect(await collectLines(all.lines({ from: 'all' }), t.tag)).toEqual(['o1', 'e1', 'e2', 'o2', 'e3', 'o3']);
    await within(all.result, 10_000, 'the result', t.tag);
  });

  // proves nothing of the contract: proc.lines(), API
  it('breaking out of the loop lets the rest flow away: the command is not stalled by the pipe', async () => {
    const t = useTag();
    // ~590 kB: far more than a pipe holds, so a stalled reader would block the command.
    const proc = spawn('sh', ['-c', 'seq 1 100000'], { env: t.env });
    expect(await collectLines(proc.lines(), t.tag, 3)).toEqual(['1', '2', '3']);
    const result = await within(proc.result, 15_000, 'the result after the loop broke', t.tag);
    expect(result.exitCode).toBe(0);
  });

  // proves nothing of the contract: proc.lines(), API
  it('a slow loop slows the command instead of buffering everything: every line still arrives, in order', async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', 'seq 1 20000'], { env: t.env });
    let n = 0;
    let inOrder = true;
    await within(
      (async () => {
        for await (const line of proc.lines()) {
          if (Number(line) !== ++n) inOrder = false;
          if (n % 2000 === 0) await new Promise((r) => setTimeout(r, 20));
        }
      })(),
      30_000,
      'every line',
      t.tag,
    );
    expect(n).toBe(20000);
    expect(inOrder).toBe(true);
    await within(proc.result, 10_000, 'the result', t.tag);
  });

  // proves nothing of the contract: proc.lines()'s input errors
  it("a stream that is not piped is a typed error; a bad 'from' too", async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', 'exit 0'], { env: t.env, stdio: ['ignore', 'pipe', 'ignore'] });
    expect(() => proc.lines({ from: 'stderr' })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }));
    expect(() => proc.lines({ from: 'all' })).toThrow(/stderr piped/);
    expect(() => proc.lines({ from: 'both' as never })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }));
    await within(proc.result, 10_000, 'the result', t.tag);
    await waitGone(t, 5_000);
  });
});

describe("run(): 'all'", () => {
  // proves nothing of the contract: run()'s all, API
  itWhere(noPython === '', 'stdout and stderr interleaved in arrival order, beside each of them', noPython, async () => {
    const t = useTag();
    const result = await within(run(fixture('interleave.py'), INTERLEAVE, { env: t.env, all: true }), 15_000, 'run', t.tag);
    // (Each without its final newline, as execa: stripFinalNewline.)
    expect(result.all).toBe('o1\ne1\ne2\no2\ne3\no3');
    expect(result.stdout).toBe('o1\no2\no3');
    expect(result.stderr).toBe('e1\ne2\ne3');
  });

  // proves nothing of the contract: proc.lines()'s encoding, API
  itWhere(noPython === '', "follows encoding ('buffer': a Buffer), is attached to a rejection, and is absent without all: true", noPython, async () => {
    const t = useTag();
    const buf = await within(run(fixture('interleave.py'), ['out:x', 'err:y'], { env: t.env, all: true, encoding: 'buffer' }), 15_000, 'run', t.tag);
    expect(Buffer.isBuffer(buf.all)).toBe(true);
    expect(buf.all!.toString()).toBe('x\ny');
    const error = await within(run('sh', ['-c', 'echo o; echo e >&2; exit 4'], { env: t.env, all: true }).catch((e: unknown) => e), 15_000, 'run', t.tag);
    expect((error as { all?: string }).all).toMatch(/^(o\ne|e\no)$/);
    const plain = await within(run('sh', ['-c', 'echo o'], { env: t.env }), 15_000, 'run', t.tag);
    expect(plain).not.toHaveProperty('all');
  });
});
