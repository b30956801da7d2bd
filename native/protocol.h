// The anchor protocol: what the host and a tree's anchor say to each other.
// Written once, here, for both anchors (native/posix/anchor.cc,
// native/win/anchor.cc); the host's side is lib/anchor/ (protocol.ts parses it).
//
// The host starts the anchor with a command line (Options below) and a
// control channel: on POSIX fd 3 (a socket pair, both ways), on Windows CRT
// fd 3 (anchor -> host) and fd 4 (host -> anchor). Both directions carry
// lines of ASCII words ending in '\n'.
//
// anchor -> host (Verb, in the order a tree's life sends them):
//   GROUP <pgid>                    the process-group tier: the tree's process group (before READY)
//   MARKER <token> <session|0>      the subreaper and process-group tiers (before READY): the tree's
//                                   marker token (CORDON_TREE) and the session the anchor leads (0:
//                                   none), so that the host can sweep the tree if the anchor dies
//   READY <root pid> <tier> <pidfd 0|1> [<cgroup dir>]   (the cgroup tier names its cgroup)
//   NOCONTAIN <errno> <what> [<detail>]   containment could not be established; nothing ran
//                                   (<what> setuid: the command could not take --uid/--gid;
//                                   lease-job, Windows, --lease: the anchor runs in a Job Object
//                                   that kills its members when it closes, so the lease could not
//                                   outlive that job's owner; <detail> its LimitFlags in hex)
//   EXECFAIL <errno>                exec of the command failed; nothing ran
//   NOCWD <errno>                   the working directory (--cwd) cannot be entered; nothing ran
//   EXIT <code|-1> <signal|0>       the root exited (and was reaped)
//   LEFT <pid> <holds 0|1> <cmd>    a member still alive when the root exited
//   LEFTEND
//   LEFTGROUP <pid> <cmd>           the process-group tier: a member seen outside the tree's group
//                                   (setsid, setpgid); reported once, tracked by snapshot only
//   RELEASED                        no member holds the captured stdout/stderr
//   STUCK <pid> ...                 members survived the forced kill for kStuckReportMs (cleanup failure)
//   QUIET                           every member is gone and reaped (the tree is quiescent); the anchor exits
//                                   (a leased tree's: once the host said DONE)
//   LIMITS <memory> <processes> <cpu quota us> <how>   (before READY, with --memory, --max-processes or
//                                   --cpu-quota) what the kernel enforces on the tree (0: that limit is
//                                   not); how: v2, v1, v1+v2, job (Windows: the tree's Job Object; what
//                                   the OS accepted, which Wine does not enforce) or none
//   LIMITDIR <dir>                  (before READY) a v1 cgroup of the tree's own, for a limit: the host
//                                   removes it if the anchor dies before the tree is quiescent
//   USAGE <cpu us> <memory peak> <processes peak> <oom kills> <pids.max hits>
//                                   what the tree used (-1: not measured); after EXIT (before LEFT)
//                                   and again before QUIET, which supersedes it. Windows: the peak is
//                                   the job's committed memory, processes are processes (not threads),
//                                   and the last two count JOB_OBJECT_MSG_JOB_MEMORY_LIMIT (a refused
//                                   allocation) and JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT (a refused process)
// host -> anchor:
//   TERM <grace ms>                 polite signal to every member, the forced kill after grace
//                                   (the polite signal: SIGTERM, or --polite-signal N on POSIX,
//                                   fixed for the tree's life; Windows: CTRL_BREAK)
//                                   (grace: digits, 0..2^31-1; anything else: the --grace)
//   KILL                            the forced kill to every member now
//   JOB <handle value>              Windows, --job-from-host only: the first line, the tree's job
//                                   as a handle the host duplicated into the anchor (0: it could not)
//   LEASE <ms> <token>              --lease: the first line (Windows: after JOB). The token (32 hex
//                                   chars) an adopter must present; <ms> the lease. Only the first
//                                   LEASE counts.
//   RESIZE <cols> <rows>            --pty: the terminal's window size (1..65535 each; the kernel
//                                   sends SIGWINCH to its foreground process group)
//   DONE                            a leased tree's host has read QUIET: it has the result, and the
//                                   anchor exits. Until DONE a quiescent leased anchor holds the
//                                   result: EOF before it (the host died with the result unread)
//                                   starts the lease clock, and the result waits for an adopter.
// Lines over kMaxControlLine bytes and unknown lines are discarded (traced).
// EOF on the control channel (the host is gone) = TERM <teardown grace>, except
// under a lease: then the lease clock starts (the full <ms>), the anchor drains
// the command's stdout and stderr into the log, and lets a new host adopt the
// tree. If none does before the clock runs out: TERM <teardown grace>.
//
// The adoption endpoint (--lease MS --lease-id ID: ID is 16 lowercase hex
// digits the host chose, so the host names the endpoint from the anchor's pid
// and ID: POSIX the Unix socket <--lease-dir>/<anchor pid>-<ID>.sock in the
// per-user 0700 runtime directory, made before READY; Windows a named pipe
// with a user-only DACL) takes one connection at a time and one line from it
// (the same line rules):
//   INFO                            answered `LEASE <ms left, -1 while a host is attached>
//                                   <root running 0|1>`, then closed
//   ADOPT <token>                   answered `DENIED <why>` and closed (why: token, attached,
//                                   notoken, expired), or `ADOPTED <log path, escaped, or ->`
//                                   (POSIX: with SCM_RIGHTS carrying the read ends of the
//                                   command's stdout and stderr still open, in that order, as
//                                   `ADOPTED <log> <stdout 0|1> <stderr 0|1>` says, and with
//                                   --pty ` terminal` after them and, last, the write end of a
//                                   new pipe into the terminal: the adopter's input), then every
//                                   line the anchor sent so far, in order (the replay), after
//                                   which the connection is the control channel (its EOF: the
//                                   lease clock starts again from the full lease).
// A tree that became quiescent with no host attached waits, until the lease
// runs out, for an adopter to take its replay (QUIET last) and say DONE, then
// exits; so does one whose host died between QUIET and DONE. The
// anchor removes its endpoint and <id>.json beside it when it exits.
// <cmd> is escaped (escape()); every other word is a number or a name without spaces.
//
// Windows: READY's tier is job-object or process-handle and its pidfd 0; a
// root ended by the anchor's TerminateJobObject reports EXIT -1 9 (as Node
// reports SIGKILL for a killed child), one ended by CTRL_BREAK EXIT -1 21
// (SIGBREAK); LEFT's holds is always 0.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cordon.h"

namespace cordon {
namespace protocol {

// ---- Verbs -----------------------------------------------------------------

enum class Verb {
  // anchor -> host
  kGroup,
  kReady,
  kNoContain,
  kExecFail,
  kNoCwd,
  kExit,
  kLeft,
  kLeftEnd,
  kLeftGroup,
  kReleased,
  kStuck,
  kQuiet,
  kLimits,
  kLimitDir,
  kUsage,
  kMarker,
  // host -> anchor
  kTerm,
  kKill,
  kJob,
  kLease,
  kDone,
  kResize,
  kSignal,
  // adopter -> anchor (the endpoint)
  kAdopt,
  kInfo,
  // a control line that is none of these
  kUnknown,
};

// The verb as it stands on the wire ("READY").
const char* name(Verb verb);

// ---- anchor -> host: each returns its whole line, '\n' included ------------

std::string group(int64_t pgid);
std::string marker(const std::string& token, int64_t session);
// `cgroup_dir` empty: no cgroup (every tier but the cgroup tier).
std::string ready(int64_t root, const std::string& tier, bool pidfd, const std::string& cgroup_dir);
std::string no_contain(int err, const char* what, const std::string& detail = std::string());
std::string exec_fail(int err);
std::string no_cwd(int err);
// `code` -1 when the root was ended by `signal`; else `signal` 0.
std::string exit(int64_t code, int signal);
std::string left(int64_t pid, bool holds_output, const std::string& command);
std::string left_end();
std::string left_group(int64_t pid, const std::string& command);
std::string released();
std::string stuck(const std::vector<Member>& members);
std::string quiescent();  // QUIET
std::string limits(int64_t memory, int64_t processes, int64_t cpu_quota_us, const std::string& how);
std::string limit_dir(const std::string& dir);
std::string usage(int64_t cpu_us, int64_t memory_peak, int64_t processes_peak, int64_t oom_kills, int64_t pids_max_hits);
// The endpoint's answers.
std::string lease_info(int64_t ms_left, bool root_running);
std::string denied(const char* why);
// `terminal`: the tree has a terminal (--pty), and the write end of a new pipe
// into it comes last with the descriptors (POSIX): ` terminal` ends the line.
std::string adopted(const std::string& log_path, bool out, bool err, bool terminal = false);

// A command line as LEFT and LEFTGROUP carry it: backslash, LF and CR escaped
// (\\, \n, \r), at most 4000 bytes.
std::string escape(const std::string& s);

// ---- host -> anchor ---------------------------------------------------------

// Control lines are short ("TERM 3000"). A longer line is no command: it is
// discarded up to its newline (with a trace), so neither memory nor CPU grows
// with what is written to the channel, and what follows it is still read.
constexpr size_t kMaxControlLine = 256;

// Splits what the control channel delivers into lines, whatever the reads'
// boundaries. Each byte is looked at once (no rescanning of a growing buffer).
class LineReader {
 public:
  // `strip_cr`: a line's trailing '\r' is dropped (the Windows anchor).
  explicit LineReader(bool strip_cr) : strip_cr_(strip_cr) {}
  // Appends every line `data` completes to `lines` (without its newline).
  void feed(const char* data, size_t n, std::vector<std::string>& lines);

 private:
  bool strip_cr_;
  std::string inbox_;
  bool overlong_ = false;  // discarding a control line that is too long
};

struct Command {
  Verb verb = Verb::kUnknown;  // kTerm, kKill, kJob, kLease, kDone, kResize, kSignal, kAdopt, kInfo or kUnknown
  int grace_ms = 0;            // kTerm, kKill: the grace to terminate with; kLease: the lease
  int cols = 0, rows = 0;      // kResize: the window size
  // kSignal (SIGNAL <n>): the signal for the root alone (1 to 64), as
  // ChildProcess.kill(signal) sends one; the tree is not terminated. POSIX:
  // kill() of the root while it is the anchor's unreaped child (its pid
  // pinned); Windows: TerminateProcess of the root (what Node does for
  // SIGTERM, SIGKILL and SIGINT; the host sends no other).
  int signal = 0;
  std::string arg;             // kJob: the handle value as the host wrote it; kLease, kAdopt: the token
};

// A token as LEASE and ADOPT carry it: 32 lowercase hex characters.
bool is_token(const std::string& s);
// A lease id as --lease-id carries it: 16 lowercase hex characters.
bool is_lease_id(const std::string& s);
// Equal, in time that depends on the length only.
bool same_token(const std::string& a, const std::string& b);

// One control line. A TERM whose grace is not a number the host could have
// sent (garbage, a sign, an exponent, out of range) is never read as 0 (the
// forced kill now): the host did ask for the tree to end, so it gets the
// teardown grace (`teardown_grace_ms`, the --grace). KILL is grace 0. JOB is a
// command only while `expect_job`. Anything else unknown is ignored, with a
// trace. LEASE <ms> <token> and ADOPT <token> with a malformed field, and INFO
// with anything after it, are unknown.
Command parse_command(const std::string& line, int teardown_grace_ms, bool expect_job);

// ---- The termination schedule ---------------------------------------------

// The teardown grace when the host passes no --grace.
constexpr int kDefaultGraceMs = 3000;
// How long members may survive the forced kill before the anchor reports
// them STUCK (lib/anchor/ waits this long, plus a margin, on an anchor).
constexpr int kStuckReportMs = 5000;

// TERM, KILL, control EOF and SIGTERM each ask for termination with a grace;
// the earliest deadline asked for wins. From the deadline on, the forced
// kill; kStuckReportMs into it, what is left is reported STUCK, once.
class Termination {
 public:
  // Returns true when termination starts with this call.
  bool start(int grace_ms, int64_t now);
  // The deadline is now (no polite signal reached anyone: nothing to wait for).
  void force_now(int64_t now) { deadline_ = now; }
  // True once: when, from the deadline on, the forced kill begins.
  bool force_due(int64_t now);
  // Whether STUCK is due now (the caller says whether anything is left);
  // stuck_reported() once it is sent.
  bool stuck_due(int64_t now) const {
    return forcing_ && !stuck_reported_ && now - force_started_ > kStuckReportMs;
  }
  void stuck_reported() { stuck_reported_ = true; }
  // How long the event loop may sleep: until the deadline, at most `max_ms`,
  // `forcing_ms` while forcing.
  int wait_ms(int64_t now, int forcing_ms, int max_ms) const;

  bool active() const { return active_; }
  bool forcing() const { return forcing_; }
  int64_t deadline() const { return deadline_; }

 private:
  bool active_ = false;
  bool forcing_ = false;
  bool stuck_reported_ = false;
  int64_t deadline_ = 0;
  int64_t force_started_ = 0;
};

// ---- The anchor's command line ---------------------------------------------

//   cordon-anchor [--tier T] [--best-effort] [--fallback] [--job-from-host] [--grace MS]
//                 [--memory BYTES] [--max-processes N] [--cpu-quota US]
//                 [--polite-signal N] [--uid N] [--gid N] [--cmd-shell] [--hide-window] [--watch-fd N]... [--cwd DIR] [--trace FILE]
//                 [--lease MS --lease-id ID [--lease-dir DIR]] [--pty COLS ROWS]
//                 [--confine [--confine-write DIR]... [--confine-deny-read DIR]... [--confine-network none|loopback|all]]
//                 -- PATH ARGV0 [ARGS...]
// Options only one platform's anchor takes:
enum Extra : unsigned {
  kCwdOption = 1,          // --cwd DIR
  kFallbackOption = 2,     // --fallback (POSIX)
  kJobFromHostOption = 4,  // --job-from-host (Windows)
  kPoliteSignalOption = 8, // --polite-signal N (POSIX): the signal TERM (and control EOF) sends first
  kCredentialsOption = 16, // --uid N, --gid N (POSIX): the command (never the anchor) runs as them
  kCmdShellOption = 32,    // --cmd-shell (Windows): ARGS is one line, run as `cmd.exe /d /s /c "<line>"`
  kLimitOptions = 64,      // --memory BYTES, --max-processes N, --cpu-quota US (both; Windows: on the Job Object)
  kLeaseOptions = 128,     // --lease MS, --lease-id ID (16 lowercase hex digits): the tree is leased
  kLeaseDirOption = 256,   // --lease-dir DIR (POSIX): where the endpoint is made; fds 4, 5, 6 are
                           // the command's stdout and stderr read ends and the log (O_APPEND)
  kLogOption = 512,        // --log PATH (Windows, leased): see "Leases: Windows" below
  kPtyOption = 1024,       // --pty COLS ROWS: the command's stdio is a new terminal's slave (Windows:
                           // a pseudo console, native/win/pty.h; NOCONTAIN ENOSYS pty where there
                           // is no ConPTY, or leased), which the anchor relays: fd 0 (input) to it,
                           // its output to fd 1
  kHideWindowOption = 2048,  // --hide-window (Windows): the command starts with STARTF_USESHOWWINDOW + SW_HIDE
  kConfineOptions = 4096,  // --confine, --confine-write DIR, --confine-deny-read DIR, --confine-network
                           // none|loopback|all (POSIX): the tree is confined by the kernel from its
                           // first instruction (Linux: Landlock, a network namespace,
                           // native/linux/confine.h; macOS: a Seatbelt profile, native/darwin/confine.h);
                           // what cannot be set up is NOCONTAIN <errno> confine, and nothing runs
  kNewSessionOption = 8192,  // --new-session (POSIX, cgroup and subreaper tiers): the command leads a
                             // session and process group of its own (setsid before exec), as
                             // child_process's detached: true
};

template <typename Char>
struct Options {
  using String = std::basic_string<Char>;
  std::string tier;  // as given (non-ASCII as '?'); each anchor checks it against its own tiers
  bool best_effort = false;
  // The cgroup tier was the host's default, not asked for: if its cgroup
  // cannot be made or entered now, run in the subreaper tier (READY says so).
  bool fallback = false;
  bool job_from_host = false;  // the first control line is JOB
  int grace_ms = kDefaultGraceMs;
  // Resource limits on the tree (0: none): memory in bytes, a process count,
  // a CPU quota in microseconds per 100 ms.
  int64_t memory = 0;
  int64_t processes = 0;
  int64_t cpu_quota_us = 0;
  int polite_signal = 0;       // --polite-signal: 0 = the platform's own (SIGTERM; Windows CTRL_BREAK)
  bool cmd_shell = false;      // --cmd-shell: the system's cmd.exe runs the one argument verbatim
  bool hide_window = false;    // --hide-window (the windowsHide option): the command starts with SW_HIDE
  bool new_session = false;    // --new-session: the command calls setsid() before exec
  int uid = -1;                // --uid, --gid: -1 = the anchor's own
  int gid = -1;
  std::vector<int> watch_fds;  // fds whose holders keep the host's pipes open
  int lease_ms = 0;            // --lease: 0 = none (host EOF ends the tree)
  std::string lease_id;        // --lease-id: 16 lowercase hex digits, names the endpoint
  String lease_dir;            // --lease-dir (POSIX)
  String log;                  // --log (Windows): the tree's log file
  int pty_cols = 0;            // --pty: the terminal's size (0: no terminal)
  int pty_rows = 0;
  bool confine = false;                    // --confine: everything below applies
  std::vector<String> confine_write;       // --confine-write: absolute, canonical
  std::vector<String> confine_deny_read;   // --confine-deny-read: absolute, canonical
  int confine_network = 0;                 // --confine-network: 0 all, 1 none, 2 loopback
  String cwd;                  // the command's working directory (else the anchor's)
  String path;
  std::vector<String> argv;
};

// A bad command line: the anchor prints why, its synopsis and how it is
// started (`channel`: where its control channel is) on stderr, and exits
// with kUsageExit.
constexpr int kUsageExit = 64;
void print_usage(const char* why, const std::string& synopsis, const char* channel);

// Decimal digits only, 0 to `max`: anything else (a sign, an exponent as in
// "1e+21", a fraction, an overflow, trailing garbage, nothing) is rejected.
template <typename Char>
bool parse_digits(const Char* s, long long max, long long& out) {
  if (!s || !*s) return false;
  long long v = 0;
  for (const Char* p = s; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (*p - '0');
    if (v > max) return false;
  }
  out = v;
  return true;
}

// A duration or descriptor number as the host writes it: 0 to 2^31-1, as
// parse_digits reads it. Read with atoi() instead, garbage would become 0,
// which for a grace means "the forced kill now".
template <typename Char>
bool parse_uint31(const Char* s, int& out) {
  long long v = 0;
  if (!parse_digits(s, 2147483647LL, v)) return false;
  out = static_cast<int>(v);
  return true;
}

// A terminal's columns or rows: 1 to 65535 (a struct winsize field).
template <typename Char>
bool parse_window(const Char* s, int& out) {
  long long v = 0;
  if (!parse_digits(s, 65535LL, v) || v == 0) return false;
  out = static_cast<int>(v);
  return true;
}

// A limit as the host writes it: 1 to 2^53-1, as parse_digits reads it.
template <typename Char>
bool parse_count(const Char* s, int64_t& out) {
  long long v = 0;
  if (!parse_digits(s, 9007199254740991LL, v) || v == 0) return false;
  out = static_cast<int64_t>(v);
  return true;
}

namespace detail {
template <typename Char>
bool is(const Char* arg, const char* ascii) {
  for (; *arg && *ascii; arg++, ascii++) {
    if (*arg != static_cast<Char>(*ascii)) return false;
  }
  return *arg == 0 && *ascii == 0;
}
template <typename Char>
std::string ascii(const Char* s) {
  std::string out;
  for (; *s; s++) out += sizeof(Char) == 1 || (*s > 0 && *s < 0x80) ? static_cast<char>(*s) : '?';
  return out;
}
}  // namespace detail

// Parses argv (argv[0] is the anchor) into `o`, whose tier is preset to the
// anchor's default. `extra`: the Extra options this anchor takes. A bad
// command line calls `usage(why)`, which does not return; --trace FILE calls
// `open_trace(FILE)`, which opens the trace and calls set_trace().
template <typename Char>
void parse_options(int argc, Char** argv, unsigned extra, Options<Char>& o, void (*usage)(const char* why),
                   void (*open_trace)(const Char* file)) {
  int i = 1;
  for (; i < argc; i++) {
    const Char* a = argv[i];
    bool has_value = i + 1 < argc;
    if (detail::is(a, "--")) {
      i++;
      break;
    } else if (detail::is(a, "--tier") && has_value) {
      o.tier = detail::ascii(argv[++i]);
    } else if (detail::is(a, "--job-from-host") && (extra & kJobFromHostOption)) {
      o.job_from_host = true;
    } else if (detail::is(a, "--watch-fd") && has_value) {
      int fd;
      if (!parse_uint31(argv[++i], fd)) usage("--watch-fd takes a descriptor number");
      o.watch_fds.push_back(fd);
    } else if (detail::is(a, "--cwd") && has_value && (extra & kCwdOption)) {
      o.cwd = argv[++i];
    } else if (detail::is(a, "--memory") && has_value && (extra & kLimitOptions)) {
      if (!parse_count(argv[++i], o.memory)) usage("--memory takes a number of bytes");
    } else if (detail::is(a, "--max-processes") && has_value && (extra & kLimitOptions)) {
      if (!parse_count(argv[++i], o.processes)) usage("--max-processes takes a number of processes");
    } else if (detail::is(a, "--cpu-quota") && has_value && (extra & kLimitOptions)) {
      if (!parse_count(argv[++i], o.cpu_quota_us)) usage("--cpu-quota takes microseconds per 100 ms");
    } else if (detail::is(a, "--best-effort")) {
      o.best_effort = true;
    } else if (detail::is(a, "--fallback") && (extra & kFallbackOption)) {
      o.fallback = true;
    } else if (detail::is(a, "--grace") && has_value) {
      if (!parse_uint31(argv[++i], o.grace_ms)) usage("--grace takes whole milliseconds from 0 to 2147483647");
    } else if (detail::is(a, "--polite-signal") && has_value && (extra & kPoliteSignalOption)) {
      if (!parse_uint31(argv[++i], o.polite_signal) || o.polite_signal == 0) usage("--polite-signal takes a signal number");
    } else if (detail::is(a, "--cmd-shell") && (extra & kCmdShellOption)) {
      o.cmd_shell = true;
    } else if (detail::is(a, "--hide-window") && (extra & kHideWindowOption)) {
      o.hide_window = true;
    } else if (detail::is(a, "--new-session") && (extra & kNewSessionOption)) {
      o.new_session = true;
    } else if (detail::is(a, "--uid") && has_value && (extra & kCredentialsOption)) {
      if (!parse_uint31(argv[++i], o.uid)) usage("--uid takes a user id");
    } else if (detail::is(a, "--gid") && has_value && (extra & kCredentialsOption)) {
      if (!parse_uint31(argv[++i], o.gid)) usage("--gid takes a group id");
    } else if (detail::is(a, "--lease") && has_value && (extra & kLeaseOptions)) {
      if (!parse_uint31(argv[++i], o.lease_ms) || o.lease_ms == 0) usage("--lease takes whole milliseconds from 1 to 2147483647");
    } else if (detail::is(a, "--lease-id") && has_value && (extra & kLeaseOptions)) {
      o.lease_id = detail::ascii(argv[++i]);
      if (!is_lease_id(o.lease_id)) usage("--lease-id takes 16 lowercase hex digits");
    } else if (detail::is(a, "--lease-dir") && has_value && (extra & kLeaseDirOption)) {
      o.lease_dir = argv[++i];
    } else if (detail::is(a, "--log") && has_value && (extra & kLogOption)) {
      o.log = argv[++i];
    } else if (detail::is(a, "--pty") && i + 2 < argc && (extra & kPtyOption)) {
      if (!parse_window(argv[i + 1], o.pty_cols) || !parse_window(argv[i + 2], o.pty_rows)) {
        usage("--pty takes a number of columns and of rows, 1 to 65535 each");
      }
      i += 2;
    } else if (detail::is(a, "--confine") && (extra & kConfineOptions)) {
      o.confine = true;
    } else if (detail::is(a, "--confine-write") && has_value && (extra & kConfineOptions)) {
      o.confine_write.push_back(argv[++i]);
    } else if (detail::is(a, "--confine-deny-read") && has_value && (extra & kConfineOptions)) {
      o.confine_deny_read.push_back(argv[++i]);
    } else if (detail::is(a, "--confine-network") && has_value && (extra & kConfineOptions)) {
      const Char* v = argv[++i];
      if (detail::is(v, "all")) o.confine_network = 0;
      else if (detail::is(v, "none")) o.confine_network = 1;
      else if (detail::is(v, "loopback")) o.confine_network = 2;
      else usage("--confine-network takes none, loopback or all");
    } else if (detail::is(a, "--trace") && has_value) {
      open_trace(argv[++i]);
    } else {
      usage("unknown option");
    }
  }
  if (i + 1 >= argc) usage("missing command");
  o.path = argv[i++];
  for (; i < argc; i++) o.argv.push_back(argv[i]);
}

// ---- Leases: Windows --------------------------------------------------------
//
// The Windows endpoint is the named pipe \\.\pipe\cordon-lease-<anchor pid>-<lease id>,
// created with FILE_FLAG_FIRST_PIPE_INSTANCE (a pipe of that name that exists
// already, anyone's, is a failure: NOCONTAIN <errno> lease-endpoint, nothing
// ran) and a protected DACL granting the anchor's user SID alone
// (native/win/lease.cc). The Windows anchor waits (bounded, like JOB) for
// LEASE before it starts the command. The pipe answers until the anchor
// exits, after the lease ran out too (ADOPT: DENIED expired). A client
// writes nothing before it has checked that the pipe's server is the
// anchor the lease record names (GetNamedPipeServerProcessId), and connects
// at identification level (no impersonation).
//
// Output of a leased tree: the anchor puts a pipe of its own between the
// command and each captured stream (--watch-fd 1/2 whose handle is a pipe) and
// copies what comes: to the host's pipe while that host lives; once it is
// gone, into the log (--log PATH, appended) and to the adopter's OUTPUT
// connection. ADOPTED's <stdout 0|1> <stderr 0|1> say which streams it relays.
// Not POSIX's hand-over of the read ends (DuplicateHandle into the adopter):
// Node cannot read a raw HANDLE (net.Socket({ fd }) takes a descriptor of
// node.exe's own C runtime), but it can connect to a pipe by name. So the
// endpoint takes one more line, from the host that adopted the tree only:
//   OUTPUT <token> <1|2>            answered `OUTPUT <1|2>`, then the connection carries that
//                                   stream's raw bytes (anchor -> adopter) until the tree's
//                                   writers are gone (EOF); or `DENIED <why>` (token, attached:
//                                   no adopter is attached, stream: not relayed, busy: the
//                                   stream's earlier OUTPUT reader is not reading) and closed.

// OUTPUT <token> <1|2>: true, the token and the stream.
bool parse_output(const std::string& line, std::string& token, int& fd);
std::string output_ack(int fd);  // OUTPUT <fd>

// ---- Tracing (--trace) -----------------------------------------------------

// Where trace() writes ("[cordon-anchor <pid>] ..." lines), or nullptr.
void set_trace(FILE* file, unsigned long pid);
FILE* trace_file();
#if defined(__GNUC__) && !defined(_WIN32)  // (mingw checks formats against msvcrt)
__attribute__((format(printf, 1, 2)))
#endif
void trace(const char* fmt, ...);

}  // namespace protocol
}  // namespace cordon
