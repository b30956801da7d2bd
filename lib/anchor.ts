// The host side of one anchor: starts the anchor with the command's stdio and
// a control channel, turns what it reports into events for the handlers, and
// carries the few commands the host may give (TERM with a grace, KILL).
//
//   anchor/protocol.ts   the line protocol: anchor lines -> typed events, host commands -> lines (pure)
//   anchor/channel.ts    what both platforms share (reading events, reporting the anchor's exit, the exit hook)
//   anchor/posix.ts      Linux and macOS: posix_spawn, a socket pair, reaping and resuming the anchor
//   anchor/windows.ts    Windows: child_process, two overlapped pipes, the host's Job Object handle
//   anchor/cgroup.ts     the cgroup tier: the host ends the tree through its cgroup when the anchor cannot
import { AnchorChannel as Channel, type AnchorHandlers, type AnchorSpawn } from './anchor/channel.js';
import { PosixAnchorChannel } from './anchor/posix.js';
import { WindowsAnchorChannel } from './anchor/windows.js';

export type { AnchorHandlers, AnchorProcess, AnchorSpawn } from './anchor/channel.js';
export { ANCHOR_WAIT_SLACK_MS } from './anchor/posix.js';

/** One anchor's channel, the platform's kind. */
export type AnchorChannel = Channel;
export const AnchorChannel: new (spec: AnchorSpawn, on: AnchorHandlers) => AnchorChannel =
  process.platform === 'win32' ? WindowsAnchorChannel : PosixAnchorChannel;
