// cordon-anchor: the per-tree anchor process (POSIX).
//
// The host spawns this helper (posix_spawn) with the command's stdio on fds
// 0-2 and the control channel on fd 3. The anchor establishes containment *before* it forks and
// execs the command (C1), holds the tree's identity for as long as anything
// may signal it (C2), carries out graceful escalation by itself (C3), reaps
// every orphan (C9) and terminates the tree when the host goes away, even by
// SIGKILL (control channel EOF).
//
// The protocol (its lines, the control channel, the command line, the
// termination schedule) is native/protocol.h, shared with the Windows anchor.
//
// The anchor does not share the host's process group or session (cgroup and
// subreaper tiers: setsid() after the fork, before the command may exec), so a
// signal to the host's group cannot end it with the host.
#include "../cordon.h"
#include "../protocol.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sched.h>
#include <sys/syscall.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

extern char** environ;

namespace {

using cordon::FileId;
using cordon::Member;

namespace protocol = cordon::protocol;
using protocol::trace;

constexpr int kControlFd = 3;
constexpr int kGroupSnapshotMs = 1000;
// A snapshot is a walk of every process on the host (no /proc children list
// here, no other way to find who left the group): past the tree's first
// seconds, while snapshots find nothing outside the tree's group, they back
// off to this, so that many idle trees on
// a host with thousands of processes do not spend its CPU walking /proc
// (200 trees x 4,000 processes took both cores at 1 s each).
constexpr int kGroupSnapshotMaxMs = 8000;
// ...but not in a tree's first seconds, when daemons usually start.
constexpr int kGroupSnapshotSteadyAfterMs = 5000;
// In the grace, how often the process-group tier looks for members forked
// after the group's SIGTERM (a walk of every process).
constexpr int kGroupTermWalkMs = 250;

int g_signal_pipe[2] = {-1, -1};
int64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void on_signal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t ignored = write(g_signal_pipe[1], &b, 1);
  (void)ignored;
  errno = saved;
}

// Signals the anchor must survive: a terminal's Ctrl-C, hangup or stop is for
// the host to decide on, never a reason to lose the tree's identity.
const int kIgnored[] = {SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU};

// In the command's child, before exec: every disposition back to its
// default. Handled signals reset themselves at exec; ignored ones would not.
// The host starts this helper with glibc's posix_spawn, which leaves glibc's
// own internal signals (SIGCANCEL, SIGSETXID: 32 and 33) ignored, and glibc's
// sigaction() refuses to touch those: the raw system call resets them (an
// all-zero kernel sigaction is SIG_DFL, whatever the architecture's layout).
void default_dispositions() {
  for (int sig = 1; sig < NSIG; sig++) signal(sig, SIG_DFL);
#ifdef __linux__
  unsigned char zeros[64] = {};
  for (int sig = 32; sig < 35; sig++) {
    if (syscall(SYS_rt_sigaction, sig, zeros, nullptr, 8) != 0 && errno == EINVAL) {
      syscall(SYS_rt_sigaction, sig, zeros, nullptr, 16);  // a wider sigset_t (MIPS)
    }
  }
#endif
}

using Options = protocol::Options<char>;

[[noreturn]] void usage(const char* why) {
  fprintf(stderr, "cordon-anchor: %s\n", why);
  fprintf(stderr,
          "usage: cordon-anchor [--tier cgroup|subreaper|process-group] [--best-effort] "
          "[--fallback] [--grace MS] [--watch-fd N]... [--cwd DIR] [--trace FILE] -- PATH ARGV0 [ARGS...]\n"
          "It is started by the cordon library with a control channel on fd 3.\n");
  _exit(64);
}

void open_trace(const char* file) {
  FILE* f = fopen(file, "a");
  if (f) fcntl(fileno(f), F_SETFD, FD_CLOEXEC);
  protocol::set_trace(f, static_cast<unsigned long>(getpid()));
}

Options parse(int argc, char** argv) {
  Options o;
  o.tier = "subreaper";
  protocol::parse_options(argc, argv, protocol::kCwdOption | protocol::kFallbackOption, o, usage, open_trace);
  if (o.tier != "cgroup" && o.tier != "subreaper" && o.tier != "process-group") usage("unknown tier");
  return o;
}

class Anchor {
 public:
  explicit Anchor(Options opts) : opts_(std::move(opts)) {}

  int run() {
    if (fcntl(kControlFd, F_GETFD) < 0) usage("no control channel on fd 3");
    fcntl(kControlFd, F_SETFD, FD_CLOEXEC);
    install_signals();
    // Probe first, while fds 1 and 2 are still the host's output pipes: on
    // macOS probe() records the identity of our own sockets for list_tree().
    cordon::Probe probe;
    cordon::probe(probe);
    pidfd_ = probe.pidfd;

    if (!opts_.cwd.empty() && chdir(opts_.cwd.c_str()) != 0) {
      send(protocol::no_cwd(errno));
      return 0;
    }
    if (!contain()) return 0;
    watch_output();
    if (!launch()) {
      remove_cgroup();
      return 0;
    }
    release_stdio();
    if (group_ > 0) send(protocol::group(group_));
    send(protocol::ready(root_, opts_.tier, pidfd_, cg_path_));
    loop();
    release_pin();
    return 0;
  }

 private:
  // C1: containment exists before the command's first instruction.
  bool contain() {
    if (opts_.tier == "cgroup") {
      // The cgroup tier is the subreaper tier plus a cgroup of the tree's own,
      // which the command is born into: the host can still end the tree
      // through it if the anchor dies, and SIGKILL reaches every member at once.
      if (cordon::become_subreaper() == 0) {
#ifdef __linux__
        int rc = cordon::cgroup_create("cordon-" + std::to_string(getpid()), cg_path_, cg_dir_, cg_kill_);
#else
        int rc = -ENOSYS;
#endif
        if (rc == 0) return true;
        trace("cgroup unavailable: %s", strerror(-rc));
        if (!opts_.best_effort && !opts_.fallback) {
          send(protocol::no_contain(-rc, "cgroup"));
          return false;
        }
      }
      // Without a subreaper, that failure is handled (and reported) below.
      opts_.tier = "subreaper";
    }
    if (opts_.tier == "subreaper") {
      int rc = cordon::become_subreaper();
      if (rc == 0) return true;
      trace("subreaper unavailable: %s", strerror(-rc));
      if (!opts_.best_effort) {
        send(protocol::no_contain(-rc, "subreaper"));
        return false;
      }
      opts_.tier = "process-group";
    }
    // process-group tier. The anchor first leaves the host's session (and so
    // its process group and terminal: job control aimed at the host, such as
    // `kill -9 -<host pgid>` or a hang-up, does not reach the anchor; the
    // host's death reaches it as EOF on the control channel). Then the tree
    // gets a process group X of its own that the anchor is NOT in, so that
    // kill(-X, sig) reaches exactly the tree's in-group members, atomically
    // (Linux delivers a group signal to a child being forked too), and
    // kill(-X, 0) failing with ESRCH means no member (not even an unreaped
    // zombie) is left in the group: no /proc walk decides quiescence.
    // X is pinned for the tree's life by a child of the anchor, the pin: it
    // creates X (X = its pid), the command joins X before exec, then the pin
    // leaves X and is killed, and stays an unreaped zombie until QUIET. Its
    // pid, so the id X, cannot be reused meanwhile; nobody can create group X
    // (a new group's id is its creator's pid), and an empty group cannot be
    // joined: once empty, X stays empty.
    if (setsid() < 0) {
      trace("setsid: %s", strerror(errno));
      if (getpgrp() != getpid() && setpgid(0, 0) != 0) trace("setpgid: %s", strerror(errno));
    }
    own_group_ = getpgrp();
    pid_t pin = fork();
    if (pin < 0) {
      send(protocol::no_contain(errno, "process-group"));
      return false;
    }
    if (pin == 0) {
      // The pin: no handler, no fd of interest; it only waits for its SIGKILL.
      sigset_t all;
      sigfillset(&all);
      sigprocmask(SIG_SETMASK, &all, nullptr);
      setpgid(0, 0);
      for (;;) pause();
    }
    pin_ = pin;
    // Also from here (the parent may move a child that has not exec'd), so X
    // exists before the command is forked, whichever runs first.
    if (setpgid(pin, pin) != 0) {
      int err = errno;
      release_pin();
      send(protocol::no_contain(err, "process-group"));
      return false;
    }
    group_ = pin;
    return true;
  }

  // The pin leaves the tree's group and dies; it is reaped only at QUIET.
  // Returns false (errno set) if it could not leave the group.
  bool unpin() {
    if (setpgid(pin_, own_group_) != 0) return false;
    kill(pin_, SIGKILL);  // our unreaped child: its pid is pinned
    // Until it is a zombie, it would show up in a snapshot of our children.
    siginfo_t info;
    while (waitid(P_PID, static_cast<id_t>(pin_), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
    }
    return true;
  }

  // Reaps the pin (a zombie by now, or killed here): the group id is free.
  void release_pin() {
    if (pin_ <= 0) return;
    kill(pin_, SIGKILL);
    int st;
    while (waitpid(pin_, &st, 0) < 0 && errno == EINTR) {
    }
    pin_ = -1;
  }

  // No process (live or zombie) is left in the tree's process group.
  bool group_empty() const {
    return group_ <= 0 || (kill(static_cast<pid_t>(-group_), 0) != 0 && errno == ESRCH);
  }

  // No live process is left in the tree's process group. The kernel's answer
  // (group_empty) also counts zombies, and members orphaned to init stay
  // zombies until init reaps them (seconds, on some systems). So, while
  // terminating: once a walk finds no live member (or the grace is over),
  // the group gets SIGKILL (a no-op for zombies); right after it no member
  // can fork (the group signal reaches a child being forked too), so the walk
  // that follows cannot be outrun by a pid hopper: it is the answer.
  // Outside termination (kept leftovers are never escalated) only the
  // kernel's answer counts.
  bool group_quiet() {
    if (group_empty()) return true;
    if (!term_.active() || !(group_termed_ || group_killed_)) return false;
    // In the grace: members the walk sees keep their grace.
    if (!group_killed_ && cordon::group_live_members(group_) != 0) return false;
    kill_group();
    trace("group %lld: SIGKILL, then a walk decides", static_cast<long long>(group_));
    return group_killed_ && cordon::group_live_members(group_) == 0;
  }

  void kill_group() {
    int rc = kill(static_cast<pid_t>(-group_), SIGKILL);
    if (rc == 0 || errno == ESRCH) group_killed_ = true;
  }

  void watch_output() {
    for (int fd : opts_.watch_fds) {
      struct stat sb;
      if (fstat(fd, &sb) != 0) continue;
      if (!S_ISFIFO(sb.st_mode) && !S_ISSOCK(sb.st_mode)) continue;
      watched_.push_back(FileId{static_cast<uint64_t>(sb.st_dev), static_cast<uint64_t>(sb.st_ino)});
    }
  }

  bool launch() {
    int status_pipe[2];
    if (pipe(status_pipe) != 0) {
      send(protocol::exec_fail(errno));
      return false;
    }
    fcntl(status_pipe[0], F_SETFD, FD_CLOEXEC);
    fcntl(status_pipe[1], F_SETFD, FD_CLOEXEC);
    // The subreaper and cgroup tiers: the command stays in the host's process
    // group and session (as under child_process: the terminal's job control
    // and Ctrl-C reach it as before), while the anchor leaves them, so that a
    // signal to the host's group (`kill -9 -<pgid>`, a hangup) cannot take
    // the tree's identity with it. Hence: fork first, then setsid() here (the
    // anchor is not a group leader: posix_spawn started it in the host's
    // group). The child waits on this barrier until the anchor has left, so
    // the command's first instruction runs only once it has; if the anchor
    // dies before (a signal to the host's group in that short window), the
    // child reads EOF and exits without running anything.
    int barrier[2] = {-1, -1};
    if (reaps_all()) {
      if (pipe(barrier) != 0) {
        int err = errno;
        close(status_pipe[0]);
        close(status_pipe[1]);
        send(protocol::exec_fail(err));
        return false;
      }
      fcntl(barrier[0], F_SETFD, FD_CLOEXEC);
      fcntl(barrier[1], F_SETFD, FD_CLOEXEC);
    }
    // The process-group tier: the command joins the tree's group, then waits
    // on `go` until the pin has left the group, then execs.
    int go[2] = {-1, -1};
    if (group_ > 0) {
      if (pipe(go) != 0) {
        int err = errno;
        close(status_pipe[0]);
        close(status_pipe[1]);
        release_pin();
        send(protocol::exec_fail(err));
        return false;
      }
      fcntl(go[0], F_SETFD, FD_CLOEXEC);
      fcntl(go[1], F_SETFD, FD_CLOEXEC);
    }
    std::vector<char*> argv;
    for (auto& a : opts_.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_t pid;
#ifdef __linux__
    if (cg_dir_ >= 0) {
      int64_t r = cordon::fork_into_cgroup(cg_dir_);
      if (r < 0) {
        trace("clone3 into the cgroup: %s", strerror(static_cast<int>(-r)));
        if (!opts_.best_effort && !opts_.fallback) {
          send(protocol::no_contain(static_cast<int>(-r), "cgroup"));
          return false;
        }
        remove_cgroup();
        opts_.tier = "subreaper";
        r = fork();
        if (r < 0) r = -errno;
      }
      if (r < 0) errno = static_cast<int>(-r);
      pid = r < 0 ? -1 : static_cast<pid_t>(r);
    } else {
      pid = fork();
    }
#else
    pid = fork();
#endif
    if (pid < 0) {
      int err = errno;
      for (int fd : barrier) if (fd >= 0) close(fd);
      if (go[0] >= 0) {
        close(go[0]);
        close(go[1]);
      }
      release_pin();
      send(protocol::exec_fail(err));
      return false;
    }
    if (pid == 0) {
#ifdef __linux__
      // The cgroup tier: born in the tree's cgroup, the command gets a cgroup
      // namespace rooted there (where the anchor may make one: CAP_SYS_ADMIN),
      // so its view of cgroup paths (/proc/self/cgroup, a cgroup2 mount it
      // makes) starts at its own cgroup. This is not a wall: through a cgroup2
      // mount it can already reach, a member with CAP_SYS_ADMIN can still move
      // itself to an ancestor unless that mount has nsdelegate, and it can
      // setns() out (docs/contract.md, "What cordon is not"). Without the
      // capability the command runs without one.
      if (cg_dir_ >= 0) unshare(CLONE_NEWCGROUP);
#endif
      // [stage, errno]: stage 0 = exec, 1 = joining the tree's process group.
      int report[2] = {0, 0};
      if (group_ > 0) {
        close(go[1]);
        if (setpgid(0, static_cast<pid_t>(group_)) != 0) {
          report[0] = 1;
          report[1] = errno;
          ssize_t ignored = write(status_pipe[1], report, sizeof report);
          (void)ignored;
          _exit(127);
        }
        char b;
        ssize_t r;
        do {
          r = read(go[0], &b, 1);
        } while (r < 0 && errno == EINTR);
        if (r != 1) _exit(127);  // the anchor gave up or is gone: nothing of the command runs
        close(go[0]);
      }
      // The command starts with the dispositions and mask a shell would give it.
      default_dispositions();
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      close(kControlFd);
      close(g_signal_pipe[0]);
      close(g_signal_pipe[1]);
      close(status_pipe[0]);
      if (protocol::trace_file()) fclose(protocol::trace_file());
      if (barrier[0] >= 0) {
        close(barrier[1]);
        char byte = 0;
        ssize_t r;
        do {
          r = read(barrier[0], &byte, 1);
        } while (r < 0 && errno == EINTR);
        if (r != 1) _exit(127);  // the anchor is gone: nothing of the command runs
        close(barrier[0]);
      }
      // stdio as a shell would hand it over: blocking. A descriptor the host
      // passed on ('inherit') may be one Node made non-blocking (its own
      // stdout on a pipe), and a command writing to it would get EAGAIN.
      // (child_process clears it the same way, for the same reason.)
      for (int fd = 0; fd <= 2; fd++) {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0 && (fl & O_NONBLOCK)) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
      }
      // Only fds 0-2 reach the command (whatever the host leaked without
      // close-on-exec included); the close-on-exec status pipe stays until exec.
      cordon::close_fds_from(3, status_pipe[1]);
      execve(opts_.path.c_str(), argv.data(), environ);
      report[1] = errno;
      ssize_t ignored = write(status_pipe[1], report, sizeof report);
      (void)ignored;
      _exit(127);
    }
    if (barrier[0] >= 0) {
      close(barrier[0]);
      if (setsid() < 0) trace("setsid: %s", strerror(errno));
      ssize_t w;
      do {
        w = write(barrier[1], "x", 1);
      } while (w < 0 && errno == EINTR);
      close(barrier[1]);
    }
    close(status_pipe[1]);
    if (group_ > 0) {
      close(go[0]);
      // The command is in the group once either side has moved it (it cannot
      // have exec'd: it waits on `go`). Then the pin leaves; if either step
      // fails, the command never runs.
      int err = 0;
      if (setpgid(pid, static_cast<pid_t>(group_)) != 0 && errno != EACCES) err = errno;
      if (err == 0 && !unpin()) err = errno;
      if (err != 0) {
        kill(pid, SIGKILL);  // our unreaped child, still before exec
        close(go[1]);
        close(status_pipe[0]);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        release_pin();
        send(protocol::no_contain(err, "process-group"));
        return false;
      }
      ssize_t w;
      do {
        w = write(go[1], "x", 1);  // go
      } while (w < 0 && errno == EINTR);
      close(go[1]);
    }
    int report[2] = {0, 0};
    ssize_t n;
    do {
      n = read(status_pipe[0], report, sizeof report);
    } while (n < 0 && errno == EINTR);
    close(status_pipe[0]);
    if (n == static_cast<ssize_t>(sizeof report)) {
      int st;
      waitpid(pid, &st, 0);
      release_pin();
      if (report[0] == 1) send(protocol::no_contain(report[1], "process-group"));
      else send(protocol::exec_fail(report[1]));
      return false;
    }
    root_ = pid;
    trace("root %d started (%s tier)", static_cast<int>(pid), opts_.tier.c_str());
    return true;
  }

  // The anchor must never hold the command's pipes: closing them is what
  // lets the host see EOF once the tree's own writers are gone.
  void release_stdio() {
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0) return;
    for (int fd = 0; fd <= 2; fd++) dup2(devnull, fd);
    if (devnull > 2) close(devnull);
  }

  void install_signals() {
    if (pipe(g_signal_pipe) != 0) _exit(71);
    for (int fd : g_signal_pipe) {
      fcntl(fd, F_SETFD, FD_CLOEXEC);
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    for (int sig : kIgnored) signal(sig, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
  }

  void send(const std::string& line) {
    if (host_gone_) return;
    write_all(line.data(), line.size());
  }

  void write_all(const char* p, size_t n) {
    while (n > 0 && !host_gone_) {
      ssize_t w = write(kControlFd, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        host_gone_ = true;
        return;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  }

  // Current members: descendants (and, in the process-group tier, the group
  // and every member a snapshot saw that is still the same live process).
  // A full /proc (libproc) walk: the process-group tier uses it for
  // snapshots and reports only, never to decide quiescence.
  std::vector<Member> members(bool commands = false, bool holds = false) {
    std::vector<Member> out;
    static const std::vector<FileId> kNone;
    cordon::list_tree(getpid(), group_, holds ? watched_ : kNone, out, commands);
    if (opts_.tier == "process-group") {
      std::set<int64_t> have;
      for (auto& m : out) have.insert(m.pid);
      for (auto it = remembered_.begin(); it != remembered_.end();) {
        if (!cordon::same_process_alive(it->second.pid, it->second.start_time)) {
          it = remembered_.erase(it);
          continue;
        }
        if (!have.count(it->first)) {
          out.push_back(it->second);
          out.back().from_snapshot = true;
        }
        ++it;
      }
      for (auto& m : out) {
        if (m.from_snapshot) continue;
        remembered_[m.pid] = m;
        // Seen outside the tree's group (setsid, setpgid): the group signal
        // misses it, only this snapshot knows it. The host reports it.
        if (m.pgid != group_ && reported_outside_.insert({m.pid, m.start_time}).second) {
          std::string cmd = m.command.empty() ? cordon::command_line(m.pid) : m.command;
          send(protocol::left_group(m.pid, cmd));
        }
      }
    }
    return out;
  }

  // The process-group tier: members a snapshot saw that are still that same
  // process (no /proc walk).
  std::vector<Member> remembered_alive() {
    std::vector<Member> out;
    for (auto it = remembered_.begin(); it != remembered_.end();) {
      if (!cordon::same_process_alive(it->second.pid, it->second.start_time)) {
        it = remembered_.erase(it);
        continue;
      }
      out.push_back(it->second);
      out.back().from_snapshot = true;
      ++it;
    }
    return out;
  }

  // Reaps every exited child; returns true when the anchor has no children.
  bool reap() {
    bool root_just_exited = false;
    bool no_children = false;
    for (;;) {
      int st = 0;
      // The process-group tier: the anchor's only children are the root and
      // the pin, whose zombie must stay unreaped until QUIET.
      if (group_ > 0 && root_exited_) break;
      pid_t pid = waitpid(group_ > 0 ? root_ : -1, &st, WNOHANG);
      if (pid == 0) break;
      if (pid < 0) {
        if (errno == EINTR) continue;
        no_children = errno == ECHILD;
        break;
      }
      if (pid == root_ && !root_exited_) {
        root_exited_ = true;
        root_exited_at_ = now_ms();
        root_just_exited = true;
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
        trace("root exited code=%d signal=%d", code, sig);
        send(protocol::exit(code, sig));
      }
    }
    if (group_ > 0) no_children = root_exited_;
    if (root_just_exited) {
      // A subreaper with no children has no descendants at all (every orphan
      // is reparented to it): the common case needs no /proc scan.
      if (!(no_children && reaps_all())) {
        auto list = members(true, true);
        // The process-group tier: one walk can miss a member that forks and
        // exits faster than the walk reads it (a pid hopper); the kernel says
        // whether the group still has one. A few more walks, bounded.
        for (int64_t until = now_ms() + 200; group_ > 0 && now_ms() < until && !group_empty();) {
          bool listed = false;
          for (auto& m : list) listed = listed || m.pgid == group_;
          if (listed) break;
          usleep(5000);
          list = members(true, true);
        }
        for (auto& m : list) {
          if (m.command.empty()) m.command = cordon::command_line(m.pid);  // known from a snapshot
          send(protocol::left(m.pid, m.holds_output, m.command));
        }
      }
      send(protocol::left_end());
    }
    return no_children;
  }

  bool tree_empty(bool no_children) {
    if (!no_children) return false;
    if (reaps_all()) return true;  // every descendant is ours to reap
    if (group_ > 0) {
      // Exact for the group (the kernel's count, zombies included); members
      // seen leaving it are checked by identity. Members that left unseen
      // are this tier's documented limit (the result says: partial).
      return group_quiet() && remembered_alive().empty();
    }
    return members().empty();
  }

  void start_terminate(int grace_ms) { term_.start(grace_ms, now_ms()); }

  void step_terminate() {
    int64_t t = now_ms();
    if (term_.force_due(t)) trace("grace over: SIGKILL");
    if (group_ > 0) {
      step_terminate_group(t);
      return;
    }
    if (term_.forcing() && cg_kill_ >= 0) {
      // SIGKILL to every process of the cgroup at once, new forks included.
      ssize_t w = write(cg_kill_, "1", 1);
      trace("cgroup.kill: %zd", w);
    }
    auto list = members();
    // Verify the whole round before signalling any of it: where orphans go to
    // init (process-group tier), signalling a parent first would take its
    // children out of the ancestry that proves they are ours. Verified
    // members are then checked by identity (start time, pinned by a pidfd
    // where there is one) when they are signalled, root first.
    for (auto& m : list) {
      if (!m.from_snapshot && cordon::is_member(getpid(), group_, m)) m.from_snapshot = true;
    }
    for (auto& m : list) {
      if (m.from_snapshot) signal_one(m);  // else no longer ours: never signalled
    }
    if (term_.stuck_due(t) && !list.empty()) {
      term_.stuck_reported();
      send(protocol::stuck(list));
    }
  }

  // One verified member: the forced kill once forcing, else the polite
  // signal (and SIGCONT) once per process; a failed TERM is retried next round.
  void signal_one(const Member& m) {
    if (term_.forcing()) {
      int rc = cordon::signal_member(getpid(), group_, m, SIGKILL, pidfd_);
      trace("SIGKILL %lld: %d", static_cast<long long>(m.pid), rc);
      return;
    }
    auto key = std::make_pair(m.pid, m.start_time);
    if (termed_.count(key)) return;
    int rc = cordon::signal_member(getpid(), group_, m, SIGTERM, pidfd_);
    if (rc == 0) termed_.insert(key);
    cordon::signal_member(getpid(), group_, m, SIGCONT, pidfd_);
    trace("SIGTERM %lld: %d", static_cast<long long>(m.pid), rc);
  }

  // The process-group tier: the group signal reaches every in-group member
  // at once (and, on Linux, a child being forked meanwhile); members seen
  // leaving the group are signalled one by one after identity checks.
  void step_terminate_group(int64_t t) {
    // Which known members are outside the group, checked before the group
    // signal, so an in-group member gets the polite signal once.
    auto outside_now = [&]() {
      std::vector<Member> out;
      for (auto& m : remembered_alive()) {
        int64_t pgid = cordon::current_pgid(m.pid, m.start_time);
        if (pgid >= 0 && (pgid != group_ || term_.forcing())) out.push_back(m);
      }
      return out;
    };
    // Once, before the group signal: refresh the snapshot, so that members
    // that left the group while still parented are known. (After it, their
    // parents would be dead and they orphaned: out of sight.)
    if (!group_termed_ && !term_.forcing()) {
      // The in-group members this walk saw get the group signal below: they
      // count as signalled. (One forked while the walk ran gets the group
      // signal too but may be signalled once more below: the walk is not atomic.)
      for (auto& m : members()) {
        if (m.pgid == group_) group_signalled_.insert({m.pid, m.start_time});
      }
      last_term_walk_ = t;
    } else if (group_termed_ && !term_.forcing() && t - last_term_walk_ >= kGroupTermWalkMs) {
      // In the grace: a member forked after the group signal (a shell that
      // forks while its TERM trap is pending) gets the polite signal too, as
      // in the other tiers, rather than only the forced kill at the end.
      last_term_walk_ = t;
      for (auto& m : members()) {
        if (m.from_snapshot || m.pgid != group_) continue;  // outside: handled below
        auto key = std::make_pair(m.pid, m.start_time);
        if (group_signalled_.count(key)) continue;
        int rc = cordon::signal_member(getpid(), group_, m, SIGTERM, pidfd_);
        if (rc == 0) group_signalled_.insert(key);
        cordon::signal_member(getpid(), group_, m, SIGCONT, pidfd_);
        trace("SIGTERM %lld (forked after the group signal): %d", static_cast<long long>(m.pid), rc);
      }
    }
    std::vector<Member> outside = outside_now();
    if (term_.forcing()) {
      kill_group();
    } else if (!group_termed_) {
      group_termed_ = true;
      int rc = kill(static_cast<pid_t>(-group_), SIGTERM) == 0 ? 0 : -errno;
      kill(static_cast<pid_t>(-group_), SIGCONT);
      trace("SIGTERM group %lld: %d", static_cast<long long>(group_), rc);
    }
    for (auto& m : outside) signal_one(m);
    if (term_.stuck_due(t) && (cordon::group_live_members(group_) != 0 || !outside.empty())) {
      term_.stuck_reported();
      send(protocol::stuck(members()));
    }
  }

  void check_released() {
    if (released_sent_ || !root_exited_) return;
    bool held = false;
    if (!watched_.empty()) {
      for (auto& m : members(false, true)) {
        if (m.holds_output) {
          held = true;
          break;
        }
      }
    }
    if (!held) {
      released_sent_ = true;
      send(protocol::released());
    }
  }

  void handle_control() {
    char buf[65536];
    ssize_t n = read(kControlFd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      // The host is gone (exit, crash, SIGKILL): carry out the teardown alone.
      trace("control channel closed: terminating tree");
      host_gone_ = true;
      control_open_ = false;
      start_terminate(opts_.grace_ms);
      return;
    }
    std::vector<std::string> lines;
    control_.feed(buf, static_cast<size_t>(n), lines);
    for (auto& line : lines) {
      auto c = protocol::parse_command(line, opts_.grace_ms, false);
      if (c.verb == protocol::Verb::kTerm || c.verb == protocol::Verb::kKill) start_terminate(c.grace_ms);
    }
  }

  void loop() {
    int64_t last_snapshot = 0;
    for (;;) {
      bool no_children = reap();
      if (root_exited_ && tree_empty(no_children)) {
        trace("quiescent");
        remove_cgroup();
        release_pin();  // group X is empty for good: its id may go now
        send(protocol::quiet());
        return;
      }
      if (term_.active()) step_terminate();
      check_released();
      int timeout = -1;
      if (term_.active()) {
        // SIGCHLD wakes the loop at once; the timeout only paces re-scans for
        // members forked meanwhile, and meets the grace deadline exactly.
        timeout = term_.wait_ms(now_ms(), 10, 100);
      } else if (root_exited_ && !released_sent_) {
        // Who holds the pipes is a walk of every process in the process-group
        // tier: prompt at first, then slower, for kept leftovers that hold on.
        timeout = group_ > 0 && now_ms() - root_exited_at_ > 2000 ? 500 : 50;
      } else if (opts_.tier == "process-group") {
        timeout = snapshot_every_;
      } else if (root_exited_) {
        // Orphans of a kept tree are reparented to us and reaped on SIGCHLD;
        // a slow poll covers grandchildren whose parents reap them.
        timeout = 1000;
      }
      if (opts_.tier == "process-group" && !term_.active() && now_ms() - last_snapshot >= snapshot_every_) {
        // Refresh the snapshot so setsid'd members stay known: every second
        // while the tree has members outside its group, backing off while not.
        bool outside = false;
        for (auto& m : members()) outside = outside || m.pgid != group_;
        bool young = now_ms() - started_at_ < kGroupSnapshotSteadyAfterMs;
        snapshot_every_ = outside || young ? kGroupSnapshotMs : std::min(snapshot_every_ * 2, kGroupSnapshotMaxMs);
        last_snapshot = now_ms();
      }
      pollfd fds[2];
      int nfds = 0;
      fds[nfds++] = pollfd{g_signal_pipe[0], POLLIN, 0};
      if (control_open_) fds[nfds++] = pollfd{kControlFd, POLLIN, 0};
      int rc = poll(fds, static_cast<nfds_t>(nfds), timeout);
      if (rc < 0 && errno != EINTR) {
        trace("poll: %s", strerror(errno));
        return;
      }
      if (rc <= 0) continue;
      if (fds[0].revents & POLLIN) {
        unsigned char sigs[64];
        ssize_t k;
        while ((k = read(g_signal_pipe[0], sigs, sizeof sigs)) > 0) {
          for (ssize_t i = 0; i < k; i++) {
            if (sigs[i] == SIGTERM) start_terminate(opts_.grace_ms);
          }
        }
      }
      if (nfds > 1 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) handle_control();
    }
  }

  // Whether every descendant is reparented to the anchor (and so is its child
  // to reap): the subreaper and cgroup tiers.
  bool reaps_all() const { return opts_.tier == "subreaper" || opts_.tier == "cgroup"; }

  // The cgroup tier: the tree's cgroup goes once it is empty.
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

  Options opts_;
  std::string cg_path_;  // the cgroup tier: the tree's cgroup
  int cg_dir_ = -1;
  int cg_kill_ = -1;
  pid_t root_ = -1;
  int64_t group_ = 0;      // the process-group tier: the tree's group (the pin's pid)
  int64_t own_group_ = 0;  // the anchor's own group, which the pin moves to
  pid_t pin_ = -1;         // the process-group tier: pins group_'s id until QUIET
  bool group_termed_ = false;
  bool group_killed_ = false;  // the group has had a SIGKILL
  std::set<std::pair<int64_t, uint64_t>> reported_outside_;
  bool pidfd_ = false;
  bool root_exited_ = false;
  protocol::Termination term_;
  bool released_sent_ = false;
  bool host_gone_ = false;
  bool control_open_ = true;
  int64_t root_exited_at_ = 0;
  std::vector<FileId> watched_;
  std::set<std::pair<int64_t, uint64_t>> termed_;
  // The process-group tier: in-group members known to have had the polite
  // signal (the group's, or their own if forked after it). Apart from termed_,
  // which is for members outside the group: one that leaves the group between
  // the walk and the group signal must still get its own.
  std::set<std::pair<int64_t, uint64_t>> group_signalled_;
  std::map<int64_t, Member> remembered_;
  int snapshot_every_ = kGroupSnapshotMs;  // the process-group tier's snapshot interval
  int64_t started_at_ = now_ms();
  int64_t last_term_walk_ = 0;
  protocol::LineReader control_{false};
};

}  // namespace

int main(int argc, char** argv) {
  // Only fds 0-3 are the anchor's: whatever the host leaked without
  // close-on-exec must not be held for the life of the tree.
  cordon::close_fds_from(4, -1);
  Options opts = parse(argc, argv);
  Anchor anchor(std::move(opts));
  return anchor.run();
}
