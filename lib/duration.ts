// Durations: one validation for every millisecond value cordon takes (spawn
// options, terminate(), Registry, owners, the CLI's flags), so that no value
// reaches a timer or the anchor that either would read as something else
// (setTimeout treats more than 2^31-1 ms as 1 ms; the anchor reads a number it
// cannot parse as an error, never as 0 = kill now).
import { durationTooLong, durationUnparsable, invalidArg } from './errors.js';

/** The longest duration cordon accepts: what a Node timer (and the anchor's int) can hold, about 24.8 days. */
export const MAX_DURATION_MS = 2 ** 31 - 1;

/** The units a duration written as a string carries. */
export type DurationUnit = 'ms' | 's' | 'm' | 'h';

/**
 * A duration, one rule everywhere (spawn options, terminate(), Registry,
 * owners, leases, the CLI's flags): a number is milliseconds; a string carries
 * its unit (`'500ms'`, `'3s'`, `'2m'`, `'1.5h'`). A string without a unit is
 * refused, never guessed.
 */
export type Duration = number | `${number}${DurationUnit}`;

/**
 * A duration in whole milliseconds, from 0 to MAX_DURATION_MS: a number of
 * milliseconds, or a string with its unit (see Duration). A fraction is
 * rounded UP (0.5 -> 1): rounding down would turn a sub-millisecond timeout
 * into 0, which means "no timeout", and a grace into an immediate SIGKILL.
 * `undefined` gives `fallback`; anything else is a typed error before
 * anything runs.
 */
export function duration(name: string, value: unknown, fallback: number): number;
export function duration(name: string, value: unknown): number;
export function duration(name: string, value: unknown, fallback?: number): number {
  if (value === undefined && fallback !== undefined) return fallback;
  if (typeof value === 'string') return parseDuration(name, value);
  if (typeof value !== 'number') {
    throw invalidArg(name, value, "a number of milliseconds or a string with its unit ('500ms', '3s', '2m')", 'ERR_INVALID_ARG_TYPE');
  }
  if (!Number.isFinite(value) || value < 0 || Math.ceil(value) > MAX_DURATION_MS) {
    throw invalidArg(name, value, `a finite number of milliseconds from 0 to ${MAX_DURATION_MS} (about 24.8 days)`);
  }
  return Math.ceil(value);
}

const UNITS: Record<DurationUnit, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** "10s", "500ms", "2m", "1.5h": the unit is required (a bare "30" is refused, never read as seconds or ms). */
export function parseDuration(flag: string, text: string): number {
  // Exactly the number and its unit: ' 1s' is refused, not read as '1s'.
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(text);
  if (!m) throw durationUnparsable(flag, text);
  const ms = Number(m[1]) * UNITS[m[2] as DurationUnit];
  if (!(ms <= MAX_DURATION_MS)) throw durationTooLong(flag, text, MAX_DURATION_MS);
  return duration(flag, ms);
}

export function formatDuration(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)}ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)}s`;
}
