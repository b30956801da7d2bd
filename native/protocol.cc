// The anchor protocol (protocol.h): line encoding, the control-line reader
// and parser, the termination schedule and the trace, for both anchors.
#include "protocol.h"

#include <chrono>

#include <cstdarg>
#include <cstring>

namespace cordon {
namespace protocol {

namespace {

constexpr const char* kNames[] = {
    "GROUP", "READY",  "NOCONTAIN", "EXECFAIL", "NOCWD", "EXIT", "LEFT", "LEFTEND", "LEFTGROUP", "RELEASED",
    "STUCK", "QUIET",  "LIMITS",    "LIMITDIR", "USAGE", "MARKER", "TERM", "KILL", "JOB", "LEASE", "DONE", "RESIZE", "SIGNAL", "ADOPT", "INFO", "",
};
static_assert(sizeof kNames / sizeof kNames[0] == static_cast<size_t>(Verb::kUnknown) + 1, "one name a verb");

// A line is at most this long, '\n' included (a longer one is cut).
constexpr size_t kMaxLine = 8191;

FILE* g_trace = nullptr;
unsigned long g_trace_pid = 0;

void arg(std::string& line, int64_t v) {
  line += ' ';
  line += std::to_string(static_cast<long long>(v));
}

void arg(std::string& line, const std::string& word) {
  line += ' ';
  line += word;
}

std::string start(Verb verb) { return name(verb); }

std::string end(std::string line) {
  if (line.size() > kMaxLine - 1) line.resize(kMaxLine - 1);
  line += '\n';
  return line;
}

}  // namespace

const char* name(Verb verb) { return kNames[static_cast<size_t>(verb)]; }

std::string group(int64_t pgid) {
  std::string line = start(Verb::kGroup);
  arg(line, pgid);
  return end(line);
}

std::string marker(const std::string& token, int64_t session) {
  std::string line = start(Verb::kMarker);
  arg(line, token);
  arg(line, session);
  return end(line);
}

std::string ready(int64_t root, const std::string& tier, bool pidfd, const std::string& cgroup_dir) {
  std::string line = start(Verb::kReady);
  arg(line, root);
  arg(line, tier);
  arg(line, pidfd ? 1 : 0);
  if (!cgroup_dir.empty()) arg(line, cgroup_dir);
  return end(line);
}

std::string no_contain(int err, const char* what, const std::string& detail) {
  std::string line = start(Verb::kNoContain);
  arg(line, err);
  arg(line, what);
  if (!detail.empty()) arg(line, detail);
  return end(line);
}

std::string exec_fail(int err) {
  std::string line = start(Verb::kExecFail);
  arg(line, err);
  return end(line);
}

std::string no_cwd(int err) {
  std::string line = start(Verb::kNoCwd);
  arg(line, err);
  return end(line);
}

std::string exit(int64_t code, int signal) {
  std::string line = start(Verb::kExit);
  arg(line, code);
  arg(line, signal);
  return end(line);
}

std::string left(int64_t pid, bool holds_output, const std::string& command) {
  std::string line = start(Verb::kLeft);
  arg(line, pid);
  arg(line, holds_output ? 1 : 0);
  arg(line, escape(command));
  return end(line);
}

std::string left_end() { return end(start(Verb::kLeftEnd)); }

std::string left_group(int64_t pid, const std::string& command) {
  std::string line = start(Verb::kLeftGroup);
  arg(line, pid);
  arg(line, escape(command));
  return end(line);
}

std::string released() { return end(start(Verb::kReleased)); }

std::string limits(int64_t memory, int64_t processes, int64_t cpu_quota_us, const std::string& how) {
  std::string line = start(Verb::kLimits);
  arg(line, memory);
  arg(line, processes);
  arg(line, cpu_quota_us);
  arg(line, how);
  return end(line);
}

std::string limit_dir(const std::string& dir) {
  std::string line = start(Verb::kLimitDir);
  arg(line, dir);
  return end(line);
}

std::string usage(int64_t cpu_us, int64_t memory_peak, int64_t processes_peak, int64_t oom_kills, int64_t pids_max_hits) {
  std::string line = start(Verb::kUsage);
  for (int64_t v : {cpu_us, memory_peak, processes_peak, oom_kills, pids_max_hits}) arg(line, v);
  return end(line);
}

std::string lease_info(int64_t ms_left, bool root_running) {
  std::string line = start(Verb::kLease);
  arg(line, ms_left);
  arg(line, root_running ? 1 : 0);
  return end(line);
}

std::string denied(const char* why) {
  std::string line = "DENIED";
  arg(line, why);
  return end(line);
}

std::string adopted(const std::string& log_path, bool out, bool err, bool terminal) {
  std::string line = "ADOPTED";
  arg(line, log_path.empty() ? std::string("-") : escape(log_path));
  arg(line, out ? 1 : 0);
  arg(line, err ? 1 : 0);
  if (terminal) arg(line, std::string("terminal"));
  return end(line);
}

namespace {
bool lower_hex(const std::string& s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}
}  // namespace

bool is_token(const std::string& s) { return lower_hex(s, 32); }
bool is_lease_id(const std::string& s) { return lower_hex(s, 16); }

bool same_token(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); i++) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// Each member as <pid>:<state> (its state letter as the listing read it:
// 'D' is a wait in the kernel that SIGKILL does not end; '?' where the
// listing reads none), so that the host's error says why it is stuck.
// Linux's /proc tells running from sleeping from waiting uninterruptibly;
// XNU's p_stat does not (a wait in the kernel reads as SRUN), nor does
// Windows: there only a zombie or a stopped member is told, the rest is '?'.
std::string stuck(const std::vector<Member>& members) {
  std::string line = start(Verb::kStuck);
  for (auto& m : members) {
    char state = (m.state >= 'A' && m.state <= 'Z') || (m.state >= 'a' && m.state <= 'z') ? m.state : '?';
#if !CORDON_LINUX_PROC
    if (state == 'R' || state == 'S') state = '?';
#endif
    arg(line, std::to_string(static_cast<long long>(m.pid)) + ':' + state);
  }
  return end(line);
}

std::string quiescent() { return end(start(Verb::kQuiet)); }

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  if (out.size() > 4000) out.resize(4000);
  return out;
}

void LineReader::feed(const char* p, size_t n, std::vector<std::string>& lines) {
  const char* end = p + n;
  while (p < end) {
    const char* nl = static_cast<const char*>(memchr(p, '\n', static_cast<size_t>(end - p)));
    const char* stop = nl ? nl : end;
    size_t len = static_cast<size_t>(stop - p);
    if (!overlong_) {
      if (inbox_.size() + len > kMaxControlLine) {
        trace("control line longer than %u bytes: discarded up to its newline", static_cast<unsigned>(kMaxControlLine));
        overlong_ = true;
        inbox_.clear();
      } else {
        inbox_.append(p, len);
      }
    }
    if (!nl) break;
    if (!overlong_) {
      if (strip_cr_ && !inbox_.empty() && inbox_.back() == '\r') inbox_.pop_back();
      lines.push_back(inbox_);
    }
    inbox_.clear();
    overlong_ = false;
    p = nl + 1;
  }
}

Command parse_command(const std::string& line, int teardown_grace_ms, bool expect_job) {
  Command c;
  if (expect_job && line.rfind("JOB ", 0) == 0) {
    c.verb = Verb::kJob;
    c.arg = line.substr(4);
  } else if (line.rfind("TERM ", 0) == 0) {
    c.verb = Verb::kTerm;
    if (!parse_uint31(line.c_str() + 5, c.grace_ms)) {
      trace("malformed TERM grace \"%s\": using the teardown grace %d ms", line.c_str() + 5, teardown_grace_ms);
      c.grace_ms = teardown_grace_ms;
    }
  } else if (line == "KILL") {
    c.verb = Verb::kKill;
    c.grace_ms = 0;
  } else if (line.rfind("LEASE ", 0) == 0) {
    size_t sp = line.find(' ', 6);
    std::string ms = sp == std::string::npos ? std::string() : line.substr(6, sp - 6);
    std::string token = sp == std::string::npos ? std::string() : line.substr(sp + 1);
    if (parse_uint31(ms.c_str(), c.grace_ms) && c.grace_ms > 0 && is_token(token)) {
      c.verb = Verb::kLease;
      c.arg = token;
    } else {
      trace("malformed LEASE line ignored");
    }
  } else if (line.rfind("ADOPT ", 0) == 0) {
    // Any word: a wrong token is the endpoint's to refuse (DENIED token), never a silent drop.
    c.verb = Verb::kAdopt;
    c.arg = line.substr(6);
  } else if (line == "INFO") {
    c.verb = Verb::kInfo;
  } else if (line == "DONE") {
    c.verb = Verb::kDone;
  } else if (line.rfind("SIGNAL ", 0) == 0) {
    int sig = 0;
    if (parse_uint31(line.c_str() + 7, sig) && sig >= 1 && sig <= 64) {
      c.verb = Verb::kSignal;
      c.signal = sig;
    } else {
      trace("malformed SIGNAL line ignored");
    }
  } else if (line.rfind("RESIZE ", 0) == 0) {
    size_t sp = line.find(' ', 7);
    std::string cols = sp == std::string::npos ? std::string() : line.substr(7, sp - 7);
    std::string rows = sp == std::string::npos ? std::string() : line.substr(sp + 1);
    if (parse_window(cols.c_str(), c.cols) && parse_window(rows.c_str(), c.rows)) {
      c.verb = Verb::kResize;
    } else {
      trace("malformed RESIZE line ignored");
    }
  } else {
    trace("unknown control line ignored: \"%s\"", line.c_str());
  }
  return c;
}

bool Termination::start(int grace_ms, int64_t now) {
  int64_t deadline = now + (grace_ms < 0 ? 0 : grace_ms);
  if (!active_) {
    active_ = true;
    deadline_ = deadline;
    trace("terminate, grace %d ms", grace_ms);
    return true;
  }
  if (deadline < deadline_) deadline_ = deadline;
  return false;
}

bool Termination::force_due(int64_t now) {
  if (forcing_ || now < deadline_) return false;
  forcing_ = true;
  force_started_ = now;
  return true;
}

int Termination::wait_ms(int64_t now, int forcing_ms, int max_ms) const {
  if (forcing_) return forcing_ms;
  int64_t left = deadline_ - now;
  return static_cast<int>(left < 0 ? 0 : (left < max_ms ? left : max_ms));
}

// ---- Leases: Windows (protocol.h) ----------------------------------------------

bool parse_output(const std::string& line, std::string& token, int& fd) {
  if (line.rfind("OUTPUT ", 0) != 0 || line.size() != 7 + 32 + 2 || line[7 + 32] != ' ') return false;
  char c = line.back();
  if (c != '1' && c != '2') return false;
  token = line.substr(7, 32);
  fd = c - '0';
  return is_token(token);
}

std::string output_ack(int fd) {
  std::string line = "OUTPUT";
  arg(line, fd);
  return end(line);
}

void print_usage(const char* why, const std::string& synopsis, const char* channel) {
  fprintf(stderr, "cordon-anchor: %s\n", why);
  fprintf(stderr, "usage: %s\nIt is started by the cordon library with a control channel %s.\n", synopsis.c_str(),
          channel);
}

void set_trace(FILE* file, unsigned long pid) {
  g_trace = file;
  g_trace_pid = pid;
}

FILE* trace_file() { return g_trace; }

void trace(const char* fmt, ...) {
  if (!g_trace) return;
  va_list ap;
  va_start(ap, fmt);
  // Wall-clock milliseconds, so that the traces of several anchors (and a
  // test's own timestamps) line up.
  long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  fprintf(g_trace, "%lld.%03lld [cordon-anchor %lu] ", ms / 1000, ms % 1000, g_trace_pid);
  vfprintf(g_trace, fmt, ap);
  fputc('\n', g_trace);
  fflush(g_trace);
  va_end(ap);
}

}  // namespace protocol
}  // namespace cordon
