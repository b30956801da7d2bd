// The POSIX anchor's containment tiers, as strategies behind one interface.
//
// The anchor (anchor.cc) owns what every tier shares: the control channel,
// the reaping loop, the termination schedule, the watched output. A tier owns
// the means: how containment is made before the command exists (C1), its
// steps around the fork, who the members are, how they are terminated and
// when none is left, and what to release at the end. Each tier is one file:
//   tier_subreaper.cc      the subreaper tier: every orphan is reparented to the anchor
//   tier_cgroup.cc         the cgroup tier: the subreaper tier wrapped with a cgroup of
//                          the tree's own (Linux)
//   tier_process_group.cc  the process-group tier (the macOS strategy): a process group
//                          of the tree's own, pinned by a child of the anchor
// and one row of the table in tier.cc, which also says what --best-effort and
// --fallback may fall back to. Adding a tier: one strategy file, one row
// (and the file in the POSIX anchor's sources: binding.gyp and CMakeLists.txt
// list them once each).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../cordon.h"
#include "../protocol.h"
#include "cgroup_limits.h"

namespace cordon {
namespace anchor {

// Milliseconds on the monotonic clock.
int64_t now_ms();

// The freezes of the forced stop (the process-group and subreaper tiers):
// waits until every member of `stopped`, each just sent SIGSTOP, holds still
// (cordon::stillness), so that the walk after it lists every child they
// forked: one that was inside a fork when its SIGSTOP came still completes
// the fork, and a walk made while it did missed the child, which, not stopped,
// then outlived its parent's SIGKILL (an orphan out of the process-group
// tier's sight; seen in CI on a loaded machine). One blocked in the kernel
// (a vfork parent whose child is stopped holds still for as long as that
// child does) is waited for kBlockedStillMs at most. Bounded by `until`.
// Returns false when `until` came first.
bool await_still(const std::vector<Member>& stopped, int64_t until);

// What a tier may use of its anchor.
// How the anchor starts its command's child: main(arg) in the child (it
// execs the command or _exits); `shared` receives the stack of a child that
// shares the anchor's memory (Linux).
struct ChildStart {
  void (*main)(void*);
  void* arg;
  SharedChild* shared;
};

class TierHost {
 public:
  virtual ~TierHost() = default;
  virtual void send(const std::string& line) = 0;
  // pidfd_open and pidfd_send_signal are there (the probe's answer).
  virtual bool pidfd() const = 0;
  virtual const protocol::Termination& termination() const = 0;
  // One verified member: the forced kill once forcing, else the polite
  // signal (and SIGCONT) once per process.
  virtual void signal_one(const Member& m) = 0;
  // signal_one, through `pin`: a pidfd that pinned `m` before its record was
  // read (cordon::PinnedMembers), so nothing is read again; -1: signal_one.
  virtual void signal_pinned(const Member& m, int pin) = 0;
  // The polite signal: SIGTERM, or the host's --polite-signal (killSignal).
  virtual int polite_signal() const = 0;
  // STUCK, with the members still there (once: the schedule says when).
  virtual void report_stuck(const std::vector<Member>& left) = 0;
  // The captured output's pipes, whose holders list_tree marks.
  virtual const std::vector<FileId>& watched() const = 0;
  // The resource limits asked for (--memory, --max-processes, --cpu-quota).
  virtual const LimitSpec& limits() const = 0;
};

class Tier {
 public:
  explicit Tier(TierHost& host) : host_(host) {}
  virtual ~Tier() = default;
  Tier(const Tier&) = delete;
  Tier& operator=(const Tier&) = delete;

  // The tier's name as READY and --tier carry it.
  virtual const char* name() const = 0;

  // ---- containment (C1: it exists before the command's first instruction)

  // 0, or a negative errno with `what` naming the tier whose means failed
  // (NOCONTAIN <errno> <what> if no fallback is left).
  virtual int contain(const char*& what) = 0;
  // Whether a tier is left to fall back to (--best-effort, --fallback): a
  // tier may then fall back by itself later (the cgroup tier, at the fork).
  virtual void allow_fallback(bool allowed) { (void)allowed; }
  // Whether a warm anchor contains (contain()) before its LAUNCH, while it
  // waits in its host's process group: not where that makes something a
  // kill of that group would leave behind (the cgroup tier's cgroup).
  virtual bool contains_while_waiting() const { return true; }
  // A warm anchor waiting for its LAUNCH (contained where
  // contains_while_waiting()): work done ahead of the tree that its launch or
  // its walks would do later (the process-group tier's older processes, the
  // cgroup tier's place for its cgroup); `stop` says a LAUNCH (or anything
  // else) is waiting, and the rest is left.
  virtual void while_waiting(const std::function<bool()>& stop) { (void)stop; }
  // The tree's process group (GROUP, and what list_tree and signal_member
  // take), or 0.
  virtual int64_t group() const { return 0; }
  // The tree's marker token (CORDON_TREE), or empty where the tier gives the
  // command none; and the session the anchor leads for the tree, or 0. Both
  // go to the host (MARKER), which sweeps the tree by them if the anchor dies.
  virtual std::string marker() const { return std::string(); }
  virtual int64_t session() const { return 0; }
  // Whether the anchor leads the session the command runs in (--pty: then
  // the anchor takes the terminal, and the command does not setsid()).
  virtual bool anchor_leads_session() const { return false; }
  // The tree's cgroup (READY names it), or empty.
  virtual std::string cgroup_dir() const { return std::string(); }
  // The LIMITS line (and LIMITDIR lines) for the limits in force, once the
  // command runs; empty where the tier sets none (the anchor then reports
  // that none is, if any was asked for).
  virtual std::string limits_report() const { return std::string(); }
  // The USAGE line: what the tree used so far; empty where the tier measures nothing.
  virtual std::string usage_report() const { return std::string(); }

  // ---- starting the command: the anchor forks, the tier adds its steps

  // Before the fork: 0 or a negative errno (EXECFAIL; the tier has undone its part).
  virtual int before_fork() { return 0; }
  // Starts the child, which runs start.main(start.arg) and never returns
  // here: the child's pid, or a negative errno. A failure the tier reports as
  // NOCONTAIN sets `what`. fork() here; on Linux every tier starts a child
  // that shares the anchor's memory until it execs
  // (clone_shared: its stack goes in *start.shared, for the caller to unmap).
  virtual int64_t fork(const char*& what, const ChildStart& start);
  // In the child, first thing: 0, or an errno the anchor reports as
  // NOCONTAIN <errno> <tier> (nothing of the command runs). May _exit(127)
  // when the anchor is gone.
  virtual int child_enter() { return 0; }
  // In the child, right before exec (its stdio set up, every other fd but
  // the status pipe closed). May _exit(127) when the anchor is gone.
  virtual void child_before_exec() {}
  // In the anchor, once the child exists: 0, or a negative errno with `what`
  // (NOCONTAIN; the tier has killed and reaped the child).
  virtual int after_fork(pid_t child, const char*& what) {
    (void)child;
    (void)what;
    return 0;
  }
  // The command did not start (fork or exec failed): undo what the steps made.
  virtual void abandon_launch() {}

  // ---- members, reaping, termination

  // Whether every descendant is reparented to the anchor (and so is its
  // child to reap).
  virtual bool reaps_all() const { return false; }
  // Whether the anchor may reap only the root (its other children must stay
  // unreaped until QUIET).
  virtual bool reaps_root_only() const { return false; }
  // Current members (list_tree, plus whatever the tier knows beyond it).
  virtual std::vector<Member> members(bool commands = false, bool holds = false);
  // The members reported LEFT when the root has exited.
  virtual std::vector<Member> leftovers() { return members(true, true); }
  // With the anchor's children all reaped (`no_children`): whether no member
  // is left.
  virtual bool quiescent() { return members().empty(); }
  // One round of termination (the schedule: termination(); forcing or not).
  // Called on every loop turn while terminating (SIGCHLD wakes it too).
  virtual void step_terminate(int64_t now) = 0;
  // How long the loop may sleep while terminating before the next round:
  // by default at most 100 ms (10 ms while forcing), and never past the
  // grace's deadline.
  virtual int terminate_wait_ms(int64_t now) const { return host_.termination().wait_ms(now, 10, 100); }

  // ---- the event loop, while not terminating

  // How long the loop may sleep while the captured output is still held
  // after the root exited.
  virtual int held_output_wait_ms(int64_t since_root_exit) const {
    (void)since_root_exit;
    return 50;
  }
  // How long the loop may sleep otherwise (-1: until an event).
  virtual int idle_wait_ms(bool root_exited) const { return root_exited ? 1000 : -1; }
  // Called on every loop turn while not terminating.
  virtual void idle_tick(int64_t now) { (void)now; }

  // ---- events the tier watches (the cgroup tier: its cgroup.events)

  // A descriptor the loop polls for POLLPRI, or -1.
  virtual int event_fd() const { return -1; }
  // It fired: read it (which re-arms it).
  virtual void handle_event() {}
  // Descriptors that only wake the loop when readable (POLLIN): members'
  // exits the tier waits on (ExitWatch). Set anew by each quiescent() call.
  virtual const std::vector<int>& wake_fds() const {
    static const std::vector<int> kNone;
    return kNone;
  }

  // The tree is quiescent (or the command never started): let go of what the
  // tier holds (its cgroup, its pin). Idempotent.
  virtual void release() {}

 protected:
  TierHost& host_;
};

// A tier that adds to another (process-wrap's wrappers): everything it does
// not override is the inner tier's.
class TierWrapper : public Tier {
 public:
  TierWrapper(TierHost& host, std::unique_ptr<Tier> inner) : Tier(host), inner_(std::move(inner)) {}

  const char* name() const override { return inner_->name(); }
  int contain(const char*& what) override { return inner_->contain(what); }
  void allow_fallback(bool allowed) override { inner_->allow_fallback(allowed); }
  int64_t group() const override { return inner_->group(); }
  std::string marker() const override { return inner_->marker(); }
  int64_t session() const override { return inner_->session(); }
  bool anchor_leads_session() const override { return inner_->anchor_leads_session(); }
  std::string cgroup_dir() const override { return inner_->cgroup_dir(); }
  std::string limits_report() const override { return inner_->limits_report(); }
  std::string usage_report() const override { return inner_->usage_report(); }
  int before_fork() override { return inner_->before_fork(); }
  int64_t fork(const char*& what, const ChildStart& start) override { return inner_->fork(what, start); }
  int child_enter() override { return inner_->child_enter(); }
  void child_before_exec() override { inner_->child_before_exec(); }
  int after_fork(pid_t child, const char*& what) override { return inner_->after_fork(child, what); }
  void abandon_launch() override { inner_->abandon_launch(); }
  bool reaps_all() const override { return inner_->reaps_all(); }
  bool reaps_root_only() const override { return inner_->reaps_root_only(); }
  std::vector<Member> members(bool commands, bool holds) override { return inner_->members(commands, holds); }
  std::vector<Member> leftovers() override { return inner_->leftovers(); }
  bool quiescent() override { return inner_->quiescent(); }
  void step_terminate(int64_t now) override { inner_->step_terminate(now); }
  int terminate_wait_ms(int64_t now) const override { return inner_->terminate_wait_ms(now); }
  int held_output_wait_ms(int64_t since_root_exit) const override {
    return inner_->held_output_wait_ms(since_root_exit);
  }
  int idle_wait_ms(bool root_exited) const override { return inner_->idle_wait_ms(root_exited); }
  void idle_tick(int64_t now) override { inner_->idle_tick(now); }
  int event_fd() const override { return inner_->event_fd(); }
  void handle_event() override { inner_->handle_event(); }
  const std::vector<int>& wake_fds() const override { return inner_->wake_fds(); }
  void release() override { inner_->release(); }

 protected:
  std::unique_ptr<Tier> inner_;
};

// The tiers --tier names, the first named `name`, then the ones it falls
// back to: under --best-effort as far as the table allows, under --fallback
// only where the table says so. Empty if `name` is no tier.
std::vector<std::unique_ptr<Tier>> make_tiers(const std::string& name, bool best_effort, bool fallback,
                                              TierHost& host);
// Whether `name` is a tier (a row of the table).
bool is_tier(const std::string& name);
// "cgroup|subreaper|process-group", for the usage text.
std::string tier_names();

}  // namespace anchor
}  // namespace cordon
