// cordon/child_process's spawnSync, execFileSync and execSync: Node's own
// spawnSync runs lib/sync-helper.ts, which runs the command contained, so a
// synchronous call is contained too (docs/child-process.md).
/// <reference types="node" preserve="true" />
import type * as cp from 'node:child_process';
import { spawnSync as nodeSpawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { constants as osConstants } from 'node:os';
import { fileURLToPath } from 'node:url';
import { launchOf, optionsObject } from './child-process-options.js';
import * as errors from './errors.js';
import type { CordonError } from './errors.js';
import { normalizeOptions, validateCommand } from './options.js';

// The sync variants: Node's spawnSync runs lib/sync-helper.ts, which runs the
// command contained (see there). Built, it sits beside this file; run from
// the TypeScript sources (the tests), it is the built one in dist/.
const HELPER = ((built: string) => (existsSync(built) ? built : fileURLToPath(new URL('../dist/sync-helper.js', import.meta.url))))(fileURLToPath(new URL('./sync-helper.js', import.meta.url)));

interface SyncResult {
  pid: number;
  output: Array<string | Buffer | null> | null;
  stdout: string | Buffer | null | undefined;
  stderr: string | Buffer | null | undefined;
  status: number | null;
  signal: NodeJS.Signals | null;
  error?: Error;
}

/** Node's (file, args?, options?) with args left out: the options in second place. */
function argsAndOptions(argsIn: unknown, optionsIn: unknown): { args: unknown; o: Record<string, unknown> } {
  const shifted = argsIn !== undefined && argsIn !== null && !Array.isArray(argsIn);
  return { args: shifted ? [] : argsIn, o: optionsObject(shifted ? argsIn : optionsIn) };
}

function spawnSyncImpl(file: string, argsIn?: unknown, optionsIn?: unknown): SyncResult {
  const { args, o } = argsAndOptions(argsIn, optionsIn);
  const launch = launchOf(file, args ?? [], o);
  const maxBuffer = o.maxBuffer === undefined || o.maxBuffer === null ? 1024 * 1024 : o.maxBuffer;
  if (!(typeof maxBuffer === 'number' && maxBuffer >= 0)) throw errors.nodeOutOfRange('options.maxBuffer', 'a positive number', maxBuffer);
  const encoding = o.encoding === undefined || o.encoding === null ? 'buffer' : o.encoding;
  if (encoding !== 'buffer' && (typeof encoding !== 'string' || !Buffer.isEncoding(encoding))) throw errors.invalidArg('encoding', encoding, "a text encoding or 'buffer'");
  const { stdio, signal: _signal, ...options } = launch.options;
  if (options.cwd instanceof URL) options.cwd = fileURLToPath(options.cwd);
  const failure = (code: string, errno: number | undefined, cause?: unknown): SyncResult => ({
    error: errors.childSpawnFailed({ code, errno }, launch.spawnfile, launch.spawnargs.slice(1), 'spawnSync', cause),
    status: null,
    signal: null,
    output: null,
    pid: 0,
    stdout: failedOutput(),
    stderr: failedOutput(),
  });
  // What cordon refuses is refused here, before the helper runs: bad input
  // throws; a launch failure known now (a missing cwd) is the result's error.
  try {
    validateCommand(launch.file, launch.args);
    normalizeOptions(options);
  } catch (error) {
    const e = error as CordonError;
    if (e.stage !== 'launch') throw e;
    return failure(String(e.code), e.errno, e);
  }
  const three = Array.isArray(launch.stdio) ? launch.stdio : [launch.stdio ?? 'pipe', launch.stdio ?? 'pipe', launch.stdio ?? 'pipe'];
  // The helper's report: a file in a directory of this process's own (mode
  // 0700), not a pipe, which spawnSync's maxBuffer would count.
  const reportDir = mkdtempSync(join(tmpdir(), 'cordon-sync-'));
  const reportFile = join(reportDir, 'report');
  let ran: ReturnType<typeof nodeSpawnSync>;
  let reported = '';
  try {
    ran = nodeSpawnSync(process.execPath, ['--no-warnings', HELPER], {
      stdio: three as cp.StdioOptions,
      env: { ...process.env, CORDON_SYNC_REQUEST: JSON.stringify({ file: launch.file, args: launch.args, options }), CORDON_SYNC_REPORT: reportFile },
      input: o.input as string | NodeJS.ArrayBufferView | undefined,
      maxBuffer,
      killSignal: 'SIGTERM',
      windowsHide: true,
    });
    reported = existsSync(reportFile) ? readFileSync(reportFile, 'utf8') : '';
  } finally {
    rmSync(reportDir, { recursive: true, force: true });
  }
  let pid = 0;
  let exit: { code: number | null; signal: NodeJS.Signals | null; reason: string } | undefined;
  let launchError: { code: string; errno?: number; stage?: string; message: string } | undefined;
  for (const line of reported.split('\n')) {
    if (!line) continue;
    const m = JSON.parse(line) as { pid?: number; exit?: typeof exit; error?: typeof launchError };
    if (m.pid !== undefined) pid = m.pid;
    if (m.exit) exit = m.exit;
    if (m.error) launchError = m.error;
  }
  if (launchError && pid === 0) return failure(launchError.code, launchError.errno);
  const decode = (b: Buffer | string | null | undefined): string | Buffer | null => (b === null || b === undefined ? null : encoding === 'buffer' ? (b as Buffer) : b.toString(encoding as BufferEncoding));
  const stdout = decode(ran.output?.[1]);
  const stderr = decode(ran.output?.[2]);
  const result: SyncResult = { status: exit?.code ?? null, signal: exit?.signal ?? null, output: [null, stdout, stderr], pid, stdout, stderr };
  const code = (ran.error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENOBUFS') {
    // spawnSync stopped the helper (maxBuffer): the tree ended with it.
    Object.assign(result, { status: null, signal: launch.killSignal, error: errors.childSpawnFailed({ code, errno: -(osConstants.errno.ENOBUFS ?? 105) }, launch.spawnfile, launch.spawnargs.slice(1), 'spawnSync') });
  } else if (ran.error) {
    throw ran.error;
  } else if (exit?.reason === 'timeout') {
    Object.assign(result, { status: null, signal: exit.signal ?? launch.killSignal, error: errors.childSpawnFailed({ code: 'ETIMEDOUT', errno: -(osConstants.errno.ETIMEDOUT ?? 110) }, launch.spawnfile, launch.spawnargs.slice(1), 'spawnSync') });
  } else if (launchError) {
    // The tree ran and its cleanup failed: never taken for success.
    result.error = errors.childSpawnFailed({ code: launchError.code, errno: launchError.errno }, launch.spawnfile, launch.spawnargs.slice(1), 'spawnSync');
  } else if (!exit) {
    result.error = errors.childSpawnFailed({ code: 'ERR_CORDON_ANCHOR_LOST' }, launch.spawnfile, launch.spawnargs.slice(1), 'spawnSync');
  }
  return result;
}

/** As Node's checkExecSyncError: the spawnSync error with the result on it, or a nonzero exit as an Error. */
function execSyncError(ret: SyncResult, cmd: string): Error | undefined {
  if (ret.error) return Object.assign(ret.error, ret);
  if (ret.status === 0) return undefined;
  let message = `Command failed: ${cmd}`;
  if (ret.stderr && ret.stderr.length > 0) message += `\n${ret.stderr.toString()}`;
  return errors.childSyncCommandFailed(message, ret);
}

function execFileSyncImpl(file: string, argsIn?: unknown, optionsIn?: unknown): string | Buffer | null {
  const { args, o } = argsAndOptions(argsIn, optionsIn);
  const inheritStderr = !o.stdio;
  const ret = spawnSyncImpl(file, args ?? [], o);
  if (inheritStderr && ret.stderr) process.stderr.write(ret.stderr);
  const error = execSyncError(ret, [file, ...((args ?? []) as string[])].join(' '));
  if (error) throw error;
  return ret.stdout ?? null;
}

function execSyncImpl(command: string, optionsIn?: unknown): string | Buffer | null {
  const o = optionsObject(optionsIn);
  o.shell = typeof o.shell === 'string' ? o.shell : true;
  const inheritStderr = !o.stdio;
  const ret = spawnSyncImpl(command, [], o);
  if (inheritStderr && ret.stderr) process.stderr.write(ret.stderr);
  const error = execSyncError(ret, command);
  if (error) throw error;
  return ret.stdout ?? null;
}

/** Node's spawnSync(): the tree contained (it runs in a helper process the call waits for). */
export const spawnSync = spawnSyncImpl as unknown as typeof cp.spawnSync;
/** Node's execFileSync(): the tree contained. */
export const execFileSync = execFileSyncImpl as unknown as typeof cp.execFileSync;
/** Node's execSync(): the tree contained. */
export const execSync = execSyncImpl as unknown as typeof cp.execSync;

let failedOutputSeen: { value: null | undefined } | undefined;
/**
 * What this Node's own spawnSync gives as stdout/stderr when the command
 * cannot start: null up to Node 22, undefined since. Asked of Node once, the
 * first time it is needed (a path that cannot exist: nothing runs).
 */
function failedOutput(): null | undefined {
  failedOutputSeen ??= { value: (nodeSpawnSync('/nonexistent/cordon-spawnsync-probe').stdout as unknown) === undefined ? undefined : null };
  return failedOutputSeen.value;
}

