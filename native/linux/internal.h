// What the Linux sources of the contract (native/linux/*.cc) share, and
// nothing else includes: a process's /proc record and its readers
// (native/linux/proc.cc), and the pidfd system calls. Not part of the
// contract (native/cordon.h); every name here lives in cordon::internal.
#pragma once

#include "../cordon.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

namespace cordon {
namespace internal {

// The fields of /proc/<pid>/stat the contract uses. `start` is the process's
// start time in clock ticks since boot: with `pid`, its identity.
struct Stat {
  int64_t pid = 0, ppid = 0, pgid = 0;
  uint64_t start = 0;
  int64_t threads = 0;
  char state = '?';
};

// Reads `path` into `out`, at most about `limit` bytes (it stops at the first
// read that reaches it). False when the file cannot be opened.
bool read_file(const char* path, std::string& out, size_t limit = 65536);

// /proc/<pid>/stat, in one read. False when the process is gone (or the line
// is malformed).
bool read_stat(int64_t pid, Stat& st);

// /proc/<pid>/cmdline with its arguments joined by spaces; a process caught
// in the middle of exec is given a few milliseconds; "[<comm>]" when there is
// no command line; "" when the process is gone.
std::string read_cmdline(int64_t pid);

// Whether one of `pid`'s open descriptors is one of `watched`, anonymous
// pipes and sockets (false when `watched` is empty or /proc/<pid>/fd cannot
// be read). Reads the descriptors' links only, never stat()s through them:
// it does not wait on the filesystem of any file the process holds.
bool holds_any(int64_t pid, const std::vector<FileId>& watched);

// Is `pid` a descendant of `anchor`? Walks the live parent chain (at most
// 4096 levels), so a recycled pid is no descendant.
bool descends_from(int64_t pid, int64_t anchor);

// The Member record of `st`: its command line read only when `commands`,
// holds_output from `watched`.
Member to_member(const Stat& st, const std::vector<FileId>& watched, bool commands);

inline int sys_pidfd_open(int64_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
}

inline int sys_pidfd_send_signal(int fd, int sig) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, fd, sig, nullptr, 0));
}

}  // namespace internal
}  // namespace cordon
