// Members whose exit wakes the anchor's loop (cordon::watch_exit: a pidfd on
// Linux, a kqueue on macOS), where nothing else would: a member that is not
// the anchor's child sends it no SIGCHLD. Each is watched first and its
// identity checked after, so a recycled pid is never watched. A wait that only paces re-walks
// (Tier::terminate_wait_ms) ends as soon as one of them is gone.
#pragma once

#include "../cordon.h"

#include <unistd.h>

#include <vector>

namespace cordon {
namespace anchor {

class ExitWatch {
 public:
  // At most this many members are watched: a wake re-walks anyway.
  static constexpr size_t kMax = 16;

  ExitWatch() = default;
  ExitWatch(const ExitWatch&) = delete;
  ExitWatch& operator=(const ExitWatch&) = delete;
  ~ExitWatch() { clear(); }

  // Watches `members` (the first kMax that can be), instead of what was.
  void set(const std::vector<Member>& members) {
    clear();
    for (const Member& m : members) {
      if (fds_.size() >= kMax) break;
      int fd = cordon::watch_exit(m.pid);
      if (fd < 0) continue;
      if (cordon::same_process_alive(m.pid, m.start_time)) fds_.push_back(fd);
      else close(fd);
    }
  }

  void clear() {
    for (int fd : fds_) close(fd);
    fds_.clear();
  }

  // For the loop's poll (POLLIN).
  const std::vector<int>& fds() const { return fds_; }

 private:
  std::vector<int> fds_;
};

}  // namespace anchor
}  // namespace cordon
