// When the anchor itself dies (SIGKILLed, OOM-killed) before its tree is
// quiescent: the result is a cleanup failure (ERR_CORDON_ANCHOR_LOST, C6),
// and where the tier holds a second identity for the tree (the cgroup tier's
// cgroup; on Windows the host's job handle) the host ends the tree through it
// (capabilities().guarantees.survivesAnchorDeath). Elsewhere the members are
// orphaned out of reach, which capabilities() says.
//
// And the cgroup tier's mechanism, observed from outside: the command is born
// in a cgroup of its own, and the cgroup is gone once the tree is.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawn, type CordonError } from '../lib/index.js';
import { rejected } from './helpers/assert.js';
import { cgroupMount, cgroupOf } from './helpers/cgroup.js';
import { fixture, repoRoot } from './helpers/fixtures.js';
import { ensureDist, startCli } from './helpers/host.js';
import { alive, killPids, rememberIdentity, useTag, waitFor, within } from './helpers/procs.js';
import { tempDir } from './helpers/registry.js';
import { watchdog } from './helpers/time.js';
import { caps, itWhere, tier } from './helpers/tier.js';
import { onlyWhere } from './helpers/requirements.js';
import { collect, outcome, waitPidsGone } from './helpers/trees.js';

describe(`the anchor killed, ${tier} tier`, () => {
  it('the result is ERR_CORDON_ANCHOR_LOST; the tree ends too where the tier says so', async () => {
    const t = useTag();
    const proc = spawn(fixture('tree.sh'), [], { env: t.env });
    const { all } = await collect(proc, t.tag);
    const anchor = proc.anchorPid!;
    // The test's own child, killed by pid: the anchor, not the tree.
    killPids([anchor]);
    const how = await outcome(proc.result, 10_000, 'the result after the anchor was killed', t.tag);
    expect(rejected<CordonError>(how, 'the result resolved').code).toBe('ERR_CORDON_ANCHOR_LOST');
    if (caps.guarantees.survivesAnchorDeath) {
      await waitPidsGone(all, 1000, 'every member to be killed through the tier\'s second handle', t.tag);
    } else {
      expect(caps.guarantees.survivesAnchorDeath, `the ${tier} tier says it cannot end a tree whose anchor died`).toBe(false);
      for (const pid of all) t.notPromised(pid);
    }
  });
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
    await waitPidsGone([anchor, proc.pid!], 5000, 'the anchor and the command to be gone', t.tag);
  });

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

