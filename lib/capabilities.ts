// C11: what this host's tier guarantees, reported and never assumed. What each
// tier guarantees is its row in tiers.ts; the README's guarantee table is
// generated from the same rows and checked against the README
// (test/capabilities.test.ts).
import { readFileSync } from 'node:fs';
import { limitSupport, type LimitSupport } from './anchor/cgroup.js';
import { noTier, tierUnavailable } from './errors.js';
import { probe } from './native.js';
import { availableTiers, describeTier, requestedTier, tierSpec, type Guarantees, type Tier } from './tiers.js';

export type { EscapeeCatch, Guarantees } from './tiers.js';

export interface Capabilities {
  platform: NodeJS.Platform;
  /** The tier spawn() uses by default on this host (or the one asked for). */
  tier: Tier;
  /** Every tier this host can run. */
  tiers: Tier[];
  pidfd: boolean;
  guarantees: Guarantees;
  /** Why a guarantee is weaker than the strongest tier's, in words. */
  notes: string[];
}

function tiersHere(): Tier[] {
  return availableTiers(probe);
}

/** The tier spawn() uses when none is asked for: CORDON_TIER where this host has it, else the strongest. */
export function defaultTier(): Tier {
  const tiers = tiersHere();
  const fromEnv = tiers.find((t) => t === requestedTier());
  if (fromEnv !== undefined) return fromEnv;
  if (tiers.length === 0) {
    throw noTier(process.platform);
  }
  return tiers[0]!;
}

/**
 * What a tier guarantees on a platform: a pure function, so the README's
 * table is generated from the same source as capabilities().
 */
export function tierGuarantees(
  platform: NodeJS.Platform,
  tier: Tier,
  pidfd: boolean,
  capSysAdmin = true,
  limits: LimitSupport = ALL_LIMITS,
  landlock = README_LANDLOCK,
): { guarantees: Guarantees; notes: string[] } {
  return describeTier(tier, { platform, pidfd, capSysAdmin, limitSupport: limits, landlock: platform === 'linux' ? landlock : 0 });
}

/** The README's assumption: a kernel with Landlock's network rules and scoping (6.12+: ABI 6). */
const README_LANDLOCK = 6;

/** The README's assumption: a host whose cgroup controllers cordon may use. */
const ALL_LIMITS: LimitSupport = { memory: 'v2', processes: 'v2', cpu: 'v2' };
const NO_LIMITS: LimitSupport = { memory: null, processes: null, cpu: null };

/** Where this host's cgroup tier can enforce each limit (none off Linux). */
export function hostLimitSupport(): LimitSupport {
  return process.platform === 'linux' ? limitSupport() : NO_LIMITS;
}

/**
 * Where `tier` enforces each limit on this host: a tier whose limits are
 * 'enforced' (the cgroup tier) where the controllers are there
 * (hostLimitSupport), no other. A tier that sets them unclaimed (the
 * job-object tier, with 'best-effort' only: their enforcement by Windows has
 * never been observed by cordon's tests, whose Windows lane runs under Wine,
 * which takes them and enforces none) enforces none.
 */
export function tierLimitSupport(tier: Tier): LimitSupport {
  return tierSpec(tier)?.limits === 'enforced' ? hostLimitSupport() : NO_LIMITS;
}

/** Linux: whether this process has CAP_SYS_ADMIN (bit 21 of CapEff), which a cgroup namespace needs. */
export function hasCapSysAdmin(): boolean {
  try {
    const m = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    return m !== null && (BigInt(`0x${m[1]}`) & (1n << 21n)) !== 0n;
  } catch {
    return false;
  }
}

/**
 * What a result can claim about the tree (C11): 'complete' where the tier
 * catches every descendant (cgroup, subreaper, job-object), 'partial' where
 * it cannot see what left its reach (process-group, catchesEscapees
 * 'marked': members that left the process group unseen and do not carry the
 * tree's marker in a readable environment, e.g. a daemon started with
 * `env -i`; so even a tree whose every member was found and ended is
 * 'partial': what the tier cannot see it cannot rule out; process-handle:
 * every descendant). Derived from the same guarantees capabilities() reports.
 */
export type Coverage = 'complete' | 'partial';

export function coverageOf(tier: Tier): Coverage {
  if (tierSpec(tier) === undefined) return 'partial';
  return tierGuarantees(processTablePlatform(), tier, false).guarantees.catchesEscapees === 'always' ? 'complete' : 'partial';
}

/**
 * The platform whose process table the addon reads: macOS's for the darwin
 * build on Linux, on the model of XNU's process table (test/xnu-model), so
 * that what its tests are told is what a Mac tells; else this platform.
 */
export function processTablePlatform(): NodeJS.Platform {
  return process.platform === 'linux' && probe().xnu === true ? 'darwin' : process.platform;
}

export function capabilities(options: { tier?: Tier } = {}): Capabilities {
  const tiers = tiersHere();
  const tier = options.tier ?? defaultTier();
  if (!tiers.includes(tier)) {
    throw tierUnavailable(tier, tiers);
  }
  const pidfd = process.platform === 'linux' && probe().pidfd;
  const described = tierGuarantees(processTablePlatform(), tier, pidfd, process.platform === 'linux' && hasCapSysAdmin(), hostLimitSupport(), process.platform === 'linux' ? (probe().landlock ?? 0) : 0);
  tierSpec(tier)!.amend?.(described, probe());
  return { platform: process.platform, tier, tiers, pidfd, ...described };
}
