// CONTRACT C2, C6: a lost anchor (C2, "If the anchor itself dies"), a cleanup failure the host follows with its own sweep.
// When the anchor itself dies (SIGKILLed, OOM-killed) before its tree is
// quiescent: the result is a cleanup failure (ERR_CORDON_ANCHOR_LOST, C6),
// and where the tier holds a second identity for the tree (the cgroup tier's
// cgroup; on Windows the host's job handle) the host ends the tree through it
// (capabilities().guarantees.survivesAnchorDeath, anchorLossSwept 'always').
// The subreaper and process-group tiers (Linux, with pidfds) sweep what the
// tree's marker, and the session the anchor led, still tell
// (anchorLossSwept 'marked'); elsewhere the members are orphaned out of
// reach, which capabilities() says. Either way the host's sweep is done
// before the result settles, and the error's anchorLost says what it did.
//
// The tree: every kind of member (background, setsid, double fork) and two
// that scrubbed their environment (env -i), one still in the tree's session,
// one not; every process carries the test's tag (the scrubbed ones keep it:
// env -i TAG=...), which the cleanup registered by useTag() finds and
// SIGKILLs whatever happens. What a tier cannot tell after its anchor died
// (capabilities().guarantees.anchorLossSwept 'marked') is excused, and shown
// to be left.
//
// And the cgroup tier's mechanism, observed from outside: the command is born
// in a cgroup of its own, and the cgroup is gone once the tree is.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawn, type CordonError } from '../lib/index.js';
import { rejected } from './helpers/assert.js';
import { cgroupMount, cgroupOf } from './helpers/cgroup.js';
import { repoRoot } from './helpers/fixtures.js';
import { ensureDist, startCli } from './helpers/host.js';
import { alive, describeProcs, killPids, readStat, rememberIdentity, useTag, waitFor, within } from './helpers/procs.js';
import { TAG_VAR } from './helpers/observer.js';
import { tempDir } from './helpers/registry.js';
import { promised, watchdog } from './helpers/time.js';
import { caps, itWhere, tier, xnu } from './helpers/tier.js';
import { onlyWhere } from './helpers/requirements.js';
import { collect, outcome, waitPidsGone } from './helpers/trees.js';

// Background sleeps, a setsid'd one, a double-forked one, one that scrubbed
// its environment but stayed in the tree's session, and one that scrubbed it
// and left the session; then, told to, the root kills its parent (the anchor).
const SCRIPT = [
  'sleep 300 & echo "PID bg $!"',
  'sleep 300 & echo "PID bg2 $!"',
  'setsid sleep 300 & echo "PID setsid $!"',
  '(sleep 300 & echo "PID double $!")',
  `env -i ${TAG_VAR}="$${TAG_VAR}" sleep 300 & echo "PID scrubbed $!"`,
  `(setsid env -i ${TAG_VAR}="$${TAG_VAR}" sleep 300 & echo "PID away $!")`,
  'echo READY',
  'read go',
  'kill -KILL $PPID',
  'exec sleep 300',
].join('\n');

describe(`the anchor killed, ${tier} tier`, () => {
  for (const killer of ['a member', 'a kill -9 from outside'] as const) {
    // proves C2, C6
    it(`${killer} SIGKILLs the anchor: the result is ERR_CORDON_ANCHOR_LOST; the host ends the tree before it, as far as the tier can tell it, and says what it swept`, { timeout: watchdog(40_000) }, async () => {
      const t = useTag(); // its cleanup (SIGKILL by tag) is registered before anything runs
      const proc = spawn('sh', ['-c', SCRIPT], { env: t.env, stdio: ['pipe', 'pipe', 'pipe'] });
      const { pids, root } = await collect(proc, t.tag);
      const anchor = proc.anchorPid!;
      // What this tier cannot tell after its anchor died (capabilities() says which).
      const g = caps.guarantees;
      // macOS's anchor (here: the darwin build on the model of XNU) has no host
      // sweep after its death: asserted as not given, every member excused.
      const none = xnu;
      const unknowable = none ? [root, ...Object.values(pids)] : g.anchorLossSwept === 'always' ? [] : tier === 'process-group' ? [pids.away!] : [pids.scrubbed!, pids.away!];
      if (none) expect(g.anchorLossSwept, 'macOS: the host sweeps nothing after its anchor died').toBe('never');
      else if (g.anchorLossSwept !== 'always') expect(g.anchorLossSwept, `the ${tier} tier promises only what it can tell`).toBe('marked');
      for (const pid of unknowable) t.notPromised(pid);
      const promisedPids = [root, ...Object.values(pids)].filter((p) => !unknowable.includes(p));
      // The scrubbed members run sleep without the marker before the anchor
      // dies (until their exec they still carry it, and would be found by it).
      const scrubbed = (pid: number) => {
        try {
          return readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('sleep\0') && !readFileSync(`/proc/${pid}/environ`, 'utf8').includes('CORDON_TREE=');
        } catch {
          return false;
        }
      };
      await waitFor(() => scrubbed(pids.scrubbed!) && scrubbed(pids.away!), { timeout: watchdog(5000), what: 'the scrubbed members to run sleep', watch: t.tag });

      const told = Date.now();
      if (killer === 'a member') {
        // The root shell kills its parent ($PPID): the anchor.
        proc.stdin!.end('go\n');
      } else {
        // As a user would find it: the root's parent, read from /proc.
        const parent = readStat(root)!.ppid;
        expect(parent, 'the root is the anchor\'s child').toBe(anchor);
        killPids([parent]);
      }
      const how = await outcome(proc.result, watchdog(10_000), 'the result after the anchor was killed', t.tag);
      const observed = Date.now();
      const err = rejected<CordonError>(how, 'the result resolved');
      expect(err.code, err.message).toBe('ERR_CORDON_ANCHOR_LOST');
      expect(err.stage).toBe('cleanup');
      // The anchor is gone (the member's kill, not cordon's).
      await waitFor(() => !t.procs().some((p) => p.pid === anchor && p.state !== 'Z'), { timeout: watchdog(5000), what: 'the anchor to be gone', watch: t.tag });

      // Nothing the tier can tell is alive: polled up to a generous watchdog
      // (a loaded 2-core machine), then the measured time is held to the
      // product's 2 s after the host observed the loss (with the suite's load allowance).
      await waitFor(() => t.promised().filter((p) => p.state !== 'Z').length === 0, {
        timeout: watchdog(10_000),
        what: 'every member the tier can tell to be killed',
        watch: t.tag,
      });
      const gone = Date.now();
      const sweep = err.anchorLost!;
      console.info(
        `[anchor-lost ${tier}, ${killer}] the kill at 0 ms; result (loss observed, sweep done) at ${observed - told} ms; ` +
          `members gone at ${gone - told} ms (${gone - observed} ms after the result); sweep: ${JSON.stringify(sweep)}`,
      );
      expect(gone - observed, 'members gone after the host observed the loss').toBeLessThanOrEqual(promised(2000));
      expect(sweep, err.message).toBeDefined();
      if (none) {
        expect(sweep.by).toBe('none');
        expect(sweep.swept).toEqual([]);
      } else if (tier === 'cgroup') {
        expect(sweep.by).toBe('cgroup');
      } else {
        expect(sweep.by).toBe('marker');
        // The host's sweep did it (not init, not the test): each member is named.
        for (const pid of promisedPids) expect(sweep.swept, `pid ${pid} among the swept ${JSON.stringify(sweep)}`).toContain(pid);
        expect(sweep.unreached).toEqual([]);
        expect(err.message).toMatch(/env -i/);
        // What it could not tell is still there: the tier did not promise it.
        const left = t.procs().filter((p) => p.state !== 'Z').map((p) => p.pid);
        expect(left.sort(), describeProcs(t.procs())).toEqual([...unknowable].sort());
      }
    });
  }
});

// C6: a cleanup failure is never turned into success by what the command
// printed. The command forges what a clean end says on the anchor's control
// channel (EXIT 0, QUIET) and what a success looks like, on its stdout and
// stderr and on every other descriptor it holds (a leaked control channel
// would take them), then kills its anchor (its parent) and exits 0.
const FORGER = [
  'for fd in $(ls /dev/fd); do [ "$fd" -gt 2 ] && { printf "EXIT 0 0\\nQUIET\\nLEFTEND\\n" >&$fd; } 2>/dev/null; done',
  'printf "EXIT 0 0\\nQUIET\\nLEFTEND\\n"; printf "EXIT 0 0\\nQUIET\\n" >&2',
  'echo "exited with code 0: cleanup complete"',
  'kill -KILL $PPID; exit 0',
].join('; ');

describe(`a cleanup failure is not laundered (C6), ${tier} tier`, () => {
  // proves C2, C6
  it('a command that prints a clean end and kills its anchor: the result is ERR_CORDON_ANCHOR_LOST, a cleanup failure', async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', FORGER], { env: t.env });
    const anchor = proc.anchorPid!;
    proc.stdout.resume();
    proc.stderr.resume();
    const how = await outcome(proc.result, 10_000, 'the result after the command killed its anchor', t.tag);
    const err = rejected<CordonError>(how, 'the result resolved');
    expect(err.code, err.message).toBe('ERR_CORDON_ANCHOR_LOST');
    expect(err.stage).toBe('cleanup');
    // Seen from outside: the anchor is gone (killed by the command, not by
    // cordon), and so is the command (it exits right after; the result can
    // come first, and the test's own cleanup must not find it still running).
    // The command can kill its anchor before the anchor told the host its
    // pid (seen on the model of XNU): then proc.pid is undefined, and the
    // command is found by its tag, as every process the test started.
    await waitPidsGone(proc.pid === undefined ? [anchor] : [anchor, proc.pid], 5000, 'the anchor and the command to be gone', t.tag);
    await waitFor(() => t.procs().every((p) => p.state === 'Z'), { timeout: watchdog(5000), what: 'nothing tagged to be running', watch: t.tag });
  });

  // proves C6: the CLI's exit status, a real process's
  it('the CLI: the same command makes cordon run exit 70 and say the cleanup failed, whatever the command printed', async () => {
    const t = useTag();
    await ensureDist();
    const c = startCli(['run', '--', 'sh', '-c', FORGER], t.env);
    const { code } = await within(c.exited, 20_000, 'cordon run to exit', t.tag);
    expect(c.out.text, 'the forged lines did reach the output').toContain('cleanup complete');
    expect(code, c.err.text).toBe(70);
    expect(c.err.text).toMatch(/ERR_CORDON_ANCHOR_LOST|anchor/);
  });
});

const cgroups = onlyWhere(process.platform === 'linux', 'cgroups are Linux-only (/proc/self/cgroup)');
describe.skipIf(cgroups.skip)(`the tree's cgroup, ${tier} tier${cgroups.note}`, () => {
  // proves C1
  it(tier === 'cgroup' ? 'the command is born in a cgroup of its own, removed with the tree' : 'no cgroup is made: the command stays in the host\'s', async () => {
    const t = useTag();
    // The root's first command reads its own cgroup: where it was born.
    const proc = spawn('sh', ['-c', 'grep "^0::" /proc/self/cgroup; sleep 300 >/dev/null 2>&1 & echo "PID s $!"; echo READY; wait'], {
      env: t.env,
    });
    const { out, pids } = await collect(proc, t.tag);
    const host = cgroupOf(process.pid)!;
    const born = /^0::(.*)$/m.exec(out.text)![1]!;
    if (tier === 'cgroup') {
      // cordon-<anchor pid>-<random suffix>: a name no earlier tree can have left behind.
      const own = cgroupOf(proc.pid!)!;
      expect(own, 'the root, seen from outside').toMatch(new RegExp(`^${host === '/' ? '' : host}/cordon-${proc.anchorPid}-[0-9a-f]{16}$`));
      // At its first instruction, seen from inside: its own cgroup, which in
      // a cgroup namespace (made right after the birth in the cgroup) is "/".
      expect(born, 'the root, at its first instruction').toBe(caps.guarantees.cgroupNamespace ? '/' : own);
      expect(cgroupOf(pids.s!), 'its child').toBe(own);
      expect(cgroupOf(proc.anchorPid!), 'the anchor stays outside').toBe(host);
      const dir = `${cgroupMount()}${own}`;
      expect(existsSync(dir)).toBe(true);
      await within(proc.terminate(), 10_000, 'terminate()', t.tag);
      await waitFor(() => !existsSync(dir), { timeout: 2000, what: `the cgroup ${dir} to be removed`, watch: t.tag });
    } else {
      expect(caps.guarantees.survivesAnchorDeath).toBe(false);
      expect(born).toBe(host);
      await within(proc.terminate(), 10_000, 'terminate()', t.tag);
    }
  });

  // (Elsewhere no cgroup is made at all: the test above checks that.)
  // proves C3, C9
  itWhere(tier === 'cgroup', 'a tree that runs cordon itself, killed at once, leaves no cgroup behind', `the ${tier} tier makes no cgroup`, async () => {
    const t = useTag();
    await ensureDist();
    // The inner cordon (the CLI) makes its tree's cgroup inside the outer
    // tree's; kill() reaches the inner anchor too, so nothing of the inner
    // side removes its cgroup: the outer anchor must.
    const cli = join(repoRoot, 'dist', 'cli.js');
    const proc = spawn(process.execPath, [cli, 'run', '--', 'sh', '-c', 'echo "PID inner $$"; echo READY; exec sleep 300'], { env: t.env });
    const { pids } = await collect(proc, t.tag, { timeout: 20_000 });
    const outer = `${cgroupMount()}${cgroupOf(proc.pid!)}`;
    const inner = `${cgroupMount()}${cgroupOf(pids.inner!)}`;
    expect(inner.startsWith(`${outer}/cordon-`), `${inner} inside ${outer}`).toBe(true);
    await within(proc.kill(), 10_000, 'kill()', t.tag);
    await within(proc.result, 10_000, 'the result', t.tag);
    expect(existsSync(inner), inner).toBe(false);
    expect(existsSync(outer), outer).toBe(false);
  });

  // The anchor lists its cgroup's sub-cgroups too (through the descriptors
  // it holds from its first listing): a member there is a leftover like any
  // other, listed in the result and killed.
  // proves C5
  itWhere(tier === 'cgroup', "a member in a nested cordon's cgroup (below the tree's) is listed among the leftovers at the root's exit and killed", `the ${tier} tier makes no cgroup`, async () => {
    const t = useTag();
    await ensureDist();
    const cli = join(repoRoot, 'dist', 'cli.js');
    const pidFile = join(tempDir('cordon-nested-'), 'inner.pid');
    // The root starts the inner cordon and exits once its command has
    // written its pid (bounded: 20 s).
    const script =
      `"$NODE" "$CLI" run -- sh -c 'echo $$ > "$PIDFILE"; exec sleep 300' </dev/null >/dev/null 2>&1 &\n` +
      'i=0; while [ ! -s "$PIDFILE" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done; echo READY';
    const proc = spawn('sh', ['-c', script], { env: { ...t.env, NODE: process.execPath, CLI: cli, PIDFILE: pidFile } });
    const result = await within(proc.result, watchdog(30_000), 'the result after the root exited', t.tag);
    const inner = rememberIdentity(Number(readFileSync(pidFile, 'utf8')));
    expect(inner).toBeGreaterThan(0);
    const listed = result.leftovers.map((l) => l.pid);
    expect(listed, `the inner sleep ${inner} among the leftovers ${JSON.stringify(result.leftovers)}`).toContain(inner);
    expect(result.leftoversKept).toBe(false);
    expect(alive(inner), `the inner sleep ${inner} after the result`).toBe(false);
  });
});

