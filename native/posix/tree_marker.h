// The process-group tier's marker (native/posix/tier_process_group.cc): every
// member carries the tree's token in its environment, as one element of
// CORDON_TREE (a ':'-separated list: a tree started inside another tree keeps
// the outer tree's token too), so the anchor's sweep finds the members that
// left the tree's process group.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../cordon.h"

namespace cordon {
namespace anchor {

// The environment variable that carries the tokens.
constexpr const char* kMarkerName = "CORDON_TREE";

class TreeMarker {
 public:
  // Makes the token: <anchor pid>.<anchor start>.<128 random bits>. The pid
  // and start name the tree in a report; the bits are what a process outside
  // it cannot guess. Sets `start` to the anchor's start time. False (errno
  // set) without a random source.
  bool make(uint64_t& start);

  // Whether an environment block ("NAME=value" strings, each NUL-ended)
  // carries this token as one element of a CORDON_TREE (any of them, should
  // there be several).
  bool carried_by(const std::string& env) const;

  // Whether the process `pid` (started at `start_time`) carries the token, its
  // environment read now into `env`. One that reads empty while it is neither
  // gone nor exiting is in the middle of an exec (between its new image and
  // its environment: about 50 us on an idle machine, longer where it is
  // preempted there) or was started with none: read again, 3 times 10 ms
  // apart, as MarkerReadings' callers do after a walk. For a process already
  // seen in the tree (a kernel thread, whose environment always reads empty,
  // would cost the 30 ms at every call).
  bool carried_by_process(int64_t pid, uint64_t start_time, std::string& env) const;

  // CORDON_TREE=<outer tokens:>token, what the command gets (`outer`: the
  // anchor's own CORDON_TREE, if it runs inside another tree).
  std::string entry(const char* outer) const;

  const std::string& token() const { return token_; }
  // Takes a token made elsewhere (the host's sweep of a tree whose anchor
  // died: the anchor sent it, MARKER).
  void take(const std::string& token) { token_ = token; }

 private:
  std::string token_;
};

// What the sweeps have read of processes' environments, by (pid, start).
// Whether a process carries the token is read once per process (one that
// did not carry it when it was read is no member: a member's child has it
// from its fork on, until it execs without it), so a sweep reads only what
// started since the last one, not every process again (many trees of one
// user). An empty environment (in the middle of an exec, or started with
// none) is kept in `mid_exec` to be read again. One the kernel withholds
// (-EACCES: on macOS every cs_restricted program's, root or not) is
// unreadable, not mid-exec: it is no member the tier can claim, and it is not
// read again while it runs the same program (the listing's name; an exec may
// make it readable).
class MarkerReadings {
 public:
  using Key = std::pair<int64_t, uint64_t>;

  explicit MarkerReadings(const TreeMarker& marker) : marker_(marker) {}

  // One walk over the processes: what it saw unmarked or withheld, and how
  // many withheld ones it read for the first time.
  struct Walk {
    std::set<Key> unmarked;
    std::map<Key, std::string> withheld;
    size_t withheld_new = 0;
    std::string env;  // (the reading buffer)
    // The last marked() could not read the process's environment (or read
    // it empty) and found it no longer the same live process, or in exit: it
    // went while it was read (Visit::kGone: a walk that saw that proves
    // nothing of its children).
    bool went = false;
  };

  // Whether `p` (not in the group, not known) carries the token.
  bool marked(const Member& p, Walk& walk);
  // After marked(): `p`'s environment was read whole without the token, and
  // no parent id of it is left to decide (Visit::kNotMember).
  static bool no_member(const Member& p, const Walk& walk) {
    return p.parent_unique_id == 0 && walk.unmarked.count({p.pid, p.start_time}) != 0;
  }
  // Whether a process on `pid` was read by `walk` or the walks before it
  // (what is kept of them) and judged: its environment read whole without
  // the token, or withheld by the kernel. By pid alone: for one gone when
  // read (visit_sweepable_processes' `gone_matters`), whose start time can no
  // longer be read. Not a verdict of membership by itself: the caller also
  // asks whether such a process was claimed since (its lineage).
  bool judged(int64_t pid, const Walk& walk) const;
  // After a sweep: what it saw is what is known (forgets the processes that are gone).
  void forget_gone(Walk& walk);
  // After a walk that may have stopped early (the forced stop's): added to what is known.
  void keep(const Walk& walk);
  // A process read again (an exec ended): withheld, or without the token.
  void withheld_now(const Member& p) { withheld_[{p.pid, p.start_time}] = p.name; }
  void unmarked_now(const Member& p) { unmarked_.insert({p.pid, p.start_time}); }
  size_t withheld() const { return withheld_.size(); }

  // Processes the last walk read an empty environment from.
  std::vector<Member> mid_exec;

 private:
  const TreeMarker& marker_;
  std::set<Key> unmarked_;
  // With the name of the program they ran when read.
  std::map<Key, std::string> withheld_;
};

// The ids of the anchor and of every member seen (macOS; 0 elsewhere, where
// this knows nothing): a process forked by one of them is a member, wherever
// it went since (setsid, reparented to launchd) and whatever the kernel lets
// the anchor read of its environment (Apple's SIP-protected programs and
// setuid ones withhold it). Two ids name the parent that forked a process:
//   - its parent's unique id (Member::parent_unique_id, p_puniqueid), which
//     since macOS 13 holds only until the process execs: every exec sets it
//     to the parent's at that moment, launchd's for an orphan;
//   - its parent's pid version (Member::parent_id_version,
//     p_orig_ppidversion), kept across exec and reparenting, since macOS 15.4.
// Only ids of processes known to be members go in, never a member's
// parent's: a process that carries the marker may have been started by
// anything. The anchor's own ids are kept for the tree's life; of the
// members', the most recent kMaxIds (a tree that forks for days keeps a
// bounded record; a child of an older member is left to the marker and the
// snapshots).
class Lineage {
 public:
  static constexpr size_t kMaxIds = 65536;
  void seed(const LineageIds& ids);
  void add(const LineageIds& ids);
  void add(const Member& m) {
    LineageIds ids;
    ids.unique_id = m.unique_id;
    ids.id_version = m.id_version;
    add(ids);
  }
  bool parent_known(const Member& p) const {
    return (p.parent_unique_id != 0 && (seeds_.count(p.parent_unique_id) != 0 || ids_.count(p.parent_unique_id) != 0)) ||
           (p.parent_id_version != 0 &&
            (seed_versions_.count(p.parent_id_version) != 0 || versions_.count(p.parent_id_version) != 0));
  }
  // A walk that goes newest first reads a child before its parent: each of
  // `unclaimed` whose parent is known by now (and still alive) goes to
  // `claim`, which remembers it (add), and so on while any is claimed.
  void settle(std::vector<Member>& unclaimed, const std::function<void(const Member&)>& claim);

 private:
  std::set<uint64_t> seeds_;
  std::set<int32_t> seed_versions_;
  std::set<uint64_t> ids_;
  std::set<int32_t> versions_;
  std::deque<LineageIds> order_;  // ids_ and versions_, oldest first
};

}  // namespace anchor
}  // namespace cordon
