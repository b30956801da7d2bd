// Resource limits per tree: what a caller may ask for, checked before
// anything runs, whether a tier takes them, and how the anchor is told.
// Enforcement is the kernel's (cgroup controllers;
// native/posix/tier_cgroup.cc); whether a tier can enforce them on this host
// is capabilities().guarantees.limits.
//
// Pure: no I/O here (where the host has each controller is passed in).
import { invalidArg, limitsUnenforceable } from './errors.js';

/** What a caller may pass as `limits` (spawn, run, an owner's default). */
export interface LimitsOption {
  /** The tree's memory, all members together: bytes, or a string such as '512M', '1G', '64K' (powers of 1024). */
  memory?: number | string;
  /** The most processes (and threads: the kernel counts tasks) the tree may have at once. */
  processes?: number;
  /** CPU time per wall time, in cores: 0.5 is half of one core, 2 is two cores' worth. */
  cpu?: number;
}

/** Limits as checked: memory in bytes, processes a count, cpu in cores. */
export interface Limits {
  memory?: number;
  processes?: number;
  cpu?: number;
}

/** The smallest memory limit accepted: below it not even a shell starts, and the kernel rounds to pages. */
export const MIN_MEMORY = 1024 * 1024;
/** The largest byte count a limit file and a JS number agree on exactly. */
const MAX_BYTES = Number.MAX_SAFE_INTEGER;
/** The kernel's cpu.max / cfs period used for a cpu limit: 100 ms, its default. */
export const CPU_PERIOD_US = 100_000;
/** The smallest quota the kernel takes (1 ms per period): a cpu limit of at least 0.01 core. */
export const MIN_CPU = 0.01;
/** pids.max is an int in the kernel. */
const MAX_PROCESSES = 2 ** 31 - 1;

const SUFFIX: Record<string, number> = { '': 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4 };

/** A memory size: bytes, or digits (a fraction allowed) with K, M, G or T (an optional 'B' / 'iB' after it). */
function memoryBytes(name: string, value: unknown): number {
  let bytes: number;
  if (typeof value === 'number') {
    bytes = value;
  } else if (typeof value === 'string') {
    const m = /^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$/i.exec(value);
    if (!m) throw invalidArg(name, value, "a byte count or a size such as '512M' or '1G'");
    bytes = Math.floor(Number(m[1]) * SUFFIX[m[2]!.toUpperCase()]!);
  } else {
    throw invalidArg(name, value, "a byte count or a size such as '512M' or '1G'", 'ERR_INVALID_ARG_TYPE');
  }
  if (!Number.isInteger(bytes) || bytes < MIN_MEMORY || bytes > MAX_BYTES) {
    throw invalidArg(name, value, `a whole number of bytes from ${MIN_MEMORY} (1M) to ${MAX_BYTES}`);
  }
  return bytes;
}

function processCount(name: string, value: unknown): number {
  if (typeof value !== 'number') throw invalidArg(name, value, 'a whole number of processes', 'ERR_INVALID_ARG_TYPE');
  if (!Number.isInteger(value) || value < 1 || value > MAX_PROCESSES) {
    throw invalidArg(name, value, `a whole number of processes from 1 to ${MAX_PROCESSES}`);
  }
  return value;
}

function cpuCores(name: string, value: unknown): number {
  if (typeof value !== 'number') throw invalidArg(name, value, 'a number of cores (0.5 = half of one core)', 'ERR_INVALID_ARG_TYPE');
  if (!Number.isFinite(value) || value < MIN_CPU || value > 1024) {
    throw invalidArg(name, value, `a number of cores from ${MIN_CPU} to 1024 (0.5 = half of one core)`);
  }
  return value;
}

const KEYS = new Set(['memory', 'processes', 'cpu']);

/**
 * `limits` as given (undefined: none). Unknown keys, wrong types and values
 * out of range are typed input errors. `name` is the option's name in
 * messages ('limits', 'owner limits').
 */
export function parseLimits(name: string, value: unknown): Limits | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidArg(name, value, 'an object such as { memory: \'512M\', processes: 100, cpu: 0.5 }', 'ERR_INVALID_ARG_TYPE');
  }
  const o = Object.assign(Object.create(null) as Record<string, unknown>, value);
  for (const key of Object.keys(o)) {
    if (!KEYS.has(key) && o[key] !== undefined) throw invalidArg(`${name}.${key}`, o[key], 'absent: limits take memory, processes and cpu');
  }
  const out: Limits = {};
  if (o.memory !== undefined) out.memory = memoryBytes(`${name}.memory`, o.memory);
  if (o.processes !== undefined) out.processes = processCount(`${name}.processes`, o.processes);
  if (o.cpu !== undefined) out.cpu = cpuCores(`${name}.cpu`, o.cpu);
  return out;
}

/** An owner's default under a spawn's own limits: each limit the spawn names wins. */
export function mergeLimits(base: Limits | undefined, own: Limits | undefined): Limits | undefined {
  if (base === undefined) return own;
  if (own === undefined) return base;
  return { ...base, ...own };
}

/** Whether any limit is set. */
export function hasLimits(limits: Limits | undefined): limits is Limits {
  return limits !== undefined && (limits.memory !== undefined || limits.processes !== undefined || limits.cpu !== undefined);
}

/** The cpu limit as the kernel's quota per CPU_PERIOD_US, in microseconds. */
export function cpuQuotaUs(cpu: number): number {
  return Math.max(1000, Math.round(cpu * CPU_PERIOD_US));
}

/** The anchor's options for the limits (none without limits). */
export function anchorLimitArgs(limits: Limits | undefined): string[] {
  if (!hasLimits(limits)) return [];
  const args: string[] = [];
  if (limits.memory !== undefined) args.push('--memory', String(limits.memory));
  if (limits.processes !== undefined) args.push('--max-processes', String(limits.processes));
  if (limits.cpu !== undefined) args.push('--cpu-quota', String(cpuQuotaUs(limits.cpu)));
  return args;
}

/** The CLI's flags: --memory 512M, --max-processes 100, --cpu 0.5 (a typed error for anything else). */
export function cliLimit(flag: '--memory' | '--max-processes' | '--cpu', text: string, into: LimitsOption): void {
  if (flag === '--memory') {
    into.memory = /^\d+$/.test(text.trim()) ? Number(text) : text;
    memoryBytes(flag, into.memory);
    return;
  }
  const n = /^\s*\d+(?:\.\d+)?\s*$/.test(text) ? Number(text) : NaN;
  if (flag === '--max-processes') {
    if (Number.isNaN(n)) throw invalidArg(flag, text, 'a whole number of processes');
    into.processes = processCount(flag, n);
  } else {
    if (Number.isNaN(n)) throw invalidArg(flag, text, 'a number of cores (0.5 = half of one core)');
    into.cpu = cpuCores(flag, n);
  }
}

/** Where a host enforces each limit (a cgroup version, 'job'), null where it cannot. */
export interface LimitSupport {
  memory: string | null;
  processes: string | null;
  cpu: string | null;
}

/** The limits of one spawn: what was asked, what the anchor is told, and whether the tier enforces them all here. */
export interface LimitsPlan {
  asked: Limits;
  /** What the anchor sets on the tree (undefined: none, where best-effort runs without them). */
  send: Limits | undefined;
  /** The kernel enforces every limit asked for from before the command runs (result.limits.applied needs it). */
  enforced: boolean;
}

/**
 * The limits to ask the anchor for, in a tier whose limits are `claim`
 * (TierSpec.limits) on a host that enforces each where `support` says:
 * every one where each is enforced; where one is not, 'strict' refuses (a
 * typed error before anything runs) and 'best-effort' runs without any,
 * except in a tier that sets them unclaimed (the job-object tier: its job
 * takes them where the OS accepts them, enforcement never observed; the
 * result says which in limits.accepted, and applied false).
 */
export function planLimits(
  tier: string,
  claim: 'enforced' | 'set-unclaimed' | 'none',
  support: LimitSupport,
  asked: Limits,
  containment: 'strict' | 'best-effort',
): LimitsPlan {
  const missing = (['memory', 'processes', 'cpu'] as const).filter((k) => asked[k] !== undefined && (claim !== 'enforced' || support[k] === null));
  if (missing.length === 0) return { asked, send: asked, enforced: true };
  if (containment === 'strict') throw limitsUnenforceable(tier, missing, claim === 'set-unclaimed');
  return { asked, send: claim === 'set-unclaimed' ? asked : undefined, enforced: false };
}
