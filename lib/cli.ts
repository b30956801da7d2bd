#!/usr/bin/env node
// cordon run [options] -- <command> [args...]
//   Runs a command contained, forwards its output and exit status, and on
//   Ctrl-C, SIGTERM or timeout terminates the whole tree.
// cordon leaks [options] -- <command> [args...]
//   Runs it and reports every process it left behind, then terminates them.
// cordon capabilities
//   What this host guarantees, per tier (JSON).
// cordon ps [--json] / cordon adopt <id> --token <token>
//   Leased trees whose host is gone, and taking one over.
import { readFileSync } from 'node:fs';
import { capabilities } from './capabilities.js';
import { duration, formatDuration } from './duration.js';
import { isCordonError, type CordonError } from './errors.js';
import { DEFAULT_INTERRUPT_GRACE_MS } from './options.js';
import { selectableTiers } from './tiers.js';
import { spawn, type ContainedProcess, type SpawnOptions } from './process.js';
import type { ContainedResult } from './result.js';
import { signalNumber } from './signals.js';
import { Registry } from './registry.js';
import { disableWarm } from './anchor.js';
import { attachTerminal, notice, terminalLikeUsers } from './cli-terminal.js';
import { parseAdoptArgs, parsePsArgs, parseRunArgs, UsageError } from './cli-args.js';
import { cliMessage } from './cli-messages.js';
import { leftGroupLines, openJsonReport, partialView, printReport, unseen, writeJsonReport, type JsonReportTarget } from './cli-report.js';

const USAGE = `Usage:
  cordon run [options] -- <command> [args...]   run a command contained
  cordon leaks [options] -- <command> [args...] run it and report every process it leaves behind
  cordon capabilities                            what this host guarantees (JSON)
  cordon ps [--json]                             leased trees that can be adopted
  cordon adopt <id> --token <token>              take one over: its output, Ctrl-C ends it, its exit status
  cordon --version | cordon help

Options for run:
  --timeout <d>          terminate the whole tree after this long (exit 124)
  --grace <d>            teardown grace: SIGTERM, then SIGKILL after this (default 3s)
  --interrupt-grace <d>  grace on Ctrl-C, SIGTERM and timeout (default 500ms)
  --wait-delay <d>       how long descendants may hold the output after the root exits (default 2s)
  --leftovers <policy>   kill | kill-on-failure | keep (default kill)
  --tier <tier>          ${selectableTiers().join(' | ')} (default: the strongest available)
  --best-effort          run with a weaker tier rather than refuse when containment fails
  --memory <size>        memory limit of the whole tree: bytes, or 512M, 1G (cgroup tier)
  --max-processes <n>    the most processes the tree may have at once (cgroup tier)
  --cpu <cores>          CPU limit in cores: 0.5 is half of one core (cgroup tier)
  --log <file>           also append stdout and stderr to this file
  --pty                  run the command on a terminal of its own, with this terminal attached
                         (raw mode: Ctrl-C goes to the command; the window's size follows)
  --lease <d>            the tree outlives this CLI (killed, or its terminal hung up: SIGHUP) for
                         this long (adopt it with cordon adopt; its id and token are printed on
                         stderr); then it is terminated. Ctrl-C and SIGTERM still end it
  --confine-write <dir>  confine the tree (Linux: Landlock; macOS: Seatbelt): it may write only below <dir>
                         (repeatable; its own TMPDIR too), every descendant included
  --deny-read <dir>      confined: the tree may not read below <dir> (repeatable)
  --network <net>        confined: none | loopback (Linux: its own lo; macOS: lo) | all (default all);
                         on Linux none and loopback need root. Any of these three confines the tree
  --report               print what was left over and how long cleanup took (stderr)
  --json <file>          also write the report as JSON to <file> (a new file, or your
                         own, made 0600; never through a link; - for stderr)

Durations carry their unit: 500ms, 3s, 2m, 1h (a bare number is refused).
Exit status: the command's; 128+N if it died by signal N; 124 on timeout; 130 when
interrupted; 126/127 when it could not run; 70 when the tree could not be cleaned up.

leaks takes the options of run except --leftovers (--report is implied). It captures the
command's stdout and stderr through pipes (forwarded as they come), keeps every
process still alive when the command's root exits, lists each one on stderr (pid,
whether it held the output pipes, command line), then terminates them with the grace.
Exit status of leaks: 23 when anything was left behind; otherwise as for run (the
command's status, 124, 130, ...).`;

/** A usage error: one line saying what is wrong, and where the usage is (exit 2). */
function fail(message: string, status = 2): never {
  process.stderr.write(`cordon: ${message}\n${status === 2 ? 'cordon: see cordon --help\n' : ''}`);
  process.exit(status);
}

/** `--json <file>` opened before anything runs (cli-report.ts: openJsonReport); one that cannot be is a usage error. */
function jsonReport(path: string | undefined): JsonReportTarget | undefined {
  if (path === undefined) return undefined;
  try {
    return openJsonReport(path);
  } catch (err) {
    fail((err as Error).message);
  }
}

function printUsage(): number {
  process.stdout.write(USAGE + '\n');
  return 0;
}

/** This package's version (package.json, beside dist/). */
function version(): string {
  return (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

/**
 * `cordon leaks`' exit status when something was left behind (or held the
 * output past the wait delay): one no command's own failure is taken for.
 * 23, as LeakSanitizer's default exit code.
 */
const LEAKED_STATUS = 23;

function exitStatus(result: ContainedResult): number {
  if (result.reason === 'timeout') return 124;
  if (result.reason === 'canceled') return 130;
  if (result.signal) return 128 + (signalNumber(result.signal) ?? 0);
  return result.exitCode ?? 1;
}


/**
 * Ctrl-C, SIGTERM and SIGHUP abort the run (interrupt grace, then SIGKILL);
 * a second one kills the whole tree at once. Either way the CLI ends within
 * a bound (interrupt grace + 3 s), whatever still holds it (a pipe held by a
 * process outside the tier's view): the tree's anchor carries out the
 * teardown without it.
 */
function stopOnSignals(target: { proc?: ContainedProcess }, controller: AbortController, options: SpawnOptions): void {
  let interrupts = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    const proc = target.proc;
    if (!proc) return; // (handlers run after the synchronous spawn, so never)
    if (signal === 'SIGHUP' && proc.lease !== undefined) {
      // The terminal went away: what a lease is for. The tree runs on under it.
      notice(`cordon: ${signal}: the tree runs on for its lease (cordon adopt ${proc.leaseId} --token ${proc.adoptionToken})\n`);
      process.exit(129);
    }
    interrupts++;
    if (interrupts === 1) {
      controller.abort(new Error(`received ${signal}`));
      // After the result settled (leaks terminating what it kept), the abort
      // no longer reaches the tree: stop it directly.
      const interruptGrace = duration('--interrupt-grace', options.interruptGrace, DEFAULT_INTERRUPT_GRACE_MS);
      void proc.terminate({ grace: interruptGrace }).catch(() => {});
      const bound = interruptGrace + 3000;
      setTimeout(() => {
        notice(`cordon: still not done ${formatDuration(bound)} after ${signal}; exiting (the tree's anchor finishes the teardown)\n`);
        process.exit(130);
      }, bound).unref();
    } else void proc.kill().catch(() => {});
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('SIGHUP', onSignal);
}

/** Spawns contained and interruptible; a launch failure becomes the exit status. */
function startContained(command: string, args: string[], options: SpawnOptions): ContainedProcess | number {
  const controller = new AbortController();
  options.signal = controller.signal;
  // The handlers first: a signal that arrives while spawn() runs (the
  // command may already be printing) must not find Node's default action,
  // which would end the CLI at once and leave the tree to its anchor's EOF.
  const target: { proc?: ContainedProcess } = {};
  stopOnSignals(target, controller, options);
  try {
    target.proc = spawn(command, args, options);
  } catch (err) {
    return launchFailure(err);
  }
  return target.proc;
}

async function runCommand(argv: string[]): Promise<number> {
  const { options, report, pty, json: jsonPath, help, command, args } = parseRunArgs(argv, 'run');
  if (help) return printUsage();
  const json = jsonReport(jsonPath);
  if (pty) {
    delete options.stdio; // (the terminal is the stdio)
    options.pty = terminalLikeUsers();
  }
  const proc = startContained(command, args, options);
  if (typeof proc === 'number') return proc;
  const detach = pty ? attachTerminal(proc) : () => {};
  if (proc.lease !== undefined) {
    void proc.started.then(
      () => notice(`cordon: leased for ${formatDuration(proc.lease!)}: cordon adopt ${proc.leaseId} --token ${proc.adoptionToken} (log: ${proc.logPath})\n`),
      () => {},
    );
  }
  try {
    const result = await proc.result.finally(detach);
    if (report) printReport(result);
    const status = exitStatus(result);
    if (json !== undefined) writeJsonReport(json, result, status);
    return status;
  } catch (err) {
    if (isCordonError(err) && err.isLaunchFailure) return launchFailure(err);
    const e = err as CordonError;
    process.stderr.write(`cordon: ${cliMessage(e)} [${e.code}]\n`);
    return 70;
  }
}

async function leaksCommand(argv: string[]): Promise<number> {
  const { options, json: jsonPath, help, command, args } = parseRunArgs(argv, 'leaks');
  if (help) return printUsage();
  const json = jsonReport(jsonPath);
  options.leftovers = 'keep';
  // Pipes, so that "held the output" means something; forwarded as they come.
  options.stdio = ['inherit', 'pipe', 'pipe'];
  const proc = startContained(command, args, options);
  if (typeof proc === 'number') return proc;
  for (const [from, to] of [[proc.stdout, process.stdout], [proc.stderr, process.stderr]] as const) {
    to.on('error', () => {}); // a reader that went away must not end the report
    from?.pipe(to, { end: false });
  }
  let result: ContainedResult;
  try {
    result = await proc.result;
    // Settled: the output was drained or closed at the wait delay (C4).
    // Nothing more is forwarded; our ends must not keep the CLI alive.
    for (const from of [proc.stdout, proc.stderr]) from?.destroy();
  } catch (err) {
    if (isCordonError(err) && err.isLaunchFailure) return launchFailure(err);
    const e = err as CordonError;
    process.stderr.write(`cordon: ${cliMessage(e)} [${e.code}]\n`);
    return 70;
  }
  const settled = result;
  // The status, after the JSON report (--json) says it too.
  const leaksReported = (status: number, leaked: boolean): number => {
    if (json !== undefined) writeJsonReport(json, settled, status, { leaked });
    return status;
  };
  const lines: string[] = [];
  const how = result.signal ? `was killed by ${result.signal}` : `exited with code ${result.exitCode}`;
  lines.push(`cordon: ${result.command} (pid ${result.pid}) ${how} after ${formatDuration(result.rootExitedAt - result.startedAt)}; reason: ${result.reason}`);
  const leaked = result.leftovers;
  lines.push(...leftGroupLines(result));
  if (leaked.length === 0) {
    lines.push(
      result.coverage === 'complete'
        ? 'cordon: no leaks: nothing outlived the command'
        : `cordon: no leaks seen ${partialView(result).seenIn}; ${unseen(result)}`,
    );
    if (result.waitDelayExceeded) {
      // Something outlived the command after all: it held the output.
      lines.push("cordon: but a process outside the tier's view held the output past the wait delay; it was closed");
      process.stderr.write(lines.join('\n') + '\n');
      return leaksReported(LEAKED_STATUS, true);
    }
    process.stderr.write(lines.join('\n') + '\n');
    return leaksReported(exitStatus(result), false);
  }
  if (result.coverage === 'partial') lines.push(`cordon: coverage is partial: ${unseen(result)}`);
  const stopped = !result.leftoversKept; // canceled or timed out: the whole tree was terminated
  lines.push(
    stopped
      ? `cordon: ${leaked.length} process(es) were still running when the command was stopped (terminated with it):`
      : `cordon: ${leaked.length} process(es) leaked: still running when the command exited:`,
  );
  for (const l of leaked) {
    lines.push(`cordon:   pid ${l.pid}${l.heldOutput ? ' (held the output pipes)' : ''}: ${l.command}`);
  }
  if (result.waitDelayExceeded) lines.push('cordon: they held the output past the wait delay; what they wrote after it is not shown');
  process.stderr.write(lines.join('\n') + '\n');
  if (stopped) return leaksReported(exitStatus(result), false);
  try {
    await proc.terminate();
  } catch (err) {
    const e = err as CordonError;
    process.stderr.write(`cordon: ${cliMessage(e)} [${e.code}]\n`);
    return leaksReported(70, true);
  }
  process.stderr.write(`cordon: the leaked processes were terminated\n`);
  return leaksReported(LEAKED_STATUS, true);
}

function launchFailure(err: unknown): number {
  const e = err as CordonError;
  process.stderr.write(`cordon: ${cliMessage(e)}${e.code ? ` [${e.code}]` : ''}\n`);
  if (!isCordonError(err)) return 70;
  if (e.code === 'ENOENT' && e.syscall !== 'chdir') return 127;
  if (e.code === 'EACCES') return 126;
  if (e.stage === 'input') return 2;
  return 126;
}

/** `cordon ps`: the adoptable leased trees, a table or JSON. */
async function psCommand(argv: string[]): Promise<number> {
  const { json } = parsePsArgs(argv);
  const trees = await new Registry().adoptable();
  if (json) {
    process.stdout.write(JSON.stringify(trees, null, 2) + '\n');
    return 0;
  }
  const rows = [['ID', 'OWNER', 'KIND', 'ROOT', 'LEASE LEFT', 'STARTED', 'LABEL']];
  for (const t of trees) {
    const left = !t.answered ? 'no answer' : t.leaseLeftMs === null ? 'attached' : formatDuration(t.leaseLeftMs);
    const root = t.rootRunning === null ? 'unknown' : t.rootRunning ? 'running' : 'exited';
    rows.push([t.id, t.owner ?? '-', t.kind, root, left, new Date(t.started).toISOString(), t.label]);
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  for (const r of rows) process.stdout.write(r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ') + '\n');
  return 0;
}

/** `cordon adopt <id> --token <token>`: attaches to a leased tree; Ctrl-C terminates it; its exit status. */
async function adoptCommand(argv: string[]): Promise<number> {
  const { id, token } = parseAdoptArgs(argv);
  let proc: ContainedProcess;
  try {
    proc = await new Registry().adopt(id, { token });
  } catch (err) {
    const e = err as CordonError;
    process.stderr.write(`cordon: ${cliMessage(e)}${e.code ? ` [${e.code}]` : ''}\n`);
    // 77: refused; 75 (EX_TEMPFAIL): the anchor did not answer, try again; 2: no such tree.
    return e.code === 'ERR_CORDON_ADOPT_DENIED' ? 77 : e.code === 'ERR_CORDON_TIMEOUT' ? 75 : 2;
  }
  // Ctrl-C or SIGTERM terminates the tree (a second one kills it), and the
  // exit status is then 130, as `cordon run`'s, whatever the root died of.
  let interrupts = 0;
  const onSignal = () => {
    if (++interrupts === 1) void proc.terminate().catch(() => {});
    else void proc.kill().catch(() => {});
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // A tree with a terminal gets this one attached, as `run --pty` does (raw: Ctrl-C goes to the tree).
  const detach = proc.terminal ? attachTerminal(proc, true) : () => {};
  if (!proc.terminal) {
    for (const [from, to] of [[proc.stdout, process.stdout], [proc.stderr, process.stderr]] as const) {
      to.on('error', () => {});
      from?.pipe(to, { end: false });
    }
  }
  try {
    const result = await proc.result.finally(detach);
    return interrupts > 0 ? 130 : exitStatus(result);
  } catch (err) {
    const e = err as CordonError;
    process.stderr.write(`cordon: ${cliMessage(e)} [${e.code}]\n`);
    return 70;
  }
}

async function main(argv: string[]): Promise<number> {
  // One tree per process: an anchor started ahead of need would go unused.
  disableWarm();
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'run':
      return runCommand(rest);
    case 'leaks':
      return leaksCommand(rest);
    case 'ps':
      return psCommand(rest);
    case 'adopt':
      return adoptCommand(rest);
    case 'capabilities':
      process.stdout.write(JSON.stringify(capabilities(), null, 2) + '\n');
      return 0;
    case '-v':
    case '--version':
    case 'version':
      process.stdout.write(`cordon ${version()}\n`);
      return 0;
    case undefined:
      process.stderr.write(USAGE + '\n');
      return 2;
    case '-h':
    case '--help':
    case 'help':
      return printUsage();
    default:
      fail(`unknown command ${sub}`);
  }
}

main(process.argv.slice(2)).then(
  (status) => {
    process.exitCode = status;
  },
  (err: unknown) => {
    if (err instanceof UsageError) fail(err.message);
    process.stderr.write(`cordon: ${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = 70;
  },
);
