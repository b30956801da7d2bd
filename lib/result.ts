// A tree's result (C6: classified, never laundered): its types, and how it is
// built from what the anchor reported (facts.ts) and how the facade ended it.
// Pure.
import type { LimitsEvent, UsageEvent } from './anchor.js';
import type { Coverage } from './capabilities.js';
import type { Limits, LimitsPlan } from './limits.js';
import type { ConfinedResult } from './confine.js';
import type { Tier } from './tiers.js';

/** Why the root ended; 'limit': a resource limit of the tree ended it (see `limit`). */
export type Reason = 'exit' | 'signal' | 'canceled' | 'timeout' | 'limit';

/** A resource limit by name. */
export type LimitName = 'memory' | 'processes' | 'cpu';

/** A limit a tree can run into: the memory limit's OOM kill, or the process limit's refused forks. */
export type LimitHit = Extract<LimitName, 'memory' | 'processes'>;

/** What the tree used, as the kernel accounted it; null where this tier or host does not measure it (never 0 for "unknown"). */
export interface TreeUsage {
  /** CPU time of every member together, user and system, in milliseconds (the cgroup tier; the job-object tier, not under Wine). */
  cpuMs: number | null;
  /** The highest memory charge of the tree, in bytes (the cgroup tier with a memory limit; the job-object tier: the job's peak committed memory, not under Wine). */
  peakMemory: number | null;
  /** The most processes (tasks) the tree had at once (the cgroup tier with a process limit; the job-object tier: processes, from the job's notifications). */
  peakProcesses: number | null;
}

/** The `limits` of a spawn, as they went. */
export interface LimitsResult {
  /** The limits asked for (an owner's default under the spawn's own): memory in bytes, processes, cpu in cores. */
  requested: Limits;
  /**
   * The kernel enforced every limit asked for from before the command ran.
   * false: 'best-effort' ran without them, or with some the OS did not take,
   * or in a tier whose enforcement is not claimed (the job-object tier:
   * capabilities().guarantees.limits false).
   */
  applied: boolean;
  /**
   * The limits asked for that the OS took on the tree before the command ran
   * (its cgroup's files, its Job Object), in the order memory, processes,
   * cpu. Taken is not enforced where the tier does not claim them: Wine
   * takes the Job Object's memory and process limits and enforces neither,
   * and enforcement by Windows has not been observed by cordon's tests
   * (capabilities().guarantees.limits says where they are enforced).
   */
  accepted: LimitName[];
  /** The limits the tree ran into: 'memory' (the OOM killer ended a member), 'processes' (a fork was refused). */
  hit: LimitHit[];
}

/** A live process of a tree (members(), a registry snapshot). */
export interface MemberInfo {
  pid: number;
  ppid: number;
  command: string;
}

export interface Leftover {
  pid: number;
  /** Command line as the anchor saw it: at the root's exit, or when it killed it (a member that exec'd meanwhile is named by what it ran then; one already exiting, by its process name in brackets: `[sleep]`). */
  command: string;
  /** Whether it still held the captured stdout/stderr when the root exited. */
  heldOutput: boolean;
}

/** A member the anchor saw outside the tree's process group (process-group tier). */
export interface GroupLeaver {
  pid: number;
  /** Command line as the anchor saw it. */
  command: string;
}

export interface ContainedResult {
  command: string;
  args: string[];
  /** The root's pid. */
  pid: number;
  tier: Tier;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** Why the root ended: its own exit, a signal, a cancellation, the timeout, or a resource limit ('limit'). */
  reason: Reason;
  /** With reason 'limit': which limit ended it. */
  limit?: LimitHit;
  /** Present when limits were asked for: what was enforced and what the tree ran into. */
  limits?: LimitsResult;
  /** Present when `confine` was asked for (Linux): the tree ran confined by the kernel, so (docs/confine.md). */
  confined?: ConfinedResult;
  /** What the tree used, measured by the kernel where the tier can (null: not measured). Taken when the tree ended (when the root exited, if leftovers were kept). */
  usage: TreeUsage;
  /** Descendants held the captured output past `waitDelay` after the root exited; our ends were closed. */
  waitDelayExceeded: boolean;
  /** Descendants alive when the root exited (a leak report). */
  leftovers: Leftover[];
  /** Whether leftovers were left running (policy 'keep', or 'kill-on-failure' after a clean exit). */
  leftoversKept: boolean;
  /**
   * What cordon could see of the tree (C11). 'complete': every descendant was
   * contained (cgroup, subreaper, job-object tiers), so an empty `leftovers`
   * means nothing outlived the root. 'partial': the tier cannot see every
   * descendant (process-group: a member that left the process group before
   * a snapshot saw it and does not carry the tree's marker in a readable
   * environment, such as a daemon started with `env -i`;
   * process-handle: any descendant), so an empty `leftovers` means only
   * that none was seen, and quiescence is that of what the tier can see.
   */
  coverage: Coverage;
  /**
   * The process-group tier: members the anchor found outside the tree's
   * process group (setsid, setpgid, daemons), by a snapshot or by the tree's
   * marker (CORDON_TREE) in their environment. They are
   * terminated with the tree if still alive; any that left unseen are not
   * listed here (see `coverage`). Empty in the other tiers.
   */
  leftGroup: GroupLeaver[];
  /** Epoch milliseconds. */
  startedAt: number;
  rootExitedAt: number;
  settledAt: number;
  logPath?: string;
  /** The `stop` hook threw or rejected with this (the teardown went on: killSignal, then the forced kill). */
  stopError?: unknown;
}

/** Everything a result is built from. */
export interface ResultInput {
  command: string;
  args: readonly string[];
  pid: number | undefined;
  tier: Tier;
  rootExit: { code: number | null; signal: NodeJS.Signals | null; at: number };
  /** The facade ended the root: by its AbortSignal, or its timeout. */
  cancelReason: 'canceled' | 'timeout' | undefined;
  limits: LimitsPlan | undefined;
  confined?: ConfinedResult | undefined;
  limitsInForce: LimitsEvent | undefined;
  usage: UsageEvent | undefined;
  waitDelayExceeded: boolean;
  leftovers: Leftover[];
  kept: boolean;
  coverage: Coverage;
  leavers: readonly GroupLeaver[];
  startedAt: number;
  logPath: string | undefined;
  stopError: { error: unknown } | undefined;
}

/** The limits the kernel says the tree ran into. */
function limitsHit(usage: UsageEvent | undefined): LimitHit[] {
  const hit: LimitHit[] = [];
  if ((usage?.oomKills ?? 0) > 0) hit.push('memory');
  if ((usage?.pidsMaxHits ?? 0) > 0) hit.push('processes');
  return hit;
}

/** The limits asked for that the anchor's LIMITS line reports as taken by the OS. */
function limitsAccepted(asked: Limits, got: LimitsEvent | undefined): LimitName[] {
  if (!got) return [];
  const out: LimitName[] = [];
  if (asked.memory !== undefined && got.memory > 0) out.push('memory');
  if (asked.processes !== undefined && got.processes > 0) out.push('processes');
  if (asked.cpu !== undefined && got.cpuQuotaUs > 0) out.push('cpu');
  return out;
}

/** Whether the tier enforces the limits here and the anchor reported every one asked for as taken. */
function limitsApplied(plan: LimitsPlan, accepted: LimitName[]): boolean {
  if (!plan.enforced) return false;
  return accepted.length === (['memory', 'processes', 'cpu'] as const).filter((k) => plan.asked[k] !== undefined).length;
}

/**
 * Why the root ended. A limit ended the tree when the root failed and the
 * kernel says the tree ran into it: the memory limit's OOM kill first (it
 * kills), then refused forks (which the root may have failed on). A
 * cancellation or timeout of the facade's own says so whatever the root did.
 */
function classify(input: ResultInput, hit: LimitHit[]): { reason: Reason; limit?: LimitHit } {
  const root = input.rootExit;
  let limit: LimitHit | undefined;
  if (root.signal !== null || root.code !== 0) {
    if (hit.includes('memory') && root.signal === 'SIGKILL') limit = 'memory';
    else if (hit.includes('processes')) limit = 'processes';
    else if (hit.includes('memory')) limit = 'memory';
  }
  if (input.cancelReason) return { reason: input.cancelReason };
  if (limit) return { reason: 'limit', limit };
  return { reason: root.signal !== null ? 'signal' : 'exit' };
}

export function buildResult(input: ResultInput): ContainedResult {
  const root = input.rootExit;
  const hit = limitsHit(input.usage);
  const { reason, limit } = classify(input, hit);
  const plan = input.limits;
  const accepted = plan ? limitsAccepted(plan.asked, input.limitsInForce) : [];
  const result: ContainedResult = {
    command: input.command,
    args: [...input.args],
    pid: input.pid ?? 0,
    tier: input.tier,
    exitCode: root.code,
    signal: root.signal,
    reason,
    ...(limit !== undefined ? { limit } : {}),
    ...(plan ? { limits: { requested: { ...plan.asked }, applied: limitsApplied(plan, accepted), accepted, hit } } : {}),
    ...(input.confined ? { confined: { ...input.confined, write: [...input.confined.write], denyRead: [...input.confined.denyRead] } } : {}),
    usage: {
      cpuMs: input.usage?.cpuUs != null ? input.usage.cpuUs / 1000 : null,
      peakMemory: input.usage?.memoryPeak ?? null,
      peakProcesses: input.usage?.processesPeak ?? null,
    },
    waitDelayExceeded: input.waitDelayExceeded,
    leftovers: input.leftovers.map((l) => ({ ...l })),  // (a kept tree's settled result does not change when it is ended later)
    leftoversKept: input.kept,
    coverage: input.coverage,
    leftGroup: [...input.leavers],
    startedAt: input.startedAt,
    rootExitedAt: root.at,
    settledAt: Date.now(),
  };
  if (input.logPath !== undefined) result.logPath = input.logPath;
  if (input.stopError) result.stopError = input.stopError.error;
  return result;
}

/** The root failed, for 'kill-on-failure': a nonzero exit, a signal, a cancellation or timeout, or a wait-delay overrun. */
export function rootFailed(rootExit: { code: number | null; signal: NodeJS.Signals | null }, cancelled: boolean, waitDelayExceeded: boolean): boolean {
  return rootExit.code !== 0 || rootExit.signal !== null || cancelled || waitDelayExceeded;
}
