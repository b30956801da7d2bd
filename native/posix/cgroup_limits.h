// Resource limits on a cgroup tier's tree (Linux): memory, processes and CPU,
// enforced by the kernel's cgroup controllers, and what the tree used.
//
// Per controller, where the kernel lets the anchor use it:
// - cgroup v2: in the tree's own cgroup, when the controller is enabled in
//   the anchor's cgroup's cgroup.subtree_control (delegated to it). The
//   command is born there (clone3), so the limits hold before it runs. The
//   anchor never enables a controller itself: the v2 "no internal processes"
//   rule needs the host moved out of its own cgroup first, which happens only
//   when the host asks for it (prepareCgroupLimits, lib/cgroup-leaf.ts; the
//   tree's cgroup is then made beside the host's leaf: cgroup_create).
// - cgroup v1 (hybrid hosts): a cgroup of the tree's own in that controller's
//   hierarchy, below the anchor's own cgroup there (so the tree stays under
//   every limit its host is under). The command's child joins it between
//   fork and exec (join_in_child): the limits hold before its first
//   instruction. The anchor itself never joins: it is not counted in
//   pids.max and cannot be chosen by the memory limit's OOM killer, so it
//   can always end and reap the tree.
// The tree's v1 cgroups are removed when it is quiescent (remove()).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cordon {
namespace anchor {

struct LimitSpec {
  int64_t memory = 0;        // bytes (0: none)
  int64_t processes = 0;     // pids.max (0: none)
  int64_t cpu_quota_us = 0;  // per kCpuPeriodUs (0: none)
  bool any() const { return memory > 0 || processes > 0 || cpu_quota_us > 0; }
};

// cpu.max's / cpu.cfs_period_us's period: the kernel's default, 100 ms.
constexpr int64_t kCpuPeriodUs = 100000;

// What the tree used; -1 where it is not measured.
struct Usage {
  int64_t cpu_us = -1;          // CPU time of every member, user and system
  int64_t memory_peak = -1;     // the highest memory charge, in bytes
  int64_t processes_peak = -1;  // the most tasks at once
  int64_t oom_kills = -1;       // processes the memory limit's OOM killer ended
  int64_t pids_max_hits = -1;   // forks refused at pids.max
};

class CgroupLimits {
 public:
  CgroupLimits() = default;
  ~CgroupLimits();
  CgroupLimits(const CgroupLimits&) = delete;
  CgroupLimits& operator=(const CgroupLimits&) = delete;

  // Sets `spec` on the tree whose v2 cgroup is `tree_dir` (named `name`): 0,
  // or a negative errno (nothing is left behind then).
  int apply(const LimitSpec& spec, const std::string& tree_dir, const std::string& name);
  // In the command's child, before exec: joins the v1 cgroups. 0 or an errno.
  int join_in_child();
  // What the tree used so far (`tree_dir`: its v2 cgroup, for the CPU time).
  Usage usage(const std::string& tree_dir) const;
  // What is enforced: the spec, or all 0 when nothing is.
  const LimitSpec& applied() const { return applied_; }
  // "v2", "v1", "v1+v2" or "none".
  std::string how() const;
  // The tree's v1 cgroups (the host removes them if the anchor dies).
  std::vector<std::string> v1_dirs() const;
  // Removes the tree's v1 cgroups (empty by now) and forgets the limits.
  void remove();

 private:
  struct Place {
    std::string dir;     // where the controller's files are
    bool v1 = false;     // a cgroup of the tree's own in a v1 hierarchy (else the tree's v2 cgroup)
    int procs_fd = -1;   // v1: its cgroup.procs, for join_in_child
  };
  Place memory_, pids_, cpu_;
  LimitSpec applied_;
};

}  // namespace anchor
}  // namespace cordon
