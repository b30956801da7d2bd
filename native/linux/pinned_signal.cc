// Linux: signalling a tree's members without ever reaching a recycled pid.
// With pidfds (Linux 5.3+) a member is pinned first (pidfd_open), then
// verified to be the process enumerated (same start time) and still ours,
// then signalled through the pidfd: if it dies after the check the signal
// fails with ESRCH. Without them, a member is verified, then signalled by pid
// (capabilities() reports that fallback as not pid-reuse safe). Also the
// count of a process group's live members the process-group tier terminates
// by.
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cordon {

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

bool is_member(int64_t anchor, int64_t group, const Member& member) {
  internal::Stat st;
  if (!internal::read_stat(member.pid, st)) return false;
  if (st.start != member.start_time) return false;  // recycled pid
  if (st.state == 'Z' || st.state == 'X') return false;
  if (member.from_snapshot) return true;  // verified as ours before; same process
  if (st.ppid == anchor) return true;
  if (group > 0 && st.pgid == group) return true;
  return internal::descends_from(member.pid, anchor);
}

int signal_member(int64_t anchor, int64_t group, const Member& member, int sig,
                  bool use_pidfd) {
  auto still_ours = [&]() { return is_member(anchor, group, member); };
  if (use_pidfd) {
    int fd = internal::sys_pidfd_open(member.pid);
    if (fd < 0) return -errno;
    // The pidfd now pins one process. Verify it is the one we enumerated and
    // still ours; if it dies after this check, the signal fails with ESRCH
    // instead of reaching whoever reuses the number.
    if (!still_ours()) {
      close(fd);
      return -ESRCH;
    }
    int rc = internal::sys_pidfd_send_signal(fd, sig);
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

}  // namespace cordon
