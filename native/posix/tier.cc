// The POSIX anchor's tiers (tier.h): the table of tiers and what they share.
#include "tier.h"

#include <errno.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

namespace cordon {
namespace anchor {

// Each in its own file.
std::unique_ptr<Tier> make_subreaper_tier(TierHost& host, bool marked);
std::unique_ptr<Tier> make_cgroup_tier(TierHost& host, std::unique_ptr<Tier> subreaper);
std::unique_ptr<Tier> make_process_group_tier(TierHost& host);

namespace {

struct TierRow {
  const char* name;
  std::unique_ptr<Tier> (*make)(TierHost& host);
  // The tier this one falls back to under --best-effort (nullptr: none) ...
  const char* falls_back_to;
  // ... and whether --fallback (the host's default tier, not asked for)
  // takes that step too.
  bool on_fallback;
};

// The cgroup tier is the subreaper tier plus a cgroup of the tree's own.
const TierRow kTiers[] = {
    {"cgroup", [](TierHost& h) { return make_cgroup_tier(h, make_subreaper_tier(h, false)); }, "subreaper", true},
    {"subreaper", [](TierHost& h) { return make_subreaper_tier(h, true); }, "process-group", false},
    {"process-group", make_process_group_tier, nullptr, false},
};

const TierRow* find(const std::string& name) {
  for (auto& row : kTiers) {
    if (name == row.name) return &row;
  }
  return nullptr;
}

}  // namespace

int64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

namespace {
// How long a member blocked in the kernel is waited for (await_still).
constexpr int64_t kBlockedStillMs = 20;
}  // namespace

bool await_still(const std::vector<Member>& stopped, int64_t until) {
  std::vector<const Member*> waiting;
  for (auto& m : stopped) waiting.push_back(&m);
  int64_t since = now_ms();
  useconds_t pause = 50;
  for (int polls = 1;; polls++) {
    bool running = false;
    size_t kept = 0;
    for (const Member* m : waiting) {
      Stillness s = stillness(m->pid, m->start_time);
      if (s == Stillness::kStill) continue;
      running = running || s == Stillness::kRunning;
      waiting[kept++] = m;
    }
    waiting.resize(kept);
    int64_t now = now_ms();
    bool still = waiting.empty() || (!running && now - since >= kBlockedStillMs);
    if (still || now >= until) {
      // (the common case, every one stopped at the first look, says nothing)
      if (polls > 1 || !still) {
        protocol::trace("freeze: %zu stopped, %s after %d look(s), %lld ms (%zu not still: %s)", stopped.size(),
                        still ? "held still" : "out of time", polls, static_cast<long long>(now - since), waiting.size(),
                        running ? "running" : waiting.empty() ? "none" : "blocked");
      }
      return still;
    }
    usleep(pause);
    pause = pause < 1000 ? pause * 2 : 1000;
  }
}

int64_t Tier::fork(const char*& what, const ChildStart& start) {
  (void)what;
  pid_t pid = ::fork();
  if (pid == 0) start.main(start.arg);
  return pid < 0 ? -errno : pid;
}

// Descendants of the anchor (and, with a group, its members). A full /proc
// (libproc) walk.
std::vector<Member> Tier::members(bool commands, bool holds) {
  std::vector<Member> out;
  static const std::vector<FileId> kNone;
  cordon::list_tree(getpid(), group(), holds ? host_.watched() : kNone, out, commands);
  return out;
}

std::vector<std::unique_ptr<Tier>> make_tiers(const std::string& name, bool best_effort, bool fallback,
                                              TierHost& host) {
  std::vector<std::unique_ptr<Tier>> out;
  for (const TierRow* row = find(name); row;) {
    out.push_back(row->make(host));
    if (!row->falls_back_to || !(best_effort || (fallback && row->on_fallback))) break;
    row = find(row->falls_back_to);
  }
  return out;
}

bool is_tier(const std::string& name) { return find(name) != nullptr; }

std::string tier_names() {
  std::string out;
  for (auto& row : kTiers) out += (out.empty() ? "" : "|") + std::string(row.name);
  return out;
}

}  // namespace anchor
}  // namespace cordon
