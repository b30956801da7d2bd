// The subreaper tier: the anchor is a child subreaper (PR_SET_CHILD_SUBREAPER),
// so every orphan of the tree is reparented to it, and it reaps them all.
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "tier.h"

namespace cordon {
namespace anchor {

using protocol::trace;

namespace {

class SubreaperTier : public Tier {
 public:
  using Tier::Tier;

  const char* name() const override { return "subreaper"; }

  int contain(const char*& what) override {
    int rc = cordon::become_subreaper();
    if (rc == 0) return 0;
    trace("subreaper unavailable: %s", strerror(-rc));
    what = "subreaper";
    return rc;
  }

  // The command stays in the host's process group and session (as under
  // child_process: the terminal's job control and Ctrl-C reach it as
  // before), while the anchor leaves them, so that a signal to the host's
  // group (`kill -9 -<pgid>`, a hangup) cannot take the tree's identity with
  // it. Hence: fork first, then setsid() in the anchor (it is not a group
  // leader: posix_spawn started it in the host's group). The child waits on
  // this barrier until the anchor has left, so the command's first
  // instruction runs only once it has; if the anchor dies before (a signal
  // to the host's group in that short window), the child reads EOF and exits
  // without running anything.
  int before_fork() override {
    if (pipe(barrier_) != 0) {
      int err = errno;
      barrier_[0] = barrier_[1] = -1;
      return -err;
    }
    fcntl(barrier_[0], F_SETFD, FD_CLOEXEC);
    fcntl(barrier_[1], F_SETFD, FD_CLOEXEC);
    return 0;
  }

  void child_before_exec() override {
    if (barrier_[0] < 0) return;
    close(barrier_[1]);
    char byte = 0;
    ssize_t r;
    do {
      r = read(barrier_[0], &byte, 1);
    } while (r < 0 && errno == EINTR);
    if (r != 1) _exit(127);  // the anchor is gone: nothing of the command runs
    close(barrier_[0]);
  }

  int after_fork(pid_t, const char*&) override {
    if (barrier_[0] < 0) return 0;
    close(barrier_[0]);
    if (setsid() < 0) trace("setsid: %s", strerror(errno));
    ssize_t w;
    do {
      w = write(barrier_[1], "x", 1);
    } while (w < 0 && errno == EINTR);
    close(barrier_[1]);
    barrier_[0] = barrier_[1] = -1;
    return 0;
  }

  void abandon_launch() override {
    for (int& fd : barrier_) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
  }

  bool reaps_all() const override { return true; }

  // A subreaper with no children has no descendants at all (every orphan is
  // reparented to it).
  bool quiescent() override { return true; }

  void step_terminate(int64_t now) override {
    auto list = members();
    // Verify the whole round before signalling any of it: where orphans go to
    // init (process-group tier), signalling a parent first would take its
    // children out of the ancestry that proves they are ours. Verified
    // members are then checked by identity (start time, pinned by a pidfd
    // where there is one) when they are signalled, root first.
    for (auto& m : list) {
      if (!m.from_snapshot && cordon::is_member(getpid(), group(), m)) m.from_snapshot = true;
    }
    for (auto& m : list) {
      if (m.from_snapshot) host_.signal_one(m);  // else no longer ours: never signalled
    }
    if (host_.termination().stuck_due(now) && !list.empty()) host_.report_stuck(list);
  }

 private:
  int barrier_[2] = {-1, -1};
};

}  // namespace

std::unique_ptr<Tier> make_subreaper_tier(TierHost& host) { return std::make_unique<SubreaperTier>(host); }

}  // namespace anchor
}  // namespace cordon
