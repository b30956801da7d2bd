// The command's side of the anchor's fork: see command_child.h.
#include "command_child.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/syscall.h>
#endif

#include "../cordon.h"  // CORDON_LINUX_PROC
#include "../protocol.h"

extern char** environ;

namespace cordon {
namespace anchor {

namespace {

[[noreturn]] void fail(int status_fd, int stage, int err) {
  int report[2] = {stage, err};
  ssize_t ignored = write(status_fd, report, sizeof report);
  (void)ignored;
  _exit(127);
}

// Every disposition back to its default. Handled signals reset themselves
// at exec; ignored ones would not. The host starts the anchor with glibc's
// posix_spawn, which leaves glibc's own internal signals (SIGCANCEL,
// SIGSETXID: 32 and 33) ignored, and glibc's sigaction() refuses to touch
// those: the raw system call resets them (an all-zero kernel sigaction is
// SIG_DFL, whatever the architecture's layout).
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

void child_main(void* child) { exec_command(*static_cast<const CommandChild*>(child)); }

}  // namespace

void exec_command(const CommandChild& c) {
  int err = c.tier->child_enter();
  if (err != 0) fail(c.status_fd, kStageTier, err);
  if (c.pty) {
    err = c.pty->child_enter(!c.tier->anchor_leads_session());
    if (err != 0) fail(c.status_fd, kStageTerminal, err);
  }
  // The command starts with the dispositions and mask a shell would give it.
  default_dispositions();
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // (The trace file, if any, is close-on-exec and flushed after every line:
  // nothing of it is written or freed here, as the anchor's memory may be shared.)
  for (int fd : c.close) close(fd);
  c.tier->child_before_exec();
  // --new-session, where the tier does not hold the tree in a group of its
  // own (the process-group tier's group is its containment: never left).
  if (c.new_session && c.tier->group() == 0 && setsid() < 0) fail(c.status_fd, kStageTier, errno);
  // --confine, after every step that needs what it takes away (the tier's,
  // the terminal's) and before the privilege drop (a network namespace needs
  // the anchor's privilege), on what the anchor prepared.
  // Linux: the tree's network namespace and Landlock domain, plain system
  // calls only, nothing allocated (this child may share the anchor's memory:
  // native/linux/clone.cc).
  // macOS: sandbox_init() with the Seatbelt profile, which allocates (libsandbox
  // compiles the profile). That is safe here because this child is a plain
  // fork() (Tier::fork: on macOS every tier forks) of an anchor that is
  // single-threaded (it starts no thread: one poll loop, native/posix/anchor.cc),
  // so no other thread can have held the allocator's lock at the fork.
  if (c.confine) {
    err = confine::enter(*c.confine);
    if (err != 0) fail(c.status_fd, kStageConfine, err);
  }
  // stdio as a shell would hand it over: blocking. A descriptor the host
  // passed on ('inherit') may be one Node made non-blocking (its own stdout
  // on a pipe), and a command writing to it would get EAGAIN.
  // (child_process clears it the same way, for the same reason.)
  for (int fd = 0; fd <= 2; fd++) {
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && (fl & O_NONBLOCK)) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  }
  // Only fds 0-2 reach the command (whatever the host leaked without
  // close-on-exec included); the close-on-exec status pipe stays until exec.
  cordon::close_fds_from(3, c.status_fd);
  // --uid/--gid: the command runs as them, the anchor stays what it is (it
  // must still signal and reap every member). Supplementary groups are
  // dropped first (as libuv does; an unprivileged anchor cannot, and then
  // only fails below if it asked for another id).
  if (c.uid >= 0 || c.gid >= 0) {
    int drop_err = 0;
    if (setgroups(0, nullptr) != 0) errno = 0;
    if (c.gid >= 0 && setgid(static_cast<gid_t>(c.gid)) != 0) drop_err = errno;
    if (drop_err == 0 && c.uid >= 0 && setuid(static_cast<uid_t>(c.uid)) != 0) drop_err = errno;
    if (drop_err != 0) fail(c.status_fd, kStageSetuid, drop_err);
  }
  execve(c.path, c.argv, environ);
  fail(c.status_fd, kStageExec, errno);
}

// The parent's side: see command_child.h.
pid_t start_command(CommandChild child, std::string& failure) {
  int status_pipe[2];
  if (pipe(status_pipe) != 0) {
    failure = protocol::exec_fail(errno);
    return 0;
  }
  fcntl(status_pipe[0], F_SETFD, FD_CLOEXEC);
  fcntl(status_pipe[1], F_SETFD, FD_CLOEXEC);
  child.status_fd = status_pipe[1];
  child.close.push_back(status_pipe[0]);
  Tier& tier = *child.tier;
  int rc = tier.before_fork();
  if (rc != 0) {
    close(status_pipe[0]);
    close(status_pipe[1]);
    failure = protocol::exec_fail(-rc);
    return 0;
  }
  const char* what = nullptr;
  // Every signal blocked in the child until its dispositions are the
  // defaults (exec_command): a handler of the anchor's must not run there,
  // least of all in a child that shares the anchor's memory.
  sigset_t all, before;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &before);
  SharedChild shared;
  int64_t forked = tier.fork(what, ChildStart{child_main, &child, &shared});
  sigprocmask(SIG_SETMASK, &before, nullptr);
  // A shared child's stack, unmapped once it has exec'd or exited.
  struct Unmap {
    SharedChild& s;
    ~Unmap() {
      if (s.stack) munmap(s.stack, s.stack_size);
    }
  } unmap{shared};
  if (forked < 0 && what) {
    failure = protocol::no_contain(static_cast<int>(-forked), what);
    return 0;
  }
  if (forked < 0) {
    tier.abandon_launch();
    failure = protocol::exec_fail(static_cast<int>(-forked));
    return 0;
  }
  pid_t pid = static_cast<pid_t>(forked);
  close(status_pipe[1]);
  rc = tier.after_fork(pid, what);
  if (rc != 0) {
    close(status_pipe[0]);
    failure = protocol::no_contain(-rc, what);
    return 0;
  }
  int report[2] = {0, 0};
  ssize_t n;
  do {
    n = read(status_pipe[0], report, sizeof report);
  } while (n < 0 && errno == EINTR);
  close(status_pipe[0]);
  if (n != static_cast<ssize_t>(sizeof report)) return pid;
  int st;
  waitpid(pid, &st, 0);
  tier.abandon_launch();
  if (report[0] == kStageTier) failure = protocol::no_contain(report[1], tier.name());
  else if (report[0] == kStageSetuid) failure = protocol::no_contain(report[1], "setuid");
  else if (report[0] == kStageTerminal) failure = protocol::no_contain(report[1], "pty");
  else if (report[0] == kStageConfine) failure = protocol::no_contain(report[1], "confine");
  else failure = protocol::exec_fail(report[1]);
  return 0;
}

}  // namespace anchor
}  // namespace cordon
