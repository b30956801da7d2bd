// The process-group tier's record of the members it knows by identity
// (native/posix/tier_process_group.cc): besides the tree's process group,
// which the kernel keeps, every member a snapshot or a sweep has seen is kept
// by its (pid, start) and checked by it from then on, so one that left the
// group (setsid, setpgid, a daemon) is still signalled, and a recycled pid
// never is. The host hears of each one seen outside the group once
// (LEFTGROUP). macOS: their ids go to the lineage (tree_marker.h).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "../cordon.h"
#include "tier.h"
#include "tree_marker.h"

namespace cordon {
namespace anchor {

class KnownMembers {
 public:
  // `group`: the tree's process group as the tier has it (0 while there is
  // none): a member seen in another is reported as having left it.
  KnownMembers(TierHost& host, const int64_t& group) : host_(host), group_(group) {}

  // A member seen (by a snapshot or a sweep), checked by identity from now on.
  void remember(const Member& m);
  // Whether `p` is a member remembered, the same process.
  bool knows(const Member& p) const {
    auto known = members_.find(p.pid);
    return known != members_.end() && known->second.start_time == p.start_time;
  }
  // Whether a member remembered has this pid (whatever its start: for a
  // process gone when read, whose start can no longer be read).
  bool knows_pid(int64_t pid) const { return members_.count(pid) != 0; }
  // The members remembered that are still that same live process (a stat
  // read each, no walk), each marked from_snapshot; those gone are forgotten.
  std::vector<Member> alive();

  Lineage& lineage() { return lineage_; }

 private:
  // A member remembered while it was in the group may leave it later, once
  // orphaned and out of every walk's sight (a daemon a snapshot saw between
  // its fork and its setsid): its current group, read by identity, is checked
  // each time it is looked at, so the host hears of it as of any member seen
  // outside.
  void note_if_left(Member& m);

  TierHost& host_;
  const int64_t& group_;
  std::map<int64_t, Member> members_;
  std::set<std::pair<int64_t, uint64_t>> reported_outside_;
  Lineage lineage_;  // macOS: the ids of the anchor and the members seen
};

}  // namespace anchor
}  // namespace cordon
