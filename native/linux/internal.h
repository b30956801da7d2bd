// What the Linux sources of the contract (native/linux/*.cc) share, and
// nothing else includes: a process's /proc record and its readers
// (native/linux/proc.cc), and the pidfd system calls. Not part of the
// contract (native/cordon.h); every name here lives in cordon::internal.
#pragma once

#include "../cordon.h"

#include <dirent.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <functional>
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

// One entry of getdents64(2) (struct linux_dirent64), read in place in the
// caller's buffer: listing a directory without opendir's allocation.
struct Dirent64 {
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[1];
};

// The fields of /proc/<pid>/stat the contract uses. `start` is the process's
// start time in clock ticks since boot: with `pid`, its identity.
struct Stat {
  int64_t pid = 0, ppid = 0, pgid = 0, sid = 0;
  uint64_t start = 0;
  int64_t threads = 0;
  uint64_t flags = 0;  // the kernel's task flags (PF_*)
  char state = '?';
};

// PF_EXITING: the process is in exit(); its memory (and so its command line)
// may already be gone, and it will not exec again.
constexpr uint64_t kTaskExiting = 0x4;

// Reads `path` into `out`, at most about `limit` bytes (it stops at the first
// read that reaches it). False when the file cannot be opened.
bool read_file(const char* path, std::string& out, size_t limit = 65536);

// /proc/<pid>/stat, in one read. False when the process is gone (or the line
// is malformed).
bool read_stat(int64_t pid, Stat& st);

// Whether `pid` names a process (a thread group's leader), not another thread
// of one: /proc answers for a thread's id too when it is asked by number
// (/proc/<tid>/stat, environ, ...), though its listing shows only processes.
// False when it cannot tell (gone).
bool is_process(int64_t pid);

// /proc/<pid>/cmdline with its arguments joined by spaces; a process caught
// in the middle of exec is given a few milliseconds (one already exiting is
// not: it has no command line left to wait for); "[<comm>]" when there is no
// command line; "" when the process is gone.
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

// An entry of /proc: a pid, and the inode number the directory listing gives
// for it (no system call of its own).
struct ProcEntry {
  int64_t pid = 0;
  uint64_t ino = 0;
};

// The numeric entries of the /proc directory `d` (read from its start), but
// `self` and, with `skip_older` in an anchor that called
// skip_older_processes() (a walk of its own tree), the entries
// already found to be processes started before the anchor: no member of its
// tree can be one of those (every member is forked after it), so the walk
// neither opens nor reads them again. The kernel gives each process that gets
// a pid an entry of its own, with a new inode (a reaped process's entries
// are dropped), so an entry listed with the pid and inode it had when it was
// found older is that same process; a recycled pid is a new entry, and read.
void young_entries(DIR* d, int64_t self, std::vector<ProcEntry>& out, bool skip_older);

// After `st` was read for `entry`: remembers it when it started before the
// anchor (skip_older_processes), so young_entries leaves it out from now on.
void note_if_older(const ProcEntry& entry, const Stat& st);

// Whether the anchor's walks skip the process on `pid` whose /proc entry has
// inode `ino` (started before the anchor, or no member: Visit::kNotMember).
bool skipped(int64_t pid, uint64_t ino);

// A process a sweep's visitor called no member (Visit::kNotMember): its pid,
// its parent then, and its /proc entry, known before its record was read.
struct NotMember {
  int64_t pid = 0, ppid = 0;
  uint64_t ino = 0;
};

// After a walk: skips from now on each of `found` whose parent is init or a
// process skipped (one of `found` too), by the parent's entry in the /proc
// directory `dir` now; `found` keeps the others.
void skip_if_outside(int dir, std::vector<NotMember>& found);

}  // namespace internal

// `sig` to `pid` through a pidfd opened first, once `still_ours()` (called
// with the pidfd held) said it is the process meant: race-free, never a
// recycled pid. -ESRCH when it is gone or no longer that process; -ENOSYS
// without pidfds (nothing is sent by pid). pinned_signal.cc
int signal_if(int64_t pid, int sig, const std::function<bool()>& still_ours);

namespace internal {

inline int sys_pidfd_open(int64_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
}

inline int sys_pidfd_send_signal(int fd, int sig) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, fd, sig, nullptr, 0));
}

}  // namespace internal
}  // namespace cordon
