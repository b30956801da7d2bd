// How the tests look at processes from outside, never through cordon: one
// interface, two observers.
//
//   proc  reads /proc (stat, cmdline, environ, status): Linux only, the default there
//   ps    runs the ps command, the environment included: procps `ps ... e` on
//         Linux, BSD `ps -E` on macOS, the default there
//
// CORDON_TEST_OBSERVER=proc|ps picks one (the global setup prints which);
// `.ci/ps-observer.sh` runs the process-group suite on Linux with `ps`, so the
// path the macOS suite takes is exercised here.
//
// Identity: a process is its pid and its start time, an opaque string compared
// for equality only. /proc gives the start in clock ticks (10 ms); ps gives
// `lstart`, whole seconds: with ps, a pid handed out again within the same
// second is taken for the same process. Sessions too are opaque strings,
// compared for equality only: the session id (/proc; procps `sid`; on macOS,
// whose ps has no session id, only `sess`, an opaque handle often 0, the
// compiled fixture's `getsid <pid>`, getsid(2), asked when a test reads it).
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fixtureProgram } from './compiled.js';

export const OBSERVER_VAR = 'CORDON_TEST_OBSERVER';
export const TAG_VAR = 'CORDON_TEST_TAG';

export type ObserverName = 'proc' | 'ps';

export interface Stat {
  ppid: number;
  pgid: number;
  /** The session, opaque: equal for two processes in one session. */
  sid: string;
  /** One letter: R, S, D, T, Z, ... */
  state: string;
  /** The start time, opaque: with the pid, the process's identity. */
  start: string;
}

export interface ProcInfo {
  pid: number;
  ppid: number;
  state: string;
  command: string;
}

/**
 * A process's user and group ids: uid and gid are [real, effective, saved]
 * and, where the system has one (Linux), the filesystem id; groups are the
 * supplementary groups, undefined where the observer cannot tell (macOS ps).
 */
export interface Credentials {
  uid: number[];
  gid: number[];
  groups: number[] | undefined;
}

/** Which processes carry the tag variable: with this exact value, or with a value starting with `prefix`. */
export type TagMatch = { value: string } | { prefix: string };

export interface Observer {
  readonly name: ObserverName;
  /** What a process is now; undefined when there is no process with that pid. */
  stat(pid: number): Stat | undefined;
  /** Its arguments joined by spaces ('' when gone). */
  cmdline(pid: number): string;
  /**
   * Its environment, one `NAME=value` a string, as far as this observer may
   * read it ([] for an empty one or one withheld: another user's, or on macOS
   * a platform binary's); undefined when gone. ps joins entries with blanks:
   * a value with a blank before a `NAME=` in it is split there.
   */
  environ(pid: number): string[] | undefined;
  /** Every live process but this one (and the observer's own) whose environment matches, zombies left out. */
  tagged(match: TagMatch): ProcInfo[];
  /** The process's environment has TAG_VAR=`tag` (false when gone). */
  hasTag(pid: number, tag: string): boolean;
  /** Every process with its stat. */
  list(): Array<{ pid: number } & Stat>;
  /**
   * Its CPU time, user and system, in seconds; undefined when gone. /proc
   * counts clock ticks (10 ms); ps shows `time`: hundredths on macOS, whole
   * seconds from procps.
   */
  cpuSeconds(pid: number): number | undefined;
  /** Its user and group ids (Credentials); undefined when gone. */
  credentials(pid: number): Credentials | undefined;
  /**
   * The processes above `found` (their parents, and theirs) whose environment
   * this observer is not shown, up to pid 1 and never this process or one of
   * its ancestors: on macOS, Apple's sh or perl that started a tagged process
   * carries the tag unseen (ps -E is withheld a platform binary's
   * environment), so the leak check takes it by lineage. /proc is shown every
   * environment of this user's: none there.
   */
  hiddenParents(found: ProcInfo[]): ProcInfo[];
  /** Its ignored, caught and blocked signals as bit masks (bit n-1 is signal n); undefined when gone. */
  signals(pid: number): { ignored: bigint; caught: bigint; blocked: bigint } | undefined;
  /** Its open descriptors, fd -> what /proc links it to. Only /proc can answer. */
  openFds(pid: number | 'self'): Map<number, string>;
}

/** A question the selected observer cannot answer, or a bad selection. */
export class ObserverError extends Error {
  override name = 'ObserverError';
}

const dead = (state: string): boolean => state === 'Z' || state === 'X';

// ---- proc ----------------------------------------------------------------

/** /proc/<pid>/stat's fields from the state on (the name, which may hold spaces, left out); undefined when gone. */
function procStatFields(pid: number): string[] | undefined {
  let s: string;
  try {
    s = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  return s.slice(s.lastIndexOf(')') + 2).split(' ');
}

function procStat(pid: number): Stat | undefined {
  const f = procStatFields(pid);
  return f && { state: f[0]!, ppid: Number(f[1]), pgid: Number(f[2]), sid: f[3]!, start: f[19]! };
}

function procPids(): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number);
}

function procEnvironHas(pid: number, match: TagMatch): boolean {
  let env: Buffer;
  try {
    env = readFileSync(`/proc/${pid}/environ`);
  } catch {
    return false;
  }
  // Each entry ends with \0; an entry starts the file or follows a \0.
  const entry = 'value' in match ? `${TAG_VAR}=${match.value}\0` : `${TAG_VAR}=${match.prefix}`;
  for (let at = env.indexOf(entry); at >= 0; at = env.indexOf(entry, at + 1)) if (at === 0 || env[at - 1] === 0) return true;
  return false;
}

function procCmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0+$/, '').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

function procEnviron(pid: number): string[] | undefined {
  let env: string;
  try {
    env = readFileSync(`/proc/${pid}/environ`, 'utf8');
  } catch (e) {
    // Another user's: there, but not readable (as ps shows it: no environment).
    return (e as NodeJS.ErrnoException).code === 'EACCES' ? [] : undefined;
  }
  const st = procStat(pid);
  return !st || dead(st.state) ? undefined : env.split('\0').filter((e) => e !== '');
}

let clockTicks: number | undefined;

/** USER_HZ, the unit of /proc's utime and stime (getconf CLK_TCK; 100 on every Linux cordon builds for). */
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 20_000 });
    const n = Number(r.stdout?.trim());
    clockTicks = r.status === 0 && Number.isInteger(n) && n > 0 ? n : 100;
  }
  return clockTicks;
}

function procCpuSeconds(pid: number): number | undefined {
  const f = procStatFields(pid);
  return f && (Number(f[11]) + Number(f[12])) / ticksPerSecond();
}

/** ps's `time`, [[dd-]hh:]mm:ss[.cc] (procps: [dd-]hh:mm:ss), in seconds. */
export function parsePsTime(text: string): number {
  const m = /^\s*(?:(\d+)-)?((?:\d+:){1,2}\d+(?:\.\d+)?)\s*$/.exec(text);
  if (!m) throw new ObserverError(`the ps observer cannot read this CPU time of ps: ${JSON.stringify(text)}`);
  const seconds = m[2]!.split(':').reduce((sum, part) => sum * 60 + Number(part), 0);
  return Number(m[1] ?? 0) * 86_400 + seconds;
}

export const procObserver: Observer = {
  name: 'proc',
  stat: procStat,
  cmdline: procCmdline,
  environ: procEnviron,
  cpuSeconds: procCpuSeconds,
  tagged(match) {
    const out: ProcInfo[] = [];
    for (const pid of procPids()) {
      if (pid === process.pid || !procEnvironHas(pid, match)) continue;
      const st = procStat(pid);
      if (!st || dead(st.state)) continue;
      out.push({ pid, ppid: st.ppid, state: st.state, command: procCmdline(pid) });
    }
    return out;
  },
  hasTag: (pid, tag) => procEnvironHas(pid, { value: tag }),
  list() {
    const out: Array<{ pid: number } & Stat> = [];
    for (const pid of procPids()) {
      const st = procStat(pid);
      if (st) out.push({ pid, ...st });
    }
    return out;
  },
  signals(pid) {
    let status: string;
    try {
      status = readFileSync(`/proc/${pid}/status`, 'utf8');
    } catch {
      return undefined;
    }
    const ign = /^SigIgn:\s*([0-9a-f]+)$/m.exec(status)?.[1];
    const cgt = /^SigCgt:\s*([0-9a-f]+)$/m.exec(status)?.[1];
    // The process's own mask (a thread's is per thread: SigBlk of the main thread, as ps shows it).
    const blk = /^SigBlk:\s*([0-9a-f]+)$/m.exec(status)?.[1];
    return ign === undefined || cgt === undefined || blk === undefined
      ? undefined
      : { ignored: BigInt(`0x${ign}`), caught: BigInt(`0x${cgt}`), blocked: BigInt(`0x${blk}`) };
  },
  credentials(pid) {
    let status: string;
    try {
      status = readFileSync(`/proc/${pid}/status`, 'utf8');
    } catch {
      return undefined;
    }
    const field = (name: string) => (new RegExp(`^${name}:[ \\t]*([^\\n]*)$`, 'm').exec(status)?.[1] ?? '').trim().split(/\s+/).filter(Boolean).map(Number);
    return { uid: field('Uid'), gid: field('Gid'), groups: field('Groups') };
  },
  hiddenParents: () => [],
  openFds: procFds,
};

function procFds(pid: number | 'self'): Map<number, string> {
  const dir = `/proc/${pid}/fd`;
  const out = new Map<number, string>();
  for (const name of readdirSync(dir)) {
    let target: string;
    try {
      target = readlinkSync(`${dir}/${name}`);
    } catch {
      continue; // closed meanwhile
    }
    out.set(Number(name), target);
  }
  return out;
}

// ---- ps -------------------------------------------------------------------

const darwin = process.platform === 'darwin';
// The same columns from procps and from BSD ps: pid, ppid, pgid, the session
// (procps `sid`; BSD ps has no session id, `sess` is an opaque handle), the
// start (`lstart`, `%c` in the C locale: "Mon Nov 30 23:07:18 2026"), the state.
const STAT_COLUMNS = `pid=,ppid=,pgid=,${darwin ? 'sess' : 'sid'}=,lstart=,stat=`;
// The environment after the arguments: BSD `-E`, procps's BSD-style `e`.
const WITH_ENV = darwin ? '-E' : 'e';
/**
 * The session of a process by getsid(2), through the compiled fixture
 * (`cordon-fixture getsid <pid>`): macOS ps shows no session id. undefined
 * when the process is gone. Needs a C compiler (requirements: cc).
 */
export function sessionByGetsid(pid: number): string | undefined {
  const r = spawnSync(fixtureProgram(), ['getsid', String(pid)], { encoding: 'utf8', timeout: 20_000 });
  if (r.error) throw new ObserverError(`the ps observer could not run the compiled fixture's getsid: ${r.error.message}`, { cause: r.error });
  const sid = r.stdout.trim();
  if (r.status === 0 && /^\d+$/.test(sid)) return sid;
  if (/No such process/i.test(r.stderr)) return undefined;
  throw new ObserverError(`the ps observer: getsid(${pid}) failed (status ${r.status}): ${r.stderr.trim()}`);
}

const LINE = /^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+([A-Z][a-z]{2}\s+[A-Z][a-z]{2}\s+\d{1,2}\s+\d{1,2}:\d{2}:\d{2}\s+\d{4})\s+(\S+)(?:\s(.*))?$/;

interface PsRow {
  pid: number;
  stat: Stat;
  /** What came after the state column: the arguments (and the environment, when asked for), leading blanks dropped. */
  rest: string;
}

/** Runs ps; its own pid comes back too (a scan sees ps itself). */
function ps(args: string[]): { out: string; self: number | undefined } {
  const r = spawnSync('ps', args, {
    encoding: 'utf8',
    // A fixed locale and zone: lstart's text is the start identity.
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C', TZ: 'UTC' },
    maxBuffer: 512 * 1024 * 1024,
    timeout: 30_000,
  });
  const what = `ps ${args.join(' ')}`;
  if (r.error) throw new ObserverError(`the ps observer could not run \`${what}\`: ${r.error.message}`, { cause: r.error });
  // Exit status 1 with nothing on stderr: -p selected no process (both ps).
  if ((r.status !== 0 && r.status !== 1) || r.stderr.trim() !== '') {
    throw new ObserverError(`the ps observer: \`${what}\` failed (status ${r.status}, signal ${r.signal}): ${r.stderr.trim()}`);
  }
  return { out: r.stdout, self: r.pid };
}

/**
 * Parses ps lines of STAT_COLUMNS (then anything); a line that does not parse
 * is an error, not a process less. The session: the column itself (true:
 * procps `sid`), read when asked through `withSession` (a function: macOS,
 * getsid), or none (false: asking is an error).
 */
export function parsePsLines(out: string, withSession: boolean | ((pid: number) => string | undefined) = darwin ? sessionByGetsid : true): PsRow[] {
  const rows: PsRow[] = [];
  for (const line of out.split('\n')) {
    if (line.trim() === '') continue;
    const m = LINE.exec(line);
    if (!m) throw new ObserverError(`the ps observer cannot parse this line of ps: ${JSON.stringify(line)}`);
    const pid = Number(m[1]);
    const stat: Stat = { ppid: Number(m[2]), pgid: Number(m[3]), sid: m[4]!, start: m[5]!.replace(/\s+/g, ' '), state: m[6]![0]! };
    if (typeof withSession === 'function') {
      // Read once, when a test asks (a list of every process asks for few).
      const read = withSession;
      let sid: string | undefined;
      Object.defineProperty(stat, 'sid', {
        enumerable: false,
        get() {
          sid ??= read(pid);
          if (sid === undefined) throw new ObserverError(`the ps observer cannot tell the session of pid ${pid}: it is gone`);
          return sid;
        },
      });
    } else if (!withSession && /^0+$/.test(m[4]!)) {
      // BSD ps's `sess` of 0: this system hides the session handle; asking for it is an error, not a shared session.
      Object.defineProperty(stat, 'sid', {
        enumerable: false,
        get() {
          throw new ObserverError(`the ps observer cannot tell the session of pid ${pid}: ps shows no session here (sess is 0)`);
        },
      });
    }
    const row: PsRow = { pid, stat, rest: (m[7] ?? '').replace(/^\s+/, '') };
    rows.push(row);
  }
  return rows;
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * The tag as ps shows it: a whole word of the arguments and environment, which
 * ps joins with blanks (a value with blanks in it is ps's problem, not a tag's:
 * tags have none).
 */
export function tagPattern(match: TagMatch): RegExp {
  const value = 'value' in match ? `${escapeRegExp(match.value)}(?=\\s|$)` : escapeRegExp(match.prefix);
  return new RegExp(`(?:^|\\s)${TAG_VAR}=${value}`);
}

function psStat(pid: number): Stat | undefined {
  return parsePsLines(ps(['-p', String(pid), '-o', STAT_COLUMNS]).out).find((r) => r.pid === pid)?.stat;
}

function psCmdline(pid: number): string {
  return ps(['-p', String(pid), '-ww', '-o', 'args=']).out.replace(/\n$/, '').replace(/^\s+/, '');
}

/** A word that starts an environment entry: NAME= (ps shows the entries after the arguments, blank-separated). */
const ENTRY_START = /\s+(?=[A-Za-z_][A-Za-z0-9_]*=)/;

function psEnviron(pid: number): string[] | undefined {
  // Two looks, with and without the environment: what follows the arguments
  // is the environment. An exec between them changes the arguments: look again.
  for (let attempt = 0; attempt < 5; attempt++) {
    const columns = ['-p', String(pid), '-ww', '-o', `${STAT_COLUMNS},args=`];
    const withEnv = parsePsLines(ps([...columns, WITH_ENV]).out).find((r) => r.pid === pid);
    const bare = parsePsLines(ps(columns).out).find((r) => r.pid === pid);
    if (!withEnv || !bare || dead(bare.stat.state)) return undefined;
    if (bare.stat.start !== withEnv.stat.start || !withEnv.rest.startsWith(bare.rest)) continue;
    const tail = withEnv.rest.slice(bare.rest.length).trim();
    return tail === '' ? [] : tail.split(ENTRY_START);
  }
  throw new ObserverError(`the ps observer could not read the environment of pid ${pid}: its arguments kept changing between two looks`);
}

export const psObserver: Observer = {
  name: 'ps',
  stat: psStat,
  cmdline: psCmdline,
  environ: psEnviron,
  cpuSeconds(pid) {
    const line = ps(['-p', String(pid), '-o', 'pid=,time=']).out;
    const m = /^\s*(\d+)\s+(\S+)\s*$/m.exec(line);
    return !m || Number(m[1]) !== pid ? undefined : parsePsTime(m[2]!);
  },
  tagged(match) {
    const pattern = tagPattern(match);
    const { out, self } = ps(['-A', '-ww', '-o', `${STAT_COLUMNS},args=`, WITH_ENV]);
    const hits = parsePsLines(out).filter((r) => r.pid !== process.pid && r.pid !== self && !dead(r.stat.state) && pattern.test(r.rest));
    if (hits.length === 0) return [];
    // The arguments without the environment: a second look, by pid. A process
    // gone meanwhile, or whose pid now has another start, is left out.
    const now = new Map(parsePsLines(ps(['-p', hits.map((r) => r.pid).join(','), '-ww', '-o', `${STAT_COLUMNS},args=`]).out).map((r) => [r.pid, r]));
    const out2: ProcInfo[] = [];
    for (const r of hits) {
      const again = now.get(r.pid);
      if (!again || again.stat.start !== r.stat.start || dead(again.stat.state)) continue;
      out2.push({ pid: r.pid, ppid: again.stat.ppid, state: again.stat.state, command: again.rest });
    }
    return out2;
  },
  hasTag(pid, tag) {
    const row = parsePsLines(ps(['-p', String(pid), '-ww', '-o', `${STAT_COLUMNS},args=`, WITH_ENV]).out).find((r) => r.pid === pid);
    return row !== undefined && tagPattern({ value: tag }).test(row.rest);
  },
  list() {
    // The session may be a getter (macOS: getsid when asked): kept, not spread.
    return parsePsLines(ps(['-A', '-o', STAT_COLUMNS]).out).map((r) => Object.defineProperties({ pid: r.pid }, Object.getOwnPropertyDescriptors(r.stat)) as { pid: number } & Stat);
  },
  credentials(pid) {
    // BSD ps: real, effective, saved (uid is the effective); procps adds the
    // filesystem ids and the supplementary groups.
    const columns = darwin ? 'pid=,ruid=,uid=,svuid=,rgid=,gid=,svgid=' : 'pid=,ruid=,uid=,svuid=,fuid=,rgid=,gid=,svgid=,fgid=,supgid=';
    const line = ps(['-p', String(pid), '-o', columns]).out.split('\n').find((l) => l.trim() !== '');
    const f = line?.trim().split(/\s+/);
    if (!f || Number(f[0]) !== pid) return undefined;
    const n = darwin ? 3 : 4;
    const ids = (from: number) => f.slice(from, from + n).map(Number);
    const groups = darwin ? undefined : f[1 + 2 * n] === '-' || f[1 + 2 * n] === undefined ? [] : f[1 + 2 * n]!.split(',').map(Number);
    return { uid: ids(1), gid: ids(1 + n), groups };
  },
  hiddenParents(found) {
    if (found.length === 0) return [];
    // One look at every process, with and without the environment: a process
    // whose two lines are the same shows no environment.
    const bare = new Map(parsePsLines(ps(['-A', '-ww', '-o', `${STAT_COLUMNS},args=`]).out, true).map((r) => [r.pid, r]));
    const withEnv = new Map(parsePsLines(ps(['-A', '-ww', '-o', `${STAT_COLUMNS},args=`, WITH_ENV]).out, true).map((r) => [r.pid, r]));
    const ours = new Set<number>();
    for (let pid: number | undefined = process.pid; pid !== undefined && pid > 1 && !ours.has(pid); pid = bare.get(pid)?.stat.ppid) ours.add(pid);
    const seen = new Set(found.map((p) => p.pid));
    const out: ProcInfo[] = [];
    for (const p of found) {
      for (let ppid = p.ppid; ppid > 1 && !seen.has(ppid) && !ours.has(ppid); ) {
        const b = bare.get(ppid);
        const e = withEnv.get(ppid);
        // Gone, another process now, showing an environment, or a zombie: the line ends.
        if (!b || !e || b.stat.start !== e.stat.start || e.rest !== b.rest || dead(b.stat.state)) break;
        seen.add(ppid);
        out.push({ pid: ppid, ppid: b.stat.ppid, state: b.stat.state, command: b.rest });
        ppid = b.stat.ppid;
      }
    }
    return out;
  },
  signals(pid) {
    const line = ps(['-p', String(pid), '-o', 'pid=,ignored=,caught=,blocked=']).out;
    const m = /^\s*(\d+)\s+([0-9a-fA-F]+)\s+([0-9a-fA-F]+)\s+([0-9a-fA-F]+)\s*$/m.exec(line);
    if (!m || Number(m[1]) !== pid) return undefined;
    return { ignored: BigInt(`0x${m[2]}`), caught: BigInt(`0x${m[3]}`), blocked: BigInt(`0x${m[4]}`) };
  },
  openFds() {
    throw new ObserverError(
      'the ps observer cannot list the open descriptors of a process: only /proc can (on Linux: CORDON_TEST_OBSERVER=proc)',
    );
  },
};

// ---- selection -------------------------------------------------------------

/** The observer CORDON_TEST_OBSERVER names, else the platform's: proc on Linux, ps elsewhere. */
export function selectObserver(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): Observer {
  const asked = env[OBSERVER_VAR];
  if (asked === undefined || asked === '') return platform === 'linux' ? procObserver : psObserver;
  if (asked === 'ps') return psObserver;
  if (asked === 'proc') {
    if (platform !== 'linux') throw new ObserverError(`${OBSERVER_VAR}=proc needs /proc, which ${platform} does not have: use ps`);
    return procObserver;
  }
  throw new ObserverError(`${OBSERVER_VAR} must be proc or ps, not ${JSON.stringify(asked)}`);
}

/** The observer of this run. */
export const observer: Observer = selectObserver();
