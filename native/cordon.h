// cordon's native contract: pure C++, no Node-API, no platform headers.
//
// Every function returns 0 (or a count) on success and a negative errno-style
// code on failure, so the binding maps the same code to the same JS `err.code`
// on every platform (the Windows sources map GetLastError() onto these names).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#ifndef _WIN32
#include <unistd.h>  // close (PinnedMembers)
#endif

// Which kernel's process interfaces the native code is built for: Linux's
// (/proc, pidfds, cgroups, the subreaper) or XNU's (libproc, sysctl,
// kqueue): macOS, and the model of XNU's process table that the test suite
// runs the darwin sources on, on Linux (test/xnu-model, built with
// CORDON_XNU_MODEL; docs/xnu-model.md). What is not about processes (pipes,
// terminals, /proc/self) stays the host system's either way.
#if defined(__linux__) && !defined(CORDON_XNU_MODEL)
#define CORDON_LINUX_PROC 1
#else
#define CORDON_LINUX_PROC 0
#endif

namespace cordon {

// One live member of a tree, as enumeration saw it. Informational only: a
// member is never signalled through this record's pid without re-pinning it.
struct Member {
  int64_t pid = 0;
  int64_t ppid = 0;
  int64_t pgid = 0;
  int64_t sid = 0;          // its session (Linux; 0 where the listing does not read it: macOS, see session_of)
  uint64_t start_time = 0;  // clock ticks since boot (Linux), or a platform stamp
  char state = '?';         // 'R', 'S', 'D', 'Z', 'T' ... as the OS reports it
  bool holds_output = false;  // holds the write end of the captured stdout/stderr
  // Known only from an earlier snapshot (it left the tree's ancestry, e.g. a
  // setsid'd orphan in the process-group tier): its identity is checked by
  // start time alone before it is signalled.
  bool from_snapshot = false;
  std::string command;      // command line, arguments joined by spaces
  // The program's short name, where the process listing reads it anyway
  // (macOS: pbi_name, else p_comm; empty on Linux). An exec of a program of
  // another name changes it (the pid and start stay).
  std::string name;
  // macOS: the kernel's ids of the process and of its parent when it was
  // forked (p_uniqueid, p_puniqueid: handed out in increasing order, never
  // reused, kept across exec, setsid and reparenting), so a member's child is
  // known as such after its parent is gone. 0 where unknown (Linux).
  uint64_t unique_id = 0;
  uint64_t parent_unique_id = 0;
  // macOS: the kernel's unique id (p_uniqueid, p_puniqueid) reaches the
  // parent only until the process execs: since macOS 13 every exec sets
  // p_puniqueid to the parent's at that moment (launchd's for an orphan).
  // Since macOS 15.4 the kernel also keeps the pid version of the process
  // (p_idversion, counted up at every fork, kept across exec) and of the
  // parent that forked it (p_orig_ppidversion), which neither exec nor
  // reparenting changes. 0 where unknown (Linux; before macOS 15.4).
  int32_t id_version = 0;
  int32_t parent_id_version = 0;
};

// The ids Member::unique_id and Member::id_version carry for one process.
struct LineageIds {
  uint64_t unique_id = 0;
  int32_t id_version = 0;
};

// What this kernel offers, probed once.
struct Probe {
  bool pidfd = false;        // pidfd_open + pidfd_send_signal (Linux >= 5.3)
  bool subreaper = false;    // PR_SET_CHILD_SUBREAPER (Linux >= 3.4)
  bool proc_scan = false;    // a descendant walk is possible (/proc or libproc)
  bool job_objects = false;  // Windows Job Objects (kill-on-close, nesting)
  bool ctrl_break = false;   // GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT) works (not under Wine 8)
  bool wine = false;         // running under Wine, not Windows
  // Windows: kernel32 exports CreatePseudoConsole, ResizePseudoConsole and
  // ClosePseudoConsole (ConPTY, Windows 10 1809 and later; Wine 8 too).
  bool pseudo_console = false;
  // The process table read is XNU's (libproc, sysctl): macOS, or the darwin
  // build on the model of XNU's process table (test/xnu-model).
  bool xnu = false;
  // Linux: what one exec can carry (0 elsewhere). The kernel refuses with
  // E2BIG a single argument or environment string of 32 pages or more
  // (MAX_ARG_STRLEN), and a total over sysconf(_SC_ARG_MAX) at the most.
  long page_size = 0;
  long arg_max = 0;
  // Linux: the newest Landlock ABI the kernel has (0: none), what the
  // `confine` option needs (native/linux/confine.h).
  int landlock_abi = 0;
};

int probe(Probe& out);

// Make the calling process a child subreaper: orphaned descendants are
// reparented to it instead of to init. -ENOSYS where the OS has no such thing.
int become_subreaper();

// A descriptor that poll() reports readable once process `pid` has exited
// (Linux: a pidfd; macOS: a kqueue watching EVFILT_PROC NOTE_EXIT), close-on-
// exec; or a negative errno (no such process, or no such facility). The
// anchor's second sign of its host's death, besides EOF on the control
// channel (which a leaked copy of the host's end would hide).
int watch_exit(int64_t pid);

// Linux: whether the cgroup tier can run here: cgroup v2 mounted, kernel
// 5.14+ (clone3 into a cgroup, cgroup.kill), our own cgroup writable. Apart
// from probe(), which the anchor runs on every start and must stay cheap.
bool cgroup_available();

// Linux, the cgroup tier: a new cgroup v2 directory for one tree, below the
// calling process's own cgroup (which must be writable: a delegated cgroup, or
// root's; when that is the "cordon-host" leaf prepareCgroupLimits() moved the
// host into, below the host's cgroup that holds the leaf, beside it), named `prefix` plus a random suffix (retried on EEXIST); empty tree
// cgroups left there by anchors that are gone are removed first. `path` gets its absolute path, `dir_fd` an O_PATH|O_DIRECTORY fd on
// it (for clone3's CLONE_INTO_CGROUP), `kill_fd` its cgroup.kill opened for
// writing (-1 before Linux 5.14).
int cgroup_create(const std::string& prefix, std::string& path, int& dir_fd, int& kill_fd);
// Linux, a warm anchor of the cgroup tier while it waits for its LAUNCH
// (anchor::Tier::while_waiting): finds the directory its tree's cgroup will
// go in and removes the stale tree cgroups there now, so that its
// cgroup_create() once the command came does neither (reads of
// /proc/self/mountinfo and /proc/self/cgroup, a listing of that directory,
// a kill(pid, 0) per tree cgroup in it). A warm anchor is never moved to
// another cgroup while it waits (the host retires its warm anchors before it
// moves itself, lib/cgroup-leaf.ts), so what it found then still holds.
void cgroup_prepare();
// Linux: removes the empty tree cgroups ("cordon-<anchor pid>-...") in `dir`
// whose anchor is gone, as cgroup_create does in its own directory (the
// limits' v1 cgroups, when host and anchor both died).
void sweep_stale_cgroups(const std::string& dir);
// fork(), the child born inside the cgroup (clone3 with CLONE_INTO_CGROUP,
// Linux 5.7+): no instruction of it runs outside. Returns what fork() does.
int64_t fork_into_cgroup(int dir_fd);
// Linux (x86_64, arm64): a child that runs `main(arg)` (which must not
// return) sharing the caller's memory until it execs (CLONE_VM, on a stack of
// its own), born in the cgroup `cgroup_fd` when that is >= 0: no copy of the
// caller's page tables, no copy-on-write faults (native/linux/clone.cc says
// what the child may do meanwhile). `pid` is the child's, or a negative errno
// (-ENOSYS elsewhere: fork instead). The caller unmaps the stack (`stack`,
// `stack_size`) once the child has exec'd or exited.
struct SharedChild {
  int64_t pid = -1;
  void* stack = nullptr;
  size_t stack_size = 0;
};
SharedChild clone_shared(int cgroup_fd, void (*main)(void*), void* arg);

// Descendants of `anchor` (not the anchor itself). With `group` also every
// process whose process group is `group` (the process-group tier). Zombies are
// skipped. `watched` names file objects (device, inode pairs) whose holders get
// holds_output set.
struct FileId {
  uint64_t dev = 0;
  uint64_t ino = 0;
};
// `commands` false skips reading command lines (the anchor's frequent
// snapshots and termination rounds need identities only).
int list_tree(int64_t anchor, int64_t group, const std::vector<FileId>& watched,
              std::vector<Member>& out, bool commands = true);

// Linux, the cgroup tier: a tree's members read from its own cgroup instead
// of a walk of every process. The live processes listed in `dir`/cgroup.procs
// and in its descendant cgroups' (what list_tree fills in: identities, and
// `commands`, `watched` as there). Reads only the listed
// pids' /proc entries.
int cgroup_members(const std::string& dir, const std::vector<FileId>& watched, std::vector<Member>& out,
                   bool commands);
// The same list through descriptors the caller holds on `dir`: `procs_fd`
// (its cgroup.procs, read again from offset 0, which restarts the kernel's
// iteration) and `list_fd` (the directory opened for reading, listed again
// from its start for sub-cgroups). A tree's stop lists its cgroup several
// times: held descriptors spare each listing the path walks and the opens
// and closes. A descriptor that is -1 falls back to the path.
int cgroup_members_held(int procs_fd, int list_fd, const std::string& dir, const std::vector<FileId>& watched,
                        std::vector<Member>& out, bool commands);
// The members of cgroup_members_held (no command lines, no output holders),
// each pinned as it is listed (Linux 5.3+: the cgroup tier's stop): a pidfd
// is opened on the pid first, then its /proc record is read, then the pidfd
// is polled. A process that has not exited by then held its pid throughout,
// so the record is its own and the pidfd can signal it (signal_pin) without
// /proc being read again; one that exited meanwhile is left out. A member
// that could not be pinned (no pidfds; no descriptor left) is listed unpinned.
#ifndef _WIN32
class PinnedMembers {
 public:
  PinnedMembers() = default;
  PinnedMembers(const PinnedMembers&) = delete;
  PinnedMembers& operator=(const PinnedMembers&) = delete;
  ~PinnedMembers() {
    for (auto& pin : pins_) close(pin.second);
  }
  std::vector<Member> members;
  // The pidfd pinning the listed member on `pid` (owned here), or -1.
  int pin_of(int64_t pid) const {
    auto it = pins_.find(pid);
    return it == pins_.end() ? -1 : it->second;
  }
  void add(Member m, int pidfd) {
    if (pidfd >= 0) {
      auto it = pins_.find(m.pid);
      if (it != pins_.end()) close(it->second);
      pins_[m.pid] = pidfd;
    }
    members.push_back(std::move(m));
  }

 private:
  std::unordered_map<int64_t, int> pins_;
};
int cgroup_members_pinned(int procs_fd, int list_fd, const std::string& dir, PinnedMembers& out);
#endif
// Only the pids the cgroup and its descendant cgroups list, through the held
// descriptors as cgroup_members_held (no /proc read): whether a listing has a
// process no earlier one had. False when they cannot be read.
bool cgroup_member_pids(int procs_fd, int list_fd, const std::string& dir, std::vector<int64_t>& pids);
// `sig` (then SIGCONT, with `then_cont`) through a pin of PinnedMembers:
// what sending `sig` returned (0 or a negative errno); -ESRCH, nothing sent,
// once it exited (a zombie included, as signal_member has it).
int signal_pin(int pidfd, int sig, bool then_cont);
// `dir`/cgroup.events opened for reading (poll it for POLLPRI: the kernel
// flags it when `populated` or `frozen` changes; a read re-arms it), or a
// negative errno.
int cgroup_open_events(const std::string& dir);
// Reads the events file from its start: 0, or a negative errno.
int cgroup_read_events(int events_fd, bool& populated, bool& frozen);
// `dir`/cgroup.freeze opened for writing (Linux 5.2+; a negative errno where
// there is none or it is not ours to write).
int cgroup_open_freeze(const std::string& dir);
// Freeze (every process of the cgroup and of its descendants stops where it
// is; signals sent meanwhile are delivered at the thaw; cgroup.events says
// `frozen 1` once all have stopped) or thaw.
int cgroup_set_frozen(int freeze_fd, bool frozen);
// Descendants of `anchor` only (as list_tree with no group), found by walking
// down from it: Linux reads /proc/<pid>/task/<tid>/children of every thread
// of the anchor and of each member, and the stat of members only, so a walk
// costs the tree, not the host. Like list_tree it is not atomic: a process
// forked during the walk may be missed (the next walk finds it). -ENOSYS
// where there is no such walk (a kernel without CONFIG_PROC_CHILDREN):
// list_tree is the walk there. (macOS: list_tree, which walks down already.)
//
// `ending`, where given (Linux): what the walk saw of processes going, which
// a walk that must miss nothing (the subreaper tier's forced stop) reads. A
// process that exits hands its children to the anchor (the subreaper) as it
// goes; if the anchor's own list was read before that, the walk misses them.
// So `gone` counts pids listed by a parent whose stat or children list could
// not be read, and `exiting` lists (pid, start) of members seen in exit()
// or as zombies: a walk with no gone pid and no exiting member that an
// earlier walk did not already see exiting missed no child of theirs.
struct DescendantsWalk {
  bool counted = false;  // false: not counted (list_tree, macOS): nothing can be said
  int gone = 0;
  std::vector<std::pair<int64_t, uint64_t>> exiting;
};
int list_descendants(int64_t anchor, const std::vector<FileId>& watched, std::vector<Member>& out,
                     bool commands = true, DescendantsWalk* ending = nullptr);

// Whether the process `pid` (still the one that started at `start_time`)
// holds one of `watched`: for members known from an earlier snapshot, whom
// list_tree no longer finds (the process-group tier: left the group, orphaned).
bool holds_output(int64_t pid, uint64_t start_time, const std::vector<FileId>& watched);

// Signal one member through a pinned identity: open a handle on the pid
// (pidfd), then verify the handle's process is still the one enumerated (same
// start time) and still a descendant of `anchor` (or of `group`; a
// from_snapshot member: same start time only), then signal through the handle. Returns -ESRCH when the process is gone or is no longer
// the one we listed: a recycled pid is never signalled.
int signal_member(int64_t anchor, int64_t group, const Member& member, int sig,
                  bool use_pidfd);

// signal_member(sig), then SIGCONT through the same pin and the same
// verification (a stopped member must run to act on `sig`): one pidfd and one
// check for both. Returns what sending `sig` returned; SIGCONT is sent
// whenever the member was verified, also when `sig` was refused.
int signal_member_then_cont(int64_t anchor, int64_t group, const Member& member, int sig,
                            bool use_pidfd);

// Whether the enumerated member is still that process (same start time) and
// still ours: a descendant of `anchor`, in `group`, or from_snapshot. The
// anchor verifies a whole round of members with this before it signals any of
// them, so signalling a parent cannot orphan a child out of its ancestry.
bool is_member(int64_t anchor, int64_t group, const Member& member);

// The command line of `pid` (arguments joined by spaces), or its name in
// brackets when the command line cannot be read.
std::string command_line(int64_t pid);

// Whether `pid` (with `start_time`) is still alive and is still that process.
bool same_process_alive(int64_t pid, uint64_t start_time);

#ifndef _WIN32
// Whether `pid` (with `start_time`) is no longer that live process, or has
// begun to exit: it forks nothing more, and its memory (its environment) may
// already be gone while it still reads as alive (Linux's PF_EXITING, XNU's
// P_LEXIT). A walk that read such a process as it went proves nothing of a
// child it forked after the walk's listing (Visit::kGone).
bool exiting_or_gone(int64_t pid, uint64_t start_time);
#endif

// After a SIGSTOP, where the process is (the freezes of the forced stop wait
// for it before a walk: tier_process_group.cc, tier_subreaper.cc). A stop
// takes effect when a thread next leaves the kernel, so a thread running (or
// runnable) may be inside a fork begun before the signal came: the fork
// completes, with a child that a walk made meanwhile did not list.
//   kStill    every thread stopped, or a zombie, or gone, or another process
//             on the pid now: its forks are over;
//   kRunning  a thread runs or is runnable (Linux R, and S: a sleeper the
//             signal has not woken yet): it is about to stop;
//   kBlocked  no thread runs, but not every one is stopped: blocked in the
//             kernel (Linux D: among others a vfork parent whose child is
//             stopped, which holds still for as long as the child does), or
//             unreadable (another user's, a sandbox's refusal).
// Linux: /proc/<pid>/stat, and each thread's when there are several; macOS:
// PROC_PIDTASKALLINFO, p_stat SSTOP and no thread running (pti_numrunning).
enum class Stillness { kStill, kRunning, kBlocked };
Stillness stillness(int64_t pid, uint64_t start_time);

// How many live (not zombie) processes are in process group `group` now, or a
// negative errno; with `live`, those members too (identities only). Linux:
// one /proc walk, which a process that forks and exits
// faster than the walk reads can outrun; macOS: the kernel's list of the
// group (proc_listpids PROC_PGRP_ONLY).
int group_live_members(int64_t group, std::vector<Member>* live = nullptr);

// The current process group of `pid` if it is still that live process (same
// start time), else -1.
int64_t current_pgid(int64_t pid, uint64_t start_time);
// The session of `pid` if it is still that live process (same start time),
// else -1 (Linux: /proc/<pid>/stat; macOS: getsid(), checked before and after
// against the start time).
int64_t session_of(int64_t pid, uint64_t start_time);
// Whether `pid` names a process (a thread group's leader), not another thread
// of one. Linux: a walk that probes pids by number also reaches threads'
// /proc entries, which carry their process's session and environment; macOS
// lists processes only (always true).
bool is_thread_group_leader(int64_t pid);

// The process-group tier's tree marker (native/posix/tier_process_group.cc):
// `n` bytes from the kernel's random source (Linux getrandom(2), falling back
// to /dev/urandom; macOS arc4random_buf). 0 or a negative errno.
int random_bytes(void* buf, size_t n);

// The start stamp of `pid` as Member::start_time carries it, or 0 if it is gone.
uint64_t start_time_of(int64_t pid);

// macOS: the kernel's ids of `pid` (Member::unique_id, Member::id_version),
// 0 each when it is gone or unknown; 0 elsewhere.
LineageIds lineage_ids_of(int64_t pid);

// Linux, in an anchor (once, at its start): its walks of every process
// (list_tree, group_live_members, visit_sweepable_processes), whose tree's
// members are all forked after it, remember the processes they find started
// before it (and those a sweep finds to be no member: Visit::kNotMember) by
// their /proc entry and skip them from then on, without opening anything: a
// walk's cost follows the tree, not the host nor the other trees on it. (macOS: its sweeps stop at the anchor's own place in the kernel's
// list, newest first; each of its listings is a walk of every process in the
// kernel, docs/xnu-model.md.)
// `start` (clock ticks since boot; 0: the anchor's own start) raises the
// line once the tree's root exists: a warm anchor waited, and nothing started
// meanwhile is a member.
void skip_older_processes(uint64_t start = 0);

// Linux: reads the start of every process not yet known older than the
// anchor and remembers those that are (as the walks above do), so that the
// tree's first sweep reads only what started since. A warm anchor does it
// while it waits for its command; `stop` is asked every few entries (a
// LAUNCH came: the rest is left to the walks). Linux only (CORDON_LINUX_PROC):
// macOS's sweeps stop at the anchor's own place in the kernel's list.
void note_older_processes(const std::function<bool()>& stop);

// The live processes the caller may sweep for a tree's marker, the caller
// excluded: those it may signal (its own user's; every user's when the
// caller is root, which may also read any process's environment, but on
// macOS a cs_restricted one's). Identities only (pid, ppid,
// pgid, start_time, state; no command). Linux: a /proc walk that stats each
// entry and reads the stat file only of those it may sweep (a non-dumpable
// process's entry is root's) and that started at or after `since` (clock
// ticks since boot: monotonic); macOS: proc_listpids(PROC_ALL_PIDS), which
// lists the kernel's process list newest first by each process's last fork
// or exec (since macOS 13 an exec puts a process back at the head), and each
// one's bsdinfo; those another user's that the caller may signal (their real
// or saved uid is the caller's real or effective one: a setuid program it
// started) included. With `since` not 0 (the anchor's sweeps) the walk ends
// at the caller's own entry (everything after it was forked, and last
// exec'd, before it) and skips those older than the caller by their unique
// ids (one that exec'd since: it is at the head again). macOS start stamps
// are wall-clock time, which can step back, so the list and the unique ids
// decide, not `since`'s value. Both walks go newest first and then look
// again for what was forked while they ran, each round to its end (a
// process that exec'd is at the head again, ahead of what was forked before
// it), until one finds nothing new (macOS: no new member, Visit::kMember). `visit` gets each process as soon
// as it is read, before the walk goes on, so the caller can act on it (check
// it, stop it) while a process that forks and exits every few milliseconds is
// still the one listed, and the child it forked meanwhile is found by the
// look again. `visit` says what to do next (Visit). Returns the count
// visited or a negative errno. `settled` (optional) says whether the walk is
// a proof for what it did not find: macOS, its last listing was read to the
// caller's entry, every process in it read alive and none a new member (a
// process listed alive that exited before it was read, or while `visit`
// checked it (Visit::kGone), may have forked after the listing, and its child
// is not in it: the walk lists again, as for a new member, up to its bound);
// Linux, it was not stopped (Visit::kStop) and no process that went as
// `visit` checked it (Visit::kGone) is still in its exit: the pids handed out
// after the listing are probed, so a fork after the listing is read, but a
// process read in its exit proves nothing until it is gone. `gone_matters`
// (optional; macOS only, Linux ignores it) is asked of a pid the listing had
// alive that was gone (or a zombie) when read: whether it could have been a
// member, so that a child it forked after the listing could be one. False
// (the caller read it alive before and judged it no member, as far as the
// tier can tell) and its going neither lists again nor unsettles the walk;
// without it, every such pid matters. The same answer spares a listing again
// the reads of what the last one read alive and the caller judged (the
// listing's tail, behind what is new at its head: darwin/tree.cc). Going
// that matters lists again at most
// kGoneListings times per walk (a host whose processes keep exiting between a
// listing and their read cannot make every walk list eight times); past
// that, the walk is not settled.
enum class Visit {
  kNext,  // go on
  // Go on: by its own record this process is none of the tree's (its
  // environment was read, whole, without the tree's token; it is neither in
  // the tree's group nor known as a member). Linux, in an
  // anchor (skip_older_processes), once the walk is over, such a process whose
  // parent is init or is itself skipped (started before the anchor, or no
  // member so found) is skipped by every later walk as those older than the
  // anchor are. A member's parent is a member, or init or an older subreaper
  // once its own is gone: then, without the token, it was findable only by
  // the caller's own record of it, which made it no kNotMember. No other
  // process can join the tree's group (only members are in the anchor's
  // session). Elsewhere the same as kNext.
  kNotMember,
  // Go on: this process is the tree's (known, in its group or session,
  // claimed, stopped). macOS: a walk looks at the list again only while its
  // last round found a new one, so that on a busy host the processes of
  // others forking meanwhile do not make every sweep walk eight times (a
  // member that forks during a round is found by the next). Elsewhere the
  // same as kNext.
  kMember,
  // Go on: this process went away while the caller checked it (its
  // environment could not be read, or read empty, and it is no longer the
  // same live process, or it is in exit: exiting_or_gone). macOS: as a
  // process gone when read, the walk lists again (it may have forked after
  // the listing, and its child is only in the next one), and the walk is not
  // settled. Linux: the walk is not settled while the process is in its
  // exit (the pids handed out meanwhile are probed anyway).
  kGone,
  kStop,  // end the walk
};
constexpr int kGoneListings = 3;
int visit_sweepable_processes(uint64_t since, const std::function<Visit(const Member&)>& visit, bool* settled = nullptr,
                              const std::function<bool(int64_t pid)>& gone_matters = nullptr);
// The same, collected.
int list_user_processes(uint64_t since, std::vector<Member>& out);

// The environment `pid` was started with (its "NAME=value" strings, each
// followed by a NUL), if it is still the process stamped `start_time`.
// Linux: /proc/<pid>/environ, which needs ptrace read access: a non-dumpable
// process (ssh-agent and gpg-agent make themselves so) is unreadable to a
// caller without CAP_SYS_PTRACE (-EACCES); macOS: kern.procargs2 (another
// uid's process: unreadable unless the caller is root; a cs_restricted one,
// such as Apple's system binaries under SIP (/bin/sh, /bin/sleep): the
// kernel withholds its environment from every other process, root's too:
// -EACCES, see posix/procargs.h). 0 or a negative errno; 0 with nothing
// read: in the middle of an exec (or, Linux, started with none).
int read_environment(int64_t pid, uint64_t start_time, std::string& out);

// Number of open descriptors of the calling process (for leak checks).
int count_open_fds();

}  // namespace cordon

namespace cordon {

// A connected, close-on-exec stream pair for the host <-> anchor control
// channel (POSIX). fds[0] stays with the host, fds[1] becomes the anchor's fd 3.
int control_pair(int fds[2]);

// Starting the anchor (POSIX, native/posix/spawn.cc) with posix_spawn,
// which does not copy the host's address space as fork() does.
constexpr int kStdioPipe = -1;  // a new pipe; the host keeps the other end
constexpr int kStdioNull = -2;  // /dev/null
struct AnchorSpawn {
  std::string path;               // absolute, never searched in PATH
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> env;   // "NAME=value"
  int stdio[3] = {kStdioPipe, kStdioPipe, kStdioPipe};  // or a host descriptor
  // A leased tree: the anchor also gets fds 4-6 (native/posix/lease.h), the
  // read ends of the stdout/stderr pipes and `lease_log` (-1: none).
  bool lease = false;
  int lease_log = -1;
};
struct AnchorProcess {
  int64_t pid = 0;
  int host_fds[3] = {-1, -1, -1};  // the host's end of each kStdioPipe, else -1
  int control_fd = -1;             // the host's end of the control pair (the anchor's fd 3)
};
// The anchor gets fds 0-2 and its end of a new control pair as fd 3 (it
// closes any other itself), an empty signal mask
// and default dispositions, and the host's working directory (the command's
// is an argument of the anchor). Exec failures are reported here (a negative errno).
int spawn_anchor(const AnchorSpawn& spec, AnchorProcess& out);
// Hands a warm anchor (native/posix/warm.h) its command: `args` as a cold
// anchor's, the command's environment and stdio (as AnchorSpawn's). 0 with
// the host's pipe ends in `host_fds`, or a negative errno (nothing made is
// left open; the caller closes `control_fd` and starts a cold anchor).
int launch_warm(int control_fd, const std::vector<std::string>& args, const std::vector<std::string>& env,
                const int stdio[3], int host_fds[3]);
// Reap the anchor if it has exited: 1 (code, or -1 and the signal), 0 while
// it runs, a negative errno (-ECHILD: reaped by someone else).
int reap_anchor(int64_t pid, int& code, int& signal, bool keep = false);
// Signal the anchor, only while it is an unreaped child of the caller (its pid
// pinned): -ECHILD otherwise, nothing signalled. An exited anchor not yet
// reaped is not signalled (0).
int signal_anchor(int64_t pid, int sig);
// Adoption (native/posix/lease.h): connects to a leased anchor's endpoint,
// writes `line` (ADOPT <token> or INFO) and reads its answer's first line
// with the descriptors it carries (SCM_RIGHTS). The whole request ends
// within `timeout_ms` (-ETIMEDOUT): the connect is non-blocking (a stopped
// anchor whose backlog is full is retried until then, never waited on), and
// an answer line longer than 64 KiB is -EMSGSIZE. `sock`: the connection
// (-1 once closed), `received`: everything read so far (the answer line and
// whatever followed it).
int lease_request(const std::string& path, const std::string& line, int timeout_ms, int& sock,
                  std::string& received, std::vector<int>& fds);

}  // namespace cordon

namespace cordon {

// Windows: the host's own handle on a tree's Job Object (native/win/host.cc).
// The host creates an unnamed job with kill-on-close and no breakaway
// *before* the anchor starts; job_attach duplicates a handle into the
// anchor, which assigns the suspended command to it. Handles cross this
// contract as integers.
int job_create(uint64_t& handle_out);
// Record which anchor fills the job, so list_tree(anchor pid) finds it,
// and duplicate the job into that anchor: `remote_out` is the handle's value
// there (0 when the duplication failed, with a negative errno returned).
int job_attach(uint64_t handle, int64_t anchor_pid, uint64_t& remote_out);
// TerminateJobObject: every member ends now.
int job_terminate(uint64_t handle, uint32_t exit_code);
// Live processes in the job (a count), or a negative errno.
int job_active_count(uint64_t handle);
// Close the host's handle (kill-on-close fires once no other handle is left).
int job_close(uint64_t handle);
// A leased tree's record directory (lib/anchor/lease-dir.ts): CreateDirectory
// with a protected DACL of one ACE, the calling user's (inherited by what is
// made in it). A negative errno (EEXIST: it exists already) on failure.
int make_private_dir(const std::string& path_utf8);
// What a directory's own security says, read through a handle opened on the
// path itself (FILE_FLAG_OPEN_REPARSE_POINT: a junction or link at the last
// component is read as such, never followed); lib/private-dir.ts decides.
// A SID is named "self" (the token's user), "system", "administrators",
// "creator-owner", or else by its string form (S-1-...).
struct DirAce {
  bool allow = false;  // false: a deny ACE (it grants nothing)
  std::string sid;
};
struct DirSecurity {
  bool directory = false;
  bool reparse = false;       // FILE_ATTRIBUTE_REPARSE_POINT (junction, symlink, ...)
  std::string owner;
  bool dacl_present = false;  // false: no DACL at all (everyone has full access)
  std::vector<DirAce> aces;   // every ACE of the DACL, inherit-only ones too
};
int read_dir_security(const std::string& path_utf8, DirSecurity& out);
// A client connection to a named pipe (overlapped; SECURITY_SQOS_PRESENT |
// SECURITY_IDENTIFICATION, so the server may identify this process but never
// impersonate it), nothing written yet: `fd_out`, a descriptor of the host's
// C runtime (libuv's uv_open_osfhandle: Node's, which net.Socket takes), and
// `server_pid_out`, who serves it (GetNamedPipeServerProcessId). A negative
// errno: -ENOENT no such pipe, -EBUSY every instance busy.
int open_pipe_client(const std::string& name_utf8, int& fd_out, uint32_t& server_pid_out);
// The Job Object this process runs in, if any (a service wrapper's, a CI
// agent's): `in_job`; and, when its limits could be read, `limit_flags`
// (JOBOBJECT_BASIC_LIMIT_INFORMATION.LimitFlags of the immediate job) with
// `limits_read` set. A negative errno when even membership cannot be told.
// (A view of the host's own: whether a lease can hold is the leased anchor's
// to say, native/win/lease.h.)
int own_job(bool& in_job, bool& limits_read, uint32_t& limit_flags);
// A warm anchor's stdio (lib/anchor/windows-warm.ts; the anchor's side:
// native/win/warm.h): for each of the command's stdin, stdout and stderr,
// `modes[i]`: kWarmPipe, a pipe (the host's end a descriptor of the host's C
// runtime in `fds_out[i]`, for net.Socket({ fd }); the command's end goes to
// the anchor), kWarmIgnore, the NUL device, or kWarmInherit, the host's own
// descriptor i. Each handle the command gets is duplicated, inheritable, into
// the anchor `anchor_pid` (the host's unexited child: its pid is pinned), its
// value there in `remote_out[i]` (0: none). A negative errno: nothing was
// handed over (the caller closes the descriptors in `fds_out` made so far).
constexpr int kWarmPipe = 0, kWarmIgnore = 1, kWarmInherit = 2;
int warm_stdio(int64_t anchor_pid, const int modes[3], uint64_t remote_out[3], int fds_out[3]);
// What an anchor the host starts now takes from it that could change while
// a warm anchor waits: the token's user, groups (with their attributes),
// privileges (enabled or not), integrity level and session, and the
// priority class; as text, compared whole.
int host_identity(std::string& out);

}  // namespace cordon

namespace cordon {

// In a freshly forked child, before exec: close every descriptor >= `lowest`
// except `keep` (what the host leaked without close-on-exec must not reach
// the command).
void close_fds_from(int lowest, int keep);

}  // namespace cordon
