// What the CLI reports about a finished tree: the text lines of `--report`
// and `cordon leaks` (stderr), and the same facts as JSON (`--json <file>`)
// for a CI step to read.
import { closeSync, fchmodSync, fstatSync, ftruncateSync, constants as fsConstants, openSync, writeFileSync } from 'node:fs';
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

/** Where `--json` writes: stderr ('-'), or a file opened before the command ran. */
export type JsonReportTarget = { path: '-' } | { path: string; fd: number };

/**
 * Opens `--json <path>` before anything runs (a report that cannot be
 * written is a usage error, not a command run for nothing). It holds command
 * lines, so it is made private: a new file is created 0600 with O_EXCL and
 * O_NOFOLLOW (never through a link); an existing one is written only if it
 * is this user's own regular file, not a link, with one name (then made 0600
 * and truncated, checked again through the descriptor). Anything else
 * (another user's file, a link, a directory, a missing directory) throws,
 * saying why.
 */
export function openJsonReport(path: string): JsonReportTarget {
  if (path === '-') return { path };
  const flags = fsConstants.O_WRONLY | fsConstants.O_NOFOLLOW | O_CLOEXEC;
  try {
    return { path, fd: openSync(path, flags | fsConstants.O_CREAT | fsConstants.O_EXCL, 0o600) };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw reportError(path, err);
  }
  const refuse = (why: string) => reportError(path, Object.assign(new Error(why), { code: 'EEXIST' }));
  let fd: number;
  try {
    fd = openSync(path, flags);
  } catch (err) {
    // ELOOP: a symbolic link (O_NOFOLLOW).
    throw (err as NodeJS.ErrnoException).code === 'ELOOP' ? refuse('it is a symbolic link') : reportError(path, err);
  }
  try {
    const st = fstatSync(fd);
    const uid = process.geteuid?.();
    if (!st.isFile()) throw refuse('it exists and is not a regular file');
    if (uid !== undefined && st.uid !== uid) throw refuse(`it exists and belongs to another user (uid ${st.uid})`);
    if (st.nlink !== 1) throw refuse('it exists with more than one name (a hard link)');
    fchmodSync(fd, 0o600);
    ftruncateSync(fd, 0);
    return { path, fd };
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

const O_CLOEXEC = (fsConstants as unknown as { O_CLOEXEC?: number }).O_CLOEXEC ?? 0;

function reportError(path: string, cause: unknown): Error {
  const why = (cause as Error).message;
  return Object.assign(new Error(`cannot write the JSON report to ${path}: ${why}; nothing ran. Name a new file in a directory of yours, or one of your own files, or - for stderr`), { cause });
}

/**
 * The report as JSON: the result's facts (every field of ContainedResult;
 * a stop hook's error as its message), the CLI's exit status and, for
 * `cordon leaks`, whether anything leaked. Written to the file opened before
 * the command ran (openJsonReport), or as one line on stderr for `-`. A
 * write that fails is said on stderr; the command's status stands.
 */
export function writeJsonReport(target: JsonReportTarget, result: ContainedResult, status: number, extra: Record<string, unknown> = {}): void {
  const stopError = result.stopError === undefined ? {} : { stopError: String((result.stopError as Error)?.message ?? result.stopError) };
  const text = JSON.stringify({ ...result, ...stopError, ...extra, status });
  if (!('fd' in target)) {
    process.stderr.write(text + '\n');
    return;
  }
  try {
    writeFileSync(target.fd, text + '\n');
  } catch (err) {
    process.stderr.write(`cordon: could not write the JSON report to ${target.path}: ${(err as Error).message}\n`);
  } finally {
    closeSync(target.fd);
  }
}
