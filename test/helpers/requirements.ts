// What the suite needs besides Node, a POSIX sh, coreutils (sleep, nohup, env,
// date +%N, seq, ...) and util-linux's plain setsid, which nearly every file
// uses and which are taken as given: the programs and machine facts a few
// tests need, each probed once per run. A test whose need is missing here is
// skipped with the reason in its title (itWhere in tier.ts), never failed at
// module load and never run on a guessed value:
//
//   const why = missing('perl') ?? '';
//   itWhere(why === '', 'title', why, async () => { ... });
//
// The global setup (global-setup.ts) probes the whole table once, prints it
// (`requirements: perl yes, ss NO (iproute2), ...`) and hands the answers to
// the test workers in CORDON_TEST_REQUIREMENTS; a worker started without it
// (a file run without the global setup) probes what it is asked, once.
// CORDON_TEST_PRETEND_MISSING=perl,ss (names of the table, comma-separated)
// makes the run treat those as missing: a way to see the skips on a machine
// that has everything. .ci/run installs the packages named below.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

export const REQUIREMENTS_VAR = 'CORDON_TEST_REQUIREMENTS';
export const PRETEND_VAR = 'CORDON_TEST_PRETEND_MISSING';

const RUNUSER = ['/usr/sbin/runuser', '/sbin/runuser', '/usr/bin/runuser'];

interface Need {
  /** How a reason names it. */
  what: string;
  /** Which tests need it. */
  for: string;
  /** The Debian/Ubuntu package that has it. */
  apt: string;
  /** Whether this machine has it (a bounded probe, without cordon). */
  probe: () => boolean;
}

/** Exit status 0 within 20 s (a loaded machine), stdout matching `out` if given. */
function runs(command: string, args: string[], out?: RegExp): boolean {
  const r = spawnSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 20_000 });
  return r.error === undefined && r.status === 0 && (out === undefined || out.test(r.stdout));
}

/** Whether `id` is mapped in this process's user namespace (Linux: /proc/self/uid_map or gid_map). */
function mapped(file: string, id: number): boolean {
  if (!existsSync(file)) return false;
  return readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .some((line) => {
      const [inside, , count] = line.trim().split(/\s+/).map(Number);
      return inside! <= id && id < inside! + count!;
    });
}

let nobody: { uid: number; gid: number } | null | undefined;

/**
 * The ids the system's user nobody really has (`id -u nobody`, `id -g
 * nobody`): 65534 on Debian, -2 on macOS. undefined where there is no such
 * user. Tests that act as nobody use these, never a constant.
 */
export function nobodyIds(): { uid: number; gid: number } | undefined {
  if (nobody === undefined) {
    const id = (flag: string): number | undefined => {
      const r = spawnSync('id', [flag, 'nobody'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 20_000 });
      const n = Number(r.stdout?.trim());
      return r.status === 0 && r.stdout.trim() !== '' && Number.isInteger(n) ? n : undefined;
    };
    const uid = id('-u');
    const gid = id('-g');
    nobody = uid === undefined || gid === undefined ? null : { uid, gid };
  }
  return nobody ?? undefined;
}

/** An id cordon's uid and gid options take (lib/credentials.ts): macOS's nobody, -2, is not one. */
const acceptable = (id: number): boolean => Number.isInteger(id) && id >= 0 && id <= 2147483647;

/**
 * The user nobody is there with ids cordon accepts, usable here: on Linux
 * uid 65534 (as the tests of other users expect) mapped in this user
 * namespace (/proc/self/uid_map and gid_map); elsewhere, whatever `id` says,
 * in cordon's range (macOS's nobody is -2: missing there).
 */
function nobodyHere(): boolean {
  const ids = nobodyIds();
  if (!ids || !acceptable(ids.uid) || !acceptable(ids.gid)) return false;
  if (process.platform !== 'linux') return true;
  return ids.uid === 65534 && mapped('/proc/self/uid_map', ids.uid) && mapped('/proc/self/gid_map', ids.gid);
}

const TABLE = {
  cc: {
    what: 'a C compiler (cc)',
    for: 'the compiled fixture, test/fixtures/cordon-fixture.c: the pid hoppers and bystanders (coverage, process-group-escapes, leak-check), the suite\'s setsid and sleep off Linux, sessions on macOS (getsid), the darwin model (test/xnu-model)',
    apt: 'gcc',
    probe: () => runs('cc', ['--version']),
  },
  perl: {
    what: 'perl',
    for: 'the marking fork storm (cgroup-scale), the fork loop (limits, cgroup-v2-leaf)',
    apt: 'perl',
    probe: () => runs('perl', ['-e', 'use POSIX (); exit 0']),
  },
  python3: {
    what: 'python3 (ctypes, fcntl, pty, termios)',
    for: 'the terminal (cli), the interleaving fixture (output-lines), the FUSE fixture (hung-mount), the subreaper probe (capabilities, tier-availability)',
    apt: 'python3',
    probe: () => runs('python3', ['-c', 'import ctypes, fcntl, pty, select, termios']),
  },
  ss: {
    what: 'ss (iproute2)',
    for: "a socket pair's peer (wait-delay)",
    apt: 'iproute2',
    probe: () => runs('ss', ['-xH']),
  },
  getconf: {
    what: 'getconf',
    for: 'PAGESIZE, ARG_MAX and CLK_TCK (input-limits)',
    apt: 'libc-bin',
    probe: () => runs('getconf', ['PAGESIZE'], /^[1-9]\d*\n?$/),
  },
  'setsid -f': {
    what: 'setsid -f (util-linux)',
    for: 'daemons started at once (helpers/daemons.ts; coverage, process-group, process-group-escapes)',
    apt: 'util-linux',
    probe: () => runs('setsid', ['-f', 'true']),
  },
  prlimit: {
    what: 'prlimit (util-linux)',
    for: "a running anchor's descriptor limit lowered (cgroup-scale)",
    apt: 'util-linux',
    probe: () => runs('prlimit', ['--pid', String(process.pid), '--nofile']),
  },
  strace: {
    what: 'strace, allowed to attach (ptrace)',
    for: "a warm anchor's exit held back while its host's result settles (warm)",
    apt: 'strace',
    probe: () => runs('strace', ['-qq', '-e', 'trace=exit_group', '-o', '/dev/null', 'true']),
  },
  runuser: {
    what: 'runuser (util-linux)',
    for: 'acting as another user (other-users, process-group-escapes)',
    apt: 'util-linux',
    probe: () => runuserPath() !== undefined,
  },
  nobody: {
    what: "the user nobody with ids cordon takes (Linux: 65534, mapped here; macOS's nobody is -2, which cordon's uid/gid refuse)",
    for: 'another user (other-users, credentials, lease, process-group-escapes)',
    apt: 'base-passwd',
    probe: nobodyHere,
  },
  ps: {
    what: 'ps (procps)',
    for: "the ps observer (CORDON_TEST_OBSERVER=ps), checked against /proc (observer)",
    apt: 'procps',
    probe: () => runs('ps', ['-p', String(process.pid), '-o', 'pid=,lstart=']),
  },
  script: {
    what: 'script (util-linux: bsdutils on Debian)',
    for: 'a real program that runs its command in a child on a pseudo-terminal (leftovers)',
    apt: 'bsdutils',
    probe: () => runs('sh', ['-c', 'command -v script']),
  },
  tmux: {
    what: 'tmux',
    for: 'one more real daemon, where installed (helpers/daemons.ts)',
    apt: 'tmux',
    probe: () => runs('tmux', ['-V']),
  },
  'ssh-agent': {
    what: 'ssh-agent',
    for: 'one more real daemon, where installed (helpers/daemons.ts)',
    apt: 'openssh-client',
    probe: () => runs('sh', ['-c', 'command -v ssh-agent']),
  },
  cmake: {
    what: 'cmake',
    for: 'the cmake-js build and its configure checks (build-backends)',
    apt: 'cmake',
    probe: () => runs('cmake', ['--version']),
  },
  ninja: {
    what: 'ninja',
    for: "the Ninja Multi-Config configure check, standing in for Visual Studio (build-backends)",
    apt: 'ninja-build',
    probe: () => runs('ninja', ['--version']),
  },
} satisfies Record<string, Need>;

export type Requirement = keyof typeof TABLE;
export const requirements = Object.keys(TABLE) as Requirement[];

/** The path of runuser, where installed (it lives in sbin, often off a user's PATH). */
export function runuserPath(): string | undefined {
  return RUNUSER.find((p) => existsSync(p));
}

function pretended(): Set<string> {
  const names = (process.env[PRETEND_VAR] ?? '').split(',').map((n) => n.trim()).filter(Boolean);
  const unknown = names.filter((n) => !(n in TABLE));
  if (unknown.length > 0) throw new Error(`${PRETEND_VAR} names ${unknown.join(', ')}, not in the table (${requirements.join(', ')})`);
  return new Set(names);
}

/** Probes one requirement now (false where PRETEND_VAR names it). */
function probe(name: Requirement): boolean {
  return !pretended().has(name) && TABLE[name].probe();
}

/** Probes the whole table (the global setup, once per run). */
export function probeAll(): Record<Requirement, boolean> {
  return Object.fromEntries(requirements.map((n) => [n, probe(n)])) as Record<Requirement, boolean>;
}

/** The run's line: `requirements: perl yes, ss NO (iproute2), ...`. */
export function requirementsLine(found: Record<Requirement, boolean>): string {
  const pretend = pretended();
  const said = requirements.map((n) => (found[n] ? `${n} yes` : `${n} NO (${pretend.has(n) ? PRETEND_VAR : `install ${TABLE[n].apt}`})`));
  return `requirements: ${said.join(', ')}`;
}

let known: Partial<Record<Requirement, boolean>> | undefined;

function answers(): Partial<Record<Requirement, boolean>> {
  if (known) return known;
  const handed = process.env[REQUIREMENTS_VAR];
  if (handed === undefined) return (known = {});
  try {
    known = JSON.parse(handed) as Partial<Record<Requirement, boolean>>;
  } catch {
    throw new Error(`${REQUIREMENTS_VAR} is not the JSON the global setup writes: ${JSON.stringify(handed)}`);
  }
  return known;
}

/** Whether this machine has `name` (as the global setup found, else probed now, once). */
export function has(name: Requirement): boolean {
  if (!(name in TABLE)) throw new Error(`no requirement ${JSON.stringify(name)} in test/helpers/requirements.ts`);
  const a = answers();
  return (a[name] ??= probe(name));
}

/**
 * Why a test that needs all of `names` cannot run here, for its skipped
 * title (`needs perl, which this machine lacks (apt package perl)`), or
 * undefined where it can.
 */
export function missing(...names: Requirement[]): string | undefined {
  const lacking = names.filter((n) => !has(n));
  if (lacking.length === 0) return undefined;
  const pretend = pretended();
  const which = (n: Requirement): string =>
    pretend.has(n) ? `this run pretends is missing (${PRETEND_VAR})` : process.platform === 'linux' ? `this machine lacks (apt package ${TABLE[n].apt})` : 'this machine lacks';
  return lacking.map((n) => `needs ${TABLE[n].what}, which ${which(n)}`).join('; ');
}

/**
 * A test that runs only where `ok` (a platform, say): where it cannot, it is
 * skipped with the reason in its title (`skipIf(w.skip)(`title${w.note}`)`),
 * so the run's output says why, never a silent `runIf`.
 */
export function onlyWhere(ok: boolean, reason: string): { skip: boolean; note: string } {
  return ok ? { skip: false, note: '' } : { skip: true, note: ` [skipped: ${reason}]` };
}
