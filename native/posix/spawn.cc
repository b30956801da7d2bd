// Starting the anchor without forking the host (POSIX).
//
// libuv (child_process) starts a process with fork(): the kernel copies the
// page tables of the whole Node process, which costs milliseconds for a host
// with a big heap. posix_spawn() starts the anchor from a vfork-like clone
// (glibc: CLONE_VM | CLONE_VFORK; macOS: a system call) instead, so the cost
// no longer grows with the host. The anchor is an unreaped
// child of the host, reaped here by pid (its identity is pinned until then).
#include "../cordon.h"
#include "warm.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

namespace cordon {

namespace {

// How long the host may block handing a warm anchor its LAUNCH (it reads
// at once; a stopped one cannot, and then a cold anchor is started).
constexpr int kWarmSendMs = 200;

// Descriptors to close once the spawn is over, whatever its outcome.
struct Closer {
  std::vector<int> fds;
  ~Closer() {
    for (int fd : fds) close(fd);
  }
  int keep(int fd) {
    fds.push_back(fd);
    return fd;
  }
};

int copy_high(int fd, int above, Closer& closer) {
  // A source among the targets could be overwritten by an earlier dup2 of
  // the file actions (or be its own target, whose close-on-exec flag dup2
  // would not clear): hand the anchor a close-on-exec copy above them instead.
  int copy = fcntl(fd, F_DUPFD_CLOEXEC, above + 1);
  if (copy < 0) return -errno;
  return closer.keep(copy);
}

// The command's stdio as the anchor gets it (`sources`): a new pipe (the
// host keeps the other end, in `host_fds`), /dev/null, or a host descriptor.
int open_stdio(const int stdio[3], int sources[3], int host_fds[3], Closer& child_side, Closer& host_side) {
  for (int i = 0; i < 3; i++) {
    host_fds[i] = -1;
    int s = stdio[i];
    if (s == kStdioPipe) {
      int p[2];
#if defined(__linux__)
      if (pipe2(p, O_CLOEXEC) != 0) return -errno;
#else
      // No pipe2 on macOS: the addon runs on the host's JS thread, the only
      // thread Node starts processes from, so no fork slips in between.
      if (pipe(p) != 0) return -errno;
      fcntl(p[0], F_SETFD, FD_CLOEXEC);
      fcntl(p[1], F_SETFD, FD_CLOEXEC);
#endif
      // stdin: the anchor reads; stdout/stderr: the anchor writes.
      int anchor_end = i == 0 ? p[0] : p[1];
      int host_end = i == 0 ? p[1] : p[0];
      child_side.keep(anchor_end);
      host_side.keep(host_end);
      host_fds[i] = host_end;
      sources[i] = anchor_end;
    } else if (s == kStdioNull) {
      int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
      if (fd < 0) return -errno;
      sources[i] = child_side.keep(fd);
    } else if (s >= 0) {
      if (fcntl(s, F_GETFD) < 0) return -errno;  // EBADF: not an open descriptor
      sources[i] = s;
    } else {
      return -EINVAL;
    }
  }
  return 0;
}

}  // namespace

int spawn_anchor(const AnchorSpawn& spec, AnchorProcess& out) {
  Closer child_side;  // the anchor's ends, closed in the host after the spawn
  Closer host_side;   // the host's ends, closed on failure only
  int sources[7];
  const int targets = spec.lease ? 7 : 4;
  int rc0 = open_stdio(spec.stdio, sources, out.host_fds, child_side, host_side);
  if (rc0 < 0) return rc0;
  int control[2];
  int crc = control_pair(control);
  if (crc < 0) return crc;
  child_side.keep(control[1]);
  host_side.keep(control[0]);
  sources[3] = control[1];
  if (spec.lease) {
    // Under a lease the anchor also holds the read ends of the command's
    // stdout and stderr (it drains them while no host is attached) and the
    // log (fds 4, 5, 6: native/posix/lease.h); /dev/null where there is none.
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0) return -errno;
    child_side.keep(devnull);
    sources[4] = out.host_fds[1] >= 0 ? out.host_fds[1] : devnull;
    sources[5] = out.host_fds[2] >= 0 ? out.host_fds[2] : devnull;
    if (spec.lease_log >= 0 && fcntl(spec.lease_log, F_GETFD) < 0) return -errno;
    sources[6] = spec.lease_log >= 0 ? spec.lease_log : devnull;
  }
  for (int i = 0; i < targets; i++) {
    if (sources[i] < targets) {
      int copy = copy_high(sources[i], targets - 1, child_side);
      if (copy < 0) return copy;
      sources[i] = copy;
    }
  }

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  int rc = posix_spawn_file_actions_init(&actions);
  if (rc != 0) return -rc;
  rc = posix_spawnattr_init(&attr);
  if (rc != 0) {
    posix_spawn_file_actions_destroy(&actions);
    return -rc;
  }
  for (int i = 0; i < targets && rc == 0; i++) rc = posix_spawn_file_actions_adddup2(&actions, sources[i], i);
  // Only fds 0-3 reach the anchor: macOS closes the rest here, on Linux the
  // anchor closes them first thing (what glibc offers for it here, like
  // addchdir_np, would raise the glibc version a prebuilt addon needs).
#if defined(__APPLE__)
  short flags = POSIX_SPAWN_CLOEXEC_DEFAULT;
#else
  short flags = 0;
#endif
  // The anchor starts as a process started by a shell would: no signal
  // blocked, every disposition at its default (Node ignores SIGPIPE, and an
  // ignored disposition would otherwise survive exec).
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  flags |= POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (rc == 0) rc = posix_spawnattr_setsigmask(&attr, &none);
  if (rc == 0) rc = posix_spawnattr_setsigdefault(&attr, &all);
  if (rc == 0) rc = posix_spawnattr_setflags(&attr, flags);

  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  pid_t pid = -1;
  if (rc == 0) rc = posix_spawn(&pid, spec.path.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    for (int i = 0; i < 3; i++) out.host_fds[i] = -1;
    return -rc;
  }
  host_side.fds.clear();  // the host's ends now belong to the caller
  out.pid = pid;
  out.control_fd = control[0];
  return 0;
}

int launch_warm(int control_fd, const std::vector<std::string>& args, const std::vector<std::string>& env,
                const int stdio[3], int host_fds[3]) {
  Closer child_side;  // the anchor's ends: passed, then closed here
  Closer host_side;   // the host's ends, closed on failure only
  int sources[3];
  for (int i = 0; i < 3; i++) host_fds[i] = -1;
  int rc = open_stdio(stdio, sources, host_fds, child_side, host_side);
  if (rc == 0) rc = warm::send_launch(control_fd, args, env, sources, warm::current_umask(), kWarmSendMs);
  if (rc < 0) {
    for (int i = 0; i < 3; i++) host_fds[i] = -1;
    return rc;
  }
  host_side.fds.clear();  // the host's ends now belong to the caller
  return 0;
}

int signal_anchor(int64_t pid, int sig) {
  // Only an unreaped child of ours: its pid cannot have been recycled. waitid
  // with WNOWAIT asks without reaping (ECHILD: not our child, or reaped).
  siginfo_t info;
  memset(&info, 0, sizeof info);
  int r;
  do {
    r = waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return -errno;
  if (info.si_pid == static_cast<pid_t>(pid)) return 0;  // exited, not yet reaped: nothing to signal
  if (kill(static_cast<pid_t>(pid), sig) != 0) return -errno;
  return 0;
}

int reap_anchor(int64_t pid, int& code, int& signal, bool keep) {
  if (keep) {
    // Its exit, read without reaping it: it stays a zombie, its pid (and the
    // session and group ids it leads) taken, until reap_anchor() without keep.
    siginfo_t si;
    memset(&si, 0, sizeof si);
    int r;
    do {
      r = waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOHANG | WNOWAIT);
    } while (r < 0 && errno == EINTR);
    if (r < 0) return -errno;
    if (si.si_pid == 0) return 0;
    code = si.si_code == CLD_EXITED ? si.si_status : -1;
    signal = si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED ? si.si_status : 0;
    return 1;
  }
  int status = 0;
  pid_t r;
  do {
    r = waitpid(static_cast<pid_t>(pid), &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return -errno;
  if (r == 0) return 0;
  code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return 1;
}

}  // namespace cordon
