// CONTRACT C2: after the root (or a leftover) is gone and its pid is reused by
// an unrelated process, terminate() and kill() on the old handle still reach
// the remaining descendants and never signal the unrelated process: nothing is
// signalled through a bare, possibly recycled number.
//
// The reuse is made real: an unrelated, tagged `sleep 300` started by the test
// (plain child_process) is put on the freed pid (ns_last_pid when writable,
// else by cycling pids; see helpers/pids.ts).
import { describe, expect, it, onTestFinished } from 'vitest';
import { spawn, type ContainedProcess } from '../lib/index.js';
import { occupyPid, PidTakenError, stillOccupied, type Occupant } from './helpers/pids.js';
import { alive, killPids, readStat, sameAlive, useTag, waitFor, within, type Tagged } from './helpers/procs.js';
import { caps, tier } from './helpers/tier.js';
import { collectResult } from './helpers/trees.js';

type Method = 'terminate' | 'kill';
const other = (m: Method): Method => (m === 'terminate' ? 'kill' : 'terminate');

/** Puts an unrelated process on `pid` and registers its cleanup (by pid). */
async function occupy(pid: number, t: Tagged, anchorPid: number): Promise<Occupant> {
  const occ = await within(occupyPid(pid, { ...t.env, CORDON_TEST_UNRELATED: '1' }, 50_000), 55_000, `an unrelated process on pid ${pid}`, t.tag);
  // Registered after useTag: runs before its leak check.
  onTestFinished(() => killPids([occ.pid, ...occ.helpers]));
  const st = readStat(occ.pid)!;
  expect(st.ppid, 'the occupant is no child of the anchor').not.toBe(anchorPid);
  return occ;
}

/**
 * Sets a scenario up (a tree, a freed pid) and puts the occupant on that pid.
 * Another process on the machine may take the freed pid first (the pid
 * counter is shared): then the tree is ended and the scenario starts over.
 */
async function withOccupant<S extends { proc: ContainedProcess; target: number }>(
  t: Tagged,
  setup: () => Promise<S>,
): Promise<S & { occ: Occupant }> {
  for (let attempt = 1; ; attempt++) {
    const s = await setup();
    try {
      return { ...s, occ: await occupy(s.target, t, s.proc.anchorPid!) };
    } catch (err) {
      if (!(err instanceof PidTakenError) || attempt >= 5) throw err;
      await within(s.proc.kill(), 10_000, 'kill() of an abandoned attempt', t.tag);
    }
  }
}

async function endOccupant(occ: Occupant): Promise<void> {
  killPids([occ.pid, ...occ.helpers]);
  await waitFor(() => !sameAlive(occ.pid, occ.start), { timeout: 2000, what: `occupant ${occ.pid} to end`, pids: [occ.pid] });
}

// The tier is the project's (CORDON_TIER, see vitest.config.ts).
describe(`pid reuse (C2), ${tier} tier`, () => {
  for (const method of ['terminate', 'kill'] as Method[]) {
    it(`${method}() after the root's pid was reused reaches the leftover, never the new process`, { timeout: 60_000 }, async () => {
      const t = useTag();
      let sStart = '';
      const { proc, s, target: root, occ } = await withOccupant(t, async () => {
        const proc = spawn('sh', ['-c', 'sleep 300 >/dev/null 2>&1 & echo "PID s $!"; echo "PID root $$"'], {
          env: t.env,
          leftovers: 'keep',
          tier,
        });
        const { pids, result } = await collectResult(proc, t.tag, { ready: /^PID root \d+$/m });
        const { s, root } = pids as { s: number; root: number };
        expect(result.leftoversKept).toBe(true);
        expect(alive(s)).toBe(true);
        sStart = readStat(s)!.start;
        await waitFor(() => readStat(root) === undefined, { timeout: 5000, what: `root pid ${root} to be freed`, pids: [root] });
        return { proc, s, target: root };
      });
      expect(stillOccupied(occ)).toBe(true);

      await within(proc[method](), 10_000, `${method}() on the old handle`, t.tag);
      expect(sameAlive(s, sStart), `leftover ${s} after ${method}()`).toBe(false);
      expect(stillOccupied(occ), `the unrelated process on the root's old pid ${root} (${occ.how})`).toBe(true);
      // Repeated cleanup on the same handle is idempotent and still harmless.
      await within(proc[other(method)](), 10_000, `${other(method)}() after ${method}()`, t.tag);
      expect(stillOccupied(occ), `the unrelated process after ${other(method)}()`).toBe(true);
      await endOccupant(occ);
    });
  }

  // A leftover's pid is freed only if someone reaps it: the anchor in a tier
  // that reaps orphans. Elsewhere it goes to init, which on some hosts (this
  // one's pid 1 included) never reaps it.
  if (caps.guarantees.reapsOrphans) {
    for (const method of ['terminate', 'kill'] as Method[]) {
      it(`${method}() after a leftover exited and its pid was reused never signals the new process`, { timeout: 60_000 }, async () => {
        const t = useTag();
        let sStart = '';
        const { proc, s, target: b, occ } = await withOccupant(t, async () => {
          const proc = spawn(
            'sh',
            ['-c', 'sleep 300 >/dev/null 2>&1 & echo "PID s $!"; sleep 1 >/dev/null 2>&1 & echo "PID b $!"; echo "PID root $$"'],
            { env: t.env, leftovers: 'keep', tier },
          );
          const { pids, result } = await collectResult(proc, t.tag, { ready: /^PID root \d+$/m });
          const { s, b } = pids as { s: number; b: number };
          expect(result.leftoversKept).toBe(true);
          expect(result.leftovers.map((l) => l.pid).sort()).toEqual([s, b].sort());
          sStart = readStat(s)!.start;
          // b exits on its own and is reaped (by the anchor): its pid is free.
          await waitFor(() => readStat(b) === undefined, { timeout: 5000, what: `leftover ${b} to exit and be reaped`, pids: [b] });
          return { proc, s, target: b };
        });
        expect(stillOccupied(occ)).toBe(true);

        await within(proc[method](), 10_000, `${method}() on the old handle`, t.tag);
        expect(sameAlive(s, sStart), `leftover ${s} after ${method}()`).toBe(false);
        expect(stillOccupied(occ), `the unrelated process on the leftover's old pid ${b} (${occ.how})`).toBe(true);
        await within(proc[other(method)](), 10_000, `${other(method)}() after ${method}()`, t.tag);
        expect(stillOccupied(occ)).toBe(true);
        await endOccupant(occ);
      });
    }
  }
});
