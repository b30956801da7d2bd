// A tree as the facade (process.ts) receives it: what runs, with which
// options, where its output goes, and how its anchor is reached. There are
// two ways to get one, and the facade does not know which it got: launch.ts
// plans a launch and starts an anchor for it; adopt.ts takes over a leased
// tree whose host is gone. Either way `connect()` gives the channel that
// reports to the facade's handlers.
import type { AnchorChannel, AnchorHandlers } from './anchor.js';
import type { LimitsPlan } from './limits.js';
import type { ConfinedResult } from './confine.js';
import type { NormalizedOptions, StdioOption } from './options.js';
import type { Tier } from './tiers.js';

export interface AnchoredTree {
  /** The command as given (shown in results and messages), and its arguments. */
  command: string;
  args: string[];
  /** The executable a launch failure names (the resolved path; an adopted tree: its command). */
  executable: string;
  /** The options the facade acts on: cwd, grace, interrupt grace, waitDelay, leftovers, timeout, signal, stop hook, log, uid, gid. */
  opts: NormalizedOptions;
  /** The tier asked for (the anchor's READY names the one in force). */
  tier: Tier;
  /** Where stdout and stderr go as the caller asked (with a log, a copy of what goes to it). */
  outputs: { stdout: StdioOption; stderr: StdioOption };
  /** An open descriptor of the log the host appends the output to (the facade owns it from here), if any. */
  logFd: number | undefined;
  /** The limits asked for and whether the tier enforces them here; undefined: none asked. */
  limits: LimitsPlan | undefined;
  /** A leased tree: the lease in ms, and the token a new host adopts it with (undefined: an adopted tree's is not known here). */
  lease: { ms: number; token: string | undefined } | undefined;
  /** With `confine`: how the tree is confined (result.confined), its temp dir removed once its anchor is gone. */
  confined?: ConfinedResult | undefined;
  /** Epoch milliseconds (an adopted tree: when its first host started it). */
  startedAt: number;
  /** This host did not start the tree: it adopted it (stdin is null, a terminal's tree's: its input). */
  adopted: boolean;
  /** Starts the anchor, or binds the adopted one; its events go to `on`. Called once. */
  connect(on: AnchorHandlers): ConnectedAnchor;
}

export interface ConnectedAnchor {
  channel: AnchorChannel;
  /** A leased tree's id in registry.adoptable() (`<anchor pid>-<16 hex>`). */
  leaseId: string | undefined;
}
