// A lost anchor (SIGKILLed by a member, by a careless kill of every process named like it, the
// OOM killer) before its tree was quiescent: the host sweeps what it can
// still tell is the tree's and kills it, so the tree does not live on
// orphaned. The cgroup tier has its cgroup for that (./cgroup.ts,
// endCgroup). The subreaper and process-group tiers have the tree's marker
// (CORDON_TREE in every member's environment, which the anchor sent the host
// as MARKER) and the process-group tier also the session its anchor led: the
// dead anchor is kept an unreaped zombie of the host until this sweep is
// done (./posix-reap.ts, watchExit's hold), so the session id is still the
// tree's and nobody else can have made a session of it. Every match is
// pinned with a pidfd and checked again through it before its SIGKILL
// (native/linux/lost_tree.h): never a recycled pid. What neither finds (a
// member that left the session and scrubbed its environment, env -i) is not
// known to the host: the result says it may still run.
import { debug } from '../debug.js';
import { posixBinding } from '../native.js';
import type { AnchorLostSweep } from '../errors.js';

/** The tree's marker as the anchor sent it (MARKER): never part of a result. */
export interface TreeMarker {
  token: string;
  /** The session the anchor led (the process-group tier), or 0. */
  session: number;
}

/** The host's sweep of a tree whose anchor died (see above); never throws. */
export function sweepLostTree(marker: TreeMarker | undefined): AnchorLostSweep {
  const started = Date.now();
  const sweep = posixBinding().sweepLostTree;
  if (!marker || !sweep) return { by: 'none', swept: [], unreached: [], ms: 0 };
  // The token is <anchor pid>.<anchor start>.<secret>: every member started after the anchor.
  const since = Number(marker.token.split('.')[1] ?? 0);
  try {
    const r = sweep(marker.token, marker.session, since);
    debug('anchor lost: swept %d member(s) in %d round(s), %d ms; unreached %o', r.killed.length, r.rounds, r.elapsedMs, r.unreached);
    return { by: 'marker', swept: r.killed, unreached: r.unreached, ms: Date.now() - started };
  } catch (err) {
    debug('anchor lost: no sweep: %s', (err as Error).message);
    return { by: 'none', swept: [], unreached: [], ms: Date.now() - started };
  }
}
