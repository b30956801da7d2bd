// The host's sweep of a tree whose anchor died: see lost_tree.h.
#include "lost_tree.h"

#include <errno.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "../posix/tree_marker.h"
#include "internal.h"

namespace cordon {

namespace {

int64_t monotonic_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace

int sweep_lost_tree(const std::string& token, int64_t session, uint64_t since, int max_rounds, int64_t budget_ms,
                    LostSweep& out) {
  if (token.empty() && session <= 0) return 0;
  int probe = internal::sys_pidfd_open(getpid());
  if (probe < 0) return -ENOSYS;
  close(probe);
  anchor::TreeMarker marker;
  marker.take(token);
  const int64_t started = monotonic_ms();
  const int64_t deadline = started + budget_ms;
  using Key = std::pair<int64_t, uint64_t>;
  std::set<Key> killed;
  std::map<Key, int> refused;
  std::string env;
  // The tree's, by this process's record now: in the session, or marked.
  auto ours = [&](int64_t pid, uint64_t start) {
    if (session > 0 && cordon::session_of(pid, start) == session) return true;
    return !token.empty() && cordon::read_environment(pid, start, env) == 0 && marker.carried_by(env);
  };
  for (bool fresh = true; fresh && out.rounds < max_rounds && monotonic_ms() < deadline;) {
    fresh = false;
    out.rounds++;
    int rc = cordon::visit_sweepable_processes(since, [&](const Member& p) {
      if (p.state == 'Z' || p.state == 'X') return Visit::kNext;
      bool in_session = session > 0 && p.sid == session;
      if (!in_session && !ours(p.pid, p.start_time)) return Visit::kNext;
      if (!cordon::is_thread_group_leader(p.pid)) return Visit::kNext;
      Key key{p.pid, p.start_time};
      // Checked again with the pidfd held: the process it pins is this one.
      int sent = cordon::signal_if(p.pid, SIGKILL, [&]() { return ours(p.pid, p.start_time); });
      if (sent == 0) {
        if (killed.insert(key).second) fresh = true;
        refused.erase(key);
      } else if (sent != -ESRCH) {
        refused[key] = sent;
      }
      return monotonic_ms() < deadline ? Visit::kNext : Visit::kStop;
    });
    if (rc < 0) return rc;
  }
  // What was killed is gone once the kernel has run its exit: waited for
  // (bounded, within the budget, at least 200 ms); one still alive then is
  // not reached (uninterruptible sleep).
  const int64_t wait_until = std::max(deadline, monotonic_ms() + 200);
  std::set<Key> left = killed;
  while (!left.empty() && monotonic_ms() < wait_until) {
    for (auto it = left.begin(); it != left.end();) {
      if (cordon::same_process_alive(it->first, it->second)) ++it;
      else it = left.erase(it);
    }
    if (!left.empty()) {
      timespec ts{0, 5 * 1000 * 1000};
      nanosleep(&ts, nullptr);
    }
  }
  for (auto& k : killed) out.killed.push_back(k.first);
  for (auto& k : left) out.unreached.push_back(k.first);
  for (auto& r : refused) out.unreached.push_back(r.first.first);
  out.elapsed_ms = monotonic_ms() - started;
  return 0;
}

}  // namespace cordon
