// Linux: who is in a tree, and the caller's user's processes, from /proc.
// Two walks: down from the anchor through /proc/<pid>/task/<tid>/children
// (list_descendants: costs the tree, not the host), or one scan of every
// /proc/<pid>/stat (list_tree: also finds a process-group tier's members that
// left the anchor's ancestry). A pid read from a children list counts only
// if its live parent chain leads to the anchor, so a pid recycled during the
// walk is never listed. Neither walk is atomic: a process forked meanwhile
// may be missed (the next walk finds it). Zombies are never listed. The
// anchor's walks of every process read each process older than the anchor
// once, then skip it by its /proc entry (young_entries).
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace cordon {

using internal::Stat;
using internal::read_stat;
using internal::to_member;

namespace internal {
namespace {

// The processes the anchor's walks skip, by pid: the inode of their /proc
// entry when they were found started before the anchor, or no member
// (Visit::kNotMember).
struct Older {
  bool on = false;
  uint64_t anchor_start = 0;
  std::unordered_map<int64_t, uint64_t> ino;
};

Older& older() {
  static Older o;
  return o;
}

// The inode of /proc/<pid>'s entry now, or 0.
uint64_t entry_ino(int dir, int64_t pid) {
  char name[24];
  snprintf(name, sizeof name, "%lld", static_cast<long long>(pid));
  struct stat sb;
  return fstatat(dir, name, &sb, 0) == 0 ? static_cast<uint64_t>(sb.st_ino) : 0;
}

}  // namespace

bool skipped(int64_t pid, uint64_t ino) {
  const Older& o = older();
  if (!o.on || ino <= 1) return false;  // (1: what the kernel lists when it could not make the entry's inode)
  auto known = o.ino.find(pid);
  return known != o.ino.end() && known->second == ino;
}

void skip_if_outside(int dir, std::vector<NotMember>& found) {
  Older& o = older();
  if (!o.on) return;
  // Parents first where they are among the found ones (each pass settles
  // those whose parent the last one did), a few passes at most.
  for (int pass = 0; pass < 8 && !found.empty(); pass++) {
    size_t before = found.size();
    for (auto it = found.begin(); it != found.end();) {
      // The parent now, by its entry: the same process the walk saw as the
      // parent (a pid is one process's at a time; one recycled since has
      // another entry, and is not skipped).
      bool outside = it->ppid <= 1 || skipped(it->ppid, entry_ino(dir, it->ppid));
      if (!outside) {
        ++it;
        continue;
      }
      o.ino[it->pid] = it->ino;
      it = found.erase(it);
    }
    if (found.size() == before) break;
  }
}

void young_entries(DIR* d, int64_t self, std::vector<ProcEntry>& out, bool skip_older) {
  out.clear();
  rewinddir(d);
  Older& o = older();
  // (A walk that is not of the anchor's own tree skips and forgets nothing.)
  bool skipping = skip_older && o.on;
  std::unordered_map<int64_t, uint64_t> still;  // the skipped ones listed now: the rest are forgotten
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    char* end = nullptr;
    long long pid = strtoll(e->d_name, &end, 10);
    if (*end || pid == self) continue;
    uint64_t ino = static_cast<uint64_t>(e->d_ino);
    if (skipping && skipped(pid, ino)) {
      still.emplace(pid, ino);
      continue;
    }
    out.push_back(ProcEntry{pid, ino});
  }
  if (skipping) o.ino.swap(still);
}

void note_if_older(const ProcEntry& entry, const Stat& st) {
  Older& o = older();
  if (o.on && entry.ino > 1 && st.pid == entry.pid && st.start < o.anchor_start) o.ino[entry.pid] = entry.ino;
}

}  // namespace internal

void skip_older_processes(uint64_t start) {
  internal::Older& o = internal::older();
  o.anchor_start = start != 0 ? start : start_time_of(getpid());
  o.on = o.anchor_start != 0;
}

void note_older_processes(const std::function<bool()>& stop) {
  DIR* d = opendir("/proc");
  if (!d) return;
  std::vector<internal::ProcEntry> entries;
  internal::young_entries(d, getpid(), entries, true);
  int read = 0;
  for (const internal::ProcEntry& e : entries) {
    if (++read % 16 == 0 && stop()) break;
    Stat st;
    if (read_stat(e.pid, st)) internal::note_if_older(e, st);
  }
  closedir(d);
}

namespace {

using internal::ProcEntry;

// Every process of /proc; walking the calling anchor's own tree, but those
// found older than the anchor before (young_entries).
void scan_all(std::vector<Stat>& all, bool own_tree) {
  all.clear();
  DIR* d = opendir("/proc");
  if (!d) return;
  std::vector<ProcEntry> entries;
  internal::young_entries(d, -1, entries, own_tree);
  closedir(d);
  for (auto& e : entries) {
    Stat st;
    if (!read_stat(e.pid, st)) continue;
    if (own_tree) internal::note_if_older(e, st);
    all.push_back(st);
  }
}

// Whether this kernel has /proc/<pid>/task/<tid>/children (CONFIG_PROC_CHILDREN,
// Linux 4.2+ where it is configured: every major distribution does, for CRIU).
bool has_children_files() {
  static int has = -1;
  if (has < 0) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/children", static_cast<long>(syscall(SYS_gettid)));
    has = access(path, R_OK) == 0 ? 1 : 0;
  }
  return has == 1;
}

// Appends the pids /proc/<pid>/task/<tid>/children lists for every thread of
// `pid` (a child belongs to the thread that forked it): `threads` 1 reads
// the main thread's file only, anything else lists the task directory.
// False when the process (its only thread, or its task directory) could
// not be read: gone, its children handed on.
bool read_children(int64_t pid, int64_t threads, std::vector<int64_t>& out) {
  std::string text;
  auto read_one = [&](const char* tid) {
    char path[320];
    snprintf(path, sizeof path, "/proc/%lld/task/%s/children", static_cast<long long>(pid), tid);
    if (!internal::read_file(path, text, static_cast<size_t>(1) << 26)) return false;
    const char* p = text.c_str();
    for (;;) {
      char* end = nullptr;
      long long v = strtoll(p, &end, 10);
      if (end == p) break;
      if (v > 0) out.push_back(v);
      p = end;
    }
    return true;
  };
  if (threads == 1) {
    char tid[24];
    snprintf(tid, sizeof tid, "%lld", static_cast<long long>(pid));
    return read_one(tid);
  }
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%lld/task", static_cast<long long>(pid));
  DIR* d = opendir(dir);
  if (!d) return false;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] >= '1' && e->d_name[0] <= '9') read_one(e->d_name);
  }
  closedir(d);
  return true;
}

}  // namespace

int list_descendants(int64_t anchor, const std::vector<FileId>& watched, std::vector<Member>& out,
                     bool commands, DescendantsWalk* ending) {
  out.clear();
  if (!has_children_files()) return -ENOSYS;
  if (ending) *ending = DescendantsWalk{true, 0, {}};
  // Pids seen in a children list, and those found to be members (the anchor's
  // descendants: what a pid read from a list must descend from, as it may
  // have been recycled by the time its stat is read).
  std::unordered_map<int64_t, bool> seen;
  seen[anchor] = true;
  struct Parent {
    int64_t pid;
    int64_t threads;  // 0: not known (the anchor): list its threads
  };
  std::vector<Parent> stack{{anchor, 0}};
  std::vector<int64_t> kids;
  while (!stack.empty()) {
    Parent parent = stack.back();
    stack.pop_back();
    kids.clear();
    if (!read_children(parent.pid, parent.threads, kids) && ending && parent.pid != anchor) ending->gone++;
    for (int64_t pid : kids) {
      if (seen.count(pid)) continue;
      Stat st;
      if (!read_stat(pid, st)) {  // gone since the list was read
        if (ending) ending->gone++;
        continue;
      }
      auto up = seen.find(st.ppid);
      bool ours = (up != seen.end() && up->second) || internal::descends_from(pid, anchor);
      seen[pid] = ours;
      if (!ours) continue;  // recycled since the list was read: not ours
      // A zombie is no member, but a process whose main thread has exited
      // shows as one while its other threads (and their children) live.
      if (st.state != 'Z' && st.state != 'X') out.push_back(to_member(st, watched, commands));
      if (ending && (st.state == 'Z' || st.state == 'X' || (st.flags & internal::kTaskExiting))) {
        ending->exiting.emplace_back(pid, st.start);
      }
      stack.push_back(Parent{pid, st.threads});
    }
  }
  return static_cast<int>(out.size());
}

int list_tree(int64_t anchor, int64_t group, const std::vector<FileId>& watched,
              std::vector<Member>& out, bool commands) {
  out.clear();
  std::vector<Stat> all;
  scan_all(all, anchor == getpid());
  if (all.empty()) return -ENOENT;
  std::unordered_multimap<int64_t, const Stat*> children;
  children.reserve(all.size());
  for (const Stat& st : all) children.emplace(st.ppid, &st);
  std::vector<const Stat*> found;
  std::unordered_map<int64_t, bool> seen;
  std::vector<int64_t> queue{anchor};
  while (!queue.empty()) {
    int64_t parent = queue.back();
    queue.pop_back();
    auto range = children.equal_range(parent);
    for (auto it = range.first; it != range.second; ++it) {
      const Stat* st = it->second;
      if (st->pid == anchor || seen[st->pid]) continue;
      seen[st->pid] = true;
      found.push_back(st);
      queue.push_back(st->pid);
    }
  }
  if (group > 0) {
    for (const Stat& st : all) {
      if (st.pgid == group && st.pid != anchor && !seen[st.pid]) {
        seen[st.pid] = true;
        found.push_back(&st);
      }
    }
  }
  for (const Stat* st : found) {
    if (st->state != 'Z' && st->state != 'X') out.push_back(to_member(*st, watched, commands));
  }
  return static_cast<int>(out.size());
}

namespace {

// The last pid the kernel handed out in this pid namespace (its allocation
// cursor); 0 where it cannot be read.
int64_t last_pid() {
  int fd = open("/proc/sys/kernel/ns_last_pid", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[32];
  ssize_t n;
  do {
    n = read(fd, buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  return strtoll(buf, nullptr, 10);
}

// Above any pid_max (2^22): a pid's distance back from the cursor, wrapping.
constexpr int64_t kPidSpace = int64_t{1} << 22;

// How long ago (in pids handed out) `pid` was allocated, the cursor being at
// `last`: pids are handed out upwards and wrap to the bottom at pid_max, so
// the most recent are just below the cursor, and those above it are older
// than any below it.
int64_t age(int64_t pid, int64_t last) { return pid <= last ? last - pid : last + (kPidSpace - pid); }

// The numeric entries of /proc but those known older than the anchor
// (young_entries), newest first: in allocation order from the cursor `last`
// back (a plain highest-first order would, once pids have wrapped, read every
// old process at a high pid before the newest ones).
void proc_pids(DIR* d, int64_t self, int64_t last, std::vector<ProcEntry>& out) {
  internal::young_entries(d, self, out, true);
  if (last <= 0) last = kPidSpace - 1;  // (no cursor known: highest first)
  std::sort(out.begin(), out.end(),
            [last](const ProcEntry& a, const ProcEntry& b) { return age(a.pid, last) < age(b.pid, last); });
}

// Pids probed one by one before the directory is read (the newest few), and
// at most between two cursor readings afterwards (more: the directory again).
constexpr int64_t kFirstProbes = 64;
constexpr int64_t kFreshProbes = 4096;

}  // namespace

// Newest first, so that a process that lives a few milliseconds (a pid
// hopper: it forks, its parent exits, each generation another pid) is read
// while it is alive; reading the whole directory of a host with thousands of
// processes takes longer than such a process lives, and a listing does not
// hold what was forked after it:
//   1. the last pids the kernel handed out (from its cursor, ns_last_pid),
//      probed one by one before anything else;
//   2. the directory, read whole (the kernel hands it over in large batches
//      anyway, so a walk is a snapshot), then each process read and visited
//      in allocation order, newest first;
//   3. the pids handed out since (the cursor moved), probed one by one, again
//      while the cursor moves (bounded); a gap too wide to probe, or no
//      cursor to read, is read from the directory again (a few times at most).
// A process is visited once per walk.
int visit_sweepable_processes(uint64_t since, const std::function<Visit(const Member&)>& visit, bool* settled,
                              const std::function<bool(int64_t)>& /*gone_matters: macOS only*/) {
  if (settled) *settled = false;
  DIR* d = opendir("/proc");
  if (!d) return -errno;
  uid_t uid = geteuid();
  bool everyone = uid == 0;
  bool anchor = internal::older().on;
  int64_t self = getpid();
  static const std::vector<FileId> kNone;
  int n = 0;
  bool go_on = true;
  // A process visited that went as it was read (Visit::kGone) and is still
  // in its exit (not yet a zombie): its environment is gone, so the walk
  // cannot tell whether it is a member, and it may still hold what a member
  // holds (its files are closed late in its exit). The walk proves nothing
  // of it: not settled. (One gone already is not waited for: a child it
  // forked after the listing is on a pid the walk probes anyway.)
  bool in_exit = false;
  std::unordered_set<int64_t> visited;
  std::vector<internal::NotMember> not_members;
  // A probed pid held a task started before `since`: pids are handed out
  // upwards, so those below it were handed out earlier still (but after a
  // wrap of the pid space, which the directory read covers).
  bool older_probed = false;
  // A pid counts as visited once a process was seen on it: the cursor names
  // a pid as soon as a fork allocates it, before the child is in /proc, and
  // such a pid probed too early must still be read when the listing has it.
  // `ino`: the pid's /proc entry as the directory listed it (0: probed by
  // pid). The entry is known before the stat file is read, so a process
  // skipped from now on by its entry is the one whose record decided it.
  auto consider = [&](int64_t pid, uint64_t ino) {
    if (pid <= 0 || pid == self || visited.count(pid)) return;
    // A pid probed by number may be another thread's id (a listed entry is
    // always a process): a thread of a marked member is not a member of its own.
    bool probed = ino == 0;
    // The entry's owner is the process's effective uid (root's for a
    // non-dumpable one): no file is opened for another user's process,
    // unless the caller is root.
    if (!everyone || (anchor && ino == 0)) {
      char name[24];
      snprintf(name, sizeof name, "%lld", static_cast<long long>(pid));
      struct stat sb;
      if (fstatat(dirfd(d), name, &sb, 0) != 0) return;
      visited.insert(pid);
      if (!everyone && sb.st_uid != uid) return;
      if (ino == 0) ino = static_cast<uint64_t>(sb.st_ino);
      if (internal::skipped(pid, ino)) return;
    }
    Stat st;
    if (!read_stat(pid, st)) return;
    // Older than `since` (a task, process or thread, started before it):
    // no member, whichever it is, and no status read to tell which.
    if (st.start < since) {
      if (probed) older_probed = true;
      internal::note_if_older(ProcEntry{pid, ino}, st);  // (a thread's entry is never listed: harmless)
      visited.insert(pid);
      return;
    }
    if (probed && !internal::is_process(pid)) return;
    visited.insert(pid);
    internal::note_if_older(ProcEntry{pid, ino}, st);
    if (st.state == 'Z' || st.state == 'X') return;
    n++;
    Visit next = visit(to_member(st, kNone, false));
    if (next == Visit::kNotMember && anchor) not_members.push_back({pid, st.ppid, ino});
    if (next == Visit::kGone && !in_exit) {
      Stat now;
      in_exit = read_stat(pid, now) && now.start == st.start && now.state != 'Z' && now.state != 'X';
    }
    go_on = next != Visit::kStop;
  };
  // Pids handed out after `from` up to the cursor now, newest first; the
  // cursor probed up to, or -1 when there were too many to probe (or no
  // cursor), which the directory must answer.
  auto probe_since = [&](int64_t from) -> int64_t {
    int64_t last = last_pid();
    if (last <= 0) return -1;
    int64_t count = age(from, last);
    if (count > kFreshProbes) return -1;
    for (int64_t i = 0, pid = last; go_on && i < count; i++, pid = pid > 1 ? pid - 1 : kPidSpace - 1) {
      if (pid < kPidSpace - 1) consider(pid, 0);
    }
    return last;
  };
  int64_t cursor = last_pid();
  // The newest first, down to the first task older than `since`: a tree's
  // sweep probes what was forked since its root, not the host's threads and
  // the anchors of earlier trees (measured: about 60 probes, 350 system
  // calls, at every short command's exit).
  for (int64_t i = 0, pid = cursor; go_on && !older_probed && cursor > 0 && i < kFirstProbes && pid > 0; i++, pid--) consider(pid, 0);
  std::vector<ProcEntry> pids;
  for (int round = 0; go_on && round < 4; round++) {
    size_t before = visited.size();
    proc_pids(d, self, cursor, pids);
    for (const ProcEntry& e : pids) {
      consider(e.pid, e.ino);
      if (!go_on) break;
    }
    bool again = false;
    for (int chase = 0; go_on && chase < 8; chase++) {
      int64_t reached = cursor > 0 ? probe_since(cursor) : -1;
      if (reached < 0) {
        again = true;
        break;
      }
      if (reached == cursor) break;  // the cursor stood still: nothing new
      cursor = reached;
    }
    if (!again || (round > 0 && visited.size() == before)) break;  // (a directory read that found nothing new)
    int64_t now = last_pid();
    if (now > 0) cursor = now;
  }
  internal::skip_if_outside(dirfd(d), not_members);
  closedir(d);
  if (settled) *settled = go_on && !in_exit;
  return n;
}

// Lean (the anchor runs it while terminating, on machines that may be
// loaded): one read of each stat file but those of processes older than the
// anchor (young_entries: no member of the anchor's group can be one).
int group_live_members(int64_t group, std::vector<Member>* live) {
  static const std::vector<FileId> kNone;
  if (live) live->clear();
  DIR* d = opendir("/proc");
  if (!d) return -errno;
  std::vector<ProcEntry> entries;
  internal::young_entries(d, -1, entries, true);
  closedir(d);
  int n = 0;
  for (auto& e : entries) {
    Stat st;
    if (!read_stat(e.pid, st)) continue;
    internal::note_if_older(e, st);
    if (st.pgid != group || st.state == 'Z' || st.state == 'X') continue;
    n++;
    if (live) live->push_back(to_member(st, kNone, false));
  }
  return n;
}

int list_user_processes(uint64_t since, std::vector<Member>& out) {
  out.clear();
  return visit_sweepable_processes(since, [&](const Member& m) {
    out.push_back(m);
    return Visit::kNext;
  });
}

}  // namespace cordon
