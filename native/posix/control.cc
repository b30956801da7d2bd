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

// ---- Adoption: the host's side of a leased anchor's endpoint

#include <poll.h>

#include "unix_socket.h"

#include <chrono>
#include <cstring>

namespace cordon {

int lease_request(const std::string& path, const std::string& line, int timeout_ms, int& sock, std::string& received,
                  std::vector<int>& fds) {
  sock = -1;
  sockaddr_un addr;
  int fd = unix_socket_for(path, addr);
  if (fd < 0) return fd;
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  auto fail = [&](int err) {
    for (int f : fds) close(f);
    fds.clear();
    close(fd);
    return -err;
  };
  int rc;
  do {
    rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return fail(errno);
  size_t done = 0;
  while (done < line.size()) {
    ssize_t w = write(fd, line.data() + done, line.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return fail(errno ? errno : EPIPE);
    done += static_cast<size_t>(w);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (received.find('\n') == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return fail(ETIMEDOUT);
    pollfd p{fd, POLLIN, 0};
    rc = poll(&p, 1, static_cast<int>(left));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return fail(errno);
    if (rc == 0) continue;
    char buf[8192];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    iovec iov{buf, sizeof buf};
    msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = recvmsg(fd, &msg, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errno);
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
      if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; i++) {
        int got;
        memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof got);
        fcntl(got, F_SETFD, FD_CLOEXEC);
        fds.push_back(got);
      }
    }
    if (n == 0) break;  // closed: what was read is the whole answer
    received.append(buf, static_cast<size_t>(n));
  }
  sock = fd;
  return 0;
}

}  // namespace cordon
