// Cleanup failures (stage 'cleanup'): the tree may not be gone, so none of
// these is ever success.
import { CordonError, type AnchorLostSweep } from './error.js';

/**
 * The anchor's STUCK: members survived SIGKILL for the anchor's stuck delay
 * (5 s: kStuckReportMs in native/protocol.h), each with the state the
 * anchor's listing read ('D': a wait in the kernel that no signal ends, such
 * as a write held by a filesystem's journal or a hung mount; 'R'/'S': alive
 * and running, which a SIGKILL that landed would not leave; '?': not read).
 */
export function cleanupStuck(pids: number[], states: string[] = []): CordonError {
  const each = pids.map((pid, i) => `${pid} (${STATE_WORDS[states[i] ?? '?'] ?? `state ${states[i]}`})`).join(', ');
  const why = states.includes('D')
    ? 'a process in uninterruptible sleep ends only when the kernel call it waits in returns (a hung mount or device, a stalled disk)'
    : 'they may be in uninterruptible sleep, or forking faster than they are killed';
  return new CordonError(
    `Tree members survived SIGKILL for 5 s: ${each}; ${why}. The anchor keeps trying; inspect them with ps -o pid,stat,wchan.`,
    { code: 'ERR_CORDON_CLEANUP', stage: 'cleanup' },
  );
}

const STATE_WORDS: Record<string, string> = {
  D: 'uninterruptible sleep',
  R: 'running',
  S: 'sleeping',
  T: 'stopped',
  t: 'stopped by a tracer',
  Z: 'a zombie',
  '?': 'state not read',
};

/**
 * The anchor did not finish stopping the tree within the grace plus
 * ANCHOR_WAIT_SLACK_MS (7 s, lib/anchor/posix.ts).
 */
export function anchorUnresponsive(anchorPid: number | undefined, waitedMs: number): CordonError {
  return new CordonError(
    `The anchor of this tree (pid ${anchorPid}) did not finish stopping it within ${waitedMs} ms ` +
      '(the grace plus 7 s; a member may have stopped it with SIGSTOP, or it is stuck): quiescence cannot be proven ' +
      `and members may still run. cordon keeps resuming the anchor; inspect the tree with ps.`,
    { code: 'ERR_CORDON_CLEANUP', stage: 'cleanup' },
  );
}

/**
 * The anchor ended before it reported quiescence; `sweep`: what the host then
 * ended of the tree by the means it still had (lib/anchor/lost.ts).
 */
export function anchorLost(code: number | null, signal: NodeJS.Signals | null, error?: Error, sweep?: AnchorLostSweep): CordonError {
  const how = error ? error.message : signal ? `signal ${signal}` : `code ${code}`;
  let after = 'its members may still run.';
  if (sweep?.by === 'cgroup') after = 'the host killed what was left through its cgroup (cgroup.kill).';
  else if (sweep?.by === 'marker') {
    const swept = sweep.swept.length > 0 ? `killed ${sweep.swept.length} member(s) (pids ${sweep.swept.join(', ')})` : 'found no member left';
    const unreached = sweep.unreached.length > 0 ? `; could not end pids ${sweep.unreached.join(', ')}` : '';
    after =
      `the host swept what it could still tell is the tree's (its marker, and its session in the process-group tier) and ${swept}${unreached}. ` +
      'A member that left the session and scrubbed the marker from its environment (env -i) cannot be told and may still run.';
  }
  const err = new CordonError(`The anchor of this tree ended unexpectedly (${how}) before the tree was quiescent; ${after}`, {
    code: 'ERR_CORDON_ANCHOR_LOST',
    cause: error,
    stage: 'cleanup',
  });
  if (sweep) err.anchorLost = sweep;
  return err;
}
