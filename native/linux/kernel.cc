// Linux: what the kernel offers the calling process, and the process's own
// descriptors. probe() says which features this kernel has (cheap: the
// anchor runs it on every start); become_subreaper(); random_bytes() from
// getrandom(2), falling back to /dev/urandom before Linux 3.17; the count of
// open descriptors (leak checks); and close_fds_from(), which closes every
// descriptor at or above a bound but one in a forked child before exec
// (close_range(2), or what /proc/self/fd lists before Linux 5.9).
#include "internal.h"
#include "confine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

namespace cordon {

int probe(Probe& out) {
  out = Probe{};
  int fd = internal::sys_pidfd_open(getpid());
  if (fd >= 0) {
    out.pidfd = internal::sys_pidfd_send_signal(fd, 0) == 0;
    close(fd);
  }
  int current = 0;
  out.subreaper = prctl(PR_GET_CHILD_SUBREAPER, &current, 0, 0, 0) == 0;
  out.proc_scan = access("/proc/self/stat", R_OK) == 0;
  out.page_size = sysconf(_SC_PAGESIZE);
  out.arg_max = sysconf(_SC_ARG_MAX);
  out.landlock_abi = confine::landlock_abi();
  return 0;
}

int watch_exit(int64_t pid) {
  int fd = internal::sys_pidfd_open(pid);  // close-on-exec by the kernel
  return fd >= 0 ? fd : -errno;
}

int become_subreaper() {
  return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 ? 0 : -errno;
}

int random_bytes(void* buf, size_t n) {
  auto* p = static_cast<unsigned char*>(buf);
  size_t got = 0;
  while (got < n) {
    long r = syscall(SYS_getrandom, p + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;  // ENOSYS before Linux 3.17: /dev/urandom
    got += static_cast<size_t>(r);
  }
  if (got == n) return 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  while (got < n) {
    ssize_t r = read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      int err = r < 0 ? errno : EIO;
      close(fd);
      return -err;
    }
    got += static_cast<size_t>(r);
  }
  close(fd);
  return 0;
}

int count_open_fds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -errno;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') n++;
  }
  closedir(d);
  return n - 1;  // the directory stream itself
}

void close_fds_from(int lowest, int keep) {
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
  auto range = [](unsigned from, unsigned to) {
    return from > to || syscall(SYS_close_range, from, to, 0) == 0;
  };
  if (keep < lowest) keep = -1;
  bool ok = keep < 0 ? range(lowest, ~0U)
                     : range(lowest, static_cast<unsigned>(keep) - 1) && range(static_cast<unsigned>(keep) + 1, ~0U);
  if (ok) return;
  // Kernels before 5.9: close what /proc lists, read with getdents64 into a
  // buffer on the stack: this runs in a child that may share the anchor's
  // memory (clone_shared), where nothing may be allocated. Closing while
  // reading is safe: /proc/self/fd lists in descriptor order.
  int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    for (int fd = lowest; fd < 65536; fd++) {
      if (fd != keep) close(fd);
    }
    return;
  }
  alignas(8) char buf[1024];
  for (long n; (n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0;) {
    for (long at = 0; at < n;) {
      const auto* e = reinterpret_cast<const internal::Dirent64*>(buf + at);
      at += e->reclen;
      int fd = atoi(e->name);
      if (e->name[0] != '.' && fd >= lowest && fd != dir && fd != keep) close(fd);
    }
  }
  close(dir);
}

}  // namespace cordon
