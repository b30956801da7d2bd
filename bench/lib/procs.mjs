// Observing processes from outside, for the benchmarks: every process a
// benchmark starts carries CORDON_BENCH_TAG=<tag> in its environment, /proc
// says who is alive, and the benchmark itself SIGKILLs by pid whatever a
// library left behind. No library's bookkeeping is trusted.
//
// Mirrors test/helpers/procs.ts (the bench must not import from test/), plus
// an incremental scanner: a full /proc environ scan every few milliseconds
// would itself load the 2-core machine being measured.
import { readdirSync, readFileSync } from 'node:fs';

export const TAG_VAR = 'CORDON_BENCH_TAG';
/** Every tag of this run starts with this prefix (the final sweep uses it). */
export const RUN_ID = `b${process.pid.toString(36)}${Math.random().toString(36).slice(2, 7)}`;
let counter = 0;

export function newTag(label = 't') {
  return `${RUN_ID}-${label.replace(/[^A-Za-z0-9]/g, '')}-${++counter}`;
}

export function taggedEnv(tag, extra = {}) {
  return { ...process.env, ...extra, [TAG_VAR]: tag };
}

export function readStat(pid) {
  let s;
  try {
    s = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  const fields = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0], ppid: Number(fields[1]), pgid: Number(fields[2]), start: fields[19] };
}

export function cmdline(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0+$/, '').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

/** Alive and not a zombie. */
export function alive(pid) {
  const st = readStat(pid);
  return st !== undefined && st.state !== 'Z' && st.state !== 'X';
}

function allPids() {
  const out = [];
  for (const d of readdirSync('/proc')) {
    const c = d.charCodeAt(0);
    if (c >= 48 && c <= 57) out.push(Number(d));
  }
  return out;
}

const NEEDLE = Buffer.from(`${TAG_VAR}=`);

/**
 * The value of the tag variable in a process's environment; null when it has
 * none; undefined when that cannot be known now (unreadable, or empty: a
 * process in the middle of execve, a zombie, a kernel thread).
 */
export function tagOf(pid) {
  let env;
  try {
    env = readFileSync(`/proc/${pid}/environ`);
  } catch {
    return undefined;
  }
  if (env.length === 0) return undefined;
  let at = env.indexOf(NEEDLE);
  while (at > 0 && env[at - 1] !== 0) at = env.indexOf(NEEDLE, at + 1);
  if (at < 0) return null;
  const start = at + NEEDLE.length;
  let end = env.indexOf(0, start);
  if (end < 0) end = env.length;
  return env.toString('utf8', start, end);
}

/**
 * Incremental /proc scanner. A pid's tag is read once and cached while the pid
 * stays listed between consecutive scans (pids are allocated cyclically, so a
 * pid cannot be recycled between two scans a few ms apart; the cache is
 * dropped when scans pause). Our own direct children are re-read until they
 * show a tag: between fork and exec they still have this process's (untagged)
 * environment. Only the processes of the tag asked about are stat'ed.
 */
class Scanner {
  cache = new Map(); // pid -> tag | null
  lastScan = -Infinity;

  refresh(maxAgeMs = 5) {
    const now = performance.now();
    if (now - this.lastScan < maxAgeMs) return;
    if (now - this.lastScan > 250) this.cache.clear();
    this.lastScan = now;
    const pids = allPids();
    const listed = new Set(pids);
    for (const pid of this.cache.keys()) if (!listed.has(pid)) this.cache.delete(pid);
    for (const pid of pids) {
      if (pid === process.pid || this.cache.has(pid)) continue;
      const tag = tagOf(pid);
      if (tag === undefined) {
        // Kernel threads never get a tag; anything else is read again next time.
        const st = readStat(pid);
        if (st && (st.ppid === 2 || pid === 2)) this.cache.set(pid, null);
        continue;
      }
      if (tag === null && spawners.has(readStat(pid)?.ppid)) continue; // may exec with a tag any moment
      this.cache.set(pid, tag);
    }
  }

  /** [{pid, tag, state, ppid}] for every listed process whose tag matches. */
  tagged(match, maxAgeMs = 5) {
    this.refresh(maxAgeMs);
    const out = [];
    for (const [pid, tag] of this.cache) {
      if (tag === null || !match(tag)) continue;
      const st = readStat(pid);
      if (!st) continue;
      out.push({ pid, tag, state: st.state, ppid: st.ppid });
    }
    return out;
  }
}

export const scanner = new Scanner();

/**
 * Untagged processes that start tagged children: this one, and a library's
 * peer (bench/peers/); a child of theirs is not cached as untagged while it
 * may still be between fork and exec.
 */
const spawners = new Set([process.pid]);
export function addSpawner(pid) {
  spawners.add(pid);
}

function matcher({ tag, prefix }) {
  return tag !== undefined ? (t) => t === tag : (t) => t.startsWith(prefix ?? '');
}

/** Live (non-zombie) processes whose tag is `tag` (or starts with `prefix`). */
export function findTagged({ tag, prefix, maxAgeMs = 5 } = {}) {
  return scanner.tagged(matcher({ tag, prefix }), maxAgeMs).filter((p) => p.state !== 'Z' && p.state !== 'X');
}

/** Zombies carrying the tag / prefix. */
export function findTaggedZombies({ tag, prefix } = {}) {
  return scanner.tagged(matcher({ tag, prefix }), 0).filter((p) => p.state === 'Z');
}

/** A full, uncached scan: every live process carrying a tag of this run (or any bench tag). */
export function sweepTagged(prefix = RUN_ID) {
  const out = [];
  for (const pid of allPids()) {
    if (pid === process.pid) continue;
    const tag = tagOf(pid);
    if (tag == null || !tag.startsWith(prefix)) continue;
    const st = readStat(pid);
    if (!st || st.state === 'Z' || st.state === 'X') continue;
    out.push({ pid, tag, state: st.state, ppid: st.ppid, command: cmdline(pid) });
  }
  return out;
}

/** SIGKILL, by pid, every live process with this tag (or prefix) until none is left. Returns what it killed. */
export function killTagged({ tag, prefix }) {
  const killed = new Map();
  let empty = 0;
  for (let round = 0; round < 50; round++) {
    const found = sweepTagged(prefix ?? '').filter((p) => tag === undefined || p.tag === tag);
    // Two clean sweeps in a row: a process caught mid-execve is unreadable for an instant.
    if (found.length === 0) {
      if (++empty === 2) break;
      continue;
    }
    empty = 0;
    for (const p of found) {
      if (!killed.has(p.pid)) killed.set(p.pid, p);
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  return [...killed.values()];
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Zombie children of this process. */
export function zombieChildren() {
  return allPids().filter((pid) => {
    const st = readStat(pid);
    return st?.state === 'Z' && st.ppid === process.pid;
  });
}

export function openFdCount() {
  return readdirSync('/proc/self/fd').length;
}

/** Resident set size of this process, bytes (from /proc, not V8's view). */
export function rssBytes() {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) * 1024 : process.memoryUsage().rss;
}

/** Pids a script printed as `PID <name> <pid>` lines. */
export function parsePids(text) {
  const out = {};
  for (const m of text.matchAll(/^PID (\S+) (\d+)$/gm)) out[m[1]] = Number(m[2]);
  return out;
}

export function machine() {
  const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  const model = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1] ?? 'unknown';
  let kernel = 'unknown';
  try {
    kernel = readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim();
  } catch {
    // not Linux
  }
  const cpus = (cpuinfo.match(/^processor\s*:/gm) ?? []).length;
  return { cpus, model, kernel, node: process.version, platform: `${process.platform}-${process.arch}` };
}

/** How many processes /proc lists right now (the whole host). */
export function hostProcessCount() {
  return allPids().length;
}

/**
 * CPU time a single-threaded process has used so far, in ms, from
 * /proc/<pid>/schedstat (nanoseconds; /proc/<pid>/stat's utime + stime are in
 * 10 ms ticks, too coarse for one anchor), and its state. Still readable while
 * the process is a zombie (then final); undefined once it is reaped.
 */
export function cpuOf(pid) {
  let sched;
  try {
    sched = readFileSync(`/proc/${pid}/schedstat`, 'utf8');
  } catch {
    return undefined;
  }
  const st = readStat(pid);
  if (!st) return undefined;
  return { ms: Number(sched.split(' ')[0]) / 1e6, state: st.state, start: st.start };
}

/** This process's reaped children's CPU (cutime + cstime of /proc/self/stat), in ms (10 ms ticks). */
export function childrenCpuMs() {
  const s = readFileSync('/proc/self/stat', 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return (Number(f[13]) + Number(f[14])) * 10;
}
