// What the model's anchor (only) gets of XNU besides the shim's calls, by
// ld --wrap=fstat,--wrap=kill (test/xnu-model/build.mjs):
//   - fstat() of a pipe says st_dev 0 and of a socket NODEV, as XNU's
//     pipe_stat() and soo_stat() do (the watched output's identities);
//   - kill() of a process group in which no live process is left but
//     zombies answers EPERM, as XNU's killpg1() does (kern_sig.c:1703-1712:
//     zombies are skipped, and "found" only counts a process signalled).
//     The model reads the group in /proc before the signal.
// Test code: nothing of it ships.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace {

// 1: a live (not zombie) process is in `group`; 0: only zombies; -1: none.
int group_state(pid_t group) {
  int state = -1;
  DIR* d = opendir("/proc");
  if (!d) return 1;  // (unknown: let the kernel answer)
  while (struct dirent* e = readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    char* close_paren = strrchr(buf, ')');
    char st = 0;
    int ppid = 0, pgrp = 0;
    if (!close_paren || sscanf(close_paren + 2, "%c %d %d", &st, &ppid, &pgrp) != 3 || pgrp != group) continue;
    if (st != 'Z' && st != 'X') {
      state = 1;
      break;
    }
    state = 0;
  }
  closedir(d);
  return state;
}

}  // namespace

extern "C" {
// ---- the anchor's wraps (ld --wrap=fstat --wrap=kill) -----------------------

int __real_fstat(int fd, struct stat* sb);
int __wrap_fstat(int fd, struct stat* sb) {
  int rc = __real_fstat(fd, sb);
  if (rc == 0 && S_ISFIFO(sb->st_mode)) {
    // pipe_stat(): st_dev 0 for a pipe (a named FIFO is a vnode: its own dev).
    char link[64];
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n > 5 && strncmp(link, "pipe:", 5) == 0) sb->st_dev = 0;
  } else if (rc == 0 && S_ISSOCK(sb->st_mode)) {
    sb->st_dev = static_cast<dev_t>(-1);  // soo_stat(): NODEV
  }
  return rc;
}

int __real_kill(pid_t pid, int sig);
int __wrap_kill(pid_t pid, int sig) {
  if (pid >= -1) return __real_kill(pid, sig);
  // Read before the signal (one that ends a member must not make it look as
  // if none was found). The signal goes out either way: a member the scan
  // missed (one forking faster than it reads) is one XNU would have found,
  // since a forking parent stays listed until its child is.
  int state = group_state(-pid);
  int rc = __real_kill(pid, sig);
  if (rc == 0 && state == 0) {
    errno = EPERM;
    return -1;
  }
  return rc;
}
}  // extern "C"
