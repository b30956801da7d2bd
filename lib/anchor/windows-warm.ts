// Warm anchors (Windows): a cordon-anchor.exe started ahead of need, so that
// spawn() does not wait for one to start. The pool is every platform's
// (./warm-pool.ts); this file is Windows' driver of it, and the hand-over.
//
// A warm anchor is started as a cold one is (Node's child_process, hidden,
// in the host's kill-on-close job, the control channel at fds 3 and 4, the
// anchor's own directory as its working directory) with `--warm` and its
// shape's arguments (--job-from-host, the tier, best-effort, trace), stdio
// NUL; the tree's Job Object is created as it starts and `JOB <handle>` sent
// at once (so containment exists before any command does). spawn() hands it
// the command with a LAUNCH (native/win/warm.h): the anchor's arguments as a
// cold anchor gets them, the command's environment (with what libuv adds to
// a cold anchor's: SYSTEMROOT and the others it requires, from the host's),
// and its stdio as three handles the addon duplicated into the anchor (a
// pipe whose host end becomes a descriptor for net.Socket({ fd }), as Node
// wraps a piped process.stdin; NUL for 'ignore'; the host's own handle for
// 'inherit'). From there it runs exactly as a cold anchor.
//
// What keeps every guarantee:
// - one anchor per tree, used once: its cwd, environment and stdio come with
//   the LAUNCH, nothing of another tree's;
// - only the shapes whose containment is the anchor's and the host's job
//   alone: no lease, no limits, no terminal, stdio of 'pipe', 'ignore' or
//   'inherit' only (the rest is started cold);
// - keyed by what the host gives an anchor it starts and could change since:
//   the anchor executable and the host's token (user, groups and their
//   state, privileges, integrity level, session) and priority class
//   (native/cordon.h host_identity); one started while the host was
//   someone else is retired at the next spawn;
// - the host's death ends it (Node's kill-on-close job; its channel's EOF);
//   unused for `CORDON_WARM` ms (default WARM_IDLE_MS) it is retired, its
//   channel closed: it exits running nothing; none with CORDON_WARM=0.
import { spawn as spawnChild, type ChildProcess, type IOType } from 'node:child_process';
import { closeSync } from 'node:fs';
import { getPriority } from 'node:os';
import { Socket } from 'node:net';
import { dirname } from 'node:path';
import type { Stream } from 'node:stream';
import { debug } from '../debug.js';
import { windowsBinding } from '../native.js';
import { encodeCommand } from './protocol.js';
import { WarmPool, type WarmDriver, type WarmTake } from './warm-pool.js';

/** A warm anchor: its process, the host's ends of its channel, the tree's job (the host's handle). */
export interface WindowsWarm {
  readonly pid: number;
  readonly child: ChildProcess;
  readonly reader: Socket;
  readonly writer: Socket;
  job: number | undefined;
}

/** A warm anchor handed its command: the host's ends of the command's pipes (null: not a pipe). */
export interface WindowsStarted extends WindowsWarm {
  stdin: Socket | null;
  stdout: Socket | null;
  stderr: Socket | null;
}

/** The most a LAUNCH may carry (native/win/warm.h kMaxLaunchBytes): above it, a cold anchor. */
const MAX_LAUNCH_BYTES = 192 * 1024;
/** What libuv puts in a child's environment from the parent's when the one given lacks it (make_program_env). */
const REQUIRED_ENV = ['HOMEDRIVE', 'HOMEPATH', 'LOGONSERVER', 'PATH', 'SYSTEMDRIVE', 'SYSTEMROOT', 'TEMP', 'USERDOMAIN', 'USERNAME', 'USERPROFILE', 'WINDIR'];
const MODES: Record<string, number> = { pipe: 0, ignore: 1, inherit: 2 };
/** The priority class behind each priority os.getPriority() gives on Windows (libuv's uv_os_getpriority). */
const PRIORITY_CLASS: Record<number, number> = { 19: 0x40, 10: 0x4000, 0: 0x20, [-7]: 0x8000, [-14]: 0x80, [-20]: 0x100 };

function closeJob(w: WindowsWarm): void {
  if (w.job === undefined) return;
  try {
    windowsBinding().jobClose(w.job);
  } catch (err) {
    debug('warm anchor job close failed: %s', (err as Error).message);
  }
  w.job = undefined;
}

const driver: WarmDriver<WindowsWarm> = {
  ids: () => windowsBinding().hostIdentity(),
  start(path, warmArgs, done) {
    // (Node's spawn is synchronous here: not in the launch that asked for it.)
    setImmediate(() => {
      const b = windowsBinding();
      let job: number;
      let child: ChildProcess;
      try {
        job = b.jobCreate().handle;
      } catch (err) {
        debug('no warm anchor (job): %s', (err as Error).message);
        done(undefined);
        return;
      }
      try {
        child = spawnChild(path, ['--warm', ...warmArgs], {
          cwd: dirname(path),
          // (libuv adds what Windows programs need from the host's.) The
          // host's priority class as it starts the anchor: what the anchor
          // holds its host to while it waits (native/win/warm.h HostWatch;
          // read by the anchor itself, it could be a class the host took
          // after this start).
          env: { CORDON_WARM_ANCHOR: '1', CORDON_WARM_HOST_PRIORITY_CLASS: String(PRIORITY_CLASS[getPriority()] ?? 0) },
          stdio: ['ignore', 'ignore', 'ignore', 'overlapped', 'overlapped'],
          windowsHide: true,
        });
      } catch (err) {
        debug('no warm anchor: %s', (err as Error).message);
        b.jobClose(job);
        done(undefined);
        return;
      }
      const reader = child.stdio[3] as Socket | null;
      const writer = child.stdio[4] as Socket | null;
      if (child.pid === undefined || !reader || !writer) {
        child.once('error', (err) => debug('no warm anchor: %s', err.message));
        reader?.destroy();
        writer?.destroy();
        b.jobClose(job);
        done(undefined);
        return;
      }
      const w: WindowsWarm = { pid: child.pid, child, reader, writer, job };
      writer.on('error', (err) => debug('warm anchor %d: control write error: %s', w.pid, err.message));
      reader.on('error', (err) => debug('warm anchor %d: control read error: %s', w.pid, err.message));
      let remote = 0;
      try {
        // The anchor is the host's unexited child: its pid is pinned.
        remote = b.jobAttach(job, child.pid);
      } catch (err) {
        debug('warm anchor %d: job handle not duplicated: %s', w.pid, (err as Error).message);
      }
      writer.write(encodeCommand({ type: 'job', handle: remote }));
      // While it waits, it keeps no host alive.
      child.unref();
      reader.unref();
      writer.unref();
      done(w);
    });
  },
  watch(w, _warmArgs, exited) {
    w.child.once('exit', () => {
      exited();
    });
  },
  end(w) {
    // Its channel closed: it exits, running nothing (the job, empty, goes with the host's handle).
    if (!w.writer.destroyed) w.writer.destroy();
    if (!w.reader.destroyed) w.reader.destroy();
    closeJob(w);
  },
};

const pool = new WarmPool(driver, 'win32');

/** Internal, for tests: the pids of the warm anchors ready for a spawn. */
export function readyWindowsWarmPids(): number[] {
  return pool.ready().map((w) => w.pid);
}

/**
 * Internal, for tests: retires every ready warm anchor now (one still
 * starting as it arrives) and returns their pids; later spawns start new
 * ones. What a test of the host's handles leaves out of its counts: the
 * pool holds up to 8 anchors, each with its handles in the host.
 */
export function retireWindowsWarmNow(): number[] {
  return pool.retireAll().map((w) => w.pid);
}

/** The command's environment as a LAUNCH carries it (what libuv gives a cold anchor); undefined: not expressible (a cold anchor). */
function launchEnv(env: NodeJS.ProcessEnv): string[] | undefined {
  const out: string[] = [];
  const names = new Set<string>();
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue;
    if (name === '' || name.includes('=') || name.includes('\0') || String(value).includes('\0')) return undefined;
    names.add(name.toUpperCase());
    out.push(`${name}=${value}`);
  }
  for (const name of REQUIRED_ENV) {
    if (names.has(name)) continue;
    const value = process.env[name];
    if (value !== undefined && value !== '') out.push(`${name}=${value}`);
  }
  return out;
}

/** The LAUNCH line and body (native/win/warm.h). */
function launchMessage(args: readonly string[], env: readonly string[], handles: readonly number[]): Buffer | undefined {
  const parts = [...args, ...env].map((s) => Buffer.from(`${s}\0`, 'utf8'));
  const body = Buffer.concat(parts);
  if (body.length > MAX_LAUNCH_BYTES) return undefined;
  const header = Buffer.from(`LAUNCH ${args.length} ${env.length} ${body.length} ${handles.join(' ')}\n`, 'utf8');
  return Buffer.concat([header, body]);
}

/**
 * The warm anchor for this launch, handed its command, or none (start one
 * cold); undefined where this launch cannot use one (`warmArgs` undefined, a
 * stdio entry other than 'pipe', 'ignore', 'inherit', an environment a
 * LAUNCH cannot carry).
 */
export function takeWindowsWarm(path: string, warmArgs: readonly string[] | undefined, args: readonly string[], env: NodeJS.ProcessEnv, stdio: ReadonlyArray<IOType | number | Stream>): WarmTake<WindowsStarted> | undefined {
  if (warmArgs === undefined || stdio.length !== 3) return undefined;
  const modes = stdio.map((s) => (typeof s === 'string' ? MODES[s] : undefined));
  if (modes.some((m) => m === undefined)) return undefined;
  const entries = launchEnv(env);
  if (entries === undefined) return undefined;
  // (Checked before one is taken: a LAUNCH too large for the anchor is a cold start.)
  if (launchMessage(args, entries, [0, 0, 0]) === undefined) return undefined;
  return pool.take(path, warmArgs, (w) => {
    let given: { handles: number[]; fds: number[] };
    try {
      given = windowsBinding().warmStdio(w.pid, modes as number[]);
    } catch (err) {
      closeWarmFds(err);
      throw err;
    }
    const message = launchMessage(args, entries, given.handles)!;
    const sockets = given.fds.map((fd, i) => (fd < 0 ? null : new Socket({ fd, readable: i > 0, writable: i === 0 })));
    w.writer.write(message);
    return { ...w, stdin: sockets[0] ?? null, stdout: sockets[1] ?? null, stderr: sockets[2] ?? null };
  });
}

/** Closes what warmStdio() made before it failed (its error's `fds`). */
function closeWarmFds(err: unknown): void {
  const fds = (err as { fds?: unknown }).fds;
  if (!Array.isArray(fds)) return;
  for (const fd of fds) if (typeof fd === 'number' && fd >= 0) closeSync(fd);
}
