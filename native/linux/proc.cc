// Linux: what /proc says about one process, read so that a recycled pid is
// never taken for the process it once was. Identity is the pair (pid, start
// time in clock ticks since boot, from /proc/<pid>/stat); whatever is read by
// pid alone (the environment) counts only if the start time is unchanged after
// the read. Zombies count as gone. Also the readers the other Linux files
// share (native/linux/internal.h).
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cordon {
namespace internal {

bool read_file(const char* path, std::string& out, size_t limit) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out.clear();
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() >= limit) break;
  }
  close(fd);
  return true;
}

// /proc/<pid>/stat: "pid (comm) state ppid pgrp session ... starttime(22) ..."
// comm may hold spaces and parentheses: parse from the last ')'.
bool read_stat(int64_t pid, Stat& st) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%lld/stat", static_cast<long long>(pid));
  // One read: the kernel produces the whole line at once (the fields up to
  // starttime fit in far less than this). Walks of all of /proc call this
  // for every process, on machines that may be loaded.
  char buf[1024];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t got;
  do {
    got = read(fd, buf, sizeof buf - 1);
  } while (got < 0 && errno == EINTR);
  close(fd);
  if (got <= 0) return false;
  buf[got] = '\0';
  std::string s(buf, static_cast<size_t>(got));
  size_t close_paren = s.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= s.size()) return false;
  const char* p = s.c_str() + close_paren + 2;
  st.pid = pid;
  st.state = *p;
  // fields after state: ppid(4) pgrp(5) session(6) tty(7) tpgid(8) flags(9)
  // minflt cminflt majflt cmajflt utime stime cutime cstime priority nice
  // num_threads itrealvalue starttime(22)
  int field = 3;
  const char* q = p;
  while (*q && field < 22) {
    while (*q && *q != ' ') q++;
    while (*q == ' ') q++;
    field++;
    if (field == 4) st.ppid = strtoll(q, nullptr, 10);
    else if (field == 5) st.pgid = strtoll(q, nullptr, 10);
    else if (field == 6) st.sid = strtoll(q, nullptr, 10);
    else if (field == 9) st.flags = strtoull(q, nullptr, 10);
    else if (field == 20) st.threads = strtoll(q, nullptr, 10);
    else if (field == 22) st.start = strtoull(q, nullptr, 10);
  }
  return field == 22;
}

bool is_process(int64_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%lld/status", static_cast<long long>(pid));
  // "Name:\t...\nUmask:\t...\nState:\t...\nTgid:\t<n>\n": Tgid comes early
  // (a name is at most 64 bytes escaped).
  std::string s;
  if (!read_file(path, s, 512)) return false;
  size_t at = s.find("\nTgid:");
  if (at == std::string::npos) return false;
  return strtoll(s.c_str() + at + 6, nullptr, 10) == pid;
}

std::string read_cmdline(int64_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%lld/cmdline", static_cast<long long>(pid));
  std::string s;
  // A process in the middle of exec briefly has an empty command line: give
  // it a few milliseconds before falling back to its name. One that is
  // exiting (a member of a tree being stopped, as the root's exit is
  // reported) has lost its command line with its memory: its name at once.
  for (int attempt = 0; attempt < 4; attempt++) {
    if (read_file(path, s, 4096) && !s.empty()) break;
    Stat st;
    if (!read_stat(pid, st) || st.state == 'Z' || st.state == 'X' || (st.flags & kTaskExiting)) break;
    usleep(2000);
  }
  if (s.empty()) {
    snprintf(path, sizeof path, "/proc/%lld/comm", static_cast<long long>(pid));
    if (read_file(path, s, 256)) {
      while (!s.empty() && s.back() == '\n') s.pop_back();
      return "[" + s + "]";
    }
    return "";
  }
  while (!s.empty() && s.back() == '\0') s.pop_back();
  for (char& c : s) {
    if (c == '\0') c = ' ';
  }
  return s;
}

namespace {

// The devices of the kernel's pipe and socket filesystems: every anonymous
// pipe is on the one, every socket on the other.
struct AnonymousDevices {
  uint64_t pipe = UINT64_MAX;
  uint64_t socket = UINT64_MAX;
};

const AnonymousDevices& anonymous_devices() {
  static const AnonymousDevices devices = [] {
    AnonymousDevices d;
    struct stat sb;
    int p[2];
    if (pipe2(p, O_CLOEXEC) == 0) {
      if (fstat(p[0], &sb) == 0) d.pipe = static_cast<uint64_t>(sb.st_dev);
      close(p[0]);
      close(p[1]);
    }
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s >= 0) {
      if (fstat(s, &sb) == 0) d.socket = static_cast<uint64_t>(sb.st_dev);
      close(s);
    }
    return d;
  }();
  return devices;
}

}  // namespace

// Never stat()s a descriptor: stat() through /proc/<pid>/fd/<n> asks the
// file's own filesystem for its attributes, and a member holding a file on a
// hung FUSE or NFS mount would block the anchor there for as long as the
// mount hangs (even statx with AT_STATX_DONT_SYNC can revalidate an NFS
// dentry). What is watched is always an anonymous pipe or a socket (the
// anchor watches only the pipes the host made for stdout and stderr: see
// anchor.cc's watch_output), and the kernel names those in the link itself,
// "pipe:[<inode>]" and "socket:[<inode>]": readlinkat() of the link reads
// the name from the open file, without asking any filesystem. A link that
// reads as a path is some other file, never one of them.
bool holds_any(int64_t pid, const std::vector<FileId>& watched) {
  if (watched.empty()) return false;
  char path[64];
  snprintf(path, sizeof path, "/proc/%lld/fd", static_cast<long long>(pid));
  DIR* d = opendir(path);
  if (!d) return false;
  const AnonymousDevices& anon = anonymous_devices();
  bool found = false;
  while (!found) {
    dirent* e = readdir(d);
    if (!e) break;
    if (e->d_name[0] == '.') continue;
    char target[64];
    ssize_t n = readlinkat(dirfd(d), e->d_name, target, sizeof target - 1);
    if (n <= 0 || static_cast<size_t>(n) >= sizeof target - 1) continue;  // gone, or a long path
    target[n] = '\0';
    uint64_t dev;
    const char* number;
    if (strncmp(target, "pipe:[", 6) == 0) {
      dev = anon.pipe;
      number = target + 6;
    } else if (strncmp(target, "socket:[", 8) == 0) {
      dev = anon.socket;
      number = target + 8;
    } else {
      continue;
    }
    char* end = nullptr;
    uint64_t ino = strtoull(number, &end, 10);
    if (end == number || *end != ']') continue;
    for (const FileId& w : watched) {
      if (w.dev == dev && w.ino == ino) {
        found = true;
        break;
      }
    }
  }
  closedir(d);
  return found;
}

bool descends_from(int64_t pid, int64_t anchor) {
  int64_t cur = pid;
  for (int depth = 0; depth < 4096; depth++) {
    Stat st;
    if (!read_stat(cur, st)) return false;
    if (st.ppid == anchor) return true;
    if (st.ppid <= 1) return false;
    cur = st.ppid;
  }
  return false;
}

Member to_member(const Stat& st, const std::vector<FileId>& watched, bool commands) {
  Member m;
  m.pid = st.pid;
  m.ppid = st.ppid;
  m.pgid = st.pgid;
  m.sid = st.sid;
  m.start_time = st.start;
  m.state = st.state;
  if (commands) m.command = read_cmdline(st.pid);
  m.holds_output = holds_any(st.pid, watched);
  return m;
}

}  // namespace internal

using internal::Stat;
using internal::read_stat;

bool holds_output(int64_t pid, uint64_t start_time, const std::vector<FileId>& watched) {
  return same_process_alive(pid, start_time) && internal::holds_any(pid, watched);
}

std::string command_line(int64_t pid) {
  return internal::read_cmdline(pid);
}

bool same_process_alive(int64_t pid, uint64_t start_time) {
  Stat st;
  if (!read_stat(pid, st)) return false;
  return st.start == start_time && st.state != 'Z' && st.state != 'X';
}

bool exiting_or_gone(int64_t pid, uint64_t start_time) {
  Stat st;
  if (!read_stat(pid, st)) return true;
  return st.start != start_time || st.state == 'Z' || st.state == 'X' || (st.flags & internal::kTaskExiting) != 0;
}

namespace {

// One thread's (or a single-threaded process's) state letter, as Stillness.
Stillness still_by_state(char state) {
  switch (state) {
    case 'T': case 't': case 'Z': case 'X': return Stillness::kStill;
    case 'D': return Stillness::kBlocked;
    default: return Stillness::kRunning;  // R, S, and any letter not known here
  }
}

}  // namespace

Stillness stillness(int64_t pid, uint64_t start_time) {
  Stat st;
  if (!read_stat(pid, st) || st.start != start_time) return Stillness::kStill;  // gone, or another process
  Stillness leader = still_by_state(st.state);
  // (A leader that exited while other threads live reads Z: they are read.)
  if (st.threads <= 1 || leader == Stillness::kRunning) return leader;
  // Several threads: the group stop reaches each on its own, and any of
  // them may be the one inside a fork. /proc/<tid>/stat is the thread's.
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%lld/task", static_cast<long long>(pid));
  DIR* d = opendir(dir);
  if (!d) return Stillness::kStill;  // gone meanwhile
  Stillness all = Stillness::kStill;
  while (dirent* e = readdir(d)) {
    Stat thread;
    if (e->d_name[0] < '1' || e->d_name[0] > '9' || !read_stat(strtoll(e->d_name, nullptr, 10), thread)) continue;  // (gone)
    Stillness one = still_by_state(thread.state);
    if (one == Stillness::kRunning) {
      all = one;
      break;
    }
    if (one == Stillness::kBlocked) all = one;
  }
  closedir(d);
  return all;
}

int64_t current_pgid(int64_t pid, uint64_t start_time) {
  Stat st;
  if (!read_stat(pid, st) || st.start != start_time || st.state == 'Z' || st.state == 'X') return -1;
  return st.pgid;
}

int64_t session_of(int64_t pid, uint64_t start_time) {
  Stat st;
  if (!read_stat(pid, st) || st.start != start_time || st.state == 'Z' || st.state == 'X') return -1;
  return st.sid;
}

bool is_thread_group_leader(int64_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%lld/status", static_cast<long long>(pid));
  std::string status;
  if (!internal::read_file(path, status, 4096)) return false;
  size_t at = status.find("\nTgid:");
  return at != std::string::npos && strtoll(status.c_str() + at + 7, nullptr, 10) == pid;
}

uint64_t start_time_of(int64_t pid) {
  Stat st;
  return read_stat(pid, st) ? st.start : 0;
}

// (Linux keeps no id of a process's parent at fork: members are known by
// their ancestry, their group and the marker.)
LineageIds lineage_ids_of(int64_t) { return LineageIds(); }

int read_environment(int64_t pid, uint64_t start_time, std::string& out) {
  out.clear();
  char path[64];
  snprintf(path, sizeof path, "/proc/%lld/environ", static_cast<long long>(pid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  char buf[16384];
  int err = 0;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = errno;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (err != 0) return -err;  // EACCES (not ours to read), ESRCH (exited meanwhile)
  // The file was the pid's: it is still the process listed only if the start
  // stamp is unchanged after the read.
  if (!same_process_alive(pid, start_time)) {
    out.clear();
    return -ESRCH;
  }
  return 0;
}

}  // namespace cordon
