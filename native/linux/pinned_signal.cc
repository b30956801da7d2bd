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
#include <functional>

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

namespace {

// Sends sigs[0..n) to `pid`, pinned first, then checked with `still_ours`;
// returns what sending sigs[0] returned. Without pidfds, only with
// `fallback_by_pid` (see below); else -ENOSYS.
int signal_pinned_if(int64_t pid, const std::function<bool()>& still_ours, const int* sigs, int n, bool use_pidfd,
                     bool fallback_by_pid) {
  int first = 0;
  if (use_pidfd) {
    int fd = internal::sys_pidfd_open(pid);
    if (fd < 0) return -errno;
    // The pidfd now pins one process. Verify it is the one we enumerated and
    // still ours; if it dies after this check, the signal fails with ESRCH
    // instead of reaching whoever reuses the number.
    if (!still_ours()) {
      close(fd);
      return -ESRCH;
    }
    for (int i = 0; i < n; i++) {
      int rc = internal::sys_pidfd_send_signal(fd, sigs[i]);
      if (i == 0) first = rc == 0 ? 0 : -errno;
    }
    close(fd);
    return first;
  }
  if (!fallback_by_pid) return -ENOSYS;
  // No pidfd: a direct unreaped child of the calling anchor is pinned (only we
  // reap it, and not concurrently). Anything else is verified then signalled;
  // capabilities() reports this fallback as not pid-reuse safe.
  if (!still_ours()) return -ESRCH;
  for (int i = 0; i < n; i++) {
    int rc = kill(static_cast<pid_t>(pid), sigs[i]);
    if (i == 0) first = rc == 0 ? 0 : -errno;
  }
  return first;
}

// Sends sigs[0..n) to the member, pinned and verified once (see cordon.h).
int signal_pinned(int64_t anchor, int64_t group, const Member& member, const int* sigs, int n,
                  bool use_pidfd) {
  return signal_pinned_if(
      member.pid, [&]() { return is_member(anchor, group, member); }, sigs, n, use_pidfd, true);
}

}  // namespace

int signal_if(int64_t pid, int sig, const std::function<bool()>& still_ours) {
  return signal_pinned_if(pid, still_ours, &sig, 1, true, false);
}

int signal_member(int64_t anchor, int64_t group, const Member& member, int sig,
                  bool use_pidfd) {
  return signal_pinned(anchor, group, member, &sig, 1, use_pidfd);
}

int signal_member_then_cont(int64_t anchor, int64_t group, const Member& member, int sig,
                            bool use_pidfd) {
  const int sigs[2] = {sig, SIGCONT};
  return signal_pinned(anchor, group, member, sigs, 2, use_pidfd);
}

}  // namespace cordon
