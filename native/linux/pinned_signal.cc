// Linux: signalling a tree's members without ever reaching a recycled pid.
// With pidfds (Linux 5.3+) a member is pinned first (pidfd_open), then
// verified to be the process enumerated (same start time) and still ours,
// then signalled through the pidfd: if it dies after the check the signal
// fails with ESRCH. Without them, a member is verified, then signalled by pid
// (capabilities() reports that fallback as not pid-reuse safe).
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
