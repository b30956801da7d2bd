// The cgroup tier (Linux): the subreaper tier plus a cgroup of the tree's own,
// which the command is born into: the host can still end the tree through it
// if the anchor dies, and SIGKILL reaches every member at once (cgroup.kill).
#include <dirent.h>
#include <errno.h>
#include <unistd.h>
#ifdef __linux__
#include <sched.h>
#endif

#include <cstring>

#include "tier.h"

namespace cordon {
namespace anchor {

using protocol::trace;

namespace {

class CgroupTier : public TierWrapper {
 public:
  CgroupTier(TierHost& host, std::unique_ptr<Tier> subreaper) : TierWrapper(host, std::move(subreaper)) {}

  const char* name() const override { return fell_back_ ? inner_->name() : "cgroup"; }

  int contain(const char*& what) override {
    int rc = inner_->contain(what);  // without a subreaper: that failure is the inner tier's
    if (rc != 0) return rc;
#ifdef __linux__
    rc = cordon::cgroup_create("cordon-" + std::to_string(getpid()), cg_path_, cg_dir_, cg_kill_);
#else
    rc = -ENOSYS;
#endif
    if (rc == 0) return 0;
    trace("cgroup unavailable: %s", strerror(-rc));
    what = "cgroup";
    return rc;
  }

  // With a fallback left, a command that cannot be born in the cgroup runs
  // in the subreaper tier instead (READY says so).
  void allow_fallback(bool allowed) override { may_fall_back_ = allowed; }

  std::string cgroup_dir() const override { return cg_path_; }

  int64_t fork(const char*& what) override {
#ifdef __linux__
    if (cg_dir_ >= 0) {
      int64_t r = cordon::fork_into_cgroup(cg_dir_);
      if (r >= 0) return r;
      trace("clone3 into the cgroup: %s", strerror(static_cast<int>(-r)));
      if (!may_fall_back_) {
        what = "cgroup";
        return r;
      }
      remove_cgroup();
      fell_back_ = true;
      pid_t pid = ::fork();
      return pid < 0 ? -errno : pid;
    }
#endif
    return inner_->fork(what);
  }

  int child_enter() override {
#ifdef __linux__
    // Born in the tree's cgroup, the command gets a cgroup namespace rooted
    // there (where the anchor may make one: CAP_SYS_ADMIN), so its view of
    // cgroup paths (/proc/self/cgroup, a cgroup2 mount it makes) starts at
    // its own cgroup. This is not a wall: through a cgroup2 mount it can
    // already reach, a member with CAP_SYS_ADMIN can still move itself to an
    // ancestor unless that mount has nsdelegate, and it can setns() out
    // (docs/contract.md, "What cordon is not"). Without the capability the
    // command runs without one.
    if (cg_dir_ >= 0) unshare(CLONE_NEWCGROUP);
#endif
    return inner_->child_enter();
  }

  void step_terminate(int64_t now) override {
    if (host_.termination().forcing() && cg_kill_ >= 0) {
      // SIGKILL to every process of the cgroup at once, new forks included.
      ssize_t w = write(cg_kill_, "1", 1);
      trace("cgroup.kill: %zd", w);
    }
    inner_->step_terminate(now);
  }

  // The tree's cgroup goes once it is empty.
  void release() override {
    remove_cgroup();
    inner_->release();
  }

 private:
  void remove_cgroup() {
    if (cg_kill_ >= 0) close(cg_kill_);
    if (cg_dir_ >= 0) close(cg_dir_);
    cg_kill_ = cg_dir_ = -1;
    if (!cg_path_.empty()) remove_cgroup_dir(cg_path_, 0);
    cg_path_.clear();
  }

  // A cgroup with sub-cgroups (a command that runs cordon itself, whose own
  // anchor was killed with the tree) is removed bottom-up. Only directories
  // are removed; the kernel refuses any cgroup that still has a process.
  void remove_cgroup_dir(const std::string& dir, int depth) {
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
  int cg_dir_ = -1;
  int cg_kill_ = -1;
  bool may_fall_back_ = false;
  bool fell_back_ = false;  // the command runs in the subreaper tier: no cgroup
};

}  // namespace

std::unique_ptr<Tier> make_cgroup_tier(TierHost& host, std::unique_ptr<Tier> subreaper) {
  return std::make_unique<CgroupTier>(host, std::move(subreaper));
}

}  // namespace anchor
}  // namespace cordon
