// The host's sweep of a tree whose anchor died before the tree was quiescent
// (lib/anchor/lost.ts): what the host can still tell is the tree's, killed
// through pidfds. Linux; the addon only (the anchor never calls it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cordon {

struct LostSweep {
  // Members killed (SIGKILL through a pidfd), each once.
  std::vector<int64_t> killed;
  // Members found that could not be killed (the signal refused), or still
  // alive, not a zombie, when the sweep ended (in uninterruptible sleep).
  std::vector<int64_t> unreached;
  int rounds = 0;
  int64_t elapsed_ms = 0;
};

// Kills every live process of the caller's user (every user's as root)
// started at or after `since` (clock ticks since boot; the anchor's start)
// that carries `token` in its CORDON_TREE environment entry (token not empty;
// tree_marker.h) or whose session is `session` (not 0: the session the
// anchor led, whose id the dead anchor, an unreaped zombie of the caller,
// still pins: nobody else can create it). Each match is pinned with a
// pidfd, checked again through it (same start time, still marked or in the
// session), then sent SIGKILL: a recycled pid is never signalled. Walks
// again while a walk finds a match it had not killed (a member forking
// meanwhile), at most `max_rounds` walks and about `budget_ms` in all.
// 0, or a negative errno: -ENOSYS without pidfds (then nothing is signalled).
int sweep_lost_tree(const std::string& token, int64_t session, uint64_t since, int max_rounds, int64_t budget_ms,
                    LostSweep& out);

}  // namespace cordon
