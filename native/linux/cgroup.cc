// Linux, the cgroup tier's cgroup v2 operations: where this process's trees
// get their cgroups (its own cgroup, found inside a cgroup namespace too, or
// the host's beside the "cordon-host" leaf), a tree cgroup under a name no
// other process can have taken, a child born inside it (clone3), its members
// read from cgroup.procs, its populated/frozen events, its freezer, and the
// removal of tree cgroups whose anchor is gone. Removal only ever rmdirs
// (the kernel refuses a cgroup that has a process or a child), and spares any
// tree cgroup whose anchor pid is alive or which is younger than 5 seconds.
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

namespace cordon {

using internal::read_file;

namespace {

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

namespace {
// What cgroup_prepare() found: the directory for this anchor's tree cgroup.
std::string g_prepared_parent;
}  // namespace

void cgroup_prepare() {
  std::string own;
  if (tree_parent_dir(own) < 0) return;
  if (own.back() == '/') own.pop_back();
  sweep_stale(own);
  g_prepared_parent = own;
}

int cgroup_create(const std::string& prefix, std::string& path, int& dir_fd, int& kill_fd) {
  std::string own = g_prepared_parent;
  if (own.empty()) {
    int rc = tree_parent_dir(own);
    if (rc < 0) return rc;
    if (own.back() == '/') own.pop_back();
    sweep_stale(own);
  }
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
void parse_pids(const std::string& procs, std::vector<int64_t>& pids) {
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

// A held file read whole from offset 0 (pread: the file position is not used).
bool read_held(int fd, std::string& out, size_t limit) {
  out.clear();
  char buf[4096];
  for (;;) {
    ssize_t n = pread(fd, buf, sizeof buf, static_cast<off_t>(out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() >= limit) break;
  }
  return true;
}

// The sub-cgroups of a held directory, listed from its start.
bool held_subdirs(int list_fd, std::vector<std::string>& subs) {
  if (lseek(list_fd, 0, SEEK_SET) < 0) return false;
  alignas(8) char buf[8192];
  for (;;) {
    long n = syscall(SYS_getdents64, list_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    for (long off = 0; off < n;) {
      const auto* e = reinterpret_cast<const internal::Dirent64*>(buf + off);
      if (e->type == DT_DIR && e->name[0] != '.') subs.emplace_back(e->name);
      off += e->reclen;
    }
  }
}

void cgroup_pids(const std::string& dir, int depth, std::vector<int64_t>& pids) {
  std::string procs;
  if (read_file((dir + "/cgroup.procs").c_str(), procs, 1 << 24)) parse_pids(procs, pids);
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

// Live members of the listed pids, as list_tree gives them.
int members_of(const std::vector<int64_t>& pids, const std::vector<FileId>& watched, std::vector<Member>& out,
               bool commands) {
  for (int64_t pid : pids) {
    internal::Stat st;
    if (!internal::read_stat(pid, st) || st.state == 'Z' || st.state == 'X') continue;
    out.push_back(internal::to_member(st, watched, commands));
  }
  return static_cast<int>(out.size());
}

}  // namespace

int cgroup_members(const std::string& dir, const std::vector<FileId>& watched, std::vector<Member>& out,
                   bool commands) {
  out.clear();
  std::vector<int64_t> pids;
  cgroup_pids(dir, 0, pids);
  return members_of(pids, watched, out, commands);
}

int cgroup_members_held(int procs_fd, int list_fd, const std::string& dir, const std::vector<FileId>& watched,
                        std::vector<Member>& out, bool commands) {
  if (procs_fd < 0 || list_fd < 0) return cgroup_members(dir, watched, out, commands);
  out.clear();
  std::vector<int64_t> pids;
  std::string procs;
  std::vector<std::string> subs;
  if (!read_held(procs_fd, procs, 1 << 24) || !held_subdirs(list_fd, subs)) return cgroup_members(dir, watched, out, commands);
  parse_pids(procs, pids);
  for (auto& sub : subs) cgroup_pids(dir + "/" + sub, 1, pids);
  return members_of(pids, watched, out, commands);
}

bool cgroup_member_pids(int procs_fd, int list_fd, const std::string& dir, std::vector<int64_t>& pids) {
  pids.clear();
  std::string procs;
  std::vector<std::string> subs;
  if (procs_fd < 0 || list_fd < 0 || !read_held(procs_fd, procs, 1 << 24) || !held_subdirs(list_fd, subs)) return false;
  parse_pids(procs, pids);
  for (auto& sub : subs) cgroup_pids(dir + "/" + sub, 1, pids);
  return true;
}

int cgroup_members_pinned(int procs_fd, int list_fd, const std::string& dir, PinnedMembers& out) {
  std::vector<int64_t> pids;
  if (!cgroup_member_pids(procs_fd, list_fd, dir, pids)) cgroup_pids(dir, 0, pids);
  static const std::vector<FileId> kNone;
  // The pins are held until the round's signals are sent: at most half the
  // descriptors the anchor may open, so the members past that (a storm, a
  // low `ulimit -n`) still get the pidfd their signal opens (unpinned).
  static const size_t budget = [] {
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return static_cast<size_t>(4096);
    return r.rlim_cur > 64 ? std::min(static_cast<size_t>((r.rlim_cur - 64) / 2), static_cast<size_t>(4096)) : 0;
  }();
  size_t pinned = 0;
  for (int64_t pid : pids) {
    int fd = -1;
    if (pinned < budget) {
      fd = internal::sys_pidfd_open(pid);
      if (fd < 0 && errno == ESRCH) continue;  // gone since the listing
      if (fd >= 0) pinned++;
    }
    // Read after the pin: while the pinned process has not exited, the pid
    // is its own, so this record is too. A zombie is left out, as a listing
    // leaves it out. Without a pin (no pidfds; past the budget; no
    // descriptor left) the member is listed as cgroup_members_held lists
    // it, and signalled after a check of /proc (signal_member).
    internal::Stat st;
    bool live = internal::read_stat(pid, st) && st.state != 'Z' && st.state != 'X';
    if (live && fd >= 0) {
      struct pollfd exited = {fd, POLLIN, 0};
      live = poll(&exited, 1, 0) == 0;
    }
    if (!live) {
      if (fd >= 0) close(fd);
      continue;
    }
    out.add(internal::to_member(st, kNone, false), fd);
  }
  return static_cast<int>(out.members.size());
}

int signal_pin(int pidfd, int sig, bool then_cont) {
  // Exited since it was listed (a zombie takes a signal without error): gone,
  // as signal_member says of a zombie.
  struct pollfd exited = {pidfd, POLLIN, 0};
  if (poll(&exited, 1, 0) != 0) return -ESRCH;
  int rc = internal::sys_pidfd_send_signal(pidfd, sig) == 0 ? 0 : -errno;
  if (then_cont) internal::sys_pidfd_send_signal(pidfd, SIGCONT);
  return rc;
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

}  // namespace cordon
