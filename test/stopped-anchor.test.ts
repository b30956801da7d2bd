// Issue 10, part 3: a member can stop the anchor (`kill -STOP $PPID`: the
// anchor is the root's parent). The host keeps its own anchor running (it is
// the host's unreaped child, its pid pinned) whenever it asks it to act and
// while it waits, and every wait on an anchor is bounded by the grace plus
// ANCHOR_WAIT_SLACK_MS: past it the host ends the tree by the means it still
// has (the cgroup tier: cgroup.kill) and reports ERR_CORDON_CLEANUP wherever
// quiescence is not proven. Observed from outside: the anchor's state in
// /proc, and the tagged processes.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { ANCHOR_WAIT_SLACK_MS } from '../lib/anchor.js';
import { spawn, type CordonError } from '../lib/index.js';
import { rejected } from './helpers/assert.js';
import { cgroupWritable, freeze, frozen } from './helpers/cgroup.js';
import { ensureDist, startHost } from './helpers/host.js';
import { alive, findTagged, readStat, useTag, waitFor, waitGone, within } from './helpers/procs.js';
import { caps, itWhere, tier } from './helpers/tier.js';
import { collect, outcome } from './helpers/trees.js';

/**
 * The test resumes and SIGKILLs the anchor itself by pid, whatever cordon did:
 * only while that pid is still a process carrying the test's tag (once cordon
 * has reaped the anchor, the number may belong to anyone).
 */
function killAnchor(pid: number, tag: string): void {
  for (const sig of ['SIGCONT', 'SIGKILL'] as const) {
    if (!findTagged(tag).some((p) => p.pid === pid)) return;
    try {
      process.kill(pid, sig);
    } catch {
      // gone
    }
  }
}

function releaseAnchorAfter(pid: number, tag: string): void {
  onTestFinished(() => killAnchor(pid, tag));
}

// The shell stops its parent only while that parent is still the anchor it
// was started by (its parent, as ps reads it): a dead anchor's pid is never signalled.
// `go` waits for the file $STOP_FILE, which the test creates once the anchor
// has reported READY (spawn's `started`).
const STOP_PARENT =
  'a=$PPID; stop() { [ "$(ps -o ppid= -p $$ | tr -d " ")" = "$a" ] && kill -STOP "$a"; }; ' +
  'go() { while [ ! -e "$STOP_FILE" ]; do sleep 0.02; done; }';

/** A tag whose environment names a fresh STOP_FILE, and the function that creates it. */
function stopTag() {
  const dir = mkdtempSync(join(tmpdir(), 'cordon-stop-'));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'stop');
  return { t: useTag({ STOP_FILE: file }), go: () => writeFileSync(file, '') };
}

/** Lets the tree stop its anchor (`go`), then waits (bounded) until the anchor is stopped. */
async function stopAnchor(anchor: number, go: () => void, tag: string): Promise<void> {
  go();
  await waitFor(() => readStat(anchor)?.state === 'T', { timeout: 10_000, what: `the anchor ${anchor} to be stopped`, watch: tag });
}

/**
 * `sh -c <script>` under a stopTag(), its anchor released by the test at the
 * end, collected; then (stopAnchor) its anchor is stopped.
 */
async function startStopping(script: string) {
  const { t, go } = stopTag();
  const proc = spawn('sh', ['-c', script], { env: t.env });
  const anchor = proc.anchorPid!;
  releaseAnchorAfter(anchor, t.tag);
  const { all } = await collect(proc, t.tag);
  await stopAnchor(anchor, go, t.tag);
  return { t, proc, anchor, all };
}

describe(`a member stops the anchor, ${tier} tier`, () => {
  beforeAll(async () => {
    await ensureDist();
  });

  // proves C8, C3
  it("a host that exits normally resumes its stopped anchor: the tree is gone within 1 s (C8)", async () => {
    const { t, go } = stopTag();
    const host = startHost(['exit', '--trees', 'stopper'], t.env);
    await host.ready();
    const pids = host.out.pids();
    const anchor = pids['stopper.anchor']!;
    const root = pids['stopper.root']!;
    releaseAnchorAfter(anchor, t.tag);
    // Only now (the anchor has reported READY): the root stops its anchor.
    await stopAnchor(anchor, go, t.tag);
    host.go();
    const exit = await within(host.exited, 10_000, 'the host to exit', t.tag);
    expect(exit.code, host.err.text).toBe(0);
    // The exit listener's TERM alone would wait in the stopped anchor's socket forever.
    await waitFor(() => !alive(root), { timeout: 1000, what: 'the root to be gone after the host exited', watch: [t.tag, root] });
    await waitFor(() => !alive(anchor), { timeout: 2000, what: 'the anchor to exit', watch: [t.tag, anchor] });
    await waitGone(t, 1000);
  });

  // proves C3
  it('once (kill -STOP $PPID): terminate() still resolves, and every member is gone', async () => {
    const { t, proc, all } = await startStopping(`${STOP_PARENT}; sleep 300 & echo "PID bg $!"; echo READY; go; stop; wait`);
    // Bounded well above what it takes (the anchor is resumed at once): a
    // loaded machine's wish, not a promise.
    const how = await outcome(proc.terminate({ grace: 500 }), 500 + ANCHOR_WAIT_SLACK_MS + 5000, 'terminate() of a tree whose anchor was stopped', t.tag);
    expect(how.ok, `terminate() resolved: ${how.ok ? '' : (how.error as Error).message}`).toBe(true);
    for (const pid of all) expect(alive(pid), `member ${pid}`).toBe(false);
    await waitGone(t, 2000);
  });

  // proves C3, C6
  it('again and again: terminate() settles within its bound, ERR_CORDON_CLEANUP if not proven, and the cgroup tier ends the tree', async () => {
    // A root that ignores SIGTERM and stops its anchor every 20 ms.
    const { t, proc, all } = await startStopping(`${STOP_PARENT}; trap "" TERM; sleep 300 & echo "PID bg $!"; echo READY; go; while :; do stop; sleep 0.02; done`);
    const grace = 500;
    // The bound: grace + ANCHOR_WAIT_SLACK_MS, + 2 s in the cgroup tier (the
    // anchor's time to report after cgroup.kill); + 5 s for a loaded machine.
    const bound = grace + ANCHOR_WAIT_SLACK_MS + 2000;
    const startedAt = Date.now();
    const how = await outcome(proc.terminate({ grace }), bound + 5000, 'terminate() of a tree whose anchor is stopped again and again', t.tag);
    const took = Date.now() - startedAt;
    if (!how.ok) {
      const error = how.error as CordonError;
      expect(error.code, error.message).toBe('ERR_CORDON_CLEANUP');
      expect(error.isCleanupFailure).toBe(true);
      expect(took, 'a cleanup failure comes no earlier than the bound (ms)').toBeGreaterThanOrEqual(grace + ANCHOR_WAIT_SLACK_MS - 50);
    }
    if (how.ok || tier === 'cgroup') {
      // Resolved means quiescent; the cgroup tier ends the tree either way.
      await waitFor(() => all.every((pid) => !alive(pid)), { timeout: 2000, what: 'every member to be gone', watch: [t.tag, ...all] });
    }
    if (tier === 'cgroup') await waitGone(t, 3000);
  });

  // proves C3, C6
  itWhere(
    process.platform === 'linux' && cgroupWritable(),
    'an anchor that cannot run at all: past grace + ANCHOR_WAIT_SLACK_MS, ERR_CORDON_CLEANUP; the cgroup tier ends the tree itself',
    'freezing the anchor needs a writable cgroup v2',
    async () => {
      const t = useTag();
      // A root that ignores SIGTERM, and a child: only a forced kill ends them.
      const proc = spawn('sh', ['-c', 'trap "" TERM; sleep 300 & echo "PID bg $!"; echo READY; wait'], { env: t.env });
      const anchor = proc.anchorPid!;
      const { all } = await collect(proc, t.tag);
      // The anchor, frozen by the cgroup freezer, does not run whatever SIGCONT
      // it gets (a member re-stopping it faster than it can act, for good).
      const ice = freeze(anchor);
      onTestFinished(async () => {
        killAnchor(anchor, t.tag); // SIGKILL ends a frozen process
        await ice.release();
      });
      await waitFor(() => frozen(anchor), { timeout: 5000, what: `the anchor ${anchor} to be frozen`, watch: t.tag });
      const grace = 300;
      const startedAt = Date.now();
      // The bound, + 2 s (cgroup tier: the anchor's chance to report after
      // cgroup.kill), + 5 s for a loaded machine.
      const how = await outcome(proc.terminate({ grace }), grace + ANCHOR_WAIT_SLACK_MS + 2000 + 5000, 'terminate() of a tree whose anchor is frozen', t.tag);
      const took = Date.now() - startedAt;
      const error = rejected<CordonError>(how, 'terminate() resolved, though nothing proves quiescence');
      expect(error.code, error.message).toBe('ERR_CORDON_CLEANUP');
      expect(took, 'not before the bound (ms)').toBeGreaterThanOrEqual(grace + ANCHOR_WAIT_SLACK_MS - 50);
      const result = await outcome(proc.result, 10_000, 'the result', t.tag);
      expect(rejected<CordonError>(result).code).toBe('ERR_CORDON_CLEANUP');
      if (tier === 'cgroup') {
        // The host's own means: cgroup.kill ended every member, then the
        // anchor, which never reported, was SIGKILLed and reaped.
        await waitFor(() => all.every((pid) => !alive(pid)), { timeout: 2000, what: 'every member to be gone', watch: [t.tag, ...all] });
        await waitFor(() => !alive(anchor) && readStat(anchor) === undefined, { timeout: 5000, what: 'the anchor to be killed and reaped', watch: t.tag });
        await waitGone(t, 2000);
      } else {
        // No second handle on the tree here: the members still run, and
        // capabilities() says the tier cannot end a tree without its anchor.
        expect(caps.guarantees.survivesAnchorDeath, `the ${tier} tier has no handle on the tree but its anchor`).toBe(false);
        for (const pid of all) {
          expect(alive(pid), `member ${pid} (the host has no means left)`).toBe(true);
          t.notPromised(pid);
        }
      }
    },
  );
});
