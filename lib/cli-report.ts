// What the CLI reports about a finished tree: the text lines of `--report`
// and `cordon leaks` (stderr), and the same facts as JSON (`--json <file>`)
// for a CI step to read.
import { writeFileSync } from 'node:fs';
import { formatDuration } from './duration.js';
import type { ContainedResult } from './result.js';
import { tierSpec } from './tiers.js';

/** Where a tier with partial coverage looked, and what it cannot see, in words (C11). */
export function partialView(result: ContainedResult): { seenIn: string; unseen: string } {
  return tierSpec(result.tier)?.partialView ?? { seenIn: 'of the root', unseen: `the ${result.tier} tier cannot see the root's descendants` };
}

export function unseen(result: ContainedResult): string {
  return partialView(result).unseen;
}

/** Members the anchor saw leave the tree's process group (process-group tier). */
export function leftGroupLines(result: ContainedResult): string[] {
  if (result.leftGroup.length === 0) return [];
  return [
    `cordon: ${result.leftGroup.length} process(es) were seen leaving the tree's process group (found by a snapshot or by the tree's marker; any that left unseen are not known):`,
    ...result.leftGroup.map((l) => `cordon:   pid ${l.pid}: ${l.command}`),
  ];
}

/** What the tree used and ran into, where measured ("not measured" rather than a 0). */
function limitLines(result: ContainedResult): string[] {
  const lines: string[] = [];
  const { cpuMs, peakMemory, peakProcesses } = result.usage;
  const show = (v: number | null, unit: (v: number) => string) => (v === null ? 'not measured' : unit(v));
  if (cpuMs !== null || peakMemory !== null || peakProcesses !== null) {
    lines.push(
      `cordon: usage: cpu ${show(cpuMs, (v) => formatDuration(v))}, peak memory ${show(peakMemory, (v) => `${(v / 1048576).toFixed(1)}M`)}, peak processes ${show(peakProcesses, String)}`,
    );
  }
  const l = result.limits;
  if (l && !l.applied) lines.push('cordon: limits were NOT applied (best-effort: this tier cannot enforce them here)');
  if (l && l.hit.length > 0) lines.push(`cordon: the tree ran into its ${l.hit.join(' and ')} limit`);
  return lines;
}

export function printReport(result: ContainedResult): void {
  const lines: string[] = [];
  const ran = formatDuration(result.rootExitedAt - result.startedAt);
  const how = result.signal ? `was killed by ${result.signal}` : `exited with code ${result.exitCode}`;
  lines.push(`cordon: ${result.command} (pid ${result.pid}, ${result.tier} tier) ${how} after ${ran}; reason: ${result.reason}${result.limit ? ` (${result.limit} limit)` : ''}`);
  lines.push(...limitLines(result));
  if (result.leftovers.length === 0) {
    lines.push(
      result.coverage === 'complete'
        ? 'cordon: no leftovers: the tree ended with its root'
        : `cordon: no leftovers seen ${partialView(result).seenIn}; ${unseen(result)}`,
    );
  } else {
    const fate = result.leftoversKept ? 'kept running' : 'terminated';
    lines.push(`cordon: ${result.leftovers.length} leftover process(es) ${fate}:`);
    for (const l of result.leftovers) {
      lines.push(`cordon:   pid ${l.pid}${l.heldOutput ? ' (held the output)' : ''}: ${l.command}`);
    }
  }
  lines.push(...leftGroupLines(result));
  if (result.coverage === 'partial' && result.leftovers.length > 0) lines.push(`cordon: coverage is partial: ${unseen(result)}`);
  if (result.waitDelayExceeded) lines.push('cordon: descendants held the output past the wait delay; it was closed');
  lines.push(`cordon: cleanup took ${formatDuration(result.settledAt - result.rootExitedAt)} after the root exited`);
  process.stderr.write(lines.join('\n') + '\n');
}

/**
 * The report as JSON: the result's facts (every field of ContainedResult;
 * a stop hook's error as its message), the CLI's exit status and, for
 * `cordon leaks`, whether anything leaked. Written to `path` (made 0600: it
 * holds command lines), or as one line on stderr for `-`.
 */
export function writeJsonReport(path: string, result: ContainedResult, status: number, extra: Record<string, unknown> = {}): void {
  const stopError = result.stopError === undefined ? {} : { stopError: String((result.stopError as Error)?.message ?? result.stopError) };
  const text = JSON.stringify({ ...result, ...stopError, ...extra, status });
  if (path === '-') process.stderr.write(text + '\n');
  else writeFileSync(path, text + '\n', { mode: 0o600 });
}
