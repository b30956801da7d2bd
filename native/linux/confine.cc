// Confinement of a tree by the kernel: see confine.h.
#include "confine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace cordon {
namespace confine {

namespace {

// The system calls (the same numbers on every architecture Linux has added
// them to since 5.13) and the UAPI, written out: the C library's headers may
// predate the ABI this kernel has.
constexpr long kCreateRuleset = 444;
constexpr long kAddRule = 445;
constexpr long kRestrictSelf = 446;
constexpr uint32_t kCreateRulesetVersion = 1;
constexpr int kRulePathBeneath = 1;

struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI 4
  uint64_t scoped;              // ABI 6
};

struct __attribute__((packed)) PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
};

// LANDLOCK_ACCESS_FS_*
constexpr uint64_t kExecute = 1ULL << 0;
constexpr uint64_t kWriteFile = 1ULL << 1;
constexpr uint64_t kReadFile = 1ULL << 2;
constexpr uint64_t kReadDir = 1ULL << 3;
constexpr uint64_t kTruncate = 1ULL << 14;   // ABI 3
constexpr uint64_t kIoctlDev = 1ULL << 15;   // ABI 5
// What a rule on a file (not a directory) may grant.
constexpr uint64_t kFileRights = kExecute | kWriteFile | kReadFile | kTruncate | kIoctlDev;
// LANDLOCK_ACCESS_NET_BIND_TCP, _CONNECT_TCP (ABI 4)
constexpr uint64_t kNetTcp = (1ULL << 0) | (1ULL << 1);
// LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (ABI 6)
constexpr uint64_t kScopeAbstractUnix = 1ULL << 0;
// LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON (ABI 7): denials after the exec are
// audited too (by default only those of the program that called restrict_self).
constexpr uint32_t kLogNewExecOn = 1U << 1;

// Every filesystem right the kernel's ABI knows: all of them handled, so
// what no rule grants is denied.
uint64_t fs_rights(int abi) {
  uint64_t all = (1ULL << 13) - 1;  // ABI 1: EXECUTE .. MAKE_SYM
  if (abi >= 2) all |= 1ULL << 13;  // REFER
  if (abi >= 3) all |= kTruncate;
  if (abi >= 5) all |= kIoctlDev;
  return all;
}

// The devices a program expects to open for writing (a shell's `>/dev/null`
// truncates: TRUNCATE; a terminal takes ioctls: IOCTL_DEV).
const char* const kDevices[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
                                "/dev/tty",  "/dev/ptmx", "/dev/pts"};

bool is_under(const std::string& path, const std::string& dir) {
  if (dir == "/") return path.size() > 0 && path[0] == '/';
  return path.size() >= dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         (path.size() == dir.size() || path[dir.size()] == '/');
}

class Builder {
 public:
  Builder(int fd, uint64_t handled, const std::vector<std::string>& denied, std::string& what)
      : fd_(fd), handled_(handled), denied_(denied), what_(what) {}

  // `access` on `path` and everything below it (a file: its file rights).
  // A missing path is skipped when `optional`.
  int allow(const std::string& path, uint64_t access, bool optional = false) {
    int pfd = open(path.c_str(), O_PATH | O_CLOEXEC);
    if (pfd < 0) {
      if (optional && errno == ENOENT) return 0;
      what_ = path;
      return -errno;
    }
    struct stat sb;
    int rc = 0;
    if (fstat(pfd, &sb) != 0) {
      rc = -errno;
    } else {
      if (!S_ISDIR(sb.st_mode)) access &= kFileRights;
      PathBeneathAttr rule{access & handled_, pfd};
      if (rule.allowed_access != 0 && syscall(kAddRule, fd_, kRulePathBeneath, &rule, 0) != 0) rc = -errno;
    }
    close(pfd);
    if (rc != 0) what_ = path;
    return rc;
  }

  // Read (and execute) everywhere below `path` but under a denied path.
  // Landlock rules only ever add access to a whole hierarchy, so a directory
  // with a denied path below it gets no rule of its own: each of its entries
  // does (recursively), but the one that leads to the denied path. Symbolic
  // links get none: access through one is decided at its target.
  int allow_reading(const std::string& path) {
    bool ancestor = false;
    for (const auto& d : denied_) {
      if (is_under(path, d)) return 0;  // denied itself
      if (is_under(d, path)) ancestor = true;
    }
    if (!ancestor) return allow(path, kExecute | kReadFile | kReadDir);
    DIR* dir = opendir(path.c_str());
    if (!dir) {
      what_ = path;
      return -errno;
    }
    std::vector<std::string> entries;
    while (struct dirent* e = readdir(dir)) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      entries.push_back((path == "/" ? "/" : path + "/") + e->d_name);
    }
    closedir(dir);
    for (const auto& entry : entries) {
      struct stat sb;
      if (lstat(entry.c_str(), &sb) != 0) continue;  // gone meanwhile
      if (S_ISLNK(sb.st_mode)) continue;
      int rc = allow_reading(entry);
      if (rc != 0) return rc;
    }
    return 0;
  }

 private:
  int fd_;
  uint64_t handled_;
  const std::vector<std::string>& denied_;
  std::string& what_;
};

}  // namespace

int landlock_abi() {
  long v = syscall(kCreateRuleset, nullptr, 0, kCreateRulesetVersion);
  return v > 0 ? static_cast<int>(v) : 0;
}

int prepare(const Spec& spec, Prepared& out, std::string& what) {
  out = Prepared{};
  out.network = spec.network;
  int abi = landlock_abi();
  if (abi < 1) {
    what = "landlock";
    return -EOPNOTSUPP;
  }
  out.abi = abi;
  uint64_t fs = fs_rights(abi);
  RulesetAttr attr{fs, 0, 0};
  size_t size = sizeof(uint64_t);
  if (abi >= 4) {
    size = 2 * sizeof(uint64_t);
    // No network: not one TCP port may be bound or connected to (besides
    // the namespace of its own, which has no interface up).
    if (spec.network == kNetworkNone) attr.handled_access_net = kNetTcp;
  }
  if (abi >= 6) {
    size = sizeof attr;
    // No abstract Unix socket made outside the tree can be connected to
    // (the network namespace of its own scopes them too).
    if (spec.network != kNetworkAll) attr.scoped = kScopeAbstractUnix;
  }
  long fd = syscall(kCreateRuleset, &attr, size, 0);
  if (fd < 0) {
    what = "landlock";
    return -errno;
  }
  int ruleset = static_cast<int>(fd);
  fcntl(ruleset, F_SETFD, FD_CLOEXEC);
  Builder b(ruleset, fs, spec.deny_read, what);
  int rc = b.allow_reading("/");
  for (size_t i = 0; rc == 0 && i < spec.write.size(); i++) rc = b.allow(spec.write[i], fs);
  for (const char* dev : kDevices) {
    if (rc != 0) break;
    rc = b.allow(dev, kReadFile | kWriteFile | kTruncate | kIoctlDev | kReadDir, true);
  }
  if (rc != 0) {
    close(ruleset);
    return rc;
  }
  out.ruleset_fd = ruleset;
  return 0;
}

int enter(const Prepared& p) {
  if (p.network != kNetworkAll) {
    if (unshare(CLONE_NEWNET) != 0) return errno;
    if (p.network == kNetworkLoopback) {
      int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (s < 0) return errno;
      struct ifreq ifr;
      memset(&ifr, 0, sizeof ifr);
      ifr.ifr_name[0] = 'l';
      ifr.ifr_name[1] = 'o';
      int err = 0;
      if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0) err = errno;
      if (err == 0) {
        ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
        if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) err = errno;
      }
      close(s);
      if (err != 0) return err;
    }
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (syscall(kRestrictSelf, p.ruleset_fd, p.abi >= 7 ? kLogNewExecOn : 0U) != 0) return errno;
  return 0;
}

void release(Prepared& p) {
  if (p.ruleset_fd >= 0) close(p.ruleset_fd);
  p.ruleset_fd = -1;
}

}  // namespace confine
}  // namespace cordon
