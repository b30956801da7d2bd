// The raw binding, typed in one place and never exported from the package.
// node-gyp-build finds build/Release, build/Debug or prebuilds/<platform>-<arch>;
// the anchor executable is resolved beside whichever .node was loaded, by
// absolute path, never through PATH.
import { accessSync, constants as fsConstants, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { addonNotLoaded, anchorMissing, wrongBinding, type CordonError } from './errors.js';

export interface RawProbe {
  pidfd: boolean;
  subreaper: boolean;
  procScan: boolean;
  /** Linux: cgroup v2 is mounted, the kernel has clone3 into a cgroup and cgroup.kill (5.14+), and this process's own cgroup is writable. */
  cgroup?: boolean;
  /** Windows: Job Objects are available. */
  jobObjects?: boolean;
  /** Windows: CTRL_BREAK_EVENT can be delivered (false under Wine 8). */
  ctrlBreak?: boolean;
  /** Running under Wine. */
  wine?: boolean;
  /** Windows: kernel32 has ConPTY (CreatePseudoConsole, ResizePseudoConsole, ClosePseudoConsole; Windows 10 1809+, and Wine). */
  pseudoConsole?: boolean;
  /**
   * The process table the addon reads is XNU's (libproc, sysctl): macOS, or
   * the darwin build on Linux, on the model of XNU's process table that the
   * tests run it on (test/xnu-model); capabilities() then describes the
   * process-group tier as on macOS.
   */
  xnu?: boolean;
  /** Linux: the page size in bytes (one exec string must stay under 32 pages, MAX_ARG_STRLEN). */
  pageSize?: number;
  /** Linux: sysconf(_SC_ARG_MAX), the most one exec can carry in all. */
  argMax?: number;
  /** Linux: the newest Landlock ABI this kernel has (0: none): what the `confine` option needs. */
  landlock?: number;
}

export interface RawMember {
  pid: number;
  ppid: number;
  pgid: number;
  state: string;
  command: string;
}

/** What the addon has on every platform. */
interface CommonBinding {
  probe(): RawProbe;
  listTree(anchorPid: number, groupId: number): RawMember[];
  countOpenFds(): number;
  /** The start stamp of `pid` as a decimal string ("0": no such process; Windows: also one that exited). */
  processStart(pid: number): string;
}

/** The addon on Linux and macOS. */
export interface PosixBinding extends CommonBinding {
  readonly os: 'posix';
  /**
   * posix_spawn the anchor with fds 0-2 (-1: a new pipe, -2: /dev/null, else
   * a host descriptor) and a new control socket pair's end as its fd 3.
   * `control`: the host's end; `fds`: the host's end of each new pipe, else
   * -1. Creates every descriptor it returns (none to close on throw).
   * `env` null: the host's own environment (what process.env holds on the
   * main thread), copied by the addon.
   */
  spawnAnchor(path: string, argv: string[], env: string[] | null, stdio: number[], leaseLogFd?: number): { pid: number; control: number; fds: number[] };
  /** spawnAnchor on a thread of libuv's pool (a warm anchor: the JS thread does not wait for its exec). */
  spawnWarmAnchor(path: string, argv: string[], env: string[], stdio: number[], done: (err: (Error & { code?: string }) | null, started?: { pid: number; control: number; fds: number[] }) => void): void;
  /**
   * Hands a warm anchor (native/posix/warm.h; `control`: the host's end of its
   * channel) its command: `args` as a cold anchor's, the command's
   * environment, its stdio as spawnAnchor's. Returns the host's end of each
   * new pipe, else -1; throws with the errno when nothing usable was sent.
   * `env` null: the host's own, as spawnAnchor's.
   */
  launchWarm(control: number, args: string[], env: string[] | null, stdio: number[]): number[];
  /** The host's own environment as one exec carries it: [strings, bytes with their NULs, the longest one's bytes, its name with '=' (its first 20 bytes where it has none)]. */
  environSize(): [number, number, number, string];
  /**
   * A leased anchor's endpoint (lib/lease.ts): connects, writes `line`, reads
   * the answer's first line with the descriptors it carries. `fd`: the
   * connection (-1 if the anchor closed it).
   */
  leaseRequest(endpoint: string, line: string, timeoutMs: number): { fd: number; received: string; fds: number[] };
  /** Reaps the anchor if it exited (null while it runs; code -1 and signal -1: reaped elsewhere); with `keep`, reads its exit and leaves it a zombie. */
  reapAnchor(pid: number, keep?: boolean): { code: number; signal: number } | null;
  /**
   * Linux: the host's sweep of a tree whose anchor died (native/linux/lost_tree.h):
   * SIGKILL through a pidfd to every process of this user started since
   * `since` that carries `token` or is in `session` (0: none), checked
   * again through the pidfd; walks again while a walk finds one more.
   * Throws ENOSYS without pidfds. Absent on macOS.
   */
  sweepLostTree?(token: string, session: number, since: number): { killed: number[]; unreached: number[]; rounds: number; elapsedMs: number };
  /** Signals the anchor while it is an unreaped child of the host (its pid pinned); throws ECHILD otherwise. */
  signalAnchor(pid: number, signal: number): void;
  /** Internal, for tests: a kern.procargs2 buffer as the process-group tier parses it on macOS (native/posix/procargs.h). */
  parseProcargs2(buffer: Buffer, hints?: { pointerSize?: number; self?: boolean; capacity?: number }): RawProcArgs;
}

/** parseProcargs2's answer: what the buffer says of the process's arguments and environment. */
export interface RawProcArgs {
  /** The buffer holds argc (4 bytes) at least. */
  valid: boolean;
  argc: number;
  execPath: string;
  argv: string[];
  /** All argc arguments accounted for, each NUL-ended. */
  argvComplete: boolean;
  /** argv ended at a run of NULs (a rewritten title's zero-filled area): the arguments it stands for are not listed. */
  zeroFilled: boolean;
  env: string[];
  /** 'withheld': the buffer ends where XNU cuts it when it withholds the environment; 'empty': nothing follows argv. */
  verdict: 'present' | 'withheld' | 'empty';
  /** The buffer filled `capacity`: it may hold the area's tail only. */
  cut: boolean;
}

/** The addon on Windows. */
export interface WindowsBinding extends CommonBinding {
  readonly os: 'win32';
  /** An unnamed Job Object (kill-on-close, no breakaway) held by the host. */
  jobCreate(): { handle: number };
  /**
   * Lets listTree(anchorPid) find the job, and duplicates it into the anchor:
   * returns the handle's value there.
   */
  jobAttach(handle: number, anchorPid: number): number;
  /** TerminateJobObject through the host's handle. */
  jobTerminate(handle: number): void;
  /** Live processes in the job. */
  jobActive(handle: number): number;
  /** Closes the host's handle. */
  jobClose(handle: number): void;
  /** Creates a directory whose DACL admits this user alone (protected, inherited inside); throws EEXIST if it exists. */
  makePrivateDir(path: string): void;
  /** A directory's own security (its last component not followed): what private-dir.ts's windowsDirProblem() decides on. */
  privateDirFacts(path: string): { directory: boolean; reparse: boolean; owner: string; dacl: { allow: boolean; sid: string }[] | null };
  /**
   * A client connection to the named pipe `name`, nothing written yet (identification level only: its server cannot
   * impersonate this process): a descriptor for net.Socket({ fd }), and the pid of the process serving it. Throws
   * EBUSY (every instance busy) or ENOENT (no such pipe), among others.
   */
  openPipeClient(name: string): { fd: number; serverPid: number };
  /**
   * The Job Object this process runs in: `limitFlags` its LimitFlags (the immediate job's: after Node's first
   * non-detached spawn, libuv's own), null where they could not be read. A view for tests and diagnostics: a
   * lease is decided by its anchor, from the job the anchor is in (native/win/lease.h).
   */
  ownJob(): { inJob: boolean; limitFlags: number | null };
  /**
   * A warm anchor's stdio (lib/anchor/windows-warm.ts): per entry, mode 0 a pipe (the host's end a descriptor in
   * `fds`, for net.Socket({ fd })), 1 the NUL device, 2 the host's own descriptor; what the command gets is
   * duplicated, inheritable, into the anchor `anchorPid` (its values there in `handles`, 0: none). Throws with the
   * descriptors made so far in the error's `fds`.
   */
  warmStdio(anchorPid: number, modes: number[]): { handles: number[]; fds: number[] };
  /** What an anchor started now takes from the host that could change (its token, its priority class), as text. */
  hostIdentity(): string;
}

/** The raw binding: which one is loaded is the platform's (`os` tells them apart). */
export type RawBinding = PosixBinding | WindowsBinding;

const require = createRequire(import.meta.url);
export const packageRoot = join(dirname(fileURLToPath(import.meta.url)), '..');

let loaded: { binding: RawBinding; path: string } | undefined;
let loadError: CordonError | undefined;

export function binding(): RawBinding {
  if (loaded) return loaded.binding;
  if (loadError) throw loadError;
  try {
    const gypBuild = require('node-gyp-build') as { resolve(dir: string): string };
    const path = gypBuild.resolve(packageRoot);
    // Tagged with its platform, so that each host side of an anchor takes the binding it is written for.
    const addon = require(path) as object;
    const typed = process.platform === 'win32' ? { ...addon, os: 'win32' } : { ...addon, os: 'posix' };
    loaded = { binding: typed as RawBinding, path };
    return loaded.binding;
  } catch (cause) {
    loadError = addonNotLoaded(cause);
    throw loadError;
  }
}

/** The binding on Linux and macOS (the POSIX host side of an anchor). */
export function posixBinding(): PosixBinding {
  const b = binding();
  if (b.os !== 'posix') throw wrongBinding('POSIX', b.os);
  return b;
}

/** The binding on Windows (the Windows host side of an anchor). */
export function windowsBinding(): WindowsBinding {
  const b = binding();
  if (b.os !== 'win32') throw wrongBinding('Windows', b.os);
  return b;
}

let anchorChecked: string | undefined;

/**
 * Absolute path of the anchor executable that sits beside the loaded addon,
 * checked once; an anchor removed later fails its spawn, which is reported as
 * ERR_CORDON_ANCHOR_MISSING as well (the code's name is API).
 */
export function anchorPath(): string {
  if (anchorChecked !== undefined) return anchorChecked;
  binding();
  const name = process.platform === 'win32' ? 'cordon-anchor.exe' : 'cordon-anchor';
  const path = join(dirname(loaded!.path), name);
  try {
    if (!statSync(path).isFile()) throw new Error(`${path} is not a file`);
    accessSync(path, fsConstants.X_OK);
  } catch (cause) {
    throw anchorMissing(path, cause);
  }
  anchorChecked = path;
  return path;
}

let probed: RawProbe | undefined;
export function probe(): RawProbe {
  probed ??= binding().probe();
  return probed;
}
