// The line protocol between the host and an anchor, on the host's side: what
// an anchor's line means (a typed event) and how a host command is written;
// and the adoption endpoint's sub-protocol (a leased anchor's INFO, ADOPT and
// OUTPUT requests and their answers), for both platforms. Pure: no I/O, no
// state. The anchors' side of it is described in the header of
// native/protocol.h; both anchors (POSIX and Windows) speak it alike.
//
// anchor -> host (one line each, '\n'-terminated):
//   GROUP <pgid>                                  the process-group tier: the tree's group (before READY)
//   MARKER <token> <session|0>                    the subreaper and process-group tiers (before READY): the tree's
//                                                 marker and the session its anchor leads, for the host's sweep if the anchor dies
//   READY <root pid> <tier> <pidfd 0|1> [<cgroup dir>]
//   NOCONTAIN <errno> <what>   EXECFAIL <errno>   NOCWD <errno>     (nothing ran; NOCONTAIN's what 'setuid': uid/gid)
//   EXIT <code|-1> <signal|0>                     the root exited (and was reaped)
//   LEFT <pid> <holds 0|1> <cmd>  ...  LEFTEND    members alive when the root exited
//   LEFTGROUP <pid> <cmd>                         the process-group tier: a member seen leaving the group
//   RELEASED                                      no member holds the captured output
//   STUCK <pid>:<state> ...                       members survived SIGKILL for STUCK_REPORT_MS
//   QUIET                                         every member is gone and reaped; the anchor exits
//                                                 (a leased one once the host answers DONE)
//   LIMITS <memory> <processes> <cpu quota us> <how>   (before READY) the limits the kernel took on the tree (0: not that one)
//   LIMITDIR <dir>                                (before READY) a v1 cgroup of the tree's own, for its limits
//   USAGE <cpu us> <memory peak> <processes peak> <oom kills> <pids.max hits>   (-1: not measured)
// host -> anchor: TERM <grace ms>, KILL, on Windows first JOB <handle>, for
// a leased tree LEASE <ms> <token> (first, after JOB) and DONE (the host has
// read QUIET).
//
// A leased anchor's adoption endpoint takes one request line per connection
// and answers with one line:
//   INFO                 -> LEASE <ms left | -1 while a host is attached> <root running 0|1>
//   ADOPT <token>        -> DENIED <why> | ADOPTED <log path escaped, or -> <stdout 0|1> <stderr 0|1> [terminal],
//                           then the replay; the connection is the tree's control channel from then on
//                           (terminal: the tree has one; POSIX: its input's pipe comes last with the descriptors)
//   OUTPUT <token> <1|2> -> DENIED <why> | OUTPUT <1|2>, then that stream's bytes (Windows)

/**
 * How long after its forced kill an anchor reports members that survived it
 * (STUCK): kStuckReportMs in native/protocol.h.
 */
export const STUCK_REPORT_MS = 5000;

/** What an anchor reports, one event per line. */
export type AnchorEvent =
  /** The process-group tier: the tree's process group (sent before READY). */
  | { type: 'group'; pgid: number }
  /** The subreaper and process-group tiers: the tree's marker token (CORDON_TREE) and the session its anchor leads (0: none). */
  | { type: 'marker'; token: string; session: number }
  /** The command runs, contained: its pid, the tier in force, whether members are signalled through pidfds; the cgroup tier names its cgroup. */
  | { type: 'ready'; pid: number; tier: string; pidfd: boolean; cgroup?: string }
  /** Containment could not be established; nothing ran. `detail`: what the anchor adds (lease-job: the job's LimitFlags, hex). */
  | { type: 'noContain'; errno: number; what: string; detail?: string }
  /** The command could not be executed; nothing ran. */
  | { type: 'execFail'; errno: number }
  /** The command's working directory cannot be entered (POSIX); nothing ran. */
  | { type: 'noCwd'; errno: number }
  /** The root exited: its exit code, or the number of the signal that ended it. */
  | { type: 'exit'; code: number | null; signal: number | null }
  /** A member still alive when the root exited. */
  | { type: 'left'; pid: number; heldOutput: boolean; command: string }
  /** The end of the LEFT list. */
  | { type: 'leftEnd' }
  /** The process-group tier: a member seen outside the tree's process group. */
  | { type: 'leftGroup'; pid: number; command: string }
  /** No member holds the captured stdout/stderr any more. */
  | { type: 'released' }
  /** Members that survived the forced kill for STUCK_REPORT_MS, each with its state letter as the anchor's listing read it ('?': none read). */
  | { type: 'stuck'; pids: number[]; states: string[] }
  /** Every member is gone and reaped: the tree is quiescent; the anchor exits. */
  | { type: 'quiescent' }
  /** The limits the kernel took on the tree (0: that one not); how: v2, v1, v1+v2, job (Windows; Wine takes some without enforcing them) or none. */
  | { type: 'limits'; memory: number; processes: number; cpuQuotaUs: number; how: string }
  /** A v1 cgroup of the tree's own, made for its limits. */
  | { type: 'limitDir'; dir: string }
  /** What the tree used (null: not measured). The last one before QUIET supersedes the one after EXIT. */
  | { type: 'usage'; cpuUs: number | null; memoryPeak: number | null; processesPeak: number | null; oomKills: number | null; pidsMaxHits: number | null };

/** A line that is not an event: a verb this host does not know, or a known verb with fields it cannot read. */
export type UnreadLine = { type: 'unknown'; line: string } | { type: 'malformed'; line: string; reason: string };

export type ParsedLine = AnchorEvent | UnreadLine;

/** What the host tells an anchor. */
export type HostCommand =
  /** Polite signal to every member now, the forced kill after `graceMs`. */
  | { type: 'term'; graceMs: number }
  /** The forced kill to every member now. */
  | { type: 'kill' }
  /** Windows, the first line: the tree's Job Object's handle value in the anchor (0: none). */
  | { type: 'job'; handle: number }
  /** A leased tree: the lease and the adoption token (the first line; Windows: after JOB). */
  | { type: 'lease'; ms: number; token: string }
  /** A leased tree: the host has read QUIET (it has the result); the anchor may exit. */
  | { type: 'done' }
  /** A tree with a terminal (--pty): its window size. */
  | { type: 'resize'; cols: number; rows: number }
  /** A signal for the root alone (kill(signal)), by number. */
  | { type: 'signal'; signal: number };

/** The anchors escape a command line's (and a log path's) backslash, LF and CR (`\\`, `\n`, `\r`). */
function unescape(s: string): string {
  return s.replace(/\\(\\|n|r)/g, (_, c: string) => (c === 'n' ? '\n' : c === 'r' ? '\r' : '\\'));
}

class Malformed extends Error {}

/** A field that must be an integer (the anchors print them with %d / %lld / %lu). */
function int(words: string[], i: number, name: string): number {
  const word = words[i];
  if (word === undefined || !/^-?\d+$/.test(word)) throw new Malformed(`${name} is not an integer: ${JSON.stringify(word ?? null)}`);
  return Number(word);
}

// STUCK's words: <pid>:<state letter> each.
function stuckMembers(words: string[]): ParsedLine {
  const pids: number[] = [];
  const states: string[] = [];
  for (const word of words) {
    const m = /^(\d+):([A-Za-z?])$/.exec(word);
    if (!m) throw new Malformed(`a stuck member (<pid>:<state>) whose pid is not an integer or state not a letter: ${JSON.stringify(word)}`);
    pids.push(Number(m[1]));
    states.push(m[2]!);
  }
  return { type: 'stuck', pids, states };
}

/** One line from an anchor (without its '\n'). Never throws: what it cannot read is an UnreadLine. */
export function parseLine(line: string): ParsedLine {
  const space = line.indexOf(' ');
  const verb = space < 0 ? line : line.slice(0, space);
  const words = space < 0 ? [''] : line.slice(space + 1).split(' ');
  try {
    switch (verb) {
      case 'GROUP':
        return { type: 'group', pgid: int(words, 0, 'pgid') };
      case 'MARKER':
        if (!/^\d+\.\d+\.[0-9a-f]{32}$/.test(words[0] ?? '')) throw new Malformed('the token is not <pid>.<start>.<32 hex>');
        return { type: 'marker', token: words[0]!, session: int(words, 1, 'session') };
      case 'READY': {
        const event: AnchorEvent = { type: 'ready', pid: int(words, 0, 'pid'), tier: words[1] ?? '', pidfd: words[2] === '1' };
        if (words.length > 3) event.cgroup = words.slice(3).join(' ');
        return event;
      }
      case 'NOCONTAIN': {
        const event: AnchorEvent = { type: 'noContain', errno: int(words, 0, 'errno'), what: words[1] ?? '' };
        if (words[2]) event.detail = words[2];
        return event;
      }
      case 'EXECFAIL':
        return { type: 'execFail', errno: int(words, 0, 'errno') };
      case 'NOCWD':
        return { type: 'noCwd', errno: int(words, 0, 'errno') };
      case 'EXIT': {
        const code = int(words, 0, 'code');
        const signal = int(words, 1, 'signal');
        return { type: 'exit', code: code >= 0 ? code : null, signal: signal > 0 ? signal : null };
      }
      case 'LEFT':
        return { type: 'left', pid: int(words, 0, 'pid'), heldOutput: words[1] === '1', command: unescape(words.slice(2).join(' ')) };
      case 'LEFTEND':
        return { type: 'leftEnd' };
      case 'LEFTGROUP':
        return { type: 'leftGroup', pid: int(words, 0, 'pid'), command: unescape(words.slice(1).join(' ')) };
      case 'RELEASED':
        return { type: 'released' };
      case 'STUCK':
        return stuckMembers(words.filter(Boolean));
      case 'QUIET':
        return { type: 'quiescent' };
      case 'LIMITS':
        return { type: 'limits', memory: int(words, 0, 'memory'), processes: int(words, 1, 'processes'), cpuQuotaUs: int(words, 2, 'cpu quota'), how: words[3] ?? 'none' };
      case 'LIMITDIR':
        if (!words.join(' ').startsWith('/')) throw new Malformed('dir is not an absolute path');
        return { type: 'limitDir', dir: words.join(' ') };
      case 'USAGE': {
        const measured = (i: number, name: string) => {
          const v = int(words, i, name);
          return v < 0 ? null : v;
        };
        return {
          type: 'usage',
          cpuUs: measured(0, 'cpu'),
          memoryPeak: measured(1, 'memory peak'),
          processesPeak: measured(2, 'processes peak'),
          oomKills: measured(3, 'oom kills'),
          pidsMaxHits: measured(4, 'pids.max hits'),
        };
      }
      default:
        return { type: 'unknown', line };
    }
  } catch (err) {
    if (err instanceof Malformed) return { type: 'malformed', line, reason: `${verb}: ${err.message}` };
    throw err;
  }
}

/**
 * Splits what arrived on the channel into complete lines; returns them and
 * what is left of an unfinished last line.
 */
export function splitLines(buffered: string): { lines: string[]; rest: string } {
  const lines = buffered.split('\n');
  const rest = lines.pop()!;
  return { lines, rest };
}

/** A host command as the line the anchor reads. */
export function encodeCommand(command: HostCommand): string {
  switch (command.type) {
    case 'term':
      return `TERM ${command.graceMs}\n`;
    case 'kill':
      return 'KILL\n';
    case 'job':
      return `JOB ${command.handle}\n`;
    case 'lease':
      return `LEASE ${command.ms} ${command.token}\n`;
    case 'done':
      return 'DONE\n';
    case 'resize':
      return `RESIZE ${command.cols} ${command.rows}\n`;
    case 'signal':
      return `SIGNAL ${command.signal}\n`;
  }
}

// ---- The adoption endpoint ----

/** An adoption token as the anchors take it: 128 bits, 32 lowercase hex digits. */
export const TOKEN_PATTERN = /^[0-9a-f]{32}$/;
/** A leased tree's id: the anchor's pid, '-', then 16 lowercase hex digits the host chose. */
export const LEASE_ID_PATTERN = /^[0-9]+-[0-9a-f]{16}$/;

/** What a host asks a leased anchor's endpoint. */
export type EndpointRequest =
  /** How long the lease has left and whether the root runs (no token needed). */
  | { type: 'info' }
  /** Take the tree over: its replay, then its control channel. */
  | { type: 'adopt'; token: string }
  /** Windows: the adopter's copy of one captured stream (1: stdout, 2: stderr). */
  | { type: 'output'; token: string; fd: 1 | 2 };

/** What a leased anchor's endpoint answers (its first line). */
export type EndpointAnswer =
  /** INFO: the lease left (null while a host is attached: its clock is not running) and whether the root runs. */
  | { type: 'lease'; leftMs: number | null; rootRunning: boolean }
  /** Refused: token, attached, notoken, expired, hello, stream, busy. */
  | { type: 'denied'; why: string }
  /** ADOPT granted: the tree's log (null: none) and which captured streams come with it. */
  | { type: 'adopted'; logPath: string | null; streams: { stdout: boolean; stderr: boolean }; terminal: boolean }
  /** OUTPUT granted: that stream follows. */
  | { type: 'output'; fd: 1 | 2 };

/** A request as the line the endpoint reads. */
export function encodeRequest(request: EndpointRequest): string {
  switch (request.type) {
    case 'info':
      return 'INFO\n';
    case 'adopt':
      return `ADOPT ${request.token}\n`;
    case 'output':
      return `OUTPUT ${request.token} ${request.fd}\n`;
  }
}

/** An endpoint's answer line (without its line end; a trailing CR is ignored). Never throws. */
export function parseAnswer(line: string): EndpointAnswer | UnreadLine {
  const text = line.replace(/\r$/, '');
  let m = /^LEASE (-?\d+) ([01])$/.exec(text);
  if (m) {
    const left = Number(m[1]);
    return { type: 'lease', leftMs: left < 0 ? null : left, rootRunning: m[2] === '1' };
  }
  m = /^DENIED (\S+)$/.exec(text);
  if (m) return { type: 'denied', why: m[1]! };
  // (an anchor from before terminals says no ` terminal`; no log path makes one look like it: the line then ends in 0 or 1)
  m = /^ADOPTED (.+) ([01]) ([01])( terminal)?$/.exec(text);
  if (m) return { type: 'adopted', logPath: m[1] === '-' ? null : unescape(m[1]!), streams: { stdout: m[2] === '1', stderr: m[3] === '1' }, terminal: m[4] !== undefined };
  m = /^OUTPUT ([12])$/.exec(text);
  if (m) return { type: 'output', fd: m[1] === '1' ? 1 : 2 };
  return /^(LEASE|DENIED|ADOPTED|OUTPUT)\b/.test(text) ? { type: 'malformed', line, reason: 'an endpoint answer with fields it cannot read' } : { type: 'unknown', line };
}
