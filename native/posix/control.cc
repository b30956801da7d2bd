// The host <-> anchor control channel: a close-on-exec socket pair, so no
// other child of the host (nor the command itself) ever holds a copy.
#include "../cordon.h"
#include "unix_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace cordon {

namespace {

int make_pair(int fds[2]) {
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

}  // namespace

int control_pair(int fds[2]) {
  int rc = make_pair(fds);
  if (rc != 0) return rc;
  widen_socket_buffers(fds[0]);
  widen_socket_buffers(fds[1]);
  return 0;
}

}  // namespace cordon

// ---- Adoption: the host's side of a leased anchor's endpoint

#include <poll.h>

#include "unix_socket.h"

#include <chrono>
#include <cstring>

namespace cordon {

namespace {

// The most an answer's first line may take (ADOPTED carries a log path at
// most PATH_MAX long): a peer that sends more without a newline is not an
// anchor.
constexpr size_t kMaxAnswer = 64 * 1024;

using Clock = std::chrono::steady_clock;

// Milliseconds left until `deadline` (0 when it has passed).
int left_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// Waits for `events` on `fd` until `deadline`: 0 when they came, -ETIMEDOUT,
// or a negative errno.
int wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    int ms = left_ms(deadline);
    if (ms == 0) return -ETIMEDOUT;
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return -errno;
    if (rc > 0) return 0;
  }
}

// A non-blocking connect that ends by `deadline`. A Unix socket's connect
// completes at once or fails at once: a listener whose backlog is full (its
// process stopped, or not accepting) gives EAGAIN on Linux, so it is tried
// again every 20 ms until the deadline (ETIMEDOUT); a blocking connect would
// wait there for as long as the listener does not accept. EINPROGRESS (other
// systems) is waited for with poll.
int connect_by(int fd, const sockaddr_un& addr, Clock::time_point deadline) {
  for (;;) {
    int rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    if (rc == 0) return 0;
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN) {
      int ms = left_ms(deadline);
      if (ms == 0) return -ETIMEDOUT;
      poll(nullptr, 0, ms < 20 ? ms : 20);
      continue;
    }
    if (err != EINPROGRESS) return -err;
    rc = wait_for(fd, POLLOUT, deadline);
    if (rc < 0) return rc;
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) return -errno;
    return soerr == 0 ? 0 : -soerr;
  }
}

}  // namespace

int lease_request(const std::string& path, const std::string& line, int timeout_ms, int& sock, std::string& received,
                  std::vector<int>& fds) {
  sock = -1;
  // One deadline for the whole request: connecting, writing the line, and
  // reading the answer's first line. Nothing here blocks past it, whatever
  // the anchor does (stopped, its backlog full, silent, or flooding).
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 0);
  sockaddr_un addr;
  int fd = unix_socket_for(path, addr);
  if (fd < 0) return fd;
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  auto fail = [&](int err) {
    for (int f : fds) close(f);
    fds.clear();
    close(fd);
    return err < 0 ? err : -err;
  };
  int rc = connect_by(fd, addr, deadline);
  if (rc < 0) return fail(rc);
  size_t done = 0;
  while (done < line.size()) {
    ssize_t w = write(fd, line.data() + done, line.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      rc = wait_for(fd, POLLOUT, deadline);
      if (rc < 0) return fail(rc);
      continue;
    }
    if (w <= 0) return fail(errno ? errno : EPIPE);
    done += static_cast<size_t>(w);
  }
  while (received.find('\n') == std::string::npos) {
    if (received.size() > kMaxAnswer) return fail(EMSGSIZE);
    rc = wait_for(fd, POLLIN, deadline);
    if (rc < 0) return fail(rc);
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
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
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
  // The connection goes to the caller as it was before the request (an
  // adopter's control channel: libuv sets its own flags).
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  sock = fd;
  return 0;
}

}  // namespace cordon
