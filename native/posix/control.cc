// The host <-> anchor control channel: a close-on-exec socket pair, so no
// other child of the host (nor the command itself) ever holds a copy.
#include "../cordon.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace cordon {

int control_pair(int fds[2]) {
#ifdef SOCK_CLOEXEC
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0) return 0;
  if (errno != EINVAL && errno != EPROTONOSUPPORT) return -errno;
#endif
  // macOS has no SOCK_CLOEXEC: the addon runs on the host's JS thread, and
  // Node only forks from that thread, so no fork can slip between the calls.
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return -errno;
  for (int i = 0; i < 2; i++) {
    if (fcntl(fds[i], F_SETFD, FD_CLOEXEC) != 0) {
      int err = errno;
      close(fds[0]);
      close(fds[1]);
      return -err;
    }
  }
  return 0;
}

}  // namespace cordon
