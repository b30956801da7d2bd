// The subreaper tier: the anchor is a child subreaper (PR_SET_CHILD_SUBREAPER),
// so every orphan of the tree is reparented to it, and it reaps them all.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "tier.h"
#include "tree_marker.h"

namespace cordon {
namespace anchor {

using protocol::trace;

namespace {

class SubreaperTier : public Tier {
 public:
  SubreaperTier(TierHost& host, bool marked) : Tier(host), marked_(marked) {}

  const char* name() const override { return "subreaper"; }

  // Asked for as itself (not inside the cgroup tier, which has its cgroup),
  // the tier marks the tree as the process-group tier does (CORDON_TREE,
  // tree_marker.h): the anchor itself never sweeps for it (every orphan is
  // its child), but if the anchor dies, its orphans go to init, and the
  // marker is how the host still finds them (MARKER, lib/anchor/lost.ts).
  std::string marker() const override { return marker_.token(); }

  int contain(const char*& what) override {
    int rc = cordon::become_subreaper();
    if (rc == 0) {
      uint64_t start = 0;
      if (marked_ && !marker_.make(start)) trace("no tree marker: %s", strerror(errno));
      return 0;
    }
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
    // Into the anchor's own environment, which the command is exec'd with
    // (the child may share the anchor's memory: nothing is set there). An
    // outer tree's tokens stay first.
    if (!marker_.token().empty()) {
      marker_entry_ = marker_.entry(getenv(kMarkerName));
      putenv(&marker_entry_[0]);
    }
    if (pipe(barrier_) != 0) {
      int err = errno;
      barrier_[0] = barrier_[1] = -1;
      return -err;
    }
    fcntl(barrier_[0], F_SETFD, FD_CLOEXEC);
    fcntl(barrier_[1], F_SETFD, FD_CLOEXEC);
    child_barrier_[0] = barrier_[0];
    child_barrier_[1] = barrier_[1];
    return 0;
  }

  // The child may share the anchor's memory (clone_shared), and the anchor
  // closes and forgets barrier_ meanwhile: the child reads child_barrier_,
  // which nothing changes until the next launch.
  void child_before_exec() override {
    if (child_barrier_[0] < 0) return;
    close(child_barrier_[1]);
    char byte = 0;
    ssize_t r;
    do {
      r = read(child_barrier_[0], &byte, 1);
    } while (r < 0 && errno == EINTR);
    if (r != 1) _exit(127);  // the anchor is gone: nothing of the command runs
    close(child_barrier_[0]);
  }

  int64_t fork(const char*& what, const ChildStart& start) override {
#if CORDON_LINUX_PROC
    *start.shared = cordon::clone_shared(-1, start.main, start.arg);
    if (start.shared->pid >= 0) return start.shared->pid;
#endif
    return Tier::fork(what, start);
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

  // Walked down from the anchor through each member's children: what a walk
  // reads is the tree's, not the host's (list_descendants). Without the
  // children files, the walk of all of /proc (list_tree).
  std::vector<Member> members(bool commands, bool holds) override { return walk(commands, holds, nullptr); }

  std::vector<Member> walk(bool commands, bool holds, cordon::DescendantsWalk* ending) {
    std::vector<Member> out;
    static const std::vector<FileId> kNone;
    const std::vector<FileId>& watched = holds ? host_.watched() : kNone;
    if (ending) *ending = cordon::DescendantsWalk();
    if (!full_walk_) {
      if (cordon::list_descendants(getpid(), watched, out, commands, ending) != -ENOSYS) return out;
      trace("no /proc/<pid>/task/<tid>/children (CONFIG_PROC_CHILDREN): members by a walk of all of /proc");
      full_walk_ = true;
    }
    cordon::list_tree(getpid(), 0, watched, out, commands);
    return out;
  }

  // A subreaper with no children has no descendants at all (every orphan is
  // reparented to it): quiescence is waitpid's ECHILD, never a walk.
  bool quiescent() override { return true; }

  // Termination walks the tree when a round is due (round_due()), not on
  // every loop turn: SIGCHLD means a member ended, never that one began, so
  // it only reaps (and the anchor checks quiescence).
  void step_terminate(int64_t now) override {
    const protocol::Termination& term = host_.termination();
    if (now < round_due()) return;
    bool forcing = term.forcing();
    if (forcing && !forced_) {
      forced_ = true;
      forced_at_ = now;
      signalled_.clear();
    }
    std::vector<Member> list;
    bool fresh = false;
    if (forcing) {
      // Freeze first, then kill: see freeze().
      bool calm = freeze(now + kFreezeMs, list, fresh);
      if (!calm) fresh = true;  // (out of time: the next round at once)
    } else {
      // A walk that was not settled (a process it listed had gone when read,
      // or one was newly seen exiting) may have missed the children that
      // process handed to the anchor: walk again at once, a few times, and
      // the next round is soon (a hopper that forks and exits every few
      // microseconds was missed by walk after walk while the pace backed
      // off to 1 s, seconds of its life with no signal).
      for (int walks = 1;; walks++) {
        cordon::DescendantsWalk ending;
        list = walk(false, false, &ending);
        int lost = verify(list);
        for (auto& m : list) {
          if (!m.from_snapshot) continue;  // no longer ours: never signalled
          if (signalled_.insert(std::make_pair(m.pid, m.start_time)).second) fresh = true;
          host_.signal_one(m);
        }
        if (settled(ending, lost)) break;
        if (walks == kUnsettledWalks) {
          fresh = true;
          break;
        }
      }
    }
    if (term.stuck_due(now)) {
      if (!list.empty()) host_.report_stuck(list);
      stuck_done_ = true;  // (nothing left then: quiescence is only a reap away)
    }
    if (!walked_ || fresh) interval_ = forcing ? 0 : kWalkFirstMs;
    else interval_ = std::min(std::max(interval_ * 2, kWalkFirstMs), kWalkMaxMs);
    walked_ = true;
    last_walk_ = now;
  }

  // Until the next round, or the deadline (the forced kill).
  int terminate_wait_ms(int64_t now) const override {
    const protocol::Termination& term = host_.termination();
    int64_t wake = round_due();
    if (!term.forcing()) wake = std::min(wake, term.deadline());
    int64_t left = wake - now;
    return static_cast<int>(left < 0 ? 0 : left);
  }

  // After the root exited, while a member holds the captured output: its
  // closing it is no event the anchor sees, so it looks, every 50 ms at
  // first, every 500 ms after 2 s.
  int held_output_wait_ms(int64_t since_root_exit) const override { return since_root_exit > 2000 ? 500 : 50; }

 private:
  // Verify the whole round before signalling any of it: where orphans go to
  // init (process-group tier), signalling a parent first would take its
  // children out of the ancestry that proves they are ours. Verified
  // members are then checked by identity (start time, pinned by a pidfd
  // where there is one) when they are signalled. Returns how many were not
  // (gone, or no longer ours).
  int verify(std::vector<Member>& list) {
    int lost = 0;
    for (auto& m : list) {
      if (!m.from_snapshot && cordon::is_member(getpid(), group(), m)) m.from_snapshot = true;
      if (!m.from_snapshot) lost++;
    }
    return lost;
  }

  // Whether a counted walk missed no child of a process going (see
  // cordon::DescendantsWalk): none of what it listed was gone when read
  // (`lost`: listed, then not verified), none was seen exiting that no
  // earlier walk saw so. (An uncounted walk, list_tree's: settled.)
  bool settled(const cordon::DescendantsWalk& ending, int lost) {
    if (!ending.counted) return true;
    bool quiet = lost == 0 && ending.gone == 0;
    for (auto& e : ending.exiting) {
      if (exiting_.insert(e).second) quiet = false;
    }
    return quiet;
  }

  // The forced stop, freeze first. Killing what a walk lists chases a tree
  // that forks and exits faster than a walk: a member killed after its
  // fork() returned leaves the child running, and a member that exits
  // during a walk hands its children to the anchor after the walk may have
  // read the anchor's list, so the walk misses them and the next one is
  // due only later (a STUCK report once had a hopper alive 5 s into the
  // forced stop). So every member a walk finds is SIGSTOPped (a stopped
  // process forks and exits no more, and its children stay its own, where
  // the next walk reads them; a fork begun before the signal is completed
  // first, so each walk waits until what was stopped holds still,
  // await_still), and walks go on until one finds nothing new and settled:
  // no listed process was gone when read, none was seen exiting that an
  // earlier walk had not already seen so (list_descendants' `ending`). Then
  // everything found gets SIGKILL (signal_one, the forced phase's signal,
  // through the identity check). Bounded by `until`: what is stopped by then
  // is killed and the next round goes on. `list`: the last walk's members,
  // `fresh`: one was not signalled before. True when calm.
  bool freeze(int64_t until, std::vector<Member>& list, bool& fresh) {
    std::map<std::pair<int64_t, uint64_t>, Member> frozen;
    bool calm = false;
    bool quiet_before = false;  // uncounted walks: the one before found nothing new either
    int walks = 0;
    std::vector<Member> newly;  // stopped since the last walk began
    do {
      // Each walk begins once what was stopped holds still: one still inside
      // a fork when its SIGSTOP came would add a child after the listing.
      if (!newly.empty() && !await_still(newly, until)) break;
      newly.clear();
      walks++;
      cordon::DescendantsWalk ending;
      list = walk(false, false, &ending);
      int lost = verify(list);
      bool found = false;
      for (auto& m : list) {
        if (!m.from_snapshot) continue;
        auto key = std::make_pair(m.pid, m.start_time);
        if (frozen.count(key)) continue;
        frozen[key] = m;  // (a failed SIGSTOP: it still gets the SIGKILL)
        if (signalled_.count(key)) continue;  // killed by an earlier round: dying, killed again
        found = true;
        int rc = cordon::signal_member(getpid(), group(), m, SIGSTOP, host_.pidfd());
        if (rc == 0) newly.push_back(m);
        trace("freeze: SIGSTOP %lld (parent %lld): %d", static_cast<long long>(m.pid), static_cast<long long>(m.ppid), rc);
      }
      bool walk_settled;
      if (ending.counted) {
        walk_settled = settled(ending, lost);
      } else {
        walk_settled = quiet_before;
        quiet_before = !found;
      }
      calm = !found && walk_settled;
    } while (!calm && now_ms() < until);
    for (auto& entry : frozen) {
      if (signalled_.insert(entry.first).second) fresh = true;
      host_.signal_one(entry.second);
    }
    trace("freeze: %zu member(s) stopped and killed, %d walk(s)%s", frozen.size(), walks, calm ? "" : ", out of time");
    return calm;
  }

  // When the next termination round (a walk, signals to what it finds) is
  // due: at the start; then interval_ after the last one: kWalkFirstMs
  // after a round that found a member not signalled before (the tree is
  // forking, and a process forked during a walk is found by the next; while
  // forcing, at once), doubling while rounds find nothing new, up to
  // kWalkMaxMs. During the grace also kLastCallMs before its deadline, so a
  // member forked up to then gets the polite signal before the forced kill;
  // at the deadline (forcing starts with a round); and when STUCK is due.
  int64_t round_due() const {
    const protocol::Termination& term = host_.termination();
    if (!walked_ || (term.forcing() && !forced_)) return 0;
    int64_t due = last_walk_ + interval_;
    if (!term.forcing()) {
      int64_t last_call = term.deadline() - kLastCallMs;
      if (last_walk_ < last_call) due = std::min(due, last_call);
    } else if (!stuck_done_) {
      due = std::min(due, forced_at_ + kStuckReportMs + 1);
    }
    return due;
  }

  static constexpr int kWalkFirstMs = 10;
  static constexpr int kWalkMaxMs = 1000;
  static constexpr int kLastCallMs = 100;
  static constexpr int kFreezeMs = 1000;  // a forced round's walks, at most
  static constexpr int kUnsettledWalks = 8;  // a polite round's walks, while they are not settled
  static constexpr int64_t kStuckReportMs = protocol::kStuckReportMs;

  bool marked_;
  TreeMarker marker_;         // empty unless marked_
  std::string marker_entry_;  // CORDON_TREE=..., put in the anchor's environment for the command
  int barrier_[2] = {-1, -1};
  int child_barrier_[2] = {-1, -1};  // the child's copy: see child_before_exec()
  bool full_walk_ = false;  // no children files: list_tree
  // Termination rounds.
  bool walked_ = false;
  int64_t last_walk_ = 0;
  int interval_ = kWalkFirstMs;
  bool forced_ = false;
  int64_t forced_at_ = 0;
  bool stuck_done_ = false;  // the STUCK round is over
  // Members given this phase's signal (the polite one, then the forced kill).
  std::set<std::pair<int64_t, uint64_t>> signalled_;
  // Members walks have seen exiting (zombies, in exit()): one seen so again
  // leaves a walk settled (its children were handed on before).
  std::set<std::pair<int64_t, uint64_t>> exiting_;
};

}  // namespace

std::unique_ptr<Tier> make_subreaper_tier(TierHost& host, bool marked) {
  return std::make_unique<SubreaperTier>(host, marked);
}

}  // namespace anchor
}  // namespace cordon
