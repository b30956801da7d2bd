// A warm anchor (POSIX; the host uses it on Linux): an anchor the host
// starts ahead of need, with only its tier (`cordon-anchor --warm --tier T
// [--fallback] [--best-effort] [--trace FILE]`). It establishes containment
// before any command exists (a subreaper, or the process-group tier's
// session, at once; the cgroup tier's cgroup once the LAUNCH came, since a
// waiting anchor is still in its host's process group, whose kill would
// leave a cgroup behind), then waits for
// its one LAUNCH, which carries what a cold anchor gets when it is started:
// its arguments (the same list, `-- PATH ARGV0 ...` included), the command's
// environment, and the command's stdio as three descriptors (SCM_RIGHTS).
// From there it runs exactly as a cold anchor. It is used once: nothing of
// one tree reaches the next. It exits, cleaning up, when the host closes
// the channel or dies before a LAUNCH.
//
// The message on the control channel, the first and only thing the host
// writes before the anchor's READY:
//   LAUNCH <argc> <envc> <bytes> <umask>\n<bytes: argc + envc NUL-terminated strings>
// (the three descriptors ride on its first byte; <umask>: the host's at the
// spawn, in decimal, or -1 where it could not read it).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace cordon {
namespace warm {

// The most a LAUNCH may carry: less than the control channel's widened
// buffer (unix_socket.h), so the host hands it over without waiting on the
// anchor. Above it, the host starts a cold anchor.
constexpr size_t kMaxLaunchBytes = 192 * 1024;

struct Launch {
  std::vector<std::string> args;  // the anchor's arguments, without argv[0]
  std::vector<std::string> env;   // "NAME=value"
  int fds[3] = {-1, -1, -1};      // the command's stdin, stdout, stderr (close-on-exec)
  int umask = -1;                 // the host's umask at the spawn (-1: keep the anchor's)
  std::string rest;               // what followed it: the first control lines
};

// The host: sends the LAUNCH with `fds` on the control channel `fd`. All or
// nothing within `timeout_ms`: 0, or a negative errno (then the caller closes
// `fd`; the anchor, seeing its EOF, exits without running anything).
int send_launch(int fd, const std::vector<std::string>& args, const std::vector<std::string>& env, const int fds[3],
                int umask_value, int timeout_ms);

// The host: its own umask, read without changing it (Linux: /proc/self/status;
// a umask() round trip would race the host's other threads); -1 if unknown.
int current_umask();

// The anchor: whether the host `host` still has the credentials this warm
// anchor was started with, as far as a cold anchor started now would take
// them from it: the real and effective user and group ids, the supplementary
// groups, the capability bounding set, no_new_privs and the seccomp mode
// (Linux: /proc/<pid>/status, each compared with the anchor's own). A host
// that dropped any of them since (process.setuid, setgroups, a capability,
// a seccomp filter) must not run a command with the old ones through a warm
// anchor it started before: the anchor checks every 250 ms while it waits
// and once more when the LAUNCH is read, and exits without running anything
// when they differ. False where they cannot be read (the host gone). Linux:
// /proc/<pid>/status (ids, groups, capabilities, no_new_privs, seccomp);
// XNU: kern.proc.pid (real and effective ids, the group list).
bool host_credentials_unchanged(int host);

// The anchor: reads the LAUNCH off `fd`, as it arrives (call when `fd` is
// readable). 1: complete, in `out`; 0: more to read; -1: the channel closed,
// or what came is not a LAUNCH (the anchor then exits).
class Receiver {
 public:
  int feed(int fd, Launch& out);
  ~Receiver();

 private:
  int parse(Launch& out);
  std::string buf_;
  int fds_[3] = {-1, -1, -1};
  bool have_fds_ = false;
};

// The anchor, its LAUNCH taken: the command's stdio becomes fds 0-2, its
// environment the anchor's own (the command inherits it), and its umask the
// one the host had at the spawn, not when it started this anchor.
void become(Launch& launch);

}  // namespace warm
}  // namespace cordon
