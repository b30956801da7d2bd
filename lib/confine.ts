// The `confine` option (issue #49): the tree confined by the kernel on top of
// its containment tier. Validated here, before anything runs; the anchor
// prepares the confinement and the command's side of its fork enters it
// right before exec: on Linux a Landlock ruleset and a network namespace of
// the tree's own (native/linux/confine.h), on macOS a Seatbelt profile
// applied with sandbox_init (native/darwin/confine.h; built from Apple's
// documented and the coding agents' observed behaviour, never run on a Mac by
// this project's tests). docs/confine.md says what is enforced and what is not.
import { chownSync, mkdtempSync, realpathSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join, sep } from 'node:path';
import { confineUnenforceable, confineUnsupported, invalidArg, type CordonError } from './errors.js';

export type ConfineNetwork = 'none' | 'loopback' | 'all';

export interface ConfineOption {
  /** Directories (or files) the tree may write below; everything else is read-only to it. Absolute, existing. */
  write: string[];
  /** Directories (or files) the tree may not read (nor write) below. Absolute, existing. */
  denyRead?: string[];
  /** 'none': no network at all; 'loopback': only the tree's own loopback; 'all' (default): unchanged. */
  network?: ConfineNetwork;
}

/** The option as the anchor is told it: canonical paths. */
export interface Confine {
  write: string[];
  denyRead: string[];
  network: ConfineNetwork;
}

/** How the kernel confines the tree: Landlock (Linux) or a Seatbelt profile (macOS). */
export type ConfineMechanism = 'landlock' | 'seatbelt';

/** What `result.confined` says: how the tree was confined. */
export interface ConfinedResult {
  /**
   * 'landlock' (Linux: a Landlock ruleset, and a network namespace for network 'none' and 'loopback')
   * or 'seatbelt' (macOS: a Seatbelt profile applied with sandbox_init before exec; what it enforces
   * was never observed on a Mac by cordon's tests: docs/confine.md, "macOS").
   */
  mechanism: ConfineMechanism;
  /** The Landlock ABI the ruleset was built for (this kernel's newest); 0 on macOS (no Landlock there). */
  landlockAbi: number;
  /** Canonical paths the tree could write below (its own temp dir, `tmpdir`, included). */
  write: string[];
  /** Canonical paths the tree could not read below. */
  denyRead: string[];
  /**
   * How the network was confined. Linux: 'none' (a network namespace with no interface up, and Landlock's TCP rules
   * where the ABI has them), 'loopback' (a network namespace with only `lo` up). macOS: 'none' (the profile denies
   * every socket's bind, connect and traffic, Unix-domain path sockets included), 'loopback' (only to and from the
   * loopback addresses, the host's listeners there included). 'all': unchanged.
   */
  network: ConfineNetwork;
  /** The tree's private temp dir (TMPDIR), removed when the tree has ended. */
  tmpdir: string;
}

const isDirOrSame = (path: string, dir: string) => path === dir || path.startsWith(dir === sep ? dir : dir + sep);

function paths(name: string, value: unknown): string[] {
  if (!Array.isArray(value)) throw invalidArg(name, value, 'an array of absolute paths', 'ERR_INVALID_ARG_TYPE');
  return value.map((p: unknown, i) => {
    const what = `${name}[${i}]`;
    if (typeof p !== 'string') throw invalidArg(what, p, 'an absolute path string', 'ERR_INVALID_ARG_TYPE');
    if (p.includes('\0') || !isAbsolute(p)) throw invalidArg(what, p, 'an absolute path');
    try {
      statSync(p);
      // Landlock holds inodes; what is compared here are the paths they have.
      return realpathSync(p);
    } catch {
      throw invalidArg(what, p, 'a path that exists');
    }
  });
}

/** Validates `confine` (undefined: not asked for). Throws a CordonError before anything runs. */
export function confineOption(value: unknown): Confine | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidArg('confine', value, 'an object ({ write: [...], denyRead?: [...], network?: ... })', 'ERR_INVALID_ARG_TYPE');
  }
  const o = Object.assign(Object.create(null) as Record<string, unknown>, value);
  for (const key of Object.keys(o)) {
    if (!['write', 'denyRead', 'network'].includes(key)) throw invalidArg(`confine.${key}`, o[key], 'left out (confine takes write, denyRead and network)');
  }
  const write = paths('confine.write', o.write);
  const denyRead = o.denyRead === undefined ? [] : paths('confine.denyRead', o.denyRead);
  const network = o.network ?? 'all';
  if (network !== 'none' && network !== 'loopback' && network !== 'all') {
    throw invalidArg('confine.network', network, "one of 'none', 'loopback', 'all'", typeof network === 'string' ? 'ERR_INVALID_ARG_VALUE' : 'ERR_INVALID_ARG_TYPE');
  }
  for (const d of denyRead) {
    if (d === sep) throw invalidArg('confine.denyRead', d, 'a path below / (nothing could run with / unreadable)');
    // Landlock only ever adds access: a rule on a writable directory grants
    // reading all of it, so no part of it can be denied.
    const over = write.find((w) => isDirOrSame(d, w));
    if (over !== undefined) throw invalidArg('confine.denyRead', d, `a path outside every write path (it is below ${JSON.stringify(over)}, which the tree may read and write)`);
    const under = write.find((w) => isDirOrSame(w, d));
    if (under !== undefined) throw invalidArg('confine.write', under, `a path outside every denyRead path (it is below ${JSON.stringify(d)})`);
  }
  return { write, denyRead, network };
}

/**
 * Where `confine` cannot be enforced here: the error to throw before anything runs, else undefined.
 * `platform` is the kernel whose confinement the anchor applies (capabilities.ts, processTablePlatform:
 * 'darwin' on the model of XNU too). macOS needs nothing more: sandbox_init takes no privilege.
 */
export function confineRefusal(c: Confine, platform: NodeJS.Platform, landlockAbi: number, capSysAdmin: boolean): CordonError | undefined {
  if (platform === 'darwin') return undefined;
  if (platform !== 'linux') return confineUnsupported(platform);
  if (landlockAbi < 1) return confineUnenforceable('landlock');
  if (c.network !== 'all' && !capSysAdmin) return confineUnenforceable('netns', c.network);
  return undefined;
}

/** The tree's own temp dir (0700, made by mkdtemp), the TMPDIR its members write to. */
export function makeConfineTmpdir(uid?: number, gid?: number): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'cordon-confine-')));
  // The command's own when it runs as another user (uid, gid): still 0700.
  // (A host that may not chown cannot switch users either: the anchor then refuses the launch, typed.)
  if (uid !== undefined || gid !== undefined) {
    try {
      chownSync(dir, uid ?? -1, gid ?? -1);
    } catch {
      // (left the host's)
    }
  }
  return dir;
}

export function removeConfineTmpdir(dir: string): void {
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch {
    // (a member may still write to it: what is left is left in the system's temp dir)
  }
}

/** The anchor's arguments for `confine`, the tree's temp dir as one more write path. */
export function anchorConfineArgs(c: Confine | undefined, dir: string | undefined): string[] {
  if (!c) return [];
  return [
    '--confine',
    ...[...c.write, ...(dir ? [dir] : [])].flatMap((w) => ['--confine-write', w]),
    ...c.denyRead.flatMap((d) => ['--confine-deny-read', d]),
    ...(c.network !== 'all' ? ['--confine-network', c.network] : []),
  ];
}
