// Cleanup failures (stage 'cleanup'): the tree may not be gone, so none of
// these is ever success.
import { CordonError, type AnchorLostSweep } from './error.js';

/**
 * The anchor's STUCK: members survived SIGKILL for the anchor's stuck delay
 * (5 s: kStuckReportMs in native/protocol.h).
 */
export function cleanupStuck(pids: number[]): CordonError {
  return new CordonError(
    `Tree members survived SIGKILL for 5 s (pids ${pids.join(', ')}); they may be in uninterruptible sleep. ` +
      'The anchor keeps trying; inspect them with ps.',
    { code: 'ERR_CORDON_CLEANUP', stage: 'cleanup' },
  );
}

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
