// Pipes between contained commands (issue #16): a tree's own stream passed as
// another's stdio is refused with a typed error (cordon's reader would drain
// it first and the other command would get nothing), and a.pipe(b) copies
// between the two trees as a shell pipeline, each contained, each with its
// own result. Observed from outside: what the commands print, and the tags.
import { describe, expect, it } from 'vitest';
import { spawn } from '../lib/index.js';
import { capture } from './helpers/fixtures.js';
import { useTag, waitGone, within } from './helpers/procs.js';

describe("another tree's stream as stdio", () => {
  // proves nothing of the contract: pipes between trees, API
  it('is ERR_CORDON_STREAM_IN_USE before anything of the second command runs', async () => {
    const t = useTag();
    const a = spawn('sh', ['-c', 'echo "PID a $$"; exec sleep 300'], { env: t.env, stdio: ['pipe', 'pipe', 'pipe'] });
    const out = capture(a.stdout);
    await within(out.until(/PID a \d+/), 10_000, 'a to start', t.tag);
    // (Its output can come before the anchor's report of it, under emulation: a.pid is known from here.)
    await within(a.started, 10_000, 'a to be reported running', t.tag);
    for (const stdio of [[a.stdout, 'pipe', 'pipe'], ['pipe', a.stdin, 'pipe'], ['pipe', 'pipe', a.stderr]] as const) {
      expect(() => spawn('sh', ['-c', 'echo "PID b $$"; cat'], { env: t.env, stdio: [...stdio] as never })).toThrow(
        expect.objectContaining({ code: 'ERR_CORDON_STREAM_IN_USE', stage: 'input', message: expect.stringMatching(/a\.pipe\(b\)/) }),
      );
    }
    // Only a (and its anchor) carry the tag: b never started.
    expect(t.procs().every((p) => p.pid === a.pid || p.pid === a.anchorPid)).toBe(true);
    await within(a.terminate({ grace: 0 }), 10_000, 'terminate a', t.tag);
    await waitGone(t, 5_000);
  });
});

describe('a.pipe(b)', () => {
  // proves nothing of the contract: pipes between trees, API
  it("a's stdout becomes b's stdin; b's stdin ends with it; both results are their own", async () => {
    const t = useTag();
    const a = spawn('sh', ['-c', "printf 'cherry\\nbanana\\napple\\n'; echo a-err >&2"], { env: t.env });
    const b = spawn('sort', [], { env: t.env });
    const aErr = capture(a.stderr);
    const bOut = capture(b.stdout);
    expect(a.pipe(b)).toBe(b);
    const [ra, rb] = await within(Promise.all([a.result, b.result]), 15_000, 'both results', t.tag);
    expect(bOut.text).toBe('apple\nbanana\ncherry\n');
    expect(aErr.text).toBe('a-err\n');
    expect(ra.exitCode).toBe(0);
    expect(rb.exitCode).toBe(0);
    expect(ra.pid).not.toBe(rb.pid);
  });

  // proves nothing of the contract: pipes between trees, API
  it("from: 'stderr'", async () => {
    const t = useTag();
    const a = spawn('sh', ['-c', 'echo out; echo err-line >&2'], { env: t.env });
    const b = spawn('tr', ['a-z', 'A-Z'], { env: t.env });
    const bOut = capture(b.stdout);
    capture(a.stdout);
    a.pipe(b, { from: 'stderr' });
    await within(Promise.all([a.result, b.result]), 15_000, 'both results', t.tag);
    expect(bOut.text).toBe('ERR-LINE\n');
  });

  // proves nothing of the contract: pipes between trees, API
  it('when b stops reading, a gets SIGPIPE as in a shell pipeline (not stalled on a full pipe)', async () => {
    const t = useTag();
    const a = spawn('sh', ['-c', 'exec seq 1 10000000'], { env: t.env, stdio: ['ignore', 'pipe', 'ignore'] });
    const b = spawn('head', ['-n', '1'], { env: t.env, stdio: ['pipe', 'pipe', 'ignore'] });
    const bOut = capture(b.stdout);
    a.pipe(b);
    const [ra, rb] = await within(Promise.all([a.result, b.result]), 20_000, 'both results', t.tag);
    expect(bOut.text).toBe('1\n');
    expect(rb.exitCode).toBe(0);
    expect(ra.signal).toBe('SIGPIPE');
    await waitGone(t, 5_000);
  });

  // proves nothing of the contract: pipes between trees' input errors
  it('a target without a piped stdin, or a bad target, is a typed error', async () => {
    const t = useTag();
    const a = spawn('sh', ['-c', 'echo x'], { env: t.env });
    const b = spawn('cat', [], { env: t.env, stdio: ['ignore', 'pipe', 'pipe'] });
    expect(() => a.pipe(b)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE', message: expect.stringMatching(/stdin piped/) }));
    expect(() => a.pipe({} as never)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
    capture(a.stdout);
    await within(Promise.all([a.result, b.result]), 15_000, 'both results', t.tag);
  });
});
