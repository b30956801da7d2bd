// "10s", "500ms", "2m", "1.5h"; a bare number is seconds (as timeout(1) reads it).
import { CordonError } from './errors.js';

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

export function parseDuration(flag: string, text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!m) {
    throw new CordonError(`${flag} takes a duration such as 500ms, 3s or 2m; got "${text}".`, {
      code: 'ERR_INVALID_ARG_VALUE',
      stage: 'input',
    });
  }
  return Math.round(Number(m[1]) * UNITS[m[2] ?? 's']!);
}

export function formatDuration(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)}ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)}s`;
}
