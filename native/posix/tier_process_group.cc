// The process-group tier (the macOS strategy; on Linux where neither a cgroup
// nor a subreaper is to be had): the tree gets a process group of its own,
// pinned for its life by a child of the anchor. The group signal reaches
// every in-group member at once; members outside the group (setsid, setpgid,
// daemons) are known from snapshots of the tree (while still parented) and
// from the tree's marker, and are signalled one by one after identity checks.
//
// The marker: the command's environment gets CORDON_TREE=<anchor pid>.<anchor
// start>.<128 random bits in hex>, which every member inherits, however it
// leaves the group or its parents (a daemon keeps its environment). The anchor
// sweeps the processes it may read (the user's; every user's for a root
// anchor, so a member started as another user, by the uid option or runuser,
// is seen) for it (their environment as they were started:
// /proc/<pid>/environ, kern.procargs2) when it matters: before the polite
// signal, in the grace, at the forced stop, when the root exits, before it
// declares the tree quiescent, and on Linux before each snapshot. A sweep checks each process as the walk reads
// it, newest first, so a member that forks and exits every few milliseconds
// is found alive; the forced stop is freeze first (freeze_outside), so such a
// member is stopped, not chased. The exact token must be there, so a process
// that carries another tree's prefix with a wrong secret is no member. Nested
// trees append their token (CORDON_TREE=<outer>:<inner>), so an inner tree's
// members stay the outer tree's too. What the marker cannot see: a member
// that starts a program with a scrubbed environment (env -i), and one whose
// environment the anchor cannot read (another user's, unless the anchor is
// root; Linux: a non-dumpable process such as ssh-agent, unless the anchor has
// CAP_SYS_PTRACE; macOS: a cs_restricted program, such as Apple's system
// binaries under SIP, whose environment the kernel withholds from every other
// process, root's too; or one that overwrote its environment strings in
// place). Such a process is never claimed as a member by its marker; on macOS
// it is one when the process that forked it was seen as a member (the
// lineage: tree_marker.h), in the tree's session, or in its group. Hence
// coverage: 'partial' (docs/xnu-model.md says what XNU lets the tier see).
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <map>
#include <set>

#include "exit_watch.h"
#include "known_members.h"
#include "tier.h"
#include "tree_marker.h"

namespace cordon {
namespace anchor {

using protocol::trace;

namespace {

constexpr int kGroupSnapshotMs = 1000;
// A snapshot walks every process (only that finds who left the group): past
// the tree's first seconds, while snapshots find nothing outside its group,
// they back off to this (200 idle trees x 4,000 processes took both cores
// at 1 s each, before the walks skipped what is older than the anchor).
constexpr int kGroupSnapshotMaxMs = 8000;
// ...but not in a tree's first seconds, when daemons usually start.
constexpr int kGroupSnapshotSteadyAfterMs = 5000;
// The first snapshot, this long after the root's start: not at once (a
// command that ends within it, as most of an agent's do, gets the sweep at
// its root's exit alone; a snapshot at its start found the root only, and
// its walk held up the root's EXIT by about 1 ms: docs/benchmarks.md).
constexpr int kFirstSnapshotMs = 20;
// In the grace, how often the process-group tier looks for members forked
// after the group's SIGTERM (a walk of every process).
constexpr int kGroupTermWalkMs = 250;
// In the grace, how often the tier sweeps for the marker (the stat and the
// environment of what started since the root: the costliest walk here).
constexpr int kGroupTermSweepMs = 1000;
// The forced stop's walks (freeze_outside) in one round of the loop: at most
// this long (the anchor does nothing else meanwhile), then what they stopped
// is killed and the next round (10 ms later) goes on.
constexpr int kFreezeMs = 1000;
// Walks that must find no marked member for quiescence, once one was found outside the group.
constexpr int kQuietWalks = 3;

class ProcessGroupTier : public Tier {
 public:
  using Tier::Tier;
  // The poll-error exit of the anchor's loop ends here too.
  ~ProcessGroupTier() override { release_pin(); }

  const char* name() const override { return "process-group"; }

  // The anchor first leaves the host's session, group and terminal (job
  // control aimed at the host, `kill -9 -<host pgid>` or a hang-up, does not
  // reach it; the host's death does, as EOF on the control channel). The
  // tree gets a process group X of its own that the anchor is NOT in:
  // kill(-X, sig) reaches exactly the in-group members, atomically (on Linux
  // a child being forked too), and kill(-X, 0) failing with ESRCH means no
  // member, not even a zombie, is left in the group: no walk decides it.
  // X is pinned for the tree's life by a child of the anchor, the pin: it
  // creates X (X = its pid), the command joins X before exec, then the pin
  // leaves X and is killed, and stays an unreaped zombie until QUIET. Its
  // pid, so the id X, cannot be reused meanwhile; nobody can create group X
  // (a new group's id is its creator's pid), and an empty group cannot be
  // joined: once empty, X stays empty.
  int contain(const char*& what) override {
    if (setsid() < 0) {
      trace("setsid: %s", strerror(errno));
      if (getpgrp() != getpid() && setpgid(0, 0) != 0) trace("setpgid: %s", strerror(errno));
    } else {
      // The session is the tree's: no process but the anchor, its pin and
      // the tree can be in it (none joins a session; one can only leave it).
      // A member that leaves the tree's group but not the session (setpgid:
      // a shell's job control moves every job, and itself, out) is a member
      // to the sweeps, as a marked one is, its environment scrubbed or not.
      session_ = getpid();
    }
    own_group_ = getpgrp();
    // The pin's life line: the read end is the pin's only descriptor, the
    // write end the anchor's alone (close-on-exec: a command forked later
    // holds it only until its exec). EOF there is the anchor gone.
    int life[2];
    if (pipe(life) != 0) {
      what = "process-group";
      return -errno;
    }
    fcntl(life[0], F_SETFD, FD_CLOEXEC);
    fcntl(life[1], F_SETFD, FD_CLOEXEC);
    pid_t pin = ::fork();
    if (pin < 0) {
      int err = errno;
      close(life[0]);
      close(life[1]);
      what = "process-group";
      return -err;
    }
    if (pin == 0) {
      // The pin: no handler, no fd of interest; it only waits for its SIGKILL.
      // It never calls setpgid itself: the anchor makes X (below) and later
      // moves the pin out of it, and a setpgid(0, 0) of the pin's that ran
      // after that move (the pin scheduled late, between the move and its
      // SIGKILL) would make X again with the pin in it, an unreaped zombie
      // that keeps kill(-X, 0) answering "not empty" until QUIET, which
      // waits for X to be empty.
      // It holds no descriptor of the anchor's either: not the control
      // channel (a warm anchor's pin waits as long as the anchor does, and a
      // host writing its LAUNCH to an anchor killed meanwhile must get EPIPE,
      // not a pin that keeps the channel open), not the host's output; only
      // its life line, and it ends when the anchor is gone (killed, or
      // exited without its release): a warm anchor's pin would otherwise
      // outlive an anchor SIGKILLed while it waited.
      sigset_t all;
      sigfillset(&all);
      sigprocmask(SIG_SETMASK, &all, nullptr);
      cordon::close_fds_from(0, life[0]);
      char b;
      while (read(life[0], &b, 1) < 0 && errno == EINTR) {
      }
      _exit(0);
    }
    close(life[0]);
    life_ = life[1];
    pin_ = pin;
    // X exists before the command is forked: the anchor makes it, moving its
    // own child (which has not exec'd, so the kernel allows it).
    if (setpgid(pin, pin) != 0) {
      int err = errno;
      release_pin();
      what = "process-group";
      return -err;
    }
    group_ = pin;
    known_.lineage().seed(cordon::lineage_ids_of(getpid()));  // (macOS: the root's parent at fork)
    if (!marker_.make(since_)) {
      int err = errno;
      release_pin();
      group_ = 0;
      what = "process-group";
      return -err;
    }
    return 0;
  }

  int64_t group() const override { return group_; }

  // The tree's first sweep (at the root's exit, for most commands) reads
  // only processes started since the anchor: what is older is noted now,
  // while nothing waits on it (measured: 130 stat files at the exit of every
  // short command on an idle VM, docs/benchmarks.md).
  void while_waiting(const std::function<bool()>& stop) override {
#if CORDON_LINUX_PROC
    cordon::note_older_processes(stop);
#else
    (void)stop;
#endif
  }
  std::string marker() const override { return marker_.token(); }
  int64_t session() const override { return session_; }

  // With --pty the terminal is the anchor's (contain() made it a session
  // leader), so the command stays in the tree's group: a session leader could
  // not join it. (An anchor that could not setsid() cannot take the
  // terminal: NOCONTAIN pty, nothing runs.)
  bool anchor_leads_session() const override { return true; }

  // The command joins the tree's group, then waits on `go` until the pin has
  // left the group, then execs.
  int before_fork() override {
    // The command's CORDON_TREE: an outer tree's tokens (this anchor's own
    // environment is the command's), then this tree's; put into the anchor's
    // own environment, which the command is exec'd with (the child may share
    // the anchor's memory: nothing is set there).
    const char* outer = getenv(kMarkerName);
    marker_entry_ = marker_.entry(outer);
    putenv(&marker_entry_[0]);
    if (pipe(go_) != 0) {
      int err = errno;
      go_[0] = go_[1] = -1;
      release_pin();
      return -err;
    }
    fcntl(go_[0], F_SETFD, FD_CLOEXEC);
    fcntl(go_[1], F_SETFD, FD_CLOEXEC);
    child_go_[0] = go_[0];
    child_go_[1] = go_[1];
    return 0;
  }

  // Linux: a child that shares the anchor's memory until it execs
  // (clone_shared), as in the subreaper tier; it waits on `go` all the same.
  int64_t fork(const char*& what, const ChildStart& start) override {
#if CORDON_LINUX_PROC
    *start.shared = cordon::clone_shared(-1, start.main, start.arg);
    if (start.shared->pid >= 0) return start.shared->pid;
#endif
    return Tier::fork(what, start);
  }

  // The child may share the anchor's memory, and the anchor closes and
  // forgets go_ meanwhile: the child reads child_go_, which nothing changes
  // until the next launch.
  int child_enter() override {
    close(child_go_[1]);
    if (setpgid(0, static_cast<pid_t>(group_)) != 0) return errno;
    char b;
    ssize_t r;
    do {
      r = read(child_go_[0], &b, 1);
    } while (r < 0 && errno == EINTR);
    if (r != 1) _exit(127);  // the anchor gave up or is gone: nothing of the command runs
    close(child_go_[0]);
    return 0;
  }


  // The command is in the group once either side has moved it (it cannot
  // have exec'd: it waits on `go`). Then the pin leaves; if either step
  // fails, the command never runs.
  int after_fork(pid_t child, const char*& what) override {
    root_ = child;
    // The tree's age counts from its root (a warm anchor waited before it).
    started_at_ = now_ms();
    last_snapshot_ = started_at_ - kGroupSnapshotMs + kFirstSnapshotMs;
    known_.lineage().add(cordon::lineage_ids_of(child));  // (it waits on `go`: alive; its ids stay across exec)
#if CORDON_LINUX_PROC
    // No member is older than the root (all are its descendants, or in its
    // session, which nothing joins): the sweeps read nothing started before
    // it. A warm anchor waited before its command came, and on a busy host
    // every process started meanwhile would be read, environment and all, at
    // every sweep (measured: 30 ms more at each root's exit).
    uint64_t root_start = cordon::start_time_of(child);
    if (root_start > since_) {
      since_ = root_start;
      cordon::skip_older_processes(root_start);
    }
#endif
    close(go_[0]);
    go_[0] = -1;
    int err = 0;
    if (setpgid(child, static_cast<pid_t>(group_)) != 0 && errno != EACCES) err = errno;
    if (err == 0 && !unpin()) err = errno;
    if (err != 0) {
      kill(child, SIGKILL);  // our unreaped child, still before exec
      close(go_[1]);
      go_[1] = -1;
      int st;
      while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
      }
      release_pin();
      what = "process-group";
      return -err;
    }
    ssize_t w;
    do {
      w = write(go_[1], "x", 1);  // go
    } while (w < 0 && errno == EINTR);
    close(go_[1]);
    go_[1] = -1;
    // The pin dies while the command execs: it left the group above, and
    // nothing of it can rejoin (it never calls setpgid).
    await_pin_zombie();
    return 0;
  }

  void abandon_launch() override {
    for (int& fd : go_) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
    release_pin();
  }

  // The anchor's only children are the root and the pin, whose zombie must
  // stay unreaped until QUIET.
  bool reaps_root_only() const override { return true; }

  // Descendants, the group, and every member a snapshot saw that is still the
  // same live process. A full /proc (libproc) walk: used for snapshots and
  // reports only, never to decide whether the tree is quiescent.
  std::vector<Member> members(bool commands = false, bool holds = false) override {
    std::vector<Member> out = Tier::members(commands, holds);
    std::set<int64_t> have;
    for (auto& m : out) have.insert(m.pid);
    for (auto& m : known_.alive()) {
      if (have.count(m.pid)) continue;
      out.push_back(m);
      // Out of the walk's sight now (left the group, orphaned): whether it
      // holds the output is asked of it directly, so a report names it.
      if (holds) out.back().holds_output = cordon::holds_output(m.pid, m.start_time, host_.watched());
    }
    for (auto& m : out) {
      if (!m.from_snapshot) known_.remember(m);
    }
    return out;
  }

  // One walk can miss a member that forks and exits faster than the walk
  // reads it (a pid hopper); the kernel says whether the group still has
  // one. A few more walks, bounded.
  //
  // Once the group has had its signal (the root exited while the tree was
  // being terminated), neither: the group's remaining members are being ended
  // (and orphans among them are zombies until init reaps them, which the
  // kernel's answer counts: the retries would only walk /proc for nothing),
  // and the sweep before quiescence finds what left the group since the
  // termination's first sweep.
  std::vector<Member> leftovers() override {
    bool ending = group_termed_ || group_killed_;
    // Daemons the root's children started, orphaned outside the group. If
    // nothing of the tree was left when it began (the group empty, the
    // members known outside it gone) and it found nothing, this sweep is the
    // one before quiescence too: a short command's end costs one sweep. Not
    // once a member was found outside the group (the members known then may
    // be gone because one forked and exited: a pid hopper), nor when the
    // sweep did not settle (a process it listed was gone when read, and may
    // have forked after the listing: cordon.h, visit_sweepable_processes):
    // then quiescent() walks again, as it does for such a tree.
    std::vector<Member> found;
    if (!ending) {
      bool nothing_left = group_empty() && known_.alive().empty();
      found = sweep([](Member& m) { m.command = cordon::command_line(m.pid); });
      for (auto& m : sweep_mid_exec()) found.push_back(m);
      swept_empty_ = found.empty() && nothing_left && !found_outside_ && swept_settled_;
      trace("root exit: the sweep found %zu marked member(s) outside the group%s", found.size(),
            swept_empty_ ? "; nothing was left of the tree" : "");
      // Then no listing can find one: the group was empty (the kernel's word,
      // zombies counted), and an empty group gets no member (none is left to
      // fork into it, and setpgid() cannot join a group that is gone); the
      // members known outside it were gone, and the sweep, settled, found
      // none. The short command's end is one walk, not two. (XNU alike:
      // setpgid() to a group pgrp_find() does not find is EPERM, and a new
      // group takes its creator's pid, here the pin's, held by its zombie:
      // xnu-11417.101.15 bsd/kern/kern_prot.c:612-618.)
      if (swept_empty_) return {};
    }
    auto list = members(true, true);
    for (int64_t until = now_ms() + 200; !ending && group_ > 0 && now_ms() < until && !group_empty();) {
      bool listed = false;
      for (auto& m : list) listed = listed || m.pgid == group_;
      if (listed) break;
      usleep(5000);
      list = members(true, true);
    }
    if (!ending) left_since_sweep(list);
    // A member the sweep found alive outside the group is reported even if
    // it is gone by the listing: a process that forks and exits every few
    // milliseconds is never the same pid twice, and the host must hear that
    // something outlived the root (its 'kill' policy then stops the tree).
    std::set<int64_t> listed;
    for (auto& m : list) listed.insert(m.pid);
    for (auto& m : found) {
      if (!listed.insert(m.pid).second) continue;
      list.push_back(m);
    }
    return list;
  }

  // Exact for the group (the kernel's count, zombies included); members seen
  // leaving it are checked by identity. Members that left unseen are this
  // tier's documented limit (the result says: partial).
  // Before the tree is declared quiescent, a last sweep: a member that kept
  // the marker (a daemon started after the last sweep) keeps it from being so.
  // One sweep each time everything else says quiescent: never on a timer.
  bool quiescent() override {
    if (!group_quiescent() || !known_.alive().empty()) return false;
    if (swept_empty_) return true;  // (the root-exit sweep, see leftovers)
    // Where marked members outside the group were ever found, one walk that
    // misses them is no proof (one that forks and exits every few
    // milliseconds can be between two pids as the walk passes): a few walks.
    // Each must have settled (cordon.h: its last listing read whole, every
    // process in it alive when read): one that did not may have missed a
    // child forked after its listing, so it is no proof, and the tree is not
    // quiescent yet (the loop asks again).
    bool none = true, settled = true;
    int walks = 0;
    for (; none && settled && walks < (found_outside_ ? kQuietWalks : 1); walks++) {
      none = sweep().empty();
      settled = swept_settled_;
    }
    trace("quiescence: %d walk(s), %s", walks, !none ? "a marked member found" : settled ? "none found" : "none found, not settled");
    if (none && settled) return true;
    // Found (or not settled) while forcing: the next round freezes and kills again.
    if (host_.termination().forcing()) frozen_ = false;
    return false;
  }

  // The group signal reaches every in-group member at once (and, on Linux, a
  // child being forked meanwhile); members seen leaving the group are
  // signalled one by one after identity checks.
  void step_terminate(int64_t t) override {
    bool forcing = host_.termination().forcing();
    // Which known members are outside the group, checked before the group
    // signal, so an in-group member gets the polite signal once.
    auto outside_now = [&]() {
      std::vector<Member> out;
      for (auto& m : known_.alive()) {
        int64_t pgid = cordon::current_pgid(m.pid, m.start_time);
        if (pgid >= 0 && (pgid != group_ || forcing)) out.push_back(m);
      }
      return out;
    };
    // Once, before the group signal: refresh the snapshot, so that members
    // that left the group while still parented are known. (After it, their
    // parents would be dead and they orphaned: out of sight.)
    if (!group_termed_ && !forcing) {
      // The in-group members this walk saw get the group signal below: they
      // count as signalled. (One forked while the walk ran gets the group
      // signal too but may be signalled once more below: the walk is not atomic.)
      // On Linux the walk is of the anchor's descendants only (children
      // lists: the tree's cost, not the host's, so the group's signal does
      // not wait on a walk of every process); an in-group orphan it cannot
      // list is told apart by its start, before the group signal.
      for (auto& m : pre_signal_walk()) {
        if (m.pgid == group_) group_signalled_.insert({m.pid, m.start_time});
      }
      last_term_walk_ = t;
    } else if (group_termed_ && !forcing && t - last_term_walk_ >= kGroupTermWalkMs) {
      // In the grace: a member forked after the group signal (a shell that
      // forks while its TERM trap is pending) gets the polite signal too, as
      // in the other tiers, rather than only the forced kill at the end.
      last_term_walk_ = t;
      for (auto& m : members()) {
        if (m.from_snapshot || m.pgid != group_) continue;  // outside: handled below
        auto key = std::make_pair(m.pid, m.start_time);
        if (group_signalled_.count(key)) continue;
        if (signalled_before_ > 0 && m.start_time < signalled_before_) continue;  // had the group's
        int rc = cordon::signal_member_then_cont(getpid(), group_, m, host_.polite_signal(), host_.pidfd());
        if (rc == 0) group_signalled_.insert(key);
        trace("signal %d %lld (forked after the group signal): %d", host_.polite_signal(), static_cast<long long>(m.pid), rc);
      }
    }
    std::vector<Member> outside = outside_now();
    if (forcing) {
      kill_group();
      // The group is dead (its SIGKILL reaches every in-group member at
      // once); what is outside it is stopped before it is killed. A round
      // that ran out of time leaves it to the next one.
      if (!frozen_) {
        frozen_ = freeze_outside(now_ms() + kFreezeMs);
        swept_terminating_ = swept_forcing_ = true;
        outside = outside_now();
      }
    } else if (!group_termed_) {
      group_termed_ = true;
      group_signal_at_ = t;
      // SIGCONT first: a member stopped when the root dies would be in an
      // orphaned group, and the kernel sends such members SIGHUP (and then
      // SIGCONT), which ends one that traps only the polite signal before
      // its trap runs. Resumed first, it is running when the root dies.
      kill(static_cast<pid_t>(-group_), SIGCONT);
      int rc = kill(static_cast<pid_t>(-group_), host_.polite_signal()) == 0 ? 0 : -errno;
      trace("signal %d to group %lld: %d", host_.polite_signal(), static_cast<long long>(group_), rc);
    }
    // The marker sweep: with the first round and in the grace (paced); at
    // the forced stop, freeze_outside above walks instead (for daemons a
    // member started while it handled its SIGTERM). After the group signal: a member's marker does not depend
    // on its parents being alive, so the group need not wait for the sweep.
    // Members it finds outside the group get their signal in this round.
    if (!swept_terminating_ || (forcing && !swept_forcing_) || (!forcing && t - last_sweep_ >= kGroupTermSweepMs)) {
      swept_terminating_ = true;
      swept_forcing_ = swept_forcing_ || forcing;
      // Signalled after the walk: a daemon that ends itself when one of its
      // own does (tmux, its last pane gone) is then found first, and reported.
      for (auto& m : sweep()) {
        host_.signal_one(m);
        int64_t pgid = cordon::current_pgid(m.pid, m.start_time);
        if (pgid >= 0 && (pgid != group_ || forcing)) outside.push_back(m);
      }
    }
    for (auto& m : outside) host_.signal_one(m);
    if (host_.termination().stuck_due(t) && (cordon::group_live_members(group_) != 0 || !outside.empty())) {
      host_.report_stuck(members());
    }
  }

  // Group members' deaths wake the anchor only where watched (exits_): after
  // the group's signal it looks again in 5 ms, then every quarter of the
  // time since, up to its pace.
  int terminate_wait_ms(int64_t now) const override {
    int pace = host_.termination().wait_ms(now, 10, 100);
    if (group_signal_at_ == 0) return pace;
    return static_cast<int>(std::min<int64_t>(pace, std::max<int64_t>(5, (now - group_signal_at_) / 4)));
  }

  // Who holds the pipes is a walk of every process in this tier: prompt at
  // first, then slower, for kept leftovers that hold on.
  int held_output_wait_ms(int64_t since_root_exit) const override { return since_root_exit > 2000 ? 500 : 50; }

  // Until the next snapshot is due.
  int idle_wait_ms(bool) const override {
    int64_t left = last_snapshot_ + snapshot_every_ - now_ms();
    return static_cast<int>(left < 0 ? 0 : left > snapshot_every_ ? snapshot_every_ : left);
  }
  const std::vector<int>& wake_fds() const override { return exits_.fds(); }

  void idle_tick(int64_t now) override {
    if (now - last_snapshot_ < snapshot_every_) return;
    // A snapshot looks for descendants of the anchor and members of the
    // group: with the root gone and the group empty (the kernel's word) there
    // are none, so no walk; the loop still wakes at this pace, to see kept
    // members outside the group go (a stat read each).
    if (root_gone() && group_empty()) {
      bool young = now_ms() - started_at_ < kGroupSnapshotSteadyAfterMs;
      snapshot_every_ = !known_.alive().empty() || young ? kGroupSnapshotMs
                                                             : std::min(snapshot_every_ * 2, kGroupSnapshotMaxMs);
      last_snapshot_ = now;
      return;
    }
    // Refresh the snapshot so setsid'd members stay known: every second
    // while the tree has members outside its group, backing off while not.
    // A sweep first, which finds marked members outside the group early (and
    // on macOS records the ids of every member it sees, whose children
    // lineage then names: docs/xnu-model.md); on Linux what it finds no
    // member (another tree's processes) every later walk skips, this
    // snapshot's and the stop's.
    sweep();
    bool outside = false;
    for (auto& m : members()) outside = outside || m.pgid != group_;
    bool young = now_ms() - started_at_ < kGroupSnapshotSteadyAfterMs;
    snapshot_every_ = outside || young ? kGroupSnapshotMs : std::min(snapshot_every_ * 2, kGroupSnapshotMaxMs);
    last_snapshot_ = now_ms();
  }

  // Group X is empty for good: its id may go now.
  void release() override { release_pin(); }

 private:
  // The pin leaves the tree's group and is SIGKILLed (await_pin_zombie()
  // waits for its death); it is reaped only at QUIET. Returns false (errno
  // set) if it could not leave the group.
  bool unpin() {
    if (setpgid(pin_, own_group_) != 0) return false;
    kill(pin_, SIGKILL);  // our unreaped child: its pid is pinned
    return true;
  }

  // Until the pin is a zombie, it would show up in a snapshot of our
  // children (the first is kFirstSnapshotMs after the root's start).
  void await_pin_zombie() {
    siginfo_t info;
    while (waitid(P_PID, static_cast<id_t>(pin_), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
    }
  }

  // Reaps the pin (a zombie by now, or killed here): the group id is free.
  void release_pin() {
    if (life_ >= 0) close(life_);
    life_ = -1;
    if (pin_ <= 0) return;
    kill(pin_, SIGKILL);
    int st;
    while (waitpid(pin_, &st, 0) < 0 && errno == EINTR) {
    }
    pin_ = -1;
  }

  // The root has exited (reaped or not): the anchor's waitid, no walk.
  bool root_gone() const {
    if (root_ <= 0) return true;
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (waitid(P_PID, static_cast<id_t>(root_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return errno == ECHILD;
    return info.si_pid != 0;
  }

  // In the tree's session, a process of its own (not a thread: a walk that
  // probes pids reaches threads too, the anchor's own among them), and not
  // the anchor.
  bool in_session(const Member& m) const {
    if (session_ <= 0 || m.pid == getpid()) return false;
    if ((m.sid != 0 ? m.sid : cordon::session_of(m.pid, m.start_time)) != session_) return false;
    return cordon::is_thread_group_leader(m.pid);
  }

  // No process (live or zombie) is left in the tree's process group.
  bool group_empty() const {
    return group_ <= 0 || (kill(static_cast<pid_t>(-group_), 0) != 0 && errno == ESRCH);
  }

  // No live process is left in the tree's process group. The kernel's answer
  // (group_empty) counts zombies too, which init may take seconds to reap.
  // So, terminating: once a walk finds no live member (or the grace is
  // over), the group gets SIGKILL, after which no member can fork (it
  // reaches a child being forked too): the next walk cannot be outrun by a
  // pid hopper, it is the answer. Outside termination (kept leftovers are
  // never escalated) only the kernel's answer counts. The live members a
  // walk sees wake the loop when they exit (exits_).
  bool group_quiescent() {
    exits_.clear();
    if (group_empty()) return true;
    if (!host_.termination().active() || !(group_termed_ || group_killed_)) return false;
    std::vector<Member> live;  // (in the grace, they keep it)
    if (!group_killed_ && cordon::group_live_members(group_, &live) == 0) kill_group();
    if (group_killed_ && cordon::group_live_members(group_, &live) == 0) return true;
    exits_.set(live);
    return false;
  }

  // macOS answers EPERM for a group in which only zombies are left (Linux:
  // 0); with no live member seen, that group has had all the SIGKILL it can
  // take. EPERM with a live member left (another user's) is not a kill.
  void kill_group() {
    int rc = kill(static_cast<pid_t>(-group_), SIGKILL);
    if (rc == 0 || errno == ESRCH || (errno == EPERM && cordon::group_live_members(group_) == 0)) group_killed_ = true;
  }

  // The sweep: every process the anchor may read (its user's; every user's
  // for a root anchor; on Linux only those started since the root) whose
  // environment carries the token is remembered as a member, like one a
  // snapshot saw. Each is checked, and handed to `on_found`, as the walk
  // reads it, before the walk goes on: a process that forks and exits every
  // few milliseconds (a setsid hopper) is found alive, and its child, forked
  // meanwhile, is still ahead of the walk. Returns the new ones (found alive;
  // they may be gone since).
  std::vector<Member> sweep(const std::function<void(Member&)>& on_found = nullptr) {
    last_sweep_ = now_ms();
    readings_.mid_exec.clear();
    in_group_at_sweep_.clear();
    std::vector<Member> fresh;
    MarkerReadings::Walk walk;
    size_t seen = 0;
    // Unclaimed processes with a parent id: the walk goes newest first, so a
    // child is read before a parent that it finds to be a member.
    std::vector<Member> unclaimed;
    std::map<int64_t, size_t> unclaimed_at;  // (by pid)
    auto claim = [&](const Member& listed) {
      Member p = listed;
      p.from_snapshot = true;
      if (on_found) on_found(p);
      known_.remember(p);
      fresh.push_back(p);
      found_outside_ = true;
    };
    int rc = cordon::visit_sweepable_processes(since_, [&](const Member& listed) {
      seen++;
      // In the group: the group's signal reaches it (and it is ours anyway).
      // Kept aside: it may leave the group before a walk sees it there.
      if (listed.pid == pin_) return Visit::kNext;
      if (listed.pgid == group_) {
        in_group_at_sweep_.push_back(listed);
        known_.lineage().add(listed);  // (macOS: a member, whose children are members too)
        return Visit::kMember;
      }
      if (known_.knows(listed)) return Visit::kMember;
      if (in_session(listed)) {
        claim(listed);
        return Visit::kMember;
      }
      if (!known_.lineage().parent_known(listed) && !readings_.marked(listed, walk)) {
        if (listed.parent_unique_id != 0 || listed.parent_id_version != 0) {
          unclaimed_at[listed.pid] = unclaimed.size();
          unclaimed.push_back(listed);
        }
        if (walk.went) return Visit::kGone;  // (it may have forked a member meanwhile: cordon.h)
        return readings_.no_member(listed, walk) ? Visit::kNotMember : Visit::kNext;
      }
      claim(listed);
      return Visit::kMember;
    }, &swept_settled_, [&](int64_t pid) {
      // A listed process gone when read: it could have been a member unless
      // this walk or the last read it and judged it none (unmarked, or
      // withheld and not tied by lineage), and it was not claimed since: a
      // member remembered, or one whose parent this walk found to be one.
      if (pid == pin_) return false;
      if (known_.knows_pid(pid) || !readings_.judged(pid, walk)) return true;
      auto at = unclaimed_at.find(pid);
      return at != unclaimed_at.end() && known_.lineage().parent_known(unclaimed[at->second]);
    });
    if (rc < 0) trace("sweep: %s", strerror(-rc));
    known_.lineage().settle(unclaimed, claim);
    readings_.forget_gone(walk);
    if (!fresh.empty()) trace("sweep: %zu marked member(s) found of %zu processes", fresh.size(), seen);
    if (walk.withheld_new > 0) {
      trace("sweep: the kernel withholds the environment of %zu more process(es) (%zu in all): unreadable", walk.withheld_new,
            readings_.withheld());
    }
    return fresh;
  }

  // The forced stop of the members outside the group, freeze first: a sweep
  // that lists and then kills chases the next pid of a process that forks
  // and exits every few milliseconds, so every member a walk finds (one
  // remembered, a marked one, a child of a stopped one) is SIGSTOPped as it
  // is found (a stopped process forks no more: a fork begun before the
  // signal is completed first, so each walk waits until what was stopped
  // holds still, await_still), and walks go on until one finds
  // nothing new and settles (cordon.h, visit_sweepable_processes: nothing it
  // listed was gone when read, so no member's fork after the listing is
  // missing from it); then everything stopped gets SIGKILL (and SIGCONT). Every
  // signal goes through signal_member, which checks the (pid, start)
  // identity first (and on Linux pins it with a pidfd): a recycled pid is
  // never signalled. The group itself has had its SIGKILL before this.
  // Bounded: walks end at `until`, and what is stopped by then is killed (the
  // next round goes on). Returns true when a walk found nothing new and settled.
  bool freeze_outside(int64_t until) {
    std::map<int64_t, Member> frozen;
    // Each member is tried once: one that cannot be stopped (EPERM) does not
    // keep the walks going.
    std::set<std::pair<int64_t, uint64_t>> tried;
    std::vector<Member> newly;  // stopped since the last walk began
    auto stop = [&](Member m) {
      if (!tried.insert({m.pid, m.start_time}).second) return false;
      m.from_snapshot = true;
      int rc = cordon::signal_member(getpid(), group_, m, SIGSTOP, host_.pidfd());
      if (rc == 0) {
        frozen[m.pid] = m;
        newly.push_back(m);
      }
      trace("freeze: SIGSTOP %lld (parent %lld): %d", static_cast<long long>(m.pid), static_cast<long long>(m.ppid), rc);
      return true;  // (gone meanwhile: a child it forked may not be)
    };
    for (auto& m : known_.alive()) stop(m);
    bool calm = false;
    int walks = 0;
    MarkerReadings::Walk walk;
    while (!calm && now_ms() < until) {
      // Each walk begins once what was stopped holds still: one still inside
      // a fork when its SIGSTOP came would add a child after the listing.
      if (!newly.empty() && !await_still(newly, until)) break;
      newly.clear();
      walks++;
      bool found = false;
      walk = MarkerReadings::Walk();
      readings_.mid_exec.clear();
      bool settled = false;
      cordon::visit_sweepable_processes(since_, [&](const Member& listed) {
        if (listed.pid == pin_ || listed.pgid == group_) return Visit::kNext;  // the group had its SIGKILL
        bool member = known_.knows(listed) || frozen.count(listed.ppid) != 0 || known_.lineage().parent_known(listed) ||
                      readings_.marked(listed, walk);
        if (!member) {
          if (walk.went) return Visit::kGone;  // (it may have forked a member meanwhile: cordon.h)
          return readings_.no_member(listed, walk) ? Visit::kNotMember : Visit::kNext;
        }
        if (stop(listed)) {
          found = true;
          found_outside_ = true;
          Member p = listed;
          p.from_snapshot = true;
          known_.remember(p);  // (after the stop: its command line is read while it holds still)
        }
        return now_ms() < until ? Visit::kMember : Visit::kStop;
      }, &settled, [&](int64_t pid) {
        // Gone when read: as in sweep(), unless judged no member (a member
        // here is decided as it is read, with no lineage settled after).
        if (pid == pin_) return false;
        return frozen.count(pid) != 0 || known_.knows_pid(pid) || !readings_.judged(pid, walk);
      });
      readings_.keep(walk);
      // Calm: nothing new, and the walk settled (a process it listed that
      // was gone when read may have forked a member after the listing).
      calm = !found && settled;
    }
    for (auto& entry : frozen) {
      int rc = cordon::signal_member_then_cont(getpid(), group_, entry.second, SIGKILL, host_.pidfd());
      if (rc != 0) trace("freeze: SIGKILL %lld: %d", static_cast<long long>(entry.first), rc);
    }
    trace("freeze: %zu member(s) outside the group stopped and killed, %d walk(s)%s", frozen.size(), walks,
          calm ? "" : ", out of time");
    return calm;
  }

  // A process the sweep skipped because it was in the group, that the walk
  // after it did not list: it left the group in between (a daemon's setsid
  // as the root exits) and, orphaned, is out of the walk's sight. Its marker
  // decides, as in the sweep; found, it is added to `list`.
  void left_since_sweep(std::vector<Member>& list) {
    std::set<int64_t> listed;
    for (auto& m : list) listed.insert(m.pid);
    std::string env;
    for (auto p : in_group_at_sweep_) {
      if (listed.count(p.pid)) continue;
      int64_t pgid = cordon::current_pgid(p.pid, p.start_time);
      if (pgid < 0 || pgid == group_) continue;
      // (Read again while it reads empty: a daemon exec'ing just after its setsid.)
      if (!known_.lineage().parent_known(p) && !marker_.carried_by_process(p.pid, p.start_time, env)) continue;
      p.pgid = pgid;
      known_.remember(p);
      p.from_snapshot = true;
      p.holds_output = cordon::holds_output(p.pid, p.start_time, host_.watched());
      trace("sweep: %lld left the group after the sweep", static_cast<long long>(p.pid));
      list.push_back(p);
    }
  }

  // The processes the last sweep read an empty environment from: in the
  // middle of an exec (between the new image and its environment: a setsid'd
  // daemon exec'ing at the root's exit), or started with none. Read again, a
  // few times over 30 ms, where one report must be complete (the leftovers
  // at the root's exit); a process that really has none costs that once.
  std::vector<Member> sweep_mid_exec() {
    std::vector<Member> fresh;
    std::string env;
    for (int round = 0; round < 3 && !readings_.mid_exec.empty(); ++round) {
      usleep(10000);
      std::vector<Member> again;
      for (auto& p : readings_.mid_exec) {
        int rc = cordon::read_environment(p.pid, p.start_time, env);
        if (rc == -EACCES) readings_.withheld_now(p);  // (its exec ended in a withheld one)
        if (rc != 0) continue;
        if (env.empty()) {
          again.push_back(p);
        } else if (marker_.carried_by(env)) {
          // (Its group now: it may have left the tree's since the sweep read it.)
          int64_t pgid = cordon::current_pgid(p.pid, p.start_time);
          if (pgid >= 0) p.pgid = pgid;
          known_.remember(p);
          fresh.push_back(p);
          fresh.back().from_snapshot = true;
        } else {
          readings_.unmarked_now(p);
        }
      }
      readings_.mid_exec.swap(again);
    }
    if (!fresh.empty()) trace("sweep: %zu marked member(s) found after their exec", fresh.size());
    return fresh;
  }

  // The walk before the group signal: it must see the members outside the
  // group that are still parented (after the signal their parents die and
  // they are orphaned, out of sight). Linux: the anchor's descendants by
  // their children lists, and signalled_before_ set to now in the start
  // times' unit (clock ticks since boot), so that an in-group orphan the
  // grace's walks find later, started before the signal, counts as having
  // had it. Elsewhere (or without children lists): every process.
  std::vector<Member> pre_signal_walk() {
#if CORDON_LINUX_PROC
    std::vector<Member> out;
    static const std::vector<FileId> kNone;
    if (cordon::list_descendants(getpid(), kNone, out, false) >= 0) {
      struct timespec now;
      long hz = sysconf(_SC_CLK_TCK);
      if (hz > 0 && clock_gettime(CLOCK_BOOTTIME, &now) == 0) {
        signalled_before_ = static_cast<uint64_t>(now.tv_sec) * static_cast<uint64_t>(hz) +
                            static_cast<uint64_t>(now.tv_nsec) / (1000000000ull / static_cast<uint64_t>(hz));
        for (auto& m : out) known_.remember(m);
        return out;
      }
    }
#endif
    return members();
  }

  int64_t group_ = 0;      // the tree's group (the pin's pid)
  int64_t own_group_ = 0;
  int64_t session_ = 0;  // the tree's session (the anchor's, when it could setsid()), or 0  // the anchor's own group, which the pin moves to
  pid_t pin_ = -1;         // pins group_'s id until QUIET
  int life_ = -1;          // the write end of the pin's life line (contain())
  pid_t root_ = -1;
  int go_[2] = {-1, -1};
  int child_go_[2] = {-1, -1};  // the child's copy: see child_enter()
  bool group_termed_ = false;
  int64_t group_signal_at_ = 0;  // when group_termed_ was set
  bool group_killed_ = false;  // the group has had a SIGKILL
  ExitWatch exits_;  // set by group_quiescent(), which quiescent() calls first each round
  // In-group members known to have had the polite signal (the group's, or
  // their own if forked after it). Apart from the anchor's record of
  // signalled members, which is for members outside the group: one that
  // leaves the group between the walk and the group signal must still get
  // its own.
  std::set<std::pair<int64_t, uint64_t>> group_signalled_;
  // Processes of the group when the last sweep read the process list.
  std::vector<Member> in_group_at_sweep_;
  // Linux, with a descendants-only walk before the group signal: members of
  // the group started before this (clock ticks since boot) had its signal.
  uint64_t signalled_before_ = 0;
  KnownMembers known_{host_, group_};  // members seen, by identity (known_members.h)
  int snapshot_every_ = kGroupSnapshotMs;  // the snapshot interval
  int64_t started_at_ = now_ms();  // (the root's start: after_fork)
  int64_t last_snapshot_ = 0;       // (after_fork: the first is kFirstSnapshotMs after the root's start)
  int64_t last_term_walk_ = 0;
  TreeMarker marker_;              // this tree's token (tree_marker.h)
  MarkerReadings readings_{marker_};  // what the sweeps read of each process (tree_marker.h)
  std::string marker_entry_;  // CORDON_TREE=..., what the command gets
  uint64_t since_ = 0;        // the anchor's start: members started after it
  int64_t last_sweep_ = 0;
  bool swept_terminating_ = false;
  bool swept_forcing_ = false;
  bool swept_empty_ = false;  // the root-exit sweep found nothing, and nothing was left
  bool swept_settled_ = false;  // the last sweep's walk settled (cordon.h, visit_sweepable_processes)
  bool frozen_ = false;  // a forced round's freeze_outside ended with a walk that found nothing new
  bool found_outside_ = false;  // a sweep has found a member outside the group
};

}  // namespace

std::unique_ptr<Tier> make_process_group_tier(TierHost& host) { return std::make_unique<ProcessGroupTier>(host); }

}  // namespace anchor
}  // namespace cordon
