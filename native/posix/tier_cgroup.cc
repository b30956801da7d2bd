// The cgroup tier (Linux): the subreaper tier plus a cgroup of the tree's own,
// which the command is born into: the host can still end the tree through it
// if the anchor dies, and SIGKILL reaches every member at once (cgroup.kill).
//
// The cgroup is also how the anchor knows its tree, at the cost of the tree,
// never of the host: the members are what the cgroup's cgroup.procs lists
// (and its sub-cgroups': a command may run cordon itself), never a walk of
// every process; quiescence is `populated 0` in cgroup.events, which the
// anchor's loop polls (the kernel flags the file when it changes), besides no
// child left to reap. A stop lists the cgroup, gives every member the polite
// signal and lists it again: when the second list holds nobody the first did
// not, every member then listed has the signal (a member whose SIGTERM is
// fatal cannot start a fork once it is sent; a fork already past that check
// whose child joins the cgroup after the second read is found by the re-reads
// below, 10 ms later). When it does (a tree forking while it is signalled),
// the cgroup is frozen (cgroup.freeze, Linux 5.2+), listed, signalled
// (delivered at the thaw) and thawed: no fork can slip between that list and
// the signals. A quiet tree is not made to wait until every member has
// stopped for a freeze. The forced kill is one cgroup.kill write. The
// subreaper tier's walk is used only when the cgroup is empty and the anchor
// still has a child: a member with
// CAP_SYS_ADMIN that moved itself out of the cgroup (docs/contract.md, "What
// cordon is not").
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sched.h>
#endif

#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "tier.h"

namespace cordon {
namespace anchor {

using protocol::trace;

namespace {

// Waiting for `frozen 1`: a runnable member stops on its next return to user
// space, within a scheduler period even on a loaded machine (a storm of a
// thousand processes froze here in milliseconds). Longer means a member in
// an uninterruptible sleep that may stay there: the signals then go out
// without the freeze's guarantee (re-scans still reach what forks), well
// within the shortest default grace (500 ms), since the grace runs meanwhile.
constexpr int kFreezeWaitMs = 200;
// Re-reading cgroup.procs during the grace, for members forked after the
// polite signal (a TERM trap's cleanup): the kernel announces no fork. From
// 10 ms after a round that found a new member, doubling while rounds find
// none, up to 1 s: a tree that does nothing costs one read a second, a trap
// that forks is seen within milliseconds.
constexpr int kFirstRescanMs = 10;
constexpr int kMaxRescanMs = 1000;

// Whether the anchor has a child that has not exited (a zombie is reaped by
// the loop, whose SIGCHLD is on its way).
bool has_live_children() {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0) return false;  // ECHILD: none
  return si.si_pid == 0;
}

class CgroupTier : public TierWrapper {
 public:
  CgroupTier(TierHost& host, std::unique_ptr<Tier> subreaper) : TierWrapper(host, std::move(subreaper)) {}

  const char* name() const override { return fell_back_ ? inner_->name() : "cgroup"; }

  int contain(const char*& what) override {
    int rc = inner_->contain(what);  // without a subreaper: that failure is the inner tier's
    if (rc != 0) return rc;
#if CORDON_LINUX_PROC
    rc = cordon::cgroup_create("cordon-" + std::to_string(getpid()), cg_path_, cg_dir_, cg_kill_);
    if (rc == 0) {
      // Without cgroup.events (a kernel before 4.5 would not get here: the
      // tier needs 5.14) the tier would run as the subreaper tier does.
      events_fd_ = cordon::cgroup_open_events(cg_path_);
      if (events_fd_ < 0) trace("cgroup.events: %s", strerror(-events_fd_));
      // cgroup.freeze is opened by the stop that needs it (freeze()).
      if (!host_.limits().any()) return 0;
      // The limits asked for hold before the command runs, or it does not
      // run here (under --best-effort the next tier runs it without them).
      rc = limits_.apply(host_.limits(), cg_path_, cg_path_.substr(cg_path_.rfind('/') + 1));
      if (rc == 0) return 0;
      remove_cgroup();
      what = "limits";
      trace("limits: %s", strerror(-rc));
      return rc;
    }
#else
    rc = -ENOSYS;
#endif
    if (rc == 0) return 0;
    trace("cgroup unavailable: %s", strerror(-rc));
    what = "cgroup";
    return rc;
  }

  // A warm anchor makes its cgroup once its LAUNCH came (anchor.cc, run_warm).
  bool contains_while_waiting() const override { return false; }

  // What it can do before: find where that cgroup goes (cordon::cgroup_prepare).
  void while_waiting(const std::function<bool()>& stop) override {
    inner_->while_waiting(stop);
#if CORDON_LINUX_PROC
    cordon::cgroup_prepare();
#endif
  }

  // With a fallback left, a command that cannot be born in the cgroup runs
  // in the subreaper tier instead (READY says so).
  void allow_fallback(bool allowed) override { may_fall_back_ = allowed; }

  std::string cgroup_dir() const override { return cg_path_; }

  std::string limits_report() const override {
    if (!host_.limits().any()) return std::string();
    const LimitSpec& a = limits_.applied();
    std::string out = protocol::limits(a.memory, a.processes, a.cpu_quota_us, limits_.how());
    for (auto& dir : limits_.v1_dirs()) out += protocol::limit_dir(dir);
    return out;
  }

  std::string usage_report() const override {
    if (cg_path_.empty()) return std::string();
    Usage u = limits_.usage(cg_path_);
    return protocol::usage(u.cpu_us, u.memory_peak, u.processes_peak, u.oom_kills, u.pids_max_hits);
  }

  int64_t fork(const char*& what, const ChildStart& start) override {
#if CORDON_LINUX_PROC
    if (cg_dir_ >= 0) {
      // Sharing the anchor's memory where the kernel and architecture allow
      // it; a plain clone3 into the cgroup otherwise, which says why not.
      *start.shared = cordon::clone_shared(cg_dir_, start.main, start.arg);
      if (start.shared->pid >= 0) return start.shared->pid;
      int64_t r = cordon::fork_into_cgroup(cg_dir_);
      if (r == 0) start.main(start.arg);
      if (r >= 0) return r;
      trace("clone3 into the cgroup: %s", strerror(static_cast<int>(-r)));
      if (!may_fall_back_) {
        what = "cgroup";
        return r;
      }
      remove_cgroup();
      fell_back_ = true;
    }
#endif
    return inner_->fork(what, start);
  }

  int child_enter() override {
#if CORDON_LINUX_PROC
    // Born in the tree's cgroup, the command gets a cgroup namespace rooted
    // there (where the anchor may make one: CAP_SYS_ADMIN), so its view of
    // cgroup paths (/proc/self/cgroup, a cgroup2 mount it makes) starts at
    // its own cgroup. This is not a wall: through a cgroup2 mount it can
    // already reach, a member with CAP_SYS_ADMIN can still move itself to an
    // ancestor unless that mount has nsdelegate, and it can setns() out
    // (docs/contract.md, "What cordon is not"). Without the capability the
    // command runs without one.
    // The v1 cgroups of the limits first: the namespace is then rooted at them too.
    if (int err = limits_.join_in_child()) return err;
    if (cg_dir_ >= 0) unshare(CLONE_NEWCGROUP);
#endif
    return inner_->child_enter();
  }

  // ---- members and quiescence: the cgroup's own lists

  std::vector<Member> members(bool commands, bool holds) override {
    if (!own()) return inner_->members(commands, holds);
    static const std::vector<FileId> kNone;
    std::vector<Member> out;
#if CORDON_LINUX_PROC
    hold_listing();
    cordon::cgroup_members_held(procs_fd_, list_fd_, cg_path_, holds ? host_.watched() : kNone, out, commands);
#endif
    // An empty cgroup while a child lives: it left the cgroup (a privileged
    // member can): the subreaper tier's walk finds it.
    if (out.empty() && has_live_children()) return inner_->members(commands, holds);
    return out;
  }

  std::vector<Member> leftovers() override { return own() ? members(true, true) : inner_->leftovers(); }

  // No child left to reap (the anchor's loop knows) and nothing in the cgroup.
  bool quiescent() override {
    if (!own()) return inner_->quiescent();
    read_events();
    return !populated_;
  }

  int event_fd() const override { return own() ? events_fd_ : inner_->event_fd(); }

  void handle_event() override {
    if (own()) read_events();
    else inner_->handle_event();
  }

  // While the tree is gone from the cgroup and only what left it remains,
  // or in the subreaper tier, the inner tier's termination rounds and pace.
  int idle_wait_ms(bool root_exited) const override { return own() ? -1 : inner_->idle_wait_ms(root_exited); }

  int terminate_wait_ms(int64_t now) const override {
    if (!own() || escapees_) return inner_->terminate_wait_ms(now);
    const auto& term = host_.termination();
    if (term.forcing()) {
      if (!killed_) return 10;  // no cgroup.kill: SIGKILL by member, every 10 ms (the subreaper tier's pace)
      // After the kill nothing is left to do but report what survives it:
      // the loop wakes on SIGCHLD and `populated 0`, or when STUCK is due.
      if (stuck_checked_) return -1;
      int64_t due = killed_at_ + protocol::kStuckReportMs + 1 - now;
      return static_cast<int>(due < 0 ? 0 : due);
    }
    int64_t wait = term.deadline() - now;
    int64_t next = polite_ == Polite::kFreezing ? freeze_since_ + kFreezeWaitMs : next_round_;
    if (next - now < wait) wait = next - now;
    return static_cast<int>(wait < 0 ? 0 : wait);
  }

  void step_terminate(int64_t now) override {
    if (!own()) {
      inner_->step_terminate(now);
      return;
    }
    read_events();
    // The cgroup is empty but a child lives: it left the cgroup.
    escapees_ = !populated_ && has_live_children();
    if (escapees_) {
      thaw();
      inner_->step_terminate(now);
      return;
    }
    if (host_.termination().forcing()) {
      force(now);
      return;
    }
    if (polite_ == Polite::kNotYet) {
      // The members listed get the signal at once, oldest first; a second
      // read then shows whether anything forked meanwhile. Only then (a
      // tree that forks while it is being signalled) is the cgroup frozen for
      // a round no fork can race: a quiet tree is not made to wait until
      // every member has stopped for the freeze.
      polite_round(now);
      if (!has_unseen()) return;
#if CORDON_LINUX_PROC
      if (freeze()) {
        polite_ = Polite::kFreezing;
        freeze_since_ = now;
        trace("forks during the polite signal: cgroup.freeze: 1");
        read_events();
        return;
      }
#endif
      polite_round(now);  // no freezer: the re-reads catch what races the signals
      return;
    }
    if (polite_ == Polite::kFreezing) {
      // cgroup.events wakes the loop at `frozen 1`.
      if (!frozen_ && now - freeze_since_ < kFreezeWaitMs) return;
      if (!frozen_) trace("not frozen after %d ms: signalling all the same", kFreezeWaitMs);
      polite_round(now);
      return;
    }
    if (now >= next_round_) polite_round(now);
  }

  // The tree's cgroup goes once it is empty.
  void release() override {
    remove_cgroup();
    inner_->release();
  }

 private:
  enum class Polite { kNotYet, kFreezing, kDone };

  // The tree has a cgroup of its own, whose events the anchor can watch.
  bool own() const { return cg_dir_ >= 0 && events_fd_ >= 0; }

  void read_events() {
#if CORDON_LINUX_PROC
    if (events_fd_ >= 0) cordon::cgroup_read_events(events_fd_, populated_, frozen_);
#endif
  }

  // cgroup.procs and the directory held for listing, opened at the first
  // listing (most trees are listed only when they stop, a few times then).
  void hold_listing() {
#if CORDON_LINUX_PROC
    if (listing_opened_) return;
    listing_opened_ = true;
    procs_fd_ = openat(cg_dir_, "cgroup.procs", O_RDONLY | O_CLOEXEC);
    list_fd_ = openat(cg_dir_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (procs_fd_ < 0 || list_fd_ < 0) trace("cgroup listing by path: %s", strerror(errno));
#endif
  }

  // cgroup.freeze written 1: opened on the first stop that needs it, not by
  // every tree at its start (most trees are never frozen).
  bool freeze() {
#if CORDON_LINUX_PROC
    if (freeze_fd_ < 0 && !freeze_opened_) {
      freeze_opened_ = true;
      freeze_fd_ = cordon::cgroup_open_freeze(cg_path_);
      if (freeze_fd_ < 0) trace("cgroup.freeze: %s (no freeze: the re-reads catch what races the signals)", strerror(-freeze_fd_));
    }
    return freeze_fd_ >= 0 && cordon::cgroup_set_frozen(freeze_fd_, true) == 0;
#else
    return false;
#endif
  }

  void thaw() {
    if (polite_ != Polite::kFreezing) return;
#if CORDON_LINUX_PROC
    int rc = cordon::cgroup_set_frozen(freeze_fd_, false);
    trace("cgroup.freeze: 0 (%d)", rc);
#endif
    polite_ = Polite::kDone;
  }

  // Which listed members are the anchor's descendants, from the list itself:
  // a member whose parent is the anchor or a member proven so (every member of
  // the cgroup but one that an outsider moved in); is_member (a walk up the
  // parent chain) for the rest. Proven members are signalled by identity
  // alone (pidfd and start time: from_snapshot), the others never.
  void verify(std::vector<Member>& list) {
    std::unordered_map<int64_t, size_t> index;
    for (size_t i = 0; i < list.size(); i++) index[list[i].pid] = i;
    enum : char { kUnknown, kOnPath, kOurs, kNotOurs };
    std::vector<char> state(list.size(), kUnknown);
    const int64_t self = getpid();
    for (size_t i = 0; i < list.size(); i++) {
      std::vector<size_t> path;
      size_t cur = i;
      char verdict = kUnknown;
      while (verdict == kUnknown) {
        if (state[cur] == kOurs || state[cur] == kNotOurs) {
          verdict = state[cur];
          break;
        }
        if (state[cur] == kOnPath) {  // a cycle in a list read over time: ask the kernel
          verdict = cordon::is_member(self, 0, list[cur]) ? kOurs : kNotOurs;
          break;
        }
        state[cur] = kOnPath;
        path.push_back(cur);
        if (list[cur].ppid == self) {
          verdict = kOurs;
          break;
        }
        auto parent = index.find(list[cur].ppid);
        if (parent == index.end()) {
          verdict = cordon::is_member(self, 0, list[cur]) ? kOurs : kNotOurs;
          break;
        }
        cur = parent->second;
      }
      for (size_t k : path) state[k] = verdict;
    }
    for (size_t i = 0; i < list.size(); i++) list[i].from_snapshot = state[i] == kOurs;
  }

  // Whether the cgroup lists a member no polite round has listed yet. Its pid
  // is one no round listed: a fork since the round is a new pid, and a pid
  // recycled onto one listed is left to the next round (what it would make
  // this one do, freeze and signal again, the next does). The pids are read
  // from the cgroup alone, nothing from /proc.
  bool has_unseen() {
#if CORDON_LINUX_PROC
    std::vector<int64_t> pids;
    if (cordon::cgroup_member_pids(procs_fd_, list_fd_, cg_path_, pids)) {
      for (int64_t pid : pids) {
        if (!seen_pids_.count(pid)) return true;
      }
      return false;
    }
#endif
    for (auto& m : members(false, false)) {
      if (!seen_.count({m.pid, m.start_time})) return true;
    }
    return false;
  }

  // One round's members (members(false, false)), each pinned as it is listed
  // where it can be (Linux: cordon::PinnedMembers): signalled through its pin,
  // /proc not read again.
  struct Round {
#if CORDON_LINUX_PROC
    cordon::PinnedMembers pinned;
    std::vector<Member>& list = pinned.members;
    int pin_of(const Member& m) const { return pinned.pin_of(m.pid); }
#else
    std::vector<Member> list;
    int pin_of(const Member&) const { return -1; }
#endif
  };

  void list_round(Round& round) {
#if CORDON_LINUX_PROC
    if (host_.pidfd()) {
      hold_listing();
      cordon::cgroup_members_pinned(procs_fd_, list_fd_, cg_path_, round.pinned);
      if (!round.list.empty() || !has_live_children()) return;
    }
#endif
    round.list = members(false, false);
  }

  // The polite signal to every member not given it yet, the oldest first (a
  // forker before what it forked); with the cgroup frozen (then thawed) when
  // the tree forked while the first round signalled it; later rounds for
  // what forked since.
  void polite_round(int64_t now) {
    Round round;
    list_round(round);
    auto& list = round.list;
    std::sort(list.begin(), list.end(), [](const Member& a, const Member& b) { return a.start_time < b.start_time; });
    verify(list);
    bool found_new = false;
    for (auto& m : list) {
      if (seen_.insert({m.pid, m.start_time}).second) found_new = true;
      seen_pids_.insert(m.pid);
      if (m.from_snapshot) host_.signal_pinned(m, round.pin_of(m));  // once per process: the host skips what had it
    }
    bool first = polite_ != Polite::kDone;
    thaw();
    polite_ = Polite::kDone;
    interval_ = first || found_new ? kFirstRescanMs : std::min(interval_ * 2, kMaxRescanMs);
    next_round_ = now + interval_;
    trace("polite round: %zu listed, next in %d ms", list.size(), interval_);
  }

  // One cgroup.kill write: SIGKILL to every process of the cgroup and its
  // descendants at once, forks in flight included (the kernel kills a child
  // whose fork completes meanwhile). Frozen members die all the same; the
  // cgroup is thawed after. Without cgroup.kill: SIGKILL by member.
  void force(int64_t now) {
    if (!killed_ && cg_kill_ >= 0) {
      ssize_t w;
      do {
        w = write(cg_kill_, "1", 1);
      } while (w < 0 && errno == EINTR);
      trace("cgroup.kill: %zd", w);
      if (w == 1) {
        killed_ = true;
        killed_at_ = now;
      }
    }
    thaw();
    if (!killed_) {
      Round round;
      list_round(round);
      verify(round.list);
      for (auto& m : round.list) {
        if (m.from_snapshot) host_.signal_pinned(m, round.pin_of(m));
      }
    }
    if (!stuck_checked_ && host_.termination().stuck_due(now)) {
      stuck_checked_ = true;
      auto left = members(false, false);
      if (!left.empty()) host_.report_stuck(left);
    }
  }

  void remove_cgroup() {
    thaw();
    if (cg_kill_ >= 0) close(cg_kill_);
    if (cg_dir_ >= 0) close(cg_dir_);
    if (events_fd_ >= 0) close(events_fd_);
    if (freeze_fd_ >= 0) close(freeze_fd_);
    if (procs_fd_ >= 0) close(procs_fd_);
    if (list_fd_ >= 0) close(list_fd_);
    cg_kill_ = cg_dir_ = events_fd_ = freeze_fd_ = procs_fd_ = list_fd_ = -1;
    limits_.remove();
    if (!cg_path_.empty()) remove_cgroup_dir(cg_path_, 0);
    cg_path_.clear();
  }

  // A cgroup with sub-cgroups (a command that runs cordon itself, whose own
  // anchor was killed with the tree) is removed bottom-up. Only directories
  // are removed; the kernel refuses any cgroup that still has a process. The
  // common case, no sub-cgroup, is one rmdir: the directory is read only when
  // that is refused.
  void remove_cgroup_dir(const std::string& dir, int depth) {
    if (rmdir(dir.c_str()) == 0) return;
    if (errno != EBUSY && errno != ENOTEMPTY) {
      trace("rmdir %s: %s", dir.c_str(), strerror(errno));
      return;
    }
    if (DIR* d = opendir(dir.c_str())) {
      std::vector<std::string> subs;
      while (dirent* e = readdir(d)) {
        if (e->d_type == DT_DIR && strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) subs.push_back(e->d_name);
      }
      closedir(d);
      if (depth < 32) {
        for (auto& sub : subs) remove_cgroup_dir(dir + "/" + sub, depth + 1);
      }
    }
    if (rmdir(dir.c_str()) != 0) trace("rmdir %s: %s", dir.c_str(), strerror(errno));
  }

  std::string cg_path_;  // the tree's cgroup
  CgroupLimits limits_;  // the resource limits on it, if any were asked for
  int cg_dir_ = -1;
  int cg_kill_ = -1;
  int events_fd_ = -1;  // cgroup.events
  int freeze_fd_ = -1;  // cgroup.freeze, where there is one to write
  int procs_fd_ = -1;   // cgroup.procs, held for listing (hold_listing())
  int list_fd_ = -1;    // the cgroup's directory, held for listing its sub-cgroups
  [[maybe_unused]] bool listing_opened_ = false;  // Linux only (hold_listing())
  [[maybe_unused]] bool freeze_opened_ = false;  // Linux only (freeze())
  bool populated_ = true;
  bool frozen_ = false;
  // The stop.
  Polite polite_ = Polite::kNotYet;
  int64_t freeze_since_ = 0;
  int64_t next_round_ = 0;
  int interval_ = kFirstRescanMs;
  std::set<std::pair<int64_t, uint64_t>> seen_;  // members listed in a polite round
  std::unordered_set<int64_t> seen_pids_;          // and their pids (has_unseen)
  bool escapees_ = false;                         // the cgroup is empty, a child lives
  bool killed_ = false;                           // cgroup.kill written
  int64_t killed_at_ = 0;
  bool stuck_checked_ = false;
  bool may_fall_back_ = false;
  bool fell_back_ = false;  // the command runs in the subreaper tier: no cgroup
};

}  // namespace

std::unique_ptr<Tier> make_cgroup_tier(TierHost& host, std::unique_ptr<Tier> subreaper) {
  return std::make_unique<CgroupTier>(host, std::move(subreaper));
}

}  // namespace anchor
}  // namespace cordon
