// The platform's anchor: the one place that picks, per platform, how an
// anchor is started, where a leased one is found and how one is adopted.
// There are two ways to get an anchor, and the facade (process.ts) does not
// know which one it got: launch.ts starts one (startAnchor), adopt.ts
// adopts one a gone host leased (adoptAnchor). Both give an AnchorChannel.
//
//   anchor/protocol.ts          the line protocols: the control channel's and the adoption endpoint's (pure)
//   anchor/channel.ts           what every channel shares (reading events, reporting the anchor's exit, the exit hook)
//   anchor/posix.ts             Linux and macOS: posix_spawn, a socket pair, reaping and resuming the anchor
//   anchor/posix-reap.ts        reaping the host's anchors by pid (each is its unreaped child until then)
//   anchor/warm-pool.ts         anchors started ahead of need: the pool (keys, depth, retirement) both platforms share
//   anchor/warm.ts              Linux: anchors started ahead of need, each handed one command (LAUNCH)
//   anchor/windows-warm.ts      Windows: the same, the command's pipes made by the addon
//   anchor/windows.ts           Windows: child_process, two overlapped pipes, the host's Job Object handle
//   anchor/adopted.ts           an adopted anchor: the endpoint connection is the control channel (every platform)
//   anchor/posix-endpoint.ts    a leased anchor's Unix socket (the addon's bounded request)
//   anchor/windows-endpoint.ts  a leased anchor's named pipe
//   anchor/lease-dir.ts         the per-user directory of lease records and POSIX endpoints (private; a fallback where another user holds its place)
//   anchor/cgroup.ts            the cgroup tier: the host ends the tree through its cgroup when the anchor cannot
//   anchor/lost.ts              the subreaper and process-group tiers: the host's sweep of a tree whose anchor died
//   anchor/exec-size.ts         E2BIG, checked before the anchor is started
import { join } from 'node:path';
import { AdoptedAnchorChannel, type AdoptedAnchor } from './anchor/adopted.js';
import type { AnchorChannel, AnchorHandlers, AnchorSpawn } from './anchor/channel.js';
import { PosixAnchorChannel } from './anchor/posix.js';
import { posixAdopt, posixLeaseInfo } from './anchor/posix-endpoint.js';
import { WindowsAnchorChannel } from './anchor/windows.js';
import { adoptWindowsTree, leaseEndpoint, leaseInfo } from './anchor/windows-endpoint.js';
import { posixLeaseDir, windowsLeaseDir } from './anchor/lease-dir.js';

export type { AdoptedAnchor } from './anchor/adopted.js';
export type { AnchorChannel, AnchorHandlers, AnchorProcess, AnchorSpawn, LimitsEvent, UsageEvent } from './anchor/channel.js';
export { overriding } from './anchor/channel.js';
export { ANCHOR_WAIT_SLACK_MS } from './anchor/posix.js';
export { disableWarm } from './anchor/warm-pool.js';

/** What a leased anchor answers to INFO. */
export interface LeaseInfo {
  /** How long the lease has left (ms); null while a host is attached (its clock is not running). */
  leftMs: number | null;
  /** Whether the tree's root still runs (false: its result waits for an adopter). */
  rootRunning: boolean;
}

/** What differs between platforms in getting an anchor. */
interface AnchorPlatform {
  start(spec: AnchorSpawn, on: AnchorHandlers): AnchorChannel;
  /** The per-user directory of lease records (and, POSIX, endpoints): made private, or a typed error. */
  leaseDir(): string;
  /** A leased tree's endpoint, derived from the directory and the tree's id (never read from a record). */
  endpoint(dir: string, id: string): string;
  /**
   * INFO, bounded by `timeoutMs`. `anchorPid`, the record's: on Windows the endpoint's server must be that
   * process, checked before anything is written (a pipe name can be taken; a POSIX endpoint is a socket in
   * the private lease directory).
   */
  leaseInfo(endpoint: string, anchorPid: number, timeoutMs: number): Promise<LeaseInfo>;
  /** ADOPT <token>, bounded by `timeoutMs`: ERR_CORDON_ADOPT_DENIED with the anchor's `why`, or another error. */
  adopt(endpoint: string, anchorPid: number, token: string, timeoutMs: number): Promise<AdoptedAnchor>;
}

const posix: AnchorPlatform = {
  start: (spec, on) => new PosixAnchorChannel(spec, on),
  leaseDir: posixLeaseDir,
  endpoint: (dir, id) => join(dir, `${id}.sock`),
  leaseInfo: (endpoint, _anchorPid, timeoutMs) => posixLeaseInfo(endpoint, timeoutMs),
  adopt: (endpoint, _anchorPid, token, timeoutMs) => posixAdopt(endpoint, token, timeoutMs),
};

const windows: AnchorPlatform = {
  start: (spec, on) => new WindowsAnchorChannel(spec, on),
  leaseDir: windowsLeaseDir,
  endpoint: (_dir, id) => leaseEndpoint(id),
  leaseInfo,
  adopt: adoptWindowsTree,
};

/** This platform's anchors. */
export const anchors: AnchorPlatform = process.platform === 'win32' ? windows : posix;

/** Starts an anchor for a planned launch (launch.ts); it reports to `on`. */
export function startAnchor(spec: AnchorSpawn, on: AnchorHandlers): AnchorChannel {
  return anchors.start(spec, on);
}

/** The channel of an adopted anchor (`anchorPid` from the tree's record); it reports to `on`, the replay first. */
export function adoptAnchor(adopted: AdoptedAnchor, anchorPid: number, on: AnchorHandlers, exitGrace: number): AnchorChannel {
  return new AdoptedAnchorChannel(adopted, anchorPid, on, exitGrace);
}
