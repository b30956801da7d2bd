// Linux enumeration and pinned signalling: /proc scan + pidfds.
#include "../cordon.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unordered_map>
#include <vector>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

namespace cordon {
namespace {

struct Stat {
  int64_t pid = 0, ppid = 0, pgid = 0;
  uint64_t start = 0;
  int64_t threads = 0;
  char state = '?';
};

bool read_file(const char* path, std::string& out, size_t limit = 65536) {
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
    else if (field == 20) st.threads = strtoll(q, nullptr, 10);
    else if (field == 22) st.start = strtoull(q, nullptr, 10);
  }
  return field == 22;
}

std::string read_cmdline(int64_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%lld/cmdline", static_cast<long long>(pid));
  std::string s;
  // A process in the middle of exec briefly has an empty command line: give
  // it a few milliseconds before falling back to its name.
  for (int attempt = 0; attempt < 4; attempt++) {
    if (read_file(path, s, 4096) && !s.empty()) break;
    Stat st;
    if (!read_stat(pid, st) || st.state == 'Z' || st.state == 'X') break;
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

bool holds_any(int64_t pid, const std::vector<FileId>& watched) {
  if (watched.empty()) return false;
  char path[64];
  snprintf(path, sizeof path, "/proc/%lld/fd", static_cast<long long>(pid));
  DIR* d = opendir(path);
  if (!d) return false;
  bool found = false;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char fdpath[320];
    snprintf(fdpath, sizeof fdpath, "%s/%s", path, e->d_name);
    struct stat sb;
    if (stat(fdpath, &sb) != 0) continue;
    for (const FileId& w : watched) {
      if (static_cast<uint64_t>(sb.st_dev) == w.dev && static_cast<uint64_t>(sb.st_ino) == w.ino) {
        found = true;
        break;
      }
    }
    if (found) break;
  }
  closedir(d);
  return found;
}

void scan_all(std::vector<Stat>& all) {
  all.clear();
  DIR* d = opendir("/proc");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    char* end = nullptr;
    long long pid = strtoll(e->d_name, &end, 10);
    if (*end) continue;
    Stat st;
    if (read_stat(pid, st)) all.push_back(st);
  }
  closedir(d);
}

// Is `pid` a descendant of `anchor`? Walks the live parent chain.
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

int sys_pidfd_open(int64_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
}

int sys_pidfd_send_signal(int fd, int sig) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, fd, sig, nullptr, 0));
}

bool kernel_at_least(int major, int minor) {
  struct utsname u;
  if (uname(&u) != 0) return false;
  int ma = 0, mi = 0;
  if (sscanf(u.release, "%d.%d", &ma, &mi) != 2) return false;
  return ma > major || (ma == major && mi >= minor);
}

// Whether `pid` is listed in the cgroup.procs of directory `dir`.
bool cgroup_lists(const std::string& dir, int64_t pid) {
  std::string procs;
  if (!read_file((dir + "/cgroup.procs").c_str(), procs, 1 << 20)) return false;
  const char* p = procs.c_str();
  while (*p) {
    char* end = nullptr;
    long long v = strtoll(p, &end, 10);
    if (end == p) break;
    if (v == pid) return true;
    p = end;
    while (*p == '\n') p++;
  }
  return false;
}

// The cgroup v2 mount point (from /proc/self/mountinfo) joined with our own
// cgroup's path (the "0::" line of /proc/self/cgroup).
//
// Inside a cgroup namespace (a cordon tree's command runs in one rooted at
// its tree's cgroup, so a cordon run inside a tree gets here) both paths are
// relative to the namespace root, and a mount made outside it shows its root
// as "/.." repeated once per level the namespace root lies below it. The
// namespace root is then the directory that many levels below the mount
// point whose <rel>/cgroup.procs lists us (a bounded walk of that level).
int own_cgroup_dir(std::string& out) {
  std::string mount;
  std::string root = "/";
  if (FILE* f = fopen("/proc/self/mountinfo", "re")) {
    char line[4096];
    while (fgets(line, sizeof line, f)) {
      // <id> <parent> <dev> <root> <mount point> <options> [optional fields] - <fstype> <source> ...
      const char* dash = strstr(line, " - ");
      if (!dash || strncmp(dash + 3, "cgroup2 ", 8) != 0) continue;
      char point[4096];
      char mroot[4096];
      if (sscanf(line, "%*s %*s %*s %4095s %4095s", mroot, point) == 2) {
        mount = point;
        root = mroot;
        break;
      }
    }
    fclose(f);
  }
  if (mount.empty()) return -ENOENT;
  std::string rel;
  if (FILE* f = fopen("/proc/self/cgroup", "re")) {
    char line[4096];
    while (fgets(line, sizeof line, f)) {
      if (strncmp(line, "0::", 3) != 0) continue;
      rel = line + 3;
      while (!rel.empty() && (rel.back() == '\n' || rel.back() == '\r')) rel.pop_back();
      break;
    }
    fclose(f);
  }
  if (rel.empty() || rel[0] != '/') return -ENOENT;
  std::string base = mount;
  if (root != "/") {
    int up = 0;
    size_t i = 0;
    while (root.compare(i, 3, "/..") == 0 && (i + 3 == root.size() || root[i + 3] == '/')) {
      up++;
      i += 3;
    }
    if (i != root.size() || up == 0) return -ENOENT;  // a mount of a subtree: not handled
    std::vector<std::string> level{mount};
    for (int depth = 0; depth < up && !level.empty(); depth++) {
      std::vector<std::string> next;
      for (auto& dir : level) {
        DIR* d = opendir(dir.c_str());
        if (!d) continue;
        while (dirent* e = readdir(d)) {
          if (e->d_type == DT_DIR && e->d_name[0] != '.') next.push_back(dir + "/" + e->d_name);
        }
        closedir(d);
        if (next.size() > 100000) break;
      }
      level.swap(next);
    }
    base.clear();
    for (auto& dir : level) {
      if (cgroup_lists(rel == "/" ? dir : dir + rel, getpid())) {
        base = dir;
        break;
      }
    }
    if (base.empty()) return -ENOENT;
  }
  out = rel == "/" ? base : base + rel;
  return 0;
}

// Where this process's trees get their cgroups: its own cgroup, or, when it
// runs in the leaf prepareCgroupLimits() moves a host into (lib/cgroup-leaf.ts:
// "<the host's cgroup>/cordon-host"), the host's cgroup that holds that leaf.
// The leaf must stay a leaf: with controllers enabled for its children a v2
// cgroup may hold no process ("no internal processes"), so the trees are the
// leaf's siblings, under the controllers the host's cgroup enabled.
int tree_parent_dir(std::string& out) {
  int rc = own_cgroup_dir(out);
  if (rc < 0) return rc;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  static const char kLeaf[] = "/cordon-host";
  const size_t n = sizeof kLeaf - 1;
  if (out.size() > n && out.compare(out.size() - n, n, kLeaf) == 0) out.resize(out.size() - n);
  return 0;
}

}  // namespace

int probe(Probe& out) {
  out = Probe{};
  int fd = sys_pidfd_open(getpid());
  if (fd >= 0) {
    out.pidfd = sys_pidfd_send_signal(fd, 0) == 0;
    close(fd);
  }
  int current = 0;
  out.subreaper = prctl(PR_GET_CHILD_SUBREAPER, &current, 0, 0, 0) == 0;
  out.proc_scan = access("/proc/self/stat", R_OK) == 0;
  out.page_size = sysconf(_SC_PAGESIZE);
  out.arg_max = sysconf(_SC_ARG_MAX);
  return 0;
}

bool cgroup_available() {
  // The cgroup tier needs clone3's CLONE_INTO_CGROUP (5.7) and cgroup.kill
  // (5.14, which the host's fallback when the anchor dies relies on).
  std::string own;
  return kernel_at_least(5, 14) && tree_parent_dir(own) == 0 && access(own.c_str(), W_OK) == 0;
}

namespace {

// 64 bits no other process can predict or have used: getrandom(), else the
// boot-time clock in nanoseconds mixed with the pid.
uint64_t unique_suffix() {
  uint64_t v = 0;
#ifdef SYS_getrandom
  if (syscall(SYS_getrandom, &v, sizeof v, 0x0001 /* GRND_NONBLOCK */) == static_cast<long>(sizeof v)) return v;
#endif
  timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  v = static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
  return v ^ (static_cast<uint64_t>(getpid()) << 40);
}

// An empty cgroup directory tree, bottom-up. Only directories are removed,
// and the kernel refuses rmdir of any cgroup that has a process or a child.
void remove_empty_cgroup(const std::string& dir, int depth) {
  if (depth < 32) {
    if (DIR* d = opendir(dir.c_str())) {
      std::vector<std::string> subs;
      while (dirent* e = readdir(d)) {
        if (e->d_type == DT_DIR && e->d_name[0] != '.') subs.push_back(e->d_name);
      }
      closedir(d);
      for (auto& sub : subs) remove_empty_cgroup(dir + "/" + sub, depth + 1);
    }
  }
  rmdir(dir.c_str());
}

// Tree cgroups ("cordon-<anchor pid>[-<suffix>]") that an anchor left behind
// when it was killed before it could remove them, and that nothing removed
// since (the host was gone too). Removed when they are empty, their anchor's
// pid is no live process, and they are older than a few seconds: a live
// anchor's cgroup is empty only between its mkdir and the clone3 into it
// (milliseconds), and the age check also spares anchors this process cannot
// see (another pid namespace sharing the cgroup).
void sweep_stale(const std::string& own) {
  DIR* d = opendir(own.c_str());
  if (!d) return;
  std::vector<std::string> stale;
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  while (dirent* e = readdir(d)) {
    if (e->d_type != DT_DIR || strncmp(e->d_name, "cordon-", 7) != 0) continue;
    char* end = nullptr;
    long long pid = strtoll(e->d_name + 7, &end, 10);
    if (end == e->d_name + 7 || (*end != '\0' && *end != '-') || pid <= 0) continue;
    if (pid == getpid()) continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) continue;  // alive (its own, or a reuse)
    struct stat sb;
    std::string dir = own + "/" + e->d_name;
    if (stat(dir.c_str(), &sb) != 0 || now.tv_sec - sb.st_mtim.tv_sec < 5) continue;
    stale.push_back(dir);
  }
  closedir(d);
  for (auto& dir : stale) remove_empty_cgroup(dir, 0);
}

}  // namespace

void sweep_stale_cgroups(const std::string& dir) { sweep_stale(dir); }

int cgroup_create(const std::string& prefix, std::string& path, int& dir_fd, int& kill_fd) {
  std::string own;
  int rc = tree_parent_dir(own);
  if (rc < 0) return rc;
  if (own.back() == '/') own.pop_back();
  sweep_stale(own);
  // A name nobody can have taken: another anchor's (a recycled pid whose
  // cgroup was left behind), or any same-user process's that made one on
  // purpose. An EEXIST all the same is retried with a new suffix.
  for (int attempt = 0;; attempt++) {
    char suffix[24];
    snprintf(suffix, sizeof suffix, "-%016llx", static_cast<unsigned long long>(unique_suffix()));
    path = own + "/" + prefix + suffix;
    if (mkdir(path.c_str(), 0755) == 0) break;
    if (errno != EEXIST || attempt >= 8) return -errno;
  }
  dir_fd = open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    int err = errno;
    rmdir(path.c_str());
    return -err;
  }
  kill_fd = open((path + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC);
  return 0;
}

int64_t fork_into_cgroup(int dir_fd) {
  // struct clone_args as of Linux 5.7 (CLONE_INTO_CGROUP): 11 u64 fields.
  uint64_t args[11] = {};
  const uint64_t kCloneIntoCgroup = 0x200000000ULL;
  args[0] = kCloneIntoCgroup;             // flags
  args[4] = SIGCHLD;                      // exit_signal
  args[10] = static_cast<uint64_t>(dir_fd);  // cgroup
#ifndef SYS_clone3
#define SYS_clone3 435
#endif
  long pid = syscall(SYS_clone3, args, sizeof args);
  return pid < 0 ? -errno : pid;
}

namespace {

// The pids listed in `dir`/cgroup.procs and in those of its descendant
// cgroups (a command that runs cordon itself has its own trees' cgroups
// below), depth-bounded as removal is. Zombies are not listed: a process
// leaves its cgroup as it exits.
void cgroup_pids(const std::string& dir, int depth, std::vector<int64_t>& pids) {
  std::string procs;
  if (read_file((dir + "/cgroup.procs").c_str(), procs, 1 << 24)) {
    const char* p = procs.c_str();
    while (*p) {
      char* end = nullptr;
      long long v = strtoll(p, &end, 10);
      if (end == p) break;
      if (v > 0) pids.push_back(v);  // 0: a process of a pid namespace we cannot see
      p = end;
      while (*p == '\n') p++;
    }
  }
  if (depth >= 32) return;
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> subs;
  while (dirent* e = readdir(d)) {
    if (e->d_type == DT_DIR && e->d_name[0] != '.') subs.push_back(e->d_name);
  }
  closedir(d);
  for (auto& sub : subs) cgroup_pids(dir + "/" + sub, depth + 1, pids);
}

}  // namespace

namespace {
Member to_member(const Stat& st, const std::vector<FileId>& watched, bool commands);
}  // namespace

int cgroup_members(const std::string& dir, const std::vector<FileId>& watched, std::vector<Member>& out,
                   bool commands) {
  out.clear();
  std::vector<int64_t> pids;
  cgroup_pids(dir, 0, pids);
  for (int64_t pid : pids) {
    Stat st;
    if (!read_stat(pid, st) || st.state == 'Z' || st.state == 'X') continue;
    out.push_back(to_member(st, watched, commands));
  }
  return static_cast<int>(out.size());
}

int cgroup_open_events(const std::string& dir) {
  int fd = open((dir + "/cgroup.events").c_str(), O_RDONLY | O_CLOEXEC);
  return fd < 0 ? -errno : fd;
}

int cgroup_read_events(int events_fd, bool& populated, bool& frozen) {
  char buf[256];
  if (lseek(events_fd, 0, SEEK_SET) < 0) return -errno;
  ssize_t n;
  do {
    n = read(events_fd, buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return -errno;
  buf[n] = '\0';
  const char* p = strstr(buf, "populated ");
  if (!p) return -EINVAL;
  populated = p[10] == '1';
  p = strstr(buf, "frozen ");
  frozen = p && p[7] == '1';  // before Linux 5.2: no freezer, never frozen
  return 0;
}

int cgroup_open_freeze(const std::string& dir) {
  int fd = open((dir + "/cgroup.freeze").c_str(), O_WRONLY | O_CLOEXEC);
  return fd < 0 ? -errno : fd;
}

int cgroup_set_frozen(int freeze_fd, bool frozen) {
  ssize_t w;
  do {
    w = pwrite(freeze_fd, frozen ? "1" : "0", 1, 0);
  } while (w < 0 && errno == EINTR);
  return w == 1 ? 0 : -(w < 0 ? errno : EIO);
}

int become_subreaper() {
  return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 ? 0 : -errno;
}

namespace {

// Whether this kernel has /proc/<pid>/task/<tid>/children (CONFIG_PROC_CHILDREN,
// Linux 4.2+ where it is configured: every major distribution does, for CRIU).
bool has_children_files() {
  static int has = -1;
  if (has < 0) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/children", static_cast<long>(syscall(SYS_gettid)));
    has = access(path, R_OK) == 0 ? 1 : 0;
  }
  return has == 1;
}

// Appends the pids /proc/<pid>/task/<tid>/children lists for every thread of
// `pid` (a child belongs to the thread that forked it): `threads` 1 reads
// the main thread's file only, anything else lists the task directory.
void read_children(int64_t pid, int64_t threads, std::vector<int64_t>& out) {
  std::string text;
  auto read_one = [&](const char* tid) {
    char path[320];
    snprintf(path, sizeof path, "/proc/%lld/task/%s/children", static_cast<long long>(pid), tid);
    if (!read_file(path, text, static_cast<size_t>(1) << 26)) return;
    const char* p = text.c_str();
    for (;;) {
      char* end = nullptr;
      long long v = strtoll(p, &end, 10);
      if (end == p) break;
      if (v > 0) out.push_back(v);
      p = end;
    }
  };
  if (threads == 1) {
    char tid[24];
    snprintf(tid, sizeof tid, "%lld", static_cast<long long>(pid));
    read_one(tid);
    return;
  }
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%lld/task", static_cast<long long>(pid));
  DIR* d = opendir(dir);
  if (!d) return;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] >= '1' && e->d_name[0] <= '9') read_one(e->d_name);
  }
  closedir(d);
}

Member to_member(const Stat& st, const std::vector<FileId>& watched, bool commands) {
  Member m;
  m.pid = st.pid;
  m.ppid = st.ppid;
  m.pgid = st.pgid;
  m.start_time = st.start;
  m.state = st.state;
  if (commands) m.command = read_cmdline(st.pid);
  m.holds_output = holds_any(st.pid, watched);
  return m;
}

}  // namespace

int list_descendants(int64_t anchor, const std::vector<FileId>& watched, std::vector<Member>& out,
                     bool commands) {
  out.clear();
  if (!has_children_files()) return -ENOSYS;
  // Pids seen in a children list, and those found to be members (the anchor's
  // descendants: what a pid read from a list must descend from, as it may
  // have been recycled by the time its stat is read).
  std::unordered_map<int64_t, bool> seen;
  seen[anchor] = true;
  struct Parent {
    int64_t pid;
    int64_t threads;  // 0: not known (the anchor): list its threads
  };
  std::vector<Parent> stack{{anchor, 0}};
  std::vector<int64_t> kids;
  while (!stack.empty()) {
    Parent parent = stack.back();
    stack.pop_back();
    kids.clear();
    read_children(parent.pid, parent.threads, kids);
    for (int64_t pid : kids) {
      if (seen.count(pid)) continue;
      Stat st;
      if (!read_stat(pid, st)) continue;  // gone since the list was read
      auto up = seen.find(st.ppid);
      bool ours = (up != seen.end() && up->second) || descends_from(pid, anchor);
      seen[pid] = ours;
      if (!ours) continue;  // recycled since the list was read: not ours
      // A zombie is no member, but a process whose main thread has exited
      // shows as one while its other threads (and their children) live.
      if (st.state != 'Z' && st.state != 'X') out.push_back(to_member(st, watched, commands));
      stack.push_back(Parent{pid, st.threads});
    }
  }
  return static_cast<int>(out.size());
}

int list_tree(int64_t anchor, int64_t group, const std::vector<FileId>& watched,
              std::vector<Member>& out, bool commands) {
  out.clear();
  std::vector<Stat> all;
  scan_all(all);
  if (all.empty()) return -ENOENT;
  std::unordered_multimap<int64_t, const Stat*> children;
  children.reserve(all.size());
  for (const Stat& st : all) children.emplace(st.ppid, &st);
  std::vector<const Stat*> found;
  std::unordered_map<int64_t, bool> seen;
  std::vector<int64_t> queue{anchor};
  while (!queue.empty()) {
    int64_t parent = queue.back();
    queue.pop_back();
    auto range = children.equal_range(parent);
    for (auto it = range.first; it != range.second; ++it) {
      const Stat* st = it->second;
      if (st->pid == anchor || seen[st->pid]) continue;
      seen[st->pid] = true;
      found.push_back(st);
      queue.push_back(st->pid);
    }
  }
  if (group > 0) {
    for (const Stat& st : all) {
      if (st.pgid == group && st.pid != anchor && !seen[st.pid]) {
        seen[st.pid] = true;
        found.push_back(&st);
      }
    }
  }
  for (const Stat* st : found) {
    if (st->state != 'Z' && st->state != 'X') out.push_back(to_member(*st, watched, commands));
  }
  return static_cast<int>(out.size());
}

bool holds_output(int64_t pid, uint64_t start_time, const std::vector<FileId>& watched) {
  return same_process_alive(pid, start_time) && holds_any(pid, watched);
}

std::string command_line(int64_t pid) {
  return read_cmdline(pid);
}

bool same_process_alive(int64_t pid, uint64_t start_time) {
  Stat st;
  if (!read_stat(pid, st)) return false;
  return st.start == start_time && st.state != 'Z' && st.state != 'X';
}

int group_live_members(int64_t group) {
  // Lean on purpose (the anchor runs it while terminating, on machines that
  // may be loaded): one open and one read of the start of each stat file.
  DIR* d = opendir("/proc");
  if (!d) return -errno;
  int n = 0;
  char path[300];
  char buf[512];
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0) continue;
    buf[got] = '\0';
    // "pid (comm) state ppid pgrp ...": comm may hold anything, parse from the last ')'.
    char* paren = strrchr(buf, ')');
    if (!paren || paren[1] != ' ' || !paren[2]) continue;
    char state = paren[2];
    if (state == 'Z' || state == 'X') continue;
    char* q = paren + 3;
    strtoll(q, &q, 10);  // ppid
    if (strtoll(q, nullptr, 10) == group) n++;
  }
  closedir(d);
  return n;
}

int64_t current_pgid(int64_t pid, uint64_t start_time) {
  Stat st;
  if (!read_stat(pid, st) || st.start != start_time || st.state == 'Z' || st.state == 'X') return -1;
  return st.pgid;
}

bool is_member(int64_t anchor, int64_t group, const Member& member) {
  Stat st;
  if (!read_stat(member.pid, st)) return false;
  if (st.start != member.start_time) return false;  // recycled pid
  if (st.state == 'Z' || st.state == 'X') return false;
  if (member.from_snapshot) return true;  // verified as ours before; same process
  if (st.ppid == anchor) return true;
  if (group > 0 && st.pgid == group) return true;
  return descends_from(member.pid, anchor);
}

int signal_member(int64_t anchor, int64_t group, const Member& member, int sig,
                  bool use_pidfd) {
  auto still_ours = [&]() { return is_member(anchor, group, member); };
  if (use_pidfd) {
    int fd = sys_pidfd_open(member.pid);
    if (fd < 0) return -errno;
    // The pidfd now pins one process. Verify it is the one we enumerated and
    // still ours; if it dies after this check, the signal fails with ESRCH
    // instead of reaching whoever reuses the number.
    if (!still_ours()) {
      close(fd);
      return -ESRCH;
    }
    int rc = sys_pidfd_send_signal(fd, sig);
    int err = errno;
    close(fd);
    return rc == 0 ? 0 : -err;
  }
  // No pidfd: a direct unreaped child of the calling anchor is pinned (only we
  // reap it, and not concurrently). Anything else is verified then signalled;
  // capabilities() reports this fallback as not pid-reuse safe.
  if (!still_ours()) return -ESRCH;
  return kill(static_cast<pid_t>(member.pid), sig) == 0 ? 0 : -errno;
}

int random_bytes(void* buf, size_t n) {
  auto* p = static_cast<unsigned char*>(buf);
  size_t got = 0;
  while (got < n) {
    long r = syscall(SYS_getrandom, p + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;  // ENOSYS before Linux 3.17: /dev/urandom
    got += static_cast<size_t>(r);
  }
  if (got == n) return 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  while (got < n) {
    ssize_t r = read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      int err = r < 0 ? errno : EIO;
      close(fd);
      return -err;
    }
    got += static_cast<size_t>(r);
  }
  close(fd);
  return 0;
}

uint64_t start_time_of(int64_t pid) {
  Stat st;
  return read_stat(pid, st) ? st.start : 0;
}

int list_user_processes(uint64_t since, std::vector<Member>& out) {
  out.clear();
  DIR* d = opendir("/proc");
  if (!d) return -errno;
  uid_t uid = geteuid();
  int64_t self = getpid();
  static const std::vector<FileId> kNone;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    char* end = nullptr;
    long long pid = strtoll(e->d_name, &end, 10);
    if (*end || pid == self) continue;
    // The entry's owner is the process's effective uid (root's for a
    // non-dumpable one): no file is opened for another user's process.
    struct stat sb;
    if (fstatat(dirfd(d), e->d_name, &sb, 0) != 0 || sb.st_uid != uid) continue;
    Stat st;
    if (!read_stat(pid, st) || st.state == 'Z' || st.state == 'X' || st.start < since) continue;
    out.push_back(to_member(st, kNone, false));
  }
  closedir(d);
  return static_cast<int>(out.size());
}

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

int count_open_fds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -errno;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') n++;
  }
  closedir(d);
  return n - 1;  // the directory stream itself
}

}  // namespace cordon

namespace cordon {

void close_fds_from(int lowest, int keep) {
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
  auto range = [](unsigned from, unsigned to) {
    return from > to || syscall(SYS_close_range, from, to, 0) == 0;
  };
  if (keep < lowest) keep = -1;
  bool ok = keep < 0 ? range(lowest, ~0U)
                     : range(lowest, static_cast<unsigned>(keep) - 1) && range(static_cast<unsigned>(keep) + 1, ~0U);
  if (ok) return;
  // Kernels before 5.9: close what /proc lists (opendir's own fd is skipped).
  DIR* d = opendir("/proc/self/fd");
  if (!d) {
    for (int fd = lowest; fd < 65536; fd++) {
      if (fd != keep) close(fd);
    }
    return;
  }
  int own = dirfd(d);
  std::vector<int> fds;
  while (dirent* e = readdir(d)) {
    int fd = atoi(e->d_name);
    if (e->d_name[0] != '.' && fd >= lowest && fd != own && fd != keep) fds.push_back(fd);
  }
  closedir(d);
  for (int fd : fds) close(fd);
}

}  // namespace cordon
