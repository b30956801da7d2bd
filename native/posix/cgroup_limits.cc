// Resource limits on a cgroup tier's tree: cgroup_limits.h.
#include "cgroup_limits.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../cordon.h"
#include "../protocol.h"

namespace cordon {
namespace anchor {

using protocol::trace;

namespace {

bool read_small(const std::string& path, std::string& out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  ssize_t n;
  do {
    n = read(fd, buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n < 0) return false;
  out.assign(buf, static_cast<size_t>(n));
  return true;
}

// A number from a file that holds one ("123\n"), or the value of `key` in a
// flat-keyed file ("key 123" lines); -1 if absent.
int64_t read_number(const std::string& path, const char* key = nullptr) {
  std::string s;
  if (!read_small(path, s)) return -1;
  const char* p = s.c_str();
  if (key) {
    size_t klen = strlen(key);
    for (;;) {
      if (strncmp(p, key, klen) == 0 && p[klen] == ' ') {
        p += klen + 1;
        break;
      }
      p = strchr(p, '\n');
      if (!p) return -1;
      p++;
    }
  }
  char* end = nullptr;
  long long v = strtoll(p, &end, 10);
  return end == p ? -1 : static_cast<int64_t>(v);
}

#if CORDON_LINUX_PROC
// 0 or a negative errno.
int write_small(const std::string& path, const std::string& value) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  ssize_t w;
  do {
    w = write(fd, value.data(), value.size());
  } while (w < 0 && errno == EINTR);
  int err = w < 0 ? errno : 0;
  close(fd);
  trace("%s <- %s: %s", path.c_str(), value.c_str(), err ? strerror(err) : "ok");
  return -err;
}

bool has_token(const std::string& list, const char* token, char sep) {
  size_t n = strlen(token);
  size_t i = 0;
  while (i <= list.size()) {
    size_t j = list.find(sep, i);
    if (j == std::string::npos) j = list.size();
    if (j - i == n && list.compare(i, n, token) == 0) return true;
    i = j + 1;
  }
  return false;
}

// The anchor's own cgroup in the v1 hierarchy of `controller`: its mount
// point (a "cgroup" mount whose super options name the controller) joined
// with the path /proc/self/cgroup gives for that hierarchy. Empty if there is
// no such hierarchy (or it is mounted from a subtree, as inside a cgroup
// namespace's own mount: not handled).
std::string own_v1_dir(const char* controller) {
  std::string mount;
  if (FILE* f = fopen("/proc/self/mountinfo", "re")) {
    char line[4096];
    while (fgets(line, sizeof line, f)) {
      const char* dash = strstr(line, " - cgroup ");
      if (!dash) continue;
      char root[4096], point[4096], src[256], super[1024];
      if (sscanf(line, "%*s %*s %*s %4095s %4095s", root, point) != 2) continue;
      if (sscanf(dash + 10, "%255s %1023s", src, super) != 2) continue;
      if (!has_token(super, controller, ',')) continue;
      if (strcmp(root, "/") == 0) mount = point;
      break;
    }
    fclose(f);
  }
  if (mount.empty()) return std::string();
  std::string rel;
  if (FILE* f = fopen("/proc/self/cgroup", "re")) {
    char line[4096];
    while (fgets(line, sizeof line, f)) {
      // <id>:<controllers>:<path>
      char* a = strchr(line, ':');
      char* b = a ? strchr(a + 1, ':') : nullptr;
      if (!b) continue;
      std::string controllers(a + 1, b);
      if (!has_token(controllers, controller, ',')) continue;
      rel = b + 1;
      while (!rel.empty() && (rel.back() == '\n' || rel.back() == '\r')) rel.pop_back();
      break;
    }
    fclose(f);
  }
  if (rel.empty() || rel[0] != '/') return std::string();
  return rel == "/" ? mount : mount + rel;
}

std::string parent_of(const std::string& dir) {
  size_t slash = dir.rfind('/');
  return slash == std::string::npos || slash == 0 ? std::string("/") : dir.substr(0, slash);
}
#endif

}  // namespace

CgroupLimits::~CgroupLimits() {
  for (Place* p : {&memory_, &pids_, &cpu_}) {
    if (p->procs_fd >= 0) close(p->procs_fd);
    p->procs_fd = -1;
  }
}

int CgroupLimits::apply(const LimitSpec& spec, const std::string& tree_dir, const std::string& name) {
#if CORDON_LINUX_PROC
  std::string delegated;  // the controllers the tree's v2 cgroup has
  if (!tree_dir.empty()) read_small(parent_of(tree_dir) + "/cgroup.subtree_control", delegated);
  while (!delegated.empty() && delegated.back() == '\n') delegated.pop_back();
  struct Want {
    Place& place;
    const char* controller;
    bool wanted;
  } wants[] = {{memory_, "memory", spec.memory > 0}, {pids_, "pids", spec.processes > 0}, {cpu_, "cpu", spec.cpu_quota_us > 0}};
  int rc = 0;
  for (auto& w : wants) {
    if (!w.wanted) continue;
    if (has_token(delegated, w.controller, ' ')) {
      w.place.dir = tree_dir;
      continue;
    }
    std::string own = own_v1_dir(w.controller);
    if (own.empty()) {
      trace("limits: no %s controller delegated (v2: \"%s\") and no v1 %s hierarchy", w.controller, delegated.c_str(),
            w.controller);
      rc = -EOPNOTSUPP;
      break;
    }
    cordon::sweep_stale_cgroups(own);  // what anchors killed with their host left here
    std::string dir = own + "/" + name;
    if (mkdir(dir.c_str(), 0755) != 0) {
      rc = -errno;
      trace("limits: mkdir %s: %s", dir.c_str(), strerror(errno));
      break;
    }
    w.place.dir = dir;
    w.place.v1 = true;
    w.place.procs_fd = open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (w.place.procs_fd < 0) {
      rc = -errno;
      break;
    }
  }
  if (rc == 0 && spec.memory > 0) {
    const std::string& d = memory_.dir;
    std::string bytes = std::to_string(spec.memory);
    if (memory_.v1) {
      rc = write_small(d + "/memory.limit_in_bytes", bytes);
      // With swap accounting: memory and swap together, so the tree cannot
      // swap past its limit (set after memory.limit_in_bytes, which must not exceed it).
      if (rc == 0 && access((d + "/memory.memsw.limit_in_bytes").c_str(), W_OK) == 0) {
        rc = write_small(d + "/memory.memsw.limit_in_bytes", bytes);
      }
    } else {
      rc = write_small(d + "/memory.max", bytes);
      if (rc == 0 && access((d + "/memory.swap.max").c_str(), W_OK) == 0) rc = write_small(d + "/memory.swap.max", "0");
    }
  }
  if (rc == 0 && spec.processes > 0) rc = write_small(pids_.dir + "/pids.max", std::to_string(spec.processes));
  if (rc == 0 && spec.cpu_quota_us > 0) {
    if (cpu_.v1) {
      rc = write_small(cpu_.dir + "/cpu.cfs_period_us", std::to_string(kCpuPeriodUs));
      if (rc == 0) rc = write_small(cpu_.dir + "/cpu.cfs_quota_us", std::to_string(spec.cpu_quota_us));
    } else {
      rc = write_small(cpu_.dir + "/cpu.max", std::to_string(spec.cpu_quota_us) + " " + std::to_string(kCpuPeriodUs));
    }
  }
  if (rc != 0) {
    remove();
    return rc;
  }
  applied_ = spec;
  return 0;
#else
  (void)spec;
  (void)tree_dir;
  (void)name;
  return -ENOSYS;
#endif
}

int CgroupLimits::join_in_child() {
  // Our own pid, as the kernel reads it in this pid namespace (the anchor's).
  char pid[24];
  int n = snprintf(pid, sizeof pid, "%ld", static_cast<long>(getpid()));
  for (const Place* p : {&memory_, &pids_, &cpu_}) {
    if (p->procs_fd < 0) continue;
    ssize_t w;
    do {
      w = write(p->procs_fd, pid, static_cast<size_t>(n));
    } while (w < 0 && errno == EINTR);
    if (w < 0) return errno;
  }
  return 0;
}

Usage CgroupLimits::usage(const std::string& tree_dir) const {
  Usage u;
  // The tree's v2 cgroup accounts CPU time without any controller.
  if (!tree_dir.empty()) u.cpu_us = read_number(tree_dir + "/cpu.stat", "usage_usec");
  if (!memory_.dir.empty()) {
    if (memory_.v1) {
      u.memory_peak = read_number(memory_.dir + "/memory.max_usage_in_bytes");
      u.oom_kills = read_number(memory_.dir + "/memory.oom_control", "oom_kill");
    } else {
      u.memory_peak = read_number(memory_.dir + "/memory.peak");
      u.oom_kills = read_number(memory_.dir + "/memory.events", "oom_kill");
    }
  }
  if (!pids_.dir.empty()) {
    u.processes_peak = read_number(pids_.dir + "/pids.peak");
    u.pids_max_hits = read_number(pids_.dir + "/pids.events", "max");
  }
  return u;
}

std::string CgroupLimits::how() const {
  bool v1 = false, v2 = false;
  for (const Place* p : {&memory_, &pids_, &cpu_}) {
    if (p->dir.empty()) continue;
    (p->v1 ? v1 : v2) = true;
  }
  return v1 && v2 ? "v1+v2" : v1 ? "v1" : v2 ? "v2" : "none";
}

std::vector<std::string> CgroupLimits::v1_dirs() const {
  std::vector<std::string> out;
  for (const Place* p : {&memory_, &pids_, &cpu_}) {
    if (p->v1 && !p->dir.empty()) out.push_back(p->dir);
  }
  return out;
}

void CgroupLimits::remove() {
  for (Place* p : {&memory_, &pids_, &cpu_}) {
    if (p->procs_fd >= 0) close(p->procs_fd);
    p->procs_fd = -1;
    if (p->v1 && !p->dir.empty() && rmdir(p->dir.c_str()) != 0) trace("rmdir %s: %s", p->dir.c_str(), strerror(errno));
    *p = Place{};
  }
  applied_ = LimitSpec{};
}

}  // namespace anchor
}  // namespace cordon
