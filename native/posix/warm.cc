// A warm anchor's LAUNCH: the host's sender, the anchor's receiver (warm.h).
#include "warm.h"

#include "../cordon.h"

#include "../protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#if !CORDON_LINUX_PROC
#include <sys/sysctl.h>
#include <sys/types.h>
#endif

#include <cstdio>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace cordon {
namespace warm {

namespace {

#ifdef MSG_NOSIGNAL
constexpr int kSendFlags = MSG_NOSIGNAL;
#else
constexpr int kSendFlags = 0;  // macOS: SO_NOSIGPIPE is not needed, the host ignores SIGPIPE
#endif
#ifdef MSG_CMSG_CLOEXEC
constexpr int kRecvFlags = MSG_CMSG_CLOEXEC;
#else
constexpr int kRecvFlags = 0;
#endif

// The header's longest form: "LAUNCH " and three numbers of up to 10 digits.
constexpr size_t kMaxHeader = 64;

bool wait_writable(int fd, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLOUT, 0};
    int rc = poll(&p, 1, static_cast<int>(left));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return false;
    return (p.revents & POLLOUT) != 0;
  }
}

}  // namespace

int send_launch(int fd, const std::vector<std::string>& args, const std::vector<std::string>& env, const int fds[3],
                int umask_value, int timeout_ms) {
  std::string body;
  for (const auto* list : {&args, &env}) {
    for (const std::string& s : *list) {
      if (s.find('\0') != std::string::npos) return -EINVAL;
      body += s;
      body.push_back('\0');
    }
  }
  if (body.size() > kMaxLaunchBytes) return -E2BIG;
  std::string message = "LAUNCH " + std::to_string(args.size()) + " " + std::to_string(env.size()) + " " +
                        std::to_string(body.size()) + " " + std::to_string(umask_value) + "\n" + body;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);

  iovec iov{const_cast<char*>(message.data()), message.size()};
  msghdr msg;
  memset(&msg, 0, sizeof msg);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  char control[CMSG_SPACE(sizeof(int) * 3)];
  memset(control, 0, sizeof control);
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int) * 3);
  memcpy(CMSG_DATA(cm), fds, sizeof(int) * 3);
  size_t done = 0;
  for (;;) {
    ssize_t w = sendmsg(fd, &msg, kSendFlags | MSG_DONTWAIT);
    if (w > 0) {
      done = static_cast<size_t>(w);
      break;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN && wait_writable(fd, deadline)) continue;
    return w < 0 && errno != EAGAIN ? -errno : -ETIMEDOUT;
  }
  while (done < message.size()) {
    ssize_t w = send(fd, message.data() + done, message.size() - done, kSendFlags | MSG_DONTWAIT);
    if (w > 0) {
      done += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN && wait_writable(fd, deadline)) continue;
    return w < 0 && errno != EAGAIN ? -errno : -ETIMEDOUT;
  }
  return 0;
}

Receiver::~Receiver() {
  for (int fd : fds_) {
    if (fd >= 0) close(fd);
  }
}

int Receiver::feed(int fd, Launch& out) {
  char data[65536];
  iovec iov{data, sizeof data};
  msghdr msg;
  memset(&msg, 0, sizeof msg);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  char control[CMSG_SPACE(sizeof(int) * 8)];
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = recvmsg(fd, &msg, kRecvFlags);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return 0;
  if (n <= 0) return -1;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    std::vector<int> got(count);
    memcpy(got.data(), CMSG_DATA(cm), sizeof(int) * count);
    for (size_t i = 0; i < count; i++) {
#ifndef MSG_CMSG_CLOEXEC
      fcntl(got[i], F_SETFD, FD_CLOEXEC);
#endif
      // Exactly three, with the message's first byte: anything else is not a LAUNCH.
      if (!have_fds_ && buf_.empty() && count == 3) fds_[i] = got[i];
      else close(got[i]);
    }
    if (!have_fds_ && buf_.empty() && count == 3) have_fds_ = true;
  }
  if (msg.msg_flags & MSG_CTRUNC) return -1;
  if (!have_fds_) return -1;
  buf_.append(data, static_cast<size_t>(n));
  return parse(out);
}

int Receiver::parse(Launch& out) {
  size_t eol = buf_.find('\n');
  if (eol == std::string::npos) return buf_.size() > kMaxHeader ? -1 : 0;
  std::vector<std::string> words;
  size_t at = 0;
  while (at < eol) {
    size_t sp = buf_.find(' ', at);
    if (sp == std::string::npos || sp > eol) sp = eol;
    words.push_back(buf_.substr(at, sp - at));
    at = sp + 1;
  }
  long long argc = 0, envc = 0, bytes = 0, mask = -1;
  if (words.size() != 5 || words[0] != "LAUNCH" || !protocol::parse_digits(words[1].c_str(), 1000000LL, argc) ||
      !protocol::parse_digits(words[2].c_str(), 1000000LL, envc) ||
      !protocol::parse_digits(words[3].c_str(), static_cast<long long>(kMaxLaunchBytes), bytes) ||
      (words[4] != "-1" && !protocol::parse_digits(words[4].c_str(), 0777LL, mask))) {
    return -1;
  }
  size_t total = eol + 1 + static_cast<size_t>(bytes);
  if (buf_.size() < total) return 0;
  std::vector<std::string> strings;
  size_t from = eol + 1;
  while (from < total) {
    size_t nul = buf_.find('\0', from);
    if (nul == std::string::npos || nul >= total) return -1;
    strings.push_back(buf_.substr(from, nul - from));
    from = nul + 1;
  }
  if (strings.size() != static_cast<size_t>(argc + envc)) return -1;
  out.args.assign(strings.begin(), strings.begin() + argc);
  out.env.assign(strings.begin() + argc, strings.end());
  out.umask = static_cast<int>(mask);
  out.rest = buf_.substr(total);  // control lines sent after it (a TERM before READY)
  for (int i = 0; i < 3; i++) {
    out.fds[i] = fds_[i];
    fds_[i] = -1;
  }
  return 1;
}

void become(Launch& launch) {
  for (int i = 0; i < 3; i++) {
    if (launch.fds[i] < 0) continue;
    dup2(launch.fds[i], i);
    if (launch.fds[i] > 2) close(launch.fds[i]);
    launch.fds[i] = -1;
  }
  static std::vector<std::string> strings;
  static std::vector<char*> entries;
  strings = std::move(launch.env);
  entries.clear();
  for (auto& e : strings) entries.push_back(&e[0]);
  entries.push_back(nullptr);
  environ = entries.data();
  if (launch.umask >= 0) umask(static_cast<mode_t>(launch.umask));
}

#if CORDON_LINUX_PROC
namespace {

// The credential lines of /proc/<pid>/status ("self" or a pid), the ids'
// real and effective fields only (an exec sets the saved ones to the
// effective), or empty when they cannot be read.
std::string credential_lines(const std::string& who) {
  std::string path = "/proc/" + who + "/status";
  FILE* f = fopen(path.c_str(), "re");
  if (!f) return std::string();
  std::string out;
  char line[1024];
  static const char* const kKeys[] = {"Uid:", "Gid:", "Groups:", "CapBnd:", "NoNewPrivs:", "Seccomp:"};
  while (fgets(line, sizeof line, f)) {
    for (const char* key : kKeys) {
      size_t n = strlen(key);
      if (strncmp(line, key, n) != 0) continue;
      std::string value(line + n);
      while (!value.empty() && (value.back() == '\n' || value.back() == ' ')) value.pop_back();
      if (strcmp(key, "Uid:") == 0 || strcmp(key, "Gid:") == 0) {
        unsigned real = 0, effective = 0;
        if (sscanf(value.c_str(), "%u %u", &real, &effective) != 2) {
          fclose(f);
          return std::string();
        }
        value = std::to_string(real) + " " + std::to_string(effective);
      } else if (strcmp(key, "Groups:") == 0) {
        // (The order setgroups() was given: compared as a set.)
        std::vector<unsigned> groups;
        unsigned g;
        int used = 0;
        for (const char* p = value.c_str(); sscanf(p, "%u%n", &g, &used) == 1; p += used) groups.push_back(g);
        std::sort(groups.begin(), groups.end());
        value.clear();
        for (unsigned id : groups) value += std::to_string(id) + ",";
      }
      out += std::string(key) + value + "\n";
    }
  }
  fclose(f);
  return out;
}

}  // namespace

bool host_credentials_unchanged(int host) {
  // The anchor's own are read once: it never changes them (the command's
  // uid and gid are set in the command's child, command_child.cc).
  static const std::string mine = credential_lines("self");
  std::string theirs = credential_lines(std::to_string(host));
  return !mine.empty() && mine == theirs;
}
#else
namespace {

// XNU: the credentials kern.proc.pid reports (xnu-11417 kern_sysctl.c:1090-1101,
// fill_user64_eproc: e_pcred's real ids, e_ucred's effective uid and its
// group list, whose first entry is the effective gid: kern_credential.c:2990,
// "EGID is cr_groups[0]"), as one comparable
// line; empty when they cannot be read (the process gone). Both sides are
// read the same way: the anchor's own and the host's.
std::string credential_line(pid_t pid) {
  int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_PID, static_cast<int>(pid)};
  struct kinfo_proc kp;
  std::memset(&kp, 0, sizeof kp);
  size_t len = sizeof kp;
  if (sysctl(mib, 4, &kp, &len, nullptr, 0) != 0 || len != sizeof kp || kp.kp_proc.p_pid != pid) return std::string();
  const auto& pc = kp.kp_eproc.e_pcred;
  const auto& uc = kp.kp_eproc.e_ucred;
  int n = uc.cr_ngroups;
  if (n < 1 || n > static_cast<int>(sizeof uc.cr_groups / sizeof uc.cr_groups[0])) return std::string();
  // (The supplementary groups compared as a set: setgroups' order is the caller's.)
  std::vector<unsigned> groups(uc.cr_groups + 1, uc.cr_groups + n);
  std::sort(groups.begin(), groups.end());
  std::string out = std::to_string(pc.p_ruid) + " " + std::to_string(uc.cr_uid) + " " + std::to_string(pc.p_rgid) + " " +
                    std::to_string(uc.cr_groups[0]) + " :";
  for (unsigned g : groups) out += " " + std::to_string(g);
  return out;
}

}  // namespace

bool host_credentials_unchanged(int host) {
  std::string mine = credential_line(getpid());
  std::string theirs = credential_line(static_cast<pid_t>(host));
  return !mine.empty() && mine == theirs;
}
#endif

int current_umask() {
#ifdef __linux__
  FILE* f = fopen("/proc/self/status", "re");
  if (!f) return -1;
  char line[256];
  int found = -1;
  unsigned mask = 0;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "Umask: %o", &mask) == 1) {
      found = static_cast<int>(mask & 0777);
      break;
    }
  }
  fclose(f);
  return found;
#else
  return -1;
#endif
}

}  // namespace warm
}  // namespace cordon
